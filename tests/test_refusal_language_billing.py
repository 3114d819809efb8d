"""The billing floor's refusals speak the person's language: a payment, a draft's lines, a
customer's email, a currency and a deletion are refused in German or French (`Accept-Language`)
with their values filled in, each field's own message too, while the same request in English
reads as it always did."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import days_ahead
from tests.test_payments import TODAY, northwind

pytestmark = pytest.mark.anyio


def payment(**changes: Any) -> dict[str, Any]:
    return {"request_id": str(uuid.uuid4()), "amount": "100.00", "date": TODAY,
            "method": "bank_transfer", **changes}


def draft(**changes: Any) -> dict[str, Any]:
    return {"customer": "Kunde GmbH", "currency": "EUR", "due_date": days_ahead(30),
            "line_items": [{"description": "Beratung", "quantity": "1", "unit_price": "10",
                            "tax_rate": "19"}], **changes}


async def said(client: Any, language: str, path: str, body: dict[str, Any]
               ) -> dict[str, Any]:
    reply = await client.post(path, json=body, headers={"Accept-Language": language})
    assert reply.status_code in (409, 422), reply.text
    return reply.json()


async def test_a_payments_refusals_speak_the_persons_language(studio) -> None:
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    path = f"/invoices/{invoice_id}/payments"
    # A field named in words: the word is the language's too.
    body = payment(reference={"x": 1})
    assert (await said(client, "en", path, body))["message"] == "The reference must be text."
    assert (await said(client, "de", path, body))["message"] == \
        "Das Feld „Referenz“ muss Text sein."
    assert (await said(client, "fr", path, body))["fields"]["reference"] == \
        "Le champ « référence » doit être du texte."
    # Past what is due: the amount left filled in, said in the transaction that found it.
    body = payment(amount="2700.01")
    assert (await said(client, "en", path, body))["message"] == (
        "At most EUR 2700.00 is left to pay on this invoice; record that amount or less.")
    german = await said(client, "de-DE,de;q=0.9", path, body)
    assert german["detail"] == "payment_exceeds_balance"
    assert german["message"] == ("Auf diese Rechnung sind höchstens noch EUR 2700.00 zu zahlen;"
                                 " erfassen Sie diesen Betrag oder weniger.")
    assert german["fields"] == {"amount": german["message"]}


async def test_a_drafts_lines_and_currency_are_refused_in_the_persons_language(studio) -> None:
    client = await studio.signed_in()
    lines = [{"description": "Beratung", "quantity": "1", "unit_price": "10",
              "tax_rate": "150"}]
    english = await said(client, "en", "/invoices", draft(line_items=lines))
    assert english["message"] == \
        "Line 1: the tax rate must be a percent from 0 to 100, like 19 or 7.5."
    german = await said(client, "de", "/invoices", draft(line_items=lines))
    assert german["message"] == \
        "Zeile 1: Der Steuersatz muss ein Prozentsatz von 0 bis 100 sein, etwa 19 oder 7,5."
    assert german["fields"] == {"tax_rate.1": german["message"]}
    french = await said(client, "fr", "/invoices", draft(line_items=lines))
    assert french["message"] == ("Ligne 1 : le taux de taxe doit être un pourcentage de 0 à"
                                 " 100, comme 19 ou 7,5.")
    assert (await said(client, "en", "/invoices", draft(currency="DEM")))["message"] == (
        "DEM is not a currency in use today; choose a current ISO 4217 code such as EUR or"
        " USD.")
    assert (await said(client, "de", "/invoices", draft(currency="DEM")))["message"] == (
        "DEM ist keine heute gebräuchliche Währung; wählen Sie einen aktuellen ISO-4217-Code"
        " wie EUR oder USD.")
    assert (await said(client, "fr", "/invoices", draft(due_date="31.12.2026")))["message"] \
        == "Le champ « date d'échéance » doit être une date comme 2026-12-31."


async def test_a_customers_email_and_deletion_are_refused_in_the_persons_language(
        studio) -> None:
    client = await studio.signed_in()
    body = {"name": "Heron Press", "email": "books@heron"}
    assert (await said(client, "en", "/customers", body))["message"] == (
        "The email cannot be sent to: heron, after the @, is not a name a mail server can be"
        " found by. Check it for a typo, or ask for another address.")
    assert (await said(client, "de", "/customers", body))["fields"]["email"] == (
        "Das Feld „E-Mail“ kann keine E-Mail empfangen: heron nach dem @ ist kein Name, unter"
        " dem sich ein Mailserver finden lässt. Prüfen Sie ihn auf Tippfehler, oder fragen Sie"
        " nach einer anderen Adresse.")
    assert (await said(client, "fr", "/customers", {"name": "Heron", "email": "a..b@x.fr"})
            )["message"] == ("Le champ « e-mail » ne peut avoir, avant le @, ni point au début"
                             " ou à la fin, ni deux points à la suite.")
    made = await client.post("/customers", json={"name": "Heron Press", "country": "DE"})
    customer_id = made.json()["id"]
    named = await client.post("/invoices", json=draft(customer_id=customer_id))
    assert named.status_code == 201, named.text
    refused = await client.delete(f"/customers/{customer_id}",
                                  headers={"Accept-Language": "fr"})
    assert (refused.status_code, refused.json()["detail"]) == (409, "customer_in_use")
    assert refused.json()["message"] == (
        "Un brouillon désigne ce client, il ne peut donc pas être supprimé : supprimez d'abord"
        " le brouillon, ou choisissez-y un autre client.")

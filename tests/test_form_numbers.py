"""Numbers as people write them: a form takes `1.200,50` from a German and `1,200.50` from an
English speaker, JSON keeps one machine format, and a refused form names every field at once,
each under its own name, so the page shows each message beside its field."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from studio.errors import Refusal
from studio.mail import outbox
from studio.web.numbers import as_machine_number
from tests.conftest import days_ahead, rows
from tests.test_payments import TODAY, balance_of, northwind, payments_of

pytestmark = pytest.mark.anyio
GERMAN = {"HX-Request": "true", "Accept": "text/html", "Accept-Language": "de-DE,de;q=0.9"}
FRENCH = {**GERMAN, "Accept-Language": "fr"}
NNBSP, NBSP = "\u202f", "\u00a0"


@pytest.mark.parametrize(("written", "language", "machine"), [
    ("35,00", "de", "35.00"), ("1.200,50", "de", "1200.50"), ("1 200,50", "de", "1200.50"),
    (f"1{NBSP}200,50", "de", "1200.50"), ("1.200", "de", "1200"), ("1.200.000", "de", "1200000"),
    ("35.00", "de", "35.00"), ("1234.567", "de", "1234.567"), ("-0,25", "de", "-0.25"),
    ("\u22120,25", "de", "-0.25"), ("7,5", "de", "7.5"), ("", "de", ""),
    ("0.500", "de", "0.500"), ("0,500", "en", "0.500"),  # a lone 0 is no group of thousands
    (f"1{NNBSP}200,50", "fr", "1200.50"), ("1 200,50", "fr", "1200.50"), ("35,00", "fr", "35.00"),
    ("1.200,50", "es", "1200.50"), ("1.200,50", "it", "1200.50"), ("1.200,50", "nl", "1200.50"),
    ("1,200.50", "en", "1200.50"), ("1,200", "en", "1200"), ("1200.50", "en", "1200.50"),
    ("35,00", "en", "35.00"), ("0.000001", "en", "0.000001"),
])
def test_a_number_reads_as_its_language_writes_it(written: str, language: str, machine: str
                                                  ) -> None:
    assert as_machine_number(written, language) == machine


@pytest.mark.parametrize("written", ["abc", "1.2.3", "1,2,3", "12,", "1e5", "1..2", "1.23,5",
                                     "1 2", "1G200", "--1", "\u0661\u0662", "3 EUR"])
def test_what_is_no_number_in_the_language_is_refused(written: str) -> None:
    for language in ("de", "fr", "en"):
        with pytest.raises(ValueError):
            as_machine_number(written, language)


def draft_form(**changes: Any) -> dict[str, Any]:
    return {"request_id": str(uuid.uuid4()), "customer": "Kunde GmbH", "currency": "EUR",
            "due_date": days_ahead(30), "description": ["Beratung"], "quantity": ["1,5"],
            "unit_price": ["1.200,50"], "discount_percent": ["2,5"], "tax_rate": ["19"],
            **changes}


async def test_a_german_draft_form_takes_prices_as_german_writes_them(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/invoices", data=draft_form(), headers=GERMAN)
    assert made.status_code == 200, made.text
    invoice_id = made.headers["hx-redirect"].rsplit("/", 1)[1]
    stored = rows(studio.settings.db_path, "SELECT line_items, net FROM invoices WHERE id = ?",
                  invoice_id)[0]
    assert json.loads(stored["line_items"]) == [{
        "description": "Beratung", "quantity": "1.5", "unit_price": "1200.50",
        "tax_rate": "19", "discount_percent": "2.5"}]
    assert stored["net"] == "1755.73"
    # The form shows them back as German writes them, so saving it again keeps them.
    page = (await client.get(f"/invoices/{invoice_id}", headers={
        "Accept": "text/html", "Accept-Language": "de"})).text
    assert 'name="unit_price" value="1.200,50"' in page
    assert 'name="quantity" value="1,5"' in page and 'name="discount_percent" value="2,5"' in page


async def test_a_french_form_takes_a_narrow_no_break_space_between_thousands(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/invoices", headers=FRENCH, data=draft_form(
        unit_price=[f"1{NNBSP}200,50"], quantity=["2"], discount_percent=[""]))
    assert made.status_code == 200, made.text
    invoice_id = made.headers["hx-redirect"].rsplit("/", 1)[1]
    stored = rows(studio.settings.db_path, "SELECT net FROM invoices WHERE id = ?", invoice_id)
    assert stored[0]["net"] == "2401.00"


async def test_json_keeps_one_machine_format(studio) -> None:
    client = await studio.signed_in()
    body = {"customer": "Kunde GmbH", "currency": "EUR", "due_date": days_ahead(30),
            "line_items": [{"description": "Beratung", "quantity": "1",
                            "unit_price": "1.200,50", "tax_rate": "19"}]}
    refused = await client.post("/invoices", json=body, headers={"Accept-Language": "de"})
    assert refused.status_code == 422
    assert refused.json()["fields"] == {"unit_price.1": refused.json()["message"]}
    assert "vor dem Komma" in refused.json()["message"]
    assert rows(studio.settings.db_path,
                "SELECT id FROM invoices WHERE customer = 'Kunde GmbH'") == []


async def test_a_german_payment_form_takes_500_comma_00(studio) -> None:
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    paid = await client.post(f"/invoices/{invoice_id}/payments", headers=GERMAN, data={
        "request_id": str(uuid.uuid4()), "amount": "1.500,00", "date": TODAY,
        "method": "bank_transfer"})
    assert paid.status_code == 200, paid.text
    assert [row["amount"] for row in payments_of(studio.settings.db_path, invoice_id)] == \
        ["1500.00"]
    assert balance_of(studio.settings.db_path, invoice_id)["amount_due"] == "1200.00"
    page = (await client.get(f"/invoices/{invoice_id}", headers={
        "Accept": "text/html", "Accept-Language": "de"})).text
    assert re.search(r'id="payment-amount"[^>]*value="1\.200,00"', page)


async def test_a_refused_draft_form_names_every_field_in_the_persons_language(studio) -> None:
    client = await studio.signed_in()
    # The second row is left blank: every message names the third as the row the person sees.
    refused = await client.post("/invoices", headers=GERMAN, data=draft_form(
        description=["Beratung", "", ""], quantity=["1", "", "zwei"],
        unit_price=["1,200,50", "", "10"], discount_percent=["", "", "200"],
        tax_rate=["19", "", "19"]))
    assert refused.status_code == 422 and refused.headers["hx-retarget"] == "#messages"
    shown = re.findall(r'<li data-field="([^"]+)">([^<]+)</li>', refused.text)
    assert dict(shown) == {
        "unit_price.1": "Der Einzelpreis in Zeile 1 muss eine Zahl wie 1.200,50 sein.",
        "description.3": "Zeile 3: Die Beschreibung muss 1 bis 500 Zeichen lang sein.",
        "quantity.3": "Die Menge in Zeile 3 muss eine Zahl wie 1,5 sein.",
        "discount_percent.3": "Zeile 3: Der Rabatt muss ein Prozentsatz von 0 bis 100 sein,"
                              " etwa 10 oder 2,5.",
    }
    assert "Nicht gespeichert: 4 Felder zu korrigieren" in refused.text
    assert rows(studio.settings.db_path,
                "SELECT id FROM invoices WHERE customer = 'Kunde GmbH'") == []


async def test_a_refused_payment_names_every_field_at_once(studio) -> None:
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    refused = await client.post(f"/invoices/{invoice_id}/payments", headers=GERMAN, data={
        "request_id": str(uuid.uuid4()), "amount": "fünf", "date": "gestern",
        "method": "barter"})
    assert refused.status_code == 422
    shown = dict(re.findall(r'<li data-field="([^"]+)">([^<]+)</li>', refused.text))
    assert set(shown) == {"amount", "date", "method"}
    assert shown["amount"] == "Der Betrag muss eine Zahl wie 1.200,50 sein."
    assert payments_of(studio.settings.db_path, invoice_id) == []
    # Past what is left to pay is the amount's fault, said beside it too.
    over = await client.post(f"/invoices/{invoice_id}/payments", headers=GERMAN, data={
        "request_id": str(uuid.uuid4()), "amount": "3.000,00", "date": TODAY,
        "method": "bank_transfer"})
    assert over.status_code == 422 and 'data-field="amount"' in over.text
    assert payments_of(studio.settings.db_path, invoice_id) == []


async def test_a_refused_customer_names_every_field_at_once(studio) -> None:
    client = await studio.signed_in()
    refused = await client.post("/customers", json={
        "name": " ", "email": "not an address", "country": "Germany"})
    assert refused.status_code == 422
    assert set(refused.json()["fields"]) == {"name", "email", "country"}
    assert rows(studio.settings.db_path,
                "SELECT id FROM customers WHERE email = 'not an address'") == []


async def test_the_totals_while_typing_read_german_numbers(studio) -> None:
    client = await studio.signed_in()
    shown = await client.get("/invoices/totals", headers=GERMAN, params=[
        ("currency", "EUR"), ("description", "a"), ("quantity", "2"),
        ("unit_price", "1.200,50"), ("tax_rate", "19")])
    assert 'id="total-net">2.401,00\xa0€' in shown.text
    typo = await client.get("/invoices/totals", headers=GERMAN, params=[
        ("currency", "EUR"), ("description", "a"), ("quantity", "2"),
        ("unit_price", "1,2,3"), ("tax_rate", "19")])
    assert "Der Einzelpreis in Zeile 1 muss eine Zahl wie 1.200,50 sein." in typo.text


def test_a_refused_email_names_every_field_at_once() -> None:
    with pytest.raises(Refusal) as refused:
        outbox.parse_send({"to": "nobody", "cc": "also nobody", "subject": "two\nlines",
                           "message": "Hallo"})
    assert set(refused.value.fields) == {"to", "cc", "subject"}
    assert refused.value.status == 422


async def test_a_german_recurring_form_takes_its_lines_as_german_writes_them(studio) -> None:
    client = await studio.signed_in()
    customer_id = (await client.post("/customers", json={"name": "Abo GmbH"})).json()["id"]
    made = await client.post("/recurring", headers={"Accept": "application/json",
                                                    "Accept-Language": "de"}, data={
        "request_id": str(uuid.uuid4()), "customer_id": customer_id, "currency": "EUR",
        "description": "Hosting", "quantity": "1", "unit_price": "1.200,50", "tax_rate": "19",
        "every": "month", "interval": "1", "day": "1", "starts": days_ahead(1),
        "action": "draft"})
    assert made.status_code == 201, made.text
    stored = rows(studio.settings.db_path, "SELECT line_items FROM recurring WHERE id = ?",
                  made.json()["recurring"]["id"])
    assert json.loads(stored[0]["line_items"])[0]["unit_price"] == "1200.50"

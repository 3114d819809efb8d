"""The customer's language: chosen on the customer (its country's until chosen), frozen with
the buyer at issue, and spoken by everything the customer reads: the document's page, PDF and
share page, the default email, the line appended to it, and the reminders' words, with
amounts and dates as that language writes them."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from studio.billing import documents
from studio.config import Settings
from studio.leasing.providers.local import reminder
from studio.mail import reminders
from tests.conftest import Running, database_digest, days_ahead, running, scalar
from tests.mailserver import Inbox, MailServer
from tests.test_legal_document import text_of
from tests.test_sending import send_row, wait_for, with_mail

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
# 1200.50 at 19 %: net 1,200.50, tax 228.10, total 1,428.60.
LINE = {"description": "Beratung", "quantity": "1", "unit_price": "1200.50", "tax_rate": "19"}
GERMAN_DATE = re.compile(r"\b\d{2}\.\d{2}\.\d{4}\b")
FRENCH_DATE = re.compile(r"\b\d{2}/\d{2}/\d{4}\b")


def spaced(text: str) -> str:
    """Babel's group separators (a narrow no-break space in French) as plain spaces."""
    return re.sub(r"[\s\u00a0\u202f]+", " ", text)


async def customer(client: Any, **fields: Any) -> dict[str, Any]:
    made = await client.post("/customers", json={"name": "Kunde", **fields})
    assert made.status_code == 201, made.text
    return made.json()


async def issued_to(client: Any, buyer: dict[str, Any]) -> dict[str, Any]:
    """An invoice of one line (total 1,428.60) issued to the customer."""
    draft = await client.post("/invoices", json={
        "customer": buyer["name"], "customer_id": buyer["id"], "currency": "EUR",
        "due_date": days_ahead(30), "line_items": [LINE]})
    assert draft.status_code == 201, draft.text
    done = await client.post(f"/invoices/{draft.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": draft.json()["revision"]})
    assert done.status_code == 201, done.text
    return (await client.get(f"/invoices/{draft.json()['id']}")).json()


async def test_a_customers_language_follows_its_country_until_chosen(studio: Running) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    for country, language in (("DE", "de"), ("AT", "de"), ("FR", "fr"), ("BE", "fr"),
                              ("ES", "es"), ("IT", "it"), ("NL", "nl"), ("GB", "en"), ("", "en")):
        made = await customer(client, country=country)
        assert (made["language"], made["language_chosen"]) == (language, False), country
        assert scalar(db, "SELECT language FROM customers WHERE id = ?", made["id"]) is None
    made = await customer(client, name="Müller", country="DE")
    chosen = await client.patch(f"/customers/{made['id']}", json={"revision": 1,
                                                                   "language": "en"})
    assert chosen.status_code == 200, chosen.text
    assert (chosen.json()["language"], chosen.json()["language_chosen"]) == ("en", True)
    assert scalar(db, "SELECT language FROM customers WHERE id = ?", made["id"]) == "en"
    assert (await client.get(f"/customers/{made['id']}")).json()["language"] == "en"
    listed = (await client.get("/customers", params={"q": "Müller"})).json()
    assert [found["language"] for found in listed] == ["en"]
    # Emptied, it follows the country again.
    cleared = await client.patch(f"/customers/{made['id']}", json={"revision": 2,
                                                                    "language": ""})
    assert cleared.json()["language"] == "de" and not cleared.json()["language_chosen"]
    assert scalar(db, "SELECT language FROM customers WHERE id = ?", made["id"]) is None
    # The customer's page offers the choice, the country's language first.
    page = (await client.get(f"/customers/{made['id']}", headers=PAGE)).text
    assert 'name="language"' in page and '<option value="de">Deutsch</option>' in page


async def test_an_unknown_language_is_refused_naming_the_choices_and_changes_nothing(
        studio: Running) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    made = await customer(client, country="DE")
    before = database_digest(db)
    for body in ({"revision": 1, "language": "klingon"}, {"revision": 1, "language": 7}):
        refused = await client.patch(f"/customers/{made['id']}", json=body)
        assert refused.status_code == 422, refused.text
        message = refused.json()["message"]
        assert "language" in message and all(code in message
                                             for code in ("de", "fr", "en", "es", "it", "nl"))
    refused = await client.post("/customers", json={"name": "Neu", "language": "xx"})
    assert refused.status_code == 422 and "language" in refused.json()["message"]
    assert database_digest(db) == before


async def test_a_german_customers_pdf_and_page_are_german(studio: Running) -> None:
    client = await studio.signed_in()
    invoice = await issued_to(client, await customer(client, country="DE"))
    text = spaced(text_of((await client.get(f"/invoices/{invoice['id']}.pdf")).content))
    assert f"Rechnung {invoice['number']}" in text
    assert "1.428,60 €" in text and "1.200,50" in text and "Bill to" not in text
    assert "Rechnungsdatum" in text and "Fällig am" in text and "Deutschland" in text
    day = invoice["due_date"]
    assert f"{day[8:10]}.{day[5:7]}.{day[:4]}" in text and GERMAN_DATE.search(text)
    page = spaced((await client.get(f"/invoices/{invoice['id']}/document",
                                    headers=PAGE)).text)
    assert '<html lang="de">' in page and "Rechnungsempfänger" in page and "1.428,60 €" in page


async def test_a_french_customers_pdf_is_french(studio: Running) -> None:
    client = await studio.signed_in()
    invoice = await issued_to(client, await customer(client, country="FR"))
    text = spaced(text_of((await client.get(f"/invoices/{invoice['id']}.pdf")).content))
    assert f"Facture {invoice['number']}" in text
    assert "1 428,60 €" in text and "1 200,50" in text
    assert FRENCH_DATE.search(text) and "Date d’échéance" in text


async def test_the_reverse_charge_says_it_in_the_customers_language_and_the_sellers(
        studio: Running) -> None:
    client = await studio.signed_in()
    seller = {"name": "Ada Werkstatt", "address": "Hauptstraße 1\n10115 Berlin",
              "country": "DE", "vat_id": "DE136695976"}
    assert (await client.post("/settings", json=seller)).status_code == 200
    buyer = await customer(client, name="Acme SARL", country="FR", vat_id="FR40303265045")
    draft = await client.post("/invoices", json={
        "customer": buyer["name"], "customer_id": buyer["id"], "currency": "EUR",
        "due_date": days_ahead(30), "line_items": [{**LINE, "tax_rate": "0"}]})
    done = await client.post(f"/invoices/{draft.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": draft.json()["revision"]})
    assert done.status_code == 201, done.text
    french = "Autoliquidation : TVA due par le preneur (article 196 de la directive 2006/112/CE)"
    german = ("Steuerschuldnerschaft des Leistungsempfängers (Reverse Charge, Art. 196"
              " Richtlinie 2006/112/EG)")
    pdf = spaced(text_of((await client.get(f"/invoices/{draft.json()['id']}.pdf")).content))
    assert f"{french} {german}" in pdf and "Reverse charge: VAT" not in pdf
    page = (await client.get(f"/invoices/{draft.json()['id']}/document", headers=PAGE)).text
    assert f"{french}<br>{german}" in spaced(page)
    xml = (await client.get(f"/invoices/{draft.json()['id']}.xml")).text
    assert "<ram:ExemptionReason>Reverse charge</ram:ExemptionReason>" in xml


async def test_the_language_is_frozen_at_issue(studio: Running) -> None:
    """An issued document never changes: the customer's language chosen later speaks only on
    invoices issued after."""
    client = await studio.signed_in()
    buyer = await customer(client, country="DE")
    invoice = await issued_to(client, buyer)
    first = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    changed = await client.patch(f"/customers/{buyer['id']}", json={"revision": 1,
                                                                      "language": "fr"})
    assert changed.status_code == 200, changed.text
    assert (await client.get(f"/invoices/{invoice['id']}.pdf")).content == first
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)).text
    assert '<html lang="de">' in page
    later = await issued_to(client, {**buyer, "revision": 2})
    text = text_of((await client.get(f"/invoices/{later['id']}.pdf")).content)
    assert f"Facture {later['number']}" in text


def test_an_invoice_issued_before_languages_reads_as_it_was_written() -> None:
    """Its buyer was kept without a language: it was written in English, and its document
    never changes, whatever its buyer's country."""
    assert documents.language_of({"buyer": {"name": "K", "country": "AT"}}) == "en"
    assert documents.language_of({"buyer": {"name": "K", "vat_id": "FR40303265045"}}) == "en"
    assert documents.language_of({"buyer": {"name": "K", "country": "SE"}}) == "en"
    assert documents.language_of({"buyer": None, "customer": "Typed by name"}) == "en"
    assert documents.language_of({"buyer": {"country": "AT", "language": "it"}}) == "it"


async def test_the_share_page_speaks_the_customers_language(studio: Running) -> None:
    client = await studio.signed_in()
    invoice = await issued_to(client, await customer(client, country="NL"))
    made = await client.post(f"/invoices/{invoice['id']}/share", json={})
    assert made.status_code == 201, made.text
    page = spaced((await client.get(made.json()["url"], headers=PAGE)).text)
    assert f"Factuur {invoice['number']}" in page and "€ 1.428,60" in page
    assert "Download PDF" not in page


async def test_the_default_email_to_a_german_customer_is_german(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    async with running(with_mail(settings, smtp)) as studio:
        client = await studio.signed_in()
        buyer = await customer(client, country="DE", email="buchhaltung@kunde.test")
        invoice = await issued_to(client, buyer)
        page = (await client.get(f"/invoices/{invoice['id']}", headers=PAGE)).text
        assert f"Rechnung {invoice['number']}" in page  # the send form's first words
        sent = await client.post(f"/invoices/{invoice['id']}/send",
                                 json={"request_id": "send-de"})
        assert sent.status_code == 202, sent.text
        await wait_for(lambda: send_row(studio, sent.json()["send_id"])["status"] == "sent",
                       what="delivery")
        [message] = inbox.messages
        assert message["Subject"].startswith(f"Rechnung {invoice['number']}")
        body = spaced(message.get_body(("plain",)).get_content())
        assert body.startswith("Guten Tag,") and "1.428,60 €" in body
        day = invoice["due_date"]
        assert f"fällig am {day[8:10]}.{day[5:7]}.{day[:4]}" in body
        assert "Mit freundlichen Grüßen" in body and "Rechnung online ansehen: http" in body
        assert "please find" not in body and "View the invoice online" not in body


async def test_reminder_placeholders_write_the_customers_amounts_and_dates(
        settings: Settings, smtp: MailServer) -> None:
    async with running(with_mail(settings, smtp)) as studio:
        client = await studio.signed_in()
        db = studio.settings.db_path
        invoice = await issued_to(client, await customer(client, country="DE",
                                                         email="a@kunde.test"))
        steps = {"enabled": True, "steps": [
            {"days": 1, "subject": "Erinnerung {number}",
             "message": "Bitte zahlen Sie {currency} {amount_due}, fällig am {due_date}."}]}
        saved = await client.put("/settings/reminders", json=steps)
        assert saved.status_code == 200, saved.text
        owner = scalar(db, "SELECT owner_id FROM invoices WHERE id = ?", invoice["id"])
        await studio.studio.db.write(reminders.queue_due, owner, "s@studio.test",
                                     "http://studio.test/", 30.0, time.time() + 40 * 86400)
        message = scalar(db, "SELECT message FROM sends WHERE invoice_id = ?", invoice["id"])
        day = invoice["due_date"]
        assert message.startswith("Bitte zahlen Sie EUR 1.428,60, fällig am"
                                  f" {day[8:10]}.{day[5:7]}.{day[:4]}.")


def test_the_built_in_writer_writes_reminders_in_six_languages() -> None:
    invoice = {"number": "INV-2026-0004", "currency": "EUR", "amount_due": "1428.60",
               "due_date": "2026-11-01", "days_late": 32, "seller": "Ada Studio"}
    expected = {"de": ("Rechnung", "1.428,60 €", "01.11.2026"),
                "fr": ("facture", "1 428,60 €", "01/11/2026"),
                "es": ("factura", "1.428,60 €", "01/11/2026"),
                "it": ("fattura", "1.428,60 €", "01/11/2026"),
                "nl": ("factuur", "€ 1.428,60", "01-11-2026"),
                "en": ("invoice", "€1,428.60", "1 Nov 2026")}
    for language, (word, amount, day) in expected.items():
        written = reminder({**invoice, "language": language})
        assert word in written["subject"], language
        assert amount in spaced(written["message"]) and day in written["message"], language


async def test_the_customer_and_sending_forms_speak_the_persons_language(
        settings: Settings, smtp: MailServer) -> None:
    """The owner's own pages follow the person (here their browser's German); the words the
    email starts with follow the customer (here French)."""
    async with running(with_mail(settings, smtp)) as studio:
        client = await studio.signed_in()
        buyer = await customer(client, country="FR", email="compta@client.test")
        german = {**PAGE, "Accept-Language": "de-DE,de;q=0.9"}
        page = (await client.get(f"/customers/{buyer['id']}", headers=german)).text
        assert "Sprache der Dokumente und E-Mails" in page and "Änderungen speichern" in page
        assert "Die Sprache des Landes (Français)" in page
        invoice = await issued_to(client, buyer)
        page = (await client.get(f"/invoices/{invoice['id']}", headers=german)).text
        assert "Per E-Mail senden" in page and "Freigabelink erstellen" in page
        assert f"Facture {invoice['number']}" in page and "veuillez trouver ci-joint" in page

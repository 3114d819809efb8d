"""The amount owed is right everywhere a customer pays from: the share page and the printable
view say what is left to pay and their payment QR code asks for exactly that (none when nothing
is left), while the issued PDF stays the document as issued. The email's first words, the
summary writer and the document's one payment term say the same. Amounts on pages are read by
decoding the QR code the page shows, as a banking app would."""

from __future__ import annotations

import base64
import datetime as dt
import io
import re
import uuid
from typing import Any

import pypdf
import pytest
import zxingcpp
from PIL import Image

from studio import i18n
from studio.billing import balances
from studio.leasing.providers.local import LocalProvider
from studio.leasing.purposes import PURPOSES
from studio.mail import outbox
from tests.conftest import days_ahead, lease_body, running, scalar, wait_for_status

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
TODAY = dt.datetime.now(dt.UTC).date().isoformat()
SELLER = {"name": "Ada Works", "address": "1 Lane\n10115 Berlin", "country": "DE",
          "iban": "DE89 3704 0044 0532 0130 00", "bic": "COBADEFF",
          "payment_terms": "Please pay within 14 days by bank transfer."}


async def issued(client: Any, due_in: int = 30) -> dict[str, Any]:
    """A new issued EUR invoice of EUR 1261.76 (1060.30 + 19 % tax), due in `due_in` days."""
    saved = await client.post("/settings", json=SELLER)
    assert saved.status_code == 200, saved.text
    made = await client.post("/invoices", json={
        "customer": "Müller Gartenbau GmbH", "currency": "EUR", "due_date": days_ahead(due_in),
        "line_items": [{"description": "Garden design", "quantity": "1",
                        "unit_price": "1060.30", "tax_rate": "19"}]})
    assert made.status_code == 201, made.text
    done = await client.post(f"/invoices/{made.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    invoice = (await client.get(f"/invoices/{made.json()['id']}")).json()
    assert invoice["total"] == "1261.76"
    return invoice


async def pay(client: Any, invoice_id: str, amount: str) -> None:
    reply = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": str(uuid.uuid4()), "amount": amount, "date": TODAY,
        "method": "bank_transfer"})
    assert reply.status_code == 201, reply.text


def scanned(images: list[Image.Image]) -> list[str]:
    """What a banking app reads from the images: the text of every QR code in them."""
    return [found.text for image in images for found in zxingcpp.read_barcodes(image)]


def page_codes(html: str) -> list[str]:
    """The QR codes a page shows, decoded from the images it embeds."""
    images = []
    for kind, data in re.findall(r'src="data:image/(png|svg\+xml);base64,([^"]+)"', html):
        assert kind == "png", "a payment code is shown as an image a scanner reads"
        images.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return scanned(images)


def pdf_codes(pdf: bytes) -> list[str]:
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    return scanned([image.image for page in reader.pages for image in page.images])


def asked_amount(code: str) -> str:
    """The amount an EPC QR code asks for (its eighth line: EUR and the amount)."""
    lines = code.split("\n")
    assert lines[0] == "BCD" and lines[3] == "SCT", code
    return lines[7]


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def share(client: Any, invoice_id: str) -> str:
    reply = await client.post(f"/invoices/{invoice_id}/share")
    assert reply.status_code == 201, reply.text
    return reply.json()["url"].rsplit("/", 1)[1]


async def test_a_part_paid_invoice_is_paid_from_its_pages_with_what_is_left(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client)
    token = await share(client, invoice["id"])
    before = (await studio.client().get(f"/i/{token}", headers=PAGE)).text
    assert [asked_amount(code) for code in page_codes(before)] == ["EUR1261.76"]

    await pay(client, invoice["id"], "523.98")
    assert scalar(studio.settings.db_path, "SELECT amount_due FROM balances"
                  " WHERE invoice_id = ?", invoice["id"]) == "737.78"
    shared = await studio.client().get(f"/i/{token}", headers=PAGE)
    printable = await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)
    for page in (shared, printable):
        assert page.status_code == 200
        assert [asked_amount(code) for code in page_codes(page.text)] == ["EUR737.78"]
        words = text_of(page.text)
        assert "Left to pay €737.78" in words, words
        assert "Paid €523.98" in words, words

    # The issued document itself is kept as issued: its code asks for its total.
    pdf = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert [asked_amount(code) for code in pdf_codes(pdf.content)] == ["EUR1261.76"]


async def test_an_invoice_with_nothing_left_shows_no_payment_code(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client)
    token = await share(client, invoice["id"])
    await pay(client, invoice["id"], "1261.76")
    shared = await studio.client().get(f"/i/{token}", headers=PAGE)
    printable = await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)
    for page in (shared, printable):
        assert page_codes(page.text) == []
        assert 'id="payment-qr"' not in page.text
        words = text_of(page.text)
        assert "Paid in full: nothing is left to pay." in words, words
        assert "Scan to pay" not in words


async def test_a_credit_note_lowers_what_the_pages_ask_for(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client)
    note = await client.post(f"/invoices/{invoice['id']}/credit-note",
                             json={"request_id": str(uuid.uuid4())})
    assert note.status_code == 201, note.text
    edited = await client.patch(f"/invoices/{note.json()['id']}", json={
        "revision": note.json()["revision"],
        "line_items": [{"description": "Discount agreed", "quantity": "1",
                        "unit_price": "500.00", "tax_rate": "19"}]})
    assert edited.status_code == 200, edited.text
    done = await client.post(f"/invoices/{note.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": edited.json()["revision"]})
    assert done.status_code == 201, done.text
    token = await share(client, invoice["id"])
    shared = await studio.client().get(f"/i/{token}", headers=PAGE)
    assert [asked_amount(code) for code in page_codes(shared.text)] == ["EUR666.76"]
    assert "Credited €595.00" in text_of(shared.text)


async def test_the_document_states_one_payment_term_the_due_dates(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client, due_in=30)
    printable = await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)
    pdf = await client.get(f"/invoices/{invoice['id']}.pdf")
    pdf_text = " ".join(page.extract_text() for page in
                        pypdf.PdfReader(io.BytesIO(pdf.content)).pages)
    for words in (text_of(printable.text), " ".join(pdf_text.split())):
        assert "within 14 days" not in words, words
        assert len(re.findall(r"within \d+ days", words)) == 1, words
        assert f"Payment within 30 days, by {i18n.date(invoice['due_date'], 'en')}." in words, words


async def test_the_email_first_words_say_what_is_left_to_pay(settings) -> None:
    ready = settings.with_changes(smtp_url="smtp://127.0.0.1:9", mail_from="ada@example.com")
    async with running(ready) as studio:
        client = await studio.signed_in()
        invoice = await issued(client)
        await pay(client, invoice["id"], "500.00")
        page = await client.get(f"/invoices/{invoice['id']}", headers=PAGE)
        [message] = re.findall(r'<textarea name="message"[^>]*>([^<]*)</textarea>',
                               page.text)[:1]
        assert "€761.76" in message and "1,261.76" not in message, message
        assert "left to pay" in message


def test_the_default_words_of_an_invoice_email_name_what_is_left() -> None:
    facts = {"number": "INV-2026-0001", "kind": "invoice", "currency": "EUR",
             "total": "1261.76", "due_date": "2026-12-31", "seller": "Ada Works",
             "amount_due": "761.76", "payment_status": "partially_paid"}
    subject, message = outbox.default_words(facts, "invoice")
    assert "€761.76" in message and "1,261.76" not in message, message
    paid = outbox.default_words({**facts, "amount_due": "0.00", "payment_status": "paid"},
                                "invoice")[1]
    assert "paid in full" in paid and "1,261.76" not in paid, paid
    unpaid = outbox.default_words({**facts, "amount_due": "1261.76",
                                   "payment_status": "unpaid"}, "invoice")[1]
    assert "€1,261.76" in unpaid, unpaid


def invoice_facts(**changes: Any) -> dict[str, Any]:
    return {"number": "INV-2026-0007", "customer": "Müller Gartenbau GmbH", "currency": "EUR",
            "total": "1261.76", "due_date": "2026-11-02", "status": "issued",
            "kind": "invoice", "amount_paid": "500.00", "amount_due": "761.76",
            "payment_status": "partially_paid", "overdue": False,
            "line_items": [{"description": "Garden design"}], **changes}


async def summaries(invoice: dict[str, Any]) -> list[str]:
    writer = LocalProvider()
    return [await writer.complete(PURPOSES["summarize_invoice"], invoice, "actor",
                                  candidate=n, timeout=5) for n in range(1, 6)]


def amounts_owed(summary: str) -> list[str]:
    """Every amount the summary says is owed, due, payable or left."""
    owed = r"(?:owes|owed|due|payable|left|to pay|outstanding)"
    return re.findall(rf"{owed}\D{{0,12}}EUR (\d+\.\d\d)|EUR (\d+\.\d\d)\D{{0,12}}{owed}",
                      summary)


async def test_the_summary_writer_states_only_what_is_left_as_owed() -> None:
    for summary in await summaries(invoice_facts()):
        stated = {amount for pair in amounts_owed(summary) for amount in pair if amount}
        assert stated == {"761.76"}, summary
        assert "owes EUR 1261.76" not in summary
    for summary in await summaries(invoice_facts(amount_paid="1261.76", amount_due="0.00",
                                                 payment_status="paid")):
        assert "paid" in summary and not amounts_owed(summary), summary
    unknown = {name: value for name, value in invoice_facts().items()
               if name not in ("amount_paid", "amount_due", "payment_status", "overdue")}
    for summary in await summaries(unknown):  # a draft, or a balance not given
        assert not amounts_owed(summary), summary


async def test_the_summary_writer_says_overdue_when_overdue() -> None:
    late = invoice_facts(overdue=True, due_date="2026-01-02")
    for summary in await summaries(late):
        assert "overdue" in summary.lower(), summary
    for summary in await summaries(invoice_facts()):
        assert "overdue" not in summary.lower(), summary


async def test_a_summary_written_for_a_part_paid_overdue_invoice_says_what_is_left(
        studio, monkeypatch: pytest.MonkeyPatch) -> None:
    client = await studio.signed_in()
    invoice = await issued(client)
    await pay(client, invoice["id"], "500.00")
    # Days go by: its due date is behind.
    later = dt.date.fromisoformat(invoice["due_date"]) + dt.timedelta(days=9)
    monkeypatch.setattr(balances, "today", lambda now=None: later)
    made = await client.post("/leases", json=lease_body([invoice["id"]], "owed", candidates=5))
    assert made.status_code == 201, made.text
    lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
    [chosen] = lease["invoices"]
    assert len(chosen["candidates"]) == 5
    for candidate in chosen["candidates"]:
        summary = candidate["summary"]
        stated = {amount for pair in amounts_owed(summary) for amount in pair if amount}
        assert stated == {"761.76"} and "overdue" in summary.lower(), summary

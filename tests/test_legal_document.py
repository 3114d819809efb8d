"""The document (PDF and printable page) carries what an EU VAT invoice must (Directive
2006/112/EC, article 226), how to pay it, and for EUR an EPC QR code; a credit note reads as
a credit. The PDF's text is read back with pypdf."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import uuid
from typing import Any

import pypdf
import pytest
import segno

from studio import i18n
from studio.billing import documents, invoices
from tests.conftest import days_ahead, execute, rows, scalar
from tests.test_full_invoice import actor_id, add_customer, full_body, issue, line

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
IBAN = "DE89370400440532013000"


def full_seller(db_path: Any, **changes: str) -> None:
    """Ada's whole seller profile, written as the profile's own unit writes it."""
    seller = {"name": "Ada Lovelace Design", "address": "12 Analytical Row\nLondon W1",
              "country": "GB", "vat_id": "GB123456789", "tax_number": "TX-42",
              "email": "ada@example.com", "iban": IBAN, "bic": "COBADEFF",
              "payment_terms": "Please quote the invoice number.",
              "footer": "Ada Lovelace Design Ltd, registered in England no. 1815", **changes}
    execute(db_path, "UPDATE profiles SET name = ?, address = ?, country = ?, vat_id = ?,"
                     " tax_number = ?, email = ?, iban = ?, bic = ?, payment_terms = ?,"
                     " footer = ? WHERE actor_id = ?",
            *seller.values(), actor_id(db_path))


def text_of(pdf: bytes) -> str:
    return "\n".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


def images_in(pdf: bytes) -> int:
    return sum(len(page.images) for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


def english(day: str) -> str:
    """A date as an English document writes it: 15 Dec 2026."""
    return i18n.date(day, "en")


def written_to_in_english(db_path: Any, customer_id: str) -> None:
    """The customer chose English: the document's words below are the English ones."""
    execute(db_path, "UPDATE customers SET language = 'en' WHERE id = ?", customer_id)


async def issued_full(studio: Any, client: Any, **changes: Any) -> dict[str, Any]:
    """An issued invoice with a customer, two rates, a discount, a supply date and notes."""
    customer_id = add_customer(studio.settings.db_path)
    written_to_in_english(studio.settings.db_path, customer_id)
    draft = await client.post("/invoices", json=full_body(customer_id=customer_id, **changes))
    assert draft.status_code == 201, draft.text
    done = await issue(client, draft.json())
    assert done.status_code == 201, done.text
    return (await client.get(f"/invoices/{draft.json()['id']}")).json()


async def test_the_pdf_holds_everything_article_226_asks_and_how_to_pay(studio) -> None:
    full_seller(studio.settings.db_path)
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    reply = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/pdf"
    text = text_of(reply.content)
    for expected in (
            f"Invoice {invoice['number']}", f"Issued {english(invoice['issue_date'])}",
            "Date of supply 15 Dec 2026", f"Due {english(invoice['due_date'])}",
            # The seller: name, address, country, VAT ID, tax number.
            "Ada Lovelace Design", "12 Analytical Row", "London W1", "United Kingdom",
            "VAT ID GB123456789", "Tax number TX-42",
            # The buyer, as kept at issue.
            "Acme GmbH", "Hauptstr. 5", "10115 Berlin", "Germany", "VAT ID DE123456789",
            # The lines with their discount, and the tax table per rate.
            "Design 3 19.99 10 % 19 % €53.97", "Print run 2 12.50 7 % €25.00",
            "19 % €53.97 €10.25", "7 % €25.00 €1.75",
            "Net (EUR) €78.97", "Tax (EUR) €12.00", "Total (EUR) €90.97",
            # How to pay.
            "Please quote the invoice number.", "Payment within",
            f"by {english(invoice['due_date'])}",
            f"IBAN {IBAN}", "BIC COBADEFF", "Scan to pay",
            "Project Babbage, phase 2.", "Thank you!", "registered in England no. 1815"):
        assert expected in text, expected
    assert images_in(reply.content) == 1  # the payment code
    days = (dt.date.fromisoformat(invoice["due_date"])
            - dt.date.fromisoformat(invoice["issue_date"])).days
    assert f"Payment within {days} days" in " ".join(text.split()), text


async def test_the_payment_code_is_an_epc_transfer_of_the_total_into_the_sellers_iban(
        studio) -> None:
    full_seller(studio.settings.db_path)
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    document = await studio.studio.db.read(
        invoices.document_of, actor_id(studio.settings.db_path), invoice["id"])
    code = documents.payment_qr(document)
    assert code is not None
    # The EPC069-12 payload: service tag, version, charset, SCT, BIC, name, IBAN, amount,
    # purpose, reference, text.
    payload = "\n".join(["BCD", "002", "2", "SCT", "COBADEFF", "Ada Lovelace Design", IBAN,
                         "EUR90.97", "", "", invoice["number"]]).encode("iso-8859-1")
    expected = segno.make_qr(payload, error="m")
    assert code.matrix == expected.matrix


async def test_a_usd_invoice_or_one_without_an_iban_has_no_payment_code(studio) -> None:
    db_path = studio.settings.db_path
    full_seller(db_path)
    client = await studio.signed_in()
    dollars = await issued_full(studio, client, currency="USD")
    pdf = (await client.get(f"/invoices/{dollars['id']}.pdf")).content
    assert images_in(pdf) == 0 and "Scan to pay" not in text_of(pdf)
    assert f"IBAN {IBAN}" in text_of(pdf)  # the bank details are there all the same
    page = (await client.get(f"/invoices/{dollars['id']}/document", headers=PAGE)).text
    assert 'id="payment-qr"' not in page

    full_seller(db_path, iban="", bic="")
    no_iban = await issued_full(studio, client)
    pdf = (await client.get(f"/invoices/{no_iban['id']}.pdf")).content
    assert images_in(pdf) == 0 and "IBAN" not in text_of(pdf)


async def test_the_printable_page_carries_the_same_facts_and_the_payment_code(studio) -> None:
    full_seller(studio.settings.db_path)
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE))
    assert page.status_code == 200
    for expected in ("Date of supply", "15 Dec 2026", "12 Analytical Row", "United Kingdom",
                     "VAT ID GB123456789", "Tax number TX-42", "Hauptstr. 5", "Germany",
                     "VAT ID DE123456789", "10 %", '<td class="num">19 %</td>',
                     "€10.25", "€1.75", "€90.97", f"IBAN {IBAN}",
                     "Please quote the invoice number.", "Project Babbage",
                     "registered in England", 'id="payment-qr"',
                     'src="data:image/png'):
        assert expected in page.text, expected


async def test_the_document_of_an_issued_invoice_never_changes_with_the_customer_or_profile(
        studio) -> None:
    db_path = studio.settings.db_path
    full_seller(db_path)
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    first = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)).text

    execute(db_path, "UPDATE customers SET name = 'Renamed AG', address = 'Neuer Weg 9',"
                     " vat_id = 'DE111111111' WHERE owner_id = ?", actor_id(db_path))
    full_seller(db_path, name="Another Name", address="Elsewhere", vat_id="GB999",
                iban="FR1420041010050500013M02606", footer="New footer")
    assert (await client.get(f"/invoices/{invoice['id']}.pdf")).content == first
    assert (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)
            ).text == page
    # Rendered afresh, it is the same document to the byte: everything comes from what
    # issuing kept, and its creation date is its issue time.
    execute(db_path, "DELETE FROM issued_documents WHERE invoice_id = ?", invoice["id"])
    again = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    assert again == first
    assert "Renamed" not in text_of(again) and "Acme GmbH" in text_of(again)


async def test_a_credit_notes_document_reads_as_credit_names_its_invoice_and_asks_nothing(
        studio) -> None:
    full_seller(studio.settings.db_path)
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    note = (await client.post(f"/invoices/{invoice['id']}/credit-note")).json()
    note = (await client.patch(f"/invoices/{note['id']}", json={
        "revision": 1, "line_items": [line("Print run returned", "1", "12.50", "7")]})).json()
    done = await issue(client, note)
    assert done.status_code == 201, done.text
    pdf = (await client.get(f"/invoices/{note['id']}.pdf")).content
    text = text_of(pdf)
    assert f"Credit note {done.json()['number']}" in text
    assert f"Credits invoice {invoice['number']}" in text
    assert "Total credited (EUR) -€13.38" in text and "7 % -€12.50 -€0.88" in text
    assert "Acme GmbH" in text and "VAT ID DE123456789" in text
    for absent in ("Due", "Payment", "IBAN", "Scan to pay"):
        assert absent not in text, absent
    assert images_in(pdf) == 0
    page = (await client.get(f"/invoices/{note['id']}/document", headers=PAGE)).text
    assert "Credits invoice" in page and "-€13.38" in page and "payment-qr" not in page


async def test_the_sellers_logo_is_on_the_pdf_and_the_page(studio) -> None:
    """The logo issuing kept by its hash travels to the renderer process with the rest."""
    db_path = studio.settings.db_path
    full_seller(db_path, iban="")
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
                           "DwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    sha256 = hashlib.sha256(png).hexdigest()
    execute(db_path, "INSERT INTO logos (owner_id, sha256, content_type, content, created_at)"
                     " VALUES (?, ?, 'image/png', ?, 0)", actor_id(db_path), sha256, png)
    execute(db_path, "UPDATE profiles SET logo_sha256 = ? WHERE actor_id = ?", sha256,
            actor_id(db_path))
    client = await studio.signed_in()
    invoice = await issued_full(studio, client)
    assert invoice["seller"]["logo_sha256"] == sha256
    pdf = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    assert images_in(pdf) == 1
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)).text
    assert 'class="logo" src="data:image/png;base64,' in page
    assert scalar(db_path, "SELECT layout FROM issued_documents WHERE invoice_id = ?",
                  invoice["id"]) == documents.LAYOUT == "pdf-4"


async def test_an_invoice_issued_before_buyers_were_kept_still_has_a_document(studio) -> None:
    """The seeded demo's issued invoices have a seller of three fields and no buyer."""
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    [stored] = rows(studio.settings.db_path, "SELECT customer, buyer FROM invoices"
                                             " WHERE id = ?", invoice_id)
    reply = await client.get(f"/invoices/{invoice_id}.pdf")
    assert reply.status_code == 200
    assert stored["customer"] in text_of(reply.content)
    page = await client.get(f"/invoices/{invoice_id}/document", headers=PAGE)
    assert page.status_code == 200 and stored["customer"] in page.text


async def test_a_draft_form_has_the_new_fields_and_saves_them(studio) -> None:
    client = await studio.signed_in()
    form = (await client.get("/invoices/new", headers=PAGE)).text
    for name in ('name="supply_date"', 'name="notes"', 'name="discount_percent"',
                 'name="customer"', 'name="customer_id"'):
        assert name in form, name
    customer_id = add_customer(studio.settings.db_path, name="Form Client")
    made = await client.post("/invoices", headers=PAGE, data={
        "request_id": str(uuid.uuid4()), "customer": "Form Client", "customer_id": customer_id,
        "currency": "EUR",
        "due_date": days_ahead(90), "supply_date": "2027-02-01", "notes": "Line one\r\nLine two",
        "description": ["A", "B"], "quantity": ["1", "2"], "unit_price": ["100", "5"],
        "discount_percent": ["5", ""], "tax_rate": ["19", "7"]})
    assert made.status_code in (200, 201, 303), made.text
    [stored] = rows(studio.settings.db_path, "SELECT * FROM invoices WHERE customer = ?",
                    "Form Client")
    assert (stored["supply_date"], stored["notes"], stored["net"], stored["customer_id"]) == (
        "2027-02-01", "Line one\nLine two", "105.00", customer_id)
    page = (await client.get(f"/invoices/{stored['id']}", headers=PAGE)).text
    assert 'name="discount_percent" value="5"' in page and "Line one\nLine two" in page


# --- why a rate of 0 % charges no VAT (art. 226(11), (11a)) ------------------------------------

REVERSE_CHARGE = "Reverse charge: VAT is due from the buyer (Article 196, Directive 2006/112/EC)"
EXPORT = "Export outside the EU: exempt from VAT (Article 146, Directive 2006/112/EC)"
# The same in the German seller's language, on a line of its own after the customer's.
UMKEHR = ("Steuerschuldnerschaft des Leistungsempfängers (Reverse Charge, Art. 196 Richtlinie"
          " 2006/112/EG)")
AUSFUHR = "Ausfuhrlieferung in ein Drittland: steuerfrei (Art. 146 Richtlinie 2006/112/EG)"
GERMAN_SELLER = {"country": "DE", "vat_id": "DE136695976", "address": "Hauptstraße 1\n10115 Berlin"}
ZERO_RATE = [line("Design", "3", "19.99", "0", "10"), line("Print run", "2", "12.50", "0")]


def one_line(text: str) -> str:
    return " ".join(text.split())


async def issued_at_zero(studio: Any, client: Any, **buyer: str) -> dict[str, Any]:
    full_seller(studio.settings.db_path, **GERMAN_SELLER)
    customer_id = add_customer(studio.settings.db_path, **buyer)
    written_to_in_english(studio.settings.db_path, customer_id)
    draft = await client.post("/invoices", json=full_body(customer_id=customer_id,
                                                          line_items=ZERO_RATE))
    assert draft.status_code == 201, draft.text
    assert (await issue(client, draft.json())).status_code == 201
    return (await client.get(f"/invoices/{draft.json()['id']}")).json()


async def words_of(client: Any, invoice: dict[str, Any]) -> tuple[str, str]:
    pdf = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)).text
    return one_line(text_of(pdf)), page


async def test_a_zero_rate_to_a_vat_registered_buyer_in_another_eu_state_says_reverse_charge(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_at_zero(studio, client, country="FR", vat_id="FR40303265045",
                                   address="2 Rue de la Paix\n75001 Paris")
    pdf, page = await words_of(client, invoice)
    assert f"0 % €78.97 €0.00 {REVERSE_CHARGE} {UMKEHR}" in pdf
    assert "VAT ID DE136695976" in pdf and "VAT ID FR40303265045" in pdf
    assert f'<tr class="tax-note"><td colspan="3" class="num">{REVERSE_CHARGE}<br>{UMKEHR}' \
           '</td></tr>' in page
    xml = (await client.get(f"/invoices/{invoice['id']}.xml")).text
    assert "<ram:CategoryCode>AE</ram:CategoryCode>" in xml
    assert "<ram:ExemptionReason>Reverse charge</ram:ExemptionReason>" in xml
    assert scalar(studio.settings.db_path, "SELECT layout FROM issued_documents"
                  " WHERE invoice_id = ?", invoice["id"]) == "pdf-4"


async def test_a_zero_rate_to_a_buyer_outside_the_eu_says_export(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_at_zero(studio, client, country="CH", vat_id="",
                                   address="Bahnhofstrasse 1\n8001 Zürich")
    pdf, page = await words_of(client, invoice)
    assert f"0 % €78.97 €0.00 {EXPORT} {AUSFUHR}" in pdf
    assert EXPORT in page and AUSFUHR in page and REVERSE_CHARGE not in page


async def test_a_zero_rate_at_home_or_to_a_buyer_without_a_vat_id_gives_no_reason(
        studio) -> None:
    """Zero rated: the law asks no reason, and the document gives none."""
    client = await studio.signed_in()
    at_home = await issued_at_zero(studio, client)  # a German buyer
    no_vat_id = await issued_at_zero(studio, client, country="FR", vat_id="")
    for invoice in (at_home, no_vat_id):
        pdf, page = await words_of(client, invoice)
        assert "0 % €78.97 €0.00 Net (EUR)" in pdf
        for words in (REVERSE_CHARGE, EXPORT, "Reverse charge", "Export", UMKEHR, AUSFUHR):
            assert words not in pdf and words not in page, words
        assert 'class="tax-note"' not in page


async def test_a_document_kept_under_the_earlier_layout_stays_as_it_was_and_a_new_one_is_made(
        studio) -> None:
    """Bytes kept before reverse charge was printed stay untouched in the table; the
    document is made under the new layout, which says it, and kept beside them."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    invoice = await issued_at_zero(studio, client, country="FR", vat_id="FR40303265045")
    [frozen] = rows(db_path, "SELECT frozen_sha256 FROM invoices WHERE id = ?", invoice["id"])
    execute(db_path, "INSERT INTO issued_documents (invoice_id, frozen_sha256, layout, content,"
                     " created_at) VALUES (?, ?, 'pdf-3', ?, 0)",
            invoice["id"], frozen[0], b"%PDF-1.4 as kept under pdf-3")
    pdf = (await client.get(f"/invoices/{invoice['id']}.pdf")).content
    assert REVERSE_CHARGE in one_line(text_of(pdf))
    kept = {row["layout"]: bytes(row["content"]) for row in rows(
        db_path, "SELECT layout, content FROM issued_documents WHERE invoice_id = ?",
        invoice["id"])}
    assert kept == {"pdf-3": b"%PDF-1.4 as kept under pdf-3", "pdf-4": pdf}


def test_the_vat_category_of_a_zero_rate_follows_the_kept_seller_and_buyer() -> None:
    def category(seller: dict[str, str], buyer: dict[str, str] | None) -> str:
        invoice = {"seller": seller, "buyer": buyer, "customer": "Someone",
                   "tax_breakdown": [{"rate": "0"}, {"rate": "19"}]}
        assert documents.category_of(invoice, "19").code == "S"
        return documents.category_of(invoice, "0").code

    de = {"country": "DE", "vat_id": "DE136695976"}
    fr = {"country": "FR", "vat_id": "FR40303265045"}
    assert category(de, fr) == "AE"
    assert category(de, {**fr, "country": ""}) == "AE"  # the country its VAT ID names
    assert category(de, {"country": "GR", "vat_id": "EL094259216"}) == "AE"
    assert category(de, {"country": "FR", "vat_id": ""}) == "Z"  # a consumer: French VAT
    assert category(de, {"country": "DE", "vat_id": "DE812345673"}) == "Z"  # at home
    assert category(de, {"country": "US"}) == "G"
    assert category(de, {"country": "GB", "vat_id": "GB123456789"}) == "G"
    assert category(de, None) == "Z"  # issued before buyers were kept: a name alone
    assert category({"country": "DE"}, fr) == "Z"  # a seller without a VAT ID
    assert category({"country": "GB", "vat_id": "GB123456789"}, fr) == "Z"  # not in the EU

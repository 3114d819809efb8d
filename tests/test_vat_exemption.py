"""Why lines at 0 % charge no VAT, in the seller's words: a draft's `vat_exemption` is kept,
frozen at issue, printed under the tax table of the page and the PDF, sent as the e-invoice's
exemption reason (category E, EN 16931's rules met), carried to a credit note, and it answers
the review's question about a domestic line at 0 %. Asserted on the database as well as the
answers."""

from __future__ import annotations

import datetime as dt
import io
import uuid
from typing import Any

import pytest
from pypdf import PdfReader

from studio.billing import recurring
from studio.ops.audit import audit_database
from tests.conftest import rows, scalar
from tests.test_facturx_rules import breakdown, failed_rules  # noqa: F401
from tests.test_tax_defaults import GERMAN_BUSINESS, NO_RATE_LINE, customer, draft, issue, seller

pytestmark = pytest.mark.anyio
REASON = "Kleinunternehmer: keine Umsatzsteuer berechnet (§ 19 UStG)"
PAGE = {"Accept": "text/html"}


async def exempt_draft(client: Any, reason: str | None = REASON) -> dict[str, Any]:
    await seller(client)
    bakery = await customer(client, GERMAN_BUSINESS)
    return await draft(client, [{**NO_RATE_LINE, "tax_rate": "0"}], customer_id=bakery,
                       customer=None, vat_exemption=reason)


async def test_a_reason_answers_the_review_and_is_frozen_printed_and_sent(
        studio, failed_rules) -> None:  # noqa: F811
    client = await studio.signed_in()
    made = await exempt_draft(client)
    assert made["vat_exemption"] == REASON
    frozen = (await client.get(f"/invoices/{made['id']}/issue")).json()
    assert frozen["tax_to_confirm"] == [] and "confirm_tax" not in frozen["request"]
    issued = await issue(client, made, **frozen["request"])
    assert issued.status_code == 201, issued.text
    db = studio.settings.db_path
    assert tuple(rows(db, "SELECT status, vat_exemption FROM invoices WHERE id = ?",
                      made["id"])[0]) == ("issued", REASON)
    assert audit_database(studio.settings) == []  # the frozen SHA-256 covers the reason

    page = (await client.get(f"/invoices/{made['id']}/document", headers=PAGE)).text
    assert 'class="tax-note"' in page and "§ 19 UStG" in page
    pdf = (await client.get(f"/invoices/{made['id']}.pdf")).content
    text = " ".join("".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages).split())
    assert "§ 19 UStG" in text
    xml = (await client.get(f"/invoices/{made['id']}.xml")).content
    assert breakdown(xml) == [("E", "0", REASON, "")]
    assert failed_rules(xml) == []

    # An issued invoice keeps it: an edit is refused as ever.
    refused = await client.patch(f"/invoices/{made['id']}", json={
        "revision": made["revision"], "vat_exemption": "Other"})
    assert refused.status_code == 409
    assert scalar(db, "SELECT vat_exemption FROM invoices WHERE id = ?", made["id"]) == REASON

    # Its credit note reverses the same treatment, with the same words.
    credit = await client.post(f"/invoices/{made['id']}/credit-note",
                               json={"request_id": str(uuid.uuid4())})
    assert credit.status_code == 201, credit.text
    assert credit.json()["vat_exemption"] == REASON


async def test_without_a_reason_the_domestic_zero_is_asked_about_and_says_where_to_give_it(
        studio) -> None:
    client = await studio.signed_in()
    made = await exempt_draft(client, reason=None)
    assert made["vat_exemption"] == ""
    frozen = (await client.get(f"/invoices/{made['id']}/issue")).json()
    assert frozen["request"]["confirm_tax"] is False
    assert "give the reason on the draft" in frozen["tax_to_confirm"][0]
    form = (await client.get(f"/invoices/{made['id']}", headers=PAGE)).text
    assert 'name="vat_exemption"' in form
    # Given on the draft, the question is answered.
    edited = await client.patch(f"/invoices/{made['id']}", json={
        "revision": made["revision"], "vat_exemption": f"  {REASON}\n"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["vat_exemption"] == REASON
    assert (await client.get(f"/invoices/{made['id']}/issue")).json()["tax_to_confirm"] == []


@pytest.mark.parametrize("reason", ["x" * 301, 7, ["a"], "Grund\x00"])
async def test_a_reason_that_is_not_a_line_of_text_is_refused_naming_it(studio, reason) -> None:
    client = await studio.signed_in()
    await seller(client)
    refused = await client.post("/invoices", json={
        "customer": "Someone", "currency": "EUR", "due_date": "2099-01-01",
        "line_items": [{**NO_RATE_LINE, "tax_rate": "0"}], "vat_exemption": reason})
    assert refused.status_code == 422, refused.text
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices"
                  " WHERE customer = 'Someone'") == 0


async def test_a_schedule_keeps_its_reason_and_the_invoices_it_makes_carry_it(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    bakery = await customer(client, GERMAN_BUSINESS)
    made = await client.post("/recurring", json={
        "request_id": "exempt-schedule", "customer_id": bakery, "currency": "EUR",
        "line_items": [{**NO_RATE_LINE, "tax_rate": "0"}], "payment_terms_days": 14,
        "every": "week", "starts": dt.datetime.now(dt.UTC).date().isoformat(),
        "action": "issue", "vat_exemption": REASON})
    assert made.status_code == 201, made.text
    schedule_id = made.json()["recurring"]["id"]
    found = (await client.get(f"/recurring/{schedule_id}")).json()["recurring"]
    assert found["vat_exemption"] == REASON
    await studio.studio.db.write(recurring.make_period, schedule_id)  # or the clock did
    invoice = rows(studio.settings.db_path, "SELECT status, vat_exemption FROM invoices"
                   " WHERE recurring_id = ?", schedule_id)
    assert [tuple(row) for row in invoice] == [("issued", REASON)]
    # "Repeat this invoice" starts the schedule's form with the invoice's reason.
    issued = await exempt_draft(client)
    assert (await issue(client, issued)).status_code == 201
    form = (await client.get(f"/recurring/new?invoice_id={issued['id']}", headers=PAGE)).text
    assert f'name="vat_exemption" maxlength="300" value="{REASON}"' in form

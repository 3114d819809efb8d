"""Tried from outside, as a small business and as a hostile client would: what did not hold.
Each test states what should be so; each was marked xfail(strict) until the studio did it."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from studio.config import Settings
from tests.conftest import days_ahead, running, scalar, table_counts
from tests.mailserver import MailServer
from tests.test_facturx import SELLER, issue
from tests.test_facturx_rules import failed_rules  # noqa: F401  (the Schematron, compiled once)

pytestmark = pytest.mark.anyio
TODAY = dt.datetime.now(dt.UTC).date().isoformat()
LINE = {"description": "Design work", "quantity": "1", "unit_price": "100.00", "tax_rate": "19"}


def payment(amount: str = "1.00", **changes: Any) -> dict[str, Any]:
    return {"request_id": str(uuid.uuid4()), "amount": amount, "date": TODAY,
            "method": "bank_transfer", **changes}


async def issued_draft(client: Any, **fields: Any) -> dict[str, Any]:
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    made = await client.post("/invoices", json={
        "customer": "Plain Co", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [LINE], **fields})
    assert made.status_code == 201, made.text
    return await issue(client, made.json()["id"])


async def test_a_payment_on_an_invoice_paid_in_full_says_it_is_paid(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_draft(client)
    full = await client.post(f"/invoices/{invoice['id']}/payments",
                             json=payment(invoice["amount_due"]))
    assert full.status_code == 201, full.text
    before = table_counts(studio.settings.db_path)

    again = await client.post(f"/invoices/{invoice['id']}/payments", json=payment("1.00"))

    assert table_counts(studio.settings.db_path) == before
    assert again.status_code == 409, again.text
    assert again.json()["detail"] == "nothing_due"
    assert "0.00" not in again.json()["message"], again.text
    assert "paid in full" in again.json()["message"], again.text


async def test_a_payment_reference_with_a_control_character_is_refused(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_draft(client)
    before = table_counts(studio.settings.db_path)

    reply = await client.post(f"/invoices/{invoice['id']}/payments",
                              json=payment(reference="Transfer \x1b[31m42"))

    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == "invalid_text"
    assert table_counts(studio.settings.db_path) == before


async def test_an_email_message_with_a_control_character_is_refused(
        settings: Settings, smtp: MailServer) -> None:
    mailing = settings.with_changes(smtp_url=smtp.url, mail_from="billing@studio.test")
    async with running(mailing) as studio:
        client = await studio.signed_in()
        invoice = await issued_draft(client)
        before = scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sends")

        reply = await client.post(f"/invoices/{invoice['id']}/send", json={
            "request_id": "send-control", "to": "accounts@plain.test",
            "message": "Hello\x1b[2J, please pay."})

        assert reply.status_code == 422, reply.text
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sends") == before


async def test_the_e_invoice_of_a_buyer_typed_by_name_meets_en16931_or_is_not_made(
        studio, failed_rules) -> None:  # noqa: F811
    """A buyer typed by name alone has no country, which EN 16931 asks of every e-invoice
    (BR-11): no e-invoice that breaks the rules is made; the answer says what is missing, and
    the page offers the PDF alone."""
    client = await studio.signed_in()
    invoice = await issued_draft(client)
    for ending in (".xml", ".facturx.pdf"):
        reply = await client.get(f"/invoices/{invoice['id']}{ending}")
        assert reply.status_code == 409, reply.text
        assert reply.json()["detail"] == "einvoice_incomplete"
        assert "the buyer's country" in reply.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM issued_documents"
                  " WHERE invoice_id = ? AND layout LIKE 'facturx-%'", invoice["id"]) == 0
    page = (await client.get(f"/invoices/{invoice['id']}", headers={"Accept": "text/html"})).text
    assert 'id="facturx-link"' not in page and "the buyer&#39;s country" in page
    # The same seller's invoice to a customer with a country is an e-invoice that meets them.
    customer = await client.post("/customers", json={
        "name": "Plain Co", "country": "FR", "address": "1 Rue A\n75001 Paris"})
    made = await client.post("/invoices", json={
        "customer_id": customer.json()["id"], "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [LINE]})
    complete = await issue(client, made.json()["id"])
    xml = await client.get(f"/invoices/{complete['id']}.xml")
    assert xml.status_code == 200, xml.text
    assert failed_rules(xml.content) == []


async def test_an_invoice_due_before_its_issue_date_is_not_issued(studio) -> None:
    client = await studio.signed_in()
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    made = await client.post("/invoices", json={
        "customer": "Plain Co", "currency": "EUR", "due_date": "1999-01-01",
        "line_items": [LINE]})
    assert made.status_code in (201, 422), made.text
    if made.status_code == 422:
        return
    draft_id = made.json()["id"]

    reply = await client.post(f"/invoices/{draft_id}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})

    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == "due_before_issue"
    assert f"issued today, {TODAY}, but it is due 1999-01-01" in reply.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  draft_id) == "draft"


async def test_an_export_to_the_last_day_is_named_after_that_day(studio) -> None:
    client = await studio.signed_in()
    for kind in ("invoices", "payments"):
        reply = await client.get(f"/exports/{kind}.csv?from=2026-01-01&to=9999-12-31")
        assert reply.status_code == 200, reply.text
        assert "to-9999-12-31" in reply.headers["content-disposition"], reply.headers


async def test_a_customer_whose_name_shows_nothing_is_refused(studio) -> None:
    client = await studio.signed_in()
    before = table_counts(studio.settings.db_path)

    reply = await client.post("/customers", json={"name": "\u200b"})

    assert reply.status_code == 422, reply.text
    assert table_counts(studio.settings.db_path) == before


async def test_a_customer_search_with_a_nul_character_says_what_is_wrong(studio) -> None:
    client = await studio.signed_in()
    reply = await client.get("/customers", params={"q": "a\x00"})
    assert reply.status_code == 422, reply.text
    assert "200 characters" not in reply.json()["message"], reply.text
    listed = await client.get("/invoices", params={"q": "\x00"})
    assert listed.status_code == 422, listed.text
    assert listed.json() == reply.json()


async def test_an_edit_that_changes_nothing_is_not_a_new_revision(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/invoices", json={
        "customer": "Plain Co", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [LINE]})
    assert made.status_code == 201, made.text
    draft_id = made.json()["id"]

    reply = await client.patch(f"/invoices/{draft_id}", json={
        "revision": 1, "status": "issued", "number": "INV-1999-0001"})

    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  draft_id) == "draft"
    assert reply.status_code >= 400 or scalar(
        studio.settings.db_path, "SELECT revision FROM invoices WHERE id = ?", draft_id) == 1, \
        reply.text

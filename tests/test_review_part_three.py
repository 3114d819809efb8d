"""Outside review of part three (customers, the full invoice, payments, sending, share links,
Factur-X): each test states a promise of DESIGN.md and asserts it on the answers and on the
database. A test marked xfail(strict=True) names a finding not yet fixed: it fails today, and
once the fix lands it passes, so the mark must go with the fix."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import sqlite3
import uuid
from typing import Any

import httpx
import pytest

from studio.ops.demo import DEMO_PASSWORD
from studio.store import paging
from tests import backends
from tests.conftest import (
    ADA,
    Running,
    database_digest,
    days_ahead,
    rows,
    running,
    scalar,
    table_counts,
)
from tests.mailserver import Inbox, MailServer
from tests.test_sending import wait_for, with_mail

pytestmark = pytest.mark.anyio
TODAY = dt.datetime.now(dt.UTC).date().isoformat()


async def signed_in(studio: Running) -> httpx.AsyncClient:
    """A client that sees a server error as a 500 answer, as a browser would, not as an
    exception raised into the test."""
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=studio.app, raise_app_exceptions=False),
        base_url="http://studio.test", headers={"Accept": "application/json"})
    reply = await client.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
    assert reply.status_code == 200, reply.text
    return client


def draft_body(**changes: Any) -> dict[str, Any]:
    return {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(90),
            "line_items": [{"description": "Framing", "quantity": "1", "unit_price": "100",
                            "tax_rate": "19"}], **changes}


async def issued(client: httpx.AsyncClient, **changes: Any) -> httpx.Response | str:
    """A draft made and issued: its id, or the answer that refused the draft."""
    made = await client.post("/invoices", json=draft_body(**changes))
    if made.status_code >= 300:
        return made
    draft = made.json()
    reply = await client.post(f"/invoices/{draft['id']}/issue",
                              json={"request_id": str(uuid.uuid4()),
                                    "revision": draft["revision"]})
    assert reply.status_code == 201, reply.text
    return draft["id"]


# --- an issued invoice that can never be sent ---------------------------------------------------

CONTROL = {"customer": {"customer": "Acme\x01Ltd"},
           "notes": {"notes": "Thanks\x0bagain"},
           "line description": {"line_items": [{"description": "Frame\x02work", "quantity": "1",
                                                "unit_price": "100", "tax_rate": "19"}]}}


@pytest.mark.parametrize("where", list(CONTROL))
async def test_an_issued_invoice_downloads_as_facturx_and_is_emailed_whatever_text_it_holds(
        settings: Any, smtp: MailServer, inbox: Inbox, where: str) -> None:
    """Either the text is refused before anything is issued, or the issued invoice's
    e-invoice is answered (here refused for its missing buyer country, never an error) and its
    email leaves: an issued invoice never changes, so one that can never be sent cannot be
    mended."""
    async with running(with_mail(settings, smtp)) as studio:
        client = await signed_in(studio)
        before = table_counts(settings.db_path)
        invoice_id = await issued(client, **CONTROL[where])
        if isinstance(invoice_id, httpx.Response):
            assert 400 <= invoice_id.status_code < 500, invoice_id.text
            assert table_counts(settings.db_path) == before
            return
        for ending in (".xml", ".facturx.pdf"):
            reply = await client.get(f"/invoices/{invoice_id}{ending}")
            # These drafts name their buyer by name alone, with no country, which every
            # e-invoice must carry: refused as such, whatever text the invoice holds.
            assert reply.status_code == 409, (ending, reply.text)
            assert reply.json()["detail"] == "einvoice_incomplete"
        sent = await client.post(f"/invoices/{invoice_id}/send",
                                 json={"request_id": "ctl", "to": "accounts@acme.test"})
        assert sent.status_code == 202, sent.text
        await wait_for(lambda: scalar(settings.db_path, "SELECT status FROM sends WHERE id = ?",
                                      sent.json()["send_id"]) != "queued",
                       seconds=60.0, what="the send to leave the queue")
        assert scalar(settings.db_path, "SELECT status FROM sends WHERE id = ?",
                      sent.json()["send_id"]) == "sent"
        assert len(inbox.messages) == 1


# --- a recipient the mail server cannot be told about ------------------------------------------


async def test_a_send_to_an_address_smtp_cannot_carry_is_refused_or_fails_with_a_reason(
        settings: Any, smtp: MailServer, inbox: Inbox) -> None:
    """A send is queued, sent or failed: it never stays queued for good."""
    async with running(with_mail(settings, smtp, claim_seconds=1.0)) as studio:
        client = await signed_in(studio)
        invoice_id = studio.invoice_ids()[0]
        before = table_counts(settings.db_path)
        reply = await client.post(f"/invoices/{invoice_id}/send",
                                  json={"request_id": "umlaut", "to": "jürgen@exämple.de"})
        if 400 <= reply.status_code < 500:
            assert table_counts(settings.db_path) == before
            return
        assert reply.status_code == 202, reply.text
        send_id = reply.json()["send_id"]

        def status() -> str:
            return scalar(settings.db_path, "SELECT status FROM sends WHERE id = ?", send_id)

        await wait_for(lambda: status() != "queued", seconds=60.0, what="the send to end")
        [row] = rows(settings.db_path, "SELECT status, reply FROM sends WHERE id = ?", send_id)
        assert row["status"] in ("sent", "failed") and row["reply"], tuple(row)


# --- NUL bytes on PostgreSQL ------------------------------------------------------------------

NUL = "a\x00b"


def nul_requests(invoice_id: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    pay = {"request_id": "pay", "amount": "1", "date": TODAY, "method": "card"}
    send = {"request_id": "send", "to": "accounts@acme.test"}
    return {
        "customer's request id": ("POST", "/customers", {"name": "N", "request_id": NUL}),
        "picker's request id": ("POST", "/customers/picker", {
            "new_customer_name": "N", "new_customer_request_id": NUL}),
        "payment's request id": ("POST", f"/invoices/{invoice_id}/payments",
                                 {**pay, "request_id": NUL}),
        "payment's reference": ("POST", f"/invoices/{invoice_id}/payments",
                                {**pay, "reference": NUL}),
        "send's request id": ("POST", f"/invoices/{invoice_id}/send", {**send, "request_id": NUL}),
        "send's subject": ("POST", f"/invoices/{invoice_id}/send", {**send, "subject": NUL}),
        "send's message": ("POST", f"/invoices/{invoice_id}/send", {**send, "message": NUL}),
        "reminder's request id": ("POST", f"/invoices/{invoice_id}/remind",
                                  {**send, "request_id": NUL}),
        "draft's notes": ("POST", "/invoices", draft_body(notes=NUL)),
        "draft's customer_id": ("POST", "/invoices", draft_body(customer_id=NUL)),
        "draft's request id": ("POST", "/invoices", draft_body(request_id=NUL)),
        "invoice search": ("GET", "/invoices?q=a%00b", {}),
        "invoice list cursor": ("GET", "/invoices?after="
                                + paging.cursor(["draft", 1.0, NUL]), {}),
        "customer list cursor": ("GET", "/customers?after=" + paging.cursor([NUL, "b"]), {}),
    }


@backends.postgres_only
@pytest.mark.parametrize("name", list(nul_requests("x")))
async def test_on_postgresql_a_nul_byte_is_a_clear_refusal_changing_nothing(
        settings: Any, name: str) -> None:
    async with running(settings.with_changes(smtp_url="smtp://127.0.0.1:9",
                                             mail_from="studio@example.com")) as studio:
        client = await signed_in(studio)
        method, url, body = nul_requests(studio.invoice_ids()[0])[name]
        before = database_digest(settings.db_path)
        reply = await client.request(method, url, json=body or None)
        assert 400 <= reply.status_code < 500, (reply.status_code, reply.text)
        assert database_digest(settings.db_path) == before


# --- a page cursor made by hand ---------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "status=unpaid&", "q=a&"])
async def test_a_cursor_made_by_hand_is_refused_as_invalid_not_a_server_error(
        studio: Running, query: str) -> None:
    client = await signed_in(studio)
    for part in ("draft", "issued"):
        after = paging.cursor([part, 10**400, "x"])
        reply = await client.get(f"/invoices?{query}after={after}")
        assert 400 <= reply.status_code < 500, (reply.status_code, reply.text)
        assert reply.json()["detail"] == "invalid_cursor"


# --- the buyer issued is the buyer reviewed -------------------------------------------------


async def test_issuing_freezes_the_buyer_the_person_reviewed_or_refuses(studio: Running) -> None:
    client = await signed_in(studio)
    db = studio.settings.db_path
    customer = (await client.post("/customers", json={
        "name": "Reviewed GmbH", "address": "Old Street 1", "country": "DE"})).json()
    draft = (await client.post("/invoices", json=draft_body(
        customer_id=customer["id"], customer=None) | {"customer": "Reviewed GmbH"})).json()
    review = await client.get(f"/invoices/{draft['id']}/issue", headers={"Accept": "text/html"})
    assert "Old Street 1" in review.text
    # Meanwhile, in another tab, the customer moves.
    moved = await client.patch(f"/customers/{customer['id']}", json={
        "revision": customer["revision"], "address": "New Street 9"})
    assert moved.status_code == 200, moved.text
    # The person presses Issue: the page sends what it froze when it opened (studio.js).
    frozen = json.loads(html.unescape(re.search(r'data-frozen="([^"]*)"', review.text)[1]))
    reply = await client.post(f"/invoices/{draft['id']}/issue",
                              json={**frozen, "request_id": "reviewed"})
    if reply.status_code == 409:  # refused: the person reviews again
        assert reply.json()["detail"] == "customer_changed", reply.text
        assert scalar(db, "SELECT status FROM invoices WHERE id = ?", draft["id"]) == "draft"
        return
    assert reply.status_code == 201, reply.text
    buyer = scalar(db, "SELECT buyer FROM invoices WHERE id = ?", draft["id"])
    assert "Old Street 1" in buyer, buyer


# --- a payment kept against every statement ---------------------------------------------------


@backends.sqlite_only
async def test_no_statement_changes_a_recorded_payment_on_a_bare_sqlite_connection(
        studio: Running) -> None:
    client = await signed_in(studio)
    invoice_id, db_path = studio.invoice_ids()[0], studio.settings.db_path
    made = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": "kept", "amount": "100", "date": TODAY, "method": "card"})
    assert made.status_code == 201, made.text
    payment_id = made.json()["id"]
    bare = sqlite3.connect(db_path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="payment_kept"):
            bare.execute(
                "INSERT OR REPLACE INTO payments (id, owner_id, invoice_id, amount, currency,"
                " paid_on, method, reference, created_at) SELECT id, owner_id, invoice_id,"
                " '1.00', currency, paid_on, method, reference, created_at FROM payments"
                " WHERE id = ?", (payment_id,))
    finally:
        bare.close()
    assert scalar(db_path, "SELECT amount FROM payments WHERE id = ?", payment_id) == "100.00"


# --- a customer made once -----------------------------------------------------------------------


async def test_a_create_replayed_after_the_customer_was_deleted_makes_no_second_customer(
        studio: Running) -> None:
    client = await signed_in(studio)
    db = studio.settings.db_path
    body = {"request_id": "made-once", "name": "Once Only Ltd"}
    first = await client.post("/customers", json=body)
    assert first.status_code == 201, first.text
    gone = await client.delete(f"/customers/{first.json()['id']}")
    assert gone.status_code == 200, gone.text
    again = await client.post("/customers", json=body)
    assert again.status_code != 201, again.text
    assert scalar(db, "SELECT COUNT(*) FROM customers WHERE name = 'Once Only Ltd'") == 0


# --- a subject that cannot be a header ------------------------------------------------------


@pytest.mark.parametrize("subject", ["Invoice\u2028for March", "Invoice\x0bfor March"],
                         ids=["line separator", "vertical tab"])
async def test_a_subject_that_cannot_be_a_header_is_refused_or_the_email_still_leaves(
        settings: Any, smtp: MailServer, inbox: Inbox, subject: str) -> None:
    """One request is one email: a send accepted with 202 leaves, or ends failed with a
    reason; a subject the email cannot carry is better refused, writing nothing."""
    async with running(with_mail(settings, smtp)) as studio:
        client = await signed_in(studio)
        invoice_id = studio.invoice_ids()[0]
        before = table_counts(settings.db_path)
        reply = await client.post(f"/invoices/{invoice_id}/send", json={
            "request_id": "subject", "to": "accounts@northwind.test", "subject": subject})
        if 400 <= reply.status_code < 500:
            assert table_counts(settings.db_path) == before
            return
        assert reply.status_code == 202, reply.text
        send_id = reply.json()["send_id"]
        await wait_for(lambda: scalar(settings.db_path, "SELECT status FROM sends WHERE id = ?",
                                      send_id) != "queued", seconds=60.0, what="the send to end")
        assert scalar(settings.db_path, "SELECT status FROM sends WHERE id = ?",
                      send_id) == "sent"
        assert len(inbox.messages) == 1

"""Sending, exactly once: an invoice or a reminder queued with its request, delivered by the
worker to a real SMTP server (aiosmtpd on loopback), and shown on the invoice page."""

from __future__ import annotations

import asyncio
import hashlib
import io
import time
from typing import Any

import anyio
import httpx
import pytest
from pypdf import PdfReader

from studio import addresses
from studio.config import Settings, from_environment
from studio.mail import outbox
from studio.mail import smtp as mail
from tests.conftest import (
    ADA,
    BEN,
    Running,
    database_digest,
    days_ahead,
    execute,
    rows,
    running,
    scalar,
)
from tests.mailserver import Inbox, MailServer
from tests.test_facturx import issued_with_two_rates
from tests.test_words_pages import assert_plain

pytestmark = pytest.mark.anyio

SENDER = "Ada's studio <billing@studio.test>"
PAGE = {"Accept": "text/html"}


def with_mail(settings: Settings, server: MailServer, **changes: Any) -> Settings:
    return settings.with_changes(smtp_url=server.url, mail_from=SENDER, **changes)


def send_body(request_id: str = "send-1", **fields: Any) -> dict[str, Any]:
    return {"request_id": request_id, "to": "accounts@northwind.test", **fields}


async def wait_for(check: Any, seconds: float = 15.0, what: str = "it") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await anyio.sleep(0.05)


def send_row(studio: Running, send_id: str) -> Any:
    return rows(studio.settings.db_path, "SELECT * FROM sends WHERE id = ?", send_id)[0]


def count(studio: Running, sql: str, *params: Any) -> int:
    return scalar(studio.settings.db_path, sql, *params)


@pytest.fixture
async def mailing(settings: Settings, smtp: MailServer) -> Any:
    async with running(with_mail(settings, smtp)) as started:
        yield started


# --- queueing and delivering -----------------------------------------------------------------


async def test_a_send_is_queued_then_delivered_once_with_the_pdf_and_a_share_link(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    reply = await client.post(f"/invoices/{invoice_id}/send", json=send_body(
        cc=["boss@northwind.test"], message="Hello,\n\nhere it is."))
    assert reply.status_code == 202, reply.text
    assert reply.json()["status"] == "queued"
    send_id = reply.json()["send_id"]
    row = send_row(mailing, send_id)
    assert row["kind"] == "invoice" and row["recipient"] == "accounts@northwind.test"
    assert row["document_sha256"] == count(
        mailing, "SELECT frozen_sha256 FROM invoices WHERE id = ?", invoice_id)
    assert row["message_id"] == f"<send-{send_id}@studio.test>"
    assert row["share_link_id"] and count(
        mailing, "SELECT COUNT(*) FROM share_links WHERE id = ?", row["share_link_id"]) == 1

    await wait_for(lambda: send_row(mailing, send_id)["status"] == "sent", what="delivery")
    assert len(inbox.messages) == 1
    message = inbox.messages[0]
    assert message["Message-ID"] == row["message_id"]
    assert message["To"] == "accounts@northwind.test" and message["Cc"] == "boss@northwind.test"
    assert message["From"] == SENDER
    body = message.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert body.startswith("Hello,\n\nhere it is.")
    assert "http://studio.test/i/" in body
    pdf = next(part for part in message.iter_attachments())
    assert pdf.get_content_type() == "application/pdf"
    assert pdf.get_filename().endswith(".pdf")
    # Its buyer was typed by name, with no country, so no e-invoice can be made of it: the
    # email carries the invoice's own PDF, the bytes every download of it gives.
    assert pdf.get_content() == (await client.get(f"/invoices/{invoice_id}.pdf")).content
    assert "factur-x.xml" not in PdfReader(io.BytesIO(pdf.get_content())).attachments
    sent = send_row(mailing, send_id)
    assert sent["sent_at"] is not None and sent["reply"].startswith("250")
    assert sent["claim"] is None and sent["attempts"] == 1


async def test_an_invoice_that_can_be_an_e_invoice_is_emailed_as_its_factur_x_pdf(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice = await issued_with_two_rates(client)
    reply = await client.post(f"/invoices/{invoice['id']}/send", json=send_body("e-invoice"))
    assert reply.status_code == 202, reply.text
    await wait_for(lambda: send_row(mailing, reply.json()["send_id"])["status"] == "sent",
                   what="delivery")
    [message] = inbox.messages
    pdf = next(part for part in message.iter_attachments()).get_content()
    # The e-invoice: the document's PDF with its CII XML inside, as its download gives it.
    assert "factur-x.xml" in PdfReader(io.BytesIO(pdf)).attachments
    assert pdf == (await client.get(f"/invoices/{invoice['id']}.facturx.pdf")).content


async def test_replayed_send_requests_are_one_send_and_one_email(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    first = await client.post(f"/invoices/{invoice_id}/send", json=send_body())
    replies = [await client.post(f"/invoices/{invoice_id}/send", json=send_body())
               for _ in range(3)]
    assert first.status_code == 202
    assert {r.status_code for r in replies} == {200}
    assert {r.json()["send_id"] for r in replies} == {first.json()["send_id"]}
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 1
    await wait_for(lambda: len(inbox.messages) == 1, what="the email")
    again = await client.post(f"/invoices/{invoice_id}/send", json=send_body())
    assert again.status_code == 200 and again.json()["send_id"] == first.json()["send_id"]
    await anyio.sleep(1.0)  # a second email would have had time to arrive
    assert len(inbox.messages) == 1


async def test_a_request_id_reused_with_other_input_is_refused_and_changes_nothing(
        mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    assert (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
            ).status_code == 202
    before = count(mailing, "SELECT COUNT(*) FROM sends")
    other = await client.post(f"/invoices/{invoice_id}/send",
                              json=send_body(subject="Another subject"))
    assert other.status_code == 409 and other.json()["detail"] == "request_id_conflict"
    assert count(mailing, "SELECT COUNT(*) FROM sends") == before == 1


async def test_racing_duplicate_sends_make_one_row_and_one_email(
        mailing: Running, inbox: Inbox) -> None:
    clients = [await mailing.signed_in() for _ in range(2)]
    invoice_id = mailing.invoice_ids()[1]
    replies: list[httpx.Response] = []

    async def post(client: httpx.AsyncClient) -> None:
        replies.append(await client.post(f"/invoices/{invoice_id}/send",
                                          json=send_body("raced")))

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(post, clients[n % 2])
    assert sorted(r.status_code for r in replies) == [200] * 11 + [202]
    assert len({r.json()["send_id"] for r in replies}) == 1
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 1
    assert count(mailing, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'send'") == 1
    await wait_for(lambda: len(inbox.messages) == 1, what="the email")
    await anyio.sleep(1.0)
    assert len(inbox.messages) == 1


async def test_sending_without_a_mail_server_is_refused_saying_what_to_set(
        studio: Running) -> None:
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    before = database_digest(studio.settings.db_path)
    for path in ("send", "remind"):
        reply = await client.post(f"/invoices/{invoice_id}/{path}", json=send_body())
        assert reply.status_code == 409, reply.text
        assert reply.json()["detail"] == "sending_not_configured"
        assert "STUDIO_SMTP_URL" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "cannot send email yet" in page and "Send by email" not in page


async def test_a_draft_is_not_sent(mailing: Running) -> None:
    client = await mailing.signed_in()
    draft = (await client.post("/invoices", json={
        "customer": "Draft Co", "currency": "EUR", "due_date": days_ahead(90),
        "line_items": [{"description": "Work", "quantity": "1", "unit_price": "10"}]})).json()
    reply = await client.post(f"/invoices/{draft['id']}/send", json=send_body())
    assert reply.status_code == 409 and reply.json()["detail"] == "invoice_not_issued"
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 0
    assert count(mailing, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'send'") == 0


async def test_someone_elses_invoice_is_as_absent_as_a_made_up_one(mailing: Running) -> None:
    client = await mailing.signed_in(BEN)
    reply = await client.post(f"/invoices/{mailing.invoice_ids(ADA)[0]}/send",
                              json=send_body())
    assert reply.status_code == 404 and reply.json()["detail"] == "invoice_not_found"
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 0


@pytest.mark.parametrize(("fields", "code"), [
    ({"subject": "Invoice\r\nBcc: everyone@evil.test"}, "invalid_subject"),
    ({"subject": "Invoice\nBcc: everyone@evil.test"}, "invalid_subject"),
    ({"to": "a@b.test\r\nBcc: everyone@evil.test"}, "invalid_recipient"),
    ({"cc": "a@b.test\nBcc: everyone@evil.test"}, "invalid_recipient"),
    ({"cc": ["fine@b.test", "x@y.test\r\nBcc: z@evil.test"]}, "invalid_recipient"),
    ({"to": "not an address"}, "invalid_recipient"),
    ({"to": "two@a.test, three@b.test"}, "invalid_recipient"),
    ({"cc": [f"c{n}@b.test" for n in range(11)]}, "invalid_recipient"),
    ({"subject": "Invoice\u2028Bcc: everyone@evil.test"}, "invalid_subject"),
    ({"subject": "Invoice\x0bfor March"}, "invalid_subject"),
    ({"subject": "Invoice\x85for March"}, "invalid_subject"),
    ({"subject": "Invoice\x01for March"}, "invalid_subject"),
    ({"to": "jürgen@☃.example"}, "invalid_recipient"),
    ({"cc": ["fine@b.test", "jürgen@-exämple.de"]}, "invalid_recipient"),
    ({"to": "ju\u200brgen@example.de"}, "invalid_recipient"),
    ({"to": "a@exa\u200dmple.de"}, "invalid_recipient"),
    ({"subject": "x" * 201}, "invalid_subject"),
    ({"message": "x" * 10_001}, "invalid_message"),
    ({"message": 12}, "invalid_message"),
])
async def test_header_injection_and_bad_addresses_are_refused_writing_nothing(
        mailing: Running, fields: dict[str, Any], code: str) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    before = database_digest(mailing.settings.db_path)
    reply = await client.post(f"/invoices/{invoice_id}/send", json=send_body(**fields))
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == code
    assert database_digest(mailing.settings.db_path) == before


async def _issued_for_customer(studio: Running, client: httpx.AsyncClient, email_: str) -> str:
    owner = scalar(studio.settings.db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    execute(studio.settings.db_path,
            "INSERT INTO customers (id, owner_id, name, email, created_at, updated_at)"
            " VALUES (?, ?, 'Heron Press', ?, 0, 0)", f"customer-{email_}", owner, email_)
    draft = (await client.post("/invoices", json={
        "customer": "Heron Press", "customer_id": f"customer-{email_}", "currency": "EUR",
        "due_date": days_ahead(90),
        "line_items": [{"description": "Typesetting", "quantity": "1", "unit_price": "90"}]}))
    assert draft.status_code == 201, draft.text
    issued = await client.post(f"/invoices/{draft.json()['id']}/issue",
                               json={"request_id": f"issue-{email_}", "revision": 1})
    assert issued.status_code == 201, issued.text
    return draft.json()["id"]


async def test_the_recipient_defaults_to_the_customers_email(mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = await _issued_for_customer(mailing, client, "books@heron.test")
    reply = await client.post(f"/invoices/{invoice_id}/send", json={"request_id": "no-to"})
    assert reply.status_code == 202, reply.text
    row = send_row(mailing, reply.json()["send_id"])
    assert row["recipient"] == "books@heron.test"
    assert row["subject"].startswith("Invoice INV-")
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert 'value="books@heron.test"' in page


async def test_an_address_whose_domain_mail_cannot_name_is_refused_saying_so(
        mailing: Running) -> None:
    """A domain with no IDNA form (a snowman is no letter of any script) names no mail
    server: the person is told at once, whether typed or the customer's own on file."""
    client = await mailing.signed_in()
    typed = await client.post(f"/invoices/{mailing.invoice_ids()[0]}/send",
                              json=send_body(to="jürgen@☃.example"))
    invoice_id = await _issued_for_customer(mailing, client, "jürgen@☃.heron")
    before = database_digest(mailing.settings.db_path)
    on_file = await client.post(f"/invoices/{invoice_id}/send", json={"request_id": "on-file"})
    for reply in (typed, on_file):
        assert reply.status_code == 422, reply.text
        assert reply.json()["detail"] == "invalid_recipient"
        assert "is not a name a mail server can be found by" in reply.json()["message"]
        assert "jürgen@☃." in reply.json()["message"]
    assert database_digest(mailing.settings.db_path) == before
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 0


async def test_a_send_whose_email_cannot_be_made_fails_with_a_reason_and_no_second_try(
        mailing: Running, inbox: Inbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """An attachment that cannot be built would fail at every try: the send ends failed,
    saying why in a person's words, after one try, not queued for ever."""
    from studio.billing import facturx

    async def cannot_be_built(*_: Any) -> bytes:
        raise ValueError("All strings must be XML compatible")

    monkeypatch.setattr(facturx, "pdf_of", cannot_be_built)
    client = await mailing.signed_in()
    invoice = await issued_with_two_rates(client)  # one whose email attaches its Factur-X PDF
    reply = await client.post(f"/invoices/{invoice['id']}/send", json=send_body())
    assert reply.status_code == 202, reply.text
    send_id = reply.json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["status"] != "queued",
                   seconds=60.0, what="the send to end")
    row = send_row(mailing, send_id)
    assert row["status"] == "failed" and row["attempts"] == 1, dict(row)
    assert row["reply"].startswith("Not sent: the email with the invoice attached could not")
    assert "XML compatible" in row["reply"]
    await anyio.sleep(1.5)  # a retry would have come after one second
    assert send_row(mailing, send_id)["attempts"] == 1
    assert inbox.messages == []


def test_an_email_the_server_cannot_be_told_fails_for_good_not_later(
        smtp: MailServer) -> None:
    """A local part beyond ASCII to a server without SMTPUTF8: the conversation ends `failed`
    naming the address, never a try again that would fail the same."""
    message = mail.build({"recipient": "jürgen@exämple.de", "cc": "", "subject": "Invoice",
                          "message_id": "<send-x@studio.test>", "message": "Hello"},
                         SENDER, ("INV.pdf", b"%PDF-1.4"), 0.0)
    outcome = mail.deliver(addresses.mail_server(smtp.url), message, timeout=5.0)
    assert outcome.status == "failed", outcome
    assert "the mail server cannot take this address: jürgen@exämple.de" in outcome.reply


async def test_without_an_address_on_file_the_recipient_must_be_given(
        mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]  # the demo's customers have no email
    reply = await client.post(f"/invoices/{invoice_id}/send", json={"request_id": "nobody"})
    assert reply.status_code == 422 and reply.json()["detail"] == "recipient_missing"
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 0


# --- reminders -------------------------------------------------------------------------------


async def test_a_reminder_goes_for_an_unpaid_invoice_and_is_refused_once_paid(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    reply = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("remind-1"))
    assert reply.status_code == 202, reply.text
    row = send_row(mailing, reply.json()["send_id"])
    assert row["kind"] == "reminder" and row["subject"].startswith("Reminder:")
    assert "still has €2,700.00 to pay" in row["message"]
    await wait_for(lambda: send_row(mailing, row["id"])["status"] == "sent", what="the reminder")
    assert len(inbox.messages) == 1

    paid = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": "pay-all", "amount": "2700.00", "date": "2026-12-01",
        "method": "bank_transfer"})
    assert paid.status_code == 201, paid.text
    before = database_digest(mailing.settings.db_path)
    refused = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("remind-2"))
    assert refused.status_code == 409 and refused.json()["detail"] == "nothing_due"
    assert database_digest(mailing.settings.db_path) == before
    # The first reminder's request, replayed, still answers its send.
    again = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("remind-1"))
    assert again.status_code == 200 and again.json()["send_id"] == row["id"]
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "Send by email" in page and "Send a reminder" not in page


async def test_a_reminder_says_what_the_invoice_page_says_is_due_credit_notes_included(
        mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    edited = await client.patch(f"/invoices/{note['id']}", json={
        "revision": note["revision"], "line_items": [
            {"description": "Refund", "quantity": "1", "unit_price": "200.00",
             "tax_rate": "0"}]})
    assert edited.status_code == 200, edited.text
    issued = await client.post(f"/invoices/{note['id']}/issue", json={
        "request_id": "credit", "revision": edited.json()["revision"]})
    assert issued.status_code == 201, issued.text
    paid = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": "pay-some", "amount": "500.00", "date": "2026-12-01",
        "method": "bank_transfer"})
    assert paid.status_code == 201, paid.text
    due = (await client.get(f"/invoices/{invoice_id}")).json()["amount_due"]
    assert due == "2000.00"
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "still has €2,000.00 to pay" in page
    reply = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("remind-1"))
    assert reply.status_code == 202, reply.text
    assert "still has €2,000.00 to pay" in send_row(mailing, reply.json()["send_id"])["message"]


async def test_a_reminder_reads_the_balance_the_page_reads_even_one_never_kept(
        mailing: Running) -> None:
    """An invoice issued before balances were kept has no balance row: the page works its
    balance out from its facts, and so does a reminder, instead of finding nothing due."""
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    execute(mailing.settings.db_path, "DELETE FROM balances WHERE invoice_id = ?", invoice_id)
    shown = (await client.get(f"/invoices/{invoice_id}")).json()
    assert (shown["payment_status"], shown["amount_due"]) == ("unpaid", "2700.00")
    reply = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("remind-1"))
    assert reply.status_code == 202, reply.text
    assert "still has €2,700.00 to pay" in send_row(mailing, reply.json()["send_id"])["message"]


async def test_a_reminders_message_is_the_persons_own_words_when_given(
        mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[1]
    reply = await client.post(f"/invoices/{invoice_id}/remind", json=send_body(
        "own-words", subject="A gentle nudge", message="Dear Blue Harbor,\n\nplease pay."))
    row = send_row(mailing, reply.json()["send_id"])
    assert row["subject"] == "A gentle nudge"
    assert row["message"].startswith("Dear Blue Harbor,\n\nplease pay.\n\nView the invoice")


# --- outcomes --------------------------------------------------------------------------------


async def test_a_permanent_refusal_fails_the_send_with_the_servers_reply_shown(
        mailing: Running, inbox: Inbox) -> None:
    inbox.refuse_rcpt = "550 5.1.1 No such mailbox here"
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    send_id = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
               ).json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["status"] == "failed", what="failed")
    row = send_row(mailing, send_id)
    assert "550 5.1.1 No such mailbox here" in row["reply"]
    assert row["attempts"] == 1 and row["sent_at"] is None and inbox.messages == []
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "Not delivered" in page and "No such mailbox here" in page
    listed = (await client.get(f"/invoices/{invoice_id}/sends")).json()
    assert listed[0]["status"] == "failed" and "550" in listed[0]["reply"]
    await anyio.sleep(1.5)  # failed for good: never tried again
    assert send_row(mailing, send_id)["attempts"] == 1


async def test_a_temporary_refusal_keeps_the_send_queued_with_a_later_try(
        mailing: Running, inbox: Inbox) -> None:
    inbox.refuse_rcpt = "451 4.3.0 Try again later"
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    send_id = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
               ).json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["attempts"] >= 2, what="a second try")
    row = send_row(mailing, send_id)
    assert row["status"] == "queued" and "451" in row["reply"]
    assert row["next_attempt_at"] > row["created_at"]
    inbox.refuse_rcpt = ""
    await wait_for(lambda: send_row(mailing, send_id)["status"] == "sent", what="delivery")
    assert len(inbox.messages) == 1


def test_the_wait_between_tries_doubles_and_is_capped_at_thirty_seconds() -> None:
    cap = Settings().send_retry_cap_seconds
    assert cap == 30.0
    assert [outbox.backoff(n, cap) for n in (1, 2, 3, 4, 5, 6, 7, 50)] == \
        [1, 2, 4, 8, 16, 30, 30, 30]


def test_replies_are_judged_by_their_first_digit() -> None:
    assert mail.judged(250, b"Ok").status == "sent"
    assert mail.judged(421, b"busy").status == "retry"
    assert mail.judged(452, "full").status == "retry"
    assert mail.judged(550, b"no such user") == mail.Outcome("failed", "550 no such user")


async def test_several_workers_never_hold_one_send_and_a_timed_out_claim_is_taken_over(
        mailing: Running) -> None:
    db = mailing.studio.db
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    # The studio's own worker is stopped from claiming: these claims are the test's.
    assert mailing.studio.worker.delivery is not None
    await stop_claiming(mailing.studio.worker.delivery)
    send_id = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
               ).json()["send_id"]
    now = count(mailing, "SELECT next_attempt_at FROM sends WHERE id = ?", send_id) + 0.01
    first = await db.write(outbox.claim, "first", 30.0, now)
    assert first is not None and first["id"] == send_id
    assert await db.write(outbox.claim, "second", 30.0, now + 1) is None
    # The first worker died: its claim times out and another takes the send over.
    taken = await db.write(outbox.claim, "second", 30.0, now + 31)
    assert taken is not None and taken["id"] == send_id and taken["attempts"] == 2
    late = await db.write(outbox.record, send_id, "first", mail.Outcome("sent", "250 late"),
                          30.0, now + 32)
    assert late is False and send_row(mailing, send_id)["status"] == "queued"
    assert await db.write(outbox.record, send_id, "second", mail.Outcome("sent", "250 ok"),
                          30.0, now + 33) is True
    row = send_row(mailing, send_id)
    assert row["status"] == "sent" and row["reply"] == "250 ok" and row["claim"] is None


async def stop_claiming(delivery: Any) -> None:
    """The studio's own delivery claims nothing from now on: once its loop has called the
    stand-in, none of its own claims is still on its way to the database."""
    called = anyio.Event()

    async def never() -> None:
        called.set()

    delivery.claim = never  # type: ignore[method-assign]
    delivery.wake.set()
    with anyio.fail_after(30):
        await called.wait()


async def test_racing_claimers_each_take_a_different_send(mailing: Running) -> None:
    db = mailing.studio.db
    await stop_claiming(mailing.studio.worker.delivery)
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    for n in range(6):
        await client.post(f"/invoices/{invoice_id}/send", json=send_body(f"many-{n}"))
    later = time.time() + 5  # every send is due
    claimed = await asyncio.gather(*[
        db.write(outbox.claim, f"claimer-{n}", 30.0, later) for n in range(10)])
    taken = [c["id"] for c in claimed if c is not None]
    assert len(taken) == 6 and len(set(taken)) == 6


async def test_one_accounts_many_emails_do_not_hold_back_anothers_one(
        mailing: Running, inbox: Inbox) -> None:
    """Accounts take turns at the worker, as tasks do: Ben's one email, queued after Ada's
    thirty, goes among the first few, not last."""
    delivery = mailing.studio.worker.delivery
    assert delivery is not None
    await stop_claiming(delivery)
    ada, ben = await mailing.signed_in(), await mailing.signed_in(BEN)
    invoice_id = mailing.invoice_ids()[0]
    for n in range(30):
        reply = await ada.post(f"/invoices/{invoice_id}/send", json=send_body(f"batch-{n}"))
        assert reply.status_code == 202, reply.text
    bens = await ben.post(f"/invoices/{mailing.invoice_ids(BEN)[0]}/send",
                          json=send_body("one", to="ben.customer@quay.test"))
    assert bens.status_code == 202, bens.text
    bens_id = f"<send-{bens.json()['send_id']}@studio.test>"
    # Both documents ready, so the emails arrive in the order they were claimed.
    for client, owner in ((ada, ADA), (ben, BEN)):
        warm = await client.get(f"/invoices/{mailing.invoice_ids(owner)[0]}.pdf")
        assert warm.status_code == 200
    claimed: list[str] = []

    async def claim() -> Any:
        send = await type(delivery).claim(delivery)
        if send is not None:
            claimed.append(send["id"])
        return send

    delivery.claim = claim  # type: ignore[method-assign]
    delivery.wake.set()
    await wait_for(lambda: bens_id in inbox.message_ids(), what="Ben's email")
    assert claimed.index(bens.json()["send_id"]) == 1, claimed
    arrived = inbox.message_ids()
    assert arrived.index(bens_id) < 1 + outbox_slots(), arrived
    # The server takes an email a moment before the worker records it as sent.
    await wait_for(lambda: count(mailing, "SELECT COUNT(*) FROM sends WHERE status = 'sent'")
                   == 31, seconds=60, what="every email recorded as sent")
    assert len(inbox.messages) == 31


def outbox_slots() -> int:
    from studio.runtime.worker import DELIVERY_SLOTS

    return DELIVERY_SLOTS


async def test_claims_take_turns_between_accounts_oldest_first_within_each(
        mailing: Running) -> None:
    db = mailing.studio.db
    await stop_claiming(mailing.studio.worker.delivery)
    ada, ben = await mailing.signed_in(), await mailing.signed_in(BEN)
    adas = [(await ada.post(f"/invoices/{mailing.invoice_ids()[0]}/send",
                            json=send_body(f"a-{n}"))).json()["send_id"] for n in range(4)]
    bens = [(await ben.post(f"/invoices/{mailing.invoice_ids(BEN)[0]}/send",
                            json=send_body(f"b-{n}"))).json()["send_id"] for n in range(2)]
    later = time.time() + 5
    taken = [(await db.write(outbox.claim, f"c-{n}", 30.0, later))["id"]
             for n in range(6)]
    assert taken == [adas[0], bens[0], adas[1], bens[1], adas[2], adas[3]]
    assert await db.write(outbox.claim, "c-7", 30.0, later) is None


async def test_an_email_put_off_for_days_is_given_up_with_the_servers_last_reply(
        mailing: Running, inbox: Inbox) -> None:
    inbox.refuse_rcpt = "451 4.3.0 Mailbox busy, try later"
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    delivery = mailing.studio.worker.delivery
    await stop_claiming(delivery)
    send_id = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
               ).json()["send_id"]
    # Queued just over the limit ago, as if the server had put it off all that while.
    execute(mailing.settings.db_path, "UPDATE sends SET created_at = created_at - ?"
            " WHERE id = ?", outbox.GIVE_UP_AFTER_S + 1, send_id)
    del delivery.claim
    await wait_for(lambda: send_row(mailing, send_id)["status"] != "queued", what="an end")
    row = send_row(mailing, send_id)
    assert row["status"] == "failed" and row["sent_at"] is None and row["claim"] is None
    assert "451 4.3.0 Mailbox busy, try later" in row["reply"]
    assert "3 days" in row["reply"] and inbox.messages == []
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert_plain("invoice, given up", page)
    assert "Not delivered" in page and "Mailbox busy, try later" in page
    await anyio.sleep(1.5)  # failed for good: never tried again
    assert send_row(mailing, send_id)["attempts"] == row["attempts"]


async def test_a_temporary_refusal_is_tried_again_until_the_limit_and_not_after(
        mailing: Running) -> None:
    db = mailing.studio.db
    await stop_claiming(mailing.studio.worker.delivery)
    client = await mailing.signed_in()
    sends = [(await client.post(f"/invoices/{mailing.invoice_ids()[0]}/send",
                                json=send_body(f"limit-{n}"))).json()["send_id"]
             for n in range(2)]
    later = mail.Outcome("retry", "421 4.7.0 Too busy")
    inside = send_row(mailing, sends[0])["created_at"] + outbox.GIVE_UP_AFTER_S - 1
    past = send_row(mailing, sends[1])["created_at"] + outbox.GIVE_UP_AFTER_S
    for send_id, now in zip(sends, (inside, past), strict=True):
        assert (await db.write(outbox.claim, send_id, 30.0, now))["id"] == send_id
        assert await db.write(outbox.record, send_id, send_id, later, 30.0, now) is True
    kept, given_up = send_row(mailing, sends[0]), send_row(mailing, sends[1])
    assert kept["status"] == "queued" and kept["next_attempt_at"] == pytest.approx(inside + 1)
    assert given_up["status"] == "failed" and given_up["reply"].startswith("421 4.7.0 Too busy")
    assert outbox.GIVE_UP_AFTER_S == 3 * 86400


# --- settings --------------------------------------------------------------------------------


def test_the_mail_server_comes_from_the_environment_and_never_shows_its_password() -> None:
    settings = from_environment({"STUDIO_SMTP_URL": "smtp://ada:s3cret@mail.test:2525",
                                 "STUDIO_MAIL_FROM": "billing@studio.test"})
    server = addresses.mail_server(settings.smtp_url)
    assert (server.host, server.port, server.user, server.password) == \
        ("mail.test", 2525, "ada", "s3cret")
    assert "s3cret" not in str(server) and "s3cret" not in repr(server)
    assert "s3cret" not in repr(settings)
    assert addresses.mail_server("smtps://mail.test").port == 465
    assert addresses.mail_server("smtp://mail.test").port == 587


@pytest.mark.parametrize(("env", "says"), [
    ({"STUDIO_SMTP_URL": "smtp://mail.test"}, "STUDIO_MAIL_FROM"),
    ({"STUDIO_SMTP_URL": "http://mail.test", "STUDIO_MAIL_FROM": "a@b.test"}, "smtp://"),
    ({"STUDIO_SMTP_URL": "smtp://mail.test", "STUDIO_MAIL_FROM": "nobody"}, "STUDIO_MAIL_FROM"),
])
def test_a_mail_setting_that_cannot_work_stops_the_start_saying_why(
        env: dict[str, str], says: str) -> None:
    with pytest.raises(SystemExit, match=says):
        from_environment(env)


# --- the page --------------------------------------------------------------------------------


async def test_the_invoice_page_lists_every_send_in_a_persons_words(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert_plain("invoice, nothing sent", page)
    assert "Send by email" in page and "Send a reminder" in page and "Not emailed yet" in page
    assert 'name="request_id"' in page and "data-mint" in page
    sent = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())).json()
    reminded = (await client.post(f"/invoices/{invoice_id}/remind",
                                  json=send_body("r", to="late@northwind.test"))).json()
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert_plain("invoice, waiting", page)
    assert "Waiting to send" in page and 'hx-trigger="every 2s"' in page
    await wait_for(lambda: all(send_row(mailing, s["send_id"])["status"] == "sent"
                               for s in (sent, reminded)), what="both emails recorded as sent")
    assert len(inbox.messages) == 2
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert_plain("invoice, sent", page)
    for text in ("Payment reminder", "late@northwind.test", "accounts@northwind.test", "Sent"):
        assert text in page
    assert sent["send_id"] in page  # only inside Technical details (assert_plain checks)
    fragment = (await client.get(f"/invoices/{invoice_id}/sends",
                                 headers={"HX-Request": "true", "Accept": "text/html"})).text
    assert fragment.count("data-send=") == 2 and "every 2s" not in fragment


async def test_a_form_post_is_queued_and_goes_back_to_the_invoice(mailing: Running) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    form = {"request_id": "form-1", "to": "accounts@northwind.test", "cc": "",
            "subject": "Invoice", "message": "Hello"}
    reply = await client.post(f"/invoices/{invoice_id}/send", data=form,
                              headers={"HX-Request": "true", "Accept": "text/html"})
    send_id = reply.headers["HX-Redirect"].rsplit("=", 1)[1]
    assert reply.status_code == 200
    assert reply.headers["HX-Redirect"] == f"/invoices/{invoice_id}?sent={send_id}"
    page = (await client.get(reply.headers["HX-Redirect"], headers=PAGE)).text
    assert "The email to accounts@northwind.test is on its way" in page
    plain = await client.post(f"/invoices/{invoice_id}/send", data=form,
                              headers={"Accept": "text/html"})
    assert plain.status_code == 303
    assert count(mailing, "SELECT COUNT(*) FROM sends") == 1


async def test_the_link_an_email_carries_lives_as_long_as_the_share_link_setting_says(
        settings: Settings, smtp: MailServer) -> None:
    async with running(with_mail(settings, smtp, share_link_days=7.0)) as studio:
        client = await studio.signed_in()
        reply = await client.post(f"/invoices/{studio.invoice_ids()[0]}/send", json=send_body())
        assert reply.status_code == 202, reply.text
        link = rows(studio.settings.db_path, "SELECT created_at, expires_at FROM share_links"
                                             " WHERE id = ?",
                    send_row(studio, reply.json()["send_id"])["share_link_id"])[0]
    assert link["expires_at"] - link["created_at"] == pytest.approx(7 * 86400)


# --- addresses and words beyond ASCII --------------------------------------------------------


def envelope_of(inbox: Inbox, message_id: str) -> tuple[str, list[str], list[str]]:
    with inbox.lock:
        return next(envelope for message, envelope in zip(inbox.messages, inbox.envelopes,
                                                           strict=True)
                    if message["Message-ID"] == message_id)


async def test_an_internationalised_domain_goes_in_its_idna_form_and_is_kept_as_written(
        mailing: Running, inbox: Inbox) -> None:
    """The server is told `xn--exmple-cua.de` (no SMTPUTF8 needed, this server has none);
    the studio keeps and shows `exämple.de` as the person wrote it."""
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    reply = await client.post(f"/invoices/{invoice_id}/send", json=send_body(
        to="accounts@exämple.de", cc=["boss@bücher.example"]))
    assert reply.status_code == 202, reply.text
    assert reply.json()["to"] == "accounts@exämple.de"
    send_id = reply.json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["status"] != "queued", what="delivery")
    row = send_row(mailing, send_id)
    assert row["status"] == "sent", dict(row)
    assert row["recipient"] == "accounts@exämple.de" and row["cc"] == "boss@bücher.example"
    mail_from, recipients, options = envelope_of(inbox, row["message_id"])
    assert recipients == ["accounts@xn--exmple-cua.de", "boss@xn--bcher-kva.example"]
    assert mail_from == "billing@studio.test" and "SMTPUTF8" not in options
    [message] = inbox.messages
    assert message["To"] == "accounts@xn--exmple-cua.de"
    assert message["Cc"] == "boss@xn--bcher-kva.example"
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "accounts@exämple.de" in page and "xn--" not in page


async def test_a_local_part_beyond_ascii_goes_with_smtputf8_when_the_server_offers_it(
        settings: Settings) -> None:
    inbox = Inbox()
    server = MailServer(inbox, smtputf8=True)
    server.start()
    try:
        async with running(with_mail(settings, server)) as studio:
            client = await studio.signed_in()
            reply = await client.post(f"/invoices/{studio.invoice_ids()[0]}/send",
                                      json=send_body(to="jürgen@exämple.de",
                                                     cc=["zoë@example.de", "plain@example.de"]))
            assert reply.status_code == 202, reply.text
            send_id = reply.json()["send_id"]
            await wait_for(lambda: send_row(studio, send_id)["status"] != "queued",
                           what="delivery")
            row = send_row(studio, send_id)
    finally:
        server.stop()
    assert row["status"] == "sent" and row["reply"].startswith("250"), dict(row)
    assert row["recipient"] == "jürgen@exämple.de" and row["attempts"] == 1
    _, recipients, options = envelope_of(inbox, row["message_id"])
    assert "SMTPUTF8" in options
    assert recipients == ["jürgen@xn--exmple-cua.de", "zoë@example.de", "plain@example.de"]
    [message] = inbox.messages
    assert message["To"] == "jürgen@exämple.de"
    assert message["Cc"] == "zoë@example.de, plain@example.de"


async def test_a_local_part_beyond_ascii_fails_for_good_when_the_server_cannot_take_it(
        mailing: Running, inbox: Inbox) -> None:
    client = await mailing.signed_in()
    invoice_id = mailing.invoice_ids()[0]
    reply = await client.post(f"/invoices/{invoice_id}/send",
                              json=send_body(to="jürgen@exämple.de"))
    assert reply.status_code == 202, reply.text
    send_id = reply.json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["status"] != "queued", what="an end")
    row = send_row(mailing, send_id)
    assert row["status"] == "failed" and row["attempts"] == 1 and row["sent_at"] is None
    assert row["reply"].startswith(
        "Not sent: the mail server cannot take this address: jürgen@exämple.de"), row["reply"]
    assert row["recipient"] == "jürgen@exämple.de" and inbox.messages == []
    page = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert "Not delivered" in page and "cannot take this address" in page


async def test_a_subject_name_and_message_beyond_ascii_arrive_as_written(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    """Encoded words in the headers and a quoted-printable body: a server without SMTPUTF8
    or 8BITMIME takes them, and the reader sees them as written."""
    async with running(with_mail(settings, smtp).with_changes(
            mail_from="Ädas Stüdio – Köln <billing@studio.test>")) as studio:
        client = await studio.signed_in()
        reply = await client.post(f"/invoices/{studio.invoice_ids()[0]}/send", json=send_body(
            subject="Rechnung für Müller – März", message="Grüße aus Köln, 東京 too."))
        assert reply.status_code == 202, reply.text
        send_id = reply.json()["send_id"]
        await wait_for(lambda: send_row(studio, send_id)["status"] != "queued",
                       what="delivery")
        row = send_row(studio, send_id)
    assert row["status"] == "sent", dict(row)
    assert row["subject"] == "Rechnung für Müller – März"
    _, _, options = envelope_of(inbox, row["message_id"])
    assert options == []  # nothing asked of the server beyond plain SMTP
    [message] = inbox.messages
    assert message["Subject"] == "Rechnung für Müller – März"
    assert message["From"] == "Ädas Stüdio – Köln <billing@studio.test>"
    body = message.get_body(("plain",))
    assert body["Content-Transfer-Encoding"] == "quoted-printable"
    assert body.get_content().startswith("Grüße aus Köln, 東京 too.")


# --- the address links are written with --------------------------------------------------


async def test_the_link_an_email_carries_is_on_the_public_address_when_one_is_set(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    """Queued through the API on whatever address (here http://studio.test), the email's
    link is on STUDIO_PUBLIC_URL, path included, and it opens the invoice."""
    public = "https://billing.example.com/studio"
    async with running(with_mail(settings, smtp, public_url=public)) as studio:
        client = await studio.signed_in()
        reply = await client.post(f"/invoices/{studio.invoice_ids()[0]}/send", json=send_body())
        assert reply.status_code == 202, reply.text
        send_id = reply.json()["send_id"]
        await wait_for(lambda: send_row(studio, send_id)["status"] != "queued",
                       what="delivery")
        row = send_row(studio, send_id)
        assert row["status"] == "sent", dict(row)
        assert f"View the invoice online: {public}/i/" in row["message"]
        [message] = inbox.messages
        body = message.get_body(("plain",)).get_content()
        token = body.split(f"{public}/i/", 1)[1].split()[0]
        assert "studio.test/i/" not in body
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM share_links"
                      " WHERE id = ? AND token_sha256 = ?", row["share_link_id"],
                      hashlib.sha256(token.encode()).hexdigest()) == 1
        async with studio.client(Accept="text/html") as anyone:
            opened = await anyone.get(f"/i/{token}")
        assert opened.status_code == 200


def test_the_public_address_comes_from_the_environment() -> None:
    assert from_environment({}).public_url == ""
    assert from_environment({"STUDIO_PUBLIC_URL": " https://billing.example.com/ "}
                            ).public_url == "https://billing.example.com"
    assert from_environment({"STUDIO_PUBLIC_URL": "http://10.0.0.5:8000/studio/"}
                            ).public_url == "http://10.0.0.5:8000/studio"


@pytest.mark.parametrize("value", [
    "billing.example.com", "ftp://billing.example.com", "https://", "/studio",
    "https://billing.example.com/?a=1", "https://billing.example.com/#top",
    "https://billing.example.com/?", "https://ada:pw@billing.example.com",
    "https://billing.example.com:port", "https://billing.example.com/a b",
])
def test_a_public_address_that_is_not_one_stops_the_start_saying_why(value: str) -> None:
    with pytest.raises(SystemExit, match="STUDIO_PUBLIC_URL must be the address people reach"):
        from_environment({"STUDIO_PUBLIC_URL": value})


# --- a send whose worker dies on every try ---------------------------------------------------


@pytest.fixture
async def no_worker(settings: Settings, smtp: MailServer) -> Any:
    """A studio that queues sends but delivers none itself: the test's claims are the only
    ones."""
    async with running(with_mail(settings, smtp, embedded_worker=False)) as started:
        assert started.studio.worker is None
        yield started


async def test_a_send_whose_worker_died_on_every_try_is_given_up_after_three_days(
        no_worker: Running) -> None:
    """A claim that timed out counts as a try; a send queued more than three days ago whose
    claim timed out is failed in plain words, not claimed again. If the worker that held
    that claim was only cut off and does hear the server take the email, it is still written
    as sent: one email, and a row that tells the truth."""
    mailing = no_worker
    db = mailing.studio.db
    client = await mailing.signed_in()
    send_id = (await client.post(f"/invoices/{mailing.invoice_ids()[0]}/send",
                                 json=send_body())).json()["send_id"]
    queued_at = send_row(mailing, send_id)["created_at"]
    assert (await db.write(outbox.claim, "died-1", 30.0, queued_at + 1))
    # Within the three days, the timed-out claim is taken over, and counts as a try.
    second = await db.write(outbox.claim, "died-2", 30.0, queued_at + 40)
    assert second is not None and second["attempts"] == 2
    # Past them, the next claim finds it stranded again: failed, not claimed a third time.
    past = queued_at + outbox.GIVE_UP_AFTER_S + 60
    assert await db.read(outbox.any_due, past)
    assert await db.write(outbox.claim, "third", 30.0, past) is None
    row = send_row(mailing, send_id)
    assert row["status"] == "failed" and row["attempts"] == 2 and row["sent_at"] is None
    assert row["reply"].startswith("No answer was recorded from the mail server; tried 2 times"
                                   " over 3 days"), row["reply"]
    assert row["claim"] == "died-2"
    assert not await db.read(outbox.any_due, past + 3600)
    assert await db.write(outbox.claim, "fourth", 30.0, past + 3600) is None
    page = (await client.get(f"/invoices/{mailing.invoice_ids()[0]}", headers=PAGE)).text
    assert "Not delivered" in page and "No answer was recorded from the mail server" in page
    # An outcome of the older claim, or a failure, changes nothing any more.
    sent = mail.Outcome("sent", "250 2.0.0 Ok: queued")
    assert await db.write(outbox.record, send_id, "died-1", sent, 30.0, past + 1) is False
    assert await db.write(outbox.record, send_id, "died-2", mail.Outcome("retry", "451 later"),
                          30.0, past + 1) is False
    assert send_row(mailing, send_id)["status"] == "failed"
    # The last claim's worker hears the server take it after all: the row says so.
    assert await db.write(outbox.record, send_id, "died-2", sent, 30.0, past + 2) is True
    row = send_row(mailing, send_id)
    assert row["status"] == "sent" and row["reply"] == "250 2.0.0 Ok: queued"
    assert row["claim"] is None and row["sent_at"] == pytest.approx(past + 2)


async def test_a_send_stranded_past_three_days_is_failed_by_a_running_worker_and_not_sent(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    """A studio's own worker meets a send whose last claim timed out, queued four days ago:
    it fails it, sends nothing, and goes on delivering the others."""
    async with running(with_mail(settings, smtp, embedded_worker=False)) as queueing:
        client = await queueing.signed_in()
        invoice_id = queueing.invoice_ids()[0]
        stranded = (await client.post(f"/invoices/{invoice_id}/send",
                                      json=send_body("stranded"))).json()["send_id"]
        fresh = (await client.post(f"/invoices/{invoice_id}/send",
                                   json=send_body("fresh"))).json()["send_id"]
    now = time.time()
    execute(settings.db_path,
            "UPDATE sends SET created_at = ?, next_attempt_at = ?, attempts = 7, claim = ?,"
            " claim_expires_at = ?, reply = ? WHERE id = ?",
            now - 4 * 86400, now - 3600, "gone-worker", now - 1,
            "451 4.3.0 Mailbox busy", stranded)
    async with running(with_mail(settings, smtp)) as studio:
        await wait_for(lambda: send_row(studio, stranded)["status"] != "queued", what="an end")
        await wait_for(lambda: send_row(studio, fresh)["status"] == "sent", what="the other")
        row = send_row(studio, stranded)
        assert row["status"] == "failed" and row["attempts"] == 7 and row["sent_at"] is None
        assert row["reply"].startswith("No answer was recorded from the mail server; tried 7"
                                       " times over 3 days"), row["reply"]
        assert "The last reply before that: 451 4.3.0 Mailbox busy" in row["reply"]
        assert inbox.message_ids() == [send_row(studio, fresh)["message_id"]]

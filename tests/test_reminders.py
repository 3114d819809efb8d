"""Reminders that go out by themselves: the account's steps in its own words, each step once
per invoice through the outbox, none again after a restart or on a second host, never to a
paid invoice or a customer left out."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import anyio
import httpx
import pytest

from studio.billing import reminding
from studio.config import Settings
from studio.mail import reminders
from studio.runtime import schedules
from studio.store.db import open_database
from tests.conftest import ADA, Running, days_ahead, rows, running, scalar
from tests.mailserver import Inbox, MailServer
from tests.test_words_pages import assert_plain

pytestmark = pytest.mark.anyio

DAY = 86400.0
STEPS = [
    {"days": 0, "subject": "Invoice {number} is due today",
     "message": "Hello {customer},\n{currency} {amount_due} is due on {due_date}. {link}"},
    {"days": 7, "subject": "Invoice {number} is {days_overdue} days late",
     "message": "Hello {customer}, please pay {currency} {amount_due}."},
]


def mail_settings(settings: Settings, smtp: MailServer, **changes: Any) -> Settings:
    return settings.with_changes(smtp_url=smtp.url, mail_from="billing@studio.test",
                                 public_url="https://studio.test", **changes)


async def wait_for(check: Any, seconds: float = 15.0, what: str = "it") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await anyio.sleep(0.05)


async def issued(client: httpx.AsyncClient, customer_id: str, total: str = "100.00") -> str:
    made = await client.post("/invoices", json={
        "customer_id": customer_id, "currency": "EUR", "due_date": days_ahead(0),
        "line_items": [{"description": "Work", "quantity": "1", "unit_price": total,
                        "tax_rate": "0"}]})
    assert made.status_code == 201, made.text
    invoice_id = made.json()["id"]
    done = await client.post(f"/invoices/{invoice_id}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    return invoice_id


async def customer(client: httpx.AsyncClient, email: str, **fields: Any) -> str:
    reply = await client.post("/customers", json={"name": f"Customer {email}", "email": email,
                                                  **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


def actor_id(studio: Running, email: str = ADA) -> str:
    return scalar(studio.settings.db_path, "SELECT id FROM actors WHERE email = ?", email)


def step_sends(studio: Running) -> list[Any]:
    return rows(studio.settings.db_path, "SELECT invoice_id, step, subject, message FROM sends"
                                         " WHERE step IS NOT NULL ORDER BY invoice_id, step")


async def look_at(studio: Running, days_later: float) -> int:
    """The clock's look at the account's reminders as it would be `days_later`."""
    settings = studio.settings
    return await studio.studio.db.write(
        reminders.queue_due, actor_id(studio), settings.mail_from, settings.public_url,
        settings.share_link_days, time.time() + days_later * DAY)


async def test_reminder_settings_are_off_by_default_and_refuse_an_unknown_placeholder(
        settings: Settings, smtp: MailServer) -> None:
    async with running(mail_settings(settings, smtp)) as studio:
        client = await studio.signed_in()
        assert (await client.get("/settings/reminders")).json() == {"enabled": False,
                                                                    "steps": []}
        first = await client.get("/settings/reminders", headers={"Accept": "text/html"})
        assert "Reminder: invoice {number} is overdue" in first.text  # words to start from
        assert_plain("reminder settings", first.text)
        # The words the form starts with are ones the studio takes.
        suggested = reminding.FIRST_STEPS
        assert (await client.put("/settings/reminders", json={
            "enabled": False, "steps": suggested})).status_code == 200
        bad = [{**STEPS[0], "message": "Pay {amount} by {due_date}"}]
        reply = await client.put("/settings/reminders", json={"enabled": True, "steps": bad})
        assert reply.status_code == 422 and "{amount}" in reply.json()["message"]
        late = await client.put("/settings/reminders", json={"enabled": True, "steps": [
            {**STEPS[0], "days": 400}]})
        assert late.status_code == 422 and "days" in late.json()["message"]
        kept = (await client.get("/settings/reminders")).json()
        assert kept == {"enabled": False, "steps": suggested}  # the refused ones changed nothing
        saved = await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        assert saved.status_code == 200 and saved.json()["steps"] == STEPS
        page = await client.get("/settings/reminders", headers={"Accept": "text/html"})
        assert page.status_code == 200 and "Invoice {number} is due today" in page.text
        form = await client.post("/settings/reminders", headers={"Accept": "text/html"}, data={
            "enabled": "true", "days_0": "14", "subject_0": "Invoice {number}",
            "message_0": "Please pay {currency} {amount_due}.", "days_1": "", "subject_1": "",
            "message_1": ""}, follow_redirects=False)
        assert form.status_code == 303, form.text
        assert (await client.get("/settings/reminders")).json() == {"enabled": True, "steps": [
            {"days": 14, "subject": "Invoice {number}",
             "message": "Please pay {currency} {amount_due}."}]}


async def test_reminders_cannot_be_switched_on_without_a_mail_server(settings: Settings
                                                                     ) -> None:
    async with running(settings) as studio:
        client = await studio.signed_in()
        reply = await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        assert reply.status_code == 409 and reply.json()["detail"] == "sending_not_configured"


async def test_each_step_goes_once_per_invoice_and_none_again_after_a_restart(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    mailing = mail_settings(settings, smtp)
    async with running(mailing) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client, "ap@northwind.test")
        first, second = await issued(client, customer_id), await issued(client, customer_id,
                                                                        "250.00")
        await client.post(f"/invoices/{second}/payments", json={
            "request_id": "pay-1", "amount": "50.00", "date": days_ahead(0),
            "method": "bank_transfer"})
        await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        await wait_for(lambda: len(inbox.messages) >= 2, what="the day-0 reminders")
        sent = step_sends(studio)
        assert [(send["invoice_id"], send["step"]) for send in sent] == sorted(
            [(first, 0), (second, 0)])
        words = {send["invoice_id"]: send for send in sent}
        number = scalar(studio.settings.db_path, "SELECT number FROM invoices WHERE id = ?",
                        second)
        assert words[second]["subject"] == f"Invoice {number} is due today"
        assert "EUR 200.00 is due on" in words[second]["message"]  # what is left to pay
        assert "https://studio.test/i/" in words[second]["message"]
        listed = (await client.get(f"/invoices/{second}/sends")).json()
        assert [send["step"] for send in listed] == [0]
        page = await client.get(f"/invoices/{second}", headers={"Accept": "text/html"})
        assert "sent by itself, on the due date" in page.text
    # Restarted: the same day's look queues nothing again.
    async with running(mailing) as studio:
        await anyio.sleep(1.5)
        assert len(step_sends(studio)) == 2
        # A week later the next step goes, once, however often the clock looks.
        assert await look_at(studio, 8) == 2
        assert await look_at(studio, 8) == 0
        assert await look_at(studio, 9) == 0
        assert [send["step"] for send in step_sends(studio)] == [0, 7, 0, 7]
        # (Queued a week ahead by the look's clock, they leave then; today's went once.)
        assert len(inbox.messages) == 2


async def test_no_reminder_for_a_paid_invoice_or_a_customer_left_out(
        settings: Settings, smtp: MailServer) -> None:
    async with running(mail_settings(settings, smtp, embedded_worker=False)) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client, "ap@northwind.test")
        paid = await issued(client, customer_id)
        await client.post(f"/invoices/{paid}/payments", json={
            "request_id": "pay-1", "amount": "100.00", "date": days_ahead(0),
            "method": "bank_transfer"})
        left_out = await issued(client, await customer(client, "no@reminders.test",
                                                       reminders=False))
        await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        assert await look_at(studio, 8) == 0
        assert step_sends(studio) == []
        assert left_out  # issued, unpaid, and still not reminded


async def test_steps_already_due_when_switched_on_go_out_once_each(
        settings: Settings, smtp: MailServer) -> None:
    async with running(mail_settings(settings, smtp, embedded_worker=False)) as studio:
        client = await studio.signed_in()
        invoice_id = await issued(client, await customer(client, "ap@northwind.test"))
        await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        assert await look_at(studio, 10) == 2
        assert [send["step"] for send in step_sends(studio)] == [0, 7]
        assert "10 days late" in step_sends(studio)[1]["subject"]
        assert await look_at(studio, 10) == 0
        assert await look_at(studio, 30) == 0
        assert {send["invoice_id"] for send in step_sends(studio)} == {invoice_id}


async def test_two_hosts_looking_at_once_queue_each_step_once(
        settings: Settings, smtp: MailServer) -> None:
    mailing = mail_settings(settings, smtp, embedded_worker=False)
    async with running(mailing) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client, "ap@northwind.test")
        for _ in range(5):
            await issued(client, customer_id)
        await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        opened = [await open_database(mailing).open() for _ in range(2)]
        wake = asyncio.Event()
        jobs = [asyncio.create_task(schedules.keep_the_clock(db, mailing, wake, lambda: None))
                for db in opened]
        try:
            await wait_for(lambda: len(step_sends(studio)) >= 5, what="the reminders")
            await anyio.sleep(1.0)
        finally:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            for db in opened:
                await db.close()
        assert len(step_sends(studio)) == 5


async def test_an_invoice_issued_after_reminders_are_on_gets_its_due_step_at_once(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    async with running(mail_settings(settings, smtp)) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client, "ap@northwind.test")
        await client.put("/settings/reminders", json={"enabled": True, "steps": STEPS})
        await anyio.sleep(1.0)  # the clock looked at the account: nothing was due
        invoice_id = await issued(client, customer_id)
        await wait_for(lambda: len(inbox.messages) >= 1, what="the day-0 reminder")
        assert [(send["invoice_id"], send["step"]) for send in step_sends(studio)] == [
            (invoice_id, 0)]

"""Recurring invoices, each period exactly once: the periods a schedule's rule gives (month
ends, the last day, leap years), the API, and the clock every worker keeps: catch-ups after
downtime, two workers at once, backfill, counts, pauses and emails."""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from studio import i18n
from studio.billing import recurring
from studio.billing.recurring import Rule, first_due_on_or_after, first_run, period, run_date
from studio.config import Settings
from studio.ops.audit import audit_database
from studio.runtime import schedules
from studio.store.db import open_database
from tests.backends import first_pass_only
from tests.conftest import ADA, BEN, Running, execute, rows, running, scalar
from tests.mailserver import Inbox, MailServer
from tests.test_facturx import BUYER, SELLER, one, xml_tree
from tests.test_words_pages import assert_plain

D = dt.date
TODAY = dt.datetime.now(dt.UTC).date()
LINES = [{"description": "Monthly retainer", "quantity": "1", "unit_price": "1000.00",
          "tax_rate": "19"}]


# --- the rule: pure functions ------------------------------------------------------------------


@first_pass_only
def test_the_last_day_of_the_month_stays_the_last_through_short_months_and_leap_years() -> None:
    rule = Rule("month", 1, "last")
    anchor = first_run(rule, D(2024, 1, 15))
    assert [run_date(rule, anchor, n) for n in range(4)] == [
        D(2024, 1, 31), D(2024, 2, 29), D(2024, 3, 31), D(2024, 4, 30)]
    assert period(rule, anchor, 1) == (D(2024, 2, 29), D(2024, 3, 30))
    yearly = Rule("year", 1, "last")
    assert [run_date(yearly, D(2024, 2, 29), n) for n in range(5)] == [
        D(2024, 2, 29), D(2025, 2, 28), D(2026, 2, 28), D(2027, 2, 28), D(2028, 2, 29)]


@first_pass_only
def test_a_day_of_the_month_never_drifts_and_the_first_run_is_on_or_after_the_start() -> None:
    rule = Rule("month", 1, "28")
    assert first_run(rule, D(2026, 1, 29)) == D(2026, 2, 28)
    assert first_run(rule, D(2026, 1, 28)) == D(2026, 1, 28)
    quarterly = Rule("month", 3, "1")
    anchor = first_run(quarterly, D(2026, 11, 2))
    assert [run_date(quarterly, anchor, n) for n in range(3)] == [
        D(2026, 12, 1), D(2027, 3, 1), D(2027, 6, 1)]
    assert period(quarterly, anchor, 0) == (D(2026, 12, 1), D(2027, 2, 28))
    assert first_run(Rule("year", 1, "1"), D(2026, 3, 15)) == D(2027, 3, 1)


@first_pass_only
def test_weeks_run_on_the_weekday_they_start_and_passed_periods_are_counted_exactly() -> None:
    rule = Rule("week", 2, None)
    anchor = first_run(rule, D(2026, 1, 1))
    assert period(rule, anchor, 0) == (D(2026, 1, 1), D(2026, 1, 14))
    assert run_date(rule, anchor, 5) == D(2026, 3, 12)
    assert first_due_on_or_after(rule, anchor, D(2026, 3, 12)) == 5
    assert first_due_on_or_after(rule, anchor, D(2026, 3, 13)) == 6
    monthly = Rule("month", 1, "last")
    assert first_due_on_or_after(monthly, D(2024, 1, 31), D(2024, 3, 1)) == 2


# --- helpers ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def quiet(settings: Settings, **changes: Any) -> AsyncIterator[Running]:
    """A studio whose own worker does not run: the test keeps the clock itself."""
    async with running(settings.with_changes(embedded_worker=False, **changes)) as started:
        yield started


async def customer(client: httpx.AsyncClient, email: str = "ap@northwind.test") -> str:
    reply = await client.post("/customers", json={"name": "Northwind", "email": email,
                                                  "currency": "EUR"})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


def schedule_body(customer_id: str, request_id: str = "rec-1", **fields: Any) -> dict[str, Any]:
    return {"request_id": request_id, "customer_id": customer_id, "currency": "EUR",
            "line_items": LINES, "payment_terms_days": 14, "every": "week",
            "starts": TODAY.isoformat(), "action": "issue", **fields}


async def made_schedule(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    reply = await client.post("/recurring", json=schedule_body(await customer(client),
                                                               **fields))
    assert reply.status_code == 201, reply.text
    return reply.json()["recurring"]


async def keep_clocks(settings: Settings, hosts: int, until: Any, seconds: float = 30.0
                      ) -> None:
    """`hosts` workers' clocks on databases of their own (connections apart, as hosts have),
    all at once, until `until()` holds."""
    opened = [await open_database(settings).open() for _ in range(hosts)]
    wake = asyncio.Event()
    jobs = [asyncio.create_task(schedules.keep_the_clock(db, settings, wake, lambda: None))
            for db in opened]
    try:
        deadline = time.monotonic() + seconds
        while not until():
            assert time.monotonic() < deadline, "the due periods were not made in time"
            assert not any(job.done() for job in jobs), [job.exception() for job in jobs
                                                         if job.done()]
            await anyio.sleep(0.05)
        await anyio.sleep(0.3)  # a last look by every worker makes nothing more
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        for db in opened:
            await db.close()


def made_rows(studio: Running, recurring_id: str) -> list[Any]:
    return rows(studio.settings.db_path,
                "SELECT invoices.id, invoices.number, invoices.status, invoices.period_start,"
                " invoices.period_end, invoices.issue_date, invoices.sequence"
                " FROM invoices WHERE recurring_id = ? AND status != 'deleted'"
                " ORDER BY period_start", recurring_id)


def made_count(studio: Running, recurring_id: str) -> int:
    return scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM invoices WHERE recurring_id = ?", recurring_id)


def weeks_ago(n: int) -> str:
    return (TODAY - dt.timedelta(weeks=n)).isoformat()


# --- exactly once ----------------------------------------------------------------------------


pytestmark = pytest.mark.anyio


async def test_two_hosts_catching_up_13_weekly_periods_make_13_invoices_in_one_run(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(12), backfill=True)
        assert schedule["next_run"] == weeks_ago(12)
        await keep_clocks(studio.settings, 2, lambda: made_count(studio, schedule["id"]) >= 13)
        made = made_rows(studio, schedule["id"])
        assert [row["period_start"] for row in made] == [weeks_ago(n) for n in range(12, -1, -1)]
        assert [row["period_end"] for row in made] == [
            (TODAY - dt.timedelta(weeks=n, days=-6)).isoformat() for n in range(12, -1, -1)]
        # Dated the day they were made, each billing its own period; numbers in one run.
        assert {row["issue_date"] for row in made} == {TODAY.isoformat()}
        sequences = [row["sequence"] for row in made]
        assert sequences == list(range(sequences[0], sequences[0] + 13))
        assert audit_database(studio.settings) == []
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert [entry["number"] for entry in found["made"]] == [row["number"] for row in made]
        assert found["next_run"] == weeks_ago(-1) and found["made_count"] == 13


async def test_many_workers_on_many_schedules_make_each_period_once(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client)
        ids = []
        for n in range(4):
            reply = await client.post("/recurring", json=schedule_body(
                customer_id, f"rec-{n}", starts=weeks_ago(4), backfill=True))
            ids.append(reply.json()["recurring"]["id"])
        total = lambda: scalar(studio.settings.db_path,  # noqa: E731
                               "SELECT COUNT(*) FROM recurring_periods")
        await keep_clocks(studio.settings, 3, lambda: total() >= 20)
        assert total() == 20
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices"
                      " WHERE recurring_id IS NOT NULL") == 20
        for recurring_id in ids:
            assert len({row["period_start"] for row in made_rows(studio, recurring_id)}) == 5
        assert audit_database(studio.settings) == []


async def test_a_pause_during_a_catch_up_stops_it_between_periods(settings: Settings) -> None:
    """Made periods run from the first without a gap or a repeat, and none follows the pause,
    whenever the pause lands among the catch-up's transactions. Ten years of weeks, so
    that the pause lands before the catch-up ends however fast the machine."""
    periods = 521
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(periods - 1), backfill=True)
        catching_up = asyncio.create_task(keep_clocks(
            studio.settings, 2, lambda: made_count(studio, schedule["id"]) >= periods))
        while made_count(studio, schedule["id"]) < 2:
            await anyio.sleep(0.01)
        paused = await client.post(f"/recurring/{schedule['id']}/pause")
        assert paused.status_code == 200
        made_when_paused = len(paused.json()["recurring"]["made"])
        await anyio.sleep(1.0)
        catching_up.cancel()
        await asyncio.gather(catching_up, return_exceptions=True)
        made = made_rows(studio, schedule["id"])
        assert len(made) == made_when_paused < periods
        assert [row["period_start"] for row in made] == [
            weeks_ago(n) for n in range(periods - 1, periods - 1 - len(made), -1)]
        assert audit_database(studio.settings) == []


async def test_a_period_already_bound_is_never_made_again(settings: Settings) -> None:
    """However the schedule came to look at a period again (its state restored, a write lost),
    the period's binding makes nothing more."""
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(1), backfill=True)
        db = studio.studio.db
        assert (await db.write(recurring.make_period, schedule["id"]))["status"] == "issued"
        assert (await db.write(recurring.make_period, schedule["id"])) is not None
        assert (await db.write(recurring.make_period, schedule["id"])) is None
        execute(studio.settings.db_path, "UPDATE recurring SET next_index = 0, next_run = ?,"
                " made = 0 WHERE id = ?", weeks_ago(1), schedule["id"])
        assert (await db.write(recurring.make_period, schedule["id"])) is None
        assert (await db.write(recurring.make_period, schedule["id"])) is None
        assert made_count(studio, schedule["id"]) == 2
        assert scalar(studio.settings.db_path, "SELECT next_run FROM recurring WHERE id = ?",
                      schedule["id"]) == weeks_ago(-1)
        assert audit_database(studio.settings) == []


async def test_without_backfill_only_the_period_due_today_is_made(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(5))
        assert schedule["next_run"] == TODAY.isoformat()
        await keep_clocks(studio.settings, 1, lambda: made_count(studio, schedule["id"]) >= 1)
        assert [row["period_start"] for row in made_rows(studio, schedule["id"])] == [
            TODAY.isoformat()]
        # Made the day after a period's run date, the first is the next one.
        later = await client.post("/recurring", json=schedule_body(
            schedule["customer_id"], "rec-2", starts=(TODAY - dt.timedelta(days=1)).isoformat()))
        assert later.json()["recurring"]["next_run"] == (
            TODAY + dt.timedelta(days=6)).isoformat()


async def test_a_count_ends_a_schedule(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(6), backfill=True, count=3)
        await keep_clocks(studio.settings, 1, lambda: made_count(studio, schedule["id"]) >= 3)
        assert made_count(studio, schedule["id"]) == 3
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert found["status"] == "ended" and found["next_run"] is None
        assert [entry["period_start"] for entry in found["made"]] == [
            weeks_ago(6), weeks_ago(5), weeks_ago(4)]


async def test_an_end_date_ends_a_schedule_after_its_last_period(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(3), backfill=True,
                                       ends=(TODAY - dt.timedelta(weeks=2, days=-1)).isoformat())
        await keep_clocks(studio.settings, 1, lambda: made_count(studio, schedule["id"]) >= 2)
        assert [row["period_start"] for row in made_rows(studio, schedule["id"])] == [
            weeks_ago(3), weeks_ago(2)]
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert found["status"] == "ended"


async def test_a_paused_schedule_makes_nothing_and_resumed_passes_over_the_pause(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(3), backfill=True)
        paused = await client.post(f"/recurring/{schedule['id']}/pause")
        assert paused.status_code == 200 and paused.json()["recurring"]["status"] == "paused"
        db = studio.studio.db
        assert not await db.read(recurring.any_due)
        assert await db.write(recurring.make_period, schedule["id"]) is None
        assert made_count(studio, schedule["id"]) == 0
        resumed = (await client.post(f"/recurring/{schedule['id']}/resume")).json()["recurring"]
        assert resumed["status"] == "active" and resumed["next_run"] == TODAY.isoformat()
        ended = await client.post(f"/recurring/{schedule['id']}/end")
        assert ended.json()["recurring"]["status"] == "ended"
        again = await client.post(f"/recurring/{schedule['id']}/resume")
        assert again.status_code == 409 and again.json()["detail"] == "recurring_ended"
        assert await db.write(recurring.make_period, schedule["id"]) is None
        assert made_count(studio, schedule["id"]) == 0


async def test_action_send_queues_one_email_per_invoice(settings: Settings, smtp: MailServer,
                                                        inbox: Inbox) -> None:
    mailing = settings.with_changes(smtp_url=smtp.url, mail_from="billing@studio.test",
                                    public_url="https://studio.test")
    async with running(mailing) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(2), backfill=True,
                                       action="send")
        db_path = studio.settings.db_path
        deadline = time.monotonic() + 20
        while len(inbox.messages) < 3 or scalar(
                db_path, "SELECT COUNT(*) FROM sends WHERE status = 'queued'"):
            assert time.monotonic() < deadline, "the three emails did not go out"
            await anyio.sleep(0.05)
        # A second host looking again changes nothing.
        await keep_clocks(studio.settings, 2, lambda: True)
        made = made_rows(studio, schedule["id"])
        assert len(made) == 3
        sends = rows(db_path, "SELECT invoice_id, recipient FROM sends")
        assert sorted(send["invoice_id"] for send in sends) == sorted(row["id"] for row in made)
        assert {send["recipient"] for send in sends} == {"ap@northwind.test"}
        assert len(inbox.messages) == 3
        for row in made:
            assert sum(row["number"] in message["Subject"] for message in inbox.messages) == 1


async def test_a_send_schedule_without_a_mail_server_issues_and_says_why_not_emailed(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, action="send")
        made = await studio.studio.db.write(recurring.make_period, schedule["id"],
                                            schedules._emailer(studio.settings))
        assert made["status"] == "issued" and "not emailed" in made["problem"]
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sends") == 0
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert "not emailed" in found["problem"]


async def test_a_draft_schedule_makes_drafts_that_name_their_period(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        last_month = TODAY.replace(day=1) - dt.timedelta(days=20)
        schedule = await made_schedule(client, action="draft", every="month", day="last",
                                       starts=last_month.isoformat(), backfill=True)
        made = await studio.studio.db.write(recurring.make_period, schedule["id"])
        invoice = (await client.get(f"/invoices/{made['invoice_id']}")).json()
        assert invoice["status"] == "draft" and invoice["recurring_id"] == schedule["id"]
        last_month_end = TODAY.replace(day=1) - dt.timedelta(days=1)
        this_month_end = TODAY.replace(day=calendar.monthrange(TODAY.year, TODAY.month)[1])
        assert (invoice["period_start"], invoice["period_end"]) == (
            last_month_end.isoformat(), (this_month_end - dt.timedelta(days=1)).isoformat())
        assert invoice["due_date"] == (TODAY + dt.timedelta(days=14)).isoformat()


# --- the API ---------------------------------------------------------------------------------


async def test_the_same_request_id_answers_the_same_schedule_and_other_content_is_409(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client)
        first = await client.post("/recurring", json=schedule_body(customer_id))
        again = await client.post("/recurring", json=schedule_body(customer_id))
        assert first.status_code == 201 and again.status_code == 200
        assert again.json()["recurring"]["id"] == first.json()["recurring"]["id"]
        other = await client.post("/recurring", json=schedule_body(customer_id, every="month"))
        assert other.status_code == 409 and other.json()["detail"] == "request_id_conflict"
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM recurring") == 1
        form = await client.post("/recurring", data={
            "request_id": "form-1", "customer_id": customer_id, "currency": "EUR",
            "description": "Hosting", "quantity": "1", "unit_price": "20", "tax_rate": "19",
            "every": "month", "interval": "1", "day": "last", "starts": TODAY.isoformat(),
            "action": "draft"}, headers={"Accept": "application/json"})
        assert form.status_code == 201, form.text
        assert form.json()["recurring"]["day"] == "last"


@pytest.mark.parametrize(("field", "value"), [
    ("every", "fortnight"), ("interval", 0), ("day", 31), ("starts", "2026-02-30"),
    ("ends", "someday"), ("count", -1), ("action", "shout"), ("backfill", "maybe"),
    ("line_items", []), ("currency", "EURO"), ("email", {"to": "not an address"}),
])
async def test_bad_input_is_422_naming_the_field_and_makes_nothing(
        settings: Settings, field: str, value: Any) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        customer_id = await customer(client)
        reply = await client.post("/recurring", json=schedule_body(customer_id, **{field: value}))
        assert reply.status_code == 422, reply.text
        words = {"line_items": "line", "email": "email"}.get(field, field)
        assert words in reply.json()["message"].lower()
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM recurring") == 0


async def test_another_accounts_schedule_is_404_and_the_list_is_paged(settings: Settings
                                                                     ) -> None:
    async with quiet(settings) as studio:
        ada = await studio.signed_in(ADA)
        customer_id = await customer(ada)
        for n in range(3):
            await ada.post("/recurring", json=schedule_body(customer_id, f"rec-{n}"))
        page = await ada.get("/recurring?limit=2")
        assert len(page.json()) == 2 and 'rel="next"' in page.headers["link"]
        rest = await ada.get(page.headers["link"].split(";")[0].strip("<>"))
        assert len(rest.json()) == 1
        schedule_id = page.json()[0]["id"]
        ben = await studio.signed_in(BEN)
        assert (await ben.get("/recurring")).json() == []
        for reply in (await ben.get(f"/recurring/{schedule_id}"),
                      await ben.post(f"/recurring/{schedule_id}/pause"),
                      await ben.patch(f"/recurring/{schedule_id}", json={"revision": 1})):
            assert reply.status_code == 404 and reply.json()["detail"] == "recurring_not_found"
        other = await ben.post("/recurring", json=schedule_body(customer_id, "rec-ben"))
        assert other.status_code == 404 and other.json()["detail"] == "customer_not_found"


async def test_an_edit_names_its_revision_and_takes_effect_from_the_next_period(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(1), backfill=True)
        made = await studio.studio.db.write(recurring.make_period, schedule["id"])
        path = f"/recurring/{schedule['id']}"
        stale = await client.patch(path, json={"revision": 2, "every": "month"})
        assert stale.status_code == 409 and stale.json()["detail"] == "recurring_changed"
        lines = [{**LINES[0], "unit_price": "1200.00"}]
        edited = await client.patch(path, json={"revision": 1, "line_items": lines,
                                                "every": "month", "day": "last"})
        assert edited.status_code == 200, edited.text
        found = edited.json()["recurring"]
        # The period after the one made runs a month-end rule from the next run date on.
        assert found["revision"] == 2 and found["every"] == "month"
        assert found["next_run"] == first_run(Rule("month", 1, "last"),
                                              TODAY).isoformat()
        first = (await client.get(f"/invoices/{made['invoice_id']}")).json()
        assert first["line_items"][0]["unit_price"] == "1000.00"


# --- pages -----------------------------------------------------------------------------------


async def test_pages_list_schedules_show_what_each_made_and_repeat_an_invoice(
        settings: Settings) -> None:
    page = {"Accept": "text/html"}
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(1), backfill=True)
        made = await studio.studio.db.write(recurring.make_period, schedule["id"])
        listed = await client.get("/recurring", headers=page)
        assert listed.status_code == 200 and "Every week, on" in listed.text
        assert schedule["next_run"] not in ("", None)
        one = await client.get(f"/recurring/{schedule['id']}", headers=page)
        assert one.status_code == 200 and made["number"] in one.text
        start, end = (i18n.date(made[day], "en") for day in ("period_start", "period_end"))
        assert f"{start} to {end}" in one.text
        invoice = await client.get(f"/invoices/{made['invoice_id']}", headers=page)
        assert "Repeat this invoice" in invoice.text and "Service period" in invoice.text
        form = await client.get(f"/recurring/new?invoice_id={made['invoice_id']}", headers=page)
        assert form.status_code == 200 and "Monthly retainer" in form.text
        assert f"Filled in from invoice {made['number']}" in form.text
        blank = await client.get("/recurring/new", headers=page)
        assert blank.status_code == 200 and "Northwind" in blank.text
        for name, html in {"list": listed.text, "schedule": one.text, "form": form.text,
                           "blank form": blank.text}.items():
            assert_plain(name, html)
        # The page's own forms: pause, then an edit sent as a form.
        paused = await client.post(f"/recurring/{schedule['id']}/pause", headers=page,
                                   follow_redirects=False)
        assert paused.status_code == 303
        edited = await client.post(f"/recurring/{schedule['id']}/edit", headers=page, data={
            "revision": "2", "customer_id": schedule["customer_id"], "currency": "EUR",
            "description": "Retainer", "quantity": "1", "unit_price": "900", "tax_rate": "19",
            "every": "week", "interval": "2", "day": "1", "ends": "", "count": "",
            "action": "issue", "email_to": "", "payment_terms_days": "14"},
            follow_redirects=False)
        assert edited.status_code == 303, edited.text
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert found["interval"] == 2 and found["status"] == "paused"


async def test_the_service_period_is_on_the_document_and_the_e_invoice(settings: Settings
                                                                       ) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        assert (await client.post("/settings", json=SELLER)).status_code == 200
        reply = await client.post("/customers", json=BUYER)
        body = schedule_body(reply.json()["id"], starts=weeks_ago(1), backfill=True)
        schedule = (await client.post("/recurring", json=body)).json()["recurring"]
        made = await studio.studio.db.write(recurring.make_period, schedule["id"])
        printable = await client.get(f"/invoices/{made['invoice_id']}/document",
                                     headers={"Accept": "text/html"})
        # The buyer is French: the period as a French document writes it.
        start, end = (i18n.date(made[day], "fr") for day in ("period_start", "period_end"))
        assert f"Période de prestation</dt><dd>du {start} au {end}" in printable.text
        xml = await client.get(f"/invoices/{made['invoice_id']}.xml")
        assert xml.status_code == 200, xml.text
        tree = xml_tree(xml.content)
        period = "//ram:ApplicableHeaderTradeSettlement/ram:BillingSpecifiedPeriod"
        assert one(tree, f"{period}/ram:StartDateTime/udt:DateTimeString") == \
            made["period_start"].replace("-", "")
        assert one(tree, f"{period}/ram:EndDateTime/udt:DateTimeString") == \
            made["period_end"].replace("-", "")


async def test_a_customer_a_schedule_names_is_not_deleted(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(-1))
        reply = await client.delete(f"/customers/{schedule['customer_id']}")
        assert reply.status_code == 409 and reply.json()["detail"] == "customer_in_use"
        assert "recurring invoice" in reply.json()["message"]
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM customers WHERE id = ?",
                      schedule["customer_id"]) == 1


async def test_the_audit_names_a_period_made_twice(settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(1), backfill=True,
                                       action="draft")
        first = await studio.studio.db.write(recurring.make_period, schedule["id"])
        second = await studio.studio.db.write(recurring.make_period, schedule["id"])
        assert audit_database(studio.settings) == []
        # As a second maker without the binding would leave it (drafts may still change).
        execute(studio.settings.db_path, "UPDATE invoices SET period_start = ? WHERE id = ?",
                first["period_start"], second["invoice_id"])
        problems = audit_database(studio.settings)
        assert any("made 2 invoices for its period" in problem for problem in problems)
        assert any("which names another period" in problem for problem in problems)


async def test_a_period_that_cannot_be_issued_is_kept_as_a_draft_saying_why(
        settings: Settings) -> None:
    async with quiet(settings) as studio:
        client = await studio.signed_in()
        schedule = await made_schedule(client, starts=weeks_ago(1), backfill=True)
        owner = scalar(studio.settings.db_path, "SELECT id FROM actors WHERE email = ?", ADA)
        execute(studio.settings.db_path, "UPDATE profiles SET name = '' WHERE actor_id = ?",
                owner)
        made = await studio.studio.db.write(recurring.make_period, schedule["id"])
        assert made["status"] == "draft" and made["number"] is None
        assert "kept as a draft" in made["problem"]
        # What issuing began is undone with it: no binding of the issue, no number taken.
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM request_bindings"
                      " WHERE kind = 'issue' AND request_id LIKE 'recurring:%'") == 0
        found = (await client.get(f"/recurring/{schedule['id']}")).json()["recurring"]
        assert found["made"][0]["status"] == "draft" and "kept as a draft" in found["problem"]
        assert found["next_run"] == TODAY.isoformat()
        assert audit_database(studio.settings) == []
        # Noted in the language the owner chose for their pages, dates as it writes them.
        execute(studio.settings.db_path, "UPDATE actors SET language = 'de' WHERE id = ?", owner)
        german = await studio.studio.db.write(recurring.make_period, schedule["id"])
        assert german["problem"].startswith(
            f"Die Rechnung für {TODAY:%d.%m.%Y} bis {TODAY + dt.timedelta(days=6):%d.%m.%Y}"
            " wurde als Entwurf behalten: "), german["problem"]
        assert "Firmennamen" in german["problem"]

"""`recurring_catch_up_ratio`: the clock of two workers catching up the periods many recurring
invoices missed (each period made and issued in its own transaction, by whichever worker
takes it) against the same number of invoices made and issued through the write units the
API's handlers call (a draft, then its issue), by two writers at once, on a file of its own
seeded alike. `recurring_duplicates` counts periods made more than once: it must be 0.

`poll_under_catch_up_ratio`: a served studio and a `studio worker` beside it catch up as many
periods, asked for through the API; a tab's poll meanwhile, median latency over idle."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.setup import (
    LINES,
    ROOT,
    actor_with_drafts,
    open_studio_db,
    seeding,
    serving,
    signed_in,
    studio_env,
    timed_polls,
)
from studio.billing import customers, invoices, recurring
from studio.config import Settings
from studio.ops.audit import audit_file
from studio.runtime import schedules
from studio.store.transactions import in_transaction

WORKERS = 2


def seed(path: Path, schedules_n: int, periods: int) -> tuple[str, str]:
    """An account with a seller profile and a customer, and `schedules_n` weekly schedules
    that started `periods` weeks ago with backfill: `periods` due each."""

    def make(db: Any) -> tuple[str, str]:
        actor_id, _ = actor_with_drafts(db, 0, f"recurring-{path.stem}@example.com", "x")
        customer, _ = customers.create(db, actor_id, customers.parse_customer(
            {"name": "Bench Ltd", "email": "ap@bench.test", "currency": "EUR"}), None)
        today = dt.datetime.now(dt.UTC).date()
        starts = (today - dt.timedelta(weeks=periods - 1)).isoformat()
        for n in range(schedules_n):
            fields = recurring.parse_schedule({
                "customer_id": customer["id"], "currency": "EUR", "line_items": LINES,
                "every": "week", "starts": starts, "backfill": True, "action": "issue"})
            recurring.create(db, actor_id, fields, f"bench-{n}")
        return actor_id, customer["id"]

    db = seeding(path)
    try:
        return in_transaction(db, make)
    finally:
        db.close()


async def catch_up(path: Path, total: int) -> float:
    """Seconds two workers' clocks take to make `total` due periods."""
    settings = Settings(db_path=path)
    opened = [await open_studio_db(path) for _ in range(WORKERS)]
    wake = asyncio.Event()
    started = time.perf_counter()
    jobs = [asyncio.create_task(schedules.keep_the_clock(db, settings, wake, lambda: None))
            for db in opened]
    try:
        while await opened[0].read(lambda c: c.execute(
                "SELECT COUNT(*) FROM recurring_periods").fetchone()[0]) < total:
            assert not any(job.done() for job in jobs)
            await asyncio.sleep(0.005)
        return time.perf_counter() - started
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        for db in opened:
            await db.close()


async def through_the_api_units(path: Path, actor_id: str, customer_id: str, total: int
                                ) -> float:
    """Seconds two writers take to make and issue `total` invoices as the API does."""
    today = dt.datetime.now(dt.UTC).date()
    fields = invoices.parse_draft({"customer_id": customer_id, "currency": "EUR",
                                   "due_date": (today + dt.timedelta(days=14)).isoformat(),
                                   "line_items": LINES})
    opened = [await open_studio_db(path) for _ in range(WORKERS)]

    async def writer(db: Any, share: range) -> None:
        for n in share:
            draft, _ = await db.write(invoices.create_draft, actor_id, fields, f"api-{n}")
            await db.write(invoices.issue, actor_id, draft["id"], f"api-issue-{n}", 1)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(writer(db, range(k, total, WORKERS))
                               for k, db in enumerate(opened)))
        return time.perf_counter() - started
    finally:
        for db in opened:
            await db.close()


async def bench_recurring(work: Path, schedules_n: int, periods: int) -> dict[str, Any]:
    total = schedules_n * periods
    clock_path, api_path = work / "recurring-clock.db", work / "recurring-api.db"
    seed(clock_path, schedules_n, periods)
    actor_id, customer_id = seed(api_path, 0, periods)
    clock_s = await catch_up(clock_path, total)
    api_s = await through_the_api_units(api_path, actor_id, customer_id, total)
    db = await open_studio_db(clock_path)
    try:
        made, distinct = await db.read(lambda c: c.execute(
            "SELECT COUNT(*), COUNT(DISTINCT recurring_id || ' ' || period_start) FROM invoices"
            " WHERE recurring_id IS NOT NULL").fetchone())
    finally:
        await db.close()
    assert made == total, (made, total)
    assert audit_file(clock_path) == []
    return {"recurring_catch_up_ratio": clock_s / api_s, "recurring_duplicates": made - distinct,
            "recurring_catch_up_s": clock_s, "recurring_api_s": api_s,
            "recurring_periods": total}


def _made(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute("SELECT COUNT(*) FROM recurring_periods").fetchone()[0]


def bench_polls_during_catch_up(work: Path, seconds: float, schedules_n: int, periods: int
                                ) -> dict[str, Any]:
    """A tab polling its request while the clocks of a served studio and a second worker
    make `schedules_n` x `periods` missed periods: median latency over the idle median."""
    path = work / "recurring-polls.db"
    env = studio_env(path)
    total = schedules_n * periods
    with serving("studio serve", env, work / "recurring-polls.log", demo=True) as studio:
        client = signed_in(studio.url)
        invoice = client.get("/invoices").json()[0]["id"]
        lease = client.post("/leases", json={
            "request_id": "catch-up-poll", "purpose": "summarize_invoice",
            "invoice_ids": [invoice], "providers": ["local"]}).json()
        poll_path = f"/leases/{lease['lease_id']}"
        customer = client.post("/customers", json={
            "name": "Bench Ltd", "email": "ap@bench.test"}).json()["id"]
        idle = timed_polls(client, poll_path, seconds)
        log = (work / "recurring-polls-worker.log").open("wb")
        worker = subprocess.Popen([sys.executable, "-m", "studio.ops.cli", "worker"],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            starts = (dt.datetime.now(dt.UTC).date() - dt.timedelta(weeks=periods - 1))
            for n in range(schedules_n):
                made = client.post("/recurring", json={
                    "request_id": f"catch-up-{n}", "customer_id": customer,
                    "currency": "EUR", "line_items": LINES, "every": "week",
                    "starts": starts.isoformat(), "backfill": True, "action": "issue"})
                made.raise_for_status()
            busy = timed_polls(client, poll_path, 0, until=lambda: _made(path) >= total)
            if worker.poll() is not None:
                raise SystemExit("studio worker exited during the catch-up:\n"
                                 + (work / "recurring-polls-worker.log").read_text())
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            log.close()
        client.close()
    return {"poll_under_catch_up_ratio": statistics.median(busy) / statistics.median(idle),
            "poll_catch_up_p50_ms": statistics.median(busy),
            "poll_idle_p50_ms": statistics.median(idle), "catch_up_polled_periods": total}

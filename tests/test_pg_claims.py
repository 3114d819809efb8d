"""Claims on PostgreSQL stand on row locks, not on the one write lock: a worker claims while
another transaction holds the write lock, two hosts claiming at once never share a task, and
whatever a claim would change beyond its task (a timed-out claim taken over, a task failed and
its lease settled) still waits for the write lock. The parts that are not about the lock run
on SQLite too."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from studio.config import Settings
from studio.runtime.worker import Claimed, Worker, keep_claims
from studio.store.db import open_database
from studio.store.dialect import account_lock, hold
from tests import backends
from tests.conftest import ADA, BEN, days_ahead, execute, lease_body, rows, running, scalar

pytestmark = pytest.mark.anyio

DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "20"}]}


@contextlib.contextmanager
def rows_held(path: Path, sql: str, *params: Any) -> Iterator[None]:
    """Another connection inside a write transaction holding the rows `sql` selects (it ends
    in FOR UPDATE), as a host in the middle of saving a proposal."""
    db = backends.connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute(sql, params).fetchall()
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """Another connection inside a write transaction of Ada's account, as a host in the middle
    of one."""
    db = backends.connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        hold(db, account_lock(db.execute("SELECT id FROM actors WHERE email = ?",
                                         (ADA,)).fetchone()[0]))
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


def worker_of(studio: Any) -> Worker:
    return Worker(studio.studio.db, studio.studio.providers, studio.settings)


def quiet(settings: Settings) -> Settings:
    return settings.with_changes(embedded_worker=False, sweeper=False)


@backends.postgres_only
async def test_a_worker_claims_while_another_write_holds_the_account(settings):
    async with running(quiet(settings)) as studio:
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:2]))
        lease_id = made.json()["lease_id"]
        worker = worker_of(studio)
        with write_lock_held(settings.db_path):
            async with asyncio.timeout(5):
                task = await worker.claim()
            assert task is not None and task.lease_id == lease_id
            assert rows(settings.db_path, "SELECT status, claim FROM tasks WHERE id = ?",
                        task.task_id) == [("running", task.claim)]


@backends.postgres_only
async def test_two_hosts_claiming_at_once_never_share_a_task(settings):
    """Two studios' workers, each on its own pool, claim eight at a time until none waits."""
    async with running(quiet(settings)) as first:
        ada = await first.signed_in()
        made = await ada.post("/leases", json=lease_body(first.invoice_ids(), candidates=5))
        assert made.status_code == 201, made.text
        total = made.json()["tasks"]
        other = await open_database(settings).open()
        try:
            workers = [worker_of(first), Worker(other, first.studio.providers, settings)]
            claimed: list[Claimed] = []
            while True:
                got = await asyncio.gather(*(workers[n % 2].claim() for n in range(8)))
                found = [task for task in got if task is not None]
                if not found:
                    break
                claimed.extend(found)
        finally:
            await other.close()
    ids = [task.task_id for task in claimed]
    assert len(ids) == len(set(ids)) == total, "a task was claimed twice, or left waiting"
    held = dict(rows(settings.db_path, "SELECT id, claim FROM tasks WHERE status = 'running'"))
    assert held == {task.task_id: task.claim for task in claimed}
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM tasks WHERE attempts != 1") == 0


@backends.postgres_only
async def test_a_timed_out_claim_is_not_taken_over_while_its_proposal_is_being_saved(settings):
    """Its first holder may be saving the task's proposal right now: saving locks the task's
    row (`leases.record_proposal`), which a claim passes over."""
    async with running(quiet(settings)) as studio:
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease_id = made.json()["lease_id"]
        execute(settings.db_path, "UPDATE tasks SET status = 'running', claim = 'gone',"
                " claim_expires_at = 1, attempts = 1 WHERE lease_id = ?", lease_id)
        worker = worker_of(studio)
        with rows_held(settings.db_path, "SELECT id FROM tasks WHERE lease_id = ? FOR UPDATE",
                       lease_id):
            async with asyncio.timeout(10):
                assert await worker.claim() is None
            assert scalar(settings.db_path, "SELECT claim FROM tasks WHERE lease_id = ?",
                          lease_id) == "gone"
        async with asyncio.timeout(10):
            task = await worker.claim()
    assert task is not None and task.lease_id == lease_id and task.attempts == 2
    assert rows(settings.db_path, "SELECT status, claim FROM tasks WHERE lease_id = ?",
                lease_id) == [("running", task.claim)]


async def test_timed_out_claims_go_back_to_waiting_when_a_worker_keeps_its_own(settings):
    async with running(quiet(settings)) as studio:
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:3]))
        lease_id = made.json()["lease_id"]
        ids = [row[0] for row in rows(settings.db_path, "SELECT id FROM tasks"
                                      " WHERE lease_id = ? ORDER BY position", lease_id)]
        execute(settings.db_path, "UPDATE tasks SET status = 'running', claim = 'gone',"
                " claim_expires_at = 1, attempts = 1 WHERE id = ?", ids[0])
        execute(settings.db_path, "UPDATE tasks SET status = 'running', claim = 'mine',"
                " claim_expires_at = 1, attempts = 1 WHERE id = ?", ids[1])
        execute(settings.db_path, "UPDATE tasks SET status = 'running', claim = 'alive',"
                " claim_expires_at = ?, attempts = 1 WHERE id = ?", time.time() + 600, ids[2])

        assert await studio.studio.db.write(keep_claims, ["mine"], 30.0) == 1

    found = {row[0]: tuple(row[1:]) for row in rows(
        settings.db_path, "SELECT id, status, claim, attempts, claim_expires_at > ? FROM tasks"
        " WHERE lease_id = ?", time.time() + 20, lease_id)}
    assert found == {ids[0]: ("pending", None, 1, None), ids[1]: ("running", "mine", 1, True),
                     ids[2]: ("running", "alive", 1, True)}


async def test_an_unreadable_invoice_fails_its_task_and_settles_the_lease(settings):
    """The failure writes lease state, so on PostgreSQL it waits for the lease's row although
    the claim before it does not."""
    async with running(quiet(settings)) as studio:
        ada = await studio.signed_in()
        draft = (await ada.post("/invoices", json=DRAFT)).json()
        made = await ada.post("/leases", json=lease_body([draft["id"]]))
        assert made.status_code == 201, made.text
        lease_id = made.json()["lease_id"]
        execute(settings.db_path, "UPDATE invoices SET line_items = 'not a list' WHERE id = ?",
                draft["id"])
        worker = worker_of(studio)
        claiming = asyncio.create_task(worker.claim())
        if backends.ON_POSTGRES:
            with rows_held(settings.db_path, "SELECT id FROM leases WHERE id = ? FOR UPDATE",
                           lease_id):
                await asyncio.sleep(1.0)
                # Claimed on row locks, but neither failed nor settled while the lock is held.
                assert not claiming.done()
                assert rows(settings.db_path, "SELECT status FROM tasks WHERE lease_id = ?",
                            lease_id) == [("running",)]
                assert scalar(settings.db_path, "SELECT status FROM leases WHERE id = ?",
                              lease_id) == "open"
        async with asyncio.timeout(10):
            assert await claiming is None
        assert worker._held == set()
    task = rows(settings.db_path, "SELECT status, claim, error FROM tasks WHERE lease_id = ?",
                lease_id)
    assert [(status, claim) for status, claim, _ in task] == [("failed", None)]
    assert task[0][2].startswith("unreadable invoice")
    assert scalar(settings.db_path, "SELECT status FROM leases WHERE id = ?", lease_id) == \
        "failed"
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM lease_events WHERE lease_id = ?"
                  " AND kind = 'provider_error'", lease_id) == 1


@backends.postgres_only
async def test_one_actors_tasks_waiting_on_a_paused_host_leave_a_slot_for_another_account(
        settings):
    """A host paused while it saves one of Ada's proposals holds her lease's row; every task of
    hers this worker runs then waits for it to save. They never fill the worker's last slot,
    so Ben's task, asked for meanwhile, is run and proposed at once."""
    async with running(quiet(settings).with_changes(worker_slots=2)) as studio:
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:3]))
        assert made.status_code == 201, made.text
        ada_lease = made.json()["lease_id"]
        ben = await studio.signed_in(BEN)
        worker = worker_of(studio)
        working: asyncio.Task[None] | None = None
        try:
            with rows_held(settings.db_path, "SELECT id FROM leases WHERE id = ? FOR UPDATE",
                           ada_lease):
                working = asyncio.create_task(worker.run_tasks())
                deadline = time.monotonic() + 5
                while scalar(settings.db_path, "SELECT COUNT(*) FROM tasks"
                             " WHERE status = 'running'") == 0:
                    assert time.monotonic() < deadline, "no task of Ada's was claimed"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)  # time for a second claim of hers, if one were made
                asked = await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1]))
                assert asked.status_code == 201, asked.text
                ben_lease = asked.json()["lease_id"]
                worker.wake.set()
                started = time.monotonic()
                while scalar(settings.db_path, "SELECT status FROM leases WHERE id = ?",
                             ben_lease) != "proposed":
                    assert time.monotonic() - started < 3, \
                        "Ben's task waited for the paused host's lock on Ada's lease"
                    await asyncio.sleep(0.05)
                # Ada's tasks still wait for the paused host: nothing of hers was saved.
                assert scalar(settings.db_path, "SELECT COUNT(*) FROM proposals"
                              " WHERE lease_id = ?", ada_lease) == 0
        finally:
            # Ada's saves go on once the lock is let go; then the worker stops.
            if working is not None:
                working.cancel()
                await asyncio.gather(working, return_exceptions=True)

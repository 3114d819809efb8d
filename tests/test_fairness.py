"""Claims are fair between actors (finding 7 of issue 9): one actor's big batch does not hold
back another actor's single task, deadline order holds within one actor, and one actor may
have only so many tasks waiting. Also finding 8: a claim whose write failed is not kept."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from typing import Any

import pytest

from studio.runtime import worker as worker_module
from studio.runtime.worker import Worker, claim_task
from tests.conftest import ADA, BEN, lease_body, rows, running, scalar

pytestmark = pytest.mark.anyio


def big_batch(studio: Any, request_id: str, candidates: int = 5) -> dict[str, Any]:
    return lease_body(studio.invoice_ids(ADA), request_id, candidates=candidates)


async def test_claims_take_turns_between_actors_and_keep_deadline_order_within_one(settings):
    async with running(settings.with_changes(embedded_worker=False, sweeper=False)) as studio:
        ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
        first = (await ada.post("/leases", json=big_batch(studio, "a1"))).json()
        second = (await ada.post("/leases", json=big_batch(studio, "a2"))).json()
        bens = (await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "b")
                               )).json()
        claimed = []
        while (task := await studio.studio.db.write(claim_task, uuid.uuid4().hex, 30.0)):
            claimed.append(task)
        assert len(claimed) == first["tasks"] + second["tasks"] + bens["tasks"]
        # Ben's one task goes second, not after Ada's whole batch.
        assert [task.lease_id for task in claimed[:2]] == [first["lease_id"], bens["lease_id"]]
        # Ada's own tasks keep deadline order: her first lease's tasks, in order, then her second.
        adas = [task for task in claimed if task.lease_id != bens["lease_id"]]
        assert [task.lease_id for task in adas] == \
            [first["lease_id"]] * first["tasks"] + [second["lease_id"]] * second["tasks"]
        positions = [row[0] for row in rows(
            settings.db_path, "SELECT id FROM tasks WHERE lease_id = ? ORDER BY position",
            first["lease_id"])]
        assert [task.task_id for task in adas[:first["tasks"]]] == positions


class TokenProvider:
    """A slow provider the test drives: each call waits for a token the test hands out."""

    name = "local"

    def __init__(self) -> None:
        self.tokens = asyncio.Semaphore(0)
        self.waiting = 0
        self.actors: list[str] = []

    async def complete(self, purpose: Any, invoice: dict[str, Any], actor_id: str, *,
                       candidate: int, timeout: float) -> str:
        self.actors.append(actor_id)
        self.waiting += 1
        try:
            await self.tokens.acquire()
        finally:
            self.waiting -= 1
        return f"Slow summary {candidate} of {invoice['number']}"


async def wait_for(check: Any) -> None:
    async with asyncio.timeout(20):
        while not check():
            await asyncio.sleep(0.01)


def adas_actor(settings: Any) -> str:
    return scalar(settings.db_path, "SELECT id FROM actors WHERE email = ?", ADA)


def tasks_done(settings: Any) -> int:
    return scalar(settings.db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'done'")


async def test_one_task_from_ben_finishes_within_two_task_times_of_adas_big_batch(settings):
    slow = TokenProvider()
    two_slots = settings.with_changes(worker_slots=2, sweeper=False)
    async with running(two_slots, {"local": slow}) as studio:
        ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
        adas = (await ada.post("/leases", json=big_batch(studio, "big"))).json()
        await wait_for(lambda: slow.waiting == 1)  # one slot busy with Ada's batch
        await asyncio.sleep(0.5)
        # The last free slot is kept for another account: Ada's batch never fills both.
        assert slow.waiting == 1 and set(slow.actors) == {adas_actor(settings)}
        bens = (await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "one"))
                ).json()
        released = 0
        while (await ben.get(f"/leases/{bens['lease_id']}")).json()["status"] != "proposed":
            assert released <= 2, "Ben's task waited behind Ada's batch"
            await wait_for(lambda: slow.waiting == 2)
            finished = tasks_done(settings)
            slow.tokens.release()
            released += 1
            # The released task's outcome is on disk before Ben's lease is looked at again.
            await wait_for(lambda f=finished: tasks_done(settings) == f + 1)
        # Ben's task runs at once in the slot kept free, beside one of Ada's: at most two
        # releases (Ada's task waited first, then Ben's) end it. Ada's batch has barely begun.
        assert released <= 2
        done = scalar(settings.db_path, "SELECT COUNT(*) FROM tasks WHERE lease_id = ?"
                      " AND status = 'done'", adas["lease_id"])
        assert done <= 3 and adas["tasks"] >= 20
        assert rows(settings.db_path, "SELECT status FROM leases WHERE id = ?",
                    adas["lease_id"])[0][0] == "open"
        for _ in range(adas["tasks"]):
            slow.tokens.release()


async def test_one_actor_may_have_only_so_many_tasks_waiting(settings):
    capped = settings.with_changes(max_open_tasks_per_actor=30, embedded_worker=False)
    async with running(capped) as studio:
        ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
        first = await ada.post("/leases", json=big_batch(studio, "first", candidates=4))
        assert first.status_code == 201 and first.json()["tasks"] <= 30
        refused = await ada.post("/leases", json=big_batch(studio, "second", candidates=4))
        assert refused.status_code == 429
        assert refused.json()["detail"] == "too_many_open_tasks"
        assert "at most 30" in refused.json()["message"]
        assert scalar(settings.db_path, "SELECT COUNT(*) FROM request_bindings"
                      " WHERE request_id = 'second'") == 0
        assert scalar(settings.db_path, "SELECT COUNT(*) FROM leases") == 1
        # Ben is not held to Ada's count; Ada may submit again once hers is cancelled.
        assert (await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "b"))
                ).status_code == 201
        await ada.post(f"/leases/{first.json()['lease_id']}/cancel")
        again = await ada.post("/leases", json=big_batch(studio, "second", candidates=4))
        assert again.status_code == 201


async def test_a_claim_whose_write_failed_is_not_kept_alive(settings, monkeypatch):
    async with running(settings.with_changes(embedded_worker=False)) as studio:
        ada = await studio.signed_in()
        await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        worker = Worker(studio.studio.db, studio.studio.providers, studio.settings)

        def broken(db: sqlite3.Connection, *args: Any, **kwargs: Any) -> None:
            db.execute("UPDATE tasks SET status = 'running', claim = 'half-written'")
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(worker_module, "claim_task", broken)
        with pytest.raises(sqlite3.OperationalError):
            await worker.claim()
        assert worker._held == set()  # nothing left for the keeper to renew forever
        assert scalar(settings.db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'running'"
                      ) == 0

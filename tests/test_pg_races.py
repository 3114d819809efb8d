"""Races on PostgreSQL, run a few hundred times: two connections claiming at once never get
the same task, and two hosts issuing with the same request id give one number.

On SQLite one writer at a time makes both hold trivially; on PostgreSQL the claim also stands
on its row locks (`FOR UPDATE OF tasks SKIP LOCKED`, the status checked again), so it is run
here both as the studio runs it, under the write lock, and on those row locks alone.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from studio.accounts.auth import SESSION_COOKIE, Actor, add_actor
from studio.billing import profiles
from studio.config import Settings
from studio.leasing.intents import Intent, LeaseRequest, create_lease
from studio.runtime.worker import Claimed, claim_task
from studio.store import postgres
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, BEN, days_ahead, rows, running, scalar

pytestmark = pytest.mark.skipif(not backends.ON_POSTGRES,
                                reason="PostgreSQL's concurrency; SQLite has one writer")

TASKS_PER_ACTOR = 150
DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "20"}]}


def waiting_tasks(db: Any, email: str, count: int) -> str:
    """One open lease of `count` tasks for the actor, made by the studio's own unit."""
    actor_id = db.execute("SELECT id FROM actors WHERE email = ?", (email,)).fetchone()[0]
    invoice_ids = [row[0] for row in db.execute(
        "SELECT id FROM invoices WHERE owner_id = ? ORDER BY id", (actor_id,)).fetchall()]
    session_id = uuid.uuid4().hex
    db.execute("INSERT INTO sessions (id, actor_id, created_at, last_seen_at)"
               " VALUES (?, ?, ?, ?)", (session_id, actor_id, time.time(), time.time()))
    per_invoice = -(-count // len(invoice_ids))
    plan = [(invoice_id, "local", candidate) for candidate in range(1, per_invoice + 1)
            for invoice_id in invoice_ids][:count]
    request = LeaseRequest(uuid.uuid4().hex, Intent("summarize_invoice", tuple(invoice_ids),
                                                    ("local",), per_invoice))
    receipt, _ = create_lease(db, Actor(actor_id, email, session_id), request, plan, 600.0)
    return receipt["lease_id"]


def under_the_write_lock(db: postgres.Connection, claim: str) -> Claimed | None:
    return in_transaction(db, claim_task, claim, 30.0)


def on_row_locks_alone(db: postgres.Connection, claim: str) -> Claimed | None:
    """The claim in a plain READ COMMITTED transaction, without the write lock."""
    db.raw.execute("BEGIN")
    try:
        task = claim_task(db, claim, 30.0, db.database_clock())
        db.raw.execute("COMMIT")
    except BaseException:
        db.raw.execute("ROLLBACK")
        raise
    return task


@pytest.mark.parametrize("claim", [under_the_write_lock, on_row_locks_alone],
                         ids=["under the write lock", "on row locks alone"])
def test_two_connections_claiming_at_once_never_get_the_same_task(
        tmp_path: Path, claim: Callable[[postgres.Connection, str], Claimed | None]) -> None:
    path = tmp_path / "studio.db"
    url = backends.use_seeded(path)
    db = postgres.connect(url)
    try:
        leases = [in_transaction(db, waiting_tasks, email, TASKS_PER_ACTOR)
                  for email in (ADA, BEN)]
    finally:
        db.close()
    total = TASKS_PER_ACTOR * len(leases)

    connections = [postgres.connect(url), postgres.connect(url)]
    claimed: list[dict[str, str]] = [{}, {}]  # per connection: task id -> its claim
    errors: list[BaseException] = []
    this_round: list[Claimed | None] = [None, None]
    finished = threading.Event()

    def judge() -> None:
        if this_round == [None, None] or errors:
            finished.set()

    start, end = threading.Barrier(2), threading.Barrier(2, action=judge)

    def claimer(n: int) -> None:
        for _ in range(total + 10):
            start.wait(30)
            try:
                mine = f"claimer-{n}-{uuid.uuid4().hex}"
                this_round[n] = task = claim(connections[n], mine)
                if task is not None:
                    claimed[n][task.task_id] = mine
            except BaseException as error:  # the other thread must not wait forever
                errors.append(error)
                this_round[n] = None
            end.wait(30)
            if finished.is_set():
                return

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        for connection in connections:
            connection.close()
    assert errors == []
    assert not set(claimed[0]) & set(claimed[1]), "a task was claimed twice"
    assert len(claimed[0]) + len(claimed[1]) == total
    assert claimed[0] and claimed[1]  # both took their share: the claims did race
    held = dict(rows(path, "SELECT id, claim FROM tasks WHERE status = 'running'"))
    assert held == {**claimed[0], **claimed[1]}
    assert scalar(path, "SELECT COUNT(*) FROM tasks WHERE attempts != 1") == 0


ROUNDS = 200


def with_seller(url: str) -> tuple[str, str]:
    email, password = "seller@example.com", "seller-password"
    db = postgres.connect(url)
    try:
        in_transaction(db, lambda db: profiles.save(db, add_actor(db, email, password), {
            "name": "Seller Co", "address": "1 Road", "vat_id": ""}))
    finally:
        db.close()
    return email, password


@pytest.mark.anyio
async def test_two_hosts_issuing_with_the_same_request_id_give_one_number(
        settings: Settings) -> None:
    """Two studios, each with its own pool of connections to one database, as two hosts."""
    email, password = with_seller(settings.database_url)
    quiet = settings.with_changes(embedded_worker=False, sweeper=False, secret_key="shared")
    async with running(quiet) as first, running(quiet) as second:
        on_first = first.client()
        signed_in = await on_first.post("/login", json={"email": email, "password": password})
        assert signed_in.status_code == 200, signed_in.text
        on_second = second.client()
        on_second.cookies.set(SESSION_COOKIE, on_first.cookies[SESSION_COOKIE])
        given: dict[str, str] = {}
        for n in range(ROUNDS):
            draft = (await (on_first, on_second)[n % 2].post("/invoices", json=DRAFT)).json()
            body = {"request_id": f"issue-{draft['id']}", "revision": 1}
            replies = await asyncio.gather(
                on_first.post(f"/invoices/{draft['id']}/issue", json=body),
                on_second.post(f"/invoices/{draft['id']}/issue", json=body))
            assert sorted(r.status_code for r in replies) == [200, 201], \
                [r.text for r in replies]
            numbers = {reply.json()["number"] for reply in replies}
            assert len(numbers) == 1, numbers
            given[draft["id"]] = numbers.pop()
        await on_first.aclose()
        await on_second.aclose()

    path = settings.db_path
    owner = "(SELECT id FROM actors WHERE email = ?)"
    assert sorted(int(number.rsplit("-", 1)[1]) for number in given.values()) == \
        list(range(1, ROUNDS + 1))
    assert dict(rows(path, f"SELECT id, number FROM invoices WHERE owner_id = {owner}"
                           " AND status = 'issued'", email)) == given
    assert scalar(path, f"SELECT COUNT(*) FROM request_bindings WHERE actor_id = {owner}"
                        " AND kind = 'issue'", email) == ROUNDS

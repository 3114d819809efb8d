"""`studio serve --workers 2`: two processes on one port and one database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import closing
from typing import Any

import httpx
import pytest

from studio.accounts.auth import SESSION_COOKIE
from studio.config import Settings
from studio.runtime.worker import Worker
from tests.conftest import (
    ADA,
    execute,
    lease_body,
    rows,
    running,
    scalar,
    sign_in,
    start_server,
)


def pinned_clients(url: str, wanted: int = 2, tries: int = 300) -> dict[int, httpx.Client]:
    """One kept-alive client per server process, told apart by the pid /healthz reports."""
    found: dict[int, httpx.Client] = {}
    for _ in range(tries):
        client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=30)
        pid = client.get("/healthz").json()["pid"]
        if pid in found:
            client.close()
        else:
            found[pid] = client
        if len(found) == wanted:
            return found
    raise AssertionError(f"only {len(found)} of {wanted} processes answered")


def test_two_workers_both_answer_and_a_lease_made_through_one_is_applied_through_the_other(
        tmp_path):
    db_path = tmp_path / "studio.db"
    temp = tmp_path / "tmp"
    temp.mkdir()
    # The counters folder a killed studio left behind (its process is gone), and one of a
    # studio still running (this test's own process stands in for it).
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = temp / f"studio-metrics-{gone.pid}-abc"
    living = temp / f"studio-metrics-{os.getpid()}-def"
    # A killed studio whose worker process lives on (this one stands in) still writes here.
    orphaned = temp / f"studio-metrics-{gone.pid}-ghi"
    for folder in (left, living, orphaned):
        folder.mkdir()
    (left / f"counter_{gone.pid}.db").write_bytes(b"")
    (orphaned / f"counter_{os.getpid()}.db").write_bytes(b"")
    server = start_server(db_path, "--demo", "--workers", "2", TMPDIR=str(temp))
    try:
        assert not left.exists() and living.exists() and orphaned.exists()
        [counters] = [p for p in temp.iterdir() if p.name.startswith(
            f"studio-metrics-{server.process.pid}-")]
        clients = pinned_clients(server.url)
        (first_pid, first), (second_pid, second) = clients.items()
        assert first_pid != second_pid
        with closing(sign_in(server.url)) as signed_in:
            cookie = signed_in.cookies[SESSION_COOKIE]
        for client in (first, second):
            client.cookies.set(SESSION_COOKIE, cookie)

        invoice = rows(db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                                " owner_id WHERE email = ? ORDER BY number", ADA)[0][0]
        made = first.post("/leases", json=lease_body([invoice], "across-workers"))
        assert made.status_code == 201
        lease_id = made.json()["lease_id"]
        assert first.get("/healthz").json()["pid"] == first_pid

        deadline = time.monotonic() + 60
        while second.get(f"/leases/{lease_id}").json()["status"] != "proposed":
            assert time.monotonic() < deadline, "the lease never reached proposed"
            time.sleep(0.05)
        applied = second.post(f"/leases/{lease_id}/apply")
        assert applied.status_code == 200, applied.text
        assert second.get("/healthz").json()["pid"] == second_pid
        # The same id sent to the other process is a replay, not a second lease.
        replay = second.post("/leases", json=lease_body([invoice], "across-workers"))
        assert (replay.status_code, replay.json()["lease_id"]) == (200, lease_id)
        for client in clients.values():
            client.close()
    finally:
        server.stop()

    assert scalar(db_path, "SELECT status FROM leases WHERE id = ?", lease_id) == "applied"
    assert scalar(db_path, "SELECT COUNT(*) FROM leases") == 1
    assert scalar(db_path, "SELECT summary FROM invoices WHERE id = ?", invoice) != ""
    assert "with 2 worker process(es)" in server.log()
    assert not counters.exists() and living.exists()  # a clean stop takes its own away


# --- what an idle worker costs ---------------------------------------------------------------


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every write transaction begun on the studio's database, by its unit's name."""
    from studio.store import postgres
    from studio.store import sqlite as sqlite_db

    writes: list[str] = []
    for module in (sqlite_db, postgres):
        def counted(connection: Any, unit: Any, *args: Any, _begin: Any = module.in_transaction,
                    **kwargs: Any) -> Any:
            writes.append(unit.__name__)
            return _begin(connection, unit, *args, **kwargs)
        monkeypatch.setattr(module, "in_transaction", counted)
    return writes


@pytest.mark.anyio
async def test_an_idle_worker_looks_for_tasks_and_sends_without_writing(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing to do, a poll is a read; the write lock is taken only for a claim, one
    write for one task."""
    mailing = settings.with_changes(embedded_worker=False, sweeper=False,
                                    smtp_url="smtp://127.0.0.1:9", mail_from="b@studio.test")
    async with running(mailing) as studio:
        db = studio.studio.db
        worker = Worker(db, studio.studio.providers, studio.settings)
        assert worker.delivery is not None
        writes = count_writes(monkeypatch)
        for _ in range(3):
            assert await worker.claim() is None
            assert await worker.delivery.claim() is None
        assert writes == []
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        assert made.status_code == 201, made.text
        writes.clear()
        task = await worker.claim()
        assert task is not None and writes == ["claim_task"]
        [row] = rows(settings.db_path, "SELECT status, claim FROM tasks WHERE id = ?",
                     task.task_id)
        assert (row["status"], row["claim"]) == ("running", task.claim)


@pytest.mark.anyio
async def test_a_timed_out_claim_is_taken_over_with_one_write_after_the_look(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(settings.with_changes(embedded_worker=False, sweeper=False)) as studio:
        db = studio.studio.db
        ada = await studio.signed_in()
        made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:2]))
        assert made.status_code == 201, made.text
        first = Worker(db, studio.studio.providers, studio.settings)
        taken = [task.task_id for task in [await first.claim(), await first.claim()] if task]
        assert len(taken) == 2 and await first.claim() is None
        execute(settings.db_path, "UPDATE tasks SET claim_expires_at = 0")  # its worker died
        second = Worker(db, studio.studio.providers, studio.settings)
        writes = count_writes(monkeypatch)
        task = await second.claim()
        assert task is not None and task.task_id in taken and task.attempts == 2
        assert writes == ["claim_task"]  # no row-lock try first: nothing was waiting
        [row] = rows(settings.db_path, "SELECT status, claim FROM tasks WHERE id = ?",
                     task.task_id)
        assert (row["status"], row["claim"]) == ("running", task.claim)

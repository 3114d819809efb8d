"""Real processes sharing one SQLite file: BEGIN IMMEDIATE is the guarantee, not a lock."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx

from tests.conftest import (
    lease_body,
    rows,
    scalar,
    sign_in,
    start_server,
    start_worker,
    wait_until,
)


def invoice_ids(db_path: Path) -> list[str]:
    return [r[0] for r in rows(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                                        " actors.id = owner_id WHERE email = 'ada@example.com'"
                                        " ORDER BY number")]


def test_two_processes_make_one_lease_from_concurrent_same_id_submissions(tmp_path):
    db_path = tmp_path / "studio.db"
    first = start_server(db_path, "--demo")
    second = start_server(db_path)
    try:
        body = lease_body(invoice_ids(db_path)[:2], "across-processes", candidates=3)
        clients = [sign_in(first.url), sign_in(second.url)]

        def submit(n: int) -> httpx.Response:
            return clients[n % 2].post("/leases", json=body)

        with ThreadPoolExecutor(16) as pool, closing(clients[0]), closing(clients[1]):
            replies = list(pool.map(submit, range(32)))

        assert sorted(r.status_code for r in replies) == [200] * 31 + [201]
        assert len({r.json()["lease_id"] for r in replies}) == 1
        assert scalar(db_path, "SELECT COUNT(*) FROM leases") == 1
        assert scalar(db_path, "SELECT COUNT(*) FROM tasks") == 6
        assert scalar(db_path, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'") == 1
    finally:
        first.stop()
        second.stop()


def test_a_killed_worker_loses_no_task_and_no_task_is_saved_twice(tmp_path):
    """Invariant 5: the claim times out and another worker finishes each task exactly once."""
    db_path = tmp_path / "studio.db"
    slow = {"STUDIO_PROVIDER_DELAY_S": "30", "STUDIO_CLAIM_SECONDS": "1.5"}
    # The web process runs no worker here: only the two worker processes do the work.
    server = start_server(db_path, "--demo", STUDIO_EMBEDDED_WORKER="0")
    doomed = start_worker(db_path, "doomed", STUDIO_WORKER_SLOTS="4", **slow)
    try:
        with closing(sign_in(server.url)) as client:
            lease_id = client.post("/leases", json=lease_body(invoice_ids(db_path)[:2],
                                                              candidates=2)).json()["lease_id"]
        # Wait until the doomed worker holds tasks, then kill it mid-generation.
        wait_until(lambda: scalar(db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'running'"
                                           " AND claim LIKE ?", f"%:{doomed.pid}:%") >= 1,
                   60, "the doomed worker to claim")
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
        held = scalar(db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'running'")
        assert held >= 1

        rescuer = start_worker(db_path, "rescuer", STUDIO_PROVIDER_DELAY_S="0",
                               STUDIO_CLAIM_SECONDS="1.5")
        try:
            wait_until(lambda: scalar(db_path, "SELECT status FROM leases") == "proposed", 60,
                       "the rescuing worker to finish the lease")
        finally:
            rescuer.terminate()
            rescuer.wait(10)

        per_task = rows(db_path, "SELECT tasks.id, tasks.status, COUNT(proposals.id) AS n"
                                 " FROM tasks LEFT JOIN proposals ON proposals.task_id = tasks.id"
                                 " WHERE tasks.lease_id = ? GROUP BY tasks.id", lease_id)
        assert len(per_task) == 4
        assert all(row["status"] == "done" and row["n"] == 1 for row in per_task)
        reclaimed = scalar(db_path, "SELECT COUNT(*) FROM tasks WHERE attempts >= 2")
        assert reclaimed >= 1  # a task really was taken over after its claim timed out
    finally:
        server.stop()
        if doomed.poll() is None:
            doomed.kill()


def test_a_working_worker_keeps_its_claim_alive(tmp_path):
    """A slow but living worker is not robbed: its claim is renewed while it works, though a
    free slot would take over any claim that timed out."""
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo", STUDIO_PROVIDER_DELAY_S="3",
                          STUDIO_CLAIM_SECONDS="0.6", STUDIO_WORKER_SLOTS="2")
    try:
        with closing(sign_in(server.url)) as client:
            lease_id = client.post("/leases", json=lease_body(invoice_ids(db_path)[:1])).json()[
                "lease_id"]
        wait_until(lambda: scalar(db_path, "SELECT status FROM leases") == "proposed", 60,
                   "the lease to be proposed")
        assert scalar(db_path, "SELECT attempts FROM tasks WHERE lease_id = ?", lease_id) == 1
    finally:
        server.stop()

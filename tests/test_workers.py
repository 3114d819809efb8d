"""`studio serve --workers 2`: two processes on one port and one database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import closing

import httpx

from studio.auth import SESSION_COOKIE
from tests.conftest import ADA, lease_body, rows, scalar, sign_in, start_server


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

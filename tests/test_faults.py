"""Faults on real processes: kill -9 of the server and of a worker, and two servers with a
worker on one file under load. `STUDIO_SOAK=1 pytest -m soak` runs 200 crash cycles."""

from __future__ import annotations

import os
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from studio.accounts.auth import Actor
from studio.config import Settings
from studio.leasing import intents
from studio.leasing.providers import Providers
from studio.ops.demo import seed_demo
from studio.store.db import prepare_database
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import (
    lease_body,
    rows,
    scalar,
    sign_in,
    start_server,
    start_worker,
    wait_until,
)

# The clients of the crash cycles (five made per cycle) share one TLS context: a new one
# loads the CA bundle, about 27 ms of CPU each time, though these servers speak plain HTTP.
TLS = ssl.create_default_context()
CRASH_CYCLES = 20
SOAK_CYCLES = 200
SUBMITTERS = 4


def ada_invoices(db_path: Path) -> list[str]:
    return [r[0] for r in rows(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                                        " actors.id = owner_id WHERE email = 'ada@example.com'"
                                        " ORDER BY number")]


def assert_no_partial_tree_and_no_dangling_binding(db_path: Path) -> None:
    with closing(backends.connect(db_path)) as db:
        def scalar(sql: str) -> int:
            return db.execute(sql).fetchone()[0]

        partial = db.execute("SELECT leases.id, leases.task_count, COUNT(tasks.id) AS made"
                             " FROM leases LEFT JOIN tasks ON tasks.lease_id = leases.id"
                             " GROUP BY leases.id, leases.task_count"
                             " HAVING COUNT(tasks.id) != leases.task_count").fetchall()
        assert partial == [], [dict(r) for r in partial]
        dangling = scalar("SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'"
                          " AND target_id NOT IN (SELECT id FROM leases)")
        unbound = scalar("SELECT COUNT(*) FROM leases WHERE id NOT IN"
                         " (SELECT target_id FROM request_bindings WHERE kind = 'lease')")
        assert dangling == 0 and unbound == 0
        no_invoices = scalar("SELECT COUNT(*) FROM leases WHERE id NOT IN"
                             " (SELECT lease_id FROM lease_invoices)")
        assert no_invoices == 0


def submit_until_killed(url: str, cookie: str, cycle: int, invoices: list[str],
                        answered: list[tuple[dict, dict]], unanswered: list[dict],
                        progress: threading.Condition, thread: int) -> None:
    client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=10,
                          cookies={"studio_session": cookie}, verify=TLS)
    n = 0
    with client:
        while True:
            n += 1
            count = 1 + (n + thread) % len(invoices)
            body = lease_body(invoices[:count], f"crash-{cycle}-{thread}-{n}",
                              candidates=1 + n % 5)
            try:
                reply = client.post("/leases", json=body)
            except httpx.HTTPError:
                unanswered.append(body)
                return
            assert reply.status_code == 201, reply.text
            with progress:
                answered.append((body, reply.json()))
                progress.notify_all()


def replay_all(url: str, cookie: str, db_path: Path, answered: list[tuple[dict, dict]],
               unanswered: list[dict]) -> None:
    """After a restart every answered request replays to its lease, with all its tasks."""
    with httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=30,
                      cookies={"studio_session": cookie}, verify=TLS) as client, \
            closing(backends.connect(db_path)) as db:
        def tasks_of(lease_id: str) -> int:
            return db.execute("SELECT COUNT(*) FROM tasks WHERE lease_id = ?",
                              (lease_id,)).fetchone()[0]

        for body, receipt in answered:
            again = client.post("/leases", json=body)
            assert again.status_code == 200, again.text
            assert again.json()["lease_id"] == receipt["lease_id"]
            assert again.json()["tasks"] == receipt["tasks"]
            made = tasks_of(receipt["lease_id"])
            assert made == receipt["tasks"] == len(body["invoice_ids"]) * body["candidates"]
        for body in unanswered:
            # Lost in the crash: it either committed whole (200) or not at all (201 now).
            again = client.post("/leases", json=body)
            assert again.status_code in (200, 201), again.text
            made = tasks_of(again.json()["lease_id"])
            assert made == len(body["invoice_ids"]) * body["candidates"]


def test_kill_9_of_serve_while_clients_submit_loses_no_answered_request(tmp_path):
    crash_cycles(tmp_path / "studio.db", CRASH_CYCLES)


def test_kill_9_of_serve_with_two_worker_processes_loses_no_answered_request(tmp_path):
    crash_cycles(tmp_path / "studio.db", 5, "--workers", "2")


def crash_cycles(db_path: Path, cycles: int, *serve_args: str) -> None:
    server = start_server(db_path, "--demo", *serve_args)
    first = sign_in(server.url)
    cookie = first.cookies["studio_session"]
    first.close()
    invoices = ada_invoices(db_path)
    previous: tuple[list, list] = ([], [])
    killed_mid_request = 0
    for cycle in range(cycles):
        replay_all(server.url, cookie, db_path, *previous)
        answered: list[tuple[dict, dict]] = []
        unanswered: list[dict] = []
        progress = threading.Condition()
        threads = [threading.Thread(target=submit_until_killed, args=(
            server.url, cookie, cycle, invoices, answered, unanswered, progress, n))
            for n in range(SUBMITTERS)]
        for thread in threads:
            thread.start()
        with progress:  # kill after a varying number of answers, with submitters still busy
            wanted = 2 + cycle % 7
            assert progress.wait_for(lambda a=answered, w=wanted: len(a) >= w, timeout=30)
        server.crash()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive()
        killed_mid_request += len(unanswered)
        assert_no_partial_tree_and_no_dangling_binding(db_path)
        previous = (answered, unanswered)
        server = start_server(db_path, "--demo", *serve_args)
    try:
        replay_all(server.url, cookie, db_path, *previous)
        assert_no_partial_tree_and_no_dangling_binding(db_path)
    finally:
        server.stop()
    # Every kill found requests in flight, so the crashes landed during submissions.
    assert killed_mid_request >= cycles


# --- a worker killed mid-generation ----------------------------------------------------------


def seeded_lease(db_path: Path, invoices: int, candidates: int) -> str:
    """Ada's lease, written straight to the database so no embedded worker touches it first."""
    prepare_database(Settings(db_path=db_path, database_url=backends.database_url(db_path) or ""))
    db = backends.connect(db_path)
    try:
        in_transaction(db, seed_demo)
        ada = db.execute("SELECT id, email FROM actors WHERE email = 'ada@example.com'"
                         ).fetchone()
        db.execute("INSERT INTO sessions (id, actor_id, created_at)"
                   " VALUES ('fault-session', ?, ?)", (ada["id"], time.time()))
        ids = [r[0] for r in db.execute("SELECT id FROM invoices WHERE owner_id = ?"
                                        " ORDER BY number", (ada["id"],))][:invoices]
        request = intents.parse_request(lease_body(ids, "fault", candidates=candidates),
                                        Providers(Settings(db_path=db_path)), 600)
        plan = intents.plan_tasks(request.intent, ["local"])
        receipt, _ = in_transaction(db, intents.create_lease, Actor(ada["id"], ada["email"],
                                    "fault-session"), request, plan, 300.0, time.time())
        return receipt["lease_id"]
    finally:
        db.close()


def test_kill_9_of_a_worker_mid_generation_the_other_finishes_one_proposal_each(tmp_path):
    db_path = tmp_path / "studio.db"
    lease_id = seeded_lease(db_path, invoices=2, candidates=3)
    # The first worker hangs inside its model calls, holding three of the six tasks (its four
    # slots but the last, which it keeps for another account).
    stuck = start_worker(db_path, "stuck", STUDIO_PROVIDER_DELAY_S="120",
                         STUDIO_CLAIM_SECONDS="2", STUDIO_WORKER_SLOTS="4")
    other = None
    try:
        def held_by_stuck() -> int:
            return scalar(db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'running'"
                                   " AND claim LIKE ?", f"%:{stuck.pid}:%")

        wait_until(lambda: held_by_stuck() == 3, 30, "the first worker to claim three tasks")
        other = start_worker(db_path, "other", STUDIO_PROVIDER_DELAY_S="0.2",
                             STUDIO_CLAIM_SECONDS="2", STUDIO_WORKER_SLOTS="4")
        wait_until(lambda: scalar(db_path, "SELECT COUNT(*) FROM tasks WHERE status = 'done'")
                   == 3, 30, "the second worker to finish the free tasks")
        assert held_by_stuck() == 3  # still mid-generation, claims kept alive
        stuck.kill()
        stuck.wait(10)
        wait_until(lambda: scalar(db_path, "SELECT status FROM leases WHERE id = ?", lease_id)
                   == "proposed", 30, "the second worker to finish the killed worker's tasks")
    finally:
        for process in (stuck, other):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
    per_task = rows(db_path, "SELECT tasks.id, tasks.status, tasks.attempts, COUNT(proposals.id)"
                             " AS proposals FROM tasks LEFT JOIN proposals ON"
                             " proposals.task_id = tasks.id"
                             " GROUP BY tasks.id, tasks.status, tasks.attempts")
    assert len(per_task) == 6
    assert all(row["status"] == "done" and row["proposals"] == 1 for row in per_task)
    assert sorted(row["attempts"] for row in per_task) == [1, 1, 1, 2, 2, 2]


# --- two servers and a worker on one file ------------------------------------------------------


def test_two_servers_and_a_worker_under_load_never_show_database_locked(tmp_path):
    db_path = tmp_path / "studio.db"
    first = start_server(db_path, "--demo", STUDIO_PROVIDER_DELAY_S="0.05")
    second = start_server(db_path, STUDIO_PROVIDER_DELAY_S="0.05")
    worker = start_worker(db_path, "worker", STUDIO_PROVIDER_DELAY_S="0.05")
    invoices = ada_invoices(db_path)
    rounds, per_round = 12, 8
    gates = [threading.Barrier(per_round) for _ in range(rounds)]
    clients = [sign_in(first.url), sign_in(second.url)]
    cookies = [c.cookies["studio_session"] for c in clients]
    for client in clients:
        client.close()

    def load(n: int) -> list[tuple[str, int, str]]:
        """One submitter: each round a same-id submission released together with the others,
        then a new lease, a poll of it and a cancel of every other one."""
        url = (first.url, second.url)[n % 2]
        seen = []
        with httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=60,
                          cookies={"studio_session": cookies[n % 2]}) as client:
            for r in range(rounds):
                same = lease_body(invoices[:2], f"shared-{r}", candidates=2)
                gates[r].wait(30)
                calls = [("same", client.post("/leases", json=same))]
                own = client.post("/leases", json=lease_body(
                    invoices[: 1 + (n + r) % 4], f"own-{n}-{r}", candidates=1 + r % 3))
                calls.append(("new", own))
                if own.status_code == 201:
                    lease = own.json()["lease_id"]
                    calls.append(("poll", client.get(f"/leases/{lease}")))
                    calls.append(("poll-htmx", client.get(f"/leases/{lease}",
                                                          headers={"HX-Request": "true"})))
                    if r % 2:
                        calls.append(("cancel", client.post(f"/leases/{lease}/cancel")))
                seen += [(what, reply.status_code, reply.text) for what, reply in calls]
        return seen

    try:
        with ThreadPoolExecutor(per_round) as pool:
            results = [item for batch in pool.map(load, range(per_round)) for item in batch]
        assert worker.poll() is None
    finally:
        first.stop()
        second.stop()
        worker.kill()
        worker.wait(10)
    refused = [(what, status, text[:200]) for what, status, text in results
               if status >= 300 and not (what == "cancel" and status == 409)]
    assert refused == []
    assert not any("locked" in text or "busy" in text for _, _, text in results)
    assert len(results) >= rounds * per_round * 3
    for r in range(rounds):
        made = scalar(db_path, "SELECT COUNT(*) FROM request_bindings WHERE request_id = ?",
                      f"shared-{r}")
        assert made == 1
    assert scalar(db_path, "SELECT COUNT(*) FROM leases") == rounds + rounds * per_round
    assert_no_partial_tree_and_no_dangling_binding(db_path)
    twice = scalar(db_path, "SELECT COUNT(*) FROM (SELECT task_id FROM proposals"
                            " GROUP BY task_id HAVING COUNT(*) > 1) AS twice")
    assert twice == 0


@pytest.mark.soak
@pytest.mark.skipif(os.environ.get("STUDIO_SOAK") != "1", reason="set STUDIO_SOAK=1")
def test_soak_kill_9_cycles(tmp_path):
    """The crash cycle ten times longer."""
    crash_cycles(tmp_path / "studio.db", SOAK_CYCLES)

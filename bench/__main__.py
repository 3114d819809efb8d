"""`python -m bench [--quick | --smoke] [--only PART,...]`: the studio's figures, each divided
by a baseline from the same run. `--only pdf,list,import,upload` re-runs some parts and prints
them; it writes `--out` only when given, so `bench/results.json` always holds one whole run.
`--smoke` runs every part at its smallest, to show that each runs (the test command does, in
tests/test_bench_smoke.py); its figures mean nothing and are written only to `--out`. What
every part sets up (databases, accounts, servers, sign-ins, wrk) is in bench/setup.py.

Shared machines drift, so no figure stands alone: the store is compared with raw `sqlite3`
doing the same inserts, the HTTP routes with a bare Starlette route on the same uvicorn
settings, the worker with a raw `sqlite3` loop running the same claim and write statements.
Load comes from `wrk` (a separate process on loopback); results go to `bench/results.json`.
The `pg` part measures the PostgreSQL backend the same way, each figure against its baseline
(raw psycopg, one worker, the bare route), in a throwaway cluster of its own (bench/pg.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from bench import (
    exports,
    facturx,
    issuing,
    listing,
    loaded,
    payments,
    pg,
    receipts,
    recurring,
    sending,
    uploads,
)
from bench.setup import (
    DRAFT,
    LUA,
    ROOT,
    Server,
    bare_serving,
    install_wrk,
    open_studio_db,
    pg_env,
    raw_sqlite,
    seed_actor_file,
    serving,
    signed_in,
    studio_env,
    timed_polls,
    wrk,
)
from studio.accounts.auth import Actor
from studio.config import Settings
from studio.leasing import intents, leases
from studio.leasing.providers import Providers
from studio.runtime.worker import Worker, claim_task
from studio.store.transactions import in_transaction

RESULTS = Path(__file__).resolve().parent / "results.json"
# Paired runs a route ratio is the median of (see `route_rates`).
ROUNDS = 8
# How long a run is: `--quick` takes fewer repetitions and shorter loads; `--smoke` takes every
# part at its smallest, to show that each runs (its figures mean nothing).
SIZES = ("full", "quick", "smoke")

TARGETS: dict[str, tuple[str, float]] = {
    "create_intent_600_ratio": ("<=", 1.3),
    "replay_rps_ratio": (">=", 0.8),
    "poll_rps_ratio": (">=", 0.8),
    "worker_ratio": (">=", 0.5),
    "same_id_leases": ("==", 1),
    "rss_mb_200_pollers": ("<=", 200),
    "poll_under_login_flood_ratio": ("<=", 2.0),
    "issue_ratio": ("<=", 1.5),
    "issue_2proc_gapless": ("==", True),
    "upload_vs_bare_http_ratio": ("<=", 1.3),
    "upload_rss_mb_10x10mib": ("<=", 50),
    "poll_under_pdf_load_ratio": ("<=", 2.0),
    "list_page_ms_150k": ("<=", 50),
    "poll_under_import_ratio": ("<=", 3.0),
    "payment_ratio": ("<=", 1.5),
    "send_queue_ratio": ("<=", 1.5),
    "recurring_catch_up_ratio": ("<=", 2.0),
    "recurring_duplicates": ("==", 0),
    "poll_under_catch_up_ratio": ("<=", 2.0),
    "export_mb_100k": ("<=", 20),
    "receipt_s": ("<=", 3.0),
    "receipt_lines_exact": (">=", 0.95),
    "poll_under_receipts_ratio": ("<=", 2.0),
    # On the real receipts of ../shared/receipts (bench/receipts.py), on 2 cores.
    "receipt_real_s_mean": ("<=", 3.0),
    "receipt_real_s_max": ("<=", 8.0),
    "pg_export_mb_100k": ("<=", 20),
    # PostgreSQL (bench/pg.py), in a throwaway cluster of the run's own.
    "pg_create_intent_600_ratio": ("<=", 1.5),
    "pg_worker_scale_2": (">=", 1.8),
    "pg_worker_tasks_run_twice": ("==", 0),
    "pg_replay_rps_ratio": (">=", 0.7),
    "pg_poll_rps_ratio": (">=", 0.7),
    "pg_issue_2hosts_gapless": ("==", True),
    "pg_issue_4accounts_ratio": (">=", 1.5),
    "pg_issue_4accounts_gapless": ("==", True),
    "pg_other_account_write_ms_frozen_host": ("<=", 1000),
}
# Reported beside the targets, with none of their own (any more).
REPORTED = ("upload_ratio", "issue_call_ratio", "create_intent_600_submit_ratio",
            "pg_create_intent_600_submit_ratio", "pg_issue_rps_2hosts", "payment_call_ratio",
            "facturx_ms", "send_queue_call_ratio", "receipt_rss_mb", "receipt_totals_exact",
            "pg_other_account_write_ms", "pg_issue_rps_1account", "pg_issue_rps_4accounts",
            "receipt_real_totals_exact", "receipt_real_lines_exact", "receipt_real_whole")
# Which part writes each figure above (and the unthrottled flood's ratio): the smoke in
# tests/test_bench_smoke.py runs each part and looks for its figures.
FIGURES: dict[str, tuple[str, ...]] = {
    "store": ("create_intent_600_ratio", "create_intent_600_submit_ratio"),
    "worker": ("worker_ratio",),
    "http": ("replay_rps_ratio", "poll_rps_ratio", "same_id_leases", "rss_mb_200_pollers"),
    "flood": ("poll_under_login_flood_ratio", "poll_under_login_flood_stride_s"),
    "flood-unthrottled": ("poll_under_login_flood_unthrottled_ratio",),
    "issuing": ("issue_ratio", "issue_call_ratio", "issue_2proc_gapless"),
    "upload": ("upload_vs_bare_http_ratio", "upload_rss_mb_10x10mib", "upload_ratio"),
    "pdf": ("poll_under_pdf_load_ratio",),
    "import": ("poll_under_import_ratio",),
    "list": ("list_page_ms_150k",),
    "payments": ("payment_ratio", "payment_call_ratio"),
    "export": ("export_mb_100k",),
    "facturx": ("facturx_ms",),
    "sending": ("send_queue_ratio", "send_queue_call_ratio"),
    "recurring": ("recurring_catch_up_ratio", "recurring_duplicates",
                  "poll_under_catch_up_ratio"),
    "receipts": ("receipt_s", "receipt_lines_exact", "poll_under_receipts_ratio",
                 "receipt_rss_mb", "receipt_totals_exact", "receipt_real_totals_exact",
                 "receipt_real_lines_exact", "receipt_real_whole", "receipt_real_s_mean",
                 "receipt_real_s_max"),
    "pg": ("pg_create_intent_600_ratio", "pg_create_intent_600_submit_ratio",
           "pg_worker_scale_2", "pg_worker_tasks_run_twice", "pg_replay_rps_ratio",
           "pg_poll_rps_ratio", "pg_issue_rps_2hosts", "pg_issue_2hosts_gapless",
           "pg_issue_4accounts_ratio", "pg_issue_4accounts_gapless", "pg_issue_rps_1account",
           "pg_issue_rps_4accounts", "pg_other_account_write_ms_frozen_host",
           "pg_other_account_write_ms", "pg_export_mb_100k"),
}


# --- the store: a 600-task lease against raw sqlite3 ----------------------------------------


def raw_create(db: sqlite3.Connection, actor: Actor, request: intents.LeaseRequest,
               plan: intents.Plan) -> None:
    """The same inserts as `intents.create_lease`, in one transaction, with nothing around them."""
    now = time.time()
    lease_id = str(uuid.uuid4())
    intent = request.intent
    db.execute("BEGIN IMMEDIATE")
    db.execute(
        "INSERT INTO leases (id, actor_id, session_id, purpose, options, status, deadline_at,"
        " created_at, task_count) VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?)",
        (lease_id, actor.id, actor.session_id, intent.purpose, "{}", now + 90, now, len(plan)),
    )
    db.execute(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, 'lease', ?, ?, ?, ?)",
        (actor.id, request.request_id, intent.fingerprint(), lease_id, now),
    )
    db.executemany(
        "INSERT INTO lease_invoices (lease_id, invoice_id, position) VALUES (?, ?, ?)",
        [(lease_id, invoice_id, n) for n, invoice_id in enumerate(intent.invoice_ids)],
    )
    db.executemany(
        "INSERT INTO tasks (id, lease_id, invoice_id, provider, candidate, position)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(str(uuid.uuid4()), lease_id, invoice_id, provider, candidate, n)
         for n, (invoice_id, provider, candidate) in enumerate(plan)],
    )
    db.execute("INSERT INTO lease_events (lease_id, kind, detail, created_at)"
               " VALUES (?, 'created', '', ?)", (lease_id, now))
    db.execute("COMMIT")


async def bench_create(work: Path, rounds: int) -> dict[str, Any]:
    studio_path, raw_path = work / "create-studio.db", work / "create-raw.db"
    actor, invoice_ids = seed_actor_file(studio_path, 120)
    raw_actor, raw_invoices = seed_actor_file(raw_path, 120)
    settings = Settings(db_path=studio_path)
    providers = Providers(settings)
    db = await open_studio_db(studio_path)
    raw = raw_sqlite(raw_path)

    def request_for(ids: list[str], n: int) -> intents.LeaseRequest:
        body = {"request_id": f"bench-{n}", "purpose": "summarize_invoice",
                "invoice_ids": ids, "providers": ["local"], "candidates": 5}
        return intents.parse_request(body, providers, 600)

    store_s, submit_s, raw_s = [], [], []
    try:
        for n in range(rounds):
            request = request_for(invoice_ids, n)
            plan = intents.plan_tasks(request.intent, ["local"])
            assert len(plan) == 600
            started = time.perf_counter()
            await db.write(intents.create_lease, actor, request, plan, 90.0, time.time())
            store_s.append(time.perf_counter() - started)

            request = request_for(invoice_ids, rounds + n)
            started = time.perf_counter()
            _, created = await intents.submit(db, providers, actor, request, 90.0)
            submit_s.append(time.perf_counter() - started)
            assert created

            raw_request = request_for(raw_invoices, n)
            raw_plan = intents.plan_tasks(raw_request.intent, ["local"])
            started = time.perf_counter()
            raw_create(raw, raw_actor, raw_request, raw_plan)
            raw_s.append(time.perf_counter() - started)
    finally:
        await db.close()
        raw.close()
    store, submit, baseline = (statistics.median(s) for s in (store_s, submit_s, raw_s))
    return {
        "create_intent_600_ratio": store / baseline,
        "create_intent_600_ms": store * 1000,
        "create_intent_600_submit_ratio": submit / baseline,
        "create_intent_600_submit_ms": submit * 1000,
        "create_intent_600_raw_ms": baseline * 1000,
    }


# --- the worker against a raw claim/write loop -------------------------------------------------


class InstantProvider:
    name = "instant"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, purpose: Any, invoice: dict[str, Any], actor_id: str, *,
                       candidate: int, timeout: float) -> str:
        self.calls += 1
        return f"Instant summary {invoice['number']} #{candidate}"


def plan_lease(db_path: Path, tasks: int) -> None:
    actor, invoice_ids = seed_actor_file(db_path, tasks // 5)
    body = {"request_id": "worker", "purpose": "summarize_invoice", "invoice_ids": invoice_ids,
            "providers": ["local"], "candidates": 5}
    request = intents.parse_request(body, Providers(Settings(db_path=db_path)), 10_000)
    plan = [(i, "instant", c) for i, _, c in intents.plan_tasks(request.intent, ["local"])]
    db = raw_sqlite(db_path)
    in_transaction(db, intents.create_lease, actor, request, plan, 3600.0, time.time())
    db.close()


async def worker_rate(db_path: Path, tasks: int) -> float:
    settings = Settings(db_path=db_path)
    db = await open_studio_db(db_path)
    provider = InstantProvider()
    worker = Worker(db, Providers(settings, {"instant": provider}), settings)

    def status(conn: sqlite3.Connection) -> str:
        return conn.execute("SELECT status FROM leases").fetchone()[0]

    started = time.perf_counter()
    runner = asyncio.create_task(worker.run())
    try:
        while await db.read(status) == "open":
            if time.perf_counter() - started > 300:
                raise SystemExit(f"the worker did not finish {tasks} tasks in 300 s")
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - started
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await db.close()
    assert provider.calls == tasks, (provider.calls, tasks)
    return tasks / elapsed


def raw_worker_rate(db_path: Path, tasks: int) -> float:
    db = raw_sqlite(db_path)
    done = 0
    started = time.perf_counter()
    while True:
        claim = uuid.uuid4().hex
        task = in_transaction(db, claim_task, claim, 30.0, time.time())
        if task is None:
            break
        text = f"Instant summary {task.invoice['number']} #{task.candidate}"
        in_transaction(db, leases.record_proposal, task.task_id, claim, task.actor_id, text,
                       time.time())
        done += 1
    elapsed = time.perf_counter() - started
    db.close()
    assert done == tasks
    return tasks / elapsed


async def bench_worker(work: Path, tasks: int, rounds: int) -> dict[str, Any]:
    studio_rates, raw_rates = [], []
    for n in range(rounds):
        studio_path, raw_path = work / f"worker-{n}.db", work / f"worker-raw-{n}.db"
        plan_lease(studio_path, tasks)
        plan_lease(raw_path, tasks)
        studio_rates.append(await worker_rate(studio_path, tasks))
        raw_rates.append(raw_worker_rate(raw_path, tasks))
    studio, raw = statistics.median(studio_rates), statistics.median(raw_rates)
    return {"worker_ratio": studio / raw, "worker_tasks_per_s": studio,
            "worker_raw_tasks_per_s": raw}


# --- HTTP: the studio's routes against a bare route on the same uvicorn settings -------------


async def same_id(url: str, cookie: str, body: dict[str, Any], count: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, headers={"Accept": "application/json",
                                                        "Cookie": cookie}, timeout=60) as client:
        replies = await asyncio.gather(*(client.post("/leases", json=body) for _ in range(count)))
    return [reply.status_code for reply in replies]


def proposed_lease(studio: Server) -> tuple[httpx.Client, str, dict[str, Any], str]:
    """Ada signed in on `studio`, and a lease of hers already proposed: (her client, her
    cookie, the lease's body, its id)."""
    client = signed_in(studio.url, timeout=30)
    cookie = f"studio_session={client.cookies['studio_session']}"
    invoices = [row["id"] for row in client.get("/invoices").json()][:3]
    body = {"request_id": "bench-replay", "purpose": "summarize_invoice",
            "invoice_ids": invoices, "providers": ["local"], "candidates": 2}
    lease_id = client.post("/leases", json=body).json()["lease_id"]
    deadline = time.monotonic() + 30
    while client.get(f"/leases/{lease_id}").json()["status"] != "proposed":
        if time.monotonic() > deadline:
            raise SystemExit("the bench lease was never proposed")
        time.sleep(0.05)
    return client, cookie, body, lease_id


def route_rates(studio: Server, bare: Server, cookie: str, body: dict[str, Any],
                lease_id: str, work: Path, seconds: float, rounds: int = ROUNDS
                ) -> dict[str, Any]:
    """Requests per second of a replayed submission and of polls (JSON and the htmx fragment)
    against the bare route's POST and GET, each with 16 wrk connections.

    The bare route is sent the same request, headers and body, as the studio route it is
    compared with (the session cookie, the htmx header): h11 parses every header in Python, at
    about 3 us a header, so a bare request without them would measure the request, not the
    studio. Each ratio is the median of `rounds` rounds, each a bare run followed at once by the
    studio's: on a shared machine the same one-second run moves by a third from one second to
    the next, so only runs side by side are compared, and many times."""
    out: dict[str, Any] = {}
    body_file = work / "replay.json"
    body_file.write_text(json.dumps(body))
    poll_url = f"{studio.url}/leases/{lease_id}"
    bare_url = f"{bare.url}/bare"
    auth = {"BENCH_COOKIE": cookie}
    fragment = {"BENCH_HX": "1", **auth}
    posting = {"BENCH_BODY_FILE": str(body_file), **auth}
    # each studio route, its baseline, and the request both are sent
    pairs = {
        "poll_json": ("bare_get", poll_url, auth),
        "poll_fragment": ("bare_get_fragment", poll_url, fragment),
        "replay": ("bare_post", f"{studio.url}/leases", posting),
    }
    wrk(bare_url, 1, 16)  # warm both servers and the page cache
    wrk(poll_url, 1, 16, **auth)
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    ratios: dict[str, list[float]] = defaultdict(list)
    each = max(1.0, seconds / 4)
    for _ in range(rounds):
        for name, (baseline, url, settings) in pairs.items():
            runs[baseline].append(wrk(bare_url, each, 16, **settings))
            runs[name].append(wrk(url, each, 16, **settings))
            ratios[name].append(runs[name][-1]["rps"] / runs[baseline][-1]["rps"])
    for name, done in runs.items():
        errors = sum(run["errors"] for run in done)
        if errors:
            raise SystemExit(f"{name}: {errors} failed requests during the run")
        middle = sorted(done, key=lambda run: run["rps"])[len(done) // 2]
        out[f"{name}_rps"] = middle["rps"]
        out[f"{name}_p50_ms"] = middle["p50_us"] / 1000
        out[f"{name}_p99_ms"] = middle["p99_us"] / 1000
    for name, found in ratios.items():
        out[f"{name}_rps_ratio"] = statistics.median(found)
        out[f"{name}_rps_ratios"] = [round(ratio, 3) for ratio in found]
    out["poll_rps_ratio"] = min(out["poll_json_rps_ratio"], out["poll_fragment_rps_ratio"])
    return out


def bench_http(work: Path, seconds: float, rounds: int = ROUNDS) -> dict[str, Any]:
    db_path = work / "http.db"
    env = studio_env(db_path)
    with serving("studio serve", env, work / "studio.log", demo=True) as studio, \
            bare_serving(env, work / "bare.log") as bare:
        client, cookie, body, lease_id = proposed_lease(studio)
        fresh_file = work / "fresh.json"
        fresh_file.write_text(json.dumps({**body, "request_id": "bench-@ID@",
                                          "invoice_ids": body["invoice_ids"][:1],
                                          "candidates": 1}))
        poll_url = f"{studio.url}/leases/{lease_id}"
        auth = {"BENCH_COOKIE": cookie}
        out = route_rates(studio, bare, cookie, body, lease_id, work, seconds, rounds)
        client.close()

        # 200 clients polling: the server's resident memory, sampled through the run.
        samples: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append(studio.rss_mb())
                stop.wait(0.1)

        out["rss_mb_idle"] = studio.rss_mb()
        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            pollers = wrk(poll_url, seconds, 200, **auth)
        finally:
            stop.set()
            sampler.join()
        out["rss_mb_200_pollers"] = max(samples)
        out["poll_200_clients_rps"] = pollers["rps"]
        out["poll_200_clients_p99_ms"] = pollers["p99_us"] / 1000
        out["poll_200_clients_errors"] = pollers["errors"]

        # New submissions: each request a fresh id, so every one commits a lease to disk.
        fresh = wrk(f"{studio.url}/leases", seconds, 16, BENCH_BODY_FILE=str(fresh_file),
                    BENCH_FRESH_IDS="1", **auth)
        out["submit_new_rps"] = fresh["rps"]
        out["submit_new_p50_ms"] = fresh["p50_us"] / 1000
        out["submit_new_p99_ms"] = fresh["p99_us"] / 1000
        out["submit_new_errors"] = fresh["errors"]

        same = {**body, "request_id": f"bench-same-{uuid.uuid4().hex}"}
        statuses = asyncio.run(same_id(studio.url, cookie, same, 64))
        conn = sqlite3.connect(db_path)
        out["same_id_leases"] = conn.execute(
            "SELECT COUNT(DISTINCT leases.id) FROM leases JOIN request_bindings"
            " ON request_bindings.target_id = leases.id WHERE request_bindings.request_id = ?",
            (same["request_id"],),
        ).fetchone()[0]
        conn.close()
        out["same_id_statuses"] = {str(s): statuses.count(s) for s in sorted(set(statuses))}
        out["rss_mb_peak"] = max(samples + [studio.rss_mb()])
    return out


# --- a wrong-password flood: does everyone else still get answered? ------------------------


def worker_throughput(client: httpx.Client, invoices: list[str], seconds: float,
                      tag: str) -> float:
    """Tasks per second through the embedded worker: leases submitted one after another, each
    timed from submission to proposed."""
    tasks, spent, n = 0, 0.0, 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        n += 1
        started = time.perf_counter()
        made = client.post("/leases", json={
            "request_id": f"flood-{tag}-{n}", "purpose": "summarize_invoice",
            "invoice_ids": invoices, "providers": ["local"], "candidates": 5})
        made.raise_for_status()
        lease = made.json()
        while client.get(f"/leases/{lease['lease_id']}").json()["status"] == "open":
            if time.perf_counter() - started > 60:
                raise SystemExit("a lease of the worker's throughput was never proposed")
            time.sleep(0.005)
        spent += time.perf_counter() - started
        tasks += lease["tasks"]
    return tasks / spent


def flood_phase(studio: Server, client: httpx.Client, poll_path: str, invoices: list[str],
                seconds: float, work: Path, tag: str, flood: bool,
                stride_most_s: float = 60.0) -> dict[str, Any]:
    """Poll latency and worker throughput, with or without 8 clients posting wrong passwords
    for made-up emails (wrk, a separate process) the whole time. The throttled flood is
    measured at its stride: its first attempts, up to the address's limit, each run argon2
    (what the unthrottled flood measures), and on a loaded machine those 30 checks took
    from 2 s to over 20 s, so the window waits until the server has done with them."""
    flooder = None
    if flood:
        body = work / "flood.json"
        body.write_text(json.dumps({"email": "nobody-@ID@@example.com", "password": "wrong"}))
        command = ["wrk", "-t1", "-c8", f"-d{round(stride_most_s + seconds * 2) + 2}s",
                   "--timeout", "30s", "-s", str(LUA), f"{studio.url}/login"]
        flooder = subprocess.Popen(command, env={**os.environ, "BENCH_BODY_FILE": str(body),
                                                 "BENCH_FRESH_IDS": "1"},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)
    try:
        stride_s = loaded.settle(studio.process.pid, stride_most_s) if flood else 0.0
        polls = timed_polls(client, poll_path, seconds)
        rate = worker_throughput(client, invoices, seconds, tag)
    finally:
        if flooder is not None:
            flooder.send_signal(signal.SIGINT)  # wrk stops and prints its figures
            output = flooder.communicate(timeout=60)[0]
    out = {"poll_p50_ms": statistics.median(polls), "worker_tasks_per_s": rate,
           "stride_s": 1.0 + stride_s}
    if flooder is not None:
        line = next(x for x in output.splitlines() if x.startswith("BENCH "))
        figures = json.loads(line.removeprefix("BENCH "))
        out["flood_rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
    return out


def bench_login_flood(work: Path, seconds: float, root: Path = ROOT,
                      throttled: bool = True) -> dict[str, Any]:
    """`poll_under_login_flood_ratio`: median poll latency during an 8-client wrong-password
    flood over the idle median, and the worker's throughput during the flood over without."""
    tag = "throttled" if throttled else "unthrottled"
    db_path = work / f"flood-{tag}.db"
    env = studio_env(db_path)
    if not throttled:  # every attempt reaches argon2: what the off-loop checks are for
        env.update({"STUDIO_SIGNIN_FAILURES_PER_ADDRESS": "100000000",
                    "STUDIO_SIGNIN_FAILURES_PER_EMAIL": "100000000",
                    "STUDIO_SIGNIN_FAILURES_PER_PAIR": "100000000"})
    with serving("studio serve", env, work / f"flood-{tag}.log", demo=True,
                 cwd=root) as studio:
        client = signed_in(studio.url, timeout=60)
        invoices = [row["id"] for row in client.get("/invoices").json()]
        lease = client.post("/leases", json={
            "request_id": "flood-poll", "purpose": "summarize_invoice",
            "invoice_ids": invoices[:1], "providers": ["local"]}).json()
        poll_path = f"/leases/{lease['lease_id']}"
        idle = flood_phase(studio, client, poll_path, invoices, seconds, work, f"{tag}-idle",
                           flood=False)
        flooded = flood_phase(studio, client, poll_path, invoices, seconds, work,
                              f"{tag}-flood", flood=True,
                              stride_most_s=7.5 * seconds if throttled else 0.0)
        client.close()
    prefix = "poll_under_login_flood" if throttled else "poll_under_login_flood_unthrottled"
    return {
        f"{prefix}_ratio": flooded["poll_p50_ms"] / idle["poll_p50_ms"],
        f"{prefix}_p50_ms": flooded["poll_p50_ms"],
        f"{prefix}_idle_p50_ms": idle["poll_p50_ms"],
        f"{prefix}_login_rps": flooded["flood_rps"],
        f"{prefix}_stride_s": flooded["stride_s"],
        f"{prefix}_worker_ratio": flooded["worker_tasks_per_s"] / idle["worker_tasks_per_s"],
        f"{prefix}_worker_tasks_per_s": flooded["worker_tasks_per_s"],
        f"{prefix}_worker_idle_tasks_per_s": idle["worker_tasks_per_s"],
    }
# --- issuing: the transaction and two processes ----------------------------------------------


def bench_issuing(work: Path, rounds: int, drafts: int) -> dict[str, Any]:
    out = asyncio.run(issuing.bench_issue(work, rounds))
    db_path = work / "issue-http.db"
    issuing.seed_http(db_path, drafts)
    env = studio_env(db_path)
    with serving("studio serve 1", env, work / "issue-1.log") as one, \
            serving("studio serve 2", env, work / "issue-2.log") as two:
        out.update(issuing.bench_issue_http(work, [one, two], db_path,
                                            issuing_drafts(db_path)))
    return out


def bench_uploading(work: Path, rounds: int) -> dict[str, Any]:
    db_path = work / "uploads.db"
    env = studio_env(db_path)
    with serving("studio serve", env, work / "uploads.log", demo=True) as server, \
            bare_serving({**env, "BENCH_UPLOAD_DIR": str(work)},
                         work / "bare-uploads.log") as bare:
        return uploads.bench_uploads(work, server, bare, db_path, rounds)


def bench_pdf(work: Path, seconds: float, waves: int = 4) -> dict[str, Any]:
    with serving("studio serve", studio_env(work / "pdf.db"), work / "pdf.log",
                 demo=True) as server:
        return loaded.bench_pdf_load(server, wrk, seconds, waves)


def bench_receipts(work: Path, seconds: float, count: int | None = None) -> dict[str, Any]:
    """`count` receipts read one by one (all the held-out ones unless given), and as many as
    four at once beside a poll."""
    with serving("studio serve", studio_env(work / "receipts.db"), work / "receipts.log",
                 demo=True) as server:
        polled = receipts.bench_poll_under_receipts(server, seconds, count)
    return {**receipts.bench_reading(count), **polled, **receipts.bench_real(count)}


def bench_import(work: Path, seconds: float, drafts: int = 20_000) -> dict[str, Any]:
    db_path = work / "import.db"
    env = studio_env(db_path)
    with serving("studio serve", env, work / "import.log", demo=True) as server:
        return loaded.bench_import_load(work, server, env, db_path, seconds, drafts)


def bench_export(work: Path, count: int = 100_000) -> dict[str, Any]:
    db_path = work / "export.db"
    started = time.monotonic()
    exports.seed_issued_many(db_path, count)
    seeded = time.monotonic() - started
    with serving("studio serve", studio_env(db_path), work / "export.log") as server:
        return {**exports.bench_export(server, count), "export_seed_s": seeded}


def bench_listing(work: Path, count: int = 150_000) -> dict[str, Any]:
    db_path = work / "list.db"
    started = time.monotonic()
    listing.seed_many(db_path, count)
    seeded = time.monotonic() - started
    with serving("studio serve", studio_env(db_path), work / "list.log") as server:
        return {**listing.bench_list(server, count), "list_seed_s": seeded}


# --- PostgreSQL: the same routes and two hosts, inside the throwaway cluster ----------------


def bench_pg_http(work: Path, seconds: float, rounds: int = ROUNDS) -> dict[str, Any]:
    """`pg_replay_rps_ratio` and `pg_poll_rps_ratio`: the SQLite part's routes and baseline,
    the studio on PostgreSQL."""
    url = pg.new_database("bench_http")
    env = pg_env(work, url)
    with serving("studio serve on PostgreSQL", env, work / "pg-studio.log", demo=True) as studio, \
            bare_serving(env, work / "pg-bare.log") as bare:
        client, cookie, body, lease_id = proposed_lease(studio)
        client.close()
        rates = route_rates(studio, bare, cookie, body, lease_id, work, seconds, rounds)
    return {f"pg_{key}": value for key, value in rates.items()}


@contextlib.contextmanager
def two_hosts(work: Path, url: str, tag: str) -> Iterator[list[Server]]:
    """Two `studio serve` processes on the PostgreSQL database `url`, each with its own pool."""
    env = pg_env(work, url)
    with serving("studio serve 1 on PostgreSQL", env, work / f"pg-{tag}-1.log") as one, \
            serving("studio serve 2 on PostgreSQL", env, work / f"pg-{tag}-2.log") as two:
        yield [one, two]


def bench_pg_issuing(work: Path, drafts: int) -> dict[str, Any]:
    """`pg_issue_rps_2hosts`: the SQLite part's 16 clients issuing through two `studio serve`
    processes, each with its own pool, on one PostgreSQL database; audited after."""
    url = pg.new_database("bench_issue")
    ids = pg.seed_drafts(url, drafts, "http@example.com", "bench-password")
    with two_hosts(work, url, "issue") as servers:
        elapsed, failures = issuing.issue_through(servers, ids, "http@example.com",
                                                  "bench-password")
    found, sequences_whole = pg.issued_check(url, drafts)
    return {"pg_issue_rps_2hosts": drafts / elapsed,
            "pg_issue_2hosts_gapless": not failures and not found and sequences_whole,
            "pg_issue_2hosts_failures": len(failures), "pg_issue_2hosts_problems": found}


def bench_pg_accounts(work: Path, drafts: int) -> dict[str, Any]:
    """`pg_issue_4accounts_ratio`: issues per second of four accounts at once (four clients
    each) over one account alone (sixteen clients), through two `studio serve` processes on
    one database. Each account locks only its own records, so four go side by side; each
    account's series is audited gapless after."""
    url = pg.new_database("bench_accounts")
    password = "bench-password"
    accounts = [(f"acct{n}@example.com", pg.seed_drafts(url, drafts, f"acct{n}@example.com",
                                                        password)) for n in range(5)]
    with two_hosts(work, url, "accounts") as servers:
        alone, failures = issuing.issue_through(servers, accounts[4][1], accounts[4][0],
                                                password)
        together: list[tuple[float, list[str]]] = []

        def issue(email: str, ids: list[str]) -> None:
            together.append(issuing.issue_through(servers, ids, email, password, clients=4))

        threads = [threading.Thread(target=issue, args=account) for account in accounts[:4]]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    failures += [failure for _, found in together for failure in found]
    found, gapless = pg.issued_per_account(url, drafts)
    return {"pg_issue_4accounts_ratio": (4 * drafts / elapsed) / (drafts / alone),
            "pg_issue_rps_1account": drafts / alone,
            "pg_issue_rps_4accounts": 4 * drafts / elapsed,
            "pg_issue_4accounts_gapless": not failures and not found and gapless}


def bench_pg_frozen_host(work: Path, rounds: int, most_s: float = 120.0) -> dict[str, Any]:
    """`pg_other_account_write_ms_frozen_host`: one account's draft saved through host B while
    host A is stopped (SIGSTOP) inside another account's transaction, against the same save
    while nothing is stopped. Host A is tried for at most `most_s` seconds."""
    url = pg.new_database("bench_frozen")
    password = "bench-password"
    pg.seed_drafts(url, 1, "frozen@example.com", password)
    pg.seed_drafts(url, 1, "other@example.com", password)
    stop = threading.Event()
    with serving("studio serve A", {**pg_env(work, url), "PGAPPNAME": "host-a"},
                 work / "pg-frozen-a.log") as host_a, \
            serving("studio serve B", pg_env(work, url), work / "pg-frozen-b.log") as host_b:

        def writes_through_a() -> None:
            client = signed_in(host_a.url, "frozen@example.com", password)
            with contextlib.closing(client):
                while not stop.is_set():
                    with contextlib.suppress(httpx.HTTPError):
                        client.post("/invoices", json=DRAFT)

        def saves_through_b(client: httpx.Client) -> float:
            started = time.perf_counter()
            reply = client.post("/invoices", json=DRAFT)
            took = (time.perf_counter() - started) * 1000
            if reply.status_code != 201:
                raise SystemExit(f"a draft through host B was refused: {reply.text}")
            return took

        writer = threading.Thread(target=writes_through_a, daemon=True)
        try:
            with contextlib.closing(signed_in(host_b.url, "other@example.com", password)) as other:
                baseline = statistics.median(saves_through_b(other) for _ in range(rounds))
                writer.start()
                frozen: list[float] = []
                until = time.monotonic() + most_s
                while len(frozen) < rounds:
                    if time.monotonic() > until:
                        raise SystemExit(f"host A was not caught inside a transaction in"
                                         f" {most_s:.0f} s")
                    if pg.frozen_in_a_transaction(url, host_a.process.pid, "host-a"):
                        try:
                            frozen.append(saves_through_b(other))
                        finally:
                            os.kill(host_a.process.pid, signal.SIGCONT)
                        time.sleep(0.2)
        finally:
            os.kill(host_a.process.pid, signal.SIGCONT)
            stop.set()
            if writer.is_alive():
                writer.join(130)
    return {"pg_other_account_write_ms_frozen_host": statistics.median(frozen),
            "pg_other_account_write_ms_frozen_host_max": max(frozen),
            "pg_other_account_write_ms": baseline}


def bench_pg_export(work: Path, count: int) -> dict[str, Any]:
    """`pg_export_mb_100k`: the SQLite part's export, the studio on PostgreSQL."""
    url = pg.new_database("bench_export")
    started = time.monotonic()
    exports.seed_issued_many_pg(url, count)
    seeded = time.monotonic() - started
    with serving("studio serve on PostgreSQL", pg_env(work, url),
                 work / "pg-export.log") as server:
        found = {**exports.bench_export(server, count), "export_seed_s": seeded}
    return {f"pg_{key}": value for key, value in found.items()}


def sized(size: str) -> Callable[[Any, Any, Any], Any]:
    """Picks the full, quick or smoke one of three figures, as the run's size says."""
    place = SIZES.index(size)
    return lambda full, quick, smoke: (full, quick, smoke)[place]


def measure_pg(work: Path, size: str) -> dict[str, Any]:
    """Every PostgreSQL figure; run inside the cluster `pg.in_cluster` makes."""
    n = sized(size)
    parts: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("pg store", lambda: asyncio.run(pg.bench_create(n(30, 8, 2)))),
        # Three rounds: one run of either count moves by up to a third here, and the median
        # of two is their mean.
        ("pg workers", lambda: pg.bench_worker_scale(work, n(1500, 600, 50), n(3, 1, 1),
                                                      n(200, 200, 40))),
        ("pg http", lambda: bench_pg_http(work, n(10, 4, 1), n(ROUNDS, ROUNDS, 1))),
        ("pg issuing", lambda: bench_pg_issuing(work, n(600, 200, 20))),
        ("pg accounts", lambda: bench_pg_accounts(work, n(150, 50, 8))),
        ("pg frozen host", lambda: bench_pg_frozen_host(work, n(7, 3, 1))),
        ("pg export", lambda: bench_pg_export(work, n(100_000, 10_000, 200))),
    ]
    # STUDIO_BENCH_PG_PARTS="pg accounts,pg frozen host" runs only those (to measure one).
    wanted = [name.strip() for name in os.environ.get("STUDIO_BENCH_PG_PARTS", "").split(",")
              if name.strip()]
    out: dict[str, Any] = {}
    for name, part in parts:
        if wanted and name not in wanted:
            continue
        started = time.monotonic()
        out.update(part())
        print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr)
    return out


def issuing_drafts(db_path: Path) -> list[str]:
    db = sqlite3.connect(db_path)
    try:
        return [row[0] for row in db.execute("SELECT id FROM invoices WHERE status = 'draft'")]
    finally:
        db.close()


# --- the report ----------------------------------------------------------------------------


def verdict(key: str, value: float) -> str:
    sign, target = TARGETS[key]
    met = {"<=": value <= target, ">=": value >= target, "==": value == target}[sign]
    return "met" if met else "MISSED"


def machine() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def stride(results: dict[str, Any], prefix: str) -> str:
    """How long the throttled flood took to reach its stride, as the table says it."""
    seconds = results.get(f"{prefix}_stride_s")
    return "" if not seconds else f", measured from {seconds:.1f} s in, at its stride"


def print_table(results: dict[str, Any]) -> None:
    """The figures this run has: a run of some parts prints only theirs."""
    print(f"\n{'key':32} {'value':>10}  {'target':>8}  verdict")
    for key, (sign, target) in TARGETS.items():
        if key in results:
            value = results[key]
            print(f"{key:32} {value:>10.3f}  {sign}{target:<7}  {verdict(key, value)}")
    for key in REPORTED:
        if key in results:
            print(f"{key:32} {results[key]:>10.3f}  {'':8}  (reported)")
    names = [n for n in ("replay", "submit_new", "poll_json", "poll_fragment", "bare_post",
                         "bare_get") if f"{n}_p50_ms" in results]
    if names:
        print("\nlatency (ms)                      p50       p99")
    for name in names:
        print(f"{name:32} {results[f'{name}_p50_ms']:>8.2f}  {results[f'{name}_p99_ms']:>8.2f}")
    for prefix in ("poll_under_login_flood", "poll_under_login_flood_unthrottled"):
        if f"{prefix}_ratio" in results:
            print(f"{prefix}: poll p50 {results[f'{prefix}_idle_p50_ms']:.2f} ms idle,"
                  f" {results[f'{prefix}_p50_ms']:.2f} ms flooded"
                  f" ({results[f'{prefix}_login_rps']:.0f} sign-ins/s"
                  f"{stride(results, prefix)}); worker"
                  f" {results[f'{prefix}_worker_idle_tasks_per_s']:.0f} -> "
                  f"{results[f'{prefix}_worker_tasks_per_s']:.0f} tasks/s")
    for prefix, load in (("poll_under_pdf_load", "40 clients downloading PDFs"),
                         ("poll_under_import", "a 20,000-draft import")):
        if f"{prefix}_ratio" in results:
            print(f"{prefix}: poll p50/p95 {results[f'{prefix}_idle_p50_ms']:.2f}/"
                  f"{results[f'{prefix}_idle_p95_ms']:.2f} ms idle (p50"
                  f" {results[f'{prefix}_idle_before_p50_ms']:.2f} before,"
                  f" {results[f'{prefix}_idle_after_p50_ms']:.2f} after), "
                  f"{results[f'{prefix}_p50_ms']:.2f}/{results[f'{prefix}_p95_ms']:.2f} ms"
                  f" during {load}")
    if "pdf_load_downloads" in results:
        print(f"PDF downloads: {results['pdf_load_downloads']} of"
              f" {results['pdf_load_invoices']} new invoices,"
              f" {results['pdf_load_downloads_per_s']:.1f}/s, p50"
              f" {results['pdf_load_download_p50_ms']:.0f} ms")
    if "import_20k_s" in results:
        print(f"studio import of {results['import_drafts']} drafts: "
              f"{results['import_20k_s']:.1f} s; another writer waited at most"
              f" {results['import_longest_write_wait_ms']:.0f} ms for the write lock")
    if "payment_ms" in results:
        print(f"a payment recorded: studio {results['payment_ms']:.2f} ms (the whole call"
              f" {results['payment_call_ms']:.2f} ms), raw {results['payment_raw_ms']:.2f} ms")
    if "recurring_catch_up_s" in results:
        print(f"a catch-up of {results['recurring_periods']} recurring periods on two workers:"
              f" {results['recurring_catch_up_s']:.1f} s; the same invoices made and issued"
              f" as the API does: {results['recurring_api_s']:.1f} s")
    if "poll_under_catch_up_ratio" in results:
        print(f"polls while a served studio and a worker catch up"
              f" {results['catch_up_polled_periods']} periods: median"
              f" {results['poll_catch_up_p50_ms']:.1f} ms, idle"
              f" {results['poll_idle_p50_ms']:.1f} ms")
    if "send_queue_ms" in results:
        print(f"an email queued: studio {results['send_queue_ms']:.2f} ms, raw"
              f" {results['send_queue_raw_ms']:.2f} ms (binding, share link and outbox row)")
    for prefix, backend in (("", "SQLite"), ("pg_", "PostgreSQL")):
        if f"{prefix}export_mb_100k" in results:
            found = {key[len(prefix):]: value for key, value in results.items()
                     if key.startswith(f"{prefix}export_")}
            print(f"CSV export of {found['export_rows']} invoices on {backend}:"
                  f" {found['export_s']:.1f} s, {found['export_bytes'] / 2**20:.1f} MiB, first"
                  f" byte after {found['export_first_byte_s']:.1f} s; server RSS"
                  f" {found['export_rss_before_mb']:.1f} MB before, +"
                  f"{found['export_mb_100k']:.1f} MB at its peak; seeded in"
                  f" {found['export_seed_s']:.1f} s")
    if "facturx_ms" in results:
        print(f"Factur-X PDF of a {results['facturx_lines']}-line invoice: median"
              f" {results['facturx_ms']:.0f} ms, at most {results['facturx_max_ms']:.0f} ms"
              f" over {results['facturx_rounds']} builds (its XML"
              f" {results['facturx_xml_ms']:.1f} ms); the event loop waited at most"
              f" {results['facturx_loop_lag_max_ms']:.1f} ms meanwhile")
    if "list_page_ms_150k" in results:
        print(f"GET /invoices with {results['list_drafts']} drafts: p50"
              f" {results['list_page_ms_150k']:.1f} ms, p95"
              f" {results['list_page_p95_ms_150k']:.1f} ms over"
              f" {results['list_page_requests']} requests; {results['list_page_items']} items,"
              f" {results['list_page_bytes'] / 2**20:.1f} MiB, next link:"
              f" {results['list_page_has_next_link']}; seeded in {results['list_seed_s']:.1f} s")
    if "upload_5mib_ms" in results:
        print(f"upload of 5 MiB: studio {results['upload_5mib_ms']:.1f} ms, bare route"
              f" {results['upload_5mib_bare_http_ms']:.1f} ms, raw write"
              f" {results['upload_5mib_raw_ms']:.1f} ms")
    if "bare_get_rps" in results:
        print("\nrequests/s: " + ", ".join(
            f"{name} {results[f'{name}_rps']:.0f}" for name in
            ("bare_get", "poll_json", "bare_get_fragment", "poll_fragment", "bare_post", "replay",
             "submit_new")))
    if "issue_rps_2proc" in results:
        print(f"issues/s from two processes, 16 clients: {results['issue_rps_2proc']:.0f}"
              f" (gapless: {results['issue_2proc_gapless']})")
    if "pg_create_intent_600_ms" in results:
        print(f"\nPostgreSQL: a 600-task lease {results['pg_create_intent_600_ms']:.1f} ms"
              f" (submit {results['pg_create_intent_600_submit_ms']:.1f} ms) vs raw psycopg"
              f" {results['pg_create_intent_600_raw_ms']:.1f} ms")
    if "pg_worker_scale_2" in results:
        print(f"PostgreSQL: studio worker x1 {results['pg_worker_1_tasks_per_s']:.0f} tasks/s,"
              f" x2 {results['pg_worker_2_tasks_per_s']:.0f} tasks/s"
              f" ({results['pg_worker_tasks']} tasks a run, provider"
              f" {pg.PROVIDER_DELAY_S * 1000:.0f} ms); run twice:"
              f" {results['pg_worker_tasks_run_twice']}, not done:"
              f" {results['pg_worker_tasks_not_done']}")
    if "pg_bare_get_rps" in results:
        print("PostgreSQL requests/s: " + ", ".join(
            f"{name} {results[f'pg_{name}_rps']:.0f}" for name in
            ("bare_get", "poll_json", "bare_get_fragment", "poll_fragment", "bare_post",
             "replay")))
    if "pg_issue_rps_2hosts" in results:
        print(f"PostgreSQL issues/s from two processes, 16 clients:"
              f" {results['pg_issue_rps_2hosts']:.0f}"
              f" (gapless: {results['pg_issue_2hosts_gapless']})")


def steps(size: str) -> dict[str, Callable[[Path], dict[str, Any]]]:
    """Each part of the run by the name `--only` takes, in the order a full run takes them;
    `size` is one of SIZES."""
    n = sized(size)
    seconds = n(8, 4, 1)
    return {
        "store": lambda w: asyncio.run(bench_create(w, n(30, 8, 2))),
        "worker": lambda w: asyncio.run(bench_worker(w, n(600, 300, 50), n(3, 1, 1))),
        "http": lambda w: bench_http(w, n(10, 4, 1), n(ROUNDS, ROUNDS, 1)),
        "flood": lambda w: bench_login_flood(w, seconds),
        "flood-unthrottled": lambda w: bench_login_flood(w, seconds, throttled=False),
        "issuing": lambda w: bench_issuing(w, n(200, 30, 5), n(600, 200, 20)),
        "upload": lambda w: bench_uploading(w, n(15, 5, 1)),
        "pdf": lambda w: bench_pdf(w, n(8, 4, 3), n(4, 4, 1)),
        "import": lambda w: bench_import(w, seconds, n(20_000, 20_000, 200)),
        "list": lambda w: bench_listing(w, n(150_000, 150_000, 300)),
        "payments": lambda w: asyncio.run(payments.bench_payment(w, n(200, 40, 5))),
        "export": lambda w: bench_export(w, n(100_000, 100_000, 300)),
        "facturx": lambda w: facturx.bench_facturx(w, n(20, 5, 2)),
        "sending": lambda w: asyncio.run(sending.bench_send_queue(w, n(200, 40, 5))),
        "recurring": lambda w: {
            **asyncio.run(recurring.bench_recurring(w, n(100, 20, 2), n(10, 5, 2))),
            **recurring.bench_polls_during_catch_up(w, seconds, n(100, 20, 2), n(10, 5, 2))},
        "receipts": lambda w: bench_receipts(w, seconds, n(None, None, 2)),
        "pg": lambda w: pg.in_cluster(size),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true",
                       help="every part with fewer repetitions and shorter loads")
    sizes.add_argument("--smoke", action="store_true",
                       help="every part at its smallest, to show that it runs: its figures"
                            " mean nothing (the test command runs this)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where the figures go (default {RESULTS.relative_to(ROOT)};"
                             " with --only or --smoke, nowhere unless given)")
    parser.add_argument("--only", default=None, metavar="PART,...",
                        help="run only these parts: " + ", ".join(steps("full")))
    parser.add_argument("--flood-only", type=Path, metavar="ROOT", default=None,
                        help="only the sign-in flood, against the studio checked out at ROOT"
                             " (to measure an older version); prints, writes nothing")
    parser.add_argument("--in-cluster", type=Path, metavar="FILE", default=None,
                        help=argparse.SUPPRESS)  # the PostgreSQL part, run by pg.in_cluster
    args = parser.parse_args(argv)
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.in_cluster is not None:
        pg.started(args.in_cluster).touch()
        with tempfile.TemporaryDirectory(prefix="studio-bench-") as folder:
            figures = measure_pg(Path(folder), size)
        args.in_cluster.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
        return
    if args.flood_only is not None:
        with tempfile.TemporaryDirectory(prefix="studio-bench-") as folder:
            print(json.dumps(bench_login_flood(Path(folder), sized(size)(8, 4, 1),
                                               root=args.flood_only.resolve()), indent=2))
        return
    parts = steps(size)
    chosen = list(parts) if args.only is None else [p.strip() for p in args.only.split(",")]
    unknown = [name for name in chosen if name not in parts]
    if unknown:
        parser.error(f"no part named {', '.join(unknown)}; the parts are {', '.join(parts)}")
    # A run of some parts, or of meaningless sizes, never stands in for a whole run.
    whole = args.only is None and not args.smoke
    out = args.out if args.out is not None or not whole else RESULTS
    install_wrk()
    results: dict[str, Any] = {**machine(), "quick": args.quick, "size": size}
    if args.only is not None:
        results["only"] = chosen
    with tempfile.TemporaryDirectory(prefix="studio-bench-") as folder:
        for name in chosen:
            started = time.monotonic()
            results.update(parts[name](Path(folder)))
            print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr)
    results["verdicts"] = {key: verdict(key, results[key]) for key in TARGETS if key in results}
    if out is not None:
        out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print_table(results)
    if out is not None:
        print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()

"""PostgreSQL: the figures of the second backend, each against its baseline in the same run,
on a cluster made for the run and dropped after it.

`python -m bench` runs this part again inside `pg_virtualenv -t` (Debian's postgresql-common,
as the suite's PostgreSQL pass does), which makes a cluster for one command, exports PGHOST,
PGUSER and PGPASSWORD, and drops the cluster after it. pg_virtualenv turns fsync off by
default; here it stays on, so a commit is on disk as SQLite's are with `synchronous = FULL`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench.setup import actor_with_drafts, seed_actor
from studio.accounts.auth import Actor
from studio.config import Settings
from studio.leasing import intents
from studio.leasing.providers import Providers
from studio.ops.audit import problems
from studio.runtime.worker import IDLE_WAIT_S
from studio.store import postgres
from studio.store.postgres import PgDatabase
from studio.store.transactions import in_transaction

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ["pg_virtualenv", "-t", "-o", "fsync=on"]
# What the local provider sleeps per task in the worker figure, as a model call would.
PROVIDER_DELAY_S = 0.02


# --- the cluster ------------------------------------------------------------------------------


def install_postgresql() -> None:
    """Debian's PostgreSQL, when pg_virtualenv is missing (as tests/run.sh does)."""
    if shutil.which("pg_virtualenv") is not None:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "postgresql",
                    "postgresql-common"], check=True, env=env)


def in_cluster(size: str, attempts: int = 3) -> dict[str, Any]:
    """Every PostgreSQL figure, measured by `python -m bench --in-cluster FILE` run inside a
    throwaway cluster. A cluster that never came up (pg_virtualenv can lose a port to another
    cluster made at the same moment on a shared machine) is made again. `size` is "full",
    "quick" or "smoke", as `python -m bench` takes them."""
    install_postgresql()
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    with tempfile.TemporaryDirectory(prefix="studio-bench-pg-") as folder:
        out = Path(folder) / "pg.json"
        command = [*sudo, *CLUSTER, sys.executable, "-m", "bench", "--in-cluster", str(out)]
        for attempt in range(1, attempts + 1):
            sized = [] if size == "full" else [f"--{size}"]
            finished = subprocess.run(command + sized, cwd=ROOT)
            if finished.returncode == 0:
                return json.loads(out.read_text())
            if started(out).exists() or attempt == attempts:
                raise SystemExit(f"the PostgreSQL part failed (exit {finished.returncode})")
            print("the throwaway cluster did not start; making it again", file=sys.stderr)
    raise AssertionError("unreachable")


def started(out: Path) -> Path:
    """Made by the part once it runs inside its cluster."""
    return out.with_name(out.name + ".started")


def new_database(name: str) -> str:
    """An empty database of the cluster the environment names, migrated to the studio's
    schema: its URL."""
    with psycopg.connect("postgresql:///postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    url = f"postgresql:///{name}"
    postgres.prepare(url)
    return url


def lease_request(invoice_ids: list[str], request_id: str, settings: Settings
                  ) -> tuple[intents.LeaseRequest, intents.Plan]:
    body = {"request_id": request_id, "purpose": "summarize_invoice",
            "invoice_ids": invoice_ids, "providers": ["local"], "candidates": 5}
    request = intents.parse_request(body, Providers(settings), 10_000)
    return request, intents.plan_tasks(request.intent, ["local"])


# --- the store: a 600-task lease against raw psycopg -------------------------------------------


def raw_create(db: psycopg.Connection[Any], actor: Actor, request: intents.LeaseRequest,
               plan: intents.Plan) -> None:
    """The same inserts as `intents.create_lease`, in one transaction, with nothing around
    them: no write lock, no checks, no receipt read."""
    now = time.time()
    lease_id = str(uuid.uuid4())
    intent = request.intent
    with db.transaction(), db.cursor() as cursor:
        cursor.execute(
            "INSERT INTO leases (id, actor_id, session_id, purpose, options, status,"
            " deadline_at, created_at, task_count)"
            " VALUES (%s, %s, %s, %s, %s, 'open', %s, %s, %s)",
            (lease_id, actor.id, actor.session_id, intent.purpose, "{}", now + 90, now,
             len(plan)),
        )
        cursor.execute(
            "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
            " created_at) VALUES (%s, 'lease', %s, %s, %s, %s)",
            (actor.id, request.request_id, intent.fingerprint(), lease_id, now),
        )
        cursor.executemany(
            "INSERT INTO lease_invoices (lease_id, invoice_id, position) VALUES (%s, %s, %s)",
            [(lease_id, invoice_id, n) for n, invoice_id in enumerate(intent.invoice_ids)],
        )
        cursor.executemany(
            "INSERT INTO tasks (id, lease_id, invoice_id, provider, candidate, position)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [(str(uuid.uuid4()), lease_id, invoice_id, provider, candidate, n)
             for n, (invoice_id, provider, candidate) in enumerate(plan)],
        )
        cursor.execute("INSERT INTO lease_events (lease_id, kind, detail, created_at)"
                       " VALUES (%s, 'created', '', %s)", (lease_id, now))


async def bench_create(rounds: int) -> dict[str, Any]:
    """`pg_create_intent_600_ratio`: `PgDatabase.write(intents.create_lease, ...)` (the
    write lock, the binding, the checks, the inserts, the receipt, on the database's clock)
    against `raw_create`, alternating, median of `rounds`."""
    studio_url, raw_url = new_database("bench_create_studio"), new_database("bench_create_raw")
    seeding = postgres.connect(studio_url)
    actor, invoice_ids = seed_actor(seeding, 120)
    seeding.close()
    seeding = postgres.connect(raw_url)
    raw_actor, raw_invoices = seed_actor(seeding, 120)
    seeding.close()
    settings = Settings(database_url=studio_url)
    providers = Providers(settings)
    db = await PgDatabase(studio_url).open()
    raw = psycopg.connect(raw_url, autocommit=True)
    store_s, submit_s, raw_s = [], [], []
    try:
        for n in range(rounds):
            request, plan = lease_request(invoice_ids, f"bench-{n}", settings)
            assert len(plan) == 600
            started = time.perf_counter()
            await db.write(intents.create_lease, actor, request, plan, 90.0)
            store_s.append(time.perf_counter() - started)

            request, _ = lease_request(invoice_ids, f"bench-{rounds + n}", settings)
            started = time.perf_counter()
            _, created = await intents.submit(db, providers, actor, request, 90.0)
            submit_s.append(time.perf_counter() - started)
            assert created

            raw_request, raw_plan = lease_request(raw_invoices, f"bench-{n}", settings)
            started = time.perf_counter()
            raw_create(raw, raw_actor, raw_request, raw_plan)
            raw_s.append(time.perf_counter() - started)
    finally:
        await db.close()
        raw.close()
    store, submit, baseline = (statistics.median(s) for s in (store_s, submit_s, raw_s))
    return {
        "pg_create_intent_600_ratio": store / baseline,
        "pg_create_intent_600_ms": store * 1000,
        "pg_create_intent_600_submit_ratio": submit / baseline,
        "pg_create_intent_600_submit_ms": submit * 1000,
        "pg_create_intent_600_raw_ms": baseline * 1000,
    }


# --- `studio worker` processes: two against one ------------------------------------------------


def start_workers(count: int, url: str, work: Path, tag: str) -> list[subprocess.Popen[bytes]]:
    """`count` `studio worker` processes on `url`, each started and idle when this returns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update({"STUDIO_DATABASE_URL": url, "STUDIO_SECRET_KEY": "bench-secret",
                "STUDIO_PROVIDER_DELAY_S": str(PROVIDER_DELAY_S), "PYTHONUNBUFFERED": "1"})
    logs = [work / f"worker-{tag}-{n}.log" for n in range(count)]
    workers = [subprocess.Popen([sys.executable, "-m", "studio.ops.cli", "worker"], cwd=ROOT,
                                env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
               for log in logs]
    deadline = time.monotonic() + 60
    while not all("started on" in log.read_text() for log in logs):
        for worker, log in zip(workers, logs, strict=True):
            if worker.poll() is not None:
                stop_workers(workers)
                raise SystemExit(f"studio worker exited early:\n{log.read_text()}")
        if time.monotonic() > deadline:
            stop_workers(workers)
            raise SystemExit("studio worker did not start:\n"
                             + "\n".join(log.read_text() for log in logs))
        time.sleep(0.05)
    return workers


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def make_lease(db: postgres.Connection, actor: Actor, invoice_ids: list[str], request_id: str,
               settings: Settings) -> str:
    request, plan = lease_request(invoice_ids, request_id, settings)
    receipt, _ = in_transaction(db, intents.create_lease, actor, request, plan, 3600.0)
    return receipt["lease_id"]


def workers_rate(workers: int, tasks: int, work: Path, n: int, warm_each: int = 200
                 ) -> dict[str, Any]:
    """Tasks per second of `workers` `studio worker` processes through one lease of `tasks`
    tasks, the provider sleeping 20 ms per task; `warm_each` warm-up tasks a worker.

    A worker with nothing to do looks again every half second, so a lease arriving at idle
    workers is picked up by each at a different moment. So the workers are first kept busy by
    a warm-up lease; the measured lease is committed once every worker has had time to wake
    (while warm-up tasks still wait), and queues behind it: the rate is the measured lease's
    proposals, first to last, by the database's clock."""
    url = new_database(f"bench_workers_{workers}_{n}")
    settings = Settings(database_url=url)
    db = postgres.connect(url)
    warm = warm_each * workers
    actor, invoice_ids = seed_actor(db, (warm + tasks) // 5)
    running = start_workers(workers, url, work, f"{workers}-{n}")
    try:
        warm_id = make_lease(db, actor, invoice_ids[:warm // 5], f"warm-{n}", settings)
        time.sleep(IDLE_WAIT_S + 0.1)
        lease_id = make_lease(db, actor, invoice_ids[warm // 5:], f"measured-{n}", settings)
        warm_waiting = db.execute("SELECT COUNT(*) FROM tasks WHERE lease_id = ?"
                                  " AND status = 'pending'", (warm_id,)).fetchone()[0]
        deadline = time.monotonic() + 300
        while db.execute("SELECT COUNT(*) FROM tasks WHERE status IN ('pending', 'running')"
                         ).fetchone()[0]:
            if time.monotonic() > deadline:
                raise SystemExit(f"{workers} worker(s) did not finish {tasks} tasks in 300 s")
            time.sleep(0.05)
    finally:
        stop_workers(running)
    try:
        times = [row[0] for row in db.execute(
            "SELECT created_at FROM proposals WHERE lease_id = ? ORDER BY created_at",
            (lease_id,))]
        proposals, tasks_with_one = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT task_id) FROM proposals").fetchone()
        all_tasks, done, attempts = db.execute(
            "SELECT COUNT(*), SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), SUM(attempts)"
            " FROM tasks").fetchone()
    finally:
        db.close()
    assert len(times) == tasks, (len(times), tasks)
    return {
        "rate": (len(times) - 1) / (times[-1] - times[0]),
        "warm_waiting": warm_waiting,
        # A task run twice would show as a second attempt (its claim taken again) or a
        # second proposal; proposals.task_id is unique, so count both.
        "run_twice": (proposals - tasks_with_one) + (attempts - all_tasks),
        "not_done": all_tasks - done,
    }


def bench_worker_scale(work: Path, tasks: int, rounds: int, warm_each: int = 200
                       ) -> dict[str, Any]:
    """`pg_worker_scale_2`: the median rate of two workers over the median of one,
    alternating one and two, each on a database of its own."""
    one, two = [], []
    for n in range(rounds):
        one.append(workers_rate(1, tasks, work, n, warm_each))
        two.append(workers_rate(2, tasks, work, n, warm_each))
    rate_one = statistics.median(run["rate"] for run in one)
    rate_two = statistics.median(run["rate"] for run in two)
    return {
        "pg_worker_scale_2": rate_two / rate_one,
        "pg_worker_1_tasks_per_s": rate_one,
        "pg_worker_2_tasks_per_s": rate_two,
        "pg_worker_tasks_run_twice": sum(run["run_twice"] for run in one + two),
        "pg_worker_tasks_not_done": sum(run["not_done"] for run in one + two),
        "pg_worker_warmup_left_min": min(run["warm_waiting"] for run in one + two),
        "pg_worker_tasks": tasks,
        "pg_worker_1_runs_tasks_per_s": [round(run["rate"], 1) for run in one],
        "pg_worker_2_runs_tasks_per_s": [round(run["rate"], 1) for run in two],
    }


# --- issuing through two `studio serve` processes ---------------------------------------------


def seed_drafts(url: str, count: int, email: str, password: str) -> list[str]:
    db = postgres.connect(url)
    try:
        return in_transaction(db, actor_with_drafts, count, email, password)[1]
    finally:
        db.close()


def issued_check(url: str, count: int) -> tuple[list[str], bool]:
    """(what the audit finds, whether the sequences are exactly 1..count)."""
    db = postgres.connect(url)
    try:
        db.execute("BEGIN")
        found = problems(db)
        sequences = [row[0] for row in db.execute(
            "SELECT sequence FROM invoices WHERE sequence IS NOT NULL ORDER BY sequence")]
        db.execute("COMMIT")
    finally:
        db.close()
    return found, sequences == list(range(1, count + 1))


def issued_per_account(url: str, count: int) -> tuple[list[str], bool]:
    """(what the audit finds, whether every account's series runs exactly 1..count)."""
    db = postgres.connect(url)
    try:
        db.execute("BEGIN")
        found = problems(db)
        series: dict[str, list[int]] = {}
        for owner, sequence in db.execute(
                "SELECT owner_id, sequence FROM invoices WHERE sequence IS NOT NULL"
                " ORDER BY owner_id, sequence"):
            series.setdefault(owner, []).append(sequence)
        db.execute("COMMIT")
    finally:
        db.close()
    return found, all(found_ == list(range(1, count + 1)) for found_ in series.values())


def frozen_in_a_transaction(url: str, pid: int, application: str) -> bool:
    """Stop the process `pid` (SIGSTOP) and whether one of its sessions (named `application`)
    was left idle inside a transaction; if not, it is running again."""
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.05)  # a statement under way finishes; its session then waits, idle
    with psycopg.connect(url, autocommit=True) as db:
        found = db.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s"
                           " AND state = 'idle in transaction'", (application,)).fetchone()
    if found is None:
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    return found is not None

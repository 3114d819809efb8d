"""What every part of the bench sets up, in one place: a studio database opened as the studio
opens it, a raw `sqlite3` baseline beside it, accounts seeded through the studio's own units,
`studio serve` (or the bare route) started on a free port, a client signed in, and `wrk`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from studio.accounts.auth import Actor, add_actor
from studio.billing import invoices, profiles
from studio.config import Settings
from studio.ops.demo import DEMO_PASSWORD
from studio.store import sqlite
from studio.store.db import Database, open_database
from studio.store.transactions import in_transaction

ROOT = Path(__file__).resolve().parent.parent
LUA = Path(__file__).resolve().parent / "report.lua"
# The demo's account, which `studio serve --demo` seeds.
DEMO_EMAIL = "ada@example.com"
PASSWORD = DEMO_PASSWORD
JSON = {"Accept": "application/json"}

LINES = [{"description": "Work", "quantity": "3", "unit_price": "19.99", "tax_rate": "19"}]
DRAFT = {"customer": "Bench Ltd", "currency": "EUR", "due_date": "2030-01-01",
         "line_items": LINES}


# --- databases --------------------------------------------------------------------------------


async def open_studio_db(path: Path) -> Database:
    """The studio's SQLite database at `path`, migrated and opened as `studio serve` opens it."""
    return await open_database(Settings(db_path=path)).open()


def seeding(path: Path) -> sqlite3.Connection:
    """A migrated connection to seed a new SQLite file with, through the store's own connect."""
    return sqlite.connect(path)


def raw_sqlite(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the studio's pragmas, so only the machinery differs."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout = 30000")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA synchronous = FULL")
    return db


def timed_inside(inside: list[float], unit: Any, *args: Any) -> Callable[[Any], Any]:
    """`in_transaction(unit, *args)` to run on the writer's thread (`Database.on_writer`), its
    seconds there appended to `inside`: the transaction alone, without the hop to the thread."""
    def run(connection: Any) -> Any:
        started = time.perf_counter()
        try:
            return in_transaction(connection, unit, *args)
        finally:
            inside.append(time.perf_counter() - started)
    return run


# --- accounts and their invoices ---------------------------------------------------------------


def seed_actor(db: Any, count: int) -> tuple[Actor, list[str]]:
    """An actor with a session and `count` issued invoices, written directly (no argon2 cost);
    `db` is a SQLite connection or the studio's PostgreSQL one."""
    actor = Actor(str(uuid.uuid4()), f"bench-{uuid.uuid4().hex[:6]}@example.com",
                  uuid.uuid4().hex)
    invoice_ids = [str(uuid.uuid4()) for _ in range(count)]

    def seed(db: Any) -> None:
        db.execute("INSERT INTO actors (id, email, password_hash, created_at)"
                   " VALUES (?, ?, 'x', ?)", (actor.id, actor.email, time.time()))
        db.execute("INSERT INTO sessions (id, actor_id, created_at) VALUES (?, ?, ?)",
                   (actor.session_id, actor.id, time.time()))
        db.executemany(
            "INSERT INTO invoices (id, owner_id, status, number, customer, currency, net, tax,"
            " total, due_date, line_items) VALUES (?, ?, 'issued', ?, 'Bench Ltd', 'EUR',"
            " '100.00', '0.00', '100.00', '2030-01-01', ?)",
            [(invoice_id, actor.id, f"B-{n:04d}",
              json.dumps([{"description": "Work", "quantity": "1", "unit_price": "100.00",
                           "tax_rate": "0"}]))
             for n, invoice_id in enumerate(invoice_ids)],
        )

    in_transaction(db, seed)
    return actor, invoice_ids


def seed_actor_file(path: Path, count: int) -> tuple[Actor, list[str]]:
    """`seed_actor` into a new SQLite file."""
    db = seeding(path)
    try:
        return seed_actor(db, count)
    finally:
        db.close()


def actor_with_drafts(db: Any, count: int, email: str, password: str) -> tuple[str, list[str]]:
    """An actor with a seller profile and `count` drafts, through the studio's own units, on
    either database (the password hashed once)."""
    actor_id = add_actor(db, email, password)
    profiles.save(db, actor_id, {"name": "Bench", "address": "", "vat_id": ""})
    fields = invoices.parse_draft(DRAFT)
    return actor_id, [invoices.create_draft(db, actor_id, fields, None)[0]["id"]
                      for _ in range(count)]


def seed_drafts(path: Path, count: int, email: str, password: str = "x"
                ) -> tuple[str, list[str]]:
    """`actor_with_drafts` into a new SQLite file."""
    db = seeding(path)
    try:
        return in_transaction(db, actor_with_drafts, count, email, password)
    finally:
        db.close()


def seed_issued(path: Path, count: int, email: str) -> tuple[str, list[str]]:
    """An actor with `count` invoices issued through the studio's own units (so each has its
    balance row), in one transaction of a new SQLite file."""

    def seed(db: sqlite3.Connection) -> tuple[str, list[str]]:
        actor_id, drafts = actor_with_drafts(db, count, email, "x")
        for n, draft in enumerate(drafts):
            invoices.issue(db, actor_id, draft, f"seed-{n}", 1)
        return actor_id, drafts

    db = seeding(path)
    try:
        return in_transaction(db, seed)
    finally:
        db.close()


# --- servers ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def studio_env(db_path: Path) -> dict[str, str]:
    """The environment of a `studio serve` on `db_path`, none of the caller's STUDIO_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update({"STUDIO_DB": str(db_path), "STUDIO_SECRET_KEY": "bench-secret",
                "STUDIO_LEASE_SECONDS": "3600", "PYTHONUNBUFFERED": "1"})
    return env


def pg_env(work: Path, url: str) -> dict[str, str]:
    """The same, the studio on the PostgreSQL database `url`."""
    return {**studio_env(work / "unused.db"), "STUDIO_DATABASE_URL": url}


class Server:
    """A server process (`python ARGS --host 127.0.0.1 --port N`), answering when made."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path,
                 cwd: Path = ROOT) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, *args, "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=cwd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"{name} exited early:\n{log.read_text()}")
            try:
                httpx.get(self.url + "/login", timeout=1.0)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"{name} did not answer:\n{log.read_text()}") from None
                time.sleep(0.1)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def running(server: Server, name: str) -> Iterator[Server]:
    """`server`, stopped when done; if what ran against it failed, the end of its log is
    printed, since the run's folder goes with it."""
    try:
        yield server
    except BaseException:
        tail = server.log.read_text(errors="replace")[-4000:]
        print(f"--- the end of {name}'s log ---\n{tail}", file=sys.stderr)
        raise
    finally:
        server.stop()


def serving(name: str, env: dict[str, str], log: Path, *, demo: bool = False,
            cwd: Path = ROOT) -> contextlib.AbstractContextManager[Server]:
    """`studio serve` (with `--demo`, the demo's accounts seeded), stopped when done."""
    args = ["-m", "studio.ops.cli", "serve", *(["--demo"] if demo else [])]
    return running(Server(name, args, env, log, cwd), name)


def bare_serving(env: dict[str, str], log: Path) -> contextlib.AbstractContextManager[Server]:
    """The baseline server: bare Starlette routes on the studio's uvicorn settings."""
    return running(Server("bare starlette", ["-m", "bench.bare"], env, log), "bare starlette")


def signed_in(url: str, email: str = DEMO_EMAIL, password: str = PASSWORD,
              timeout: float = 120) -> httpx.Client:
    """A client of the server at `url`, asking for JSON, signed in as `email`."""
    client = httpx.Client(base_url=url, headers=JSON, timeout=timeout)
    try:
        client.post("/login", json={"email": email, "password": password}).raise_for_status()
    except BaseException:
        client.close()
        raise
    return client


# --- load ---------------------------------------------------------------------------------


def install_wrk() -> None:
    """The load generator, installed from Debian's packages when it is missing."""
    if shutil.which("wrk") is not None:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "wrk"], check=True, env=env)


def wrk(url: str, seconds: float, connections: int, **env: str) -> dict[str, Any]:
    """One wrk run; its Lua `done` hook prints the figures as JSON."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout",
               "10s", "-s", str(LUA), url]
    finished = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=seconds + 60, check=True)
    line = next(x for x in finished.stdout.splitlines() if x.startswith("BENCH "))
    figures = json.loads(line.removeprefix("BENCH "))
    figures["rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
    figures["errors"] = sum(figures[k] for k in ("non2xx", "connect", "read", "write",
                                                 "timeout"))
    return figures


def timed_polls(client: httpx.Client, path: str, seconds: float,
                until: Callable[[], bool] | None = None) -> list[float]:
    """Poll like a browser tab (every 50 ms) and keep each reply's latency in ms, for
    `seconds`, or with `until`, until it says done."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds
    while (until is None and time.monotonic() < stop) or (until is not None and not until()):
        started = time.perf_counter()
        client.get(path).raise_for_status()
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(0.05)
    return latencies

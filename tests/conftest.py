"""Shared fixtures: an in-process studio on a real SQLite file, and a real server process."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import create_app
from studio.config import Settings
from studio.ops.demo import DEMO_PASSWORD, seed_demo
from studio.store.sqlite import prepare
from studio.store.transactions import in_transaction
from tests import backends
from tests.mailserver import inbox, smtp  # noqa: F401  (fixtures of the tests that send email)

ROOT = Path(__file__).resolve().parent.parent
ADA, BEN = "ada@example.com", "ben@example.com"


# The files that take longest, slowest first. Under pytest-xdist (`--dist loadfile`) files are
# handed to the workers in collection order, so these start first instead of one of them
# being left to run alone at the end while the other workers idle.
SLOWEST_FILES = [
    "test_state_machine.py", "test_packaging.py", "test_faults.py", "test_fuzz.py",
    "test_sending_faults.py", "test_sending.py", "test_several_hosts.py",
    "test_host_fails_alone.py", "test_processes.py", "test_pg_backup.py", "test_backup.py",
    "test_accounts.py", "test_attachment_processes.py", "test_flow.py",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first; every file's own tests keep their order.

    tests/run.sh runs each pass in two phases: STUDIO_TEST_PHASE=shared keeps the tests not
    marked `alone` (run side by side with others), STUDIO_TEST_PHASE=alone keeps only those
    (run one at a time with the machine to themselves). Unset, every test runs."""
    rank = {name: place for place, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    phase = os.environ.get("STUDIO_TEST_PHASE")
    if phase not in ("shared", "alone"):
        return
    keep = [item for item in items
            if (item.get_closest_marker("alone") is not None) == (phase == "alone")]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _signed_in_clients_closed() -> Iterator[None]:
    """A client a test signed in with is closed as the test ends: left to the garbage
    collector, its socket's ResourceWarning would fail whichever test runs when it collects."""
    yield
    while SIGNED_IN:
        SIGNED_IN.pop().close()


@pytest.fixture(autouse=True)
def _no_sign_in_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process studios answer throttled sign-ins at once; the pause is measured in bench/."""
    monkeypatch.setattr("studio.accounts.auth.REFUSED_SIGN_IN_PAUSE_S", 0.0)


@pytest.fixture(scope="session")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo database made once per run: argon2 hashing is slow on purpose."""
    path = tmp_path_factory.mktemp("template") / "studio.db"
    prepare(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.row_factory = sqlite3.Row
    try:
        in_transaction(db, seed_demo)
        in_transaction(db, backends.quick_passwords)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return path


@pytest.fixture
def settings(tmp_path: Path, seeded_template: Path) -> Settings:
    db_path = tmp_path / "studio.db"
    if backends.ON_POSTGRES:
        return Settings(db_path=db_path, database_url=backends.use_seeded(db_path),
                        secret_key="test-secret", demo=True)
    shutil.copyfile(seeded_template, db_path)
    return Settings(db_path=db_path, secret_key="test-secret", demo=True)


def rows(db_path: Path, sql: str, *params: Any) -> list[Any]:
    """Read the database directly, as a second process would."""
    db = backends.connect(db_path)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def scalar(db_path: Path, sql: str, *params: Any) -> Any:
    return rows(db_path, sql, *params)[0][0]


def execute(db_path: Path, sql: str, *params: Any) -> None:
    db = backends.connect(db_path)
    try:
        in_transaction(db, lambda db: db.execute(sql, params))
    finally:
        db.close()


def table_counts(db_path: Path) -> dict[str, int]:
    """Every table's row count, to show that a refused request changed nothing."""
    db = backends.connect(db_path)
    try:
        return {name: db.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
                for name in backends.tables(db)}
    finally:
        db.close()


def database_digest(db_path: Path) -> str:
    """Every row of every table, to show that nothing at all changed."""
    db = backends.connect(db_path)
    try:
        if isinstance(db, sqlite3.Connection):
            return "\n".join(db.iterdump())
        return "\n".join(
            f"{name}: {sorted(map(repr, db.execute(f'SELECT * FROM {name}').fetchall()))}"
            for name in backends.tables(db))
    finally:
        db.close()


def days_ahead(n: int) -> str:
    """Today (UTC) plus `n` days, as a date field takes it: a due date that stays on or after
    the day of issue whatever day the suite runs."""
    return (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=n)).isoformat()


@dataclass
class Running:
    """An in-process studio with its lifespan running and an HTTP client bound to it."""

    app: Any
    settings: Settings

    def client(self, **headers: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(
            transport=transport, base_url="http://studio.test",
            headers={"Accept": "application/json", **headers},
        )

    async def signed_in(self, email: str = ADA) -> httpx.AsyncClient:
        client = self.client()
        reply = await client.post("/login", json={"email": email, "password": DEMO_PASSWORD})
        assert reply.status_code == 200, reply.text
        return client

    def invoice_ids(self, email: str = ADA) -> list[str]:
        return [
            row[0]
            for row in rows(
                self.settings.db_path,
                "SELECT invoices.id FROM invoices JOIN actors ON actors.id = invoices.owner_id"
                " WHERE actors.email = ? AND invoices.status = 'issued' ORDER BY number",
                email,
            )
        ]

    @property
    def studio(self) -> Any:
        return self.app.state.studio


@contextlib.asynccontextmanager
async def running(settings: Settings, providers: dict[str, Any] | None = None
                  ) -> AsyncIterator[Running]:
    app = create_app(settings, providers)
    async with app.router.lifespan_context(app):
        yield Running(app, settings)


@pytest.fixture
async def studio(settings: Settings) -> AsyncIterator[Running]:
    async with running(settings) as started:
        yield started


def lease_body(invoice_ids: list[str], request_id: str = "req-1", **extra: Any) -> dict[str, Any]:
    return {"request_id": request_id, "purpose": "summarize_invoice", "invoice_ids": invoice_ids,
            "providers": ["local"], "candidates": 1, **extra}


async def wait_for_status(client: httpx.AsyncClient, lease_id: str, wanted: str,
                          seconds: float = 30.0) -> dict[str, Any]:
    import anyio

    deadline = time.monotonic() + seconds
    while True:
        lease = (await client.get(f"/leases/{lease_id}")).json()
        if lease["status"] == wanted:
            return lease
        assert time.monotonic() < deadline, f"lease stayed {lease['status']}, wanted {wanted}"
        await anyio.sleep(0.05)


# --- a real server process -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            if kill:
                self.crash()
                return
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.crash()

    def crash(self) -> None:
        """kill -9 of the studio and every process it started (`--workers` children too), as
        a power cut would: none of them gets to finish anything."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def studio_env(db_path: Path, **settings: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("STUDIO_")}
    env.update({"STUDIO_DB": str(db_path), "STUDIO_SECRET_KEY": "test-secret",
                "PYTHONUNBUFFERED": "1"})
    url = backends.database_url(db_path)
    if url is not None:
        env["STUDIO_DATABASE_URL"] = url
    env.update(settings)
    return env


def studio_command(db_path: Path, *args: str, input: str | None = None, timeout: float = 60,
                   **settings: str) -> subprocess.CompletedProcess[str]:
    """`studio ARGS --db DB_PATH` as an operator types it; its output captured as text."""
    db = backends.database_url(db_path) or str(db_path)
    return subprocess.run([sys.executable, "-m", "studio.ops.cli", *args, "--db", db],
                          cwd=ROOT, env=studio_env(db_path, **settings), input=input,
                          capture_output=True, text=True, timeout=timeout)


def start_server(db_path: Path, *args: str, port: int | None = None, **settings: str) -> Server:
    """`studio serve` as a real subprocess on a free port; waits until it answers."""
    port = port or free_port()
    log_path = db_path.with_name(f"serve-{port}.log")
    with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "studio.ops.cli", "serve", "--host", "127.0.0.1",
             "--port", str(port), *args],
            cwd=ROOT, env=studio_env(db_path, **settings), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a crash takes all of it
        )
    server = Server(process, f"http://127.0.0.1:{port}", log_path)
    wait_for_server(server)
    return server


# How long a starting server may take to answer before it counts as dead. tests/run.sh runs
# test files side by side, so a start can wait for the CPU a while (a `--workers` child that
# has not answered uvicorn's health check in 5 s is restarted, which doubles it).
# One client asks every time, every 20 ms: a new client per try cost about 30 ms of CPU
# (httpx loads the CA bundle), taken from the very server that is starting.
def wait_for_server(server: Server, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise AssertionError(f"studio serve exited early:\n{server.log()}")
            try:
                client.get(server.url + "/login")
                return
            except httpx.HTTPError:
                time.sleep(0.02)
    server.stop(kill=True)
    raise AssertionError(f"studio serve did not answer in {seconds} s:\n{server.log()}")


def start_worker(db_path: Path, name: str, **settings: str) -> subprocess.Popen[bytes]:
    """`studio worker` as a real subprocess on the same database file."""
    with (db_path.parent / f"{name}.log").open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "studio.ops.cli", "worker"], cwd=ROOT,
                                env=studio_env(db_path, **settings), stdout=log,
                                stderr=subprocess.STDOUT)


def wait_until(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = start_server(tmp_path / "studio.db", "--demo")
    yield started
    started.stop()


# The clients `sign_in` made during the running test, closed when it ends.
SIGNED_IN: list[httpx.Client] = []


def sign_in(url: str, email: str = ADA) -> httpx.Client:
    client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=30)
    SIGNED_IN.append(client)
    reply = client.post("/login", json={"email": email, "password": DEMO_PASSWORD})
    assert reply.status_code == 200, reply.text
    return client


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)

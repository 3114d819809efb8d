"""Several hosts, for real: a PostgreSQL server and three studio processes, each in a network
namespace of its own on one bridge, a few milliseconds apart (tests/hosts/lab.py). Two web
hosts, A (with its embedded worker) and B (web only), and W, a worker only. They share the
database URL and nothing else: no STUDIO_SECRET_KEY, no STUDIO_FILES, each its own folder.

The cluster is this file's own, not the suite's: it is stopped and started under load here,
which the suite's cluster, shared by every other test of the pass, must never be; and it
listens on the database host's namespace address, where the suite's listens on loopback.

Every promise is asserted on the database as well as on the answers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeSerializer

from studio.accounts.auth import SESSION_COOKIE, add_actor
from studio.billing import profiles
from studio.ops.demo import DEMO_PASSWORD, INVOICES, OVERDUE
from studio.store import postgres
from studio.store.migrations import postgres as pg_schema
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, BEN, days_ahead, lease_body
from tests.hosts import lab

WHY_NOT = lab.can_run() if backends.ON_POSTGRES else None
pytestmark = [
    pytest.mark.skipif(not backends.ON_POSTGRES,
                       reason="the PostgreSQL pass only: the hosts share a PostgreSQL database"),
    pytest.mark.skipif(WHY_NOT is not None, reason=f"several hosts: {WHY_NOT}"),
]

DELAY_MS = 3
# Tasks take a while, so a host can be killed in the middle of one; a dead host's claims
# time out soon after.
SLOW = {"STUDIO_PROVIDER_DELAY_S": "2", "STUDIO_CLAIM_SECONDS": "3"}
JSON = {"Accept": "application/json"}
DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "20"}]}


@dataclass
class Lab:
    network: lab.Network
    database: lab.Postgres
    hosts: dict[str, lab.Host] = field(default_factory=dict)

    @property
    def a(self) -> lab.Host:
        return self.hosts["a"]

    @property
    def b(self) -> lab.Host:
        return self.hosts["b"]

    @property
    def w(self) -> lab.Host:
        return self.hosts["w"]

    def rows(self, sql: str, *params: Any) -> list[Any]:
        db = postgres.connect(self.database.url)
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()

    def scalar(self, sql: str, *params: Any) -> Any:
        return self.rows(sql, *params)[0][0]

    def client(self, host: lab.Host, cookie: str | None = None,
               timeout: float = 30) -> httpx.Client:
        cookies = {SESSION_COOKIE: cookie} if cookie else None
        return httpx.Client(base_url=host.url, headers=JSON, timeout=timeout, cookies=cookies)

    def signed_in(self, host: lab.Host, email: str = ADA,
                  password: str = DEMO_PASSWORD) -> httpx.Client:
        client = self.client(host)
        reply = client.post("/login", json={"email": email, "password": password})
        assert reply.status_code == 200, reply.text
        return client

    def seller(self) -> tuple[str, str]:
        """A new actor with a seller profile and no invoices: her series starts at 1."""
        email, password = f"seller-{uuid.uuid4().hex[:8]}@example.com", "seller-password"
        db = postgres.connect(self.database.url)
        try:
            in_transaction(db, lambda db: profiles.save(db, add_actor(db, email, password), {
                "name": "Seller Co", "address": "1 Road", "vat_id": ""}))
        finally:
            db.close()
        return email, password

    def ensure_running(self) -> None:
        """A test that failed half-way may have left the database stopped or a host dead."""
        if not self.database.running():
            self.database.start()
        stopped = [host for host in self.hosts.values() if not host.alive()]
        for host in stopped:
            host.start()
        for host in stopped:
            host.wait_until_ready()

    def logs(self) -> str:
        parts = [f"=== host {name} (pid {host.pid if host.process else '-'})\n"
                 f"{host.log()[-6000:]}" for name, host in self.hosts.items()]
        return "\n".join([*parts, f"=== postgres\n{self.database.log()[-3000:]}"])


def issued_invoices(lab_: Lab, email: str, count: int) -> list[str]:
    return [row[0] for row in lab_.rows(
        "SELECT invoices.id FROM invoices JOIN actors ON actors.id = invoices.owner_id"
        " WHERE actors.email = ? AND status = 'issued' ORDER BY invoices.id LIMIT ?",
        email, count)]


@pytest.fixture(scope="module")
def hosts(request: pytest.FixtureRequest) -> Iterator[Lab]:
    lab.remove_leftovers()
    folder = lab.new_folder()
    network = lab.Network(delay_ms=DELAY_MS)
    running: Lab | None = None
    failed_before = request.session.testsfailed
    try:
        network.build(["db", "a", "b", "w"])
        database = lab.Postgres(network, "db", folder / "postgres").create()
        running = Lab(network, database)
        shared = {"STUDIO_DATABASE_URL": database.url, **SLOW}
        running.hosts = {
            "a": lab.Host(network, "a", ["serve", "--demo"], shared, folder / "a"),
            "b": lab.Host(network, "b", ["serve", "--demo"],
                          {**shared, "STUDIO_EMBEDDED_WORKER": "0"}, folder / "b"),
            "w": lab.Host(network, "w", ["worker"], shared, folder / "w"),
        }
        # A and B start together on the empty database: one migrates, the other waits.
        for host in running.hosts.values():
            host.start()
        for host in running.hosts.values():
            host.wait_until_ready()
        yield running
    finally:
        if running is not None and request.session.testsfailed > failed_before:
            print(f"\nseveral hosts ({network.delay_by} delay):\n{running.logs()}")
        if running is not None:
            for host in running.hosts.values():
                host.kill()
            running.database.stop("immediate")
        network.remove()
        if running is not None:
            running.database.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lab_(hosts: Lab) -> Lab:
    hosts.ensure_running()
    return hosts


def test_two_hosts_starting_together_on_an_empty_database_make_the_schema_and_demo_once(
        lab_: Lab) -> None:
    for host in lab_.hosts.values():  # the premise: nothing but the database is shared
        shared = {key for key in host.environment() if key.startswith("STUDIO_")}
        assert shared <= {"STUDIO_DATABASE_URL", "STUDIO_EMBEDDED_WORKER", *SLOW}
    versions = [row[0] for row in lab_.rows("SELECT version FROM schema_version")]
    assert sorted(versions) == list(range(1, len(pg_schema.MIGRATIONS) + 1))
    for email, made in INVOICES.items():
        issued = lab_.scalar("SELECT COUNT(*) FROM invoices JOIN actors ON actors.id ="
                             " invoices.owner_id WHERE actors.email = ? AND kind = 'invoice'"
                             " AND status = 'issued'", email)
        # `--demo` seeds the full demo: the listed invoices and one overdue per account.
        assert issued == sum(1 for *_, issue in made if issue) + (email in OVERDUE), email


def test_a_cookie_from_host_a_works_on_host_b_and_signing_out_on_b_ends_it_on_a(
        lab_: Lab) -> None:
    with closing(lab_.signed_in(lab_.a)) as on_a:
        cookie = on_a.cookies[SESSION_COOKIE]
        with lab_.client(lab_.b, cookie) as on_b:
            listed = on_b.get("/invoices")
            assert listed.status_code == 200, listed.text
            adas = {row[0] for row in lab_.rows(
                "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                " invoices.owner_id WHERE actors.email = ?", ADA)}
            assert listed.json() and {item["id"] for item in listed.json()} <= adas
            # The cookie is signed with the one key kept in the database, and names a session
            # kept there too.
            key = lab_.scalar("SELECT key FROM signing_keys WHERE id = 1")
            token = URLSafeSerializer(key, salt="studio-session").loads(cookie)
            session = hashlib.sha256(token.encode()).hexdigest()
            assert lab_.scalar("SELECT actors.email FROM sessions JOIN actors ON actors.id ="
                               " sessions.actor_id WHERE sessions.id = ?", session) == ADA

            assert on_b.post("/logout").status_code == 200
            assert lab_.scalar("SELECT COUNT(*) FROM sessions WHERE id = ?", session) == 0
            refused = on_a.get("/invoices")
            assert refused.status_code == 401, refused.text


def test_a_request_submitted_on_a_is_polled_and_applied_on_b(lab_: Lab) -> None:
    invoice_ids = issued_invoices(lab_, ADA, 2)
    with closing(lab_.signed_in(lab_.a)) as on_a, \
            lab_.client(lab_.b, on_a.cookies[SESSION_COOKIE]) as on_b:
        submitted = on_a.post("/leases", json=lease_body(invoice_ids, str(uuid.uuid4())))
        assert submitted.status_code == 201, submitted.text
        lease_id = submitted.json()["lease_id"]
        deadline = time.monotonic() + 30
        while (lease := on_b.get(f"/leases/{lease_id}").json())["status"] == "open":
            assert time.monotonic() < deadline, lease
            time.sleep(0.2)
        assert lease["status"] == "proposed", lease
        choices = {item["invoice_id"]: item["candidates"][0]["proposal_id"]
                   for item in lease["invoices"]}
        applied = on_b.post(f"/leases/{lease_id}/apply", json={"choices": choices})
        assert applied.status_code == 200, applied.text
        # Once B acknowledged the write, A's very next answer shows it.
        assert on_a.get(f"/leases/{lease_id}").json()["status"] == "applied"

    assert lab_.scalar("SELECT status FROM leases WHERE id = ?", lease_id) == "applied"
    for invoice_id, proposal_id in choices.items():
        summary, applied_at = lab_.rows(
            "SELECT summary, applied_at FROM proposals WHERE id = ?", proposal_id)[0]
        assert applied_at is not None
        assert lab_.scalar("SELECT summary FROM invoices WHERE id = ?", invoice_id) == summary


def test_30_drafts_issued_through_a_and_b_each_twice_get_exactly_1_to_30(lab_: Lab) -> None:
    email, password = lab_.seller()
    clients = [lab_.signed_in(lab_.a, email, password), lab_.signed_in(lab_.b, email, password)]
    try:
        drafts = [clients[n % 2].post("/invoices", json=DRAFT).json()["id"] for n in range(30)]
        # Each draft is issued once through A and once through B with one request id, all
        # at once: half of the sends go to each host, and each is the other's replay.
        sends = [(draft, f"issue-{draft}", host) for draft in drafts for host in (0, 1)]

        def send(job: tuple[str, str, int]) -> httpx.Response:
            draft, request_id, host = job
            return clients[host].post(f"/invoices/{draft}/issue",
                                      json={"request_id": request_id, "revision": 1})

        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(send, sends))
    finally:
        for client in clients:
            client.close()

    assert sorted(r.status_code for r in replies) == [200] * 30 + [201] * 30, \
        [r.text for r in replies if r.status_code not in (200, 201)]
    numbers: dict[str, set[str]] = {}
    for reply in replies:
        numbers.setdefault(reply.json()["invoice_id"], set()).add(reply.json()["number"])
    assert sorted(numbers) == sorted(drafts)
    assert all(len(given) == 1 for given in numbers.values())
    assert sorted(int(next(iter(given)).rsplit("-", 1)[1])
                  for given in numbers.values()) == list(range(1, 31))

    owner = "(SELECT id FROM actors WHERE email = ?)"
    assert [row[0] for row in lab_.rows(
        f"SELECT sequence FROM invoices WHERE owner_id = {owner} AND sequence IS NOT NULL"
        " ORDER BY sequence", email)] == list(range(1, 31))
    assert lab_.scalar(f"SELECT COUNT(*) FROM invoices WHERE owner_id = {owner}"
                       " AND status = 'issued'", email) == 30
    assert lab_.scalar(f"SELECT COUNT(*) FROM request_bindings WHERE actor_id = {owner}"
                       " AND kind = 'issue'", email) == 30
    assert lab_.scalar(f"SELECT MAX(last) FROM invoice_series WHERE owner_id = {owner}",
                       email) == 30
    # `studio audit`, as an operator on the worker host runs it.
    audited = subprocess.run(
        lab_.network.inside("w", sys.executable, "-m", "studio.ops.cli", "audit", "--db",
                            lab_.database.url),
        cwd=lab_.w.folder, env=lab_.w.environment(), capture_output=True, text=True, timeout=60)
    assert audited.returncode == 0, audited.stdout + audited.stderr


def test_host_a_killed_mid_generation_its_tasks_are_finished_by_another_once_each(
        lab_: Lab) -> None:
    a, w = lab_.a, lab_.w
    invoice_ids = issued_invoices(lab_, ADA, 2)
    # W is away while A claims, so that A surely holds some of the tasks when it dies.
    w.stop()
    with closing(lab_.signed_in(a)) as on_a:
        cookie = on_a.cookies[SESSION_COOKIE]
        submitted = on_a.post("/leases", json=lease_body(invoice_ids, str(uuid.uuid4()),
                                                         candidates=3))
    assert submitted.status_code == 201, submitted.text
    lease_id = submitted.json()["lease_id"]
    held_by_a = ("SELECT tasks.id FROM tasks WHERE lease_id = ? AND status = 'running'"
                 " AND claim LIKE ? AND NOT EXISTS"
                 " (SELECT 1 FROM proposals WHERE proposals.task_id = tasks.id)")
    deadline = time.monotonic() + 20
    while not lab_.rows(held_by_a, lease_id, f"%:{a.pid}:%"):
        assert time.monotonic() < deadline, "A claimed no task"
        time.sleep(0.02)
    a.kill()
    # Mid-generation: claimed, its proposal not written.
    held = {row[0] for row in lab_.rows(held_by_a, lease_id, f"%:{a.pid}:%")}
    assert held

    w.start().wait_until_ready()
    with lab_.client(lab_.b, cookie) as on_b:
        deadline = time.monotonic() + 45
        while (lease := on_b.get(f"/leases/{lease_id}").json())["status"] == "open":
            assert time.monotonic() < deadline, lease
            time.sleep(0.2)
    assert lease["status"] == "proposed", lease
    assert lease["progress"] == {"total": 6, "done": 6, "failed": 0}

    per_task = lab_.rows("SELECT tasks.id, tasks.status, tasks.attempts, COUNT(proposals.id)"
                         " FROM tasks LEFT JOIN proposals ON proposals.task_id = tasks.id"
                         " WHERE tasks.lease_id = ? GROUP BY tasks.id", lease_id)
    assert len(per_task) == 6
    assert all(status == "done" and proposals == 1 for _, status, _, proposals in per_task)
    # A's tasks were taken over once their claims timed out: a second attempt each.
    assert all(attempts >= 2 for task, _, attempts, _ in per_task if task in held)
    assert lab_.scalar("SELECT COUNT(*) FROM proposals WHERE lease_id = ?", lease_id) == 6


def test_sign_in_failures_on_a_count_on_b(lab_: Lab) -> None:
    failures_before = lab_.scalar(
        "SELECT COUNT(*) FROM sign_in_attempts WHERE email = ? AND outcome = 'failed'", BEN)
    with lab_.client(lab_.a) as on_a:
        for _ in range(5):
            wrong = on_a.post("/login", json={"email": BEN, "password": "not-the-password"})
            assert wrong.status_code == 401, wrong.text
    sessions = lab_.scalar("SELECT COUNT(*) FROM sessions JOIN actors ON actors.id ="
                           " sessions.actor_id WHERE actors.email = ?", BEN)
    with lab_.client(lab_.b) as on_b:
        # Even the right password: this address has used up its tries for this email.
        refused = on_b.post("/login", json={"email": BEN, "password": DEMO_PASSWORD})
    assert refused.status_code == 429, refused.text
    assert refused.json()["detail"] == "too_many_attempts"
    assert int(refused.headers["Retry-After"]) > 0

    counted = lab_.rows("SELECT address, outcome FROM sign_in_attempts WHERE email = ?"
                        " AND outcome = 'failed'", BEN)
    assert len(counted) - failures_before == 5
    assert {address for address, _ in counted} == {lab_.network.gateway}
    assert lab_.scalar("SELECT COUNT(*) FROM sessions JOIN actors ON actors.id ="
                       " sessions.actor_id WHERE actors.email = ?", BEN) == sessions


def png(seed: int) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    pixel = zlib.compress(bytes([0, seed % 256, seed // 256 % 256, 0]))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", pixel) + chunk(b"IEND", b""))


def test_an_upload_on_a_downloads_from_b_and_lives_only_in_the_database(lab_: Lab) -> None:
    content = png(int(time.time()) % 65536)
    key = str(uuid.uuid4())
    with closing(lab_.signed_in(lab_.a)) as on_a, \
            lab_.client(lab_.b, on_a.cookies[SESSION_COOKIE]) as on_b:
        draft = on_a.post("/invoices", json=DRAFT)
        assert draft.status_code == 201, draft.text
        invoice_id = draft.json()["id"]
        sent = on_a.post(f"/invoices/{invoice_id}/attachments", data={"client_key": key},
                         files={"file": ("receipt.png", content, "image/png")})
        assert sent.status_code == 201, sent.text
        attachment_id = sent.json()["attachment_id"]

        fetched = on_b.get(f"/attachments/{attachment_id}")
        assert fetched.status_code == 200, fetched.text
        assert fetched.content == content
        # The same upload resent to B is the same attachment.
        again = on_b.post(f"/invoices/{invoice_id}/attachments", data={"client_key": key},
                          files={"file": ("receipt.png", content, "image/png")})
        assert again.status_code == 200, again.text
        assert again.json()["attachment_id"] == attachment_id

    digest = hashlib.sha256(content).hexdigest()
    assert lab_.scalar("SELECT COUNT(*) FROM attachments WHERE invoice_id = ?"
                       " AND sha256 = ?", invoice_id, digest) == 1
    chunks = lab_.rows("SELECT stored_chunks.content FROM stored_chunks JOIN stored_files"
                       " ON stored_files.id = stored_chunks.file_id"
                       " WHERE stored_files.sha256 = ? ORDER BY stored_chunks.position", digest)
    assert b"".join(bytes(row[0]) for row in chunks) == content
    for host in lab_.hosts.values():
        on_disk = [path for path in host.folder.rglob("*")
                   if path.is_file() and path.stat().st_size == len(content)
                   and path.read_bytes() == content]
        assert on_disk == [], f"host {host.name} keeps the bytes on its own disk"


@dataclass
class Load:
    """Clients posting drafts, each with a request id of its own sent again until answered,
    and clients reading (a request polled, the invoice list), all the while."""

    acknowledged: dict[str, str] = field(default_factory=dict)  # request id -> draft id
    acknowledged_at: dict[str, list[float]] = field(default_factory=dict)  # host -> times
    reads: int = 0
    unavailable: int = 0
    unanswered: int = 0
    wrong: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def judged(self, reply: httpx.Response) -> bool:
        """Whether the reply is a success; a refusal must be 503 database_unavailable."""
        if reply.status_code in (200, 201):
            return True
        with self.lock:
            if reply.status_code == 503 and \
                    reply.json().get("detail") == "database_unavailable":
                self.unavailable += 1
            else:
                self.wrong.append(f"{reply.request.method} {reply.request.url.path}"
                                  f" {reply.status_code} {reply.text[:300]}")
        return False

    def post_drafts(self, client: httpx.Client) -> None:
        while not self.stop.is_set():
            request_id = str(uuid.uuid4())
            while not self.stop.is_set():
                try:
                    reply = client.post("/invoices", json={**DRAFT, "request_id": request_id})
                except httpx.HTTPError:
                    with self.lock:
                        self.unanswered += 1
                    time.sleep(0.2)  # no answer at all: sent again with the same id
                    continue
                if self.judged(reply):
                    with self.lock:
                        self.acknowledged[request_id] = reply.json()["id"]
                        self.acknowledged_at.setdefault(str(client.base_url), []).append(
                            time.monotonic())
                    break
                time.sleep(0.2)

    def read(self, client: httpx.Client, paths: list[str]) -> None:
        while not self.stop.is_set():
            for path in paths:
                try:
                    reply = client.get(path)
                except httpx.HTTPError:
                    with self.lock:
                        self.unanswered += 1
                    continue
                if self.judged(reply):
                    with self.lock:
                        self.reads += 1
                time.sleep(0.1)

    def acknowledged_since(self, moment: float) -> dict[str, int]:
        with self.lock:
            return {host: sum(at > moment for at in times)
                    for host, times in self.acknowledged_at.items()}


def wait_for(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def health(host: lab.Host) -> int:
    try:
        return httpx.get(host.url + "/healthz", timeout=20).status_code
    except httpx.HTTPError:
        return 0


def test_the_database_restarted_mid_load_loses_no_acknowledged_write_and_hosts_recover(
        lab_: Lab) -> None:
    with closing(lab_.signed_in(lab_.a)) as login:
        cookie = login.cookies[SESSION_COOKIE]
        polled = login.post("/leases", json=lease_body(issued_invoices(lab_, ADA, 1),
                                                       str(uuid.uuid4())))
        assert polled.status_code == 201, polled.text
    reading = ["/invoices", f"/leases/{polled.json()['lease_id']}"]
    clients = {host.name: [lab_.client(host, cookie, timeout=10) for _ in range(3)]
               for host in (lab_.a, lab_.b)}
    load = Load()
    threads = [threading.Thread(target=load.post_drafts, args=(client,))
               for writers in clients.values() for client in writers[:2]]
    threads += [threading.Thread(target=load.read, args=(readers[2], reading))
                for readers in clients.values()]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: len(load.acknowledged) >= 12, 30, "drafts before the restart")
        lab_.database.stop("immediate")  # as a crash: no checkpoint, recovery from the WAL
        stopped_at = time.monotonic()
        time.sleep(0.5)
        with ThreadPoolExecutor(2) as pool:  # each waits its time-out for the database
            health_during = list(pool.map(health, (lab_.a, lab_.b)))
        time.sleep(max(0.0, stopped_at + 3.0 - time.monotonic()))
        lab_.database.start()
        back_at = time.monotonic()
        # Each web host takes writes again by itself, nobody restarting it.
        wait_for(lambda: len(after := load.acknowledged_since(back_at)) == 2
                 and min(after.values()) >= 5, 60,
                 f"drafts on both hosts after the restart ({load.unavailable} answered 503)")
        recovered_in = time.monotonic() - back_at
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(30)
        for client in (client for each in clients.values() for client in each):
            client.close()

    print(f"\nthe database restarted: {len(load.acknowledged)} drafts acknowledged and"
          f" {load.reads} reads answered; {load.unavailable} answers 503 database_unavailable,"
          f" {load.unanswered} sends unanswered, /healthz during the outage {health_during};"
          f" both hosts writing {recovered_in:.1f} s after the database was back")
    assert load.wrong == []
    assert load.unavailable >= 1  # the outage was seen, and answered as such
    assert health_during == [503, 503]
    # Every acknowledged draft is there, made once, under the request id that made it.
    bound = dict(lab_.rows("SELECT request_id, target_id FROM request_bindings"
                           " WHERE kind = 'draft' AND request_id IN"
                           " (SELECT value FROM json_each(?))",
                           json.dumps(list(load.acknowledged))))
    assert bound == load.acknowledged
    stored = {row[0] for row in lab_.rows(
        "SELECT id FROM invoices WHERE status = 'draft' AND id IN"
        " (SELECT value FROM json_each(?))", json.dumps(list(bound.values())))}
    assert stored == set(load.acknowledged.values())

    # The hosts came back by themselves: both web hosts healthy, and W claims work again.
    assert [health(host) for host in (lab_.a, lab_.b)] == [200, 200]
    with lab_.client(lab_.b, cookie) as on_b:
        submitted = on_b.post("/leases", json=lease_body(issued_invoices(lab_, ADA, 2),
                                                         str(uuid.uuid4()), candidates=4))
        assert submitted.status_code == 201, submitted.text
        lease_id = submitted.json()["lease_id"]
    claimed_by: set[str] = set()

    def written() -> bool:
        for (claim,) in lab_.rows("SELECT claim FROM tasks WHERE lease_id = ?"
                                  " AND claim IS NOT NULL", lease_id):
            claimed_by.add(claim.split(":")[1])  # host:pid:...
        return lab_.scalar("SELECT status FROM leases WHERE id = ?", lease_id) != "open"

    wait_for(written, 45, "the request made after the restart to be written")
    assert lab_.scalar("SELECT status FROM leases WHERE id = ?", lease_id) == "proposed"
    assert str(lab_.w.pid) in claimed_by, f"W claimed nothing after the restart: {claimed_by}"

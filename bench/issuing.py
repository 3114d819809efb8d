"""Issuing: the issue transaction against raw `sqlite3` doing the same writes, and issues per
second from two `studio serve` processes sharing one file, gapless checked after the run."""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx

from bench.setup import open_studio_db, raw_sqlite, seed_drafts, signed_in, timed_inside
from studio.billing import invoices
from studio.ops.audit import audit_file


def raw_issue(db: sqlite3.Connection, actor_id: str, invoice_id: str, request_id: str) -> str:
    """The same counter update, invoice update, binding insert and balance insert, in one
    BEGIN IMMEDIATE, with nothing around them."""
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    sequence = db.execute(
        "INSERT INTO invoice_series (owner_id, kind, year, last) VALUES (?, 'invoice', 2026, 1)"
        " ON CONFLICT (owner_id, kind, year) DO UPDATE SET last = invoice_series.last + 1"
        " RETURNING last", (actor_id,)).fetchone()[0]
    number = f"INV-2026-{sequence:04d}"
    db.execute(
        "UPDATE invoices SET status = 'issued', number = ?, series_year = 2026, sequence = ?,"
        " seller = ?, issued_at = ?, frozen_sha256 = ?, updated_at = ? WHERE id = ?"
        " AND owner_id = ? AND status = 'draft' AND revision = 1",
        (number, sequence, '{"name": "Bench"}', now, uuid.uuid4().hex, now, invoice_id,
         actor_id))
    db.execute(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, 'issue', ?, ?, ?, ?)",
        (actor_id, request_id, uuid.uuid4().hex, invoice_id, now))
    db.execute(  # what is left to pay, as issuing keeps it for the invoice lists
        "INSERT INTO balances (invoice_id, owner_id, currency, due_date, amount_paid,"
        " amount_credited, amount_due, payment_status, updated_at) VALUES (?, ?, 'EUR',"
        " '2030-01-01', '0.00', '0.00', '71.36', 'unpaid', ?)", (invoice_id, actor_id, now))
    db.execute("COMMIT")
    return number


async def bench_issue(work: Path, rounds: int) -> dict[str, Any]:
    """`issue_ratio` times the transaction where it runs: the studio's `in_transaction(issue)`
    on the writer's thread (what `Database.write` hands that thread) against `raw_issue`.
    `issue_call_ratio` times the whole `await db.write(...)`, the hop to the writer's thread
    and back included; `write_hop_ms` is that hop alone."""
    studio_path, raw_path = work / "issue-studio.db", work / "issue-raw.db"
    actor_id, drafts = seed_drafts(studio_path, rounds, "issue@example.com")
    raw_actor, raw_drafts = seed_drafts(raw_path, rounds, "raw@example.com")
    db = await open_studio_db(studio_path)
    raw = raw_sqlite(raw_path)
    inside: list[float] = []
    call_s, raw_s, hop_s = [], [], []
    try:
        for n, (draft, raw_draft) in enumerate(zip(drafts, raw_drafts, strict=True)):
            started = time.perf_counter()
            await db.on_writer(timed_inside(inside, invoices.issue, actor_id, draft,
                                            f"bench-{n}", 1))
            call_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            raw_issue(raw, raw_actor, raw_draft, f"bench-{n}")
            raw_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            await db.on_writer(lambda connection: None)
            hop_s.append(time.perf_counter() - started)
    finally:
        await db.close()
        raw.close()
    problems = audit_file(studio_path)
    assert problems == [], problems
    median = statistics.median
    baseline = median(raw_s)
    return {"issue_ratio": median(inside) / baseline, "issue_ms": median(inside) * 1000,
            "issue_raw_ms": baseline * 1000, "issue_call_ratio": median(call_s) / baseline,
            "issue_call_ms": median(call_s) * 1000, "write_hop_ms": median(hop_s) * 1000}


def issue_through(processes: list[Any], drafts: list[str], email: str, password: str,
                  clients: int = 16) -> tuple[float, list[str]]:
    """Issue every draft through HTTP, `clients` clients spread over the server processes,
    each draft by its own request id: (seconds taken, the bodies of replies other than 201)."""
    cookies = []
    for process in processes:
        with closing(signed_in(process.url, email, password)) as client:
            cookies.append(client.cookies["studio_session"])
    queue = list(drafts)
    lock = threading.Lock()
    failures: list[str] = []

    def client(n: int) -> None:
        process = processes[n % len(processes)]
        with httpx.Client(base_url=process.url, timeout=60, headers={
                "Accept": "application/json"}, cookies={
                "studio_session": cookies[n % len(processes)]}) as http:
            while True:
                with lock:
                    if not queue:
                        return
                    draft = queue.pop()
                reply = http.post(f"/invoices/{draft}/issue",
                                  json={"request_id": f"http-{draft}", "revision": 1})
                if reply.status_code != 201:
                    failures.append(reply.text)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, failures


def bench_issue_http(work: Path, processes: list[Any], db_path: Path, drafts: list[str],
                     clients: int = 16) -> dict[str, Any]:
    """Issues per second from `clients` clients spread over two server processes."""
    elapsed, failures = issue_through(processes, drafts, "http@example.com", "bench-password",
                                      clients)
    problems = audit_file(db_path)
    sequences = [row[0] for row in sqlite3.connect(db_path).execute(
        "SELECT sequence FROM invoices WHERE sequence IS NOT NULL ORDER BY sequence")]
    gapless = not failures and not problems and sequences == list(range(1, len(drafts) + 1))
    return {"issue_rps_2proc": len(drafts) / elapsed, "issue_2proc_gapless": gapless,
            "issue_2proc_failures": len(failures)}


def seed_http(db_path: Path, count: int) -> list[str]:
    return seed_drafts(db_path, count, "http@example.com", "bench-password")[1]

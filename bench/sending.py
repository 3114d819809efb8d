"""`send_queue_ratio`: queueing an email through the studio's transaction against raw `sqlite3`
doing the same writes (the binding, the share link, the outbox row) after the same read of the
invoice, each on a file of its own seeded alike."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from bench.setup import open_studio_db, raw_sqlite, seed_issued, timed_inside
from studio.mail import outbox

MAIL_FROM = "billing@bench.test"
ASKED = outbox.parse_send({"to": "accounts@customer.test", "subject": "Invoice",
                           "message": "Hello,\n\nthe invoice is attached."})


def raw_queue(db: sqlite3.Connection, actor_id: str, invoice_id: str, request_id: str) -> None:
    """The invoice read, the binding, the share link and the outbox row, in one BEGIN
    IMMEDIATE, with nothing around them."""
    now = time.time()
    send_id, link_id = str(uuid.uuid4()), str(uuid.uuid4())
    db.execute("BEGIN IMMEDIATE")
    db.execute(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, 'send', ?, ?, ?, ?)",
        (actor_id, request_id, uuid.uuid4().hex, send_id, now))
    invoice = db.execute("SELECT frozen_sha256 FROM invoices WHERE id = ? AND owner_id = ?"
                         " AND status = 'issued'", (invoice_id, actor_id)).fetchone()
    token = secrets.token_urlsafe(16)
    db.execute(
        "INSERT INTO share_links (id, owner_id, invoice_id, token_sha256, created_at,"
        " expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        (link_id, actor_id, invoice_id, hashlib.sha256(token.encode()).hexdigest(), now,
         now + 90 * 86400))
    db.execute(
        "INSERT INTO sends (id, owner_id, invoice_id, kind, recipient, cc, subject, message,"
        " document_sha256, message_id, share_link_id, status, next_attempt_at, created_at)"
        " VALUES (?, ?, ?, 'invoice', ?, '', ?, ?, ?, ?, ?, 'queued', ?, ?)",
        (send_id, actor_id, invoice_id, ASKED["to"], ASKED["subject"],
         f"{ASKED['message']}\n\nView the invoice online: http://bench.test/i/{token}",
         invoice[0], f"<send-{send_id}@bench.test>", link_id, now, now))
    db.execute("COMMIT")


async def bench_send_queue(work: Path, rounds: int) -> dict[str, Any]:
    """`send_queue_ratio` times the transaction where it runs, as `issue_ratio` does: the
    studio's `in_transaction(outbox.queue)` on the writer's thread against `raw_queue`,
    alternating, one invoice each. `send_queue_call_ratio` is the whole `await db.write(...)`,
    the hop to the writer's thread and back included."""
    studio_path, raw_path = work / "send-studio.db", work / "send-raw.db"
    actor_id, issued = seed_issued(studio_path, rounds, "send@example.com")
    raw_actor, raw_issued = seed_issued(raw_path, rounds, "raw@example.com")
    db = await open_studio_db(studio_path)
    raw = raw_sqlite(raw_path)
    inside: list[float] = []
    call_s, raw_s = [], []
    try:
        for n, (invoice, raw_invoice) in enumerate(zip(issued, raw_issued, strict=True)):
            started = time.perf_counter()
            _, created = await db.on_writer(timed_inside(
                inside, outbox.queue, actor_id, invoice, "send", f"bench-{n}", ASKED, MAIL_FROM,
                "http://bench.test/"))
            call_s.append(time.perf_counter() - started)
            assert created
            started = time.perf_counter()
            raw_queue(raw, raw_actor, raw_invoice, f"bench-{n}")
            raw_s.append(time.perf_counter() - started)
        await db.write(outbox.queue, actor_id, issued[0], "send", "bench-0", ASKED, MAIL_FROM,
                       "http://bench.test/")
        queued = await db.read(lambda c: c.execute("SELECT COUNT(*) FROM sends").fetchone()[0])
        assert queued == rounds, queued  # a replay queued nothing more
    finally:
        await db.close()
        raw.close()
    median = statistics.median
    baseline = median(raw_s)
    return {"send_queue_ratio": median(inside) / baseline,
            "send_queue_ms": median(inside) * 1000, "send_queue_raw_ms": baseline * 1000,
            "send_queue_call_ratio": median(call_s) / baseline,
            "send_queue_rounds": rounds}

"""`payment_ratio`: recording a payment through the studio's transaction against raw `sqlite3`
doing the same insert and the same balance check, each on a file of its own seeded alike."""

from __future__ import annotations

import datetime as dt
import sqlite3
import statistics
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.setup import open_studio_db, raw_sqlite, seed_issued, timed_inside
from studio.billing import payments

PAYMENT = {"amount": "20.00", "method": "bank_transfer", "reference": "bench"}


def raw_record(db: sqlite3.Connection, actor_id: str, invoice_id: str, request_id: str,
               amount: str, paid_on: str) -> None:
    """The binding, the balance read and checked, the payment, the balance worked out again
    from the invoice's total, credit notes and payments, and kept: in one BEGIN IMMEDIATE,
    with nothing around them."""
    now = time.time()
    payment_id = str(uuid.uuid4())
    db.execute("BEGIN IMMEDIATE")
    db.execute(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, 'payment', ?, ?, ?, ?)",
        (actor_id, request_id, uuid.uuid4().hex, payment_id, now))
    due = Decimal(db.execute("SELECT amount_due FROM balances WHERE invoice_id = ?",
                             (invoice_id,)).fetchone()[0])
    assert Decimal(amount) <= due
    db.execute(
        "INSERT INTO payments (id, owner_id, invoice_id, amount, currency, paid_on, method,"
        " reference, created_at) VALUES (?, ?, ?, ?, 'EUR', ?, 'bank_transfer', 'bench', ?)",
        (payment_id, actor_id, invoice_id, amount, paid_on, now))
    total = Decimal(db.execute("SELECT total FROM invoices WHERE id = ?",
                               (invoice_id,)).fetchone()[0])
    credited = sum((Decimal(row[0]) for row in db.execute(
        "SELECT total FROM invoices WHERE credits = ? AND kind = 'credit_note'"
        " AND status = 'issued'", (invoice_id,))), Decimal(0))
    paid = sum((Decimal(row[0]) for row in db.execute(
        "SELECT amount FROM payments WHERE invoice_id = ? AND voided_at IS NULL",
        (invoice_id,))), Decimal(0))
    db.execute("UPDATE balances SET amount_paid = ?, amount_credited = ?, amount_due = ?,"
               " payment_status = ?, updated_at = ? WHERE invoice_id = ?",
               (str(paid), str(credited), str(total - credited - paid), "partially_paid", now,
                invoice_id))
    db.execute("COMMIT")


async def bench_payment(work: Path, rounds: int) -> dict[str, Any]:
    """`payment_ratio` times the transaction where it runs, as `issue_ratio` does: the
    studio's `in_transaction(record_payment)` on the writer's thread against `raw_record`,
    alternating, one fresh invoice each. `payment_call_ratio` is the whole `await
    db.write(...)`, the hop to the writer's thread and back included."""
    studio_path, raw_path = work / "payment-studio.db", work / "payment-raw.db"
    actor_id, issued = seed_issued(studio_path, rounds, "pay@example.com")
    raw_actor, raw_issued = seed_issued(raw_path, rounds, "raw@example.com")
    db = await open_studio_db(studio_path)
    raw = raw_sqlite(raw_path)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    fields = payments.parse_payment({**PAYMENT, "date": today})
    inside: list[float] = []
    call_s, raw_s = [], []
    try:
        for n, (invoice, raw_invoice) in enumerate(zip(issued, raw_issued, strict=True)):
            started = time.perf_counter()
            _, created = await db.on_writer(timed_inside(
                inside, payments.record_payment, actor_id, invoice, f"bench-{n}", fields))
            call_s.append(time.perf_counter() - started)
            assert created
            started = time.perf_counter()
            raw_record(raw, raw_actor, raw_invoice, f"bench-{n}", PAYMENT["amount"], today)
            raw_s.append(time.perf_counter() - started)
        await db.write(payments.record_payment, actor_id, issued[0], "bench-0", fields)
        paid = await db.read(lambda c: c.execute(
            "SELECT COUNT(*), COUNT(DISTINCT invoice_id) FROM payments").fetchone()[:])
        assert tuple(paid) == (rounds, rounds), paid  # a replay recorded nothing more
    finally:
        await db.close()
        raw.close()
    median = statistics.median
    baseline = median(raw_s)
    return {"payment_ratio": median(inside) / baseline, "payment_ms": median(inside) * 1000,
            "payment_raw_ms": baseline * 1000, "payment_call_ratio": median(call_s) / baseline,
            "payment_call_ms": median(call_s) * 1000, "payment_rounds": rounds}

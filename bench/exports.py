"""`export_mb_100k`: how much the resident memory of `studio serve` grows while it streams the
accountant's CSV of 100,000 issued invoices to a client reading it as it comes."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from bench.setup import seeding, signed_in
from bench.uploads import peak_rss_mb, reset_peak
from studio.accounts.auth import add_actor
from studio.billing import invoices, profiles
from studio.store import postgres
from studio.store.transactions import in_transaction

EMAIL, PASSWORD = "export@example.com", "bench-password"
# Three rates, so every row has its per-rate columns worked out.
LINES = [{"description": "Design work", "quantity": "12", "unit_price": "85.00",
          "tax_rate": "19"},
         {"description": "Printed matter", "quantity": "3", "unit_price": "14.99",
          "tax_rate": "7"},
         {"description": "Courier", "quantity": "1", "unit_price": "9.50", "tax_rate": "0"}]
DRAFT = {"customer": "Kestrel Logistics GmbH", "currency": "EUR", "due_date": "2030-01-31",
         "line_items": LINES}
# Copies are issued over this many days before today, newest last.
DAYS = 365


def seed_issued_many(db_path: Path, count: int) -> None:
    """`seed_issued` into a new SQLite file."""
    db = seeding(db_path)
    try:
        seed_issued(db, count, [row[1] for row in db.execute("PRAGMA table_info(invoices)")])
    finally:
        db.close()


def seed_issued_many_pg(url: str, count: int) -> None:
    """`seed_issued` into a PostgreSQL database the studio's schema is on."""
    db = postgres.connect(url)
    try:
        seed_issued(db, count, [row[0] for row in db.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'invoices' ORDER BY ordinal_position")])
    finally:
        db.close()


def seed_issued(db: Any, count: int, columns: list[str]) -> None:
    """One invoice issued through the studio's own units, then `count - 1` copies of its row
    (new id, number, place in the series, issue time and date) and of its balance row, by
    direct SQL in one transaction. `db` is a SQLite connection or the studio's PostgreSQL one,
    `columns` the invoices table's columns."""

    def template(db: Any) -> str:
        actor_id = add_actor(db, EMAIL, PASSWORD)
        profiles.save(db, actor_id, {"name": "Bench", "address": "1 Bench Row",
                                     "vat_id": "DE136695976"})
        draft, _ = invoices.create_draft(db, actor_id, invoices.parse_draft(DRAFT), None)
        invoices.issue(db, actor_id, draft["id"], "template", 1)
        return draft["id"]

    first = in_transaction(db, template)
    varying = ["id", "number", "sequence", "issued_at", "issue_date", "created_at",
               "updated_at"]
    kept = [c for c in columns if c not in varying]
    copy = (f"INSERT INTO invoices ({', '.join(varying + kept)}) SELECT"
            f" {', '.join(['?'] * len(varying) + kept)} FROM invoices WHERE id = ?")
    year, owner = db.execute("SELECT series_year, owner_id FROM invoices WHERE id = ?",
                             (first,)).fetchone()
    start = time.time() - DAYS * 86_400
    made = []
    for n in range(2, count + 1):
        at = start + (n * DAYS * 86_400) / count
        day = dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat()
        made.append((str(uuid.uuid4()), f"INV-{year}-{n:06d}", n, at, day, at, at, first))

    def copies(db: Any) -> None:
        db.executemany(copy, made)
        db.execute(
            "INSERT INTO balances (invoice_id, owner_id, currency, due_date, amount_paid,"
            " amount_credited, amount_due, payment_status, updated_at)"
            " SELECT invoices.id, invoices.owner_id, currency, due_date, '0.00', '0.00', total,"
            " 'unpaid', issued_at FROM invoices WHERE owner_id = ? AND id != ?", (owner, first))
        db.execute("UPDATE invoice_series SET last = ? WHERE owner_id = ?", (count, owner))

    in_transaction(db, copies)
    db.execute("ANALYZE")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_export(server: Any, count: int) -> dict[str, Any]:
    """`server` is a running `studio serve` on the database `seed_issued_many` made. A first,
    small export loads every module and template the export uses; then the peak is reset and
    the whole range is streamed, read 64 KiB at a time and counted, never kept."""
    pid = server.process.pid
    with closing(signed_in(server.url, EMAIL, PASSWORD, timeout=600)) as client:
        today = dt.datetime.now(dt.UTC).date()
        warm = client.get("/exports/invoices.csv", params={"from": today.isoformat()})
        warm.raise_for_status()
        before = reset_peak(pid)
        started = time.perf_counter()
        lines, size, sampled = 0, 0, before
        with client.stream("GET", "/exports/invoices.csv") as reply:
            reply.raise_for_status()
            first_byte = time.perf_counter() - started
            for chunk in reply.iter_bytes(65_536):
                lines += chunk.count(b"\r\n")
                size += len(chunk)
                sampled = max(sampled, rss_mb(pid))
        elapsed = time.perf_counter() - started
        after = rss_mb(pid)
    peak = max(peak_rss_mb(pid), sampled)
    assert lines == count + 1, (lines, count)  # the header and one row per invoice
    return {"export_mb_100k": peak - before, "export_rss_before_mb": before,
            "export_rss_after_mb": after, "export_rows": lines - 1, "export_bytes": size,
            "export_s": elapsed, "export_first_byte_s": first_byte}

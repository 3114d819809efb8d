"""`studio audit`: the promises of issued invoices, checked against the database itself.

Every series runs 1, 2, 3... with no gap and no repeat and ends at its counter; every issued
invoice still matches its frozen SHA-256; the credit notes of an invoice stay within its total;
each period of a recurring invoice was made once.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

from studio.billing import balances, invoices
from studio.config import Settings
from studio.store.db import read_only_to, refuse_if_newer_database
from studio.store.migrations.legacy import series_place


def problems(db: sqlite3.Connection) -> list[str]:
    """Everything wrong, one sentence each; an empty list means the books are whole."""
    found: list[str] = []
    series: dict[tuple[str, str, int], list[int]] = {}
    for row in db.execute("SELECT owner_id, kind, series_year, sequence FROM invoices"
                          " WHERE sequence IS NOT NULL ORDER BY sequence"):
        series.setdefault((row[0], row[1], row[2]), []).append(row[3])
    # A number given before part two holds its place in the series it reads as part of: a
    # series the studio had numbered in jumped past it, and counts it among its own.
    legacy: dict[tuple[str, str, int], list[int]] = {}
    for owner, number in db.execute("SELECT owner_id, number FROM invoices"
                                    " WHERE status = 'issued' AND sequence IS NULL"):
        place = series_place(number)
        if place is not None:
            legacy.setdefault((owner, place[0], place[1]), []).append(place[2])
    counters = {(row[0], row[1], row[2]): (row[3], row[4]) for row in db.execute(
        "SELECT owner_id, kind, year, last, first FROM invoice_series")}
    for key in sorted(set(series) | set(counters)):
        owner, kind, year = key
        name = f"series {invoices.series_of(kind, year)} of actor {owner}"
        last, first = counters.get(key, (0, 1))
        numbers = sorted(series.get(key, []) + [n for n in legacy.get(key, []) if n >= first])
        if numbers != list(range(first, first + len(numbers))):
            missing = sorted(set(range(first, max(numbers, default=0) + 1)) - set(numbers))
            repeated = sorted({n for n in numbers if numbers.count(n) > 1})
            found.append(f"{name} is not gapless from {first}: missing {missing}, "
                         f"repeated {repeated}")
        if last != first - 1 + len(numbers):
            found.append(f"{name}: the counter says numbers up to {last} were given, "
                         f"{len(numbers)} invoices hold one from {first}")
    for row in db.execute("SELECT * FROM invoices WHERE status = 'issued'").fetchall():
        if row["frozen_sha256"] != invoices.frozen_sha256(db, dict(row)):
            found.append(f"issued {row['number']} ({row['id']}) no longer matches its frozen "
                         "SHA-256")
    for row in db.execute("SELECT id, number, total FROM invoices WHERE kind = 'invoice'"
                          " AND status = 'issued' AND id IN (SELECT credits FROM invoices)"):
        credited = balances.credited_so_far(db, row["id"])
        if credited > Decimal(row["total"]):
            found.append(f"credit notes of {row['number']} come to {credited}, more than its "
                         f"total {row['total']}")
    found += _recurring_problems(db)
    return found


def _recurring_problems(db: sqlite3.Connection) -> list[str]:
    """Each period of a recurring invoice made once: one invoice names it, the one bound."""
    found = []
    for row in db.execute(
            "SELECT recurring_id, period_start, COUNT(*) AS made FROM invoices"
            " WHERE recurring_id IS NOT NULL AND status != 'deleted'"
            " GROUP BY recurring_id, period_start HAVING COUNT(*) > 1"):
        found.append(f"recurring {row[0]} made {row[2]} invoices for its period from {row[1]}")
    for row in db.execute(
            "SELECT recurring_periods.recurring_id, recurring_periods.period_start,"
            " recurring_periods.invoice_id FROM recurring_periods"
            " JOIN invoices ON invoices.id = recurring_periods.invoice_id"
            " WHERE COALESCE(invoices.recurring_id, '') != recurring_periods.recurring_id"
            " OR COALESCE(invoices.period_start, '') != recurring_periods.period_start"):
        found.append(f"recurring {row[0]}'s period from {row[1]} is bound to invoice {row[2]},"
                     " which names another period")
    return found


def audit_database(settings: Settings) -> list[str]:
    """Audit the database the settings name, read-only, as one snapshot. One of a newer
    schema is refused (SchemaTooNew) before it is read: its tables may not mean what this
    studio reads."""
    refuse_if_newer_database(settings)
    db = read_only_to(settings)
    try:
        db.execute("BEGIN")
        return problems(db)
    finally:
        db.close()


def audit_file(path: Path) -> list[str]:
    """Audit a SQLite file, read-only, as one snapshot."""
    return audit_database(Settings(db_path=path))

"""What two migrations compute besides their SQL, frozen as it was when they were written:
the balance of every invoice issued before balances were kept (part three), and the seal of
invoices numbered before part two, whose series then continue after their numbers. Today's
domain code (`studio.billing`) may change; these must not, so they carry their own copy.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from babel.numbers import get_currency_precision

from studio.store.transactions import clock

ARITHMETIC = Context(prec=60, rounding=ROUND_HALF_UP)

# --- balances (migration 10 on SQLite, 2 on PostgreSQL) --------------------------------------


def _amount(amount: Decimal, currency: str) -> str:
    """Half-up to the currency's minor units, as the decimal string the database keeps."""
    unit = Decimal(1).scaleb(-get_currency_precision(currency))
    return str(amount.quantize(unit, rounding=ROUND_HALF_UP, context=ARITHMETIC))


def _sum(db: Any, sql: str, invoice_id: str) -> Decimal:
    return sum((Decimal(row[0]) for row in db.execute(sql, (invoice_id,))), Decimal(0))


def settle_all(db: Any) -> None:
    """Every issued invoice's balance: its total, less its issued credit notes, less the
    payments not voided; never below zero."""
    for invoice in db.execute(
            "SELECT id, owner_id, currency, due_date, total FROM invoices"
            " WHERE kind = 'invoice' AND status = 'issued'").fetchall():
        currency = invoice["currency"]
        credited = _sum(db, "SELECT total FROM invoices WHERE credits = ?"
                            " AND kind = 'credit_note' AND status = 'issued'", invoice["id"])
        paid = _sum(db, "SELECT amount FROM payments WHERE invoice_id = ?"
                        " AND voided_at IS NULL", invoice["id"])
        due = max(Decimal(invoice["total"]) - credited - paid, Decimal(0))
        status = "paid" if due <= 0 else "partially_paid" if paid > 0 else "unpaid"
        db.execute(
            "INSERT INTO balances (invoice_id, owner_id, currency, due_date, amount_paid,"
            " amount_credited, amount_due, payment_status, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (invoice["id"], invoice["owner_id"], currency, invoice["due_date"],
             _amount(paid, currency), _amount(credited, currency), _amount(due, currency),
             status, clock(None)))


# --- invoices numbered before part two (migrations 3 and 8 on SQLite) -----------------------

FROZEN = ("id", "owner_id", "kind", "credits", "number", "customer", "currency", "due_date",
          "line_items", "net", "tax", "total", "seller", "issued_at")
FROZEN_WHEN_SET = ("customer_id", "buyer", "issue_date", "supply_date", "notes")


def _fingerprint(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def sealed_legacy(row: dict[str, Any]) -> dict[str, Any]:
    """An invoice numbered before part two, completed as issued: explicit tax rates of 0,
    no tax, and its content sealed with its frozen hash (it has no attachments: it was made
    before they existed)."""
    lines = [{"description": item.get("description", ""), "quantity": str(item.get("quantity")),
              "unit_price": str(item.get("unit_price")), "tax_rate": str(item.get("tax_rate", 0))}
             for item in json.loads(row["line_items"])]
    fields = {"kind": "invoice", "credits": None, "seller": None, **row,
              "line_items": json.dumps(lines), "net": row["total"],
              "tax": _amount(Decimal(0), row["currency"]), "status": "issued"}
    content = {name: fields[name] for name in FROZEN}
    content["line_items"] = lines
    content["seller"] = json.loads(fields["seller"]) if fields["seller"] else None
    content.update({name: fields[name] for name in FROZEN_WHEN_SET if fields.get(name)})
    if "buyer" in content:
        content["buyer"] = json.loads(content["buyer"])
    content["attachments"] = []
    return {**fields, "frozen_sha256": _fingerprint(content)}


def seal_legacy(db: sqlite3.Connection) -> None:
    """Invoices that exist before part two keep their numbers and count as issued. Where an
    old number reads as one of a studio series (`INV-2026-0007`, `cn-2026-3 `), that series
    continues after it, so no number is ever given twice."""
    for row in db.execute("SELECT * FROM invoices WHERE frozen_sha256 IS NULL"
                          " AND status = 'issued'").fetchall():
        fields = sealed_legacy(dict(row))
        db.execute(
            "UPDATE invoices SET line_items = :line_items, tax = :tax,"
            " frozen_sha256 = :frozen_sha256, created_at = :issued_at WHERE id = :id",
            fields,
        )
    continue_legacy_series(db)


# A number given before part two that reads as one of the studio's series, once case and
# spaces are set aside: `inv-2026-0007 ` is INV-2026-0007. Kept here, not taken from the
# invoices unit, so this migration reads numbers the same way whatever that unit becomes.
LEGACY_SERIES_NUMBER = re.compile(r"(?P<prefix>INV|CN)-(?P<year>[0-9]{4})-(?P<sequence>[0-9]+)")
LEGACY_SERIES_KINDS = {"INV": "invoice", "CN": "credit_note"}


def series_place(number: str) -> tuple[str, int, int] | None:
    """(kind, year, sequence) of a number as its series reads it, None if it reads as none."""
    found = LEGACY_SERIES_NUMBER.fullmatch("".join(number.split()).upper())
    if found is None or int(found["sequence"]) < 1:
        return None
    return LEGACY_SERIES_KINDS[found["prefix"]], int(found["year"]), int(found["sequence"])


def continue_legacy_series(db: sqlite3.Connection) -> None:
    """Every series that a number given before part two reads as part of continues after the
    highest such number, so the studio never gives a number that is already taken."""
    highest: dict[tuple[str, str, int], int] = {}
    for owner_id, number in db.execute(
            "SELECT owner_id, number FROM invoices WHERE status = 'issued'"
            " AND sequence IS NULL").fetchall():
        place = series_place(number)
        if place is not None:
            kind, year, sequence = place
            key = (owner_id, kind, year)
            highest[key] = max(highest.get(key, 0), sequence)
    # A series the studio had already numbered in jumps past the old number; its counter
    # keeps its first number.
    db.executemany(
        "INSERT INTO invoice_series (owner_id, kind, year, last, first) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (owner_id, kind, year) DO UPDATE SET last = excluded.last"
        " WHERE invoice_series.last < excluded.last",
        [(owner, kind, year, last, last + 1) for (owner, kind, year), last in highest.items()],
    )

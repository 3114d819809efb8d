"""What is left to pay on an issued invoice: its total, less its issued credit notes, less the
payments not voided. Kept in one row per invoice (`balances`), settled again from those facts
by every transaction that changes one of them, so lists can filter on it and a payment can
check it with the row locked.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

from studio import money
from studio.db import clock, dialect_of


def _sum(db: sqlite3.Connection, sql: str, invoice_id: str) -> Decimal:
    return sum((Decimal(row[0]) for row in db.execute(sql, (invoice_id,))), Decimal(0))


def standing(total: Decimal, credited: Decimal, paid: Decimal, currency: str) -> dict[str, str]:
    """The balance's fields from its three facts."""
    due = total - credited - paid
    status = "paid" if due <= 0 else "partially_paid" if paid > 0 else "unpaid"
    return {"amount_paid": money.text(paid, currency),
            "amount_credited": money.text(credited, currency),
            "amount_due": money.text(due, currency), "payment_status": status}


def settle(db: sqlite3.Connection, invoice_id: str, now: float | None = None
           ) -> dict[str, Any] | None:
    """Work out an issued invoice's balance again and keep it; None for anything else (a
    draft, a credit note)."""
    invoice = db.execute(
        "SELECT id, owner_id, currency, due_date, total FROM invoices"
        " WHERE id = ? AND kind = 'invoice' AND status = 'issued'", (invoice_id,)).fetchone()
    if invoice is None:
        return None
    credited = _sum(db, "SELECT total FROM invoices WHERE credits = ? AND kind = 'credit_note'"
                        " AND status = 'issued'", invoice_id)
    paid = _sum(db, "SELECT amount FROM payments WHERE invoice_id = ? AND voided_at IS NULL",
                invoice_id)
    fields = standing(Decimal(invoice["total"]), credited, paid, invoice["currency"])
    db.execute(
        "INSERT INTO balances (invoice_id, owner_id, currency, due_date, amount_paid,"
        " amount_credited, amount_due, payment_status, updated_at) VALUES (:invoice_id,"
        " :owner_id, :currency, :due_date, :amount_paid, :amount_credited, :amount_due,"
        " :payment_status, :now) ON CONFLICT (invoice_id) DO UPDATE SET"
        " amount_paid = excluded.amount_paid, amount_credited = excluded.amount_credited,"
        " amount_due = excluded.amount_due, payment_status = excluded.payment_status,"
        " updated_at = excluded.updated_at",
        {**fields, "invoice_id": invoice_id, "owner_id": invoice["owner_id"],
         "currency": invoice["currency"], "due_date": invoice["due_date"], "now": clock(now)},
    )
    return fields


def locked(db: sqlite3.Connection, invoice_id: str) -> sqlite3.Row | None:
    """The invoice's balance row, locked until the transaction ends: payments racing for
    the same invoice check it one after another."""
    return db.execute(
        f"SELECT * FROM balances WHERE invoice_id = ? {dialect_of(db).for_update}",
        (invoice_id,)).fetchone()


def settle_all(db: sqlite3.Connection) -> None:
    """Every issued invoice's balance (the migration that brings balances in)."""
    for row in db.execute("SELECT id FROM invoices WHERE kind = 'invoice'"
                          " AND status = 'issued'").fetchall():
        settle(db, row["id"])

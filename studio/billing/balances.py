"""What is left to pay on an issued invoice: its total, less its issued credit notes, less the
payments not voided. Kept in one row per invoice (`balances`), settled again from those facts
by every transaction that changes one of them, so lists can filter on it and a payment can
check it with the row locked.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal
from typing import Any

from studio.billing import money
from studio.store.dialect import dialect_of
from studio.store.transactions import clock


def _sum(db: sqlite3.Connection, sql: str, invoice_id: str) -> Decimal:
    return sum((Decimal(row[0]) for row in db.execute(sql, (invoice_id,))), Decimal(0))


def credited_so_far(db: sqlite3.Connection, invoice_id: str) -> Decimal:
    """The total of the invoice's issued credit notes."""
    return _sum(db, "SELECT total FROM invoices WHERE credits = ? AND kind = 'credit_note'"
                    " AND status = 'issued'", invoice_id)


def standing(total: Decimal, credited: Decimal, paid: Decimal, currency: str) -> dict[str, str]:
    """The balance's fields from its three facts. What is due never goes below zero: a credit
    note issued after the invoice was paid is money the seller owes back, not a payment the
    customer can be asked for, and the studio does not record refunds."""
    due = max(total - credited - paid, Decimal(0))
    status = "paid" if due <= 0 else "partially_paid" if paid > 0 else "unpaid"
    return {"amount_paid": money.text(paid, currency),
            "amount_credited": money.text(credited, currency),
            "amount_due": money.text(due, currency), "payment_status": status}


def worked_out(db: sqlite3.Connection, invoice: Any) -> dict[str, str]:
    """An issued invoice's balance from its facts, as `settle` keeps it."""
    credited = credited_so_far(db, invoice["id"])
    paid = _sum(db, "SELECT amount FROM payments WHERE invoice_id = ? AND voided_at IS NULL",
                invoice["id"])
    return standing(Decimal(invoice["total"]), credited, paid, invoice["currency"])


def settle(db: sqlite3.Connection, invoice_id: str, now: float | None = None
           ) -> dict[str, Any] | None:
    """Work out an issued invoice's balance again and keep it; None for anything else (a
    draft, a credit note)."""
    invoice = db.execute(
        "SELECT id, owner_id, currency, due_date, total FROM invoices"
        " WHERE id = ? AND kind = 'invoice' AND status = 'issued'", (invoice_id,)).fetchone()
    if invoice is None:
        return None
    return _keep(db, invoice, worked_out(db, invoice), now)


def open_balance(db: sqlite3.Connection, invoice: Any, now: float | None = None
                 ) -> dict[str, str]:
    """The balance of an invoice issued in this transaction: its whole total. A draft has no
    payments and no credit notes (both need an issued invoice), so there is nothing to add
    up."""
    return _keep(db, invoice, standing(Decimal(invoice["total"]), Decimal(0), Decimal(0),
                                       invoice["currency"]), now)


def _keep(db: sqlite3.Connection, invoice: Any, fields: dict[str, str], now: float | None
          ) -> dict[str, str]:
    db.execute(
        "INSERT INTO balances (invoice_id, owner_id, currency, due_date, amount_paid,"
        " amount_credited, amount_due, payment_status, updated_at) VALUES (:invoice_id,"
        " :owner_id, :currency, :due_date, :amount_paid, :amount_credited, :amount_due,"
        " :payment_status, :now) ON CONFLICT (invoice_id) DO UPDATE SET"
        " amount_paid = excluded.amount_paid, amount_credited = excluded.amount_credited,"
        " amount_due = excluded.amount_due, payment_status = excluded.payment_status,"
        " updated_at = excluded.updated_at",
        {**fields, "invoice_id": invoice["id"], "owner_id": invoice["owner_id"],
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


# --- what an invoice shows -------------------------------------------------------------------

NO_STANDING = {"amount_paid": None, "amount_due": None, "payment_status": None, "overdue": None}


def today(now: float | None = None) -> dt.date:
    """Today's date (UTC) by the transaction's clock: the database's on PostgreSQL."""
    return dt.datetime.fromtimestamp(clock(now), dt.UTC).date()


def is_overdue(payment_status: str, due_date: str, now: float | None = None) -> bool:
    """Not paid, and its due date is before today."""
    return payment_status != "paid" and due_date < today(now).isoformat()


def standing_of(db: sqlite3.Connection, invoice: Any, now: float | None = None
                ) -> dict[str, Any]:
    """`amount_paid`, `amount_due`, `payment_status` and `overdue` of an issued invoice, from
    its kept balance; None each for a draft or a credit note, which are not paid."""
    if invoice["status"] != "issued" or invoice["kind"] != "invoice":
        return dict(NO_STANDING)
    kept = db.execute("SELECT amount_paid, amount_due, payment_status FROM balances"
                      " WHERE invoice_id = ?", (invoice["id"],)).fetchone()
    # An invoice issued before its balance was first kept is worked out from its facts.
    fields = dict(kept) if kept is not None else worked_out(db, invoice)
    return {"amount_paid": fields["amount_paid"], "amount_due": fields["amount_due"],
            "payment_status": fields["payment_status"],
            "overdue": is_overdue(fields["payment_status"], invoice["due_date"], now)}

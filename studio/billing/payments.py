"""Payments on issued invoices: recorded once per request id, voided, never deleted.

    recorded --(void)--> voided          the row stays; the database refuses to delete it

A payment is checked against what is left to pay inside the transaction that inserts it,
with the invoice's balance row locked (`balances.locked`), so racing payments take turns
and `amount_due` never goes below zero. Every record and void settles the balance again.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from studio import logs
from studio.accounts.auth import Actor
from studio.billing import balances, identifiers, invoices, money
from studio.errors import N_, FieldChecks, Refusal
from studio.i18n import gettext
from studio.store import bindings
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.transactions import clock, timestamp

METHODS = {"bank_transfer": N_("Bank transfer"), "card": N_("Card"), "cash": N_("Cash"),
           "other": N_("Other")}
MAX_REFERENCE = 200
# The earliest date a payment may carry; later than today (plus a day for time zones ahead
# of the studio's) is a typing slip.
EARLIEST = dt.date(2000, 1, 1)
AHEAD = dt.timedelta(days=1)
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


# --- input -----------------------------------------------------------------------------------


def _amount(value: object) -> Decimal:
    raw = money.as_written(value)
    if not money.AMOUNT.fullmatch(raw) or Decimal(raw) <= 0:
        raise Refusal("invalid_body", gettext(
            "The amount must be a number above 0, like 120.50, with at most 12 digits before the"
            " point."))
    return Decimal(raw)


def _date(value: object) -> str:
    try:
        if not isinstance(value, str) or not DATE.fullmatch(value.strip()):
            raise ValueError(value)
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise Refusal("invalid_body", gettext(
            "The payment date must be a date like 2026-03-31.")) from None


def parse_payment(body: dict[str, Any]) -> dict[str, str]:
    """A payment's fields, checked and normalised: `amount` (exact decimal text), `date`,
    `method` and `reference`. The amount's decimals are judged against the invoice's
    currency when it is recorded."""
    checks = FieldChecks()  # every field refused at once, each by its name
    amount = checks.check("amount", _amount, body.get("amount"))
    paid_on = checks.check("date", _date, body.get("date"))
    method = checks.check("method", _method, body.get("method"))
    reference = checks.check("reference", identifiers.text, body.get("reference"), N_("reference"),
                             MAX_REFERENCE)
    checks.done()
    assert amount is not None
    # 50, 50.0 and 50.00 are one amount: a resend that spells it another way is the same.
    return {"amount": format(money.compact(amount), "f"), "date": paid_on,
            "method": method, "reference": reference}


def _method(method: object) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise Refusal("invalid_body", gettext(
            "The method must be one of bank_transfer, card, cash or other."))
    return method


# --- reading ---------------------------------------------------------------------------------


def as_json(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "invoice_id": row["invoice_id"], "amount": row["amount"],
            "currency": row["currency"], "date": row["paid_on"], "method": row["method"],
            "reference": row["reference"], "created_at": timestamp(row["created_at"]),
            "voided_at": timestamp(row["voided_at"]),
            "status": "voided" if row["voided_at"] is not None else "recorded"}


def _payment(db: sqlite3.Connection, payment_id: str) -> dict[str, Any]:
    return as_json(db.execute("SELECT * FROM payments WHERE id = ?", (payment_id,)).fetchone())


def _owned(db: sqlite3.Connection, actor_id: str, payment_id: str) -> Any:
    row = db.execute("SELECT * FROM payments WHERE id = ? AND owner_id = ?",
                     (payment_id, actor_id)).fetchone()
    if row is None:
        raise Refusal("payment_not_found")
    return row


def _listed(db: sqlite3.Connection, invoice_id: str) -> list[dict[str, Any]]:
    return [as_json(row) for row in db.execute(
        "SELECT * FROM payments WHERE invoice_id = ? ORDER BY paid_on, created_at, id",
        (invoice_id,))]


def _payable(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> Any:
    """The actor's issued invoice (not a credit note); refused otherwise."""
    invoice = invoices.owned(db, actor_id, invoice_id)
    if invoice["status"] != "issued":
        raise Refusal("invoice_not_issued", gettext(
            "This invoice is still a draft; issue it before recording a payment."))
    if invoice["kind"] != "invoice":
        raise Refusal("credit_note_not_payable")
    return invoice


# --- writing ---------------------------------------------------------------------------------


def _nothing_left(invoice: Any, balance: Any) -> str:
    """Why no payment can be recorded on an invoice with nothing due, in a person's words."""
    if Decimal(invoice["total"]) == 0:
        return gettext("This invoice is for no amount; there is nothing to pay.")
    if Decimal(balance["amount_credited"]) > 0:
        return gettext("This invoice is paid or credited in full; there is nothing left to pay.")
    return gettext("This invoice is paid in full; there is nothing left to pay.")


def record_payment(db: sqlite3.Connection, actor_id: str, invoice_id: str, request_id: str,
                   fields: dict[str, str], now: float | None = None
                   ) -> tuple[dict[str, Any], bool]:
    """Record a payment once per request id, in the caller's one transaction: the binding,
    the invoice payable, the amount within what is due with the balance row locked, the
    payment, the balance settled. Returns (payment, created); the same id with other input
    is refused, and `amount_due` never goes below zero, whatever payments race."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    payment: dict[str, Any] = {}

    def make(payment_id: str) -> None:
        invoice = _payable(db, actor_id, invoice_id)
        balance = balances.locked(db, invoice_id)
        if balance is None:  # issued before balances were kept: keep it now, then lock it
            balances.settle(db, invoice_id, now)
            balance = balances.locked(db, invoice_id)
        due = Decimal(balance["amount_due"])
        if due <= 0:  # no amount could be recorded: say why, not "at most 0.00"
            raise Refusal("nothing_due", _nothing_left(invoice, balance))
        currency = invoice["currency"]
        amount = Decimal(fields["amount"])
        if money.rounded(amount, currency) != amount:
            places = money.minor_units(currency)
            said = (gettext("%(currency)s amounts have at most %(places)s decimal places.")
                    if places else gettext("%(currency)s amounts are whole numbers.")) % {
                "currency": currency, "places": places}
            raise Refusal("invalid_body", said, fields={"amount": said})
        paid_on = dt.date.fromisoformat(fields["date"])
        if not EARLIEST <= paid_on <= balances.today(now) + AHEAD:
            said = gettext("The payment date must be between 2000-01-01 and today.")
            raise Refusal("invalid_body", said, fields={"date": said})
        if amount > due:
            said = gettext("At most %(currency)s %(due)s is left to pay on this invoice; record"
                           " that amount or less.") % {"currency": currency,
                                                       "due": money.text(due, currency)}
            raise Refusal("payment_exceeds_balance", said, fields={"amount": said})
        row = {"id": payment_id, "owner_id": actor_id, "invoice_id": invoice_id,
               "amount": money.text(amount, currency), "currency": currency,
               "paid_on": fields["date"], "method": fields["method"],
               "reference": fields["reference"], "created_at": now, "voided_at": None}
        db.execute(
            "INSERT INTO payments (id, owner_id, invoice_id, amount, currency, paid_on, method,"
            " reference, created_at) VALUES (:id, :owner_id, :invoice_id, :amount, :currency,"
            " :paid_on, :method, :reference, :created_at)", row)
        balances.settle(db, invoice_id, now)
        logs.state_change("payment", payment_id, actor_id, None, "recorded", "recorded",
                          invoice_id=invoice_id)
        payment.update(as_json(row))

    print_ = bindings.fingerprint({"invoice_id": invoice_id, **fields})
    payment_id, created = bindings.once(db, actor_id, "payment", request_id, print_, make, now)
    return (payment if created else _payment(db, payment_id)), created


def void_payment(db: sqlite3.Connection, actor_id: str, payment_id: str,
                 now: float | None = None) -> dict[str, Any]:
    """Void a payment: it stays, marked voided, and no longer counts. Voiding it again
    answers the same voided payment."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = _owned(db, actor_id, payment_id)
    if row["voided_at"] is None:
        balances.locked(db, row["invoice_id"])
        db.execute("UPDATE payments SET voided_at = ? WHERE id = ? AND voided_at IS NULL",
                   (now, payment_id))
        balances.settle(db, row["invoice_id"], now)
        logs.state_change("payment", payment_id, actor_id, "recorded", "voided", "voided",
                          invoice_id=row["invoice_id"])
    return _payment(db, payment_id)


# --- the invoice page ------------------------------------------------------------------------


def _date_of(timestamp_: float) -> str:
    return dt.datetime.fromtimestamp(timestamp_, dt.UTC).date().isoformat()


def account(db: sqlite3.Connection, invoice: Mapping[str, Any]) -> dict[str, Any] | None:
    """What was paid and credited on an issued invoice, in date order, with the balance after
    each; voided payments listed but not counted. `invoice` is the invoice as its page reads
    it (`invoices.as_json`), its standing included. None for a draft or a credit note."""
    if invoice["status"] != "issued" or invoice["kind"] != "invoice":
        return None
    invoice_id, currency, now = invoice["id"], invoice["currency"], clock(None)
    entries: list[dict[str, Any]] = []
    for payment in _listed(db, invoice_id):
        entries.append({"kind": "payment", "date": payment["date"], "at": payment["created_at"],
                        "amount": payment["amount"], "payment": payment,
                        "method": gettext(METHODS[payment["method"]]),
                        "voided": payment["status"] == "voided"})
    for note in db.execute(
            "SELECT id, number, total, issue_date, issued_at FROM invoices WHERE credits = ?"
            " AND kind = 'credit_note' AND status = 'issued'", (invoice_id,)):
        entries.append({"kind": "credit_note", "date": note["issue_date"]
                        or _date_of(note["issued_at"]), "at": timestamp(note["issued_at"]),
                        "amount": note["total"], "number": note["number"], "id": note["id"],
                        "voided": False})
    entries.sort(key=lambda entry: (entry["date"], entry["at"] or ""))
    left = Decimal(invoice["total"])
    for entry in entries:
        if not entry["voided"]:
            left -= Decimal(entry["amount"])
        entry["balance"] = money.text(left, currency)
    standing = {name: invoice[name] for name in balances.NO_STANDING}
    due = Decimal(standing["amount_due"])
    return {"invoice_id": invoice_id, "currency": currency, "total": invoice["total"],
            "entries": entries, **standing,
            "owing": due > 0, "suggested": money.text(max(due, Decimal(0)), currency),
            "today": balances.today(now).isoformat()}


# --- what handlers call ----------------------------------------------------------------------


async def list_payments(db: Database, actor: Actor, invoice_id: str) -> list[dict[str, Any]]:
    """The payments of the actor's invoice, voided ones too, in date order."""
    def unit(db: sqlite3.Connection) -> list[dict[str, Any]]:
        invoices.owned(db, actor.id, invoice_id)
        return _listed(db, invoice_id)

    return await db.read(unit)

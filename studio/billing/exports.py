"""The accountant's export: issued invoices and payments over a date range, as CSV.

Streamed in constant memory: rows are read in keyset pages of PAGE rows, each page one short
read of its own (`Database.read`), so no transaction stays open while a slow client reads,
and no more than one page is ever held.

The invoice export has a column pair per tax rate ("net 19%", "tax 19%"), for every rate the
range holds. So it reads the range twice: a first pass collects the rates and the last row,
then the rows follow, up to that last row. Rows are in the order they were issued (issue
time, then number): an invoice issued while the export runs comes after the last row the
first pass saw, so it is left out of both passes rather than arriving without its columns.

Every text cell that a spreadsheet would read as a formula (it begins with `=`, `+`, `-`,
`@`, a tab or a carriage return) gets a leading apostrophe; the amounts the studio writes
itself, such as a credit note's -12.50, stay numbers.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from studio.accounts.auth import Actor
from studio.billing import balances, invoices, money
from studio.errors import N_, Refusal
from studio.i18n import gettext
from studio.store.db import Database

PAGE = 500
BOM = "\ufeff"  # so spreadsheets read the file as UTF-8 and show accents as written
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
INVOICE_COLUMNS = ("number", "kind", "issue_date", "supply_date", "due_date", "customer",
                   "customer_vat_id", "customer_country", "currency", "net", "tax", "total",
                   "amount_paid", "amount_due", "payment_status")
PAYMENT_COLUMNS = ("date", "invoice_number", "customer", "currency", "amount", "method",
                   "reference", "voided")
# An issue date is the day of issuing where the seller is: within a day of the issue time in
# UTC. The range of issue times read is widened by that much, then each row is judged by its
# issue date.
DAY_S = 86_400.0
EARLIEST = dt.date.min
LATEST = dt.date.max


# --- the range -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DateRange:
    """`from` and `to`, both inclusive, either open."""

    start: dt.date | None
    end: dt.date | None

    @property
    def first(self) -> str:
        return (self.start or EARLIEST).isoformat()

    @property
    def last(self) -> str:
        return (self.end or LATEST).isoformat()

    def times(self) -> dict[str, float]:
        """The range as issue times (UTC), exact and widened by a day each side."""
        start_at = _midnight(self.start or EARLIEST)
        # The end of the last day counted in seconds, not as the next day: after 9999-12-31
        # there is no date.
        end_at = _midnight(self.end or LATEST) + DAY_S
        return {"start_at": start_at, "end_at": end_at, "lo": start_at - DAY_S,
                "hi": end_at + DAY_S}

    def filename(self, what: str) -> str:
        if self.start and self.end:
            return f"{what}-{self.start}-to-{self.end}.csv"
        if self.start:
            return f"{what}-from-{self.start}.csv"
        if self.end:
            return f"{what}-to-{self.end}.csv"
        return f"{what}-all.csv"


def _midnight(day: dt.date) -> float:
    return dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()


# What a date of the range that is no date says, by which it is.
NOT_A_DATE = {"from": N_("The from date must be a date like 2026-12-31."),
              "to": N_("The to date must be a date like 2026-12-31.")}


def _date(value: str | None, which: str) -> dt.date | None:
    if value is None or not value.strip():
        return None  # a form sends an empty field for a date left blank
    value = value.strip()
    try:
        if not (len(value) == 10 and value.isascii()):
            raise ValueError(value)
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise Refusal("invalid_date", gettext(NOT_A_DATE[which])) from None
    return day


def parse_range(query: Mapping[str, str]) -> DateRange:
    """`?from=&to=`: dates like 2026-12-31, both optional; the first not after the last."""
    found = DateRange(_date(query.get("from"), "from"), _date(query.get("to"), "to"))
    if found.start and found.end and found.start > found.end:
        raise Refusal("invalid_date", gettext(
            "The from date (%(start)s) is after the to date (%(end)s); swap them.") % {
                "start": found.start, "end": found.end})
    return found


# --- cells -----------------------------------------------------------------------------------


def inert(text: object) -> str:
    """A text cell no spreadsheet runs as a formula."""
    cell = "" if text is None else str(text)
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def negated(amount: str) -> str:
    """A stored amount below zero (a credit note's), never `-0.00`."""
    value = Decimal(amount)
    return amount if value == 0 else str(-value)


def rate_label(rate: Decimal) -> str:
    return format(rate.normalize(), "f")


def _csv(rows: Iterable[Iterable[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


# --- invoices --------------------------------------------------------------------------------


_RANGE = (
    " FROM invoices LEFT JOIN balances ON balances.invoice_id = invoices.id"
    " WHERE invoices.owner_id = :owner AND invoices.status = 'issued'"
    " AND invoices.issued_at >= :lo AND invoices.issued_at < :hi"
    " AND ((invoices.issue_date >= :first AND invoices.issue_date <= :last)"
    " OR (invoices.issue_date IS NULL AND invoices.issued_at >= :start_at"
    " AND invoices.issued_at < :end_at))"
    " AND (invoices.issued_at, invoices.number) > (:at, :key)")
RATES_PAGE = ("SELECT invoices.issued_at, invoices.number, invoices.line_items" + _RANGE
              + " ORDER BY invoices.issued_at, invoices.number LIMIT :limit")
ROWS_PAGE = (
    "SELECT invoices.id, invoices.issued_at, invoices.number, invoices.kind, invoices.issue_date,"
    " invoices.supply_date, invoices.due_date, invoices.customer, invoices.buyer,"
    " invoices.currency, invoices.net, invoices.tax, invoices.total, invoices.line_items,"
    " balances.amount_paid, balances.amount_due, balances.payment_status" + _RANGE
    + " AND (invoices.issued_at, invoices.number) <= (:last_at, :last_key)"
    " ORDER BY invoices.issued_at, invoices.number LIMIT :limit")


def _asked(actor_id: str, dates: DateRange, after: tuple[float, str] | None,
           **more: Any) -> dict[str, Any]:
    times = dates.times()
    at, key = after if after is not None else (times["lo"] - 1.0, "")
    return {"owner": actor_id, "first": dates.first, "last": dates.last, **times,
            "at": at, "key": key, "limit": PAGE, **more}


def rates_of(line_items: str) -> set[Decimal]:
    """The tax rates an invoice's stored lines name: the rates of its tax breakdown (lines
    that do not read are left out of both)."""
    lines = (money.stored_line(line) for line in json.loads(line_items))
    return {line.tax_rate for line in lines if line is not None}


def _rates_page(db: sqlite3.Connection, actor_id: str, dates: DateRange,
                after: tuple[float, str] | None) -> tuple[set[Decimal], tuple[float, str] | None,
                                                          bool]:
    """One page of the first pass: (the rates it holds, its last row's key, more to come)."""
    found = db.execute(RATES_PAGE, _asked(actor_id, dates, after)).fetchall()
    rates: set[Decimal] = set()
    for row in found:
        rates |= rates_of(row["line_items"])
    last = (found[-1]["issued_at"], found[-1]["number"]) if found else after
    return rates, last, len(found) == PAGE


@dataclass(frozen=True)
class InvoicePlan:
    """What the first pass found: the rates, in order, and the last row to export."""

    rates: tuple[Decimal, ...]
    last: tuple[float, str] | None  # None: nothing in the range

    def header(self) -> list[str]:
        pairs = [(f"net {rate_label(r)}%", f"tax {rate_label(r)}%") for r in self.rates]
        return [*INVOICE_COLUMNS, *(name for pair in pairs for name in pair)]


async def plan_invoices(db: Database, actor: Actor, dates: DateRange) -> InvoicePlan:
    rates: set[Decimal] = set()
    last, more = None, True
    while more:
        found, last, more = await db.read(_rates_page, actor.id, dates, last)
        rates |= found
    return InvoicePlan(tuple(sorted(rates)), last)


def _buyer(row: Mapping[str, Any]) -> dict[str, Any]:
    """The buyer frozen at issue; an invoice issued before buyers were kept has its name."""
    buyer = json.loads(row["buyer"]) if row["buyer"] else None
    if not isinstance(buyer, dict):
        return {"name": row["customer"]}
    return {**buyer, "name": buyer.get("name") or row["customer"]}


def _issue_date(row: Mapping[str, Any]) -> str:
    if row["issue_date"]:
        return row["issue_date"]
    return dt.datetime.fromtimestamp(row["issued_at"], dt.UTC).date().isoformat()


def invoice_cells(row: Mapping[str, Any], rates: tuple[Decimal, ...]) -> list[str]:
    """One row of the invoice export: text cells made inert, amounts as numbers, a credit
    note's below zero."""
    credit = row["kind"] == "credit_note"
    sign = negated if credit else str
    buyer = _buyer(row)
    by_rate = {Decimal(part["rate"]): part for part in
               invoices.tax_breakdown(json.loads(row["line_items"]), row["currency"])}
    per_rate: list[str] = []
    for rate in rates:
        part = by_rate.get(rate)
        per_rate += ["", ""] if part is None else [sign(part["net"]), sign(part["tax"])]
    text = [row["number"], row["kind"], _issue_date(row), row["supply_date"],
            "" if credit else row["due_date"], buyer["name"], buyer.get("vat_id", ""),
            buyer.get("country", "")]
    balance = ["", "", ""] if credit or row["amount_due"] is None else [
        row["amount_paid"], row["amount_due"], inert(row["payment_status"])]
    return [*map(inert, text), inert(row["currency"]), sign(row["net"]), sign(row["tax"]),
            sign(row["total"]), *balance, *per_rate]


def _with_balance(db: sqlite3.Connection, row: Any) -> Mapping[str, Any]:
    """The row with its balance: kept, or for an invoice issued before balances were kept,
    worked out from its facts."""
    if row["kind"] != "invoice" or row["amount_due"] is not None:
        return row
    return {**dict(row), **balances.worked_out(db, row)}


def _invoice_page(db: sqlite3.Connection, actor_id: str, dates: DateRange, plan: InvoicePlan,
                  after: tuple[float, str] | None) -> tuple[str, tuple[float, str] | None, bool]:
    """One page of the export as CSV text, its last row's key, and whether more may follow."""
    assert plan.last is not None
    found = db.execute(ROWS_PAGE, _asked(actor_id, dates, after, last_at=plan.last[0],
                                         last_key=plan.last[1])).fetchall()
    text = _csv(invoice_cells(_with_balance(db, row), plan.rates) for row in found)
    last = (found[-1]["issued_at"], found[-1]["number"]) if found else after
    return text, last, len(found) == PAGE


async def invoice_csv(db: Database, actor: Actor, dates: DateRange, plan: InvoicePlan
                      ) -> AsyncIterator[bytes]:
    """The invoice export, a page at a time; the first chunk is the header and first page."""
    text = BOM + _csv([plan.header()])
    after, more = None, plan.last is not None
    while more:
        page, after, more = await db.read(_invoice_page, actor.id, dates, plan, after)
        if text + page:
            yield (text + page).encode()
        text = ""
    if text:
        yield text.encode()


# --- payments --------------------------------------------------------------------------------


PAYMENTS_PAGE = (
    "SELECT payments.id, payments.paid_on, payments.amount, payments.currency,"
    " payments.method, payments.reference, payments.voided_at, invoices.number,"
    " invoices.customer, invoices.buyer"
    " FROM payments JOIN invoices ON invoices.id = payments.invoice_id"
    " WHERE payments.owner_id = :owner AND payments.paid_on >= :first"
    " AND payments.paid_on <= :last AND (payments.paid_on, payments.id) > (:on, :key)"
    " ORDER BY payments.paid_on, payments.id LIMIT :limit")


def payment_cells(row: Mapping[str, Any]) -> list[str]:
    text = [row["paid_on"], row["number"], _buyer(row)["name"], row["currency"]]
    return [*map(inert, text), row["amount"], inert(row["method"]), inert(row["reference"]),
            "yes" if row["voided_at"] is not None else "no"]


def _payment_page(db: sqlite3.Connection, actor_id: str, dates: DateRange,
                  after: tuple[str, str] | None) -> tuple[str, tuple[str, str] | None, bool]:
    on, key = after or ("", "")
    found = db.execute(PAYMENTS_PAGE, {"owner": actor_id, "first": dates.first,
                                       "last": dates.last, "on": on, "key": key,
                                       "limit": PAGE}).fetchall()
    last = (found[-1]["paid_on"], found[-1]["id"]) if found else after
    return _csv(payment_cells(row) for row in found), last, len(found) == PAGE


async def payment_csv(db: Database, actor: Actor, dates: DateRange) -> AsyncIterator[bytes]:
    """The payment export (voided ones too, marked), in the order the money arrived; the
    first chunk is the header and the first page."""
    text = BOM + _csv([PAYMENT_COLUMNS])
    after, more = None, True
    while more:
        page, after, more = await db.read(_payment_page, actor.id, dates, after)
        if text + page:
            yield (text + page).encode()
        text = ""

"""Finding invoices: the list filtered by status, customer, text and issue dates, with what
each has paid and is due, and what is outstanding and overdue per currency.

The unfiltered list stays on its own fast path (`invoices.list_invoices`). A filtered page
is keyset-paged the same way, with the same cursor, so `Link: next` keeps the filters:
drafts newest first, then issued invoices newest first. Payment filters read the kept
balances (`balances_open`), issue dates their own index (`invoices_issue_date`).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from studio.accounts.auth import Actor
from studio.billing import balances, customers, invoices, money
from studio.errors import N_, Refusal
from studio.i18n import gettext
from studio.store import paging
from studio.store.db import Database
from studio.store.dialect import anywhere, dialect_of
from studio.store.transactions import clock

STATUSES = ("draft", "issued", "unpaid", "paid", "overdue")
DAY_S = 86_400
# What each payment filter asks of the kept balance.
OWING = "b.payment_status IN ('unpaid', 'partially_paid')"
BALANCE_FILTERS = {"unpaid": OWING, "paid": "b.payment_status = 'paid'",
                   "overdue": f"{OWING} AND b.due_date < :today"}
OWED = ("unpaid", "overdue")
COLUMNS = ", ".join(f"i.{name}" for name in invoices.LISTED)


@dataclass(frozen=True)
class Filters:
    status: str | None = None
    customer_id: str | None = None
    text: str | None = None
    since: str | None = None  # issue dates, inclusive
    until: str | None = None

    def any(self) -> bool:
        return any((self.status, self.customer_id, self.text, self.since, self.until))


def filters_of(query: Mapping[str, str]) -> Filters:
    """`?status=&customer_id=&q=&from=&to=` checked; a field left empty is no filter."""
    given = {name: (query.get(name) or "").strip() for name in
             ("status", "customer_id", "from", "to")}
    status = given["status"] or None
    if status is not None and status not in STATUSES:
        raise Refusal("invalid_body", gettext(
            "Show invoices that are draft, issued, unpaid, paid or overdue."))
    customer_id = given["customer_id"] or None
    if customer_id is not None:
        try:
            customer_id = str(uuid.UUID(customer_id[:64]))
        except ValueError:
            raise Refusal("invalid_body", gettext(
                "That customer is not one of yours; choose one from the list.")) from None
    text = customers.parse_query(query.get("q")) or None
    since = invoices.parse_date(given["from"], N_("from date")) if given["from"] else None
    until = invoices.parse_date(given["to"], N_("to date")) if given["to"] else None
    if since and until and since > until:
        raise Refusal("invalid_body", gettext("The from date must not be after the to date."))
    return Filters(status, customer_id, text, since, until)


def first_page_url(path: str, query: Mapping[str, str]) -> str:
    """The first page of the same filtered list."""
    kept = {name: value for name, value in query.items() if name != "after"}
    return f"{path}?{urlencode(kept)}" if kept else path


# --- the filtered list -----------------------------------------------------------------------


def _conditions(db: Any, filters: Filters, asked: dict[str, Any]) -> list[str]:
    """What every part of the list asks besides its own status."""
    found = []
    if filters.customer_id:
        found.append("i.customer_id = :customer_id")
        asked["customer_id"] = filters.customer_id
    if filters.text:
        found.append(customers.holding(db, "i.customer", "COALESCE(i.number, '')"))
        asked["text"] = anywhere(filters.text)
    # An invoice issued before issue dates were kept is judged by the day it was issued.
    if filters.since:
        found.append("(i.issue_date >= :since OR (i.issue_date IS NULL"
                     " AND i.issued_at >= :since_at))")
        asked.update(since=filters.since, since_at=_epoch(filters.since))
    if filters.until:
        found.append("(i.issue_date <= :until OR (i.issue_date IS NULL"
                     " AND i.issued_at < :until_at))")
        asked.update(until=filters.until, until_at=_epoch(filters.until) + DAY_S)
    return found


def _epoch(day: str) -> float:
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC).timestamp()


def _drafts(db: Any, filters: Filters, asked: dict[str, Any], after: bool) -> list[Any]:
    where = ["i.owner_id = :owner", "i.status = 'draft'", *_conditions(db, filters, asked)]
    if after:
        where.append("(i.created_at, i.id) < (:at, :key)")
    return db.execute(
        f"SELECT {COLUMNS}, i.created_at FROM invoices i WHERE {' AND '.join(where)}"
        " ORDER BY i.created_at DESC, i.id DESC LIMIT :limit", asked).fetchall()


def _issued(db: Any, filters: Filters, asked: dict[str, Any], after: bool) -> list[Any]:
    where = ["i.owner_id = :owner", "i.status = 'issued'", *_conditions(db, filters, asked)]
    source = "invoices i"
    if filters.status in BALANCE_FILTERS:
        # Few invoices still owe, most are paid: those that owe are read from balances_open
        # first (SQLite's CROSS JOIN keeps that order), the paid ones along the list's index.
        join = dialect_of(db).join_in_order if filters.status in OWED else "JOIN"
        source = f"balances b {join} invoices i ON i.id = b.invoice_id"
        where += ["b.owner_id = :owner", BALANCE_FILTERS[filters.status]]
    if after:
        where.append("(i.issued_at, i.number) < (:at, :key)")
    return db.execute(
        f"SELECT {COLUMNS} FROM {source} WHERE {' AND '.join(where)}"
        " ORDER BY i.issued_at DESC, i.number DESC LIMIT :limit", asked).fetchall()


def _filtered(db: Any, actor_id: str, filters: Filters, limit: int, after: list[Any] | None,
              today: str) -> paging.Page[dict[str, Any]]:
    """One page of the actor's invoices that match, after the cursor's, and the next cursor:
    the same order and cursor as the unfiltered list."""
    part, at, key = paging.key_of(after, str, float, str) if after else ("draft", 0.0, "")
    if part not in ("draft", "issued"):
        raise Refusal("invalid_cursor")
    # Only issued invoices have an issue date, a payment status or a place past due.
    with_drafts = filters.status in (None, "draft") and not (filters.since or filters.until)
    with_issued = filters.status != "draft"
    asked: dict[str, Any] = {"owner": actor_id, "limit": limit + 1, "at": at, "key": key,
                             "today": today}
    found: list[Any] = []
    if part == "draft" and with_drafts:
        found += _drafts(db, filters, asked, after is not None)
    if len(found) <= limit and with_issued:
        asked["limit"] = limit + 1 - len(found)
        found += _issued(db, filters, asked, part == "issued")
    return invoices.page_of(found, limit)


# --- what is paid and due --------------------------------------------------------------------


def _with_standing(db: Any, items: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """Each listed invoice with its `amount_paid`, `amount_due`, `payment_status` and
    `overdue`, read from the kept balances in one query."""
    payable = [item["id"] for item in items
               if item["status"] == "issued" and item["kind"] == "invoice"]
    kept = {row["invoice_id"]: row for row in db.execute(
        "SELECT invoice_id, amount_paid, amount_due, payment_status FROM balances"
        " WHERE invoice_id IN (SELECT value FROM json_each(?))", (json.dumps(payable),))}
    shown = []
    for item in items:
        if item["id"] not in payable:
            shown.append({**item, **balances.NO_STANDING})
            continue
        fields = kept.get(item["id"]) or balances.worked_out(db, item)
        shown.append({**item, "amount_paid": fields["amount_paid"],
                      "amount_due": fields["amount_due"],
                      "payment_status": fields["payment_status"],
                      "overdue": balances.is_overdue(fields["payment_status"],
                                                     item["due_date"], now)})
    return shown


@dataclass(frozen=True)
class Totals:
    """Per currency, what is still to be paid, and the part of it past its due date."""

    currency: str
    outstanding: str
    overdue: str


def _totals(db: Any, actor_id: str, today: str) -> list[Totals]:
    """Exact sums of `amount_due` over the actor's invoices still owing, per currency."""
    sums: dict[str, list[Decimal]] = {}
    for row in db.execute(
            "SELECT currency, amount_due, due_date FROM balances WHERE owner_id = ?"
            " AND payment_status IN ('unpaid', 'partially_paid')", (actor_id,)):
        owing = sums.setdefault(row["currency"], [Decimal(0), Decimal(0)])
        owing[0] += Decimal(row["amount_due"])
        if row["due_date"] < today:
            owing[1] += Decimal(row["amount_due"])
    return [Totals(currency, money.text(outstanding, currency), money.text(overdue, currency))
            for currency, (outstanding, overdue) in sorted(sums.items())]


@dataclass(frozen=True)
class Found:
    page: paging.Page[dict[str, Any]]
    totals: list[Totals] = field(default_factory=list)


def _found(db: Any, actor_id: str, filters: Filters, limit: int, after: list[Any] | None,
           with_totals: bool) -> Found:
    now = clock(None)
    today = balances.today(now).isoformat()
    if filters.any():
        page = _filtered(db, actor_id, filters, limit, after, today)
    else:  # the plain list keeps its own fast path
        page = invoices.listed(db, actor_id, limit, after)
    page = paging.Page(_with_standing(db, page.items, now), page.after)
    return Found(page, _totals(db, actor_id, today) if with_totals else [])


async def find(db: Database, actor: Actor, filters: Filters, limit: int = paging.DEFAULT_LIMIT,
               after: list[Any] | None = None, with_totals: bool = False) -> Found:
    """A page of the actor's invoices that match the filters, each with what it has paid and
    is due; with the totals outstanding and overdue per currency when asked: one snapshot, so
    the page and its totals are of one moment."""
    return await db.read(_found, actor.id, filters, limit, after, with_totals)

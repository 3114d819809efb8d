"""Recurring invoices: a schedule, its periods, and the one unit that makes a due period.

    active --(pause)--> paused --(resume)--> active
    active | paused --(end, or its end date or count reached)--> ended      final

A period is due on its run date, its first day. Making it is one transaction: the account
held, the schedule read again, the period bound once (`recurring_periods`, unique per
schedule and period start, like a request id), the draft made and, as the schedule says,
issued with the next number and handed to `deliver` (the runtime queues its email), and the
schedule moved on to its next period. Whatever else runs at once, a period is made once.

The periods follow from the rule alone: period n starts on `run_date(rule, anchor, n)` and
ends the day before period n + 1 starts. Time is an argument: the units take the database's
clock (`clock`), read once the account is held.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from studio import i18n
from studio.accounts.auth import Actor
from studio.billing import customers, identifiers, invoices, money
from studio.errors import N_, Refusal
from studio.i18n import _
from studio.store import bindings, paging
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.transactions import clock, savepoint, timestamp

EVERY = ("week", "month", "year")
ACTIONS = ("draft", "issue", "send")
MAX_INTERVAL = 100
MAX_COUNT = 10_000
MAX_TERMS_DAYS = 365
# How far from today a schedule may start: further is taken for a typing slip.
MAX_YEARS_AWAY = 10
# `deliver(db, owner_id, invoice_id, schedule, period_start)`: what follows an issued invoice
# whose schedule says `send`, in the same transaction.
Deliver = Callable[[Any, str, str, Any, str], None]


# --- the rule --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    every: str  # week, month, year
    interval: int  # every `interval` weeks, months or years
    day: str | None  # '1'..'28' or 'last' for a month or a year; None for a week


def _on_day(year: int, month: int, day: str | None) -> dt.date:
    last = calendar.monthrange(year, month)[1]
    return dt.date(year, month, last if day in (None, "last") else int(day))


def _months_on(year: int, month: int, months: int) -> tuple[int, int]:
    years, month_index = divmod(year * 12 + month - 1 + months, 12)
    return years, month_index + 1


def first_run(rule: Rule, on_or_after: dt.date) -> dt.date:
    """The first run date of the rule on or after a day: a week runs on that day's weekday;
    a month on its day of that month, or the next; a year on its day of that month, or a
    year later."""
    if rule.every == "week":
        return on_or_after
    found = _on_day(on_or_after.year, on_or_after.month, rule.day)
    if found >= on_or_after:
        return found
    if rule.every == "month":
        return _on_day(*_months_on(on_or_after.year, on_or_after.month, 1), rule.day)
    return _on_day(on_or_after.year + 1, on_or_after.month, rule.day)


def run_date(rule: Rule, anchor: dt.date, n: int) -> dt.date:
    """The first day of period n, counted from the anchor (period 0): never drifting, so the
    31st stays the last of each month and February 29th comes back in leap years."""
    if rule.every == "week":
        return anchor + dt.timedelta(weeks=rule.interval * n)
    if rule.every == "month":
        return _on_day(*_months_on(anchor.year, anchor.month, rule.interval * n), rule.day)
    return _on_day(anchor.year + rule.interval * n, anchor.month, rule.day)


def period(rule: Rule, anchor: dt.date, n: int) -> tuple[dt.date, dt.date]:
    """Period n, from its first day to the day before the next one starts."""
    return run_date(rule, anchor, n), run_date(rule, anchor, n + 1) - dt.timedelta(days=1)


def first_due_on_or_after(rule: Rule, anchor: dt.date, day: dt.date) -> int:
    """The first period whose run date is on or after `day` (the ones before it are passed
    over: a schedule without backfill, or one resumed after a pause)."""
    n = 0
    if rule.every == "week":
        n = max(0, (day - anchor).days // (7 * rule.interval))
    while run_date(rule, anchor, n) < day:
        n += 1
    return n


def rule_of(row: Any) -> Rule:
    return Rule(row["every"], row["every_n"], row["on_day"])


def today_of(now: float) -> dt.date:
    return dt.datetime.fromtimestamp(now, dt.UTC).date()


# --- input -----------------------------------------------------------------------------------


def _whole(value: object, what: str, least: int, most: int) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() \
            and len(value.strip()) <= 6:
        value = int(value.strip())  # a form field is text
    if type(value) is not int or not least <= value <= most:
        raise Refusal("invalid_body", _("The %(what)s must be a whole number from %(least)s to"
                                        " %(most)s.") % {"what": what, "least": least,
                                                         "most": i18n.number(most)})
    return value


def _optional_whole(value: object, what: str, least: int, most: int) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _whole(value, what, least, most)


def _choice(value: object, what: str, choices: tuple[str, ...], default: str | None = None
            ) -> str:
    if (value is None or value == "") and default is not None:
        return default
    if value not in choices:
        raise Refusal("invalid_body", _("The %(what)s must be one of: %(choices)s.")
                      % {"what": what, "choices": ", ".join(choices)})
    return str(value)


def _day(value: object, every: str, starts: str) -> str | None:
    """The day of the month a month or a year runs on: 1 to 28, or `last`; left out, the day
    `starts` names (the last, from the 29th on). Checked for a week too, which has none."""
    if value is None or value == "":
        day = dt.date.fromisoformat(starts).day
        found = str(day) if day <= 28 else "last"
    elif value == "last":
        found = "last"
    else:
        found = str(_whole(value, _("day (1 to 28, or last)"), 1, 28))
    return None if every == "week" else found  # a week runs on the weekday it starts


def _flag(value: object, what: str) -> bool:
    if value in (None, "", False, "false", "0", "off"):
        return False
    if value in (True, "true", "1", "on"):
        return True
    raise Refusal("invalid_body", _("The %(what)s must be true or false.") % {"what": what})


def _email_to(body: dict[str, Any], before: dict[str, Any]) -> str:
    """`email.to` (or a form's `email_to`): where a `send` schedule emails its invoices;
    empty, the customer's address."""
    if "email" in body:
        given = body["email"]
        if given is not None and not isinstance(given, dict):
            raise Refusal("invalid_body", _("The email must be an object like"
                                            " {\"to\": \"name@example.com\"}."))
        value = (given or {}).get("to")
    elif "email_to" in body:
        value = body["email_to"]
    else:
        return before.get("email_to", "")
    return identifiers.email(value, N_("email to send to"))


def parse_schedule(body: dict[str, Any], before: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """A schedule's fields, checked and normalised; on an edit, what the body leaves out is
    kept. Each refusal names its field."""
    before = before or {}

    def given(name: str, stored: str | None = None) -> Any:
        return body[name] if name in body else before.get(stored or name)

    customer_id = given("customer_id")
    if not isinstance(customer_id, str) or not 1 <= len(customer_id.strip()) <= 100:
        raise Refusal("invalid_body", _("The customer_id must name one of your customers."))
    currency = given("currency")
    if currency is not None and currency != "" and currency != before.get("currency"):
        currency = money.currency_code(currency)
    lines = money.parse_lines(given("line_items") if "line_items" in body
                              else json.loads(before["line_items"]) if before else None)
    if currency:
        money.totals(lines, currency)  # a total the currency cannot hold is refused now
    every = _choice(given("every"), "every", EVERY)
    starts = invoices.parse_date(given("starts", "starts_on"), N_("starts"))
    ends = given("ends", "ends_on")
    ends = None if ends in (None, "") else invoices.parse_date(ends, N_("ends"))
    if ends is not None and ends < starts:
        raise Refusal("invalid_body", _("The ends date, %(ends)s, is before the starts date,"
                                        " %(starts)s.") % {"ends": ends, "starts": starts})
    terms = given("payment_terms_days")
    notes = given("notes")
    if notes not in (None, "") and (not isinstance(notes, str)
                                    or len(notes) > invoices.MAX_NOTES):
        raise Refusal("invalid_body", _("The notes must be text of at most %(most)s"
                                        " characters.") % {"most": i18n.number(invoices.MAX_NOTES)})
    return {
        "customer_id": customer_id.strip(),
        "currency": currency or None,
        "line_items": json.dumps([line.as_json() for line in lines]),
        "payment_terms_days": _optional_whole(terms, "payment_terms_days", 0, MAX_TERMS_DAYS),
        "notes": identifiers.plain(notes, "notes").strip() if notes else "",
        "vat_exemption": invoices.parse_vat_exemption(given("vat_exemption")),
        "every": every,
        "every_n": _optional_whole(given("interval", "every_n"), "interval", 1,
                                   MAX_INTERVAL) or 1,
        "on_day": _day(given("day", "on_day"), every, starts),
        "starts_on": starts,
        "ends_on": ends,
        "stop_after": _optional_whole(given("count", "stop_after"), "count", 1, MAX_COUNT),
        "action": _choice(given("action"), "action", ACTIONS, "draft"),
        "email_to": _email_to(body, before),
        "backfill": _flag(body.get("backfill", before.get("backfill")), "backfill"),
    }


def parse_revision(body: dict[str, Any]) -> int:
    return identifiers.revision(body.get("revision"), "schedule")


# --- reading ---------------------------------------------------------------------------------


def owned(db: sqlite3.Connection, actor_id: str, recurring_id: str) -> Any:
    """The actor's own schedule; 404 otherwise, as for a made-up id."""
    row = db.execute("SELECT * FROM recurring WHERE id = ? AND owner_id = ?",
                     (recurring_id, actor_id)).fetchone()
    if row is None:
        raise Refusal("recurring_not_found")
    return row


def made_by(db: sqlite3.Connection, recurring_id: str) -> list[dict[str, Any]]:
    """One entry per period made, in order: its dates and the invoice it made."""
    return [dict(row) for row in db.execute(
        "SELECT recurring_periods.period_start, recurring_periods.period_end,"
        " recurring_periods.invoice_id, invoices.number, invoices.status"
        " FROM recurring_periods JOIN invoices ON invoices.id = recurring_periods.invoice_id"
        " WHERE recurring_periods.recurring_id = ? ORDER BY recurring_periods.period_start",
        (recurring_id,))]


def as_json(row: Any, made: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    schedule = {
        "id": row["id"], "status": row["status"], "next_run": row["next_run"],
        "customer_id": row["customer_id"], "currency": row["currency"],
        "line_items": json.loads(row["line_items"]), "notes": row["notes"],
        "vat_exemption": row["vat_exemption"],
        "payment_terms_days": row["payment_terms_days"], "every": row["every"],
        "interval": row["every_n"], "day": row["on_day"], "starts": row["starts_on"],
        "ends": row["ends_on"], "count": row["stop_after"], "action": row["action"],
        "email": {"to": row["email_to"] or None}, "backfill": bool(row["backfill"]),
        "made_count": row["made"], "problem": row["problem"] or None,
        "revision": row["revision"], "created_at": timestamp(row["created_at"]),
        "updated_at": timestamp(row["updated_at"]),
    }
    if made is not None:
        schedule["made"] = made
    return schedule


def _one(db: sqlite3.Connection, actor_id: str, recurring_id: str) -> dict[str, Any]:
    row = owned(db, actor_id, recurring_id)
    found = as_json(row, made_by(db, recurring_id))
    customer = db.execute("SELECT name FROM customers WHERE id = ?",
                          (row["customer_id"],)).fetchone()
    found["customer"] = customer["name"] if customer else ""
    return found


AFTER = " AND (recurring.created_at, recurring.id) < (:at, :key)"


def _listed(db: sqlite3.Connection, actor_id: str, limit: int, after: list[Any] | None
            ) -> paging.Page[dict[str, Any]]:
    """One page of the actor's schedules, newest first, each with its customer's name."""
    at, key = paging.key_of(after, float, str) if after else (0.0, "")
    found = db.execute(
        "SELECT recurring.*, customers.name AS customer FROM recurring"
        " JOIN customers ON customers.id = recurring.customer_id"
        " WHERE recurring.owner_id = :owner" + (AFTER if after else "")
        + " ORDER BY recurring.created_at DESC, recurring.id DESC LIMIT :limit",
        {"owner": actor_id, "at": at, "key": key, "limit": limit + 1}).fetchall()
    following = None
    if len(found) > limit:
        last = found[limit - 1]
        following = paging.cursor([last["created_at"], last["id"]])
    return paging.Page([{**as_json(row), "customer": row["customer"]}
                        for row in found[:limit]], following)


def any_due(db: sqlite3.Connection, now: float | None = None) -> bool:
    """Whether a period of an active schedule is due (a cheap look before a write)."""
    today = today_of(clock(now)).isoformat()
    return db.execute("SELECT 1 FROM recurring WHERE status = 'active' AND next_run <= ?"
                      " LIMIT 1", (today,)).fetchone() is not None


def due(db: sqlite3.Connection, limit: int, now: float | None = None) -> list[str]:
    """Active schedules with a period due, the longest waiting first."""
    today = today_of(clock(now)).isoformat()
    return [row[0] for row in db.execute(
        "SELECT id FROM recurring WHERE status = 'active' AND next_run <= ?"
        " ORDER BY next_run, id LIMIT ?", (today, limit))]


# --- writing ---------------------------------------------------------------------------------


def _next_state(row: dict[str, Any], rule: Rule, anchor: dt.date, n: int, made: int
                ) -> dict[str, Any]:
    """Where the schedule stands with period n next: its run date, or ended (its count made,
    or period n starting after its end date)."""
    next_run = run_date(rule, anchor, n)
    ended = (row["stop_after"] is not None and made >= row["stop_after"]) or \
        (row["ends_on"] is not None and next_run.isoformat() > row["ends_on"])
    return {"next_index": n, "next_run": None if ended else next_run.isoformat(),
            "status": "ended" if ended else row["status"]}


def create(db: sqlite3.Connection, actor_id: str, fields: dict[str, Any],
           request_id: str, now: float | None = None) -> tuple[dict[str, Any], bool]:
    """A new schedule, once per request id. Its first period is the first on or after its
    start with `backfill`, else the first due on the day it is made or later."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    today = today_of(now)

    def make(recurring_id: str) -> None:
        customer = customers.owned(db, actor_id, fields["customer_id"])
        currency = fields["currency"] or customer["currency"]
        if not currency:
            raise Refusal("invalid_body", _("The currency is missing: %(customer)s has none on"
                                            " file, so name one, like EUR.")
                          % {"customer": customer["name"]})
        money.totals(money.parse_lines(json.loads(fields["line_items"])), currency)
        starts = dt.date.fromisoformat(fields["starts_on"])
        if abs((starts - today).days) > MAX_YEARS_AWAY * 366:
            raise Refusal("invalid_body", _("The starts date, %(starts)s, is more than"
                                            " %(years)s years from today; check it for a typo.")
                          % {"starts": starts, "years": MAX_YEARS_AWAY})
        rule = Rule(fields["every"], fields["every_n"], fields["on_day"])
        anchor = first_run(rule, starts)
        n = 0 if fields["backfill"] else first_due_on_or_after(rule, anchor, today)
        state = _next_state({**fields, "status": "active"}, rule, anchor, n, 0)
        if state["status"] == "ended":
            raise Refusal("invalid_body", _("The ends date, %(ends)s, comes before the first"
                                            " invoice this schedule would make, so it would"
                                            " make none; change the ends date.")
                          % {"ends": fields["ends_on"]})
        terms = fields["payment_terms_days"]
        db.execute(
            "INSERT INTO recurring (id, owner_id, customer_id, status, currency, line_items,"
            " notes, vat_exemption, payment_terms_days, every, every_n, on_day, starts_on,"
            " ends_on, stop_after, action, email_to, backfill, anchor, next_index, next_run,"
            " created_on, created_at, updated_at) VALUES (:id, :owner, :customer_id,"
            " 'active', :currency, :line_items, :notes, :vat_exemption, :terms, :every,"
            " :every_n, :on_day,"
            " :starts_on, :ends_on, :stop_after, :action, :email_to, :backfill, :anchor,"
            " :next_index, :next_run, :today, :now, :now)",
            {**fields, **state, "id": recurring_id, "owner": actor_id, "currency": currency,
             "terms": customer["payment_terms_days"] if terms is None else terms,
             "backfill": int(fields["backfill"]), "anchor": anchor.isoformat(),
             "today": today.isoformat(), "now": now})

    recurring_id, created = bindings.once(db, actor_id, "recurring", request_id,
                                          bindings.fingerprint(invoices.bound_fields(fields)),
                                          make, now)
    return _one(db, actor_id, recurring_id), created


def edit(db: sqlite3.Connection, actor_id: str, recurring_id: str, revision: int,
         body: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """Edit the revision the person saw, from the next period on: what was made stays as it
    was. A new rule runs from the next period's run date on."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = owned(db, actor_id, recurring_id)
    if row["status"] == "ended":
        raise Refusal("recurring_ended")
    if row["revision"] != revision:
        raise Refusal("recurring_changed")
    before = dict(row)
    fields = parse_schedule(body, before)
    if fields["starts_on"] != row["starts_on"] or fields["backfill"] != bool(row["backfill"]):
        raise Refusal("invalid_body", _("The starts date and backfill stay as the schedule was"
                                        " made; end it and make a new one to start elsewhere."))
    customer = customers.owned(db, actor_id, fields["customer_id"])
    currency = fields["currency"] or row["currency"]
    money.totals(money.parse_lines(json.loads(fields["line_items"])), currency)
    rule = Rule(fields["every"], fields["every_n"], fields["on_day"])
    anchor, n = dt.date.fromisoformat(row["anchor"]), row["next_index"]
    if rule != rule_of(row):
        from_day = run_date(rule_of(row), anchor, n)
        anchor, n = first_run(rule, from_day), 0
    terms = fields["payment_terms_days"]
    state = _next_state({**fields, "status": row["status"]}, rule, anchor, n, row["made"])
    db.execute(
        "UPDATE recurring SET customer_id = :customer_id, currency = :currency,"
        " line_items = :line_items, notes = :notes, vat_exemption = :vat_exemption,"
        " payment_terms_days = :terms,"
        " every = :every, every_n = :every_n, on_day = :on_day, ends_on = :ends_on,"
        " stop_after = :stop_after, action = :action, email_to = :email_to,"
        " anchor = :anchor, next_index = :next_index, next_run = :next_run, status = :status,"
        " revision = revision + 1, updated_at = :now WHERE id = :id AND revision = :revision",
        {**fields, **state, "currency": currency, "anchor": anchor.isoformat(),
         "terms": customer["payment_terms_days"] if terms is None else terms,
         "id": recurring_id, "revision": revision, "now": now})
    return _one(db, actor_id, recurring_id)


def change_status(db: sqlite3.Connection, actor_id: str, recurring_id: str, wanted: str,
                  now: float | None = None) -> dict[str, Any]:
    """Pause, resume or end a schedule. A resumed one passes over the periods whose run date
    went by while it was paused; an ended one never runs again."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = owned(db, actor_id, recurring_id)
    if row["status"] == "ended":
        raise Refusal("recurring_ended")
    if row["status"] != wanted:
        state = {"status": wanted, "next_index": row["next_index"], "next_run": row["next_run"]}
        if wanted == "ended":
            state["next_run"] = None
        elif wanted == "active":
            rule, anchor = rule_of(row), dt.date.fromisoformat(row["anchor"])
            n = max(row["next_index"], first_due_on_or_after(rule, anchor, today_of(now)))
            state = _next_state({**dict(row), "status": "active"}, rule, anchor, n, row["made"])
        db.execute("UPDATE recurring SET status = :status, next_index = :next_index,"
                   " next_run = :next_run, revision = revision + 1, updated_at = :now"
                   " WHERE id = :id", {**state, "id": recurring_id, "now": now})
    return _one(db, actor_id, recurring_id)


def make_period(db: sqlite3.Connection, recurring_id: str, deliver: Deliver | None = None,
                now: float | None = None) -> dict[str, Any] | None:
    """Make the schedule's next period if it is due, exactly once: the account held, the
    schedule read again, the period bound (`recurring_periods` refuses a second binding of
    it, so a second maker's whole transaction rolls back), the invoice made, issued and
    delivered as the schedule says, and the schedule moved on, all in this one transaction.
    Returns what was made, or None when nothing was due."""
    owner = db.execute("SELECT r.owner_id, a.language FROM recurring r"
                       " JOIN actors a ON a.id = r.owner_id WHERE r.id = ?",
                       (recurring_id,)).fetchone()
    if owner is None:
        return None
    with i18n.use(owner[1]):
        return _make_due(db, owner[0], recurring_id, deliver, now)


def _make_due(db: sqlite3.Connection, owner_id: str, recurring_id: str,
              deliver: Deliver | None, now: float | None) -> dict[str, Any] | None:
    """make_period's transaction, speaking the owner's chosen page language: a problem it
    notes on the schedule is read on their pages (English when their pages follow the
    browser, which no clock has)."""
    hold(db, account_lock(owner_id))
    now = clock(now)
    today = today_of(now)
    row = db.execute("SELECT * FROM recurring WHERE id = ?", (recurring_id,)).fetchone()
    if row["status"] != "active" or row["next_run"] is None \
            or row["next_run"] > today.isoformat():
        return None
    rule, anchor, n = rule_of(row), dt.date.fromisoformat(row["anchor"]), row["next_index"]
    start, end = period(rule, anchor, n)
    made = None
    if db.execute("SELECT 1 FROM recurring_periods WHERE recurring_id = ? AND period_start = ?",
                  (recurring_id, start.isoformat())).fetchone() is None:
        made = _make_invoice(db, row, start, end, today, now, deliver)
    state = _next_state(dict(row), rule, anchor, n + 1, row["made"] + (made is not None))
    db.execute("UPDATE recurring SET next_index = :next_index, next_run = :next_run,"
               " status = :status, made = made + :one, problem = :problem, updated_at = :now"
               " WHERE id = :id",
               {**state, "one": int(made is not None), "id": recurring_id, "now": now,
                "problem": made["problem"] if made else row["problem"]})
    return made


def _make_invoice(db: sqlite3.Connection, row: Any, start: dt.date, end: dt.date,
                  today: dt.date, now: float, deliver: Deliver | None) -> dict[str, Any]:
    """The period's invoice: a draft dated today billing the period, bound to it, then issued
    and delivered when the schedule says so. What cannot be issued stays a draft, and what
    cannot be sent stays issued, the reason kept on the schedule for the person to see."""
    owner, lines = row["owner_id"], money.parse_lines(json.loads(row["line_items"]))
    fields = {"customer": None, "customer_id": row["customer_id"], "currency": row["currency"],
              "due_date": (today + dt.timedelta(days=row["payment_terms_days"])).isoformat(),
              "supply_date": None, "notes": row["notes"],
              "vat_exemption": row["vat_exemption"], "line_items": row["line_items"],
              **money.totals(lines, row["currency"]).as_json(row["currency"])}
    draft = invoices.create_draft(db, owner, fields, None, now)[0]
    invoice_id = draft["id"]
    db.execute("UPDATE invoices SET recurring_id = ?, period_start = ?, period_end = ?"
               " WHERE id = ? AND status = 'draft'",
               (row["id"], start.isoformat(), end.isoformat(), invoice_id))
    # The binding: a second one of this period is refused by the database, and everything
    # this transaction made goes with it.
    db.execute("INSERT INTO recurring_periods (recurring_id, period_start, period_end,"
               " invoice_id, made_at) VALUES (?, ?, ?, ?, ?)",
               (row["id"], start.isoformat(), end.isoformat(), invoice_id, now))
    made = {"invoice_id": invoice_id, "period_start": start.isoformat(),
            "period_end": end.isoformat(), "number": None, "status": "draft", "problem": ""}
    if row["action"] == "draft":
        return made
    try:
        with savepoint(db):
            issued = invoices.issue(db, owner, invoice_id, f"recurring:{row['id']}:{start}",
                                    draft["revision"], now)[0]
    except Refusal as refused:
        return {**made, "problem": _("The invoice for {start} to {end} was kept as a draft:"
                                     " {reason}").format(start=i18n.date(start),
                                                         end=i18n.date(end),
                                                         reason=refused.message)}
    made.update(number=issued["number"], status="issued")
    if row["action"] == "send" and deliver is not None:
        try:
            with savepoint(db):
                deliver(db, owner, invoice_id, row, start.isoformat())
        except Refusal as refused:
            made["problem"] = _("Invoice {number} was issued but not emailed: {reason}"
                                ).format(number=issued["number"], reason=refused.message)
    return made


# --- what handlers call ----------------------------------------------------------------------


async def list_schedules(db: Database, actor: Actor, limit: int = paging.DEFAULT_LIMIT,
                         after: list[Any] | None = None) -> paging.Page[dict[str, Any]]:
    return await db.read(_listed, actor.id, limit, after)


async def get_schedule(db: Database, actor: Actor, recurring_id: str) -> dict[str, Any]:
    """One schedule with what it made; anyone else's is as absent as a made-up id."""
    return await db.read(_one, actor.id, recurring_id)


async def create_schedule(db: Database, actor: Actor, fields: dict[str, Any],
                          request_id: str) -> tuple[dict[str, Any], bool]:
    return await db.write(create, actor.id, fields, request_id)


async def edit_schedule(db: Database, actor: Actor, recurring_id: str, revision: int,
                        body: dict[str, Any]) -> dict[str, Any]:
    return await db.write(edit, actor.id, recurring_id, revision, body)


async def set_status(db: Database, actor: Actor, recurring_id: str, wanted: str
                     ) -> dict[str, Any]:
    return await db.write(change_status, actor.id, recurring_id, wanted)

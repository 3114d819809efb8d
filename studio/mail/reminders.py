"""Reminders that go out by themselves: an account's steps ("7 days after the due date"),
each in the account's own words, queued through the outbox at most once per invoice.

Each step's send names its step, and the database keeps one send per invoice and step
(`sends_one_per_step`), so a restart, a second host or a look repeated sends nothing again.
Steps already due when reminders are switched on go out then, each once. Nothing goes to a
customer left out (`reminders: false`), nor to an invoice with nothing left to pay: not when
queued, and not when it would leave (`outbox.reminder_not_due`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sqlite3
from typing import Any

from studio import addresses, i18n
from studio.billing import balances, documents, identifiers, reminding
from studio.errors import Refusal
from studio.mail import outbox
from studio.store.dialect import account_lock, hold
from studio.store.transactions import after_commit, clock, savepoint

log = logging.getLogger("studio.reminders")

PLACEHOLDERS, PLACEHOLDER, MAX_STEPS = reminding.PLACEHOLDERS, reminding.PLACEHOLDER, \
    reminding.MAX_STEPS
MAX_DAYS = 365
# Reminders queued in one transaction; the next look goes on where this one stopped.
AT_ONCE = 50


# --- the settings ----------------------------------------------------------------------------


def _days(value: object, n: int) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,3}\s*", value):
        value = int(value)
    if type(value) is not int or not -MAX_DAYS <= value <= MAX_DAYS:
        raise Refusal("invalid_body", i18n.gettext(
            "The days of step %(n)s must be a whole number from -%(most)s (before the due"
            " date) to %(most)s (after it).") % {"n": n, "most": MAX_DAYS})
    return value


def _step(raw: object, n: int) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise Refusal("invalid_body", i18n.gettext(
            "Each step must be {days, subject, message}; step %(n)s is not.") % {"n": n})
    days = _days(raw.get("days"), n)
    subject = raw.get("subject")
    if not isinstance(subject, str) or not subject.strip() \
            or addresses.header_text_fault(subject.strip()) is not None \
            or len(subject) > outbox.MAX_SUBJECT:
        raise Refusal("invalid_subject", i18n.gettext(
            "The subject of step %(n)s must be one line of 1 to %(most)s characters.")
            % {"n": n, "most": outbox.MAX_SUBJECT})
    message = raw.get("message")
    if not isinstance(message, str) or not message.strip() \
            or len(message) > outbox.MAX_MESSAGE:
        raise Refusal("invalid_message", i18n.gettext(
            "The message of step %(n)s must be text of 1 to %(most)s characters.")
            % {"n": n, "most": i18n.number(outbox.MAX_MESSAGE)})
    # The field named in the person's language ("message of step 2"), said whole.
    of_message = i18n.gettext("message of step %(n)s") % {"n": n}
    message = identifiers.plain(message, of_message).strip()
    reminding.refuse_unknown_placeholders(
        subject, i18n.gettext("subject of step %(n)s") % {"n": n},
        reminding.subject_placeholders())
    reminding.refuse_unknown_placeholders(message, of_message)
    return {"days": days, "subject": subject.strip(), "message": message}


def _steps_of_form(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A form names each step's fields with its place: days_0, subject_0, message_0, ...; a
    step whose fields are all blank is no step."""
    steps = []
    for n in range(MAX_STEPS):
        step = {name: body.get(f"{name}_{n}", "") for name in ("days", "subject", "message")}
        if any(str(value).strip() for value in step.values()):
            steps.append(step)
    return steps


def parse_settings(body: dict[str, Any]) -> dict[str, Any]:
    """`{enabled, steps: [{days, subject, message}]}` checked: each step's words may hold
    only the placeholders the studio fills in, and each step's days once."""
    enabled = body.get("enabled", False)
    if enabled in (True, "true", "1", "on"):
        enabled = True
    elif enabled in (False, "false", "0", "off", ""):
        enabled = False
    else:
        raise Refusal("invalid_body", i18n.gettext("The enabled setting must be true or false."))
    raw = body["steps"] if "steps" in body else _steps_of_form(body)
    if not isinstance(raw, list) or len(raw) > MAX_STEPS:
        raise Refusal("invalid_body", i18n.gettext("The steps must be a list of at most"
                                                   " %(most)s.") % {"most": MAX_STEPS})
    steps = sorted((_step(item, n) for n, item in enumerate(raw, start=1)),
                   key=lambda step: step["days"])
    days = [step["days"] for step in steps]
    if len(set(days)) != len(days):
        raise Refusal("invalid_body", i18n.gettext("Two steps have the same days; each step"
                                                   " needs days of its own."))
    if enabled and not steps:
        raise Refusal("invalid_body", i18n.gettext("Add at least one step to switch reminders"
                                                   " on."))
    return {"enabled": enabled, "steps": steps}


def settings_of(db: sqlite3.Connection, actor_id: str) -> dict[str, Any]:
    row = db.execute("SELECT enabled, steps, revision FROM reminder_settings"
                     " WHERE actor_id = ?", (actor_id,)).fetchone()
    if row is None:
        return {"enabled": False, "steps": [], "revision": 0}
    return {"enabled": bool(row["enabled"]), "steps": json.loads(row["steps"]),
            "revision": row["revision"]}


def save_settings(db: sqlite3.Connection, actor_id: str, fields: dict[str, Any],
                  now: float | None = None) -> dict[str, Any]:
    """The account's reminder settings; the next look at its invoices follows at once."""
    hold(db, account_lock(actor_id))
    reminding.store_steps(db, actor_id, fields["steps"], clock(now), enabled=fields["enabled"])
    return settings_of(db, actor_id)


# --- going out -------------------------------------------------------------------------------


def accounts_due(db: sqlite3.Connection, now: float | None = None) -> list[str]:
    """Accounts with reminders on whose invoices were not looked at today, or whose balances
    changed since (an invoice issued, a payment recorded or voided): a cheap read."""
    today = balances.today(now).isoformat()
    return [row[0] for row in db.execute(
        "SELECT actor_id FROM reminder_settings WHERE enabled = 1"
        " AND (looked_on IS NULL OR looked_on < ? OR EXISTS (SELECT 1 FROM balances"
        "      WHERE balances.owner_id = reminder_settings.actor_id"
        "      AND balances.updated_at >= reminder_settings.looked_at))"
        " ORDER BY looked_on IS NOT NULL, looked_on LIMIT 20", (today,))]


def fill(text: str, values: dict[str, str]) -> str:
    """The placeholders the studio knows filled in; `{link}` is left for the outbox."""
    return PLACEHOLDER.sub(lambda found: values.get(found.group(1), found.group(0)), text)


def queue_due(db: sqlite3.Connection, actor_id: str, mail_from: str, base_url: str,
              share_days: float, now: float | None = None) -> int:
    """Queue the account's due reminder steps, at most AT_ONCE in this transaction: for each
    issued invoice with something left to pay, to a customer not left out, each step due
    that it was not sent yet. Marks the account looked at (today, and now) once none is
    left. Returns how many were queued."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    today = balances.today(now)
    found = db.execute("SELECT enabled, steps FROM reminder_settings WHERE actor_id = ?",
                       (actor_id,)).fetchone()
    steps = json.loads(found["steps"]) if found is not None and found["enabled"] else []
    queued = 0
    if steps:
        earliest = today - dt.timedelta(days=min(step["days"] for step in steps))
        for invoice in db.execute(
                "SELECT invoices.* FROM balances"
                " JOIN invoices ON invoices.id = balances.invoice_id"
                " LEFT JOIN customers ON customers.id = invoices.customer_id"
                " WHERE balances.owner_id = ? AND balances.payment_status != 'paid'"
                " AND balances.due_date <= ? AND invoices.status = 'issued'"
                " AND invoices.kind = 'invoice' AND COALESCE(customers.reminders, 1) = 1"
                " ORDER BY balances.due_date, invoices.id",
                (actor_id, earliest.isoformat())).fetchall():
            queued += _remind(db, invoice, steps, today, mail_from, base_url, share_days,
                              now)
            if queued >= AT_ONCE:
                return queued
    db.execute("UPDATE reminder_settings SET looked_on = ?, looked_at = ? WHERE actor_id = ?",
               (today.isoformat(), now, actor_id))
    return queued


def _remind(db: sqlite3.Connection, invoice: Any, steps: list[dict[str, Any]],
            today: dt.date, mail_from: str, base_url: str, share_days: float, now: float
            ) -> int:
    """Queue each step due for the invoice that it was not sent before, earliest first:
    how many were queued."""
    due = dt.date.fromisoformat(invoice["due_date"])
    sent = {row[0] for row in db.execute(
        "SELECT step FROM sends WHERE invoice_id = ? AND step IS NOT NULL", (invoice["id"],))}
    waiting = [step for step in steps
               if due + dt.timedelta(days=step["days"]) <= today and step["days"] not in sent]
    if not waiting:
        return 0
    standing = balances.standing_of(db, invoice, now)
    # The amount and the date as the customer's language writes them; {currency} says which.
    language = documents.stored_language(invoice)
    values = {"number": invoice["number"], "customer": invoice["customer"],
              "amount_due": i18n.number(standing["amount_due"] or invoice["total"], language),
              "currency": invoice["currency"],
              "due_date": i18n.date(invoice["due_date"], language),
              "days_overdue": str(max(0, (today - due).days))}
    queued = 0
    for step in waiting:
        asked = {"to": None, "cc": [], "subject": fill(step["subject"], values),
                 "message": fill(step["message"], values)}
        try:
            with savepoint(db):
                outbox.queue(db, invoice["owner_id"], invoice["id"], "reminder",
                             f"reminder-step:{invoice['id']}:{step['days']}", asked,
                             mail_from, base_url, now, share_days, step=step["days"])
        except Refusal as refused:  # no address on file, say: tried again at the next look
            after_commit(lambda days=step["days"], reason=refused.message: log.info(
                "reminder step %s of invoice %s not queued: %s", days, invoice["id"], reason))
            return queued
        queued += 1
    return queued

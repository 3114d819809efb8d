"""The words of an account's payment reminders: the placeholders the studio fills in, the
steps a new account starts from, and one step's words kept as the person chose them (the
settings page's "Suggest wording", applied). Sending them is `studio.mail.reminders`."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from studio.errors import Refusal
from studio.i18n import gettext
from studio.store.transactions import clock

PLACEHOLDERS = ("number", "customer", "amount_due", "currency", "due_date", "days_overdue",
                "link")
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
MAX_STEPS = 10
# What the settings start with before any step is kept: the person's to change or clear.
FIRST_STEPS = [
    {"days": 7, "subject": "Reminder: invoice {number} is overdue",
     "message": "Hello,\n\ninvoice {number}, due on {due_date}, still has {currency}"
                " {amount_due} to pay. If you have already paid it, please ignore this email."
                "\n\nView the invoice: {link}"},
    {"days": 21, "subject": "Second reminder: invoice {number}",
     "message": "Hello,\n\ninvoice {number} is now {days_overdue} days overdue; {currency}"
                " {amount_due} is still open. Please pay it soon, or tell us if something is"
                " wrong with it.\n\nView the invoice: {link}"},
]


def refuse_unknown_placeholders(text: str, where: str,
                                allowed: tuple[str, ...] = PLACEHOLDERS) -> None:
    for name in PLACEHOLDER.findall(text):
        if name not in allowed:
            known = ", ".join(f"{{{known}}}" for known in allowed)
            raise Refusal("invalid_body", gettext(
                "The %(where)s holds {%(name)s}, which is not a placeholder the studio fills in;"
                " use %(known)s.") % {"where": gettext(where), "name": name, "known": known})


def subject_placeholders() -> tuple[str, ...]:
    """A subject may name everything but the link, which only a message carries."""
    return tuple(name for name in PLACEHOLDERS if name != "link")


def steps_shown(db: sqlite3.Connection, actor_id: str) -> list[dict[str, Any]]:
    """The account's steps as its settings page shows them: those kept, or the first steps
    while none ever was."""
    row = db.execute("SELECT steps FROM reminder_settings WHERE actor_id = ?",
                     (actor_id,)).fetchone()
    return json.loads(row["steps"]) if row is not None else [dict(s) for s in FIRST_STEPS]


def step_fence(db: sqlite3.Connection, actor_id: str, days: int) -> str:
    """The step of those days as the wording was asked for (null when there is none yet):
    kept wording replaces it only if the person has not changed it since."""
    steps = steps_shown(db, actor_id)
    found = next((step for step in steps if step["days"] == days), None)
    if found is None and len(steps) >= MAX_STEPS:
        raise Refusal("invalid_body", gettext(
            "The reminders already have %(most)s steps; a step %(days)s days from the due date"
            " would be one too many.") % {"most": MAX_STEPS, "days": days})
    return json.dumps({"days": days, "step": found}, sort_keys=True)


def keep_wording(db: sqlite3.Connection, actor_id: str, fence: str, subject: str,
                 message: str, now: float | None = None) -> None:
    """The step's subject and message become these words (a new step of those days if there
    was none), in the caller's transaction, the account's other steps as they are; 409
    `reminder_changed` if the step changed since the wording was asked for."""
    days = json.loads(fence)["days"]
    if step_fence(db, actor_id, days) != fence:
        raise Refusal("reminder_changed")
    steps = [step for step in steps_shown(db, actor_id) if step["days"] != days]
    steps = sorted([*steps, {"days": days, "subject": subject, "message": message}],
                   key=lambda step: step["days"])
    store_steps(db, actor_id, steps, clock(now))


def store_steps(db: sqlite3.Connection, actor_id: str, steps: list[dict[str, Any]],
                now: float, enabled: bool | None = None) -> None:
    """The account's steps kept, and whether reminders are on when `enabled` is given (else
    as they were; off for an account that had none): the revision moves on, and the next
    look at its invoices follows at once."""
    db.execute(
        "INSERT INTO reminder_settings (actor_id, enabled, steps, looked_on, updated_at)"
        " VALUES (?, ?, ?, NULL, ?) ON CONFLICT (actor_id) DO UPDATE SET"
        " enabled = COALESCE(?, reminder_settings.enabled), steps = excluded.steps,"
        " looked_on = NULL, revision = reminder_settings.revision + 1,"
        " updated_at = excluded.updated_at",
        (actor_id, int(bool(enabled)), json.dumps(steps), now,
         None if enabled is None else int(enabled)))


def example_invoice(db: sqlite3.Connection, actor_id: str) -> str | None:
    """The issued invoice a suggested wording is written with: the newest with something
    left to pay, else the newest; None before any is issued."""
    row = db.execute(
        "SELECT invoices.id FROM invoices LEFT JOIN balances ON balances.invoice_id = invoices.id"
        " WHERE invoices.owner_id = ? AND invoices.status = 'issued'"
        " AND invoices.kind = 'invoice'"
        " ORDER BY CASE WHEN balances.payment_status = 'paid' THEN 1 ELSE 0 END,"
        " invoices.issued_at DESC, invoices.id LIMIT 1", (actor_id,)).fetchone()
    return None if row is None else row["id"]

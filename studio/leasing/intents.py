"""Idempotent create: the fingerprint, the request binding, and the lease with its whole
task tree in one commit. The same request twice is one request."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from dataclasses import dataclass
from typing import Any

from studio import i18n, logs
from studio.accounts.auth import Actor
from studio.errors import Refusal
from studio.i18n import _
from studio.leasing.leases import record_event
from studio.leasing.providers import AUTO, Providers
from studio.leasing.purposes import PURPOSES, purpose_named
from studio.store import bindings
from studio.store.db import Database
from studio.store.dialect import account_lock, dialect_of, hold
from studio.store.transactions import clock, timestamp

MAX_CANDIDATES = 5
MAX_REMINDER_DAYS = 365
# Reminder wording is asked as `draft_reminder` with a step's `days` (the settings page's
# "Suggest wording"); its lease names the purpose it is.
WORDING = "reminder_wording"

# One task: (invoice_id, provider, candidate).
Plan = list[tuple[str, str, int]]


@dataclass(frozen=True)
class Intent:
    """What a submission asks for, normalised: the same intent always reads the same."""

    purpose: str
    invoice_ids: tuple[str, ...]
    providers: tuple[str, ...]
    candidates: int
    attachment_id: str | None = None  # the receipt to read, when the person picked one
    days: int | None = None  # the reminder step worded, by its days from the due date

    @property
    def task_count(self) -> int:
        return len(self.invoice_ids) * len(self.providers) * self.candidates

    def normalised(self) -> dict[str, Any]:
        normal: dict[str, Any] = {
            "purpose": self.purpose,
            "invoice_ids": list(self.invoice_ids),
            "providers": list(self.providers),
            "candidates": self.candidates,
        }
        return {**normal, **self.asked()}

    def asked(self) -> dict[str, Any]:
        """What else the request names, absent when not named: earlier fingerprints hold."""
        asked: dict[str, Any] = {}
        if self.attachment_id is not None:
            asked["attachment_id"] = self.attachment_id
        if self.days is not None:
            asked["days"] = self.days
        return asked

    def fingerprint(self) -> str:
        """SHA-256 of the normalised request as sorted-key JSON; fields the server ignores
        (`actor_id`) and the request id itself are not part of it."""
        return bindings.fingerprint(self.normalised())


@dataclass(frozen=True)
class LeaseRequest:
    """A frozen request: the id the browser minted, and the intent it names."""

    request_id: str
    intent: Intent


def _id_list(body: dict[str, Any], plural: str, singular: str) -> list[Any] | None:
    value = body.get(plural, body.get(singular))
    if value is None:
        return None
    return value if isinstance(value, list) else [value]


def _canonical_uuid(value: object) -> str:
    if not isinstance(value, str) or len(value) > 36:
        raise Refusal("invalid_body", _("Each invoice id must be a UUID."))
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise Refusal("invalid_body", _("Each invoice id must be a UUID.")) from None


def parse_intent(body: dict[str, Any], providers: Providers, max_tasks: int) -> Intent:
    """Validate and normalise what is asked for; every refusal names what is wrong.
    Any `actor_id` in the body is ignored: the actor is the session's."""
    purpose = purpose_named(WORDING if body.get("purpose") == "draft_reminder"
                            and body.get("days") not in (None, "") else body.get("purpose"))
    invoice_ids = _id_list(body, "invoice_ids", "invoice_id")
    if not invoice_ids:
        raise Refusal("invalid_body", _("Choose at least one invoice."))
    asked = _id_list(body, "providers", "provider")
    if asked is None:
        asked = [AUTO]
    if not asked or not all(isinstance(name, str) for name in asked):
        raise Refusal("invalid_body",
                      _("Name each one to ask for suggestions by its name, as text."))
    known = providers.names()
    if any(name not in known for name in asked):
        raise Refusal("unknown_provider", _(
            "That is not one the studio can ask for suggestions; choose among: %(known)s.")
            % {"known": ", ".join(known)})
    candidates = body.get("candidates", 1)
    if isinstance(candidates, str) and candidates.isascii() and candidates.isdigit() \
            and len(candidates) < 3:
        candidates = int(candidates)  # a form field is text
    if type(candidates) is not int or not 1 <= candidates <= MAX_CANDIDATES:
        raise Refusal(
            "invalid_body",
            _("Ask for 1 to %(most)s suggestions from each (a whole number).")
            % {"most": MAX_CANDIDATES},
        )
    intent = Intent(
        purpose=purpose.name,
        invoice_ids=tuple(sorted({_canonical_uuid(value) for value in invoice_ids})),
        providers=tuple(sorted(set(asked))),
        candidates=candidates,
        attachment_id=_picked_receipt(body, purpose.reads_receipts, len(invoice_ids)),
        days=_reminder_days(body, purpose.asks_days, len(invoice_ids)),
    )
    if intent.task_count > max_tasks:
        raise Refusal(
            "too_many_tasks",
            _("That asks for %(count)s suggestions; the most in one request is %(most)s."
              " Choose fewer invoices, or fewer suggestions each.")
            % {"count": intent.task_count, "most": max_tasks},
        )
    return intent


def _picked_receipt(body: dict[str, Any], reads_receipts: bool, invoices: int) -> str | None:
    """The attachment a reading is to read, if the person picked one (else the newest)."""
    picked = body.get("attachment_id")
    if picked is None or picked == "":
        return None
    if not reads_receipts:
        raise Refusal("invalid_body", _("Only reading a receipt takes an attachment to read."))
    if invoices != 1:
        raise Refusal("invalid_body", _("Pick a receipt to read for one draft at a time."))
    try:
        if not isinstance(picked, str) or len(picked) > 36:
            raise ValueError
        return str(uuid.UUID(picked))
    except ValueError:
        raise Refusal("invalid_body", _("The receipt to read must be named by its attachment"
                                        " id.")) from None


def _reminder_days(body: dict[str, Any], asks_days: bool, invoices: int) -> int | None:
    """The reminder step a wording is for, by its days from the due date (-3: before)."""
    days = body.get("days")
    if not asks_days:
        if days not in (None, ""):
            raise Refusal("invalid_body", _("Only reminder wording is asked for a step's days."))
        return None
    if isinstance(days, str) and re.fullmatch(r"\s*-?[0-9]{1,3}\s*", days):
        days = int(days)
    if type(days) is not int or not -MAX_REMINDER_DAYS <= days <= MAX_REMINDER_DAYS:
        raise Refusal("invalid_body", _(
            "Name the reminder step by its days from the due date: a whole number from"
            " -%(most)s to %(most)s.") % {"most": MAX_REMINDER_DAYS})
    if invoices != 1:
        raise Refusal("invalid_body", _("Reminder wording takes one invoice as its example."))
    return days


def parse_request(body: dict[str, Any], providers: Providers, max_tasks: int) -> LeaseRequest:
    return LeaseRequest(bindings.parse_request_id(body),
                        parse_intent(body, providers, max_tasks))


def plan_tasks(intent: Intent, providers: list[str]) -> Plan:
    """One task per invoice x provider x candidate."""
    return [
        (invoice_id, provider, candidate)
        for invoice_id in intent.invoice_ids
        for provider in providers
        for candidate in range(1, intent.candidates + 1)
    ]


def _receipt(db: sqlite3.Connection, lease_id: str) -> dict[str, Any]:
    lease = db.execute(
        "SELECT id, status, deadline_at, task_count FROM leases WHERE id = ?", (lease_id,)
    ).fetchone()
    return {
        "lease_id": lease["id"],
        "status": lease["status"],
        "deadline_at": timestamp(lease["deadline_at"]),
        "tasks": lease["task_count"],
    }


def _bound(db: sqlite3.Connection, actor_id: str, request: LeaseRequest) -> dict | None:
    """What this actor's request id already made, None if nothing; 409 for other input."""
    lease_id = bindings.bound(db, actor_id, "lease", request.request_id,
                              request.intent.fingerprint())
    return None if lease_id is None else _receipt(db, lease_id)


def _fences(db: sqlite3.Connection, actor_id: str, intent: Intent) -> dict[str, str]:
    """Each target's fence (what apply must still find), once the purpose accepts every one:
    404 unless all are the actor's, then the purpose's own refusals (an issued invoice's
    receipt, a paid invoice's reminder), before any model call."""
    purpose = PURPOSES[intent.purpose]
    targets = {row["id"]: row for row in db.execute(
        "SELECT * FROM invoices WHERE owner_id = ? AND status != 'deleted'"
        " AND id IN (SELECT value FROM json_each(?))", (actor_id, json.dumps(intent.invoice_ids)))}
    if len(targets) != len(intent.invoice_ids):
        raise Refusal("invoice_not_found")
    for invoice_id in intent.invoice_ids:
        purpose.refuse(db, targets[invoice_id])
    if intent.attachment_id is not None and db.execute(
            "SELECT 1 FROM attachments WHERE id = ? AND owner_id = ? AND invoice_id = ?",
            (intent.attachment_id, actor_id, intent.invoice_ids[0])).fetchone() is None:
        raise Refusal("attachment_not_found", _("That receipt is not attached to this draft;"
                                                " choose one of its attachments."))
    return {invoice_id: purpose.fence(db, targets[invoice_id], intent.asked())
            for invoice_id in intent.invoice_ids}


def check_targets(db: sqlite3.Connection, actor_id: str, intent: Intent) -> None:
    """The review step's look: refused as the submit would be, before anything is asked."""
    _fences(db, actor_id, intent)


def _early_look(db: sqlite3.Connection, actor_id: str, request: LeaseRequest) -> dict | None:
    receipt = _bound(db, actor_id, request)
    if receipt is None:
        _fences(db, actor_id, request.intent)
    return receipt


def create_lease(
    db: sqlite3.Connection,
    actor: Actor,
    request: LeaseRequest,
    plan: Plan,
    lease_seconds: float,
    now: float | None = None,
    max_open_tasks: int | None = None,
) -> tuple[dict[str, Any], bool]:
    """Commit the request binding, the lease and its complete task tree together
    (invariant 1); the binding is checked again here, under BEGIN IMMEDIATE, and so is the
    cap on what one actor may have waiting."""
    hold(db, account_lock(actor.id))
    now = clock(now)
    receipt = _bound(db, actor.id, request)
    if receipt is not None:
        return receipt, False
    # A sign-out that committed while this request was planning leaves no lease behind, and
    # one that comes now waits for this commit, then finds the lease and expires it.
    if db.execute(f"SELECT 1 FROM sessions WHERE id = ? {dialect_of(db).key_share}",
                  (actor.session_id,)).fetchone() is None:
        raise Refusal("not_signed_in")
    intent = request.intent
    fences = _fences(db, actor.id, intent)
    if max_open_tasks is not None:
        waiting = _waiting_tasks(db, actor.id)
        if waiting + len(plan) > max_open_tasks:
            raise Refusal("too_many_open_tasks", _(
                "You have %(waiting)s suggestions still being written and this request adds"
                " %(adds)s; at most %(most)s may wait at once. Wait for some to finish, or stop"
                " a request, then ask again.")
                % {"waiting": waiting, "adds": len(plan), "most": max_open_tasks})
    options: dict[str, Any] = {"providers": list(intent.providers),
                               "candidates": intent.candidates}
    options.update(intent.asked())  # the receipt the worker reads; the step it words
    options["language"] = i18n.current()  # what the worker's summaries are said in

    def make(lease_id: str) -> None:
        db.execute(
            "INSERT INTO leases (id, actor_id, session_id, purpose, options, status,"
            " deadline_at, created_at, task_count) VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?)",
            (lease_id, actor.id, actor.session_id, intent.purpose, json.dumps(options),
             now + lease_seconds, now, len(plan)),
        )
        db.executemany(
            "INSERT INTO lease_invoices (lease_id, invoice_id, position, fence)"
            " VALUES (?, ?, ?, ?)",
            [(lease_id, invoice_id, n, fences[invoice_id])
             for n, invoice_id in enumerate(intent.invoice_ids)],
        )
        db.executemany(
            "INSERT INTO tasks (id, lease_id, invoice_id, provider, candidate, position)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (str(uuid.uuid4()), lease_id, invoice_id, provider, candidate, n)
                for n, (invoice_id, provider, candidate) in enumerate(plan)
            ],
        )

    lease_id = bindings.once(db, actor.id, "lease", request.request_id,
                             intent.fingerprint(), make, now)[0]
    record_event(db, lease_id, "created", f"{len(plan)} tasks", now)
    logs.state_change("lease", lease_id, actor.id, None, "open", "submitted")
    return _receipt(db, lease_id), True


def _waiting_tasks(db: sqlite3.Connection, actor_id: str) -> int:
    return db.execute(
        f"SELECT COUNT(*) FROM leases JOIN tasks {dialect_of(db).tasks_waiting}"
        " ON tasks.lease_id = leases.id WHERE leases.actor_id = ? AND leases.status = 'open'"
        " AND tasks.status IN ('pending', 'running')",
        (actor_id,),
    ).fetchone()[0]


async def submit(
    db: Database, providers: Providers, actor: Actor, request: LeaseRequest, lease_seconds: float,
    max_open_tasks: int | None = None,
) -> tuple[dict[str, Any], bool]:
    """Submit a frozen request: (receipt, created). Network work happens between the early
    look (an optimisation) and the write transaction (the guarantee), never inside it."""
    receipt = await db.read(_early_look, actor.id, request)
    if receipt is not None:
        return receipt, False
    plan = plan_tasks(request.intent, await providers.resolve(list(request.intent.providers)))
    return await db.write(create_lease, actor, request, plan, lease_seconds,
                          max_open_tasks=max_open_tasks)

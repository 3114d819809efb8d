"""The lease state machine, with the SQL that enforces it.

    open --(all tasks finished, >=1 proposal)--> proposed --(apply)--> applied
    open --(all tasks failed)--> failed
    open | proposed --(cancel)--> rejected
    open | proposed --(deadline passed / sign-out)--> expired

Every write here is a conditional statement on the lease row (status, actor, deadline), so a
late or stale writer changes nothing. The final states are never left and the deadline is
never extended. Units take a `sqlite3.Connection` and run inside one transaction
(`Database.write`); the async functions below are what handlers call.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import uuid
from typing import Any

from studio import counters, logs
from studio.accounts.auth import Actor, expired_sessions, sessions_of
from studio.errors import Refusal
from studio.i18n import gettext
from studio.leasing.purposes import PURPOSES
from studio.store import paging
from studio.store.db import Database
from studio.store.dialect import account_lock, dialect_of, hold
from studio.store.transactions import after_commit, clock, timestamp

log = logging.getLogger("studio.leases")

LIVE = ("open", "proposed")
FINAL = ("applied", "rejected", "expired", "failed")


def _changed(lease_id: str, actor_id: str | None, from_: str, to: str, reason: str) -> None:
    logs.state_change("lease", lease_id, actor_id, from_, to, reason)


def record_event(db: sqlite3.Connection, lease_id: str, kind: str, detail: str, now: float) -> None:
    db.execute(
        "INSERT INTO lease_events (lease_id, kind, detail, created_at) VALUES (?, ?, ?, ?)",
        (lease_id, kind, detail, now),
    )


# --- generation: proposals arrive only while the lease is open -----------------------------


def record_proposal(
    db: sqlite3.Connection, task_id: str, claim: str, actor_id: str, text: str,
    now: float | None = None, proposal: dict[str, Any] | None = None,
) -> bool:
    """Save one task's proposal, only while its lease is open, its actor unchanged, its
    deadline ahead and the task still held by this attempt (invariant 3).

    A task that already has a proposal keeps it (invariant 5). Anything else is a late
    completion: an event and a log line, never a write. Returns whether the proposal counts.
    """
    lease_id = _lock_task_and_lease(db, task_id)
    if lease_id is None:
        return False
    now = clock(now)
    saved = db.execute(
        """
        INSERT INTO proposals (id, task_id, lease_id, invoice_id, provider, summary, proposal,
                               created_at)
        SELECT ?, tasks.id, tasks.lease_id, tasks.invoice_id, tasks.provider, ?, ?, ?
          FROM tasks JOIN leases ON leases.id = tasks.lease_id
         WHERE tasks.id = ? AND tasks.status = 'running' AND tasks.claim = ?
           AND leases.status = 'open' AND leases.actor_id = ? AND leases.deadline_at > ?
        ON CONFLICT (task_id) DO NOTHING
        """,
        (str(uuid.uuid4()), text, json.dumps(proposal if proposal is not None
                                             else {"summary": text}),
         now, task_id, claim, actor_id, now),
    ).rowcount
    finished = db.execute(
        """
        UPDATE tasks SET status = 'done', claim = NULL, claim_expires_at = NULL, error = NULL
         WHERE id = ? AND status = 'running' AND claim = ?
           AND EXISTS (SELECT 1 FROM proposals WHERE proposals.task_id = tasks.id)
           AND EXISTS (SELECT 1 FROM leases WHERE leases.id = tasks.lease_id
                        AND leases.status = 'open' AND leases.actor_id = ?
                        AND leases.deadline_at > ?)
        """,
        (task_id, claim, actor_id, now),
    ).rowcount
    if not finished:
        lease = db.execute(
            "SELECT status, deadline_at FROM leases WHERE id = ?", (lease_id,)
        ).fetchone()
        detail = f"task {task_id}: lease {lease['status']}"
        if lease["status"] == "open" and lease["deadline_at"] <= now:
            detail = f"task {task_id}: deadline passed"
        elif lease["status"] == "open":
            detail = f"task {task_id}: claim no longer held"
        record_event(db, lease_id, "late_completion", detail, now)
        after_commit(functools.partial(
            log.info, "late completion for lease %s, written nowhere (%s)", lease_id, detail))
        after_commit(counters.late_completions_total.inc)
        return False
    if not saved:
        log.info("task %s already had its proposal; reused it", task_id)
    settle(db, lease_id, now)
    return True


def fail_task(db: sqlite3.Connection, task_id: str, claim: str, error: str, retry: bool,
              now: float | None = None) -> None:
    """Record a provider error: put the task back for another attempt, or mark it failed."""
    lease_id = _lock_task_and_lease(db, task_id)
    if lease_id is None:
        return
    now = clock(now)
    status = "pending" if retry else "failed"
    changed = db.execute(
        "UPDATE tasks SET status = ?, claim = NULL, claim_expires_at = NULL, error = ?"
        " WHERE id = ? AND status = 'running' AND claim = ?",
        (status, error[:500], task_id, claim),
    ).rowcount
    if changed:
        record_event(db, lease_id, "provider_error", f"task {task_id}: {error[:200]}", now)
        if not retry:
            settle(db, lease_id, now)


def still_open(db: sqlite3.Connection, lease_id: str) -> bool:
    """Whether a running task's lease is still open: a lease stopped or ended stops its work."""
    return db.execute("SELECT 1 FROM leases WHERE id = ? AND status = 'open'",
                      (lease_id,)).fetchone() is not None


def _lock_task_and_lease(db: sqlite3.Connection, task_id: str) -> str | None:
    """Lock the task's row, then its lease's (always in that order), and name the lease: a
    claim cannot take the task over while its proposal is being saved, and of two tasks
    finishing at once the second to settle sees the first finished."""
    lock = dialect_of(db).for_update
    task = db.execute(f"SELECT lease_id FROM tasks WHERE id = ? {lock}", (task_id,)).fetchone()
    if task is None:
        return None
    if lock:  # SQLite's one writer holds every row already
        db.execute(f"SELECT 1 FROM leases WHERE id = ? {lock}", (task["lease_id"],))
    return task["lease_id"]


def settle(db: sqlite3.Connection, lease_id: str, now: float) -> None:
    """Once no task is waiting or running: proposed with at least one proposal, else failed."""
    waiting = db.execute(
        "SELECT 1 FROM tasks WHERE lease_id = ? AND status IN ('pending', 'running') LIMIT 1",
        (lease_id,),
    ).fetchone()
    if waiting:
        return
    has_proposal = db.execute(
        "SELECT 1 FROM proposals WHERE lease_id = ? LIMIT 1", (lease_id,)
    ).fetchone()
    if has_proposal:
        moved = db.execute(
            "UPDATE leases SET status = 'proposed' WHERE id = ? AND status = 'open'"
            " AND deadline_at > ? RETURNING actor_id",
            (lease_id, now),
        ).fetchone()
        kind, reason = "proposed", "tasks_finished"
    else:
        # Past the deadline the lease is the sweeper's to expire, not a failure.
        moved = db.execute(
            "UPDATE leases SET status = 'failed', ended_at = ?, ended_reason = 'no_proposal'"
            " WHERE id = ? AND status = 'open' AND deadline_at > ? RETURNING actor_id",
            (now, lease_id, now),
        ).fetchone()
        kind, reason = "failed", "no_proposal"
    if moved:
        record_event(db, lease_id, kind, "", now)
        _changed(lease_id, moved["actor_id"], "open", kind, reason)


# --- endings: deadline, sign-out, cancel, apply ----------------------------------------------


def expire_due(db: sqlite3.Connection, now: float | None = None) -> int:
    """Expire every live lease whose deadline has passed; the deadline wins a silent client."""
    now = clock(now)
    # Locked, passing over a lease an apply or a proposal holds: it is expired next round.
    due_rows = db.execute(
        "SELECT id, actor_id, status FROM leases WHERE status IN ('open', 'proposed')"
        f" AND deadline_at <= ? {dialect_of(db).skip_locked_row}",
        (now,),
    ).fetchall()
    due = [row["id"] for row in due_rows]
    for row in due_rows:
        _changed(row["id"], row["actor_id"], row["status"], "expired", "deadline")
    db.executemany(
        "UPDATE leases SET status = 'expired', ended_at = ?, ended_reason = 'deadline'"
        " WHERE id = ? AND status IN ('open', 'proposed')",
        [(now, lease_id) for lease_id in due],
    )
    db.executemany(
        "INSERT INTO lease_events (lease_id, kind, detail, created_at)"
        " VALUES (?, 'expired', 'deadline', ?)",
        [(lease_id, now) for lease_id in due],
    )
    return len(due)


def any_due(db: sqlite3.Connection, now: float | None = None) -> bool:
    now = clock(now)
    return db.execute(
        "SELECT 1 FROM leases WHERE status IN ('open', 'proposed') AND deadline_at <= ? LIMIT 1",
        (now,),
    ).fetchone() is not None


def hand_over(db: sqlite3.Connection, previous: str, session_id: str, actor_id: str,
              now: float) -> None:
    """The same person signing in again keeps their running requests on the new session; what
    the old session held otherwise ends with it. Runs inside the sign-in's transaction, after
    the old session is gone (`auth.Sessions(handover=...)`)."""
    db.execute(
        "UPDATE leases SET session_id = ? WHERE session_id = ? AND actor_id = ?"
        " AND status IN ('open', 'proposed')",
        (session_id, previous, actor_id),
    )
    end_session(db, previous, now)


def end_session(db: sqlite3.Connection, session_id: str, now: float | None = None,
                reason: str = "signed_out") -> int:
    """Sign-out: delete the session and expire the live leases it opened (invariant 6).
    `reason` says why the session ended (signed_out, password_changed, account_disabled)."""
    now = clock(now)
    db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
    live = db.execute(
        "SELECT id, actor_id, status FROM leases"
        f" WHERE session_id = ? AND status IN ('open', 'proposed') {dialect_of(db).for_update}",
        (session_id,),
    ).fetchall()
    expire_leases(db, live, reason, now)
    return len(live)


def expire_leases(db: sqlite3.Connection, live: list[sqlite3.Row], reason: str,
                  now: float) -> None:
    """Expire these live leases (rows of id, actor_id, status read in this transaction)."""
    db.executemany(
        "UPDATE leases SET status = 'expired', ended_at = ?, ended_reason = ?"
        " WHERE id = ? AND status IN ('open', 'proposed')",
        [(now, reason, row["id"]) for row in live],
    )
    db.executemany(
        "INSERT INTO lease_events (lease_id, kind, detail, created_at)"
        " VALUES (?, 'expired', ?, ?)",
        [(row["id"], reason, now) for row in live],
    )
    for row in live:
        _changed(row["id"], row["actor_id"], row["status"], "expired", reason)


def end_every_session(db: sqlite3.Connection, actor_id: str,
                      now: float | None = None) -> tuple[int, int]:
    """Sign out everywhere: every session of the actor ends, with its live leases.
    Returns (sessions ended, leases expired)."""
    now = clock(now)
    sessions = sessions_of(db, actor_id)
    return len(sessions), sum(end_session(db, session_id, now) for session_id in sessions)


def end_expired_sessions(db: sqlite3.Connection, idle_seconds: float, max_seconds: float,
                         now: float | None = None) -> int:
    """The sweeper's share of session expiry: an expired session ends like a sign-out, its
    live leases expired with reason `session_expired`. Returns how many sessions ended."""
    now = clock(now)
    ended = 0
    for session_id in expired_sessions(db, now, idle_seconds, max_seconds, skip_locked=True):
        if _leases_held_elsewhere(db, session_id):
            continue  # a lease of it is being applied or proposed: ended next round
        end_session(db, session_id, now, reason="session_expired")
        ended += 1
    return ended


def _leases_held_elsewhere(db: sqlite3.Connection, session_id: str) -> bool:
    """Whether another transaction holds one of the session's live leases. The sweep passes
    over such a session rather than wait: a host paused inside an apply would otherwise hold
    up the expiry of every other account's sessions. The leases it could lock stay locked
    by this transaction, as ending the session needs."""
    skip_locked = dialect_of(db).skip_locked_row
    if not skip_locked:
        return False  # SQLite: one writer at a time, nothing is held elsewhere
    live = "SELECT id FROM leases WHERE session_id = ? AND status IN ('open', 'proposed')"
    every = db.execute(live, (session_id,)).fetchall()
    free = db.execute(f"{live} {skip_locked}", (session_id,)).fetchall()
    return len(free) < len(every)


def proposal_of(row: sqlite3.Row) -> dict[str, Any]:
    """A stored proposal; one saved before proposals had a shape is its summary."""
    return json.loads(row["proposal"]) if row["proposal"] else {"summary": row["summary"]}


def _own_lease(db: sqlite3.Connection, lease_id: str, actor_id: str, lock: bool = False
               ) -> sqlite3.Row | None:
    """The lease if it is this actor's; another actor's lease is as absent as a made-up id.
    A write `lock`s it until its transaction ends: the sweeper and a worker's proposal wait."""
    return db.execute(
        f"SELECT * FROM leases WHERE id = ? AND actor_id = ?"
        f" {dialect_of(db).for_update if lock else ''}",
        (lease_id, actor_id),
    ).fetchone()


def _expire_if_due(db: sqlite3.Connection, lease: sqlite3.Row, now: float) -> bool:
    if lease["status"] not in LIVE or lease["deadline_at"] > now:
        return False
    db.execute(
        "UPDATE leases SET status = 'expired', ended_at = ?, ended_reason = 'deadline'"
        " WHERE id = ? AND status IN ('open', 'proposed')",
        (now, lease["id"]),
    )
    record_event(db, lease["id"], "expired", "deadline", now)
    _changed(lease["id"], lease["actor_id"], lease["status"], "expired", "deadline")
    return True


def cancel(db: sqlite3.Connection, lease_id: str, actor_id: str,
           now: float | None = None) -> str:
    """Reject a live lease; a lease past its deadline is expired instead, in this transaction.
    Returns the outcome code: `rejected` or the refusal to raise after commit."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    lease = _own_lease(db, lease_id, actor_id, lock=True)
    if lease is None:
        return "lease_not_found"
    if _expire_if_due(db, lease, now):
        return "lease_not_cancelable"
    rejected = db.execute(
        "UPDATE leases SET status = 'rejected', ended_at = ?, ended_reason = 'cancelled'"
        " WHERE id = ? AND actor_id = ? AND status IN ('open', 'proposed') AND deadline_at > ?",
        (now, lease_id, actor_id, now),
    ).rowcount
    if not rejected:
        return "lease_not_cancelable"
    record_event(db, lease_id, "rejected", "cancelled", now)
    _changed(lease_id, actor_id, lease["status"], "rejected", "cancelled")
    return "rejected"


def apply(
    db: sqlite3.Connection, lease_id: str, actor_id: str, choices: dict[str, str],
    now: float | None = None,
) -> str:
    """The person's decision, in one transaction (invariant 4): 404 unless the actor's,
    409 unless proposed, 409 `lease_expired` past the deadline (expiring it here), and each
    invoice write also requires `owner_id = actor`. Returns `applied` or a refusal code."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    lease = _own_lease(db, lease_id, actor_id, lock=True)
    if lease is None:
        return "lease_not_found"
    if _expire_if_due(db, lease, now):
        return "lease_expired"
    if lease["status"] != "proposed":
        return f"lease_{lease['status']}"
    candidates: dict[str, list[sqlite3.Row]] = {}
    for row in db.execute(
        "SELECT proposals.id, proposals.invoice_id, proposals.summary, proposals.proposal"
        " FROM proposals JOIN tasks ON tasks.id = proposals.task_id"
        " WHERE proposals.lease_id = ? ORDER BY tasks.position",
        (lease_id,),
    ):
        candidates.setdefault(row["invoice_id"], []).append(row)
    chosen: list[sqlite3.Row] = []
    for invoice_id, choice in choices.items():
        if not any(row["id"] == choice for row in candidates.get(invoice_id, [])):
            raise Refusal("invalid_choice")
    for invoice_id, rows in candidates.items():
        choice = choices.get(invoice_id, rows[0]["id"])
        chosen.append(next(row for row in rows if row["id"] == choice))
    # What apply may write is the purpose's, from the allow-list, never from a request; it
    # writes only where the invoice is still as the lease found it (the fence).
    purpose = PURPOSES[lease["purpose"]]
    for row in chosen:
        target = db.execute(
            "SELECT invoices.*, lease_invoices.fence FROM invoices JOIN lease_invoices"
            " ON lease_invoices.invoice_id = invoices.id AND lease_invoices.lease_id = ?"
            f" WHERE invoices.id = ? AND invoices.owner_id = ? {dialect_of(db).for_update}",
            (lease_id, row["invoice_id"], actor_id),
        ).fetchone()
        if target is None:
            raise Refusal("invoice_not_found")
        purpose.write(db, actor_id, target, proposal_of(row), target["fence"] or "")
    db.executemany(
        "UPDATE proposals SET applied_at = ? WHERE id = ?", [(now, row["id"]) for row in chosen]
    )
    applied = db.execute(
        "UPDATE leases SET status = 'applied', ended_at = ?, ended_reason = 'applied'"
        " WHERE id = ? AND actor_id = ? AND status = 'proposed' AND deadline_at > ?",
        (now, lease_id, actor_id, now),
    ).rowcount
    if applied != 1:  # unreachable with the lease row locked; kept so no write survives if not
        raise Refusal("lease_not_found")
    record_event(db, lease_id, "applied", f"{len(chosen)} invoices", now)
    _changed(lease_id, actor_id, "proposed", "applied", "applied")
    return "applied"


async def apply_lease(db: Database, actor: Actor, lease_id: str, choices: dict[str, str]) -> dict:
    outcome = await db.write(apply, lease_id, actor.id, choices)
    if outcome != "applied":
        raise Refusal(outcome)
    return {"status": "applied", "lease_id": lease_id}


async def cancel_lease(db: Database, actor: Actor, lease_id: str) -> dict:
    outcome = await db.write(cancel, lease_id, actor.id)
    if outcome != "rejected":
        raise Refusal(outcome)
    return {"status": "rejected", "lease_id": lease_id}


async def expire_session(db: Database, session_id: str) -> int:
    return await db.write(end_session, session_id)


async def sign_out_everywhere(db: Database, actor: Actor) -> tuple[int, int]:
    return await db.write(end_every_session, actor.id)


# --- reading ---------------------------------------------------------------------------------


def view(db: sqlite3.Connection, lease_id: str, actor_id: str) -> dict[str, Any] | None:
    """The lease as its actor sees it: status, progress and the candidates per invoice."""
    lease = _own_lease(db, lease_id, actor_id)
    if lease is None:
        return None
    done, failed = db.execute(
        "SELECT COUNT(CASE WHEN status = 'done' THEN 1 END),"
        " COUNT(CASE WHEN status = 'failed' THEN 1 END) FROM tasks WHERE lease_id = ?",
        (lease_id,),
    ).fetchone()
    invoices: dict[str, dict[str, Any]] = {}
    for row in db.execute(
        "SELECT invoices.id, invoices.number, invoices.customer, invoices.summary,"
        " invoices.currency FROM lease_invoices"
        " JOIN invoices ON invoices.id = lease_invoices.invoice_id"
        " WHERE lease_invoices.lease_id = ? ORDER BY invoices.number, lease_invoices.position",
        (lease_id,),
    ):
        invoices[row["id"]] = {
            "invoice_id": row["id"],
            "number": row["number"],
            "customer": row["customer"],
            "currency": row["currency"],
            "current_summary": row["summary"],
            "candidates": [],
        }
    for row in db.execute(
        "SELECT proposals.id, proposals.invoice_id, proposals.provider, proposals.summary,"
        " proposals.proposal, proposals.applied_at"
        " FROM proposals JOIN tasks ON tasks.id = proposals.task_id"
        " WHERE proposals.lease_id = ? ORDER BY tasks.position",
        (lease_id,),
    ):
        invoices[row["invoice_id"]]["candidates"].append({
            "proposal_id": row["id"],
            "provider": row["provider"],
            "summary": row["summary"],
            "proposal": proposal_of(row),
            "applied": row["applied_at"] is not None,
        })
    options = json.loads(lease["options"])
    # Why its tasks failed, each reason once, in words a person can read.
    errors = [row[0] for row in db.execute(
        "SELECT DISTINCT error FROM tasks WHERE lease_id = ? AND status = 'failed'"
        " AND error IS NOT NULL", (lease_id,))]
    failures = sorted({failure_words(error) for error in errors})[:3]
    return {
        "lease_id": lease["id"],
        "status": lease["status"],
        "purpose": lease["purpose"],
        "deadline_at": timestamp(lease["deadline_at"]),
        "created_at": timestamp(lease["created_at"]),
        "ended_reason": lease["ended_reason"],
        "providers": options["providers"],
        "candidates_per_invoice": options["candidates"],
        **({"days": options["days"]} if "days" in options else {}),
        "progress": {"total": lease["task_count"], "done": done, "failed": failed},
        "failures": failures,
        # Every task failed on the file itself: the same file fails the same way again.
        "file_unreadable": bool(errors) and all(error.startswith(FILE_FAILURES)
                                                for error in errors),
        "invoices": list(invoices.values()),
    }


FILE_FAILURES = ("The receipt could not be read", "The draft has no receipt to read")


def failure_words(error: str) -> str:
    """A failed task's reason as the request's page says it. A reading's own reason is a
    sentence already ("The receipt could not be read: the PDF is locked with a password.");
    an answer that did not fit is said with what did not fit; anything else (a model server's
    error, a timeout) as the writer not answering, its detail left to the log."""
    code, _, detail = error.partition(": ")
    if code == "invalid_proposal":
        return gettext("The suggestion did not fit what this request asks for: %(why)s") % {
            "why": detail}
    if code == "The receipt could not be read" and detail.endswith("."):
        # The reason a reader gives is in the catalogue where it is said in words alone.
        return gettext("The receipt could not be read: %(why)s.") % {
            "why": gettext(detail[:-1])}
    if error[:1].isupper() and " " in code:
        return gettext(error)
    if code == "TimeoutError":
        return gettext("The writer did not answer in time.")
    return gettext("The writer did not answer with a suggestion; asking again may work.")


async def read_lease(db: Database, actor: Actor, lease_id: str) -> dict[str, Any]:
    found = await db.read(view, lease_id, actor.id)
    if found is None:
        raise Refusal("lease_not_found")
    return found


# The history: newest first, a page being a range of leases_listed (migration 9).
_REQUEST_COLUMNS = "id, status, purpose, options, created_at, ended_reason, task_count"
REQUESTS_FIRST = (
    f"SELECT {_REQUEST_COLUMNS} FROM leases WHERE actor_id = :actor"
    " ORDER BY created_at DESC, id DESC LIMIT :limit")
REQUESTS_AFTER = (
    f"SELECT {_REQUEST_COLUMNS} FROM leases WHERE actor_id = :actor"
    " AND (created_at, id) < (:at, :key) ORDER BY created_at DESC, id DESC LIMIT :limit")
REQUESTS_NAMING = (
    f"SELECT {_REQUEST_COLUMNS} FROM leases WHERE actor_id = :actor AND id IN"
    " (SELECT lease_id FROM lease_invoices WHERE invoice_id = :invoice)"
    " ORDER BY created_at DESC, id DESC LIMIT :limit")
LIST_QUERIES = [(sql, {"actor": "", "at": 0.0, "key": "", "limit": 1})
                for sql in (REQUESTS_FIRST, REQUESTS_AFTER)]


def _described(db: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
    """The requests as the history lists them, with the invoices each named."""
    named: dict[str, list[str]] = {row["id"]: [] for row in rows}
    if named:
        marks = ", ".join("?" * len(named))
        for lease_id, invoice_id in db.execute(
                f"SELECT lease_id, invoice_id FROM lease_invoices WHERE lease_id IN ({marks})",
                list(named)):
            named[lease_id].append(invoice_id)
    found = []
    for row in rows:
        options = json.loads(row["options"])
        found.append({
            "lease_id": row["id"], "status": row["status"], "purpose": row["purpose"],
            "label": PURPOSES[row["purpose"]].label if row["purpose"] in PURPOSES else "",
            "created_at": timestamp(row["created_at"]), "ended_reason": row["ended_reason"],
            "tasks": row["task_count"], "invoice_ids": sorted(named[row["id"]]),
            "providers": options.get("providers", []),
            "candidates": options.get("candidates", 1),
        })
    return found


def requests_of(db: sqlite3.Connection, actor_id: str, invoice_id: str, limit: int
                 ) -> list[dict[str, Any]]:
    """The newest requests that named one invoice, for its page."""
    rows = db.execute(REQUESTS_NAMING, {"actor": actor_id, "invoice": invoice_id,
                                        "limit": limit}).fetchall()
    return _described(db, rows)


def _requests_page(db: sqlite3.Connection, actor_id: str, limit: int,
                   after: list[Any] | None) -> paging.Page[dict[str, Any]]:
    """One page of the actor's history after the cursor's request, and the next cursor."""
    at, key = paging.key_of(after, float, str) if after else (0.0, "")
    rows = db.execute(REQUESTS_AFTER if after else REQUESTS_FIRST,
                      {"actor": actor_id, "at": at, "key": key, "limit": limit + 1}).fetchall()
    following = None
    if len(rows) > limit:
        following = paging.cursor([rows[limit - 1]["created_at"], rows[limit - 1]["id"]])
    return paging.Page(_described(db, rows[:limit]), following)


async def list_requests(db: Database, actor: Actor, invoice_id: str, limit: int = 20
                        ) -> list[dict[str, Any]]:
    return await db.read(requests_of, actor.id, invoice_id, limit)


async def requests_page(db: Database, actor: Actor, limit: int = paging.DEFAULT_LIMIT,
                        after: list[Any] | None = None) -> paging.Page[dict[str, Any]]:
    return await db.read(_requests_page, actor.id, limit, after)

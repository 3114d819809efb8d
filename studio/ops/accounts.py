"""Accounts as an operator manages them: add, list, disable, change a password.

Units take a `sqlite3.Connection` and run inside one transaction
(`studio.store.transactions.in_transaction`), so `studio users ...` works against the same
file a running studio serves: a disabled account's sessions and leases end in the same commit,
and the server sees it on the next request.
"""

from __future__ import annotations

import shlex
import sqlite3
import uuid
from dataclasses import dataclass

from studio import logs
from studio.accounts.auth import hasher
from studio.config import Settings
from studio.leasing import leases
from studio.store.db import Database
from studio.store.dialect import account_lock, dialect_of, hold
from studio.store.transactions import clock

MIN_PASSWORD = 8
MAX_PASSWORD = 1024
MAX_EMAIL = 254


class AccountError(Exception):
    """An operator's command that cannot be done, with the sentence that says why."""


@dataclass(frozen=True)
class Account:
    email: str
    created_at: float
    disabled_at: float | None
    sessions: int


def normal_email(email: str) -> str:
    email = email.strip().lower()
    local, _, domain = email.partition("@")
    if not local or "." not in domain or len(email) > MAX_EMAIL or any(c.isspace() for c in email):
        raise AccountError(f"{email!r} is not an email address (like name@example.com).")
    return email


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise AccountError(f"The password must be at least {MIN_PASSWORD} characters.")
    if len(password) > MAX_PASSWORD:
        raise AccountError(f"The password must be at most {MAX_PASSWORD} characters.")


def actor_of(db: sqlite3.Connection, email: str) -> str:
    row = db.execute("SELECT id FROM actors WHERE email = ?", (email,)).fetchone()
    if row is None:
        raise AccountError(f"There is no account for {email}; `studio users list` shows them.")
    return row["id"]


def add(db: sqlite3.Connection, email: str, password_hash: str) -> str:
    """A new account; the hash is made before the transaction so the lock is held briefly."""
    if db.execute("SELECT 1 FROM actors WHERE email = ?", (email,)).fetchone():
        raise AccountError(f"An account for {email} already exists.")
    actor_id = str(uuid.uuid4())
    db.execute(
        "INSERT INTO actors (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)",
        (actor_id, email, password_hash, clock(None)),
    )
    logs.state_change("account", actor_id, None, None, "active", "operator")
    return actor_id


def accounts(db: sqlite3.Connection) -> list[Account]:
    return [
        Account(row["email"], row["created_at"], row["disabled_at"], row["sessions"])
        for row in db.execute(
            "SELECT email, created_at, disabled_at,"
            " (SELECT COUNT(*) FROM sessions WHERE actor_id = actors.id) AS sessions"
            " FROM actors ORDER BY email"
        )
    ]


def disable(db: sqlite3.Connection, email: str, now: float | None = None) -> tuple[int, int]:
    """Disable an account at once: every session ends and every open or proposed lease
    expires (reason `account_disabled`). Returns (sessions ended, leases expired)."""
    actor_id = actor_of(db, email)
    hold(db, account_lock(actor_id))  # no request of the account is being made meanwhile
    now = clock(now)
    db.execute("UPDATE actors SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?",
               (now, actor_id))
    expiring = db.execute(
        "SELECT COUNT(*) FROM leases WHERE actor_id = ? AND status IN ('open', 'proposed')",
        (actor_id,),
    ).fetchone()[0]
    sessions = _end_sessions(db, actor_id, "account_disabled", now)
    # Leases whose session already ended by other means still belong to this actor.
    live = db.execute(
        "SELECT id, actor_id, status FROM leases"
        f" WHERE actor_id = ? AND status IN ('open', 'proposed') {dialect_of(db).for_update}",
        (actor_id,),
    ).fetchall()
    leases.expire_leases(db, live, "account_disabled", now)
    logs.state_change("account", actor_id, None, "active", "disabled", "operator")
    return sessions, expiring


def change_password(db: sqlite3.Connection, email: str, password_hash: str,
                    now: float | None = None) -> int:
    """A new password; every existing session ends (its live leases expire). Returns how
    many sessions ended."""
    now = clock(now)
    actor_id = actor_of(db, email)
    db.execute("UPDATE actors SET password_hash = ? WHERE id = ?", (password_hash, actor_id))
    return _end_sessions(db, actor_id, "password_changed", now)


def _end_sessions(db: sqlite3.Connection, actor_id: str, reason: str, now: float) -> int:
    sessions = [row[0] for row in db.execute(
        "SELECT id FROM sessions WHERE actor_id = ?", (actor_id,))]
    for session_id in sessions:
        leases.end_session(db, session_id, now, reason)
    return len(sessions)


def hash_password(password: str) -> str:
    check_password(password)
    return hasher.hash(password)


def has_accounts(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM actors LIMIT 1").fetchone() is not None


async def any_account(db: Database) -> bool:
    return await db.read(has_accounts)


def first_account_command(settings: Settings) -> str:
    """The exact command that makes the first account of the database this studio serves."""
    command = "studio users add you@example.com"
    if settings.db_path != Settings().db_path:
        command += f" --db {shlex.quote(str(settings.db_path))}"
    return command

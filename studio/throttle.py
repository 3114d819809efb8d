"""Sign-in attempts, counted in the database per client address, per email and per (email,
address) pair, so every process sharing the database shares the counts.

An attempt is recorded before its password is checked, in the one short write transaction
that also checks the limits: however many arrive at once, each sees the ones before it.
Until its check ends it is pending, and a pending attempt counts as a failure; one whose
process died ages out with the window like any failure. A correct password removes its own
attempt and its pair's failures, and remembers the pair as known.

How the three limits combine, so a flood cannot lock an account's owner out:
- the pair limit is the strict one: one address guessing one email is stopped first;
- the address limit stops one address trying many emails;
- the email limit stops many addresses trying one email, whatever their number: past it only
  an address that signed in to that email before, or a browser holding a session of that
  same account, may still try (under the other two limits).
"""

from __future__ import annotations

import math
import sqlite3
import uuid
from dataclasses import dataclass

from studio.db import clock
from studio.errors import Refusal

# An address that signed in to an email is known to it for this long after its last sign-in.
KNOWN_FOR_S = 90 * 86400.0


@dataclass(frozen=True)
class Limits:
    window_seconds: float = 900.0
    per_pair: int = 5
    per_address: int = 30
    per_email: int = 30


def begin(db: sqlite3.Connection, email: str, address: str, vouched: bool, limits: Limits,
          now: float | None = None) -> str:
    """Record a pending attempt and return its id, or refuse with 429 `too_many_attempts`
    and a Retry-After while a limit is reached: the check and the count are one transaction,
    so no number of simultaneous attempts gets past a limit."""
    now = clock(now)
    since = now - limits.window_seconds
    db.execute("DELETE FROM sign_in_attempts WHERE started_at <= ?", (since,))
    waits = [
        _wait(db, "email = ? AND address = ?", (email, address), limits.per_pair, since, now),
        _wait(db, "address = ?", (address,), limits.per_address, since, now),
    ]
    if not vouched and not _known(db, email, address, now):
        waits.append(_wait(db, "email = ?", (email,), limits.per_email, since, now))
    wait = max(waits)
    if wait > 0:
        raise Refusal("too_many_attempts", _refused_for(wait),
                      headers={"Retry-After": str(math.ceil(wait))})
    attempt = str(uuid.uuid4())
    db.execute("INSERT INTO sign_in_attempts (id, email, address, started_at) VALUES (?, ?, ?, ?)",
               (attempt, email, address, now))
    return attempt


def failed(db: sqlite3.Connection, attempt: str) -> None:
    db.execute("UPDATE sign_in_attempts SET outcome = 'failed' WHERE id = ?", (attempt,))


def succeeded(db: sqlite3.Connection, attempt: str, email: str, address: str,
              now: float | None = None) -> None:
    """A correct password: its attempt and its pair's failures go, and the pair is known."""
    now = clock(now)
    db.execute("DELETE FROM sign_in_attempts WHERE id = ?"
               " OR (email = ? AND address = ? AND outcome = 'failed')", (attempt, email, address))
    db.execute("INSERT INTO sign_in_known (email, address, signed_in_at) VALUES (?, ?, ?)"
               " ON CONFLICT (email, address) DO UPDATE SET signed_in_at = excluded.signed_in_at",
               (email, address, now))
    db.execute("DELETE FROM sign_in_known WHERE signed_in_at <= ?", (now - KNOWN_FOR_S,))


def _wait(db: sqlite3.Connection, where: str, params: tuple[str, ...], limit: int,
          since: float, now: float) -> float:
    """Seconds until fewer than `limit` attempts (pending or failed) since `since` match
    `where`; 0 when that is already so."""
    row = db.execute(
        f"SELECT started_at FROM sign_in_attempts WHERE {where} AND started_at > ?"
        " ORDER BY started_at DESC LIMIT 1 OFFSET ?",
        (*params, since, limit - 1),
    ).fetchone()
    return 0.0 if row is None else max(row[0] - since, 1.0)


def _known(db: sqlite3.Connection, email: str, address: str, now: float) -> bool:
    return db.execute(
        "SELECT 1 FROM sign_in_known WHERE email = ? AND address = ? AND signed_in_at > ?",
        (email, address, now - KNOWN_FOR_S),
    ).fetchone() is not None


def _refused_for(seconds: float) -> str:
    """The refusal in words, with the real time to wait."""
    if seconds > 90:
        wait = f"{math.ceil(seconds / 60)} minutes"
    else:
        wait = f"{math.ceil(seconds)} second{'' if math.ceil(seconds) == 1 else 's'}"
    return f"Too many failed sign-ins. Try again in {wait}."

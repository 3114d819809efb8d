"""Sign-in attempts, counted in the database per client address, per email and per (email,
address) pair, so every process sharing the database shares the counts.

An attempt is recorded before its password is checked, in the one short write transaction
that also checks the limits: however many arrive at once, each sees the ones before it.
Until its check ends it is pending. A limit reached by failures alone refuses at once; one
reached only with attempts still pending makes the newcomer wait for their outcome (`Pending`),
so right passwords sent at one moment all get in while wrong ones are checked no more often
than before. A pending attempt older than `in_flight_seconds` counts as a failure: its
process died, and it ages out with the window like any failure. A correct password removes
its own attempt and its pair's failures, and remembers the pair as known.

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
import time
import uuid
from dataclasses import dataclass

from studio import i18n
from studio.errors import Refusal
from studio.store.dialect import dialect_of, hold, hold_free
from studio.store.transactions import clock

# An address that signed in to an email is known to it for this long after its last sign-in.
KNOWN_FOR_S = 90 * 86400.0
PURGE_BATCH = 500
# An address's count is shared by every account signing in from it (behind one proxy or NAT,
# all of them): its lock is waited for this long at most, a few hundred sign-ins' worth.
ADDRESS_WAIT_S = 0.2
ADDRESS_POLL_S = 0.005


@dataclass(frozen=True)
class Limits:
    window_seconds: float = 900.0
    per_pair: int = 5
    per_address: int = 30
    per_email: int = 30
    # A password check lasts at most this long, queue included; an attempt past a limit
    # waits this long at most for the ones in flight, and an older pending one is a failure.
    in_flight_seconds: float = 10.0


class Pending(Refusal):
    """A limit reached only with attempts still being checked: their outcome decides whether
    this one may go on, so it waits for them (see `settled`) instead of being refused."""


def begin(db: sqlite3.Connection, email: str, address: str, vouched: bool, limits: Limits,
          now: float | None = None) -> str:
    """Record a pending attempt and return its id, or refuse with 429 `too_many_attempts`
    and a Retry-After while a limit is reached (`Pending` while reached only with attempts in
    flight): the check and the count are one transaction, so no number of simultaneous
    attempts gets past a limit (the address's: see `_hold_address`)."""
    # What the limits count: the email's attempts (its pairs' too) and the address's.
    hold(db, f"sign-in:{email}")
    _hold_address(db, address)
    now = clock(now)
    # Only this email's rows: another email's are another sign-in's (`purge` for the rest).
    db.execute("DELETE FROM sign_in_attempts WHERE started_at <= ? AND email = ?",
               (now - limits.window_seconds, email))
    _judge(db, email, address, vouched, limits, now)
    attempt = str(uuid.uuid4())
    db.execute("INSERT INTO sign_in_attempts (id, email, address, started_at) VALUES (?, ?, ?, ?)",
               (attempt, email, address, now))
    return attempt


def _hold_address(db: sqlite3.Connection, address: str) -> bool:
    """The address's count locked, as `hold` locks it, unless another sign-in holds it past
    ADDRESS_WAIT_S: every account from that address would queue behind a host paused inside
    one sign-in. Then it is counted without the lock, and attempts racing from that address
    may pass its limit by as many as arrive together; the email and pair limits stay exact."""
    name = f"sign-in-from:{address}"
    waited_until = time.monotonic() + ADDRESS_WAIT_S
    while not hold_free(db, name):
        if time.monotonic() >= waited_until:
            return False
        time.sleep(ADDRESS_POLL_S)
    return True


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
    db.execute("DELETE FROM sign_in_known WHERE signed_in_at <= ? AND email = ?",
               (now - KNOWN_FOR_S, email))


def stale(db: sqlite3.Connection, window_seconds: float, now: float | None = None) -> bool:
    """Whether attempts past the window, or pairs known too long ago, wait to be purged."""
    now = clock(now)
    return db.execute(
        "SELECT 1 FROM sign_in_attempts WHERE started_at <= ? UNION ALL"
        " SELECT 1 FROM sign_in_known WHERE signed_in_at <= ? LIMIT 1",
        (now - window_seconds, now - KNOWN_FOR_S)).fetchone() is not None


def purge(db: sqlite3.Connection, window_seconds: float, now: float | None = None) -> None:
    """The sweeper's share: old counts of every email, a batch at a time, passing over rows a
    sign-in holds, so it never waits for one and none waits for it."""
    now = clock(now)
    skip = dialect_of(db).skip_locked_row
    db.execute("DELETE FROM sign_in_attempts WHERE id IN (SELECT id FROM sign_in_attempts"
               f" WHERE started_at <= ? LIMIT {PURGE_BATCH} {skip})", (now - window_seconds,))
    db.execute("DELETE FROM sign_in_known WHERE signed_in_at <= ? AND email || ' ' || address IN"
               " (SELECT email || ' ' || address FROM sign_in_known WHERE signed_in_at <= ?"
               f" LIMIT {PURGE_BATCH} {skip})", (now - KNOWN_FOR_S, now - KNOWN_FOR_S))


def settled(db: sqlite3.Connection, email: str, address: str, vouched: bool, limits: Limits,
            now: float | None = None) -> bool:
    """Whether the attempts in flight that made this one wait have ended (or are counted as
    failures now): a read, so an attempt that waits asks without writing."""
    try:
        _judge(db, email, address, vouched, limits, clock(now))
    except Pending:
        return False
    except Refusal:
        return True  # `begin` says so again, in its transaction
    return True


def _judge(db: sqlite3.Connection, email: str, address: str, vouched: bool, limits: Limits,
           now: float) -> None:
    """Refuse while failures reach a limit; raise `Pending` while it is reached only with
    attempts still being checked."""
    since = now - limits.window_seconds
    scopes: list[tuple[str, tuple[str, ...], int]] = [
        ("email = ? AND address = ?", (email, address), limits.per_pair),
        ("address = ?", (address,), limits.per_address),
    ]
    if not vouched and not _known(db, email, address, now):
        scopes.append(("email = ?", (email,), limits.per_email))
    # A pending attempt older than a check can last is a dead process's: a failure.
    stale = now - limits.in_flight_seconds
    wait = max(_wait(db, f"{where} AND (outcome = 'failed' OR started_at <= ?)",
                     (*params, stale), limit, since) for where, params, limit in scopes)
    if wait > 0:
        raise Refusal("too_many_attempts", _refused_for(wait),
                      headers={"Retry-After": str(math.ceil(wait))})
    wait = max(_wait(db, where, params, limit, since) for where, params, limit in scopes)
    if wait > 0:
        raise Pending("too_many_attempts", _refused_for(wait),
                      headers={"Retry-After": str(math.ceil(wait))})


def _wait(db: sqlite3.Connection, where: str, params: tuple[object, ...], limit: int,
          since: float) -> float:
    """Seconds until fewer than `limit` attempts since `since` match `where`; 0 when that is
    already so."""
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
        return i18n.gettext("Too many failed sign-ins. Try again in %(count)s minutes.") % {
            "count": math.ceil(seconds / 60)}
    if math.ceil(seconds) == 1:
        return i18n.gettext("Too many failed sign-ins. Try again in 1 second.")
    return i18n.gettext("Too many failed sign-ins. Try again in %(count)s seconds.") % {
        "count": math.ceil(seconds)}

"""The few things the two databases must spell differently, as named fragments side by side,
and the locks a write unit takes by name."""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    """The few fragments of SQL the two databases must spell differently, side by side."""

    name: str
    # The claim's choice of index for waiting tasks (SQLite's planner needs telling).
    tasks_waiting: str
    # Joins in the order written (SQLite's CROSS JOIN keeps it; PostgreSQL plans its own).
    join_in_order: str
    # The claimed row, locked; another claimer passes over it instead of waiting.
    skip_locked: str
    # A row read to be changed in the same transaction, locked until it ends (SQLite's one
    # writer holds every row already).
    for_update: str = ""
    # The one row of a one-table claim (a send), locked; another claimer passes over it.
    skip_locked_row: str = ""
    # The SQL function that lowers text of any script, for a match in any case.
    lower: str = "lower"
    # A row read to be named by the rows a unit inserts: it cannot be deleted until the
    # transaction ends, while changes to its other columns go on.
    key_share: str = ""


SQLITE = Dialect("sqlite", tasks_waiting="INDEXED BY tasks_waiting", join_in_order="CROSS JOIN",
                 skip_locked="", lower="studio_lower")
POSTGRES = Dialect("postgresql", tasks_waiting="", join_in_order="JOIN",
                   skip_locked="FOR UPDATE OF tasks SKIP LOCKED", for_update="FOR UPDATE",
                   skip_locked_row="FOR UPDATE SKIP LOCKED", key_share="FOR KEY SHARE")


def dialect_of(db: Any) -> Dialect:
    return SQLITE if isinstance(db, sqlite3.Connection) else POSTGRES


def hold(db: Any, *names: str) -> None:
    """Lock what a write unit decides on, by name, until its transaction ends: the unit's
    checks and its writes then see one state, and units that name other things never wait
    for it. Call it first, before the unit reads what it decides on or reads the clock.

    One name per rule: `account:<actor id>` for an account's own records (its drafts, series
    counters, customers, payments, bindings), `sign-in:<email>` for the sign-in counts of an
    email (the count of a client address, `sign-in-from:<address>`, is shared by accounts, so
    it is only tried, never waited for long: `accounts.throttle.begin`). SQLite's one writer already
    holds the whole file (`BEGIN IMMEDIATE`), so there it costs nothing; PostgreSQL takes a
    transaction-scoped advisory lock per name, in one order, and a holder that stops is ended
    by the connection's timeouts (studio/store/postgres.py)."""
    if isinstance(db, sqlite3.Connection):
        return
    for key in sorted({lock_key(name) for name in names}):
        db.execute("SELECT pg_advisory_xact_lock(?)", (key,))


def hold_free(db: Any, *names: str) -> set[str]:
    """Those of `names` whose locks this transaction takes without waiting, as `hold` takes
    them; any another transaction holds is passed over. For the sweeps, which must not wait
    on a paused host, nor hold the other accounts' locks they took meanwhile. SQLite: all."""
    if isinstance(db, sqlite3.Connection):
        return set(names)
    return {name for name in sorted(set(names), key=lock_key)
            if db.execute("SELECT pg_try_advisory_xact_lock(?)", (lock_key(name),)).fetchone()[0]}


def account_lock(actor_id: str) -> str:
    """The lock name of one account's own records (see `hold`)."""
    return f"account:{actor_id}"


def lock_key(name: str) -> int:
    """A lock's name as the signed 64-bit number an advisory lock takes."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def anywhere(text: str) -> str:
    """`text` anywhere, in any case, as a LIKE pattern (with `ESCAPE '\\'`) for text lowered
    by the dialect's `lower`; its own `%` and `_` are plain characters."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


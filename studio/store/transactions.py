"""A unit of work and the transaction it runs in, the same on both databases: the clock a
unit acts at, what follows a commit, and the two failures every caller names."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("studio.store.db")
T = TypeVar("T")
Unit = Callable[..., T]


class DatabaseUnavailable(Exception):
    """The database cannot be reached: answered 503 while it is away, never a 500."""


class SchemaTooNew(Exception):
    """The file was written by a newer studio: refused, and left exactly as it was."""

    def __init__(self, path: Path | str, found: int, known: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, but this studio knows versions up to"
            f" {known}. It was left untouched: run the newer studio that wrote it,"
            " or restore a backup made by this version."
        )



def sync_path(path: Path) -> None:
    """fsync a file, or a folder so that the names just made or linked in it are on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clock(now: float | None) -> float:
    """The time a unit acts at: read inside its transaction, after what it decides on is
    held (`hold`), so a wait for the lock can never make a deadline check stale. On
    PostgreSQL it is the database's clock, so a host whose own clock is wrong judges every
    deadline as the others do. Tests may pass their own."""
    if now is not None:
        return now
    current = getattr(_committing, "db", None)
    read_clock = getattr(current, "database_clock", None)
    return time.time() if read_clock is None else read_clock()


_committing = threading.local()


def after_commit(call: Callable[[], object]) -> None:
    """Run `call` once the transaction running on this thread commits, never if it rolls
    back; outside a transaction, now. For what must only follow a write that is on disk:
    a log line naming a state change, a counter of work done."""
    waiting = getattr(_committing, "calls", None)
    if waiting is None:
        call()
    else:
        waiting.append(call)


def in_transaction(db: sqlite3.Connection, unit: Unit[T], *args: Any, **kwargs: Any) -> T:
    """Run `unit(db, *args)` inside BEGIN IMMEDIATE: all of it commits, or none of it.
    What the unit asked to follow the commit (`after_commit`) runs only once it has."""
    db.execute("BEGIN IMMEDIATE")
    _committing.calls = waiting = []
    _committing.db = db
    try:
        result = unit(db, *args, **kwargs)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        _committing.calls = _committing.db = None
    for call in waiting:
        try:
            call()
        except Exception:  # the write is on disk: its answer must not become an error
            log.exception("after the commit, %r failed", call)
    return result


@contextlib.contextmanager
def savepoint(db: sqlite3.Connection, name: str = "part") -> Iterator[None]:
    """A part of a unit that may fail alone: on an error what it wrote, and what it asked to
    follow the commit, is undone, and the error goes on to the caller, who may carry on."""
    waiting = getattr(_committing, "calls", None)
    asked = len(waiting) if waiting is not None else 0
    db.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        db.execute(f"ROLLBACK TO SAVEPOINT {name}")
        db.execute(f"RELEASE SAVEPOINT {name}")
        if waiting is not None:
            del waiting[asked:]
        raise
    db.execute(f"RELEASE SAVEPOINT {name}")


def in_snapshot(db: sqlite3.Connection, unit: Unit[T], *args: Any) -> T:
    """Run `unit(db, *args)` inside a read transaction: every SELECT sees one moment."""
    db.execute("BEGIN")
    _committing.db = db
    try:
        return unit(db, *args)
    finally:
        _committing.db = None
        if db.in_transaction:
            db.execute("COMMIT")



def timestamp(seconds: float | None) -> str | None:
    """Epoch seconds as the ISO 8601 UTC text the API speaks."""
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    return moment.replace("+00:00", "Z")

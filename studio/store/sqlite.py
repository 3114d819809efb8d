"""The SQLite driver: the file, its pragmas, its migrations, and `SqliteDatabase`, one writer
connection and a few readers, each on its own aiosqlite thread.

Every transaction is one plain function run on a connection's own thread, so it is one
hop for the event loop and two coroutines can never interleave statements inside one
BEGIN. Writes take `BEGIN IMMEDIATE`, which is what holds when two processes share the file.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from studio.store.migrations import sqlite as schema
from studio.store.migrations.sqlite import Migration, run_script
from studio.store.transactions import SchemaTooNew, Unit, in_snapshot, in_transaction

T = TypeVar("T")
BUSY_TIMEOUT_MS = 30_000
READERS = 2

OWNER_ONLY = 0o600


def owner_only(path: Path) -> None:
    """The database, its WAL and shared-memory files hold password hashes and every invoice:
    readable by their owner only. SQLite gives -wal and -shm the mode of the main file."""
    if not path.exists():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, OWNER_ONLY))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                file.chmod(OWNER_ONLY)
        except FileNotFoundError:
            pass




def prepare(path: Path) -> None:
    """Create the file if needed (owner only), switch it to WAL and apply pending migrations,
    each in its own transaction. A file from a newer studio is refused before anything
    writes to it."""
    refuse_if_newer(path)
    # The umask covers the files SQLite creates beside it; changed only while they appear.
    previous = os.umask(0o077)
    try:
        owner_only(path)
        db = sqlite3.connect(path, isolation_level=None)
        _set_up(db)
        db.execute("PRAGMA journal_mode = WAL")
    finally:
        os.umask(previous)
    # Rebuilding a table that others reference needs foreign keys off (SQLite's own recipe);
    # the check before COMMIT below stands in for them.
    db.execute("PRAGMA foreign_keys = OFF")
    try:
        db.execute("PRAGMA journal_mode = WAL")
        for number, migration in enumerate(schema.MIGRATIONS, start=1):
            db.execute("BEGIN IMMEDIATE")
            try:
                # Read inside the lock: another process may have migrated meanwhile.
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version > len(schema.MIGRATIONS):
                    raise SchemaTooNew(path, version, len(schema.MIGRATIONS))
                if version < number:
                    apply_migration(db, migration)
                    db.execute(f"PRAGMA user_version = {number}")
                    # Foreign keys are off while tables are rebuilt; nothing may dangle after.
                    if db.execute("PRAGMA foreign_key_check").fetchone() is not None:
                        raise sqlite3.IntegrityError("a migration left a dangling reference")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
    finally:
        db.close()


def apply_migration(db: sqlite3.Connection, migration: Migration) -> None:
    """One migration, inside the caller's transaction: a script, or a function for what SQL
    alone cannot do."""
    if callable(migration):
        migration(db)
    else:
        run_script(db, migration)



def schema_version(path: Path) -> int | None:
    """The file's user_version, read without writing a byte or creating -wal/-shm files;
    None when there is no file yet."""
    if not path.exists():
        return None
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    db = sqlite3.connect(uri, uri=True)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def refuse_if_newer(path: Path) -> None:
    found = schema_version(path)
    if found is not None and found > len(schema.MIGRATIONS):
        raise SchemaTooNew(path, found, len(schema.MIGRATIONS))


def connect(path: Path) -> sqlite3.Connection:
    """A migrated, configured connection for one-shot commands (`studio users`, ...)."""
    prepare(path)
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    _set_up(db)
    return db


def read_only(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection that can only read the file, and never creates it: for the commands that
    look at a studio (audit, check, backup) while it serves."""
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=timeout)
    db.row_factory = sqlite3.Row
    return db



class SqliteDatabase:
    """One writer connection and a few readers, each on its own aiosqlite thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(READERS))
        self._watch: sqlite3.Connection | None = None
        self._watching: sqlite3.Cursor | None = None
        # The version read in this turn of the event loop: its loop, its task, the number.
        self._seen: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any] | None, int] | None = None

    async def open(self) -> SqliteDatabase:
        prepare(self.path)
        try:
            self._writer = await _connected(self.path)
            for _ in range(READERS):
                self._readers.append(await _connected(self.path))
            # Only ever asked for `PRAGMA data_version`: a counter in shared memory, no I/O.
            self._watch = sqlite3.connect(self.path, isolation_level=None,
                                          check_same_thread=False)
            _set_up(self._watch)
            self._watching = self._watch.cursor()
            self._watching.row_factory = None  # one number: a plain tuple, no Row to make
        except BaseException:
            await self.close()  # no connection, nor its thread, outlives a failed open
            raise
        return self

    async def close(self) -> None:
        for connection in [self._writer, *self._readers]:
            if connection is not None:
                await connection.close()
        if self._watch is not None:
            self._watch.close()
        self._writer, self._readers, self._watch, self._watching = None, [], None, None
        self._seen = None

    async def write(self, unit: Unit[T], *args: Any, **kwargs: Any) -> T:
        """Run one write transaction as one unit on the writer's thread."""
        return await self.on_writer(in_transaction, unit, *args, **kwargs)

    async def on_writer(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(connection, *args)` on the writer's thread, as one hop."""
        assert self._writer is not None, "the database is not open"
        # aiosqlite's public calls are one statement per hop; _execute runs a whole function
        # on the connection's thread, so a transaction cannot interleave or be left half-open
        # by a cancelled request. The call runs in the request's context, as `to_thread` would:
        # it speaks the request's language (`studio.i18n`).
        return await self._writer._execute(contextvars.copy_context().run, call,
                                           self._writer._conn, *args, **kwargs)

    async def version(self) -> int:
        """A number that changes whenever any other connection commits to the file.

        Read once and shared until a callback scheduled as it is taken forgets it, which is as
        fresh as a reading of each request's own. The loop runs callbacks in the order they
        were scheduled, so another task given the reading is running a step scheduled before
        it was taken: whatever that step was woken for (a request, its body, a thread's result)
        had arrived before the reading. Under uvicorn (a task per request, made once its head
        has arrived; a pipelined request's bytes read only after the previous answer) and with
        handlers that read their whole body before awaiting anything else, as the memo's do,
        each request thus still sees every commit acknowledged before it arrived. The task that
        took the reading reads afresh: one that calls the app itself, as a test client does,
        may run a second request in the same step, after learning of a commit outside the loop
        (a test client that commits that way while another task reads can still be given the
        earlier number; nothing the studio serves commits on the loop's own thread).

        On the hottest path, a burst of polls, this saves a request the statement and its two
        `fcntl` calls (SQLite's shared-memory read lock)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        seen = self._seen
        if seen is not None and seen[0] is loop and seen[1] is not task:
            return seen[2]
        assert self._watching is not None, "the database is not open"
        version: int = self._watching.execute("PRAGMA data_version").fetchone()[0]
        self._seen = (loop, task, version)
        loop.call_soon(self._forget_version)
        return version

    def _forget_version(self) -> None:
        self._seen = None

    async def read(self, unit: Unit[T], *args: Any) -> T:
        """Run one read-only unit on a reader's thread, as one snapshot."""
        reader = self._readers[next(self._next_reader)]
        return await reader._execute(contextvars.copy_context().run, in_snapshot, reader._conn,
                                     unit, *args)


async def _connected(path: Path) -> aiosqlite.Connection:
    connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        await connection._execute(_set_up, connection._conn)
    except BaseException:
        await connection.close()
        raise
    return connection


def _set_up(db: sqlite3.Connection) -> None:
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    # FULL syncs the WAL on every commit: a 2xx answer means the write is on disk.
    db.execute("PRAGMA synchronous = FULL")
    # The row a REPLACE deletes then meets the delete triggers, so it cannot be an issued one.
    db.execute("PRAGMA recursive_triggers = ON")
    db.create_function("studio_lower", 1, _lower, deterministic=True)


def _lower(value: str | None) -> str | None:
    """SQLite's own lower() knows only ASCII; Python's lowers every script, as PostgreSQL's
    does, so `émile` finds `Émile` on both."""
    return None if value is None else value.lower()


"""PostgreSQL: the same units on a pool of psycopg connections.

A unit is a plain function of a connection, written once in the SQL both databases read
(`?` and `:name` placeholders). Here a connection speaks the few words of SQLite's that the
units use (execute, executemany, fetchone, fetchall, rowcount, in_transaction, rows read by
name or place), so a unit never knows which database it runs on. What must differ between the
two is named in one place each: the placeholders and list matching (`translate`), the write
lock (`BEGIN IMMEDIATE` below), the clock (`database_clock`), the schema (studio/pg_schema.py).

No write waits for the whole cluster: a write transaction runs in READ COMMITTED and each
unit locks what it decides on (`studio.store.dialect.hold`: an account's records, an email's sign-in
counts; `FOR UPDATE` on the rows it changes), so two accounts' writes never queue behind each
other, on one host or many. Reads never wait: each runs in a REPEATABLE READ snapshot.

A host that stops while it holds a lock (paused, cable cut, power lost) holds it for seconds,
not hours: every connection ends a transaction left idle, a statement that runs too long and a
wait for a lock (`TIMEOUTS`), and TCP keepalives on both ends notice a peer that is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import re
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg.errors
import psycopg_pool
from psycopg.pq import TransactionStatus

from studio import i18n
from studio.errors import NUL_TEXT, Refusal
from studio.store.migrations import postgres as pg_schema
from studio.store.transactions import DatabaseUnavailable, SchemaTooNew, in_snapshot, in_transaction

log = logging.getLogger(__name__)
T = TypeVar("T")

# The lock the first process to start holds while it migrates (pg_advisory_lock).
MIGRATION_LOCK = 0x5354_5544_494F + 1

# Transaction statements, sent as they are. A write runs in READ COMMITTED: each statement
# sees the latest commits, so a unit that waited for a lock (`studio.store.dialect.hold`,
# FOR UPDATE) reads what the holder wrote, and a row locked after a wait is read again before
# it changes.
STATEMENTS = {
    "BEGIN IMMEDIATE": "BEGIN ISOLATION LEVEL READ COMMITTED",
    "BEGIN": "BEGIN ISOLATION LEVEL REPEATABLE READ",
    "COMMIT": "COMMIT",
    "ROLLBACK": "ROLLBACK",
}
# How long a stopped holder can keep what it locked, and how long a write waits for a lock
# before it is answered 503 database_busy (Retry-After): the wait outlasts the idle limit, so
# a write of the account a paused host was writing gets through once that host's transaction
# is ended. Set on every connection of the studio's own; a migration lifts the two limits
# that a long migration could meet.
IDLE_IN_TRANSACTION_MS = 10_000
STATEMENT_TIMEOUT_MS = 30_000
LOCK_TIMEOUT_MS = 15_000
TIMEOUTS = (f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS};"
            f" SET statement_timeout = {STATEMENT_TIMEOUT_MS};"
            f" SET lock_timeout = {LOCK_TIMEOUT_MS};"
            # The server's end of the connection: a client host gone dead is noticed in about
            # 25 s, and its session (with whatever it held) ended.
            " SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;"
            " SET tcp_keepalives_count = 3; SET TIME ZONE 'UTC'")
# The client's end: a database host gone dead is noticed as quickly.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
              "keepalives_count": 3}
RETRIES = 3
# How long a request waits for a pooled connection: past it, 503 (busy, or the database away).
POOL_WAIT_S = 5.0
# SQLite's table-valued json_each, as PostgreSQL spells a JSON list's elements.
REWRITES = [
    (re.compile(r"json_each\((%s|%\(\w+\)s)\)"), r"json_array_elements_text(CAST(\1 AS json))"),
]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# lower() lowers only the letters its collation knows: under a database made with the C locale,
# ASCII alone. ICU's root collation knows every script, whatever the database's locale; a
# server built without ICU has only the database's own. Whether it is there is looked up once
# per connection.
EVERY_SCRIPT = "und-x-icu"
_collated: weakref.WeakKeyDictionary[psycopg.Connection[Any], str] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """SQLite's placeholders as psycopg's (`?` -> `%s`, `:name` -> `%(name)s`), a literal `%`
    doubled; quoted text and `::` casts left alone."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if char == "'":
            end = sql.index("'", i + 1)
            while end + 1 < n and sql[end + 1] == "'":  # '' is a quote inside the text
                end = sql.index("'", end + 2)
            out.append(sql[i:end + 1].replace("%", "%%"))
            i = end + 1
        elif char == "?":
            out.append("%s")
            i += 1
        elif char == ":" and i + 1 < n and sql[i + 1] == ":":
            out.append("::")
            i += 2
        elif char == ":" and (name := _NAME.match(sql, i + 1)):
            out.append(f"%({name.group()})s")
            i = name.end()
        elif char == "%":
            out.append("%%")
            i += 1
        else:
            out.append(char)
            i += 1
    text = "".join(out)
    for pattern, replacement in REWRITES:
        text = pattern.sub(replacement, text)
    return text


class Row(tuple):
    """A row read by place or by column name, and a mapping for dict(), as sqlite3.Row."""

    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            key = self._index[key]
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"_index": {name: i for i, name in enumerate(names)}})


def _rows(cursor: psycopg.Cursor[Any]) -> Any:
    if cursor.description is None:
        return tuple
    make = _row_class(tuple(column.name for column in cursor.description))
    return make


def as_sqlite_error(error: psycopg.Error) -> Exception:
    """psycopg's error as the kind the studio's handlers already know: a refused constraint or
    trigger is an IntegrityError, a full disk SQLite's own words for it, a lost server
    DatabaseUnavailable."""
    text = str(error).strip()
    if isinstance(error, psycopg.errors.IntegrityError) or text.startswith("invoice_frozen"):
        return sqlite3.IntegrityError(text)
    if isinstance(error, psycopg.errors.DiskFull):
        return sqlite3.OperationalError(f"database or disk is full: {text}")
    if isinstance(error, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        return sqlite3.OperationalError(f"database is locked: {text}")
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return DatabaseUnavailable(text)
    return error


class Connection:
    """A psycopg connection that runs the units written for sqlite3's."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        raw.row_factory = _rows  # type: ignore[assignment]

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                ) -> psycopg.Cursor[Any]:
        try:
            statement = STATEMENTS.get(sql.strip())
            if statement is not None:
                return self.raw.execute(statement.encode())
            return self.raw.execute(translate(sql), _values(params))  # type: ignore[arg-type]
        except psycopg.Error as error:
            raise as_sqlite_error(error) from error

    def executemany(self, sql: str, seq: Iterable[Sequence[Any] | dict[str, Any]]
                    ) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        try:
            cursor.executemany(translate(sql), [_values(params) for params in seq])
        except psycopg.Error as error:
            raise as_sqlite_error(error) from error
        return cursor

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def lowered(self, expression: str) -> str:
        """SQL for `expression` with its letters lowered in every script, as Python's
        str.lower lowers them, whatever locale the database was made with (see EVERY_SCRIPT)."""
        collate = _collated.get(self.raw)
        if collate is None:
            found = self.execute("SELECT 1 FROM pg_collation WHERE collname = ?",
                                 (EVERY_SCRIPT,)).fetchone()
            collate = _collated[self.raw] = f' COLLATE "{EVERY_SCRIPT}"' if found else ""
        return f"lower({expression}{collate})"

    def database_clock(self) -> float:
        """The database's time, so every host judges a deadline by one clock."""
        return self.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"
                            ).fetchone()[0]

    def close(self) -> None:
        self.raw.close()


def _values(params: Sequence[Any] | dict[str, Any]) -> Sequence[Any] | dict[str, Any]:
    # psycopg takes bytes as bytea; sqlite3 memoryviews read back from a BLOB likewise.
    values = params.values() if isinstance(params, dict) else params
    # PostgreSQL text cannot hold NUL, where SQLite's can: whatever brought it here (a search,
    # a query parameter) is refused as input, not failed as a server error.
    if any(isinstance(value, str) and "\x00" in value for value in values):
        raise Refusal("invalid_body", i18n.gettext(NUL_TEXT))
    if isinstance(params, dict):
        return params
    return tuple(params)




def _set_up(raw: psycopg.Connection[Any]) -> None:
    raw.execute(TIMEOUTS.encode())


def connect(url: str) -> Connection:
    """One connection for a one-shot command, unit by unit in transactions of its own."""
    try:
        raw = psycopg.connect(url, autocommit=True, connect_timeout=10, **KEEPALIVES)
        _set_up(raw)
    except psycopg.Error as error:
        raise as_sqlite_error(error) from error
    return Connection(raw)


def read_only(url: str) -> Connection:
    """A connection whose transactions can only read: for `check`, `audit` and `backup`,
    which look at a studio while it serves."""
    db = connect(url)
    db.execute("SET default_transaction_read_only = on")
    return db


def schema_version(db: Connection) -> int:
    found = db.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()[0]
    if not found:
        return 0
    return db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]


def prepare(url: str) -> None:
    """Apply pending migrations, each in its own transaction, under an advisory lock: of
    hosts starting together, the first migrates and the others wait, then find nothing to do.
    A database of a newer schema is refused before anything writes to it."""
    db = connect(url)
    try:
        db.raw.execute("SET statement_timeout = 0; SET lock_timeout = 0")
        db.raw.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
        version = schema_version(db)
        if version > len(pg_schema.MIGRATIONS):
            raise SchemaTooNew(display(url), version, len(pg_schema.MIGRATIONS))
        for number, script in enumerate(pg_schema.MIGRATIONS, start=1):
            if number <= version:
                continue
            with db.raw.transaction():
                if callable(script):
                    script(db)
                else:
                    db.raw.execute(script.encode())
                db.raw.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                               " version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
                db.raw.execute("INSERT INTO schema_version VALUES (%s, now())", (number,))
    except psycopg.Error as error:
        raise as_sqlite_error(error) from error
    finally:
        db.close()  # ends the session, and with it the advisory lock


def refuse_if_newer(url: str) -> None:
    db = connect(url)
    try:
        version = schema_version(db)
    finally:
        db.close()
    if version > len(pg_schema.MIGRATIONS):
        raise SchemaTooNew(display(url), version, len(pg_schema.MIGRATIONS))


def display(url: str) -> str:
    """The URL as it may be printed: never its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the PostgreSQL database"
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


class PgDatabase:
    """A pool of connections, each unit run on one of them on a thread of its own."""

    def __init__(self, url: str, pool_size: int = 10) -> None:
        self.url = url
        self.path = display(url)  # names the database in logs and per-database keys
        self.pool_size = pool_size
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._versions = Versions(url)

    async def open(self) -> PgDatabase:
        await asyncio.to_thread(prepare, self.url)
        self._threads = concurrent.futures.ThreadPoolExecutor(
            self.pool_size, thread_name_prefix="studio-db")
        self._pool = psycopg_pool.ConnectionPool(
            self.url, min_size=min(2, self.pool_size), max_size=self.pool_size,
            kwargs={"autocommit": True, "connect_timeout": 10, **KEEPALIVES}, configure=_set_up,
            open=False, timeout=POOL_WAIT_S)
        try:
            await asyncio.to_thread(self._pool.open, True, 30.0)
        except BaseException:
            # The database did not answer in time, or the studio stopped as it started: the
            # pool's threads would otherwise go on connecting in the background.
            await self.close()
            raise
        return self

    async def close(self) -> None:
        await self._versions.close()
        if self._pool is not None:
            await asyncio.to_thread(self._pool.close)
        if self._threads is not None:
            self._threads.shutdown(wait=False)
        self._pool, self._threads = None, None

    def _run(self, call: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any],
             retry: bool) -> T:
        assert self._pool is not None, "the database is not open"
        for attempt in range(RETRIES + 1):
            try:
                with self._pool.connection() as raw:
                    return call(Connection(raw), *args, **kwargs)
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                if not retry or attempt == RETRIES:
                    raise
                log.warning("a transaction lost to another was run again")
            except psycopg_pool.PoolTimeout as error:
                raise DatabaseUnavailable(str(error)) from error
            except psycopg.OperationalError as error:
                raise DatabaseUnavailable(str(error)) from error
        raise AssertionError("unreachable")

    async def _on_thread(self, call: Callable[..., T], *args: Any, retry: bool = False,
                         **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        # In the request's context, as `to_thread` would: it speaks the request's language.
        return await loop.run_in_executor(
            self._threads, functools.partial(contextvars.copy_context().run, self._run, call,
                                             args, kwargs, retry))

    async def write(self, unit: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One write transaction; run again if it lost a conflict (a deadlock between units that
        lock rows in other orders, or a serialization failure)."""
        return await self._on_thread(in_transaction, unit, *args, retry=True, **kwargs)

    async def on_writer(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._on_thread(call, *args, **kwargs)

    async def read(self, unit: Callable[..., T], *args: Any) -> T:
        return await self._on_thread(in_snapshot, unit, *args, retry=True)

    async def version(self) -> str | None:
        """Changes with every commit to the cluster, as seen after the request asked; None
        while it cannot be read (see `Versions`)."""
        return await self._versions.current()


# The transactions the cluster sees as finished: the snapshot's bounds and the ones still
# running. Every commit changes it (the committing one leaves the running list, or moves the
# upper bound), and a commit leaves the list before its client hears it committed; so two
# equal readings mean no commit came between them. A position in the write-ahead log would
# not do: it moves when the commit is flushed, a moment before the commit is visible, and a
# snapshot taken in that moment would be remembered at the new position.
VERSION_QUERY = b"SELECT pg_current_snapshot()::text"
# How long the version may take before the asking requests read afresh, and how often a lost
# connection for it is tried again.
VERSION_WAIT_S = POOL_WAIT_S
RECONNECT_EVERY_S = 1.0


class Versions:
    """The database's version for the answer memo, read on a connection of its own on the
    event loop: no hop to a thread, no pool.

    Requests that ask while a reading is on its way share the next one, which starts after
    they asked; so each request still sees every commit acknowledged (on any host) before it
    asked, and a burst of polls costs one round trip instead of one each. Once the
    connection is lost the version is unknown (None) and every answer is read afresh; the
    connection is made again a second later, and then at most once a second."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._asked: asyncio.Future[str | None] | None = None  # waiting for the next reading
        self._reading: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._closed = False

    async def current(self) -> str | None:
        if self._closed:  # shut down: no new connection is made for a late request
            return None
        if self._asked is None:
            self._asked = asyncio.get_running_loop().create_future()
            if self._reading is None:
                self._reading = asyncio.create_task(self._read_while_asked())
        # Shielded: a request that goes away must not cancel the reading others share.
        return await asyncio.shield(self._asked)

    async def _read_while_asked(self) -> None:
        try:
            while self._asked is not None:
                # One turn of the event loop first: the requests already on their way join
                # this reading (under load about twelve to a reading instead of seven).
                await asyncio.sleep(0)
                if self._closed:  # closed while this turn passed
                    break
                asked, self._asked = self._asked, None
                version: str | None = None  # if cancelled: unknown, so read afresh
                try:
                    version = await self._read()
                finally:
                    asked.set_result(version)
        finally:
            self._reading = None

    async def _read(self) -> str | None:
        try:
            async with asyncio.timeout(VERSION_WAIT_S):
                if self._connection is None:
                    if time.monotonic() < self._retry_at:
                        return None
                    self._connection = await psycopg.AsyncConnection.connect(
                        self.url, autocommit=True, connect_timeout=10)
                cursor = await self._connection.execute(VERSION_QUERY)
                row = await cursor.fetchone()
                return None if row is None else row[0]
        except (psycopg.Error, TimeoutError) as error:
            if self._connection is not None:
                log.warning("the database's version cannot be read; answers are read afresh"
                            " until it can: %s", error)
            await self._drop()
            self._retry_at = time.monotonic() + RECONNECT_EVERY_S
            return None

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        self._closed = True
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
        if self._asked is not None and not self._asked.done():
            self._asked.set_result(None)
        self._asked = None
        await self._drop()


def signing_key_in_database(url: str, new_key: str) -> str:
    """The key every host signs cookies with: the first host to ask stores `new_key`, every
    later one reads what is stored."""
    prepare(url)
    db = connect(url)
    try:
        db.execute("INSERT INTO signing_keys (id, key, created_at)"
                   " VALUES (1, ?, EXTRACT(EPOCH FROM now())) ON CONFLICT (id) DO NOTHING",
                   (new_key,))
        return db.execute("SELECT key FROM signing_keys WHERE id = 1").fetchone()[0]
    finally:
        db.close()

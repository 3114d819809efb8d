"""A database or a presence that fails to open leaves nothing open behind it: no connection,
no thread, no file descriptor (a studio that cannot start exits cleanly; a test that makes it
fail does not leak into the next)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from tests import backends

pytestmark = pytest.mark.anyio


def _open_fds_to(path: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found.append(fd)
        except OSError:
            pass  # closed while listed
    return found


@backends.sqlite_only
async def test_a_sqlite_database_that_fails_to_open_closes_what_it_opened(tmp_path, monkeypatch):
    import aiosqlite

    from studio.store import sqlite

    made: list[aiosqlite.Connection] = []
    connect = aiosqlite.connect

    def failing_second(*args, **kwargs):
        if len(made) == 2:  # the second reader cannot be opened
            raise sqlite3.OperationalError("unable to open database file")
        made.append(connect(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(sqlite.aiosqlite, "connect", failing_second)
    db = sqlite.SqliteDatabase(tmp_path / "studio.db")
    with pytest.raises(Exception, match="unable to open"):
        await db.open()
    assert len(made) == 2  # the writer and a reader were opened before the failure
    assert all(not connection._running and connection._connection is None
               for connection in made), "a connection (and its thread) was left open"
    assert _open_fds_to(tmp_path / "studio.db") == []


@backends.sqlite_only
async def test_a_presence_refused_its_lock_keeps_no_file_open(tmp_path, monkeypatch):
    from studio.store import presence

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")  # as some network file systems say

    database = tmp_path / "studio.db"
    monkeypatch.setattr(presence.fcntl, "flock", no_locks)
    with pytest.raises(OSError):
        await presence.Presence("outbox-1", database_path=str(database)).start()
    monkeypatch.undo()
    held = presence._file(str(database), "outbox-1")
    assert _open_fds_to(held) == [], "the presence file was left open"


@backends.postgres_only
async def test_a_postgres_pool_that_fails_to_fill_is_closed(tmp_path, monkeypatch):
    import psycopg_pool

    from studio.store.postgres import PgDatabase

    pools: list[psycopg_pool.ConnectionPool] = []
    real_open = psycopg_pool.ConnectionPool.open

    def opened_then_timed_out(pool, wait=False, timeout=30.0):
        pools.append(pool)
        real_open(pool, wait, timeout)  # its connections are made...
        raise psycopg_pool.PoolTimeout("pool initialization incomplete after 30.0 sec")

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "open", opened_then_timed_out)
    db = PgDatabase(backends.use_migrated(tmp_path / "studio.db"))
    try:
        with pytest.raises(psycopg_pool.PoolTimeout):
            await db.open()
        assert len(pools) == 1 and pools[0].closed, "the pool was left open, connecting"
    finally:
        backends.drop(tmp_path / "studio.db")


@backends.sqlite_only
async def test_a_demo_receipt_that_cannot_be_stored_leaves_no_temporary_file(settings,
                                                                             monkeypatch):
    """The demo attaches a receipt to a draft as an upload would; a disk that fills while the
    receipt is written leaves nothing in the store's incoming folder."""
    from studio.ops import demo
    from studio.store import uploads
    from studio.store.db import open_database

    def full(part: uploads.FilePart) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(uploads.FilePart, "_sync", full)
    db = await open_database(settings).open()
    try:
        with pytest.raises(OSError):
            await demo.attach_receipts(db, settings, ["ada@example.com"])
    finally:
        await db.close()
    incoming = demo.store_for(settings).incoming
    assert incoming.is_dir() and list(incoming.iterdir()) == []

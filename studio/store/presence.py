"""A worker's presence: held for as long as its process lives, gone the moment it dies.

A claim on a send times out by the clock, but a worker may live past its claim's time: the
database could not take the renewal for a while, or the mail server takes minutes to answer
the end of DATA. The email may already have left, so a claim that timed out is taken over only
when its worker is gone, and an email goes out twice only when the worker that sent it died
before it could record that it did.

Presence is something the worker's death releases by itself, whatever the database does:

- PostgreSQL: a session advisory lock, held on a connection of the worker's own. The database
  drops it when that session ends: the process died (its socket closed), or its host went
  silent (TCP keepalives, studio/store/postgres.py). A database that restarted forgets every
  presence, so for RESTART_GRACE_S after it started no claim counts as abandoned: living
  workers reconnect and take theirs back first.
- SQLite (one host): an exclusive `flock` on a file of the worker's own beside the database,
  which the kernel releases when the process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from studio.store.dialect import lock_key

log = logging.getLogger("studio.presence")

# How often a worker checks that its presence is still held (on PostgreSQL: that its
# connection lives), and takes it again when it is not.
CHECK_EVERY_S = 2.0
RESTART_GRACE_S = 15.0


def _lock_name(worker: str) -> str:
    return f"worker:{worker}"


def _folder(database_path: str) -> Path:
    return Path(f"{database_path}.workers")


def _file(database_path: str, worker: str) -> Path:
    return _folder(database_path) / "".join(c if c.isalnum() else "_" for c in worker)


def gone(db: Any, worker: str) -> bool:
    """Whether `worker` has died (its presence is released): inside a claim's transaction,
    before a timed-out claim of it is taken over."""
    if isinstance(db, sqlite3.Connection):
        path = _file(db.execute("PRAGMA database_list").fetchone()[2], worker)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # releases the lock just taken, if it was
        path.unlink(missing_ok=True)
        return True
    restarted = db.execute(
        "SELECT pg_postmaster_start_time() > now() - make_interval(secs => ?)",
        (RESTART_GRACE_S,)).fetchone()[0]
    if restarted:
        return False
    # Taken only if nobody holds it; let go when this transaction ends.
    return bool(db.execute("SELECT pg_try_advisory_xact_lock(?)",
                           (lock_key(_lock_name(worker)),)).fetchone()[0])


class Presence:
    """Holds `worker`'s presence until `close`, taking it again whenever it was lost."""

    def __init__(self, worker: str, database_path: str | None = None,
                 database_url: str | None = None) -> None:
        self.worker = worker
        self.database_path = database_path
        self.database_url = database_url
        self._fd: int | None = None
        self._connection: Any = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> Presence:
        try:
            await self._take()
        except BaseException:
            # Stopped (or failed) while taking it, e.g. a studio shut down as it started: a
            # connection already made is closed here, not left open to whoever collects it.
            await self._drop()
            raise
        if self.database_url:
            self._keeper = asyncio.create_task(self._keep())
        return self

    async def _take(self) -> None:
        if self.database_url is None:
            assert self.database_path is not None
            folder = _folder(self.database_path)
            folder.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(_file(self.database_path, self.worker), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the name is this process's alone
            except BaseException:
                os.close(fd)  # refused (a file system without locks): the file is not kept open
                raise
            self._fd = fd
            return
        import psycopg

        from studio.store.postgres import KEEPALIVES

        self._connection = await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, connect_timeout=10, **KEEPALIVES)
        await self._connection.execute("SELECT pg_advisory_lock(%s)",
                                        (lock_key(_lock_name(self.worker)),))

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            try:
                if self._connection is None or self._connection.closed:
                    await self._take()
                    log.info("presence of worker %s held again", self.worker)
                else:
                    await self._connection.execute("SELECT 1")
            except Exception as error:  # noqa: BLE001 - the database away: try again shortly
                log.warning("presence of worker %s not held: %s", self.worker, error)
                await self._drop()

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        await self._drop()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.database_path is not None:
                _file(self.database_path, self.worker).unlink(missing_ok=True)

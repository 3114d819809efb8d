"""Where attachment bytes live: a folder (`FileStore`) or the database (`DatabaseStore`).

Both keep the bytes once per actor under their SHA-256 and answer the same few calls, so the
attachment units never ask which one they have; `store_for` chooses once, from the settings.
SQLite keeps them in a folder beside the database. PostgreSQL keeps them in the database, where
every host finds them, unless `STUDIO_FILES` names a folder the hosts share.

Bytes arrive before anything names them, and are named in the binding's transaction. So a
store holds three kinds: bytes still arriving (an upload's own), bytes some attachment names,
and orphans (a crash between storing and binding, or between a delete's commit and the
removal of its file), which `sweep` removes after a grace period.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.responses import FileResponse, Response, StreamingResponse

from studio.errors import Refusal
from studio.i18n import gettext
from studio.store.dialect import account_lock, hold_free
from studio.store.transactions import after_commit, clock, in_transaction, sync_path
from studio.store.uploads import FilePart, Part, Upload, remove_if_abandoned

if TYPE_CHECKING:
    from studio.config import Settings
    from studio.store.db import Database

log = logging.getLogger("studio.attachments")

ORPHAN_GRACE_S = 3600.0
# Bytes in the database go in and out in rows of this size: an upload or a download holds
# about one of them in memory, however large the file.
CHUNK_BYTES = 256 * 1024

Files = list[tuple[str, str]]  # (actor id, sha256) pairs


class Store(Protocol):
    """What the attachment units ask of a store."""

    def ensure(self) -> Store:
        """Ready to take bytes."""

    def begin(self, db: Database, actor_id: str) -> Part:
        """Where the bytes of one upload go as they arrive."""

    def place(self, upload: Upload, actor_id: str) -> None:
        """Before binding, outside any transaction: the slow part of storing, if any."""

    def keep(self, db: sqlite3.Connection, upload: Upload, actor_id: str) -> None:
        """Inside the binding's transaction: the upload's bytes stored under its hash."""

    def remove(self, db: sqlite3.Connection, actor_id: str, sha256: str) -> None:
        """Inside a write transaction that found no attachment naming these bytes."""

    def forget(self, db: sqlite3.Connection, files: Files) -> None:
        """A transaction deleted the rows naming `files`: remove those nothing names now."""

    async def sweep(self, db: Database, grace_s: float, now: float | None) -> int:
        """Remove orphans older than the grace period; how many went."""

    async def read(self, db: Database, owner_id: str, sha256: str) -> bytes:
        """The stored bytes, whole: for a receipt the worker reads."""

    async def response(self, db: Database, owner_id: str, sha256: str, media_type: str,
                       headers: dict[str, str]) -> Response:
        """The stored bytes, served without holding them whole in memory."""

    def held(self, db: sqlite3.Connection) -> set[tuple[str, str]]:
        """(actor id, sha256) of everything stored under its hash."""

    def damaged(self, db: sqlite3.Connection, files: set[tuple[str, str]]) -> list[str]:
        """The sha256 of those of `files` whose bytes no longer hash to it."""

    def where(self) -> str:
        """Where the bytes are, as a check names it."""


def store_for(settings: Settings) -> Store:
    """The folder `STUDIO_FILES` names (on SQLite, `<db>.files/` by default); on PostgreSQL
    without it, the database."""
    if settings.database_url and settings.files_dir is None:
        return DatabaseStore()
    return FileStore(settings.files)


def missing_file() -> Refusal:
    # A store restored without its files: say so, never a 500.
    return Refusal("attachment_not_found", gettext("The file of this attachment is missing from"
                                                   " the store; attach it again."))


# --- what every store shares: an attachment names (actor, sha256) -----------------------------


def is_named(db: sqlite3.Connection, actor_id: str, sha256: str) -> bool:
    return db.execute("SELECT 1 FROM attachments WHERE owner_id = ? AND sha256 = ? LIMIT 1",
                      (actor_id, sha256)).fetchone() is not None


def remove_unnamed(db: sqlite3.Connection, store: Store, candidates: Files) -> int:
    """Remove those of the (actor, sha256) bytes no attachment names, with their accounts
    locked, so no attachment of theirs can name the bytes meanwhile; an account whose lock
    another transaction holds is passed over until a later sweep (`hold_free`)."""
    free = hold_free(db, *(account_lock(actor_id) for actor_id, _ in candidates))
    removed = 0
    for actor_id, sha256 in candidates:
        if account_lock(actor_id) in free and not is_named(db, actor_id, sha256):
            store.remove(db, actor_id, sha256)
            removed += 1
    return removed


def _sha256_of(blocks: Callable[[], bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(blocks, b""):
        digest.update(block)
    return digest.hexdigest()


# --- a folder ----------------------------------------------------------------------------------


class FileStore:
    """Files named by their SHA-256, fanned out by its first two hex characters, per actor.

    A file cannot join a transaction, so an upload streams to a temporary file in `incoming`
    (counted, hashed, fsynced), is linked into place under its hash before the binding, and
    the binding checks again, with the account held, that it is still there.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.incoming = folder / "incoming"

    def ensure(self) -> FileStore:
        """The store's folder, for its owner only: receipts are as private as the database."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        return self

    def where(self) -> str:
        return str(self.folder)

    def begin(self, db: Database, actor_id: str) -> Part:
        return FilePart(self.incoming)

    def stored(self) -> list[Path]:
        """Every stored object: actor / first two hex characters / sha256."""
        if not self.folder.is_dir():
            return []
        return [path for path in self.folder.glob("*/*/*")
                if path.is_file() and path.parent.parent != self.incoming]

    def path_of(self, actor_id: str, sha256: str) -> Path:
        return self.folder / actor_id / sha256[:2] / sha256

    def place(self, upload: Upload, actor_id: str) -> None:
        """Link the fsynced temporary file into place; a stored object is never overwritten,
        so two writers of the same bytes cannot corrupt each other."""
        part = upload.part
        assert isinstance(part, FilePart) and part.path is not None
        final = self.path_of(actor_id, upload.sha256)
        for folder in (final.parent.parent, final.parent):
            if not folder.exists():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                sync_path(folder.parent)  # the new folder's own name is on disk too
        try:
            os.link(part.path, final)
        except FileExistsError:
            pass  # the same bytes, stored before
        except FileNotFoundError:  # removed by hand despite its lock: nothing to store
            raise Refusal("upload_lost", headers={"Retry-After": "1"}) from None
        sync_path(final.parent)

    def keep(self, db: sqlite3.Connection, upload: Upload, actor_id: str) -> None:
        # A delete or sweep that ran between placing and binding may have removed the file:
        # it is put back while the account held keeps both out.
        if not self.path_of(actor_id, upload.sha256).exists():
            self.place(upload, actor_id)

    def remove(self, db: sqlite3.Connection, actor_id: str, sha256: str) -> None:
        self.path_of(actor_id, sha256).unlink(missing_ok=True)

    def forget(self, db: sqlite3.Connection, files: Files) -> None:
        """Once the transaction that deleted their rows commits, remove those of the files no
        attachment names any more, checked again with their accounts held."""
        if files:
            after_commit(lambda: in_transaction(db, remove_unnamed, self, files))

    def orphan_candidates(self, grace_s: float = ORPHAN_GRACE_S, now: float | None = None
                          ) -> Files:
        """Stored files older than the grace period; temporary files older than it are
        removed at once unless an upload still holds them, however long it has been writing."""
        now = time.time() if now is None else now
        found: Files = []
        for path in self.stored():
            try:
                old = now - path.stat().st_mtime > grace_s
            except FileNotFoundError:
                continue
            if old:
                found.append((path.parent.parent.name, path.name))
        for path in self.incoming.glob("*.part") if self.incoming.exists() else []:
            try:
                if now - path.stat().st_mtime > grace_s:
                    remove_if_abandoned(path)
            except FileNotFoundError:
                continue
        return found

    async def sweep(self, db: Database, grace_s: float = ORPHAN_GRACE_S,
                    now: float | None = None) -> int:
        candidates = await asyncio.to_thread(self.orphan_candidates, grace_s, now)
        if not candidates:
            return 0
        return await db.write(remove_unnamed, self, candidates)

    async def read(self, db: Database, owner_id: str, sha256: str) -> bytes:
        """The whole file, for a reader that needs all of it (a receipt read by the worker)."""
        path = self.path_of(owner_id, sha256)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise missing_file() from None

    async def response(self, db: Database, owner_id: str, sha256: str, media_type: str,
                       headers: dict[str, str]) -> Response:
        path = self.path_of(owner_id, sha256)
        if not path.is_file():
            raise missing_file()
        return FileResponse(path, media_type=media_type, headers=headers)

    def held(self, db: sqlite3.Connection) -> set[tuple[str, str]]:
        return {(path.parent.parent.name, path.name) for path in self.stored()}

    def damaged(self, db: sqlite3.Connection, files: set[tuple[str, str]]) -> list[str]:
        found = []
        for owner, sha256 in sorted(files):
            with self.path_of(owner, sha256).open("rb") as stream:
                if _sha256_of(lambda: stream.read(1 << 20)) != sha256:
                    found.append(sha256)
        return found


# --- the database ------------------------------------------------------------------------------


class DatabaseStore:
    """Bytes in the database, in chunk rows, so every host sharing it finds them.

    An upload writes its chunks under an id of its own (`stored_files` with no sha256 yet) in
    short transactions that hold no account: nothing else reads bytes that are not bound, so
    nothing waits for a body arriving over the network. The binding's transaction then names
    them by their hash, or drops them if the actor stored the same bytes before. A delete
    removes the bytes in its own transaction once no attachment names them.
    """

    def ensure(self) -> DatabaseStore:
        return self

    def where(self) -> str:
        return "the database"

    def begin(self, db: Database, actor_id: str) -> Part:
        return ChunkPart(db, actor_id)

    def place(self, upload: Upload, actor_id: str) -> None:
        return None  # the bytes are in the database already; `keep` names them

    def keep(self, db: sqlite3.Connection, upload: Upload, actor_id: str) -> None:
        if db.execute("SELECT 1 FROM stored_files WHERE owner_id = ? AND sha256 = ?",
                      (actor_id, upload.sha256)).fetchone():
            return  # stored before: the upload's own copy goes when it is discarded
        part = upload.part
        assert isinstance(part, ChunkPart)
        placed = db.execute(
            "UPDATE stored_files SET sha256 = ?, size = ?, placed_at = ?"
            " WHERE id = ? AND owner_id = ? AND sha256 IS NULL AND ? = (SELECT"
            " COALESCE(SUM(octet_length(content)), 0) FROM stored_chunks WHERE file_id = ?)",
            (upload.sha256, upload.size, clock(None), part.id, actor_id, upload.size, part.id))
        if not placed.rowcount:  # swept as abandoned, or not all of it arrived
            raise Refusal("upload_lost", headers={"Retry-After": "1"})

    def remove(self, db: sqlite3.Connection, actor_id: str, sha256: str) -> None:
        db.execute("DELETE FROM stored_files WHERE owner_id = ? AND sha256 = ?",
                   (actor_id, sha256))

    def forget(self, db: sqlite3.Connection, files: Files) -> None:
        remove_unnamed(db, self, files)  # in the deleting transaction itself

    async def sweep(self, db: Database, grace_s: float = ORPHAN_GRACE_S,
                    now: float | None = None) -> int:
        return await db.write(_remove_orphans, grace_s, now)

    async def read(self, db: Database, owner_id: str, sha256: str) -> bytes:
        """The whole file, chunk by chunk (a receipt read by the worker)."""
        found = await db.read(_stored_file, owner_id, sha256)
        if found is None:
            raise missing_file()
        file_id, _, chunks = found
        parts = []
        for position in range(chunks):
            content = await db.read(_chunk, file_id, position)
            if content is None:
                raise missing_file()
            parts.append(content)
        return b"".join(parts)

    async def response(self, db: Database, owner_id: str, sha256: str, media_type: str,
                       headers: dict[str, str]) -> Response:
        found = await db.read(_stored_file, owner_id, sha256)
        if found is None:
            raise missing_file()
        file_id, size, chunks = found

        async def body() -> AsyncIterator[bytes]:
            for position in range(chunks):
                content = await db.read(_chunk, file_id, position)
                if content is None:  # removed meanwhile: the reply ends short of its length
                    raise LookupError(f"chunk {position} of stored file {file_id} is gone")
                yield content

        return StreamingResponse(body(), media_type=media_type,
                                 headers={**headers, "Content-Length": str(size)})

    def held(self, db: sqlite3.Connection) -> set[tuple[str, str]]:
        return {(row[0], row[1]) for row in db.execute(
            "SELECT owner_id, sha256 FROM stored_files WHERE sha256 IS NOT NULL")}

    def damaged(self, db: sqlite3.Connection, files: set[tuple[str, str]]) -> list[str]:
        found = []
        for owner, sha256 in sorted(files):
            stored = _stored_file(db, owner, sha256)
            if stored is None or not _whole(db, sha256, *stored):
                found.append(sha256)
        return found


class ChunkPart:
    """An upload's bytes as chunk rows under an id of its own, each written in a short
    transaction that holds no account, so a slow body never holds up other writers."""

    def __init__(self, db: Database, actor_id: str) -> None:
        self.db, self.actor_id = db, actor_id
        self.id = uuid.uuid4().hex
        self.buffer = bytearray()
        self.written = 0  # chunks in the database
        self.begun = False

    def write(self, chunk: bytes) -> None:
        self.buffer += chunk

    async def flush(self) -> None:
        if len(self.buffer) >= CHUNK_BYTES:
            await self._write(len(self.buffer) // CHUNK_BYTES * CHUNK_BYTES)

    async def finish(self) -> None:
        await self._write(len(self.buffer))

    async def _write(self, count: int) -> None:
        chunks = [bytes(self.buffer[n:n + CHUNK_BYTES]) for n in range(0, count, CHUNK_BYTES)]
        del self.buffer[:count]
        await self.db.on_writer(_write_chunks, self.id, self.actor_id, self.written, chunks,
                                not self.begun)
        self.begun = True
        self.written += len(chunks)

    async def discard(self) -> None:
        """Drop the chunks unless the binding named them; what cannot be dropped now (the
        database went away) is swept once the grace period is over."""
        if not self.begun:
            return
        try:
            await self.db.on_writer(_drop_unbound, self.id)
        except Exception:
            log.warning("an unbound upload's bytes stay until the sweep", exc_info=True)


def _write_chunks(db: Any, file_id: str, owner_id: str, first: int, chunks: list[bytes],
                  begins: bool) -> None:
    now = db.database_clock()  # before BEGIN: the row's own statement starts the snapshot
    db.execute("BEGIN")
    try:
        if begins:
            db.execute("INSERT INTO stored_files (id, owner_id, created_at, written_at)"
                       " VALUES (?, ?, ?, ?)", (file_id, owner_id, now, now))
        elif not db.execute("UPDATE stored_files SET written_at = ? WHERE id = ?"
                            " AND sha256 IS NULL", (now, file_id)).rowcount:
            # Swept as abandoned (it was idle past the grace period): start again.
            raise Refusal("upload_lost", headers={"Retry-After": "1"})
        if chunks:
            db.executemany("INSERT INTO stored_chunks (file_id, position, content)"
                           " VALUES (?, ?, ?)",
                           [(file_id, first + n, chunk) for n, chunk in enumerate(chunks)])
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _drop_unbound(db: Any, file_id: str) -> None:
    db.execute("DELETE FROM stored_files WHERE id = ? AND sha256 IS NULL", (file_id,))


def _stored_file(db: sqlite3.Connection, owner_id: str, sha256: str
                 ) -> tuple[str, int, int] | None:
    """(id, size, number of chunks) of the bytes stored under (actor, sha256)."""
    row = db.execute(
        "SELECT id, size, (SELECT COUNT(*) FROM stored_chunks WHERE file_id = stored_files.id)"
        " FROM stored_files WHERE owner_id = ? AND sha256 = ?", (owner_id, sha256)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def _chunk(db: sqlite3.Connection, file_id: str, position: int) -> bytes | None:
    row = db.execute("SELECT content FROM stored_chunks WHERE file_id = ? AND position = ?",
                     (file_id, position)).fetchone()
    return None if row is None else bytes(row[0])


def _whole(db: sqlite3.Connection, sha256: str, file_id: str, size: int, chunks: int) -> bool:
    """The chunks run 0, 1, 2... and together are `size` bytes hashing to `sha256`; read one
    at a time, so a check holds one chunk in memory."""
    digest, total = hashlib.sha256(), 0
    for position in range(chunks):
        content = _chunk(db, file_id, position)
        if content is None:
            return False
        digest.update(content)
        total += len(content)
    return total == size and digest.hexdigest() == sha256


def _remove_orphans(db: sqlite3.Connection, grace_s: float, now: float | None) -> int:
    """Bytes of uploads that died before binding, idle past the grace period, and bytes no
    attachment names (a crash between a delete and its removal, a restore by hand)."""
    # Bytes nobody names may be named by an attachment being bound: their accounts are locked
    # first, as `remove_unnamed` does (passing over one another transaction holds), and the
    # delete checks again once they are held.
    owners = [row[0] for row in db.execute(
        "SELECT DISTINCT owner_id FROM stored_files WHERE sha256 IS NOT NULL AND NOT EXISTS"
        " (SELECT 1 FROM attachments WHERE attachments.owner_id = stored_files.owner_id"
        " AND attachments.sha256 = stored_files.sha256)")]
    free = hold_free(db, *(account_lock(owner) for owner in owners))
    before = clock(now) - grace_s
    removed = db.execute("DELETE FROM stored_files WHERE sha256 IS NULL AND written_at < ?",
                         (before,)).rowcount
    for owner in owners:
        if account_lock(owner) in free:
            removed += db.execute(
                "DELETE FROM stored_files WHERE owner_id = ? AND sha256 IS NOT NULL"
                " AND placed_at < ? AND NOT EXISTS (SELECT 1 FROM attachments WHERE"
                " attachments.owner_id = stored_files.owner_id"
                " AND attachments.sha256 = stored_files.sha256)", (owner, before)).rowcount
    return removed

"""Attachments by client key: receipts stored once under their SHA-256, bound once per key.

A file cannot join a transaction, so the write path is: stream to a temporary file beside
the store (counted, hashed, fsynced: `studio.uploads`), judge the type from the first
bytes, link it into place under its hash in the actor's own folder (the same bytes twice are
one file; one actor never learns what another stored), then bind key -> attachment in one
BEGIN IMMEDIATE transaction that checks the key again, and the actor's limits with it. A
crash between placing and binding, or between a delete's commit and its file's removal,
leaves at most an orphan file, which `sweep_orphans` removes after a grace period.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filetype

from studio import bindings, invoices, logs
from studio.db import Database, after_commit, clock, in_transaction, sync_path
from studio.errors import Refusal
from studio.uploads import Upload, remove_if_abandoned

log = logging.getLogger("studio.attachments")

# Judged by the file's own first bytes, never its name or the type the client declared.
ALLOWED = {"application/pdf", "image/png", "image/jpeg", "image/webp", "image/heic"}
PREVIEWABLE = {"image/png", "image/jpeg", "image/webp"}
ORPHAN_GRACE_S = 3600.0
LISTED = "id AS attachment_id, filename, content_type, size, sha256, invoice_id"


@dataclass(frozen=True)
class Quota:
    """What one actor may keep: distinct stored bytes in all, and attachments per invoice."""

    storage_bytes: int
    per_invoice: int


def sniff(head: bytes) -> str:
    """The type the bytes say they are, if it is one the studio keeps; else 415."""
    guessed = filetype.guess(head)
    if guessed is None or guessed.mime not in ALLOWED:
        raise Refusal("unsupported_media_type")
    return guessed.mime


class FileStore:
    """Files named by their SHA-256, fanned out by its first two hex characters, per actor."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.incoming = folder / "incoming"

    def ensure(self) -> FileStore:
        """The store's folder, for its owner only: receipts are as private as the database."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        return self

    def stored(self) -> list[Path]:
        """Every stored object: actor / first two hex characters / sha256."""
        if not self.folder.is_dir():
            return []
        return [path for path in self.folder.glob("*/*/*")
                if path.is_file() and path.parent.parent != self.incoming]

    def path_of(self, actor_id: str, sha256: str) -> Path:
        return self.folder / actor_id / sha256[:2] / sha256

    def place(self, upload: Upload, actor_id: str) -> Path:
        """Link the fsynced temporary file into place; a stored object is never overwritten,
        so two writers of the same bytes cannot corrupt each other."""
        assert upload.path is not None
        final = self.path_of(actor_id, upload.sha256)
        for folder in (final.parent.parent, final.parent):
            if not folder.exists():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                sync_path(folder.parent)  # the new folder's own name is on disk too
        try:
            os.link(upload.path, final)
        except FileExistsError:
            pass  # the same bytes, stored before
        except FileNotFoundError:  # removed by hand despite its lock: nothing to store
            raise Refusal("upload_lost", headers={"Retry-After": "1"}) from None
        sync_path(final.parent)
        return final

    def forget(self, db: sqlite3.Connection, files: list[tuple[str, str]]) -> None:
        """Once the transaction that deleted their rows commits, remove those of the (actor,
        sha256) files no attachment names any more, checked again under the write lock."""
        if files:
            after_commit(lambda: in_transaction(db, unnamed, self, files))


# --- units: each runs inside one transaction -------------------------------------------------


def draft_of(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> None:
    """Attachments join only the actor's own draft: 404 otherwise, 409 once issued."""
    refuse_if_issued(invoices.owned(db, actor_id, invoice_id))


def refuse_if_issued(row: sqlite3.Row) -> None:
    if row["status"] == "issued":
        raise Refusal("invoice_issued", f"This invoice was issued as {row['number']}; its "
                                        "attachments stay as they were when it was issued.")


def _listed(db: sqlite3.Connection, attachment_id: str) -> dict[str, Any]:
    return dict(db.execute(f"SELECT {LISTED} FROM attachments WHERE id = ?",
                           (attachment_id,)).fetchone())


def stored_bytes(db: sqlite3.Connection, actor_id: str) -> int:
    """The actor's distinct stored bytes: the same file attached twice counts once."""
    return db.execute(
        "SELECT COALESCE(SUM(size), 0) FROM (SELECT sha256, MAX(size) AS size FROM attachments"
        " WHERE owner_id = ? GROUP BY sha256) AS stored", (actor_id,)).fetchone()[0]


def refuse_past_quota(db: sqlite3.Connection, actor_id: str, invoice_id: str, quota: Quota,
                      adding: int) -> None:
    """One more attachment than an invoice may hold is 409; `adding` new bytes past what the
    actor may store is 413."""
    count = db.execute("SELECT COUNT(*) FROM attachments WHERE invoice_id = ?",
                       (invoice_id,)).fetchone()[0]
    if count >= quota.per_invoice:
        raise Refusal("too_many_attachments", f"This invoice already has {count} attachments,"
                                              " the most one may hold; remove one first.")
    if adding:
        used = stored_bytes(db, actor_id)
        if used + adding > quota.storage_bytes:
            raise Refusal("storage_quota_exceeded", (
                f"Your attachments use {_size(used)} of the {_size(quota.storage_bytes)} you"
                f" may store, and this file needs {_size(adding)}; remove attachments you no"
                " longer need, then attach it again."))


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


def room_for(db: sqlite3.Connection, actor_id: str, invoice_id: str, client_key: str,
             quota: Quota, at_least: int) -> None:
    """Before a new file is read: refused if it cannot fit, judged by what is stored and the
    least it can be. A key already bound is a replay, answered whatever the limits; `bind`
    checks again under the write lock, which is the guarantee."""
    if db.execute(
            "SELECT 1 FROM request_bindings WHERE actor_id = ? AND kind = 'attachment'"
            " AND request_id = ?", (actor_id, client_key)).fetchone():
        return
    refuse_past_quota(db, actor_id, invoice_id, quota, at_least)


def look_up(db: sqlite3.Connection, actor_id: str, invoice_id: str, client_key: str,
            sha256: str) -> dict[str, Any] | None:
    """The attachment this key already made from these bytes, None if the key is free;
    other bytes are 409 before anything is stored. `bind` checks again: this is a shortcut."""
    print_ = bindings.fingerprint({"invoice_id": invoice_id, "sha256": sha256})
    known = bindings.bound(db, actor_id, "attachment", client_key, print_)
    return None if known is None else _listed(db, known)


def bind(db: sqlite3.Connection, actor_id: str, invoice_id: str, client_key: str,
         upload: Upload, content_type: str, store: FileStore, quota: Quota,
         now: float | None = None) -> tuple[dict[str, Any], bool]:
    """Bind key -> attachment, checking the key again under the write lock: the same key and
    bytes answer the first attachment, other bytes are 409 `client_key_conflict`. A new
    attachment must fit the actor's quota, which concurrent uploads cannot pass together."""
    now = clock(now)
    print_ = bindings.fingerprint({"invoice_id": invoice_id, "sha256": upload.sha256})

    def make(attachment_id: str) -> None:
        draft_of(db, actor_id, invoice_id)  # a replay is answered before this: issued or not
        known = db.execute("SELECT 1 FROM attachments WHERE owner_id = ? AND sha256 = ?"
                           " LIMIT 1", (actor_id, upload.sha256)).fetchone()
        refuse_past_quota(db, actor_id, invoice_id, quota, 0 if known else upload.size)
        db.execute(
            "INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type, size,"
            " sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (attachment_id, actor_id, invoice_id, upload.filename, content_type, upload.size,
             upload.sha256, now))
        _touch_draft(db, invoice_id, now)
        logs.state_change("attachment", attachment_id, actor_id, None, "attached", "uploaded",
                          invoice_id=invoice_id)
        # A delete or sweep that ran between placing and binding may have removed the file:
        # it is put back while the write lock keeps both out.
        if not store.path_of(actor_id, upload.sha256).exists():
            store.place(upload, actor_id)

    attachment_id, created = bindings.once(db, actor_id, "attachment", client_key, print_,
                                           make, now)
    return _listed(db, attachment_id), created


def _touch_draft(db: sqlite3.Connection, invoice_id: str, now: float) -> None:
    """Attachments are part of what issuing freezes: a change to them is a new revision, so
    an issue review step that listed other attachments is refused as `draft_changed`."""
    db.execute("UPDATE invoices SET revision = revision + 1, updated_at = ? WHERE id = ?"
               " AND status = 'draft'", (now, invoice_id))


def _unlink_if_unnamed(db: sqlite3.Connection, store: FileStore, actor_id: str,
                       sha256: str) -> bool:
    named = db.execute("SELECT 1 FROM attachments WHERE owner_id = ? AND sha256 = ? LIMIT 1",
                       (actor_id, sha256)).fetchone()
    if named:
        return False
    store.path_of(actor_id, sha256).unlink(missing_ok=True)
    return True


def remove(db: sqlite3.Connection, actor_id: str, attachment_id: str, store: FileStore
           ) -> None:
    """Delete an attachment of a draft; its file goes after the commit, when no other
    attachment of that actor names the same bytes. The key is freed, so sending the file
    again attaches it again."""
    row = db.execute("SELECT invoice_id, sha256 FROM attachments WHERE id = ? AND owner_id = ?",
                     (attachment_id, actor_id)).fetchone()
    if row is None:
        raise Refusal("attachment_not_found")
    draft_of(db, actor_id, row["invoice_id"])
    db.execute("DELETE FROM attachments WHERE id = ?", (attachment_id,))
    _touch_draft(db, row["invoice_id"], clock(None))
    logs.state_change("attachment", attachment_id, actor_id, "attached", "deleted", "deleted",
                      invoice_id=row["invoice_id"])
    db.execute("DELETE FROM request_bindings WHERE actor_id = ? AND kind = 'attachment'"
               " AND target_id = ?", (actor_id, attachment_id))
    store.forget(db, [(actor_id, row["sha256"])])


def named_files(db: sqlite3.Connection) -> set[tuple[str, str]]:
    """(owner, sha256) of every stored file some attachment names."""
    return {(row[0], row[1]) for row in db.execute(
        "SELECT DISTINCT owner_id, sha256 FROM attachments")}


def owned(db: sqlite3.Connection, actor_id: str, attachment_id: str) -> dict[str, Any] | None:
    row = db.execute(f"SELECT {LISTED}, owner_id FROM attachments WHERE id = ? AND owner_id = ?",
                     (attachment_id, actor_id)).fetchone()
    return dict(row) if row else None


def unnamed(db: sqlite3.Connection, store: FileStore, candidates: list[tuple[str, str]]
            ) -> int:
    """Remove those of the (actor, sha256) files no attachment names, under the write lock."""
    return sum(_unlink_if_unnamed(db, store, actor_id, sha) for actor_id, sha in candidates)


def orphan_candidates(store: FileStore, grace_s: float = ORPHAN_GRACE_S,
                      now: float | None = None) -> list[tuple[str, str]]:
    """Stored files older than the grace period; temporary files older than it are removed
    at once unless an upload still holds them, however long it has been writing."""
    now = time.time() if now is None else now
    found: list[tuple[str, str]] = []
    for path in store.stored():
        try:
            old = now - path.stat().st_mtime > grace_s
        except FileNotFoundError:
            continue
        if old:
            found.append((path.parent.parent.name, path.name))
    for path in store.incoming.glob("*.part") if store.incoming.exists() else []:
        try:
            if now - path.stat().st_mtime > grace_s:
                remove_if_abandoned(path)
        except FileNotFoundError:
            continue
    return found


async def sweep_orphans(db: Database, store: FileStore, grace_s: float = ORPHAN_GRACE_S,
                        now: float | None = None) -> int:
    """Remove stored files no attachment names, once older than the grace period."""
    candidates = await asyncio.to_thread(orphan_candidates, store, grace_s, now)
    if not candidates:
        return 0
    removed = await db.write(unnamed, store, candidates)
    if removed:
        log.info("swept %d orphan attachment files", removed)
    return removed


async def sweep_forever(db: Database, store: FileStore, every_s: float = 600.0) -> None:
    while True:
        try:
            await sweep_orphans(db, store)
        except sqlite3.OperationalError as error:  # a busy database: try again next round
            log.warning("attachment sweep skipped: %s", error)
        await asyncio.sleep(every_s)

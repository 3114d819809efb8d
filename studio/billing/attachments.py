"""Attachments by client key: receipts stored once under their SHA-256, bound once per key.

The bytes cannot arrive inside a transaction, so the write path is: stream them to the store
as they come (counted, hashed, made durable: `studio.uploads`), judge the type from the first
bytes, place them under their hash as the actor's own (the same bytes twice are stored once;
one actor never learns what another stored), then bind key -> attachment in one BEGIN
IMMEDIATE transaction that checks the key again, and the actor's limits with it. A crash
between storing and binding, or between a delete's commit and its file's removal, leaves at
most orphan bytes, which `sweep_orphans` removes after a grace period. Where the bytes live
(a folder, or the database) is the store's business: `studio.stores`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import filetype
from babel.numbers import get_decimal_symbol

from studio import i18n, logs
from studio.billing import invoices
from studio.errors import Refusal
from studio.i18n import gettext
from studio.store import bindings
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.stores import ORPHAN_GRACE_S, FileStore, Store, remove_unnamed
from studio.store.transactions import DatabaseUnavailable, clock
from studio.store.uploads import Upload

log = logging.getLogger("studio.attachments")

# Judged by the file's own first bytes, never its name or the type the client declared.
ALLOWED = {"application/pdf", "image/png", "image/jpeg", "image/webp", "image/heic"}
PREVIEWABLE = {"image/png", "image/jpeg", "image/webp"}
LISTED = "id AS attachment_id, filename, content_type, size, sha256, invoice_id"


@dataclass(frozen=True)
class Quota:
    """What one actor may keep: the bytes of every attachment they see, and attachments per
    invoice."""

    storage_bytes: int
    per_invoice: int


def sniff(head: bytes) -> str:
    """The type the bytes say they are, if it is one the studio keeps; else 415."""
    guessed = filetype.guess(head)
    if guessed is None or guessed.mime not in ALLOWED:
        raise Refusal("unsupported_media_type")
    return guessed.mime


# --- units: each runs inside one transaction -------------------------------------------------


def draft_of(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> None:
    """Attachments join only the actor's own draft: 404 otherwise, 409 once issued."""
    refuse_if_issued(invoices.owned(db, actor_id, invoice_id))


def refuse_if_issued(row: sqlite3.Row) -> None:
    if row["status"] == "issued":
        raise Refusal("invoice_issued", gettext(
            "This invoice was issued as %(number)s; its attachments stay as they were when it"
            " was issued.") % {"number": row["number"]})


def _listed(db: sqlite3.Connection, attachment_id: str) -> dict[str, Any]:
    return dict(db.execute(f"SELECT {LISTED} FROM attachments WHERE id = ?",
                           (attachment_id,)).fetchone())


def stored_bytes(db: sqlite3.Connection, actor_id: str) -> int:
    """The bytes of every attachment the actor sees: the same file attached twice counts
    twice, as the person counts it and as a reading of each would load it."""
    return db.execute("SELECT COALESCE(SUM(size), 0) FROM attachments WHERE owner_id = ?",
                      (actor_id,)).fetchone()[0]


def refuse_past_quota(db: sqlite3.Connection, actor_id: str, invoice_id: str, quota: Quota,
                      adding: int) -> None:
    """One more attachment than an invoice may hold is 409; `adding` new bytes past what the
    actor may store is 413."""
    count = db.execute("SELECT COUNT(*) FROM attachments WHERE invoice_id = ?",
                       (invoice_id,)).fetchone()[0]
    if count >= quota.per_invoice:
        raise Refusal("too_many_attachments", gettext(
            "This invoice already has %(count)s attachments, the most one may hold; remove one"
            " first.") % {"count": count})
    if adding:
        used = stored_bytes(db, actor_id)
        if used + adding > quota.storage_bytes:
            raise Refusal("storage_quota_exceeded", gettext(
                "Your attachments use %(used)s of the %(quota)s you may store, and this file"
                " needs %(adding)s; remove attachments you no longer need, then attach it"
                " again.") % {"used": _size(used), "quota": _size(quota.storage_bytes),
                              "adding": _size(adding)})


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if count >= scale:
            number = f"{count / scale:.1f}".removesuffix(".0")
            return number.replace(".", get_decimal_symbol(i18n.current())) + f" {unit}"
    return gettext("%(count)s bytes") % {"count": count}


def room_for(db: sqlite3.Connection, actor_id: str, invoice_id: str, client_key: str,
             quota: Quota, at_least: int) -> None:
    """Before a new file is read: refused if it cannot fit, judged by what is stored and the
    least it can be. A key already bound is a replay, answered whatever the limits; `bind`
    checks again with the account held, which is the guarantee."""
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
         upload: Upload, content_type: str, store: Store, quota: Quota,
         now: float | None = None) -> tuple[dict[str, Any], bool]:
    """Bind key -> attachment, checking the key again with the account held: the same key and
    bytes answer the first attachment, other bytes are 409 `client_key_conflict`. A new
    attachment must fit the actor's quota, which concurrent uploads cannot pass together."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    print_ = bindings.fingerprint({"invoice_id": invoice_id, "sha256": upload.sha256})

    def make(attachment_id: str) -> None:
        draft_of(db, actor_id, invoice_id)  # a replay is answered before this: issued or not
        refuse_past_quota(db, actor_id, invoice_id, quota, upload.size)
        db.execute(
            "INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type, size,"
            " sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (attachment_id, actor_id, invoice_id, upload.filename, content_type, upload.size,
             upload.sha256, now))
        _touch_draft(db, invoice_id)
        logs.state_change("attachment", attachment_id, actor_id, None, "attached", "uploaded",
                          invoice_id=invoice_id)
        store.keep(db, upload, actor_id)

    attachment_id, created = bindings.once(db, actor_id, "attachment", client_key, print_,
                                           make, now)
    return _listed(db, attachment_id), created


def _touch_draft(db: sqlite3.Connection, invoice_id: str) -> None:
    """Attachments are part of what issuing freezes: a change to them is a new revision, so
    an issue review step that listed other attachments is refused as `draft_changed`. The
    draft's own fields are not edited: its `updated_at`, which its "Edited" mark reads, stays."""
    db.execute("UPDATE invoices SET revision = revision + 1 WHERE id = ? AND status = 'draft'",
               (invoice_id,))


def remove(db: sqlite3.Connection, actor_id: str, attachment_id: str, store: Store) -> None:
    """Delete an attachment of a draft; its bytes go too, when no other attachment of that
    actor names them (a folder's file after the commit). The key is freed, so sending the file
    again attaches it again."""
    hold(db, account_lock(actor_id))
    row = db.execute("SELECT invoice_id, sha256 FROM attachments WHERE id = ? AND owner_id = ?",
                     (attachment_id, actor_id)).fetchone()
    if row is None:
        raise Refusal("attachment_not_found")
    draft_of(db, actor_id, row["invoice_id"])
    db.execute("DELETE FROM attachments WHERE id = ?", (attachment_id,))
    _touch_draft(db, row["invoice_id"])
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


def unnamed(db: sqlite3.Connection, store: Store, candidates: list[tuple[str, str]]) -> int:
    """Remove those of the (actor, sha256) bytes no attachment names (`remove_unnamed`)."""
    return remove_unnamed(db, store, candidates)


def orphan_candidates(store: FileStore, grace_s: float = ORPHAN_GRACE_S,
                      now: float | None = None) -> list[tuple[str, str]]:
    return store.orphan_candidates(grace_s, now)


async def sweep_orphans(db: Database, store: Store, grace_s: float = ORPHAN_GRACE_S,
                        now: float | None = None) -> int:
    """Remove stored bytes no attachment names, and those of uploads that never bound, once
    older than the grace period."""
    removed = await store.sweep(db, grace_s, now)
    if removed:
        log.info("swept %d orphan attachment files", removed)
    return removed


async def sweep_forever(db: Database, store: Store, every_s: float = 600.0) -> None:
    while True:
        try:
            await sweep_orphans(db, store)
        except (sqlite3.OperationalError, DatabaseUnavailable) as error:  # next round, then
            log.warning("attachment sweep skipped: %s", error)
        await asyncio.sleep(every_s)

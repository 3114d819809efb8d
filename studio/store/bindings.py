"""The request binding: one mechanism for every write that must happen once.

A binding is (actor, kind, request id) -> (fingerprint, target). Leases, issues, new drafts,
credit notes, imports and attachments all go through `once`, inside their own
BEGIN IMMEDIATE transaction: the same request twice is one request, and the same id with
other input is refused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any

from studio.errors import Refusal

MAX_REQUEST_ID = 100

# The refusal for a reused id with other input, per kind of intent.
CONFLICTS = {"attachment": "client_key_conflict", "import": "import_conflict"}


def parse_request_id(body: dict[str, Any], field: str = "request_id",
                     refusal: str = "invalid_request_id") -> str:
    """The id the client minted for this request: 1 to 100 characters."""
    value = body.get(field)
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_REQUEST_ID:
        raise Refusal(refusal)
    return value


def optional_request_id(body: dict[str, Any]) -> str | None:
    """A lost reply is safe only with an id; without one each request makes a new record."""
    return None if body.get("request_id") in (None, "") else parse_request_id(body)


def fingerprint(normalised: Any) -> str:
    """SHA-256 of the normalised request as sorted-key JSON."""
    text = json.dumps(normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def bound(db: sqlite3.Connection, actor_id: str, kind: str, request_id: str,
          print_: str) -> str | None:
    """The target this actor's id already made, None if unbound; refused for other input."""
    row = db.execute(
        "SELECT fingerprint, target_id FROM request_bindings"
        " WHERE actor_id = ? AND kind = ? AND request_id = ?",
        (actor_id, kind, request_id),
    ).fetchone()
    if row is None:
        return None
    if row["fingerprint"] != print_:
        raise Refusal(CONFLICTS.get(kind, "request_id_conflict"))
    return row["target_id"]


def once(db: sqlite3.Connection, actor_id: str, kind: str, request_id: str, print_: str,
         make: Callable[[str], None], now: float, target_id: str | None = None
         ) -> tuple[str, bool]:
    """Bind the id and `make(target_id)` in the caller's transaction, or answer what the id
    already made: (target, created). The binding is written first, so only a rollback can
    remove it; a bound id costs one more SELECT, a new one none."""
    target_id = target_id or str(uuid.uuid4())
    inserted = db.execute(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (actor_id, kind, request_id) DO NOTHING",
        (actor_id, kind, request_id, print_, target_id, now),
    ).rowcount
    if not inserted:
        existing = bound(db, actor_id, kind, request_id, print_)
        assert existing is not None, "the account is held: the row that refused us is there"
        return existing, False
    make(target_id)
    return target_id, True

"""Share links: anyone holding `/i/{token}` sees one issued invoice and its PDF, without an
account, until the link is revoked or expires.

The token is 128 random bits shown once; only its SHA-256 is kept, so the database never holds
a usable link. A presented token is looked up by its SHA-256: the index compares digests, and
a digest reveals nothing about how close a guess came to a real token, so the look-up takes the
same time for every wrong token. A link that does not open (revoked, expired, malformed, made
up) is one answer, and it writes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import uuid
from typing import Any, NamedTuple

from studio.billing import invoices
from studio.errors import Refusal
from studio.i18n import gettext
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.transactions import clock, timestamp

TOKEN_BYTES = 16  # 128 bits
# What secrets.token_urlsafe(16) gives: 22 characters of the URL-safe base64 alphabet.
TOKEN = re.compile(r"[A-Za-z0-9_-]{22}")
# A link as an email's text ends with it (outbox.queue adds it last).
EMAILED_TOKEN = re.compile(r"/i/([A-Za-z0-9_-]{22})\s*$")
DAY = 86400.0
DEFAULT_DAYS = 90.0
# The links the invoice page lists, newest first.
SHOWN = 20


def link_url(base_url: str, token: str) -> str:
    """The link as people outside open it: `{base}/i/{token}`, where the base is
    STUDIO_PUBLIC_URL, else the address the request reached the studio at."""
    return f"{base_url.rstrip('/')}/i/{token}"


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _new_link(db: sqlite3.Connection, actor_id: str, invoice_id: str, now: float,
              days: float) -> tuple[str, str]:
    """A new link to the actor's issued invoice, live for `days`: (link id, token). The token
    is returned here once and never stored."""
    row = invoices.owned(db, actor_id, invoice_id)
    if row["status"] != "issued":
        raise Refusal("invoice_not_issued", gettext(
            "Only an issued invoice can be shared; issue it first."))
    link_id, token = str(uuid.uuid4()), secrets.token_urlsafe(TOKEN_BYTES)
    db.execute(
        "INSERT INTO share_links (id, owner_id, invoice_id, token_sha256, created_at,"
        " expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        (link_id, actor_id, invoice_id, token_sha256(token), now, now + days * DAY))
    return link_id, token


def _emailed_link(db: sqlite3.Connection, actor_id: str, invoice_id: str, now: float,
                  days: float) -> tuple[str, str] | None:
    """The working link an earlier email of the invoice carried, with at least half its time
    left: (link id, token), the token read back from that email's own text, which holds it
    already; None when there is none or the text no longer holds it."""
    row = db.execute(
        "SELECT share_links.id, share_links.token_sha256, sends.message FROM share_links"
        " JOIN sends ON sends.share_link_id = share_links.id"
        " WHERE share_links.invoice_id = ? AND share_links.owner_id = ?"
        " AND share_links.revoked_at IS NULL AND share_links.expires_at > ?"
        " ORDER BY share_links.created_at DESC, sends.created_at DESC LIMIT 1",
        (invoice_id, actor_id, now + days * DAY / 2)).fetchone()
    if row is None:
        return None
    found = EMAILED_TOKEN.search(row["message"])
    if found is None or not hmac.compare_digest(token_sha256(found[1]), row["token_sha256"]):
        return None
    return row["id"], found[1]


def mint(db: sqlite3.Connection, actor_id: str, invoice_id: str, now: float | None = None,
         days: float = DEFAULT_DAYS) -> tuple[str, str]:
    """The link an email of the actor's issued invoice carries: (link id, token). Every email
    names the one working link an earlier email made, so a customer holds one link per
    invoice; a new one only when there is none (or it was stopped, or is near its end)."""
    now = clock(now)
    reused = _emailed_link(db, actor_id, invoice_id, now, days)
    if reused is not None and invoices.owned(db, actor_id, invoice_id)["status"] == "issued":
        return reused
    return _new_link(db, actor_id, invoice_id, now, days)


def create(db: sqlite3.Connection, actor_id: str, invoice_id: str, days: float,
           now: float | None = None) -> dict[str, Any]:
    """A new link, as the API answers it: its token (shown this once) and when it expires."""
    hold(db, account_lock(actor_id))
    link_id, token = _new_link(db, actor_id, invoice_id, clock(now), days)
    expires_at = db.execute("SELECT expires_at FROM share_links WHERE id = ?",
                            (link_id,)).fetchone()[0]
    return {"id": link_id, "token": token, "expires_at": timestamp(expires_at)}


def revoke(db: sqlite3.Connection, actor_id: str, invoice_id: str, now: float | None = None
           ) -> int:
    """Every live link of the actor's invoice stops opening; how many there were."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    invoices.owned(db, actor_id, invoice_id)
    return db.execute(
        "UPDATE share_links SET revoked_at = ? WHERE invoice_id = ? AND owner_id = ?"
        " AND revoked_at IS NULL AND expires_at > ?",
        (now, invoice_id, actor_id, now)).rowcount


def links(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> list[dict[str, Any]]:
    now = clock(None)
    found = []
    for row in db.execute(
            "SELECT id, created_at, expires_at, revoked_at, first_viewed_at, views"
            " FROM share_links WHERE invoice_id = ? AND owner_id = ?"
            " ORDER BY created_at DESC, id LIMIT ?", (invoice_id, actor_id, SHOWN)):
        state = "revoked" if row["revoked_at"] is not None \
            else "expired" if row["expires_at"] <= now else "live"
        found.append({"id": row["id"], "state": state, "views": row["views"],
                      **{name: timestamp(row[name]) for name in
                         ("created_at", "expires_at", "revoked_at", "first_viewed_at")}})
    return found


async def links_of(db: Database, actor_id: str, invoice_id: str) -> list[dict[str, Any]]:
    """The invoice's latest links with their state, for its owner's page."""
    return await db.read(links, actor_id, invoice_id)


# --- opening a link --------------------------------------------------------------------------


class Opened(NamedTuple):
    link_id: str
    owner_id: str
    invoice: dict[str, Any]


def _opened(db: sqlite3.Connection, presented_sha256: str) -> Opened | None:
    """The live link's id and its invoice as the document shows it (the seller's logo too),
    or None."""
    row = db.execute(
        "SELECT id, owner_id, invoice_id, token_sha256 FROM share_links"
        " WHERE token_sha256 = ? AND revoked_at IS NULL AND expires_at > ?",
        (presented_sha256, clock(None))).fetchone()
    if row is None or not hmac.compare_digest(row["token_sha256"], presented_sha256):
        return None
    invoice = invoices.document_of(db, row["owner_id"], row["invoice_id"], True)
    if invoice is None or invoice["status"] != "issued":
        return None
    return Opened(row["id"], row["owner_id"], invoice)


async def open_link(db: Database, token: str) -> Opened | None:
    """What a presented token opens: the live link and its issued invoice, or None for every
    token that opens nothing. Reads only."""
    if not TOKEN.fullmatch(token):
        return None
    return await db.read(_opened, token_sha256(token))


def _viewed(db: sqlite3.Connection, link_id: str, now: float | None = None) -> None:
    now = clock(now)
    db.execute(
        "UPDATE share_links SET views = views + 1, first_viewed_at = COALESCE(first_viewed_at,"
        " ?) WHERE id = ? AND revoked_at IS NULL AND expires_at > ?", (now, link_id, now))


async def record_view(db: Database, link_id: str) -> None:
    """One more view of a live link; the first one's time is kept. One row, on its row lock
    alone: a busy link does not queue behind the studio's other writes."""
    await db.write(_viewed, link_id)

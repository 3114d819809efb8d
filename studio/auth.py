"""Passwords, server-side sessions, the current actor, and the cross-origin check."""

from __future__ import annotations

import functools
import hashlib
import secrets
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeSerializer

from studio.db import Database
from studio.errors import Refusal

SESSION_COOKIE = "studio_session"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
hasher = PasswordHasher()
# Verifying against this keeps an unknown email as slow as a wrong password.
_NOBODY_HASH = hasher.hash(secrets.token_hex(16))


@dataclass(frozen=True)
class Actor:
    id: str
    email: str
    session_id: str


def _session_key(token: str) -> str:
    """Sessions are stored by digest, so the database never holds a usable cookie."""
    return hashlib.sha256(token.encode()).hexdigest()


class Sessions:
    """Sign-in and sign-out, with the session id carried in a signed cookie."""

    def __init__(self, db: Database, signing_key: str | Sequence[str]) -> None:
        self.db = db
        keys = [signing_key] if isinstance(signing_key, str) else list(signing_key)
        # Newest first: new cookies are signed with keys[0], older keys only verify.
        self._signers = [URLSafeSerializer(key, salt="studio-session") for key in keys]
        self.cookies = self._signers[0]
        # A signature check always gives the same answer for the same cookie: remember good ones.
        self._session_key = functools.lru_cache(maxsize=4096)(self._verify)

    def _verify(self, cookie: str) -> str:
        for signer in self._signers:
            try:
                token = signer.loads(cookie)
            except BadSignature:
                continue
            # Only the exact cookie this studio issued: a variant (padding appended, say) would
            # still verify, and each would take its own place in the caches keyed by cookie.
            if not isinstance(token, str) or signer.dumps(token) != cookie:
                raise Refusal("not_signed_in")
            return _session_key(token)
        raise Refusal("not_signed_in")

    async def sign_in(self, email: object, password: object) -> tuple[Actor, str]:
        """The actor and the cookie value for a matching email and password."""
        if not isinstance(email, str) or not isinstance(password, str) or len(password) > 1024:
            raise Refusal("invalid_credentials")
        row = await self.db.read(_actor_by_email, email.strip().lower())
        try:
            hasher.verify(row["password_hash"] if row else _NOBODY_HASH, password)
        except (VerificationError, InvalidHashError):
            raise Refusal("invalid_credentials") from None
        if row is None:
            raise Refusal("invalid_credentials")
        if row["disabled_at"] is not None:
            raise Refusal("account_disabled")
        token = secrets.token_urlsafe(32)
        await self.db.write(_open_session, _session_key(token), row["id"], time.time())
        return Actor(row["id"], row["email"], _session_key(token)), self.cookies.dumps(token)

    async def actor(self, cookie: str | None) -> Actor:
        """The signed-in actor named by the cookie; the only source of identity."""
        if not cookie:
            raise Refusal("not_signed_in")
        row = await self.db.read(_actor_by_session, self._session_key(cookie))
        if row is None:
            raise Refusal("not_signed_in")
        return Actor(row["id"], row["email"], row["session_id"])


def _actor_by_email(db: sqlite3.Connection, email: str) -> sqlite3.Row | None:
    return db.execute(
        "SELECT id, email, password_hash, disabled_at FROM actors WHERE email = ?", (email,)
    ).fetchone()


def _actor_by_session(db: sqlite3.Connection, session_id: str) -> sqlite3.Row | None:
    return db.execute(
        "SELECT actors.id, actors.email, sessions.id AS session_id FROM sessions"
        " JOIN actors ON actors.id = sessions.actor_id WHERE sessions.id = ?"
        " AND actors.disabled_at IS NULL",
        (session_id,),
    ).fetchone()


def _open_session(db: sqlite3.Connection, session_id: str, actor_id: str, now: float) -> None:
    db.execute(
        "INSERT INTO sessions (id, actor_id, created_at) VALUES (?, ?, ?)",
        (session_id, actor_id, now),
    )


def add_actor(db: sqlite3.Connection, email: str, password: str) -> str:
    """Create an actor (inside the caller's transaction) and return its id."""
    actor_id = str(uuid.uuid4())
    db.execute(
        "INSERT INTO actors (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)",
        (actor_id, email.lower(), hasher.hash(password), time.time()),
    )
    return actor_id


def is_cross_origin(method: str, headers: dict[str, str]) -> bool:
    """True for an unsafe request a browser sent from another site.

    Sec-Fetch-Site is trusted when present; otherwise Origin is compared with Host.
    A client that sends neither (curl, a script) is not a browser and passes.
    """
    if method not in UNSAFE_METHODS:
        return False
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return False
    # Host only, not scheme: behind a TLS proxy the app itself is reached over plain http.
    return origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower()

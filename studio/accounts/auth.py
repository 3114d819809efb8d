"""Passwords, server-side sessions, the current actor, and the cross-origin check."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsdangerous import BadSignature, URLSafeSerializer

from studio.accounts import throttle
from studio.accounts.throttle import Limits
from studio.errors import Refusal, storage_full
from studio.store.db import Database
from studio.store.dialect import dialect_of
from studio.store.transactions import clock

log = logging.getLogger(__name__)
SESSION_COOKIE = "studio_session"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
hasher = PasswordHasher()
# Each argon2 check takes 64 MiB and, with its four lanes, up to four cores: half the cores'
# worth at once bounds the memory and leaves the event loop a core.
PASSWORD_CHECKS_AT_ONCE = max(1, (os.cpu_count() or 2) // 2)
# A throttled sign-in is answered after this pause: a flood's connections then cost a
# request a second each instead of a busy loop answering 429s as fast as they come.
REFUSED_SIGN_IN_PAUSE_S = 1.0
# An attempt waiting for those in flight asks the database this often whether they ended, so
# attempts on other hosts count too.
IN_FLIGHT_POLL_S = 0.1
# A session's last use is written at most this often, so a poll is not a write; a tenth of
# the idle limit when that is shorter, so a session in steady use never reaches it.
TOUCH_EVERY_S = 60.0


@functools.cache
def _nobody_hash() -> str:
    """Verifying against this keeps an unknown email as slow as a wrong password. Made when a
    process first checks a password, not when it imports this module: a `studio` command that
    signs nobody in does not pay for an argon2 hash."""
    return hasher.hash(secrets.token_hex(16))


@dataclass(frozen=True)
class Actor:
    id: str
    email: str
    session_id: str
    language: str | None = None  # the pages' language the person chose; None: the browser's


def _session_key(token: str) -> str:
    """Sessions are stored by digest, so the database never holds a usable cookie."""
    return hashlib.sha256(token.encode()).hexdigest()


# (db, previous session, new session, actor id, now): run inside the sign-in's transaction.
Handover = Callable[[sqlite3.Connection, str, str, str, float], None]


class Sessions:
    """Sign-in and sign-out, with the session id carried in a signed cookie."""

    def __init__(self, db: Database, signing_key: str | Sequence[str], *,
                 idle_seconds: float = 43200.0, max_seconds: float = 604800.0,
                 limits: Limits | None = None, handover: Handover | None = None) -> None:
        self.db = db
        # What a session replaced by a new sign-in hands over to it, in the same transaction
        # (the leasing floor's `leases.hand_over`: the running requests move, the rest end).
        self.handover = handover
        keys = [signing_key] if isinstance(signing_key, str) else list(signing_key)
        # Newest first: new cookies are signed with keys[0], older keys only verify.
        self._signers = [URLSafeSerializer(key, salt="studio-session") for key in keys]
        self.cookies = self._signers[0]
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.touch_every = min(TOUCH_EVERY_S, idle_seconds / 10)
        self.limits = limits or Limits()
        self._password_slots = asyncio.Semaphore(PASSWORD_CHECKS_AT_ONCE)
        # A signature check always gives the same answer for the same cookie: remember good ones.
        self._session_key = functools.lru_cache(maxsize=4096)(self._verify)
        # session key -> until when this process knows the session is current (see `confirmed`)
        self._current_until: dict[str, float] = {}

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

    async def verify_password(self, password_hash: str | None, password: str) -> bool:
        """argon2 on a worker thread, a few at a time: a sign-in never blocks the event loop.
        No hash (an unknown email) is checked against a stand-in, as slowly, and never matches."""
        async with self._password_slots:
            return await asyncio.to_thread(_verify_password, password_hash, password)

    async def sign_in(self, email: object, password: object, address: str = "",
                      presented: str | None = None) -> tuple[Actor, str]:
        """The actor and the cookie value for a matching email and password.

        Attempts are counted before the password is checked and throttled per email and
        client address (429 `too_many_attempts`; see studio/accounts/throttle.py); an attempt past a
        limit reached only by attempts still being checked waits for them. Every sign-in
        makes a new session; the one the browser presented, if any, ends (its live leases
        move to the new session when it is the same actor's)."""
        if not isinstance(email, str) or not isinstance(password, str) or len(password) > 1024:
            raise Refusal("invalid_credentials")
        email = email.strip().lower()
        previous = None
        if presented:
            try:
                previous = self._session_key(presented)
            except Refusal:
                previous = None
        vouched = previous is not None and await self._signed_in_as(presented, email)
        attempt = await self._begin_attempt(email, address, vouched)
        row = await self.db.read(_actor_by_email, email)
        matched = await self.verify_password(row["password_hash"] if row else None, password)
        if not matched or row is None:
            await self.db.write(throttle.failed, attempt)
            raise Refusal("invalid_credentials")
        if row["disabled_at"] is not None:
            await self.db.write(throttle.succeeded, attempt, email, address)
            raise Refusal("account_disabled")
        token = secrets.token_urlsafe(32)
        await self.db.write(_signed_in, attempt, email, address, _session_key(token), row["id"],
                            previous, self.handover)
        return Actor(row["id"], row["email"], _session_key(token)), self.cookies.dumps(token)

    async def _begin_attempt(self, email: str, address: str, vouched: bool) -> str:
        """Record the attempt; past a limit reached only with attempts still being checked, wait
        for their outcome (at most the limits' `in_flight_seconds`) instead of refusing."""
        deadline = time.monotonic() + self.limits.in_flight_seconds
        while True:
            try:
                return await self.db.write(throttle.begin, email, address, vouched, self.limits)
            except throttle.Pending:
                if time.monotonic() >= deadline:
                    await asyncio.sleep(REFUSED_SIGN_IN_PAUSE_S)
                    raise
            except Refusal:
                await asyncio.sleep(REFUSED_SIGN_IN_PAUSE_S)
                raise
            # Waiting reads, and writes again only once the attempts it waits for have ended.
            await asyncio.sleep(IN_FLIGHT_POLL_S)
            while time.monotonic() < deadline and not await self.db.read(
                    throttle.settled, email, address, vouched, self.limits):
                await asyncio.sleep(IN_FLIGHT_POLL_S)

    async def _signed_in_as(self, cookie: str | None, email: str) -> bool:
        """Whether the browser holds a current session of the account it signs in to."""
        try:
            return (await self.actor(cookie)).email == email
        except Refusal:
            return False

    async def actor(self, cookie: str | None) -> Actor:
        """The signed-in actor named by the cookie; the only source of identity. A session
        idle or old past its limits is refused here, before the sweeper removes it."""
        if not cookie:
            raise Refusal("not_signed_in")
        key = self._session_key(cookie)
        row, now = await self.db.read(_actor_by_session, key)
        if row is None:
            raise Refusal("not_signed_in")
        seen = row["last_seen_at"] or row["created_at"]
        ends_at = min(row["created_at"] + self.max_seconds, seen + self.idle_seconds)
        if ends_at <= now:
            self._current_until.pop(key, None)
            raise Refusal("not_signed_in")
        if now - seen >= self.touch_every:
            try:
                await self.db.write(_touch_session, key, now)
                seen = now
            except sqlite3.OperationalError as error:
                # A full disk must not turn every page into an error: the use goes unrecorded
                # and is tried again on the next request.
                if not storage_full(error):
                    raise
                log.warning("a session's use could not be recorded: %s", error)
        if len(self._current_until) > 4096:
            self._current_until.clear()
        # Kept as a span of this process's monotonic clock: its wall clock may be wrong.
        self._current_until[key] = time.monotonic() + min(ends_at, seen + self.touch_every) - now
        return Actor(row["id"], row["email"], row["session_id"], row["language"])

    def confirmed(self, cookie: str | None) -> bool:
        """Whether this process saw the cookie's session current lately and it cannot have
        expired or be due a touch since: only then may a remembered answer stand in for it."""
        if not cookie:
            return False
        try:
            key = self._session_key(cookie)
        except Refusal:
            return False
        return self._current_until.get(key, 0.0) > time.monotonic()


def _verify_password(password_hash: str | None, password: str) -> bool:
    if password_hash is None:
        _verify_password(_nobody_hash(), password)
        return False
    try:
        return hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _actor_by_email(db: sqlite3.Connection, email: str) -> sqlite3.Row | None:
    return db.execute(
        "SELECT id, email, password_hash, disabled_at FROM actors WHERE email = ?", (email,)
    ).fetchone()


def _actor_by_session(db: sqlite3.Connection, session_id: str
                      ) -> tuple[sqlite3.Row | None, float]:
    """The session's actor, and the time it is judged at: the database's clock on PostgreSQL,
    so a host whose clock is wrong ends no session early and keeps none late."""
    return db.execute(
        "SELECT actors.id, actors.email, actors.language, sessions.id AS session_id,"
        " sessions.created_at, sessions.last_seen_at FROM sessions"
        " JOIN actors ON actors.id = sessions.actor_id WHERE sessions.id = ?"
        " AND actors.disabled_at IS NULL",
        (session_id,),
    ).fetchone(), clock(None)


def _open_session(db: sqlite3.Connection, session_id: str, actor_id: str, now: float,
                  previous: str | None = None, handover: Handover | None = None) -> None:
    db.execute(
        "INSERT INTO sessions (id, actor_id, created_at, last_seen_at) VALUES (?, ?, ?, ?)",
        (session_id, actor_id, now, now),
    )
    if previous is None:
        return
    # The old session goes first: a request being made in it commits before (and whatever it
    # started is handed over) or finds it gone.
    db.execute("DELETE FROM sessions WHERE id = ?", (previous,))
    if handover is not None:
        handover(db, previous, session_id, actor_id, now)


def _signed_in(db: sqlite3.Connection, attempt: str, email: str, address: str,
               session_id: str, actor_id: str, previous: str | None,
               handover: Handover | None) -> None:
    now = clock(None)
    throttle.succeeded(db, attempt, email, address, now)
    _open_session(db, session_id, actor_id, now, previous, handover)


def _touch_session(db: sqlite3.Connection, session_id: str, now: float) -> None:
    db.execute("UPDATE sessions SET last_seen_at = ? WHERE id = ?", (now, session_id))


def expired_sessions(db: sqlite3.Connection, now: float | None, idle_seconds: float,
                     max_seconds: float, skip_locked: bool = False) -> list[str]:
    """Sessions past their absolute life, or unused for longer than the idle limit;
    `skip_locked` locks them, passing over any another transaction holds (one in use now)."""
    now = clock(now)
    return [row[0] for row in db.execute(
        "SELECT id FROM sessions WHERE (created_at <= ?"
        " OR COALESCE(last_seen_at, created_at) <= ?)"
        f" {dialect_of(db).skip_locked_row if skip_locked else ''}",
        (now - max_seconds, now - idle_seconds),
    )]


def sessions_of(db: sqlite3.Connection, actor_id: str) -> list[str]:
    return [row[0] for row in db.execute(
        "SELECT id FROM sessions WHERE actor_id = ?", (actor_id,))]


def add_actor(db: sqlite3.Connection, email: str, password: str,
              password_hash: str | None = None) -> str:
    """Create an actor (inside the caller's transaction) and return its id. Pass a hash made
    beforehand (`accounts.hash_password`) to keep argon2 out of the transaction."""
    actor_id = str(uuid.uuid4())
    db.execute(
        "INSERT INTO actors (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)",
        (actor_id, email.lower(), password_hash or hasher.hash(password), time.time()),
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
    if origin == "null":
        return True
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # an Origin nobody can read cannot be shown to be this site
        return True
    # Host only, not scheme: behind a TLS proxy the app itself is reached over plain http.
    return not netloc or netloc.lower() != headers.get("host", "").lower()

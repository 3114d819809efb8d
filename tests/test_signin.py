"""Sign-in under attack: password checks never block the event loop, failed sign-ins are
throttled per email and client address, and a flood against one email does not lock its owner
out (finding 1 of issue 9). Attempts are counted in the database before their password is
checked, so neither concurrency nor a second process gets past the limits (finding 1 of
issue 14). The flood's effect on latency is measured in bench/, not here."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from studio.accounts import auth, throttle
from studio.accounts.auth import SESSION_COOKIE
from studio.accounts.throttle import Limits
from studio.errors import Refusal
from studio.ops.demo import DEMO_PASSWORD, seed_demo
from studio.store import sqlite as sqlite_store
from studio.store.db import open_database
from studio.store.transactions import in_transaction
from tests.conftest import ADA, BEN, Running, rows, running, scalar

pytestmark = pytest.mark.anyio


def from_address(studio: Running, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=studio.app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://studio.test",
                             headers={"Accept": "application/json"})


async def attempt(studio: Running, address: str, email: str, password: str) -> httpx.Response:
    async with from_address(studio, address) as client:
        return await client.post("/login", json={"email": email, "password": password})


def sessions_of(studio: Running, email: str) -> int:
    return scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sessions JOIN actors"
                  " ON actors.id = sessions.actor_id WHERE actors.email = ?", email)


@pytest.fixture
async def strict(settings: Any) -> AsyncIterator[Running]:
    """Small limits, so an attack is a few dozen requests."""
    tight = settings.with_changes(signin_failures_per_pair=3, signin_failures_per_address=8,
                                  signin_failures_per_email=5)
    async with running(tight) as started:
        yield started


async def test_repeated_wrong_passwords_get_429_with_retry_after_and_no_session(strict):
    for _ in range(3):
        assert (await attempt(strict, "10.0.0.1", ADA, "wrong")).status_code == 401
    refused = await attempt(strict, "10.0.0.1", ADA, "wrong")
    assert refused.status_code == 429
    assert refused.json()["detail"] == "too_many_attempts" and refused.json()["message"]
    assert 0 < int(refused.headers["retry-after"]) <= 900
    # The pair is locked even for the right password: the guesser cannot tell it was right.
    assert (await attempt(strict, "10.0.0.1", ADA, DEMO_PASSWORD)).status_code == 429
    assert sessions_of(strict, ADA) == 0


async def test_one_address_trying_many_emails_is_throttled(strict):
    answers = [(await attempt(strict, "10.0.0.2", f"guess{n}@example.com", "x")).status_code
               for n in range(10)]
    assert answers[:8] == [401] * 8 and answers[8:] == [429, 429]
    assert scalar(strict.settings.db_path, "SELECT COUNT(*) FROM sessions") == 0


async def test_a_flood_against_one_email_does_not_lock_its_owner_out(strict):
    # Ada signed in from home before; her laptop, signed in, now sits on another network.
    assert (await attempt(strict, "192.168.1.10", ADA, DEMO_PASSWORD)).status_code == 200
    async with from_address(strict, "172.16.0.5") as signed_in:
        await signed_in.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
        laptop = with_cookie_of(strict, signed_in, "172.16.0.6")
    # Many addresses guess Ada's password, two each: the email limit is reached.
    for n in range(6):
        for _ in range(2):
            await attempt(strict, f"10.1.0.{n}", ADA, "wrong")
    assert (await attempt(strict, "10.1.0.0", ADA, "wrong")).status_code == 429
    # An address that never signed in to Ada is refused, even with the right password...
    stranger = await attempt(strict, "192.168.1.99", ADA, DEMO_PASSWORD)
    assert stranger.status_code == 429 and int(stranger.headers["retry-after"]) > 0
    # ...and so is one carrying someone else's session.
    bens = await strict.signed_in(BEN)
    with_bens = with_cookie_of(strict, bens, "192.168.1.98")
    async with with_bens:
        refused = await with_bens.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
    assert refused.status_code == 429
    # Ada signs in from home, and from her signed-in laptop on its new network.
    assert (await attempt(strict, "192.168.1.10", ADA, DEMO_PASSWORD)).status_code == 200
    async with laptop:
        moved = await laptop.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
    assert moved.status_code == 200, moved.text
    # Ben is not affected; Ada's mistyping from home stays under the pair limit.
    assert (await attempt(strict, "192.168.1.11", BEN, DEMO_PASSWORD)).status_code == 200
    assert (await attempt(strict, "192.168.1.10", ADA, "typo")).status_code == 401
    assert (await attempt(strict, "192.168.1.10", ADA, DEMO_PASSWORD)).status_code == 200
    assert sessions_of(strict, ADA) == 4  # home three times; the laptop's moved with it


def with_cookie_of(studio: Running, client: httpx.AsyncClient, address: str
                   ) -> httpx.AsyncClient:
    """A browser at `address` carrying the session cookie `client` was given."""
    moved = from_address(studio, address)
    moved.cookies.set(SESSION_COOKIE, client.cookies[SESSION_COOKIE])
    return moved


class GatedHasher:
    """Stands in for argon2: each verify waits for the gate and counts who runs at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.order: list[str] = []

    def verify(self, password_hash: str, password: str) -> bool:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        # Bounded, so a check on the event loop shows up as a failed order, not a hang.
        self.gate.wait(10)
        with self.lock:
            self.running -= 1
            self.order.append("verified")
        return False


async def test_password_checks_never_block_the_event_loop(studio, monkeypatch):
    reader = await studio.signed_in()
    fake = GatedHasher()
    monkeypatch.setattr(auth, "hasher", fake)
    answers: list[int] = []

    async def wrong(n: int) -> None:
        answers.append((await attempt(studio, f"10.2.0.{n}", ADA, "wrong")).status_code)

    async with anyio.create_task_group() as group:
        for n in range(5):
            group.start_soon(wrong, n)
        with anyio.fail_after(20):  # a check on the loop would never let two run at once
            while fake.running < auth.PASSWORD_CHECKS_AT_ONCE:
                await anyio.sleep(0.01)
        # Five checks are waiting on argon2; the studio still answers everyone else.
        listed = await reader.get("/invoices")
        fake.order.append("invoices answered")
        assert listed.status_code == 200
        fake.gate.set()
    assert fake.order[0] == "invoices answered"
    assert fake.most == auth.PASSWORD_CHECKS_AT_ONCE  # argon2's memory is bounded
    assert answers == [401] * 5
    assert sessions_of(studio, ADA) == 1


class CountedCheck:
    """Stands in for argon2's verify, on its worker thread: counts every password checked,
    takes a little while so attempts overlap, and knows only the demo password."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checks = 0

    def __call__(self, password_hash: str | None, password: str) -> bool:
        with self.lock:
            self.checks += 1
        time.sleep(0.02)
        return password == DEMO_PASSWORD


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> CountedCheck:
    check = CountedCheck()
    monkeypatch.setattr(auth, "_verify_password", check)
    return check


def attempts_of(studio: Running, email: str) -> dict[str, int]:
    return {row["outcome"]: row["n"] for row in rows(
        studio.settings.db_path, "SELECT outcome, COUNT(*) AS n FROM sign_in_attempts"
        " WHERE email = ? GROUP BY outcome", email)}


async def at_once(*tries: Any) -> list[httpx.Response]:
    answers: list[httpx.Response] = []

    async def one(args: Any) -> None:
        answers.append(await attempt(*args))

    async with anyio.create_task_group() as group:
        for args in tries:
            group.start_soon(one, args)
    return answers


def refused_properly(reply: httpx.Response) -> bool:
    return (reply.status_code == 429 and reply.json()["detail"] == "too_many_attempts"
            and int(reply.headers["retry-after"]) > 0)


async def test_sixty_simultaneous_wrong_passwords_check_at_most_five(studio, counted):
    answers = await at_once(*[(studio, "10.3.0.1", ADA, "wrong")] * 60)
    assert counted.checks == studio.settings.signin_failures_per_pair == 5
    assert sorted(reply.status_code for reply in answers) == [401] * 5 + [429] * 55
    assert all(refused_properly(reply) for reply in answers if reply.status_code == 429)
    assert attempts_of(studio, ADA) == {"failed": 5}
    assert sessions_of(studio, ADA) == 0


async def test_after_sixty_failures_fresh_addresses_are_refused_for_that_email(studio, counted):
    per_email = studio.settings.signin_failures_per_email
    flood = await at_once(*[(studio, f"10.5.0.{n}", ADA, "wrong") for n in range(60)])
    assert sorted(reply.status_code for reply in flood) == [401] * per_email + [429] * (
        60 - per_email)
    assert counted.checks == per_email
    fresh = await at_once(*[(studio, f"10.6.0.{n}", ADA, "guess") for n in range(40)])
    assert all(refused_properly(reply) for reply in fresh), [r.status_code for r in fresh]
    # The right password from a fresh address is refused the same: a guesser learns nothing.
    assert refused_properly(await attempt(studio, "10.6.1.1", ADA, DEMO_PASSWORD))
    assert counted.checks == per_email
    assert attempts_of(studio, ADA) == {"failed": per_email}
    assert sessions_of(studio, ADA) == 0
    # Another email is not affected.
    assert (await attempt(studio, "10.6.0.1", BEN, DEMO_PASSWORD)).status_code == 200


async def test_the_owner_signs_in_from_an_address_that_signed_in_before_during_a_flood(
        studio, counted):
    assert (await attempt(studio, "192.168.7.7", ADA, DEMO_PASSWORD)).status_code == 200
    await at_once(*[(studio, f"10.7.0.{n}", ADA, "wrong") for n in range(60)])
    assert refused_properly(await attempt(studio, "10.7.1.1", ADA, "wrong"))
    owner = await attempt(studio, "192.168.7.7", ADA, DEMO_PASSWORD)
    assert owner.status_code == 200, owner.text
    assert sessions_of(studio, ADA) == 2
    known = rows(studio.settings.db_path, "SELECT email, address FROM sign_in_known")
    assert [tuple(row) for row in known] == [(ADA, "192.168.7.7")]


async def test_two_processes_on_one_database_share_the_counts(settings, counted):
    """Two Sessions on one file, as two `--workers` processes have: one pair limit between
    them, however the attempts are split and however they overlap."""
    first, second = (await open_database(settings).open(),
                     await open_database(settings).open())
    try:
        one, other = (auth.Sessions(db, "test-secret", limits=Limits(per_pair=5))
                      for db in (first, second))
        codes: list[str] = []

        async def guess(sessions: auth.Sessions) -> None:
            try:
                await sessions.sign_in(ADA, "wrong", "10.8.0.1")
            except Refusal as refusal:
                codes.append(refusal.code)

        async with anyio.create_task_group() as group:
            for n in range(60):
                group.start_soon(guess, one if n % 2 else other)
        assert counted.checks == 5
        assert sorted(codes) == ["invalid_credentials"] * 5 + ["too_many_attempts"] * 55
        # Failures counted through one are refused through the other, the right password too.
        with pytest.raises(Refusal) as refused:
            await other.sign_in(ADA, DEMO_PASSWORD, "10.8.0.1")
        assert refused.value.code == "too_many_attempts"
    finally:
        await first.close()
        await second.close()
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM sign_in_attempts WHERE email = ?"
                  " AND outcome = 'failed'", ADA) == 5


async def test_a_pending_attempt_of_a_dead_process_ages_out_with_the_window(settings, counted):
    """An attempt recorded as pending by a process that died before its check ended is waited
    for no longer than a check can last, then counts as a failure for the window, then no more;
    the rows past the window are removed."""
    db = await open_database(settings).open()
    try:
        window = 1.0
        sessions = auth.Sessions(db, "test-secret", limits=Limits(
            window_seconds=window, per_pair=1, in_flight_seconds=0.3))
        # A process records its attempt, then dies before checking the password.
        await db.write(throttle.begin, ADA, "10.9.0.1", False, sessions.limits)
        assert scalar(settings.db_path, "SELECT outcome FROM sign_in_attempts") == "pending"
        with pytest.raises(Refusal) as refused:
            await sessions.sign_in(ADA, DEMO_PASSWORD, "10.9.0.1")
        assert refused.value.code == "too_many_attempts" and counted.checks == 0
        await anyio.sleep(window + 0.1)
        actor, _ = await sessions.sign_in(ADA, DEMO_PASSWORD, "10.9.0.1")
        assert actor.email == ADA and counted.checks == 1
    finally:
        await db.close()
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM sign_in_attempts") == 0


async def test_the_lock_message_says_how_long_it_lasts(strict):
    for _ in range(3):
        await attempt(strict, "10.10.0.1", ADA, "wrong")
    refused = await attempt(strict, "10.10.0.1", ADA, "wrong")
    assert refused.status_code == 429
    assert "15 minutes" in refused.json()["message"], refused.json()
    assert "a few minutes" not in refused.json()["message"]
    async with from_address(strict, "10.10.0.1") as browser:
        browser.headers["Accept"] = "text/html"
        page = await browser.post("/login", data={"email": ADA, "password": "wrong"})
    assert page.status_code == 429 and "15 minutes" in page.text


async def test_sixteen_correct_passwords_at_once_all_get_in(studio, counted):
    """Attempts past the pair limit wait for the outcome of those being checked instead of
    being refused: right passwords sent at one moment all sign in."""
    answers = await at_once(*[(studio, "10.11.0.1", ADA, DEMO_PASSWORD)] * 16)
    assert [reply.status_code for reply in answers] == [200] * 16, [
        reply.text for reply in answers if reply.status_code != 200]
    assert counted.checks == 16
    assert sessions_of(studio, ADA) == 16
    assert attempts_of(studio, ADA) == {}


async def test_correct_passwords_at_once_through_two_processes_all_get_in(settings, counted):
    """The wait polls the database, so an attempt in flight on one host lets another host's
    wait end as soon as it succeeds."""
    first, second = (await open_database(settings).open(),
                     await open_database(settings).open())
    try:
        one, other = (auth.Sessions(db, "test-secret", limits=Limits(per_pair=2))
                      for db in (first, second))
        signed_in: list[str] = []

        async def sign_in(sessions: auth.Sessions) -> None:
            actor, _ = await sessions.sign_in(ADA, DEMO_PASSWORD, "10.12.0.1")
            signed_in.append(actor.email)

        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(sign_in, one if n % 2 else other)
        assert signed_in == [ADA] * 8 and counted.checks == 8
    finally:
        await first.close()
        await second.close()
    assert sessions_of_path(settings.db_path, ADA) == 8
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM sign_in_attempts") == 0


def sessions_of_path(db_path: Any, email: str) -> int:
    return scalar(db_path, "SELECT COUNT(*) FROM sessions JOIN actors"
                  " ON actors.id = sessions.actor_id WHERE actors.email = ?", email)


def test_the_demo_is_seeded_with_argon2_at_its_default_cost(tmp_path):
    """The template the in-process tests copy carries quick hashes (tests/backends.py); the
    demo a studio seeds for itself does not."""
    db = sqlite_store.connect(tmp_path / "studio.db")
    try:
        in_transaction(db, seed_demo)
        hashes = [row[0] for row in db.execute("SELECT password_hash FROM actors")]
    finally:
        db.close()
    assert len(hashes) == 2 and len(set(hashes)) == 2
    assert all(h.startswith("$argon2id$v=19$m=65536,t=3,p=4$") for h in hashes), hashes

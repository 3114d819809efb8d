"""Sign-in under attack: password checks never block the event loop, failed sign-ins are
throttled per email and client address, and a flood against one email does not lock its owner
out (finding 1 of issue 9). The flood's effect on latency is measured in bench/, not here."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from studio import auth
from studio.demo import DEMO_PASSWORD
from tests.conftest import ADA, BEN, Running, running, scalar

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
    # Many addresses guess Ada's password, two each: the email limit is reached.
    for n in range(6):
        for _ in range(2):
            await attempt(strict, f"10.1.0.{n}", ADA, "wrong")
    flooder = await attempt(strict, "10.1.0.0", ADA, "wrong")
    assert flooder.status_code == 429
    # Ada, from an address that has not failed, signs in; so does Ben from anywhere clean.
    owner = await attempt(strict, "192.168.1.10", ADA, DEMO_PASSWORD)
    assert owner.status_code == 200, owner.text
    assert (await attempt(strict, "192.168.1.11", BEN, DEMO_PASSWORD)).status_code == 200
    # Ada mistypes once from her own address, then gets it right: her known address passes.
    assert (await attempt(strict, "192.168.1.10", ADA, "typo")).status_code == 401
    assert (await attempt(strict, "192.168.1.10", ADA, DEMO_PASSWORD)).status_code == 200
    assert sessions_of(strict, ADA) == 2 and sessions_of(strict, BEN) == 1


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

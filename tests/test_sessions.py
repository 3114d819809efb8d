"""Sessions end (finding 5 of issue 9): after STUDIO_SESSION_IDLE_SECONDS unused and after
STUDIO_SESSION_MAX_SECONDS in all, checked on every request, remembered answers included;
the sweeper removes them and expires their leases; "sign out everywhere" ends them all; every
sign-in makes a new session id. The clock is moved by hand, never waited for."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from studio.accounts import auth
from studio.accounts.auth import SESSION_COOKIE
from studio.leasing import leases
from studio.ops.demo import DEMO_PASSWORD
from studio.store import transactions as store
from tests import backends
from tests.conftest import ADA, BEN, Running, execute, lease_body, rows, running, scalar

pytestmark = pytest.mark.anyio

IDLE, MOST = 3600.0, 86400.0


class Clock:
    """Stands in for the time module inside studio.auth: now, plus however far we moved it."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def time(self) -> float:
        return time.time() + self.ahead

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


def move_time(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Sessions are judged by the database's clock (studio.db.clock) and remembered by this
    process's monotonic one (studio.auth): both move together."""
    from studio.store.postgres import Connection

    clock = Clock()
    monkeypatch.setattr(auth, "time", clock)
    monkeypatch.setattr(store, "time", clock)
    # On PostgreSQL a connection reads the database's clock: it moves by as much.
    read = Connection.database_clock
    monkeypatch.setattr(Connection, "database_clock", lambda db: read(db) + clock.ahead)
    return clock


@pytest.fixture
async def studio(settings: Any) -> AsyncIterator[Running]:
    short = settings.with_changes(session_idle_seconds=IDLE, session_max_seconds=MOST,
                                  sweeper=False, embedded_worker=False)
    async with running(short) as started:
        yield started


def session_rows(studio: Running, email: str = ADA) -> list[Any]:
    return rows(studio.settings.db_path, "SELECT sessions.* FROM sessions JOIN actors"
                " ON actors.id = sessions.actor_id WHERE actors.email = ?", email)


async def open_lease(studio: Running, client: Any, request_id: str) -> str:
    reply = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1], request_id))
    assert reply.status_code == 201
    return reply.json()["lease_id"]


def lease_row(studio: Running, lease_id: str) -> Any:
    return rows(studio.settings.db_path, "SELECT * FROM leases WHERE id = ?", lease_id)[0]


# absolute: the session was made in real time before the clock moves, so the requests up to a
# second before its end must be answered within that second
@pytest.mark.alone
@pytest.mark.parametrize("moved", [IDLE + 1, MOST + 1], ids=["idle", "absolute"])
async def test_an_expired_session_is_refused_even_where_answers_are_remembered(
        studio, monkeypatch, moved):
    client = await studio.signed_in()
    lease_id = await open_lease(studio, client, "r")
    assert (await client.get(f"/leases/{lease_id}")).status_code == 200  # remembered now
    clock = move_time(monkeypatch)
    if moved > IDLE + 1:  # absolute: in use every half idle period up to a second before
        # the end, so idle expiry never applies; it ends all the same
        for used in [*range(0, int(MOST), int(IDLE / 2)), MOST - 1]:
            clock.ahead = used
            assert (await client.get("/invoices")).status_code == 200, used
        assert moved - clock.ahead < IDLE
    clock.ahead = moved
    for path in (f"/leases/{lease_id}", "/invoices"):
        reply = await client.get(path)
        assert reply.status_code == 401 and reply.json()["detail"] == "not_signed_in", path
    assert lease_row(studio, lease_id)["status"] == "open"  # the sweeper's job, below
    ended = await studio.studio.db.write(leases.end_expired_sessions, IDLE, MOST,
                                         clock.time())
    assert ended == 1 and session_rows(studio) == []
    lease = lease_row(studio, lease_id)
    assert (lease["status"], lease["ended_reason"]) == ("expired", "session_expired")


async def test_use_is_recorded_at_most_once_a_minute(studio, monkeypatch):
    client = await studio.signed_in()
    first = session_rows(studio)[0]["last_seen_at"]
    for _ in range(3):
        assert (await client.get("/invoices")).status_code == 200
    assert session_rows(studio)[0]["last_seen_at"] == first
    clock = move_time(monkeypatch)
    clock.ahead = auth.TOUCH_EVERY_S + 1
    assert (await client.get("/invoices")).status_code == 200
    assert session_rows(studio)[0]["last_seen_at"] > first + auth.TOUCH_EVERY_S


async def test_the_sweeper_ends_expired_sessions_and_their_leases(settings):
    async with running(settings.with_changes(embedded_worker=False)) as studio:
        client = await studio.signed_in()
        lease_id = await open_lease(studio, client, "swept")
        await studio.signed_in(BEN)
        # Ada's session was last used long ago.
        long_ago = time.time() - settings.session_idle_seconds - 5
        execute(studio.settings.db_path, "UPDATE sessions SET last_seen_at = ?, created_at = ?"
                " WHERE actor_id = (SELECT id FROM actors WHERE email = ?)", long_ago, long_ago,
                ADA)
        with anyio.fail_after(20):  # the sweeper looks every few seconds
            while lease_row(studio, lease_id)["status"] != "expired":
                await anyio.sleep(0.1)
        assert lease_row(studio, lease_id)["ended_reason"] == "session_expired"
        assert session_rows(studio) == [] and len(session_rows(studio, BEN)) == 1
        assert (await client.get("/invoices")).status_code == 401


async def test_sign_out_everywhere_ends_every_session_and_their_leases(studio):
    laptop, phone = await studio.signed_in(), await studio.signed_in()
    ben = await studio.signed_in(BEN)
    on_laptop = await open_lease(studio, laptop, "laptop")
    on_phone = await open_lease(studio, phone, "phone")
    reply = await phone.post("/logout/everywhere")
    assert reply.status_code == 200
    assert reply.json() == {"status": "signed_out", "sessions_ended": 2, "expired_leases": 2}
    assert (await laptop.get("/invoices")).status_code == 401
    assert session_rows(studio) == []
    for lease_id in (on_laptop, on_phone):
        assert (lease_row(studio, lease_id)["status"],
                lease_row(studio, lease_id)["ended_reason"]) == ("expired", "signed_out")
    assert (await ben.get("/invoices")).status_code == 200


async def test_the_sign_out_form_can_sign_out_everywhere(studio):
    laptop, phone = await studio.signed_in(), await studio.signed_in()
    phone.headers["Accept"] = "text/html"
    reply = await phone.post("/logout", data={"everywhere": "1"})
    assert reply.status_code == 303 and reply.headers["location"] == "/login"
    assert (await laptop.get("/invoices")).status_code == 401
    assert session_rows(studio) == []


async def test_every_sign_in_makes_a_new_session_and_ends_the_one_presented(studio):
    client = await studio.signed_in()
    first = client.cookies.get(SESSION_COOKIE)
    lease_id = await open_lease(studio, client, "kept")
    before = {row["id"] for row in session_rows(studio)}
    again = await client.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
    assert again.status_code == 200
    second = client.cookies.get(SESSION_COOKIE)
    assert second != first
    after = {row["id"] for row in session_rows(studio)}
    assert len(after) == 1 and not after & before
    stale = studio.client()
    stale.cookies.set(SESSION_COOKIE, first)
    assert (await stale.get("/invoices")).status_code == 401
    # The same person's running request moved to the new session, still open.
    lease = lease_row(studio, lease_id)
    assert lease["status"] == "open" and lease["session_id"] in after
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sessions") == 1


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@pytest.mark.parametrize("use", ["browsing", "polling"])
async def test_a_session_in_constant_use_outlives_an_idle_limit_under_a_minute(settings, use):
    """With a 2 s idle limit, use is recorded often enough that steady use keeps a session;
    a poll answered from remembered answers counts as use too. An unused one ends after 2 s."""
    idle = 2.0
    short = settings.with_changes(session_idle_seconds=idle, sweeper=False,
                                  embedded_worker=False)
    async with running(short) as studio:
        client, unused = await studio.signed_in(), await studio.signed_in()
        path = "/invoices"
        if use == "polling":  # nothing else writes: the poll is answered from memory
            path = f"/leases/{await open_lease(studio, client, 'polled')}"
        started = time.monotonic()
        while time.monotonic() - started < 5.0:
            assert (await client.get(path)).status_code == 200, time.monotonic() - started
            await anyio.sleep(0.5)
        reply = await unused.get("/invoices")
        assert reply.status_code == 401 and reply.json()["detail"] == "not_signed_in"
        now = time.time()
        seen = sorted(now - row["last_seen_at"] for row in session_rows(studio))
        assert seen[0] < idle < seen[1]  # in use, recorded; the unused one is left to the sweeper


@backends.postgres_only
async def test_the_sweep_passes_over_a_session_whose_lease_another_host_holds(studio):
    """A host paused inside an apply holds that lease's row: the sweep ends every other
    expired session at once, and that one the next round after the lease is let go."""
    import psycopg

    ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
    held = await open_lease(studio, ada, "held")
    reply = await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "free"))
    free = reply.json()["lease_id"]
    long_ago = time.time() - IDLE - 5
    execute(studio.settings.db_path, "UPDATE sessions SET last_seen_at = ?, created_at = ?",
            long_ago, long_ago)
    with psycopg.connect(backends.database_url(studio.settings.db_path)) as other_host:
        other_host.execute("SELECT id FROM leases WHERE id = %s FOR UPDATE", (held,))
        with anyio.fail_after(10):  # waiting for the held row would wait as long as its host
            ended = await studio.studio.db.write(leases.end_expired_sessions, IDLE, MOST)
        assert ended == 1 and session_rows(studio, BEN) == [] and session_rows(studio)
        assert lease_row(studio, free)["ended_reason"] == "session_expired"
        assert lease_row(studio, held)["status"] == "open"
        other_host.rollback()
    assert await studio.studio.db.write(leases.end_expired_sessions, IDLE, MOST) == 1
    assert session_rows(studio) == []
    assert lease_row(studio, held)["ended_reason"] == "session_expired"

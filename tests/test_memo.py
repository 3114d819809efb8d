"""Remembered answers are exactly what reading again would give."""

from __future__ import annotations

import asyncio

import pytest

from studio.store.sqlite import SqliteDatabase
from tests import backends
from tests.conftest import execute, lease_body, wait_for_status

pytestmark = pytest.mark.anyio

FRAGMENT = {"HX-Request": "true", "Accept": "text/html"}


async def test_a_poll_sees_a_commit_made_by_another_process(studio):
    client = await studio.signed_in()
    made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    lease_id = made.json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    assert (await client.get(f"/leases/{lease_id}")).json()["status"] == "proposed"
    assert (await client.get(f"/leases/{lease_id}", headers=FRAGMENT)).status_code == 200

    # Another process (a plain connection of its own) ends the lease behind the studio's back.
    execute(studio.settings.db_path, "UPDATE leases SET status = 'expired',"
            " ended_reason = 'deadline' WHERE id = ?", lease_id)

    assert (await client.get(f"/leases/{lease_id}")).json()["status"] == "expired"
    assert (await client.get(f"/leases/{lease_id}", headers=FRAGMENT)).status_code == 286


async def test_a_remembered_poll_is_not_served_to_a_signed_out_cookie(studio):
    client = await studio.signed_in()
    made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    lease_id = made.json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    for _ in range(3):
        assert (await client.get(f"/leases/{lease_id}")).status_code == 200
    stale = studio.client()
    stale.cookies.set("studio_session", client.cookies.get("studio_session"))

    await client.post("/logout")

    assert (await stale.get(f"/leases/{lease_id}")).status_code == 401
    assert (await stale.get(f"/leases/{lease_id}", headers=FRAGMENT)).status_code == 401


async def test_a_remembered_replay_is_not_served_after_sign_out(studio):
    client = await studio.signed_in()
    body = lease_body(studio.invoice_ids()[:1])
    assert (await client.post("/leases", json=body)).status_code == 201
    assert (await client.post("/leases", json=body)).status_code == 200
    stale = studio.client()
    stale.cookies.set("studio_session", client.cookies.get("studio_session"))
    await client.post("/logout")
    assert (await stale.post("/leases", json=body)).status_code == 401


async def test_a_remembered_replay_shows_the_lease_as_it_is_now(studio):
    client = await studio.signed_in()
    body = lease_body(studio.invoice_ids()[:1])
    lease_id = (await client.post("/leases", json=body)).json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    assert (await client.post("/leases", json=body)).json()["status"] == "proposed"
    await client.post(f"/leases/{lease_id}/cancel")
    assert (await client.post("/leases", json=body)).json()["status"] == "rejected"


async def test_the_edge_answers_a_remembered_poll_and_replay_exactly_as_the_handler_did(studio):
    """The edge (studio/web/edge.py) sends what the handlers remembered, byte for byte, status
    and headers too, and only while nothing was committed since; the first answer of each kind
    comes from the handler, the repeats from the edge."""
    recalled: list[bool] = []
    recall = studio.studio.memo.recall

    async def noted(key):
        kept = await recall(key)
        recalled.append(kept is not None)
        return kept

    studio.studio.memo.recall = noted
    client = await studio.signed_in()
    body = lease_body(studio.invoice_ids()[:1])
    lease_id = (await client.post("/leases", json=body)).json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")

    def seen(reply):
        return reply.status_code, sorted(reply.headers.multi_items()), reply.content

    for ask in (lambda: client.get(f"/leases/{lease_id}"),
                lambda: client.get(f"/leases/{lease_id}", headers=FRAGMENT),
                lambda: client.post("/leases", json=body)):
        recalled.clear()
        studio.studio.memo._kept.clear()  # nothing remembered yet: the handler answers first
        first = await ask()
        assert recalled == [False] and first.status_code == 200
        # On PostgreSQL a commit anywhere in the cluster (another test's) moves the version,
        # and the handler answers again; within a few repeats one comes from the edge.
        for _ in range(20):
            again = await ask()
            assert seen(again) == seen(first)
            if recalled[-1]:
                break
        assert recalled[-1], "no repeat was answered at the edge"

    # A commit elsewhere: the edge lets the next poll through to the handler, which reads it.
    execute(studio.settings.db_path, "UPDATE leases SET status = 'expired',"
            " ended_reason = 'deadline' WHERE id = ?", lease_id)
    recalled.clear()
    assert (await client.get(f"/leases/{lease_id}")).json()["status"] == "expired"
    assert recalled == [False]


@backends.sqlite_only
async def test_the_version_is_read_once_a_turn_and_never_before_a_request_arrived(tmp_path):
    """SQLite's version is read once per turn of the event loop, for the requests whose steps
    were scheduled before the reading (studio/store/sqlite.py `version`); a step scheduled
    after it, or the task that took it, reads again and sees a commit made since."""
    path = tmp_path / "studio.db"
    db = await SqliteDatabase(path).open()
    statements: list[str] = []

    async def arrived() -> int:  # a request, in a task of its own, as uvicorn runs each
        return await db.version()

    try:
        db._watch.set_trace_callback(statements.append)
        first = await db.version()
        # Another connection commits; a request scheduled after the reading reads again.
        execute(path, "CREATE TABLE seen (x)")
        after = await asyncio.ensure_future(arrived())
        assert after != first and len(statements) == 2

        # The task that took a reading reads again, within the same step.
        mine = await db.version()
        execute(path, "CREATE TABLE seen_again (x)")
        assert await db.version() != mine

        # Three requests already waiting when the turn began: one reading between them.
        statements.clear()
        readings = await asyncio.gather(*(arrived() for _ in range(3)))
        assert len(statements) == 1 and len(set(readings)) == 1
        assert readings[0] == await asyncio.ensure_future(arrived())  # nothing committed since
    finally:
        await db.close()

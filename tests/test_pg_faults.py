"""Faults of the database itself: unreachable at start, lost while serving, back again."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests import backends
from tests.conftest import ROOT, days_ahead, running, studio_env

pytestmark = pytest.mark.anyio

UNREACHABLE = "postgresql://carol:s3cret-pw@127.0.0.1:1/studio"


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"], ["users", "list"],
                                     ["import", "drafts.csv", "--owner", "ada@example.com"]])
def test_an_unreachable_database_at_start_is_a_clear_message_and_exit_1(tmp_path, command):
    import subprocess
    import sys

    drafts = tmp_path / "drafts.csv"
    drafts.write_text("external_id,customer,currency,due_date,description,quantity,unit_price,"
                      "tax_rate\nx1,Acme,EUR,2027-01-31,Work,1,10,0\n")
    command = [str(drafts) if part == "drafts.csv" else part for part in command]
    env = studio_env(tmp_path / "studio.db", STUDIO_DATABASE_URL=UNREACHABLE)
    ran = subprocess.run([sys.executable, "-m", "studio.ops.cli", *command], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1, ran.stderr
    said = ran.stdout + ran.stderr
    assert "cannot be reached" in said and "127.0.0.1" in said, said
    assert "s3cret-pw" not in said
    assert "Traceback" not in said


@pytest.mark.skipif(not backends.ON_POSTGRES, reason="the PostgreSQL pass")
async def test_a_database_lost_while_serving_is_503_and_comes_back_by_itself(settings):
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(settings.database_url)["dbname"]
    admin = psycopg.connect(backends.url_of("postgres"), autocommit=True)

    def cut_off(allowed: bool) -> None:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS {str(allowed).lower()}")
        if not allowed:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = %s", (name,))

    try:
        async with running(settings.with_changes(sweeper=False)) as studio:
            client = await studio.signed_in()
            made = await client.post("/invoices", json={
                "request_id": "before", "customer": "Acme", "currency": "EUR",
                "due_date": days_ahead(61), "line_items": [
                    {"description": "Work", "quantity": "1", "unit_price": "10",
                     "tax_rate": "0"}]})
            assert made.status_code == 201, made.text

            cut_off(allowed=False)
            answers = [await client.get("/invoices") for _ in range(3)]
            health = await client.get("/healthz")
            assert [a.status_code for a in answers] == [503, 503, 503], [a.text for a in answers]
            assert {a.json()["detail"] for a in answers} == {"database_unavailable"}
            assert health.status_code == 503

            cut_off(allowed=True)
            deadline = time.monotonic() + 20
            while (await client.get("/healthz")).status_code != 200:
                assert time.monotonic() < deadline, "the studio did not come back by itself"
                await asyncio.sleep(0.2)
            listed = await client.get("/invoices")
            assert listed.status_code == 200
            assert made.json()["id"] in [invoice["id"] for invoice in listed.json()]
    finally:
        cut_off(allowed=True)
        admin.close()


@pytest.mark.skipif(not backends.ON_POSTGRES, reason="the PostgreSQL pass")
async def test_a_presence_stopped_while_it_is_taken_leaves_no_connection_open(tmp_path):
    """The mail worker takes its presence as the studio starts; a studio shut down at that
    moment cancels the taking. The connection already made is closed then, not left open until
    the garbage collector finds it (which psycopg reports as a ResourceWarning in whatever
    test runs next)."""
    import psycopg

    from studio.store import presence

    url = backends.database_url(tmp_path / "studio.db")
    key = presence.lock_key(presence._lock_name("outbox-1"))
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))  # so the taking waits
        here = presence.Presence("outbox-1", database_url=url)
        taking = asyncio.create_task(here.start())

        def waiting() -> int:
            return holder.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'").fetchone()[0]

        deadline = time.monotonic() + 10
        while waiting() == 0:
            assert time.monotonic() < deadline, "the presence never waited for its lock"
            await asyncio.sleep(0.02)
        connection = here._connection
        assert connection is not None and not connection.closed
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking
        assert connection.closed and here._connection is None

        def others() -> int:
            return holder.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()").fetchone()[0]

        # The server's backend leaves a moment after the client closes (longer on a busy
        # machine); one left open would stay until the garbage collector ran.
        deadline = time.monotonic() + 5
        while others() != 0:
            assert time.monotonic() < deadline, "the presence's connection was left open"
            await asyncio.sleep(0.05)


@pytest.mark.skipif(not backends.ON_POSTGRES, reason="the PostgreSQL pass")
async def test_the_version_asked_after_shutdown_opens_no_connection(tmp_path):
    """A request still asking for the database's version once the studio closed its database
    reads afresh (None) and opens no new connection that nobody would close."""
    import psycopg

    from studio.store.postgres import Versions

    url = backends.database_url(tmp_path / "studio.db")
    versions = Versions(url)
    assert await versions.current() is not None
    await versions.close()
    assert await versions.current() is None
    await asyncio.sleep(0.1)
    assert versions._connection is None
    with psycopg.connect(url, autocommit=True) as look:
        assert look.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname ="
                            " current_database() AND pid <> pg_backend_pid()").fetchone()[0] == 0

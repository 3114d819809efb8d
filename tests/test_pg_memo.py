"""Read-your-writes across hosts on PostgreSQL: once one host acknowledged a write, the other
host's very next answer shows it, even when that host remembered the answer before the write
and is busy checking the database's version for other requests at that moment."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from studio.accounts.auth import SESSION_COOKIE
from studio.config import Settings
from studio.leasing.leases import record_proposal
from studio.runtime.worker import claim_task
from studio.store.postgres import RECONNECT_EVERY_S
from tests import backends
from tests.conftest import Running, execute, lease_body, running

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(not backends.ON_POSTGRES,
                                 reason="several hosts share one database on PostgreSQL only")]

ROUNDS = 60
FRAGMENT = {"HX-Request": "true", "Accept": "text/html"}


def candidates(lease: dict[str, Any]) -> int:
    return sum(len(invoice["candidates"]) for invoice in lease["invoices"])


def remembered(host: Running, lease_id: str) -> bool:
    return any(key[0] == "lease" and lease_id in key for key in host.studio.memo._kept)


@contextlib.asynccontextmanager
async def polling(client: httpx.AsyncClient, path: str) -> AsyncIterator[list[int]]:
    """Another tab polling all along, so the host has a version check on its way whenever
    the test asks: an answer must not lean on a check that started before the write."""
    answered: list[int] = []

    async def poll() -> None:
        while True:
            answered.append((await client.get(path)).status_code)

    pollers = [asyncio.create_task(poll()) for _ in range(3)]
    try:
        yield answered
    finally:
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)


async def test_a_write_acknowledged_on_one_host_shows_in_the_other_hosts_next_answer(
        settings: Settings) -> None:
    quiet = settings.with_changes(embedded_worker=False, sweeper=False, secret_key="shared")
    async with running(quiet) as first, running(quiet) as second:
        on_first = await first.signed_in()
        on_second = second.client()
        on_second.cookies.set(SESSION_COOKIE, on_first.cookies[SESSION_COOKIE])
        other_tab = second.client()
        other_tab.cookies.set(SESSION_COOKIE, on_first.cookies[SESSION_COOKIE])
        invoice_ids = first.invoice_ids()[:2]
        watched = (await on_first.post("/leases", json=lease_body(
            invoice_ids, request_id="watched"))).json()["lease_id"]
        # Stopped at once: its tasks are not the ones the rounds claim.
        assert (await on_first.post(f"/leases/{watched}/cancel")).status_code == 200

        async with polling(other_tab, f"/leases/{watched}") as answered:
            for n in range(ROUNDS):
                made = await on_first.post("/leases", json=lease_body(
                    invoice_ids, request_id=f"round-{n}"))
                assert made.status_code == 201, made.text
                lease_id = made.json()["lease_id"]
                path = f"/leases/{lease_id}"
                for _ in range(2):
                    seen = (await on_second.get(path)).json()
                    assert (seen["status"], candidates(seen)) == ("open", 0)
                    assert (await on_second.get(path, headers=FRAGMENT)).status_code == 200
                assert remembered(second, lease_id), "the second host kept no answer to test"

                # A worker on the first host's database writes a suggestion.
                claim = uuid.uuid4().hex
                task = await first.studio.db.write(claim_task, claim, 30.0)
                assert task is not None and task.lease_id == lease_id
                assert await first.studio.db.write(
                    record_proposal, task.task_id, claim, task.actor_id, f"round {n}")
                seen = (await on_second.get(path)).json()
                assert (seen["status"], candidates(seen)) == ("open", 1), f"round {n}: {seen}"
                assert remembered(second, lease_id)

                # The person stops it on the first host.
                stopped = await on_first.post(f"{path}/cancel")
                assert stopped.status_code == 200, stopped.text
                assert (await on_second.get(path)).json()["status"] == "rejected", f"round {n}"
                assert (await on_second.get(path, headers=FRAGMENT)).status_code == 286

        assert answered and set(answered) == {200}
        for client in (on_first, on_second, other_tab):
            await client.aclose()


async def test_a_lost_version_connection_reads_afresh_until_it_is_made_again(settings):
    async with running(settings.with_changes(embedded_worker=False, sweeper=False)) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease_id = made.json()["lease_id"]
        path = f"/leases/{lease_id}"
        for _ in range(2):
            assert (await client.get(path)).json()["status"] == "open"
        assert remembered(studio, lease_id)

        # The version's own connection is cut, and the lease changes behind the studio's back.
        execute(settings.db_path, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query LIKE '%pg_current_snapshot%' AND pid != pg_backend_pid()")
        execute(settings.db_path, "UPDATE leases SET status = 'expired',"
                " ended_reason = 'deadline' WHERE id = ?", lease_id)

        seen = await client.get(path)
        assert (seen.status_code, seen.json()["status"]) == (200, "expired")
        assert await studio.studio.db.version() is None  # unknown until made again
        studio.studio.memo._kept.clear()

        await asyncio.sleep(RECONNECT_EVERY_S + 0.1)
        assert await studio.studio.db.version() is not None
        for _ in range(2):
            assert (await client.get(path)).json()["status"] == "expired"
        assert remembered(studio, lease_id)

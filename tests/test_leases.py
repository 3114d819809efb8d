"""Every model call is leased to the actor: late writers write nothing, apply is checked again."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from studio.runtime import worker
from studio.store.dialect import account_lock, hold
from tests import backends
from tests.conftest import (
    BEN,
    execute,
    lease_body,
    rows,
    running,
    scalar,
    table_counts,
    wait_for_status,
)

pytestmark = pytest.mark.anyio


class GatedProvider:
    """Holds every completion until the test releases it, so races are driven, not hoped for."""

    name = "local"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls: list[dict[str, Any]] = []

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        self.calls.append({"invoice": invoice, "actor_id": actor_id, "timeout": timeout})
        self.started.set()
        await self.release.wait()
        return f"Gated summary {candidate} of {invoice['number']}"


class FailingProvider:
    name = "local"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"provider down (call {self.calls})")
        return "Recovered summary"


def summary_of(db_path, invoice_id: str) -> str:
    return scalar(db_path, "SELECT summary FROM invoices WHERE id = ?", invoice_id)


def events(db_path, lease_id: str, kind: str) -> list:
    return rows(db_path, "SELECT * FROM lease_events WHERE lease_id = ? AND kind = ?",
                lease_id, kind)


async def test_whole_lease_proposes_then_applies_the_chosen_candidate(studio):
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    made = await client.post("/leases", json=lease_body([invoice], candidates=3))
    lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
    candidates = lease["invoices"][0]["candidates"]
    assert lease["progress"] == {"total": 3, "done": 3, "failed": 0}
    assert len({c["summary"] for c in candidates}) == 3  # candidates differ

    chosen = candidates[2]
    applied = await client.post(f"/leases/{lease['lease_id']}/apply",
                                json={"choices": {invoice: chosen["proposal_id"]}})

    assert applied.json() == {"status": "applied", "lease_id": lease["lease_id"]}
    assert summary_of(studio.settings.db_path, invoice) == chosen["summary"]
    again = await client.post(f"/leases/{lease['lease_id']}/apply")
    assert again.status_code == 409 and again.json()["detail"] == "lease_applied"


async def test_apply_refuses_a_proposal_of_another_invoice(studio):
    client = await studio.signed_in()
    a, b = studio.invoice_ids()[:2]
    made = await client.post("/leases", json=lease_body([a, b]))
    lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
    of_b = next(i for i in lease["invoices"] if i["invoice_id"] == b)["candidates"][0]
    refused = await client.post(f"/leases/{lease['lease_id']}/apply",
                                json={"choices": {a: of_b["proposal_id"]}})
    assert refused.status_code == 422 and refused.json()["detail"] == "invalid_choice"
    assert summary_of(studio.settings.db_path, a) == summary_of(studio.settings.db_path, b) == ""
    assert scalar(studio.settings.db_path, "SELECT status FROM leases") == "proposed"


async def test_apply_after_the_deadline_is_409_and_expires_the_lease_in_that_transaction(settings):
    async with running(settings.with_changes(sweeper=False)) as studio:
        client = await studio.signed_in()
        invoice = studio.invoice_ids()[0]
        made = await client.post("/leases", json=lease_body([invoice]))
        lease_id = made.json()["lease_id"]
        await wait_for_status(client, lease_id, "proposed")
        execute(settings.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
                time.time() - 1, lease_id)

        refused = await client.post(f"/leases/{lease_id}/apply")

        assert refused.status_code == 409
        assert refused.json()["detail"] == "lease_expired"
        lease = rows(settings.db_path, "SELECT * FROM leases WHERE id = ?", lease_id)[0]
        assert (lease["status"], lease["ended_reason"]) == ("expired", "deadline")
        assert summary_of(settings.db_path, invoice) == ""


async def test_cancel_after_the_deadline_is_409_not_cancelable_and_expires(settings):
    async with running(settings.with_changes(sweeper=False)) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease_id = made.json()["lease_id"]
        await wait_for_status(client, lease_id, "proposed")
        execute(settings.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
                time.time() - 1, lease_id)
        refused = await client.post(f"/leases/{lease_id}/cancel")
        assert refused.status_code == 409
        assert refused.json()["detail"] == "lease_not_cancelable"
        assert scalar(settings.db_path, "SELECT status FROM leases") == "expired"


async def test_another_actors_lease_is_404_on_get_apply_and_cancel(studio):
    ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
    made = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    lease_id = made.json()["lease_id"]
    await wait_for_status(ada, lease_id, "proposed")
    made_up = "00000000-0000-4000-8000-000000000000"

    answers = [
        await ben.get(f"/leases/{lease_id}"),
        await ben.post(f"/leases/{lease_id}/apply"),
        await ben.post(f"/leases/{lease_id}/cancel"),
    ]
    unknown = await ben.get(f"/leases/{made_up}")

    for reply in answers:
        assert reply.status_code == 404
        assert reply.json() == unknown.json()  # the same answer as an id that never existed
    assert scalar(studio.settings.db_path, "SELECT status FROM leases") == "proposed"


async def test_cancel_rejects_and_a_final_lease_cannot_be_cancelled(studio):
    client = await studio.signed_in()
    made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    lease_id = made.json()["lease_id"]
    cancelled = await client.post(f"/leases/{lease_id}/cancel")
    twice = await client.post(f"/leases/{lease_id}/cancel")
    apply_after = await client.post(f"/leases/{lease_id}/apply")
    assert cancelled.json() == {"status": "rejected", "lease_id": lease_id}
    assert twice.status_code == 409 and twice.json()["detail"] == "lease_not_cancelable"
    assert apply_after.status_code == 409 and apply_after.json()["detail"] == "lease_rejected"
    assert rows(studio.settings.db_path, "SELECT status, ended_reason FROM leases")[0][:] == (
        "rejected", "cancelled")


# --- late completions ------------------------------------------------------------------------


async def _gated_lease(studio, gate: GatedProvider) -> tuple[Any, str, str]:
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    made = await client.post("/leases", json=lease_body([invoice]))
    await asyncio.wait_for(gate.started.wait(), 30)
    return client, made.json()["lease_id"], invoice


@pytest.fixture
def no_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call is left to finish late: these tests drive the write that refuses it, which a
    running task's look at its lease (it stops the call once the lease ended) would forestall."""
    monkeypatch.setattr(worker, "LEASE_LOOK_S", 3600.0)


async def _released(studio, gate: GatedProvider, lease_id: str) -> None:
    gate.release.set()
    deadline = time.monotonic() + 30
    while not events(studio.settings.db_path, lease_id, "late_completion"):
        assert time.monotonic() < deadline, "the late completion was never recorded"
        await asyncio.sleep(0.02)


async def test_late_completion_after_cancel_writes_nothing(settings, no_look):
    gate = GatedProvider()
    async with running(settings, {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        assert (await client.post(f"/leases/{lease_id}/cancel")).status_code == 200

        await _released(studio, gate, lease_id)

        db = settings.db_path
        assert scalar(db, "SELECT COUNT(*) FROM proposals") == 0
        assert scalar(db, "SELECT status FROM leases") == "rejected"
        assert summary_of(db, invoice) == ""
        assert "lease rejected" in events(db, lease_id, "late_completion")[0]["detail"]


async def test_late_completion_after_the_deadline_writes_nothing(settings, no_look):
    gate = GatedProvider()
    async with running(settings, {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        # The deadline comes while the provider is still answering within its own timeout.
        execute(settings.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
                time.time() + 0.3, lease_id)
        await wait_for_status(client, lease_id, "expired")  # the sweeper ends it, unasked

        await _released(studio, gate, lease_id)

        db = settings.db_path
        assert scalar(db, "SELECT COUNT(*) FROM proposals") == 0
        lease = rows(db, "SELECT status, ended_reason FROM leases")[0]
        assert tuple(lease) == ("expired", "deadline")
        assert summary_of(db, invoice) == ""


async def test_late_completion_past_the_deadline_before_the_sweeper_writes_nothing(
        settings, no_look):
    """The proposal write checks the deadline itself; it does not wait for the sweeper."""
    gate = GatedProvider()
    quiet = settings.with_changes(sweeper=False)
    async with running(quiet, {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        execute(settings.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
                time.time() - 1, lease_id)

        await _released(studio, gate, lease_id)

        assert scalar(settings.db_path, "SELECT COUNT(*) FROM proposals") == 0
        assert scalar(settings.db_path, "SELECT status FROM leases") == "open"
        assert "deadline passed" in events(settings.db_path, lease_id,
                                           "late_completion")[0]["detail"]


async def test_late_completion_after_sign_out_writes_nothing(settings, no_look):
    gate = GatedProvider()
    async with running(settings, {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        old_cookie = client.cookies.get("studio_session")
        signed_out = await client.post("/logout")
        assert signed_out.json() == {"status": "signed_out", "expired_leases": 1}

        await _released(studio, gate, lease_id)

        db = settings.db_path
        assert scalar(db, "SELECT COUNT(*) FROM proposals") == 0
        assert tuple(rows(db, "SELECT status, ended_reason FROM leases")[0]) == (
            "expired", "signed_out")
        assert summary_of(db, invoice) == ""
        stale = studio.client()
        stale.cookies.set("studio_session", old_cookie)
        assert (await stale.get("/invoices")).status_code == 401
        assert scalar(db, "SELECT COUNT(*) FROM sessions") == 0


async def test_sign_out_ends_only_the_leases_of_that_session(settings):
    gate = GatedProvider()
    async with running(settings, {"local": gate}) as studio:
        phone, laptop = await studio.signed_in(), await studio.signed_in()
        invoice = studio.invoice_ids()[0]
        on_phone = (await phone.post("/leases", json=lease_body([invoice], "p"))).json()
        on_laptop = (await laptop.post("/leases", json=lease_body([invoice], "l"))).json()
        await phone.post("/logout")
        statuses = dict(rows(settings.db_path, "SELECT id, status FROM leases"))
        assert statuses[on_phone["lease_id"]] == "expired"
        assert statuses[on_laptop["lease_id"]] == "open"
        assert (await laptop.get("/invoices")).status_code == 200
        gate.release.set()


async def test_the_provider_gets_the_invoice_and_actor_and_no_more_time_than_is_left(settings):
    gate = GatedProvider()
    async with running(settings.with_changes(lease_seconds=20.0), {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        actor_id = rows(settings.db_path, "SELECT actor_id FROM leases")[0][0]
        call = gate.calls[0]
        assert call["actor_id"] == actor_id
        assert call["invoice"]["id"] == invoice
        assert 0 < call["timeout"] <= 20.0
        gate.release.set()
        await wait_for_status(client, lease_id, "proposed")


# --- provider errors -------------------------------------------------------------------------


async def test_provider_errors_are_retried_within_the_deadline_and_recorded(settings):
    flaky = FailingProvider(failures=2)
    async with running(settings, {"local": flaky}) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
        assert lease["invoices"][0]["candidates"][0]["summary"] == "Recovered summary"
        assert flaky.calls == 3
        assert len(events(settings.db_path, lease["lease_id"], "provider_error")) == 2
        assert scalar(settings.db_path, "SELECT attempts FROM tasks") == 3


async def test_a_lease_whose_every_task_fails_ends_failed(settings):
    broken = FailingProvider(failures=10**6)
    async with running(settings, {"local": broken}) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease = await wait_for_status(client, made.json()["lease_id"], "failed")
        assert lease["progress"] == {"total": 1, "done": 0, "failed": 1}
        assert "provider down" in scalar(settings.db_path, "SELECT error FROM tasks")
        # The page says why in words, the provider's own error being left to the log.
        assert lease["failures"] == [
            "The writer did not answer with a suggestion; asking again may work."]
        page = await client.get(f"/leases/{lease['lease_id']}", headers={"Accept": "text/html"})
        assert "<html" in page.text and "did not answer with a suggestion" in page.text
        refused = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert refused.status_code == 409 and refused.json()["detail"] == "lease_failed"


async def test_the_sweeper_expires_a_silent_lease_within_about_a_second(settings):
    gate = GatedProvider()
    async with running(settings.with_changes(lease_seconds=1.0), {"local": gate}) as studio:
        client, lease_id, invoice = await _gated_lease(studio, gate)
        deadline = rows(settings.db_path, "SELECT deadline_at FROM leases")[0][0]
        await wait_for_status(client, lease_id, "expired")
        ended_at = rows(settings.db_path, "SELECT ended_at FROM leases")[0][0]
        assert 0 <= ended_at - deadline < 1.5
        gate.release.set()


async def test_too_many_tasks_is_refused_before_anything_is_written(studio):
    client = await studio.signed_in()
    before = table_counts(studio.settings.db_path)
    ids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(61)]  # 61 x 2 x 5 = 610 tasks
    refused = await client.post("/leases", json=lease_body(ids, providers=["local", "auto"],
                                                           candidates=5))
    assert refused.status_code == 422 and refused.json()["detail"] == "too_many_tasks"
    assert "610" in refused.json()["message"]
    assert table_counts(studio.settings.db_path) == before


async def test_a_sign_out_during_planning_leaves_no_lease(studio):
    """The session is checked again inside the write transaction, not only at the door."""
    client = await studio.signed_in()
    providers = studio.studio.providers
    planning, finish_planning = asyncio.Event(), asyncio.Event()
    resolve = providers.resolve

    async def slow_resolve(asked):
        planning.set()
        await finish_planning.wait()
        return await resolve(asked)

    providers.resolve = slow_resolve
    submitting = asyncio.create_task(client.post("/leases",
                                                 json=lease_body(studio.invoice_ids()[:1])))
    await asyncio.wait_for(planning.wait(), 30)
    other = studio.client()
    other.cookies.set("studio_session", client.cookies.get("studio_session"))
    assert (await other.post("/logout")).status_code == 200
    finish_planning.set()
    refused = await submitting

    assert refused.status_code == 401 and refused.json()["detail"] == "not_signed_in"
    db = studio.settings.db_path
    assert table_counts(db)["leases"] == 0
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'") == 0


async def test_apply_waiting_for_its_account_past_the_deadline_writes_nothing(settings):
    """The deadline is read after the account is held, so waiting for it cannot make it
    stale."""
    async with running(settings.with_changes(sweeper=False)) as studio:
        client = await studio.signed_in()
        invoice = studio.invoice_ids()[0]
        made = await client.post("/leases", json=lease_body([invoice]))
        lease_id = made.json()["lease_id"]
        await wait_for_status(client, lease_id, "proposed")
        execute(settings.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
                time.time() + 0.4, lease_id)
        holder = backends.connect(settings.db_path)
        holder.execute("BEGIN IMMEDIATE")  # another process holds Ada's account...
        hold(holder, account_lock(scalar(settings.db_path, "SELECT owner_id FROM invoices"
                                                            " WHERE id = ?", invoice)))
        applying = asyncio.create_task(client.post(f"/leases/{lease_id}/apply"))
        await asyncio.sleep(0.8)  # ...past the deadline
        holder.execute("COMMIT")
        holder.close()
        refused = await applying

        assert refused.status_code == 409 and refused.json()["detail"] == "lease_expired"
        assert summary_of(settings.db_path, invoice) == ""
        ended = rows(settings.db_path, "SELECT ended_at, deadline_at FROM leases")[0]
        assert ended["ended_at"] >= ended["deadline_at"]


class CancellingProvider:
    name = "local"

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        raise asyncio.CancelledError()


async def test_a_provider_that_raises_cancelled_fails_its_task_not_the_worker(settings):
    async with running(settings, {"local": CancellingProvider()}) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease = await wait_for_status(client, made.json()["lease_id"], "failed")
        assert lease["progress"]["failed"] == 1
        assert scalar(settings.db_path, "SELECT attempts FROM tasks") == 3


async def test_stopping_the_studio_hands_unfinished_tasks_straight_back(settings):
    gate = GatedProvider()
    async with running(settings, {"local": gate}) as studio:
        await _gated_lease(studio, gate)
        assert scalar(settings.db_path, "SELECT status FROM tasks") == "running"
    task = rows(settings.db_path, "SELECT status, claim, attempts FROM tasks")[0]
    assert tuple(task) == ("pending", None, 0)  # the unfinished attempt does not count
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM proposals") == 0


class StoppableProvider:
    """Answers only when released, and notes whether its call was cancelled instead."""

    name = "local"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return "never"


@pytest.mark.parametrize("ending", ["cancel", "logout"])
async def test_a_lease_ended_while_its_task_runs_stops_the_call_within_seconds(settings, ending):
    """Stop (or sign-out) ends the work done for the lease, a reading's process included,
    instead of letting it run on to the deadline; the task fails, saying why, and nothing is
    written."""
    provider = StoppableProvider()
    async with running(settings, {"local": provider}) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
        lease_id = made.json()["lease_id"]
        await asyncio.wait_for(provider.started.wait(), 30)
        ended_at = time.monotonic()
        path = f"/leases/{lease_id}/cancel" if ending == "cancel" else "/logout"
        assert (await client.post(path)).status_code == 200

        await asyncio.wait_for(provider.cancelled.wait(), 10)
        assert time.monotonic() - ended_at < 3
        deadline = time.monotonic() + 10
        while scalar(settings.db_path, "SELECT status FROM tasks") == "running":
            assert time.monotonic() < deadline, "the stopped task was never settled"
            await asyncio.sleep(0.05)
        task = rows(settings.db_path, "SELECT status, attempts, error FROM tasks")[0]
        assert (task["status"], task["attempts"]) == ("failed", 1)
        assert "ended before its suggestion" in task["error"]
        assert scalar(settings.db_path, "SELECT COUNT(*) FROM proposals") == 0
        assert scalar(settings.db_path, "SELECT status FROM leases") in ("rejected", "expired")

"""The same request twice is one request."""

from __future__ import annotations

import asyncio
import time

import pytest

from studio.errors import Refusal
from studio.leasing import intents
from tests.conftest import BEN, lease_body, rows, scalar, table_counts, wait_for_status

pytestmark = pytest.mark.anyio


async def test_new_replay_and_conflict_are_the_three_outcomes(studio):
    client = await studio.signed_in()
    invoices = studio.invoice_ids()[:2]
    body = lease_body(invoices, providers=["local"], candidates=3)

    first = await client.post("/leases", json=body)
    again = await client.post("/leases", json=body)
    changed = await client.post("/leases", json={**body, "candidates": 2})

    assert first.status_code == 201
    assert first.json()["tasks"] == 6
    assert again.status_code == 200
    assert again.json()["lease_id"] == first.json()["lease_id"]
    assert set(again.json()) == set(first.json())
    assert changed.status_code == 409
    assert changed.json() == {
        "detail": "request_id_conflict",
        "message": "This form was already sent with different content. Reload the page to"
                   " start again.",
    }
    db = studio.settings.db_path
    assert scalar(db, "SELECT COUNT(*) FROM leases") == 1
    assert scalar(db, "SELECT COUNT(*) FROM tasks") == 6
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'") == 1


async def test_one_fingerprint_for_form_json_and_any_order(studio):
    client = await studio.signed_in()
    a, b = studio.invoice_ids()[:2]
    first = await client.post("/leases", json=lease_body([a, b], providers=["local", "auto"]))
    as_form = await client.post(
        "/leases",
        data={"request_id": "req-1", "purpose": "summarize_invoice", "invoice_id": [b, a],
              "provider": ["auto", "local", "local"], "candidates": "1"},
    )
    assert first.status_code == 201
    assert as_form.status_code == 200
    assert as_form.json()["lease_id"] == first.json()["lease_id"]


async def test_request_ids_are_scoped_per_actor(studio):
    ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
    for_ada = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1], "shared"))
    for_ben = await ben.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "shared"))
    assert for_ada.status_code == for_ben.status_code == 201
    assert for_ada.json()["lease_id"] != for_ben.json()["lease_id"]


async def test_request_id_of_100_characters_is_accepted_and_101_refused(studio):
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[:1]
    longest = await client.post("/leases", json=lease_body(invoice, "x" * 100))
    too_long = await client.post("/leases", json=lease_body(invoice, "y" * 101))
    empty = await client.post("/leases", json=lease_body(invoice, ""))
    assert longest.status_code == 201
    assert too_long.status_code == empty.status_code == 422
    assert too_long.json()["detail"] == empty.json()["detail"] == "invalid_request_id"
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'") == 1


async def test_failure_on_the_last_task_insert_leaves_no_lease_no_task_no_binding(studio):
    """Invariant 1: the binding is inserted before the tasks, so only a rollback removes it."""
    client = await studio.signed_in()
    invoices = studio.invoice_ids()[:2]
    actor = await studio.studio.sessions.actor(client.cookies.get("studio_session"))
    request = intents.parse_request(lease_body(invoices), studio.studio.providers, 600)
    plan = intents.plan_tasks(request.intent, ["local"])
    broken = [*plan[:-1], (plan[-1][0], object(), plan[-1][2])]  # unbindable in SQLite
    before = table_counts(studio.settings.db_path)

    unbindable = "type .object. is not supported|Error binding|cannot adapt type"
    with pytest.raises(Exception, match=unbindable):
        await studio.studio.db.write(intents.create_lease, actor, request, broken, 90, time.time())

    assert table_counts(studio.settings.db_path) == before
    assert before["leases"] == before["tasks"] == 0
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM request_bindings WHERE kind = 'lease'") == 0
    retry = await client.post("/leases", json=lease_body(invoices))
    assert retry.status_code == 201
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM tasks") == 2


async def test_32_concurrent_submissions_of_one_id_make_one_lease(studio):
    client = await studio.signed_in()
    body = lease_body(studio.invoice_ids()[:3], "same-id", candidates=2)
    replies = await asyncio.gather(*(client.post("/leases", json=body) for _ in range(32)))
    assert sorted(r.status_code for r in replies) == [200] * 31 + [201]
    assert len({r.json()["lease_id"] for r in replies}) == 1
    db = studio.settings.db_path
    assert scalar(db, "SELECT COUNT(*) FROM leases") == 1
    assert scalar(db, "SELECT COUNT(*) FROM tasks") == 6


async def test_forged_actor_id_in_the_body_is_ignored(studio):
    ada = await studio.signed_in()
    ben_id = rows(studio.settings.db_path, "SELECT id FROM actors WHERE email = ?", BEN)[0][0]
    own = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1], actor_id=ben_id))
    assert own.status_code == 201
    owner = scalar(studio.settings.db_path, "SELECT actors.email FROM leases JOIN actors"
                   " ON actors.id = leases.actor_id WHERE leases.id = ?", own.json()["lease_id"])
    assert owner == "ada@example.com"
    await wait_for_status(ada, own.json()["lease_id"], "proposed")  # the worker is done writing
    # Ada naming Ben's invoice, with Ben's id forged in the body, is refused and writes nothing.
    before = table_counts(studio.settings.db_path)
    forged = await ada.post("/leases", json=lease_body(studio.invoice_ids(BEN)[:1], "forged",
                                                       actor_id=ben_id))
    assert forged.status_code == 404
    assert forged.json()["detail"] == "invoice_not_found"
    assert table_counts(studio.settings.db_path) == before
    # The actor id is not part of the fingerprint: the replay without it is the same request.
    replay = await ada.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    assert replay.status_code == 200 and replay.json()["lease_id"] == own.json()["lease_id"]


async def test_refusals_from_parsing_name_what_is_wrong(studio):
    providers = studio.studio.providers
    with pytest.raises(Refusal) as refused:
        intents.parse_request({"request_id": "r", "purpose": "summarize_invoice",
                               "invoice_ids": ["not-a-uuid"]}, providers, 600)
    assert refused.value.code == "invalid_body"

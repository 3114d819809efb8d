"""One credit note of an invoice is drafted at a time: "Make a credit note" pressed again
while that draft is open opens the same draft, whatever request id it sends; once the draft
is issued or deleted, the next press makes a new one. Asserted on the database."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import scalar

pytestmark = pytest.mark.anyio


def drafted_notes(studio: Any, invoice_id: str) -> int:
    return scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices WHERE credits = ?"
                  " AND kind = 'credit_note' AND status = 'draft'", invoice_id)


async def make_note(client: Any, invoice_id: str, **body: Any) -> Any:
    return await client.post(f"/invoices/{invoice_id}/credit-note", json=body)


async def test_a_second_press_opens_the_same_credit_note_draft(studio) -> None:
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    request_id = str(uuid.uuid4())
    first = await make_note(client, invoice, request_id=request_id)
    again = await make_note(client, invoice, request_id=str(uuid.uuid4()))
    plain = await make_note(client, invoice)
    assert (first.status_code, again.status_code, plain.status_code) == (201, 200, 200)
    assert first.json()["id"] == again.json()["id"] == plain.json()["id"]
    assert drafted_notes(studio, invoice) == 1
    # A replay of the first request still answers its draft.
    replay = await make_note(client, invoice, request_id=request_id)
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"]


async def test_once_the_draft_is_deleted_or_issued_the_next_press_makes_a_new_one(
        studio) -> None:
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    first = (await make_note(client, invoice)).json()
    assert (await client.delete(f"/invoices/{first['id']}")).status_code == 200
    second = await make_note(client, invoice)
    assert second.status_code == 201 and second.json()["id"] != first["id"]
    issued = await client.post(f"/invoices/{second.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": second.json()["revision"]})
    assert issued.status_code == 201, issued.text
    third = await make_note(client, invoice)
    assert third.status_code == 201 and third.json()["id"] != second.json()["id"]
    assert drafted_notes(studio, invoice) == 1


async def test_each_invoice_has_its_own_credit_note_draft(studio) -> None:
    client = await studio.signed_in()
    one, other = studio.invoice_ids()[:2]
    assert (await make_note(client, one)).json()["id"] != (await make_note(client, other)
                                                          ).json()["id"]
    assert drafted_notes(studio, one) == drafted_notes(studio, other) == 1

"""A reading reads one receipt: the draft's newest, or the one the person picked; never every
attachment of the draft, and never more bytes than one upload may be."""

from __future__ import annotations

import base64
import html
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import lease_body, rows, running, scalar, wait_for_status
from tests.test_attachments import png, send
from tests.test_model_work import DRAFT
from tests.test_providers import FakeModelServer

pytestmark = pytest.mark.anyio

READING = {"supplier": "Frischmarkt", "date": "2026-12-03", "currency": "EUR", "total": "1.19",
           "lines": [{"description": "Milch", "quantity": "1", "unit_price": "1.11",
                      "tax_rate": "7"}]}


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.answer = lambda body: json.dumps(READING)
        yield server


async def draft_with(client: Any, receipts: list[bytes]) -> tuple[str, list[str]]:
    """A draft with these receipts attached in order, and their attachment ids."""
    made = await client.post("/invoices", json=DRAFT)
    assert made.status_code == 201, made.text
    invoice_id, attached = made.json()["id"], []
    for n, content in enumerate(receipts):
        sent = await send(client, invoice_id, str(uuid.uuid4()), content, f"receipt-{n}.png")
        assert sent.status_code == 201, sent.text
        attached.append(sent.json()["attachment_id"])
    return invoice_id, attached


def reading(invoice_id: str, request_id: str, **extra: Any) -> dict[str, Any]:
    return lease_body([invoice_id], request_id, purpose="read_receipt", providers=["openai"],
                      **extra)


def images_sent(server: FakeModelServer) -> list[list[bytes]]:
    """The images of each request the model server was sent, decoded."""
    return [[base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
             for part in sent["body"]["messages"][-1]["content"] if part["type"] == "image_url"]
            for sent in server.requests]


async def test_a_reading_sends_the_drafts_newest_receipt_only(settings, model_server):
    async with running(settings.with_changes(openai_base_url=model_server.url)) as studio:
        client = await studio.signed_in()
        invoice_id, _ = await draft_with(client, [png(1), png(2), png(3)])
        made = await client.post("/leases", json=reading(invoice_id, "read-newest",
                                                         candidates=2))
        assert made.status_code == 201, made.text
        lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
        kept = {**READING, "check": {"lines_total": "1.19", "total": "1.19", "agrees": True}}
        assert [c["proposal"] for c in lease["invoices"][0]["candidates"]] == [kept] * 2
        assert images_sent(model_server) == [[png(3)], [png(3)]]
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM tasks WHERE lease_id = ?"
                                               " AND status = 'done'", lease["lease_id"]) == 2


async def test_the_person_picks_which_receipt_a_reading_reads(settings, model_server):
    async with running(settings.with_changes(openai_base_url=model_server.url)) as studio:
        client = await studio.signed_in()
        invoice_id, attached = await draft_with(client, [png(1), png(2), png(3)])
        made = await client.post("/leases", json=reading(invoice_id, "read-first",
                                                         attachment_id=attached[0]))
        assert made.status_code == 201, made.text
        await wait_for_status(client, made.json()["lease_id"], "proposed")
        assert images_sent(model_server) == [[png(1)]]
        options = json.loads(scalar(studio.settings.db_path, "SELECT options FROM leases"
                                                             " WHERE id = ?",
                                    made.json()["lease_id"]))
        assert options["attachment_id"] == attached[0]
        # The same request id with another pick is another request: 409, nothing made.
        other = await client.post("/leases", json=reading(invoice_id, "read-first",
                                                          attachment_id=attached[1]))
        assert other.status_code == 409, other.text


async def test_a_pick_that_is_not_a_receipt_of_that_draft_is_refused_before_any_lease(
        settings, model_server):
    async with running(settings.with_changes(openai_base_url=model_server.url)) as studio:
        client = await studio.signed_in()
        invoice_id, _ = await draft_with(client, [png(1)])
        other_id, elsewhere = await draft_with(client, [png(2)])
        db = studio.settings.db_path
        before = scalar(db, "SELECT COUNT(*) FROM leases")
        refused = await client.post("/leases", json=reading(invoice_id, "r1",
                                                            attachment_id=elsewhere[0]))
        assert refused.status_code == 404, refused.text
        assert refused.json()["detail"] == "attachment_not_found"
        assert "not attached to this draft" in refused.json()["message"]
        for request_id, body, words in [
            ("r2", reading(invoice_id, "r2", attachment_id="a receipt"), "attachment id"),
            ("r3", lease_body([invoice_id], "r3", attachment_id=elsewhere[0]), "reading"),
            ("r4", lease_body([invoice_id, other_id], "r4", purpose="read_receipt",
                              attachment_id=elsewhere[0]), "one draft"),
        ]:
            bad = await client.post("/leases", json=body)
            assert bad.status_code == 422, (request_id, bad.text)
            assert bad.json()["detail"] == "invalid_body" and words in bad.json()["message"]
        assert scalar(db, "SELECT COUNT(*) FROM leases") == before
        assert model_server.requests == []


async def test_the_draft_and_review_pages_offer_a_choice_of_receipts(settings, model_server):
    async with running(settings.with_changes(openai_base_url=model_server.url)) as studio:
        client = await studio.signed_in()
        invoice_id, attached = await draft_with(client, [png(1), png(2), png(3)])
        page = await client.get(f"/invoices/{invoice_id}", headers={"Accept": "text/html"})
        assert page.status_code == 200
        choice = page.text.split('id="receipt-choice"', 1)[1].split("</select>", 1)[0]
        assert [choice.index(f'value="{id_}"') for id_ in reversed(attached)] \
            == sorted(choice.index(f'value="{id_}"') for id_ in attached)  # newest first
        assert "receipt-2.png (newest)" in choice
        review = await client.get(
            f"/review?purpose=read_receipt&invoice_id={invoice_id}&attachment_id={attached[0]}",
            headers={"Accept": "text/html"})
        assert review.status_code == 200, review.text
        shown = review.text.split('id="receipt-to-read">', 1)[1].split("</dd>", 1)[0]
        assert shown == "receipt-0.png"
        frozen = json.loads(html.unescape(review.text.split('data-frozen="', 1)[1]
                                          .split('"', 1)[0]))
        assert frozen["attachment_id"] == attached[0]
        newest = await client.get(f"/review?purpose=read_receipt&invoice_id={invoice_id}",
                                  headers={"Accept": "text/html"})
        shown = newest.text.split('id="receipt-to-read">', 1)[1].split("</dd>", 1)[0]
        assert shown == "receipt-2.png (the newest of 3)"


async def test_a_receipt_larger_than_a_reading_may_hold_fails_unread_and_unsent(
        settings, model_server):
    """Attached under a larger limit, read under a smaller one: never loaded, never sent."""
    large = png(1) + b"\0" * 40 * 1024
    async with running(settings.with_changes(openai_base_url=model_server.url)) as studio:
        client = await studio.signed_in()
        invoice_id, _ = await draft_with(client, [large])
    smaller = settings.with_changes(openai_base_url=model_server.url,
                                    max_upload_bytes=16 * 1024)
    async with running(smaller) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=reading(invoice_id, "read-large"))
        assert made.status_code == 201, made.text
        lease = await wait_for_status(client, made.json()["lease_id"], "failed")
        [(error, attempts)] = rows(studio.settings.db_path, "SELECT error, attempts FROM tasks"
                                                            " WHERE lease_id = ?",
                                   lease["lease_id"])
        assert "more than a reading may hold" in error and attempts == 1
        assert model_server.requests == []

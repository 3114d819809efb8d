"""What one actor may store: bytes in all and attachments per invoice, checked before the file
is read and again when it is bound, asserted on the database and on the store."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest

from studio.billing.attachments import FileStore
from studio.store.dialect import account_lock, hold
from tests import backends
from tests.conftest import running, scalar
from tests.test_attachments import arriving, draft_id, files, png, send, stored

pytestmark = pytest.mark.anyio

KIB = 1024


def pdf(size: int, seed: int) -> bytes:
    head = b"%PDF-1.4\n%" + str(seed).encode() + b"\n"
    return head + os.urandom(size - len(head))


def attachment_rows(studio) -> int:
    return scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments")


def incoming(studio) -> list:
    return arriving(studio)


def waiting_to_bind(studio) -> int:
    """Uploads whose bytes all arrived and wait for the binding: placed in the folder, or
    chunk rows under an upload's own id."""
    if isinstance(studio.app.state.attachment_store, FileStore):
        return len(stored(studio))
    return scalar(studio.settings.db_path, "SELECT COUNT(*) FROM stored_files"
                                           " WHERE sha256 IS NULL")


async def test_an_upload_past_the_storage_quota_is_413_and_leaves_no_row_and_no_file(settings):
    async with running(settings.with_changes(max_storage_per_actor=100 * KIB)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        assert (await send(client, invoice, "k1", pdf(40 * KIB, 1), "a.pdf")).status_code == 201
        assert (await send(client, invoice, "k2", pdf(40 * KIB, 2), "b.pdf")).status_code == 201
        kept = stored(studio)
        refused = await send(client, invoice, "k3", pdf(40 * KIB, 3), "c.pdf")
        assert refused.status_code == 413, refused.text
        assert refused.json()["detail"] == "storage_quota_exceeded"
        assert "100 KiB" in refused.json()["message"]
        assert attachment_rows(studio) == 2
        assert stored(studio) == kept and incoming(studio) == []
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM request_bindings"
                                               " WHERE request_id = 'k3'") == 0


async def test_the_same_bytes_attached_again_count_again_toward_the_quota(settings):
    """The quota counts attachments as the person sees them: the same file attached twice is
    stored once, but counts twice (each is a receipt a reading may load)."""
    async with running(settings.with_changes(max_storage_per_actor=100 * KIB)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        receipt = pdf(40 * KIB, 1)
        assert (await send(client, invoice, "k1", receipt, "a.pdf")).status_code == 201
        again = await send(client, invoice, "k2", receipt, "a-again.pdf")
        assert again.status_code == 201, again.text
        third = await send(client, invoice, "k3", receipt, "a-third.pdf")
        assert third.status_code == 413, third.text
        assert third.json()["detail"] == "storage_quota_exceeded"
        assert "80 KiB of the 100 KiB" in third.json()["message"]
        assert attachment_rows(studio) == 2 and len(stored(studio)) == 1
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM request_bindings"
                                               " WHERE request_id = 'k3'") == 0


async def test_an_invoice_past_its_attachment_limit_is_409_and_leaves_no_row_and_no_file(
        settings):
    async with running(settings.with_changes(max_attachments_per_invoice=2)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        for n in range(2):
            assert (await send(client, invoice, f"k{n}", png(n))).status_code == 201
        kept = stored(studio)
        refused = await send(client, invoice, "k-third", png(7))
        assert refused.status_code == 409, refused.text
        assert refused.json()["detail"] == "too_many_attachments"
        assert "2 attachments" in refused.json()["message"]
        assert attachment_rows(studio) == 2
        assert stored(studio) == kept and incoming(studio) == []


async def test_a_replay_of_a_bound_key_answers_its_attachment_past_both_limits(settings):
    receipt = pdf(50 * KIB, 1)
    limited = settings.with_changes(max_storage_per_actor=50 * KIB,
                                    max_attachments_per_invoice=1)
    async with running(limited) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        made = await send(client, invoice, "only", receipt, "a.pdf")
        assert made.status_code == 201, made.text
        # The reply was lost; the same key and bytes again: the first attachment, not 409/413.
        replay = await send(client, invoice, "only", receipt, "a.pdf")
        assert replay.status_code == 200, replay.text
        assert replay.json() == made.json()
        assert attachment_rows(studio) == 1 and len(stored(studio)) == 1
        assert incoming(studio) == []


def _body(boundary: str, key: str, content: bytes) -> tuple[list[bytes], int]:
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\n"
            f"{key}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"big.pdf\"\r\nContent-Type: application/pdf\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    chunks = [head + content[:8 * KIB]]
    chunks += [content[n:n + 8 * KIB] for n in range(8 * KIB, len(content), 8 * KIB)]
    chunks.append(tail)
    return chunks, sum(len(chunk) for chunk in chunks)


@pytest.mark.parametrize("limit, code", [
    ({"max_storage_per_actor": 200 * KIB}, "storage_quota_exceeded"),
    ({"max_attachments_per_invoice": 1}, "too_many_attachments"),
], ids=["quota", "count"])
async def test_the_limits_refuse_before_the_file_is_read(settings, limit, code):
    async with running(settings.with_changes(**limit)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        if code == "too_many_attachments":
            assert (await send(client, invoice, "first", png(1))).status_code == 201
        chunks, length = _body("b0und", "big", pdf(1024 * KIB, 9))
        pulled = 0

        async def body() -> AsyncIterator[bytes]:
            nonlocal pulled
            for chunk in chunks:
                pulled += 1
                yield chunk
        reply = await client.post(f"/invoices/{invoice}/attachments", content=body(), headers={
            "Content-Type": "multipart/form-data; boundary=b0und",
            "Content-Length": str(length)})
        assert reply.status_code in (409, 413) and reply.json()["detail"] == code
        assert pulled <= 2, f"{pulled} of {len(chunks)} chunks were read before the refusal"
        assert incoming(studio) == []


@pytest.mark.parametrize("limit, size, code", [
    ({"max_storage_per_actor": 100 * KIB}, 30 * KIB, 413),
    ({"max_attachments_per_invoice": 3}, 1 * KIB, 409),
], ids=["quota", "count"])
async def test_concurrent_uploads_cannot_pass_the_limits_together(settings, limit, size, code):
    """Each passes the early check while their account is held elsewhere; the check inside
    the binding transaction lets only what fits through."""
    async with running(settings.with_changes(**limit)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        gate = backends.connect(studio.settings.db_path)
        gate.execute("BEGIN IMMEDIATE")
        hold(gate, account_lock(scalar(studio.settings.db_path,
                                       "SELECT owner_id FROM invoices WHERE id = ?", invoice)))
        try:
            uploads = [asyncio.ensure_future(send(client, invoice, f"k{n}", pdf(size, n),
                                                  f"{n}.pdf")) for n in range(6)]
            deadline = time.monotonic() + 60  # every upload stored its bytes: all wait
            while await asyncio.to_thread(waiting_to_bind, studio) != 6:  # for the lock
                assert time.monotonic() < deadline, "the uploads never all waited to bind"
                await asyncio.sleep(0.02)
        finally:
            gate.execute("ROLLBACK")
            gate.close()
        replies = await asyncio.gather(*uploads)
        codes = sorted(reply.status_code for reply in replies)
        assert codes == [201, 201, 201, code, code, code], [r.text for r in replies]
        assert attachment_rows(studio) == 3
        assert scalar(studio.settings.db_path, "SELECT SUM(size) FROM attachments") <= 100 * KIB
        assert len(stored(studio)) == 3 and incoming(studio) == []
        assert len(files(studio)) == 3

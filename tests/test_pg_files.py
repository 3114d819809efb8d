"""Attachment bytes in PostgreSQL: chunk rows written as the body arrives, outside the write
lock, named in the binding's transaction, streamed back a chunk at a time, swept when their
upload died, frozen with an issued invoice, and checked by `studio check`."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time

import anyio
import httpx
import pytest

from bench.uploads import peak_rss_mb, reset_peak
from studio.billing import attachments
from studio.store.dialect import account_lock, hold, lock_key
from studio.store.stores import CHUNK_BYTES, DatabaseStore
from tests import backends
from tests.conftest import (
    ADA,
    BEN,
    execute,
    rows,
    scalar,
    sign_in,
    start_server,
    studio_command,
)
from tests.test_attachment_processes import draft_of_ada, pdf_of
from tests.test_attachments import arriving, content_of, draft_id, files, send, stored

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(
    not backends.ON_POSTGRES, reason="the bytes are kept in the database only on PostgreSQL")]


def chunk_sizes(db_path, sha256: str) -> list[int]:  # type: ignore[no-untyped-def]
    return [row[0] for row in rows(
        db_path, "SELECT octet_length(content) FROM stored_chunks JOIN stored_files ON"
                 " stored_files.id = stored_chunks.file_id WHERE sha256 = ? ORDER BY position",
        sha256)]


def trickled(key: str, content: bytes, first: int, started: asyncio.Event,
             release: asyncio.Event):  # type: ignore[no-untyped-def]
    """A body whose first `first` bytes of file come at once, the rest once released."""
    async def body():  # type: ignore[no-untyped-def]
        yield (f"--b\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\n{key}\r\n"
               f"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.pdf\""
               "\r\nContent-Type: application/pdf\r\n\r\n").encode() + content[:first]
        started.set()
        await release.wait()
        yield content[first:] + b"\r\n--b--\r\n"
    return body()


async def upload_in_progress(client, invoice: str, key: str, content: bytes,  # type: ignore[no-untyped-def]
                             first: int) -> tuple[asyncio.Future, asyncio.Event]:
    started, release = asyncio.Event(), asyncio.Event()
    reply = asyncio.ensure_future(client.post(
        f"/invoices/{invoice}/attachments",
        content=trickled(key, content, first, started, release),
        headers={"Content-Type": "multipart/form-data; boundary=b"}))
    await asyncio.wait_for(started.wait(), 10)
    return reply, release


async def wait_for(check, what: str, seconds: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_the_bytes_go_into_the_database_in_chunks_and_come_back_whole(studio):
    assert isinstance(studio.app.state.attachment_store, DatabaseStore)
    client = await studio.signed_in()
    content = pdf_of(4 * CHUNK_BYTES + 1000, 1)
    made = await send(client, await draft_id(client), "k-chunks", content, "big.pdf")
    assert made.status_code == 201, made.text
    sha256 = made.json()["sha256"]
    assert chunk_sizes(studio.settings.db_path, sha256) == [CHUNK_BYTES] * 4 + [1000]
    assert scalar(studio.settings.db_path, "SELECT size FROM stored_files WHERE sha256 = ?",
                  sha256) == len(content)
    assert not (studio.settings.files / "incoming").exists()  # no folder on PostgreSQL
    served = await client.get(f"/attachments/{made.json()['attachment_id']}")
    assert served.status_code == 200 and served.content == content
    assert served.headers["content-length"] == str(len(content))
    assert served.headers["content-type"] == "application/pdf"


async def test_chunks_are_written_while_another_transaction_holds_the_account(studio):
    """A body arriving over the network never waits for its account, nor holds it: its
    chunks go in while another writer holds it, and only the short binding waits."""
    client = await studio.signed_in()
    invoice = await draft_id(client)
    content = pdf_of(3 * CHUNK_BYTES, 2)
    db_path = studio.settings.db_path
    gate = backends.connect(db_path)
    # A transaction held open on purpose, longer than the studio lets one stay idle.
    gate.execute("SET idle_in_transaction_session_timeout = 0")
    gate.execute("BEGIN IMMEDIATE")
    hold(gate, account_lock(scalar(db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                                   invoice)))
    try:
        reply = asyncio.ensure_future(send(client, invoice, "k-gate", content, "g.pdf"))
        await wait_for(lambda: scalar(
            db_path, "SELECT COALESCE(SUM(octet_length(content)), 0) FROM stored_chunks"
        ) == len(content), "the chunks to be written")
        assert not reply.done()  # the binding waits for the lock
        assert scalar(db_path, "SELECT COUNT(*) FROM attachments") == 0
    finally:
        gate.execute("ROLLBACK")
        gate.close()
    assert (await reply).status_code == 201
    assert stored(studio) == [(scalar(db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                                      invoice), hashlib.sha256(content).hexdigest())]
    assert arriving(studio) == []


def test_ten_concurrent_downloads_of_10_mib_raise_peak_memory_by_less_than_50_mb(tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo")
    invoice, _ = draft_of_ada(db_path)
    client = sign_in(server.url)
    try:
        content = pdf_of(10 * 1024 * 1024, 7)
        made = client.post(f"/invoices/{invoice}/attachments", data={"client_key": "big"},
                           files={"file": ("big.pdf", content)}, timeout=120)
        assert made.status_code == 201, made.text
        url = f"/attachments/{made.json()['attachment_id']}"
        assert client.get(url, timeout=60).content == content  # warm the download path
        cookie = client.cookies["studio_session"]
        before = reset_peak(server.process.pid)

        async def download_all() -> list[str]:
            async with httpx.AsyncClient(base_url=server.url, cookies={"studio_session": cookie},
                                         timeout=120) as http:
                async def one() -> str:
                    digest = hashlib.sha256()
                    async with http.stream("GET", url) as reply:
                        assert reply.status_code == 200
                        async for piece in reply.aiter_bytes():
                            digest.update(piece)
                    return digest.hexdigest()
                return await asyncio.gather(*(one() for _ in range(10)))

        digests = asyncio.run(download_all())
        grew = peak_rss_mb(server.process.pid) - before
        assert digests == [hashlib.sha256(content).hexdigest()] * 10
        assert grew < 50, f"peak memory grew by {grew:.1f} MB"
    finally:
        client.close()
        server.stop()


async def test_the_sweep_keeps_bytes_an_upload_still_writes_and_removes_those_of_one_that_died(
        studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    db_path = studio.settings.db_path
    store = studio.app.state.attachment_store
    content = pdf_of(2 * CHUNK_BYTES + 500, 3)
    reply, release = await upload_in_progress(client, invoice, "slow", content, CHUNK_BYTES)
    await wait_for(lambda: len(arriving(studio)) == 1, "the first chunk")
    # A minute on, by the sweep's clock: the upload wrote just now, so its bytes stay.
    assert await attachments.sweep_orphans(studio.studio.db, store, now=time.time() + 60) == 0
    release.set()
    answered = await reply
    assert answered.status_code == 201, answered.text
    actor_id = scalar(db_path, "SELECT owner_id FROM invoices WHERE id = ?", invoice)
    assert content_of(studio, actor_id, answered.json()["sha256"]) == content

    # An upload whose process died after its first chunk: idle past the grace period, swept.
    execute(db_path, "INSERT INTO stored_files (id, owner_id, created_at, written_at) VALUES"
                     " ('died', ?, ?, ?)", actor_id, time.time(), time.time())
    execute(db_path, "INSERT INTO stored_chunks VALUES ('died', 0, ?)", b"%PDF-1.4 half")
    store = studio.app.state.attachment_store
    assert await attachments.sweep_orphans(studio.studio.db, store) == 0  # within the grace
    assert await attachments.sweep_orphans(
        studio.studio.db, store, now=time.time() + attachments.ORPHAN_GRACE_S + 60) == 1
    assert arriving(studio) == [] and scalar(
        db_path, "SELECT COUNT(*) FROM stored_chunks WHERE file_id = 'died'") == 0
    assert content_of(studio, actor_id, answered.json()["sha256"]) == content  # bound: kept


async def test_an_upload_whose_bytes_were_swept_before_binding_is_a_retryable_503(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    db_path = studio.settings.db_path
    content = pdf_of(2 * CHUNK_BYTES + 500, 4)
    before = [row for row in rows(db_path, "SELECT COUNT(*) FROM attachments")]
    reply, release = await upload_in_progress(client, invoice, "swept", content, CHUNK_BYTES)
    await wait_for(lambda: len(arriving(studio)) == 1, "the first chunk")
    execute(db_path, "DELETE FROM stored_files WHERE sha256 IS NULL")  # as a sweep would
    release.set()
    answered = await reply
    assert answered.status_code == 503, answered.text
    assert answered.json()["detail"] == "upload_lost" and answered.headers["retry-after"]
    assert files(studio) == [] and rows(db_path, "SELECT COUNT(*) FROM attachments") == before
    again = await send(client, invoice, "swept", content, "slow.pdf")
    assert again.status_code == 201, again.text


async def test_the_bytes_of_an_issued_invoices_attachments_are_frozen_with_it(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    made = await send(client, invoice, "k-frozen", pdf_of(CHUNK_BYTES + 10, 5), "f.pdf")
    assert made.status_code == 201
    revision = (await client.get(f"/invoices/{invoice}")).json()["revision"]
    issued = await client.post(f"/invoices/{invoice}/issue",
                               json={"request_id": "issue-frozen", "revision": revision})
    assert issued.status_code == 201, issued.text
    db_path = studio.settings.db_path
    sha256 = made.json()["sha256"]
    for statement in (
            "DELETE FROM stored_files WHERE sha256 = ?",
            "UPDATE stored_files SET size = 0 WHERE sha256 = ?",
            "UPDATE stored_chunks SET content = 'x' WHERE file_id IN"
            " (SELECT id FROM stored_files WHERE sha256 = ?)",
            "DELETE FROM stored_chunks WHERE file_id IN"
            " (SELECT id FROM stored_files WHERE sha256 = ?)"):
        with pytest.raises(sqlite3.IntegrityError, match="invoice_frozen"):
            execute(db_path, statement, sha256)
    for table in ("stored_files", "stored_chunks"):
        with pytest.raises(sqlite3.IntegrityError, match="invoice_frozen"):
            execute(db_path, f"TRUNCATE {table} CASCADE")
    served = await client.get(f"/attachments/{made.json()['attachment_id']}")
    assert hashlib.sha256(served.content).hexdigest() == sha256


async def test_studio_check_finds_a_damaged_or_missing_chunk(studio):
    client = await studio.signed_in()
    made = await send(client, await draft_id(client), "k-check", pdf_of(2 * CHUNK_BYTES, 6),
                      "c.pdf")
    assert made.status_code == 201
    db_path, sha256 = studio.settings.db_path, made.json()["sha256"]
    whole = studio_command(db_path, "check")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "integrity: ok (1 files stored in the database, each whole" in whole.stdout

    file_id = scalar(db_path, "SELECT id FROM stored_files WHERE sha256 = ?", sha256)
    execute(db_path, "UPDATE stored_chunks SET content = ? WHERE file_id = ? AND position = 1",
            os.urandom(CHUNK_BYTES), file_id)
    damaged = studio_command(db_path, "check")
    assert damaged.returncode == 1
    assert "integrity: FAILED" in damaged.stdout and sha256 in damaged.stdout
    assert f"damaged: {sha256}" in damaged.stdout
    assert "Some checks failed." in damaged.stderr

    execute(db_path, "DELETE FROM stored_chunks WHERE file_id = ? AND position = 1", file_id)
    missing = studio_command(db_path, "check")
    assert missing.returncode == 1 and "integrity: FAILED" in missing.stdout


async def test_the_sweep_passes_over_an_account_another_host_holds(studio):
    """A host paused inside one account's write holds that account's lock: the orphan sweep
    removes every other account's unnamed bytes at once, without waiting for it (and so
    without holding their locks meanwhile), and that account's the round after it lets go."""
    import psycopg

    db_path = studio.settings.db_path
    store = studio.app.state.attachment_store
    owners = {email: scalar(db_path, "SELECT id FROM actors WHERE email = ?", email)
              for email in (ADA, BEN)}
    long_ago = time.time() - attachments.ORPHAN_GRACE_S - 60
    for email, owner in owners.items():
        execute(db_path, "INSERT INTO stored_files (id, owner_id, sha256, size, created_at,"
                " written_at, placed_at) VALUES (?, ?, ?, 0, ?, ?, ?)", f"unnamed-{email}",
                owner, hashlib.sha256(email.encode()).hexdigest(), long_ago, long_ago, long_ago)

    def left() -> list[str]:
        return sorted(row[0] for row in rows(
            db_path, "SELECT id FROM stored_files WHERE id LIKE 'unnamed-%'"))

    with psycopg.connect(backends.database_url(db_path), autocommit=True) as other_host:
        other_host.execute("SELECT pg_advisory_lock(%s)", (lock_key(account_lock(owners[ADA])),))
        with anyio.fail_after(10):  # waiting for the lock would wait as long as its host
            await attachments.sweep_orphans(studio.studio.db, store)
        assert left() == [f"unnamed-{ADA}"]
    assert await attachments.sweep_orphans(studio.studio.db, store) == 1  # let go: swept
    assert left() == []

"""Uploads against a real `studio serve`: a crash between saving and binding, and memory."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path

import httpx

from bench.uploads import peak_rss_mb, reset_peak
from studio.billing import attachments
from studio.billing.attachments import FileStore
from studio.config import Settings
from studio.store.db import open_database
from studio.store.dialect import account_lock, hold
from studio.store.stores import store_for
from tests import backends
from tests.conftest import rows, scalar, sign_in, start_server, wait_until
from tests.test_attachments import ATTACHED, arriving, content_of, files, stored


def settings_of(db_path: Path) -> Settings:
    """The settings `studio serve` reads for this database (no STUDIO_FILES)."""
    return Settings(db_path=db_path, database_url=backends.database_url(db_path) or "")


def arrived(settings: Settings, actor_id: str, content: bytes) -> bool:
    """All of the upload's bytes are in its store, waiting for the binding: placed in the
    folder, or in chunk rows under the upload's own id."""
    if isinstance(store_for(settings), FileStore):
        return content_of(settings, actor_id, hashlib.sha256(content).hexdigest()) == content
    return scalar(settings.db_path, "SELECT COALESCE(SUM(octet_length(content)), 0) FROM"
                                    " stored_chunks JOIN stored_files ON stored_files.id ="
                                    " stored_chunks.file_id WHERE sha256 IS NULL"
                  ) == len(content)


def draft_of_ada(db_path: Path) -> tuple[str, str]:
    row = rows(db_path, "SELECT invoices.id, owner_id FROM invoices JOIN actors ON actors.id ="
                        " owner_id WHERE email = 'ada@example.com' AND status = 'draft'")[0]
    return row[0], row[1]


def pdf_of(size: int, seed: int) -> bytes:
    head = b"%PDF-1.4\n%" + str(seed).encode() + b"\n"
    return head + os.urandom(size - len(head))


def test_a_crash_between_saving_and_binding_leaves_an_orphan_that_is_swept_and_the_retry_works(
        tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo")
    settings = settings_of(db_path)
    invoice, actor_id = draft_of_ada(db_path)
    client = sign_in(server.url)
    content = pdf_of(200_000, 1)
    digest = hashlib.sha256(content).hexdigest()

    # The gate: this connection holds the account, so the upload streams, hashes and
    # stores its bytes, then waits to bind.
    gate = backends.connect(db_path)
    gate.execute("BEGIN IMMEDIATE")
    hold(gate, account_lock(actor_id))
    outcome: list[object] = []

    def upload() -> None:
        try:
            outcome.append(client.post(f"/invoices/{invoice}/attachments",
                                       data={"client_key": "crash-key"},
                                       files={"file": ("r.pdf", content, "application/pdf")}))
        except httpx.HTTPError as error:
            outcome.append(error)

    sender = threading.Thread(target=upload)
    sender.start()
    try:
        wait_until(lambda: arrived(settings, actor_id, content), 30,
                   "the upload to store its bytes")
        server.process.kill()  # kill -9 while the upload waits to bind
        server.process.wait(10)
    finally:
        gate.execute("ROLLBACK")
        gate.close()
        server.stop(kill=True)  # already gone, unless the wait above failed
    sender.join(30)
    assert isinstance(outcome[0], httpx.HTTPError)  # the client never heard back
    client.close()

    assert files(settings) != []  # the orphan bytes
    assert scalar(db_path, ATTACHED) == 0
    assert scalar(db_path, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'attachment'"
                           " AND request_id NOT LIKE 'demo-receipt-%'") == 0

    async def sweep(now: float) -> int:
        db = await open_database(settings).open()
        try:
            return await attachments.sweep_orphans(db, store_for(settings), now=now)
        finally:
            await db.close()

    assert asyncio.run(sweep(time.time() + 2 * attachments.ORPHAN_GRACE_S)) == 1
    assert stored(settings) == [] and arriving(settings) == []

    server = start_server(db_path)
    client = sign_in(server.url)
    try:
        retry = client.post(f"/invoices/{invoice}/attachments", data={"client_key": "crash-key"},
                            files={"file": ("r.pdf", content, "application/pdf")})
        assert retry.status_code == 201 and retry.json()["sha256"] == digest
        again = client.post(f"/invoices/{invoice}/attachments", data={"client_key": "crash-key"},
                            files={"file": ("r.pdf", content, "application/pdf")})
        assert again.status_code == 200
        assert content_of(settings, actor_id, digest) == content
        assert scalar(db_path, ATTACHED) == 1
        assert arriving(settings) == []
    finally:
        client.close()
        server.stop()


def test_ten_concurrent_10_mib_uploads_raise_peak_memory_by_less_than_50_mb(tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo")
    invoice, _ = draft_of_ada(db_path)
    client = sign_in(server.url)
    cookie = client.cookies["studio_session"]
    client.close()
    try:
        # Warm the upload path once, so the figure is the uploads', not the first import's.
        with httpx.Client(base_url=server.url, cookies={"studio_session": cookie},
                          headers={"Accept": "application/json"}, timeout=60) as warm:
            assert warm.post(f"/invoices/{invoice}/attachments", data={"client_key": "warm"},
                             files={"file": ("w.pdf", pdf_of(100_000, 0))}).status_code == 201
        before = reset_peak(server.process.pid)
        size = 10 * 1024 * 1024 - 4096

        async def upload_all() -> list[int]:
            async with httpx.AsyncClient(base_url=server.url, cookies={"studio_session": cookie},
                                         headers={"Accept": "application/json"},
                                         timeout=120) as http:
                replies = await asyncio.gather(*(
                    http.post(f"/invoices/{invoice}/attachments",
                              data={"client_key": f"big-{n}"},
                              files={"file": (f"{n}.pdf", pdf_of(size, n))})
                    for n in range(10)))
            return [reply.status_code for reply in replies]

        assert asyncio.run(upload_all()) == [201] * 10
        grew = peak_rss_mb(server.process.pid) - before
        assert grew < 50, f"peak memory grew by {grew:.1f} MB"
        assert scalar(db_path, "SELECT COUNT(*) FROM attachments WHERE size = ?", size) == 10
    finally:
        server.stop()


def test_a_sweep_in_another_process_never_removes_a_file_an_upload_still_writes(tmp_path):
    db_path = tmp_path / "studio.db"
    folder = Path(str(db_path) + ".files")  # named, so on PostgreSQL too the bytes are files
    server = start_server(db_path, "--demo", STUDIO_FILES=str(folder))
    invoice, actor_id = draft_of_ada(db_path)
    client = sign_in(server.url)
    store = FileStore(folder)
    content = pdf_of(300_000, 3)
    release = threading.Event()
    outcome: list[object] = []

    def trickle():  # type: ignore[no-untyped-def]
        yield (b"--b\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\nslow\r\n"
               b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.pdf\"\r\n"
               b"\r\n" + content[:1000])
        release.wait(30)
        yield content[1000:] + b"\r\n--b--\r\n"

    def upload() -> None:
        outcome.append(client.post(f"/invoices/{invoice}/attachments", content=trickle(),
                                   headers={"Content-Type": "multipart/form-data; boundary=b"}))

    sender = threading.Thread(target=upload)
    sender.start()
    try:
        wait_until(lambda: any(store.incoming.glob("*.part")), 30, "the upload to begin its file")
        [part] = list(store.incoming.glob("*.part"))
        # This test process is not the server: the sweep runs as another `studio` would.
        attachments.orphan_candidates(store, grace_s=0, now=time.time() + 60)
        assert part.exists()
    finally:
        release.set()
        sender.join(30)
    try:
        reply = outcome[0]
        assert isinstance(reply, httpx.Response) and reply.status_code == 201, reply
        assert store.path_of(actor_id, hashlib.sha256(content).hexdigest()).read_bytes() == content
        assert scalar(db_path, ATTACHED) == 1
    finally:
        client.close()
        server.stop()

"""Attachments by client key, asserted on the database and on the store: a folder on disk, or
(PostgreSQL without STUDIO_FILES) chunk rows in the database."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import struct
import time
import zlib
from pathlib import Path
from urllib.parse import unquote

import pytest

from studio import assets
from studio.billing import attachments
from studio.billing.attachments import FileStore
from studio.config import Settings
from studio.ops import demo
from studio.store.db import Database
from studio.store.stores import store_for
from tests import backends
from tests.conftest import BEN, Running, database_digest, days_ahead, execute, rows, running, scalar
from tests.test_invoices import make_draft

pytestmark = pytest.mark.anyio


def png(seed: int = 0) -> bytes:
    """A real one-pixel PNG; the seed changes its colour, so its bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    pixel = zlib.compress(bytes([0, seed % 256, 0, 0]))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", pixel) + chunk(b"IEND", b""))


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


# What a store holds, read as another process would: the folder's files, or the rows. A demo
# started with --demo holds a till receipt on each account's draft (studio/ops/demo.py): what a
# test stores is counted beside those.
DEMO_SHA256 = frozenset(
    hashlib.sha256((assets.folder("static") / name).read_bytes()).hexdigest()
    for name in demo.RECEIPTS.values())
ATTACHED = ("SELECT COUNT(*) FROM attachments WHERE sha256 NOT IN ("
            + ", ".join(f"'{sha256}'" for sha256 in sorted(DEMO_SHA256)) + ")")


def _settings_of(where: Running | Settings) -> Settings:
    return where if isinstance(where, Settings) else where.settings


def files(where) -> list:  # type: ignore[no-untyped-def]
    """Everything the store holds: stored bytes and bytes still arriving."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        root = store.folder
        return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in DEMO_SHA256
                      ) if root.exists() else []
    # A chunk row belongs to a file row (a foreign key): no file rows, no chunks.
    return sorted(tuple(row) for row in rows(settings.db_path,
                                             "SELECT id, sha256 FROM stored_files")
                  if row[1] not in DEMO_SHA256)


def stored(where) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """(actor id, sha256) of every stored object."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        return sorted((path.parent.parent.name, path.name) for path in store.stored()
                      if path.name not in DEMO_SHA256)
    return sorted((row[0], row[1]) for row in rows(
        settings.db_path, "SELECT owner_id, sha256 FROM stored_files WHERE sha256 IS NOT NULL")
        if row[1] not in DEMO_SHA256)


def arriving(where) -> list:  # type: ignore[no-untyped-def]
    """Bytes of uploads not bound: temporary files, or chunk rows under an upload's own id."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        return list(store.incoming.iterdir()) if store.incoming.exists() else []
    return [row[0] for row in rows(settings.db_path,
                                   "SELECT id FROM stored_files WHERE sha256 IS NULL")]


def content_of(where, actor_id: str, sha256: str) -> bytes | None:  # type: ignore[no-untyped-def]
    """The bytes stored as the actor's under `sha256`, None if there are none."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        path = store.path_of(actor_id, sha256)
        return path.read_bytes() if path.exists() else None
    found = rows(settings.db_path, "SELECT id FROM stored_files WHERE owner_id = ?"
                                   " AND sha256 = ?", actor_id, sha256)
    if not found:
        return None
    return b"".join(bytes(row[0]) for row in rows(
        settings.db_path, "SELECT content FROM stored_chunks WHERE file_id = ?"
                          " ORDER BY position", found[0][0]))


def leave_orphan(where, actor_id: str, content: bytes) -> None:  # type: ignore[no-untyped-def]
    """Bytes stored under their hash that no attachment names, as a crash between storing
    and binding (or between a delete and its removal) leaves them."""
    settings = _settings_of(where)
    store = store_for(settings)
    sha256 = hashlib.sha256(content).hexdigest()
    if isinstance(store, FileStore):
        path = store.path_of(actor_id, sha256)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return
    execute(settings.db_path, "INSERT INTO stored_files (id, owner_id, sha256, size,"
                              " created_at, written_at, placed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            "orphan-" + sha256[:8], actor_id, sha256, len(content), time.time(), time.time(),
            time.time())
    execute(settings.db_path, "INSERT INTO stored_chunks (file_id, position, content)"
                              " VALUES (?, 0, ?)", "orphan-" + sha256[:8], content)


def damage(where, actor_id: str, sha256: str, content: bytes) -> None:  # type: ignore[no-untyped-def]
    """Other bytes where these were: a disk's or a hand's damage."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        store.path_of(actor_id, sha256).write_bytes(content)
        return
    execute(settings.db_path, "UPDATE stored_chunks SET content = ? WHERE position = 0 AND"
                              " file_id = (SELECT id FROM stored_files WHERE owner_id = ?"
                              " AND sha256 = ?)", content, actor_id, sha256)


def lose(where, actor_id: str, sha256: str) -> None:  # type: ignore[no-untyped-def]
    """The stored bytes gone, their rows kept: a store restored without its files."""
    settings = _settings_of(where)
    store = store_for(settings)
    if isinstance(store, FileStore):
        store.path_of(actor_id, sha256).unlink()
        return
    execute(settings.db_path, "DELETE FROM stored_files WHERE owner_id = ? AND sha256 = ?",
            actor_id, sha256)


def in_a_folder(settings: Settings) -> Settings:
    """Attachments in a folder STUDIO_FILES names: SQLite's own way, and on PostgreSQL the
    folder several hosts share."""
    return settings.with_changes(files_dir=settings.files)


@pytest.fixture
def folder_settings(settings: Settings) -> Settings:
    return in_a_folder(settings)


async def draft_id(client) -> str:
    return next(i["id"] for i in (await client.get("/invoices")).json() if i["status"] == "draft")


async def send(client, invoice_id: str, key: str, content: bytes, name: str = "receipt.png",
               declared: str = "image/png"):
    return await client.post(f"/invoices/{invoice_id}/attachments", data={"client_key": key},
                             files={"file": (name, content, declared)})


async def test_new_replay_and_conflict_leave_one_row_one_file_and_the_first_bytes(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    first = await send(client, invoice, "key-1", png(1))
    again = await send(client, invoice, "key-1", png(1))
    other = await send(client, invoice, "key-1", png(2))

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert again.json() == first.json()
    assert other.json()["detail"] == "client_key_conflict"
    body = first.json()
    assert (body["content_type"], body["size"], body["sha256"]) == (
        "image/png", len(png(1)), hashlib.sha256(png(1)).hexdigest())
    db = studio.settings.db_path
    assert scalar(db, "SELECT COUNT(*) FROM attachments") == 1
    [(owner, sha256)] = stored(studio)
    assert sha256 == body["sha256"] and content_of(studio, owner, sha256) == png(1)
    assert arriving(studio) == []
    listed = (await client.get(f"/invoices/{invoice}")).json()["attachments"]
    assert [item["attachment_id"] for item in listed] == [body["attachment_id"]]


async def test_a_folder_keeps_its_files_for_their_owner_only(folder_settings):
    async with running(folder_settings) as studio:
        client = await studio.signed_in()
        made = await send(client, await draft_id(client), "key-1", png(1))
        assert made.status_code == 201, made.text
        [(owner, sha256)] = stored(studio)
        kept = FileStore(folder_settings.files).path_of(owner, sha256)
        assert kept.read_bytes() == png(1) and kept.name == made.json()["sha256"]
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        for folder in (folder_settings.files, kept.parent, kept.parent.parent):
            assert oct(folder.stat().st_mode & 0o777) == "0o700", folder


async def test_too_large_and_wrong_type_leave_no_row_and_no_file(settings):
    async with running(settings.with_changes(max_upload_bytes=64 * 1024)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        before = database_digest(settings.db_path)
        big = png(1) + os.urandom(64 * 1024)
        too_large = await send(client, invoice, "key-big", big)
        assert too_large.status_code == 413
        assert too_large.json()["detail"] == "upload_too_large"

        async def chunked():  # no length declared: the bytes are counted as they come
            for n in range(0, len(big), 8192):
                yield big[n:n + 8192]
        boundary = "b0undary"
        streamed = await client.post(
            f"/invoices/{invoice}/attachments",
            content=_multipart(boundary, "key-big2", "x.png", chunked),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert streamed.status_code == 413
        wrong = await send(client, invoice, "key-html", b"<html><script>x</script></html>",
                           "invoice.pdf", "application/pdf")
        assert wrong.status_code == 415 and wrong.json()["detail"] == "unsupported_media_type"
        assert database_digest(settings.db_path) == before
        assert files(studio) == []


def _multipart(boundary: str, key: str, name: str, body):  # type: ignore[no-untyped-def]
    async def stream():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\n"
               f"{key}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
               f"filename=\"{name}\"\r\nContent-Type: image/png\r\n\r\n").encode()
        async for chunk in body():
            yield chunk
        yield f"\r\n--{boundary}--\r\n".encode()
    return stream()


@pytest.mark.parametrize("content, kind, previewed", [
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\0" * 100, "image/jpeg", True),
    (b"RIFF" + struct.pack("<I", 100) + b"WEBPVP8 " + b"\0" * 100, "image/webp", True),
    (struct.pack(">I", 24) + b"ftypheic\0\0\0\0mif1heic" + b"\0" * 100, "image/heic", False),
], ids=["jpeg", "webp", "heic"])
async def test_each_kept_type_is_taken_by_its_bytes_whatever_it_is_called(
        studio, content, kind, previewed):
    client = await studio.signed_in()
    made = await send(client, await draft_id(client), f"key-{kind}", content, "scan.bin",
                      "application/octet-stream")
    assert made.status_code == 201, made.text
    assert made.json()["content_type"] == kind
    assert scalar(studio.settings.db_path, "SELECT content_type FROM attachments WHERE id = ?",
                  made.json()["attachment_id"]) == kind
    served = await client.get(f"/attachments/{made.json()['attachment_id']}")
    assert served.headers["content-type"] == kind and served.content == content
    # Raster images a browser shows are previewed; HEIC is listed as a named file.
    preview = await client.get(f"/attachments/{made.json()['attachment_id']}/preview")
    assert preview.status_code == (200 if previewed else 404)


@pytest.mark.parametrize("name, content, declared", [
    ("invoice.pdf", b"<!doctype html><html><body>hi</body></html>", "application/pdf"),
    ("logo.png", b'<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>',
     "image/png"),
    ("photo.jpg", b"\x7fELF\x02\x01\x01" + b"\0" * 200, "image/jpeg"),
    ("photo.jpg", b"MZ\x90\x00" + b"\0" * 200, "image/jpeg"),
])
async def test_the_type_is_judged_by_the_bytes_not_the_name(studio, name, content, declared):
    client = await studio.signed_in()
    reply = await send(client, await draft_id(client), f"key-{name}", content, name, declared)
    assert reply.status_code == 415
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments") == 0


async def test_a_pdf_sent_as_anything_is_a_pdf_and_a_hostile_name_cannot_break_the_header(
        studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    hostile = 'q"uote\nnew;line Straße 收据.png'
    made = await send(client, invoice, "key-name", PDF, hostile, "image/png")
    assert made.status_code == 201 and made.json()["content_type"] == "application/pdf"
    served = await client.get(f"/attachments/{made.json()['attachment_id']}")
    assert served.status_code == 200 and served.content == PDF
    assert served.headers["content-type"] == "application/pdf"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["cache-control"] == "private, no-store"
    header = served.headers["content-disposition"]
    assert header.startswith("attachment;") and "\n" not in header and "\r" not in header
    assert header.count('"') == 2  # only the fallback's own quotes
    encoded = header.split("filename*=UTF-8''", 1)[1]
    assert unquote(encoded) == made.json()["filename"]
    assert "Straße 收据.png" in unquote(encoded)
    preview = await client.get(f"/attachments/{made.json()['attachment_id']}/preview")
    assert preview.status_code == 404  # only raster images are ever shown inline


async def test_a_png_previews_inline_sandboxed_and_the_download_is_sandboxed_too(studio):
    client = await studio.signed_in()
    made = (await send(client, await draft_id(client), "key-preview", png(6))).json()
    for path in (f"/attachments/{made['attachment_id']}/preview",
                 f"/attachments/{made['attachment_id']}"):
        served = await client.get(path)
        assert served.status_code == 200, path
        # The preview is a thumbnail made from the image (tests/test_thumbnails.py).
        assert served.headers["content-type"] == (
            "image/webp" if path.endswith("/preview") else "image/png")
        assert served.headers["content-security-policy"] == "default-src 'none'; sandbox"
        assert served.headers["x-content-type-options"] == "nosniff"
    assert served.content == png(6)
    assert served.headers["content-disposition"].startswith("attachment;")


async def test_client_keys_are_each_actors_own_and_one_to_100_characters(studio):
    ada, ben = await studio.signed_in(), await studio.signed_in(BEN)
    adas, bens = await draft_id(ada), await draft_id(ben)
    before = database_digest(studio.settings.db_path)
    for key in ("", "k" * 101):
        refused = await send(ada, adas, key, png(7))
        assert refused.status_code == 422 and refused.json()["detail"] == "invalid_client_key"
    assert database_digest(studio.settings.db_path) == before
    assert (await send(ada, adas, "k" * 100, png(7))).status_code == 201
    # The same key and the same bytes from Ben: his own attachment, his own stored file.
    first = await send(ada, adas, "shared-key", png(8))
    second = await send(ben, bens, "shared-key", png(8))
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["attachment_id"] != second.json()["attachment_id"]
    owners = {name: scalar(studio.settings.db_path, "SELECT id FROM actors WHERE email = ?",
                           email) for name, email in (("ada", "ada@example.com"), ("ben", BEN))}
    digest = hashlib.sha256(png(8)).hexdigest()
    assert all(content_of(studio, owner, digest) == png(8) for owner in owners.values())
    # Ada removing hers leaves Ben's file, and his download, in place.
    assert (await ada.delete(f"/attachments/{first.json()['attachment_id']}")).status_code == 200
    assert content_of(studio, owners["ada"], digest) is None
    assert (await ben.get(f"/attachments/{second.json()['attachment_id']}")).content == png(8)
    listed = (await ben.get(f"/invoices/{bens}")).json()["attachments"]
    assert [(item["filename"], item["size"], item["sha256"]) for item in listed] == [
        ("receipt.png", len(png(8)), digest)]


async def test_ten_concurrent_uploads_with_one_key_make_one_attachment(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    replies = await asyncio.gather(*(send(client, invoice, "same-key", png(7))
                                     for _ in range(10)))
    assert sorted(r.status_code for r in replies) == [200] * 9 + [201]
    assert len({r.json()["attachment_id"] for r in replies}) == 1
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments") == 1
    assert len(stored(studio)) == 1 and arriving(studio) == []


async def test_another_actor_gets_404_and_an_issued_invoice_409(studio):
    ada = await studio.signed_in()
    ben = await studio.signed_in(BEN)
    invoice = await draft_id(ada)
    made = (await send(ada, invoice, "key-ada", png(3))).json()
    before = database_digest(studio.settings.db_path)
    assert (await send(ben, invoice, "key-ben", png(4))).status_code == 404
    assert (await ben.get(f"/attachments/{made['attachment_id']}")).status_code == 404
    assert (await ben.get(f"/attachments/{made['attachment_id']}/preview")).status_code == 404
    assert (await ben.delete(f"/attachments/{made['attachment_id']}")).status_code == 404
    assert database_digest(studio.settings.db_path) == before

    revision = (await ada.get(f"/invoices/{invoice}")).json()["revision"]
    issued = await ada.post(f"/invoices/{invoice}/issue",
                            json={"request_id": "issue-att", "revision": revision})
    assert issued.status_code == 201
    frozen = database_digest(studio.settings.db_path)
    kept_files = stored(studio)
    # A reply lost before the issue, resent after it: the same request, answered as it was.
    resent = await send(ada, invoice, "key-ada", png(3))
    assert resent.status_code == 200, resent.text
    assert resent.json()["attachment_id"] == made["attachment_id"]
    late = await send(ada, invoice, "key-late", png(5))
    late_text = await send(ada, invoice, "key-text", b"plain words", "notes.txt", "text/plain")
    removed = await ada.delete(f"/attachments/{made['attachment_id']}")
    assert late.status_code == late_text.status_code == removed.status_code == 409
    assert {late.json()["detail"], late_text.json()["detail"], removed.json()["detail"]} == {
        "invoice_issued"}  # issued first: what the file is does not matter any more
    assert database_digest(studio.settings.db_path) == frozen
    assert stored(studio) == kept_files and arriving(studio) == []
    with pytest.raises(sqlite3.IntegrityError, match="invoice_frozen"):
        execute(studio.settings.db_path, "DELETE FROM attachments WHERE id = ?",
                made["attachment_id"])
    # The attachment is part of what issuing froze: the PDF's hash covers it.
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments") == 1
    note = (await ada.post(f"/invoices/{invoice}/credit-note")).json()
    assert note["attachments"] == []


async def test_deleting_removes_the_file_only_when_no_other_attachment_names_the_bytes(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    first = (await send(client, invoice, "key-a", png(9))).json()
    second = (await send(client, invoice, "key-b", png(9))).json()
    assert first["attachment_id"] != second["attachment_id"] and len(stored(studio)) == 1
    assert (await client.delete(f"/attachments/{first['attachment_id']}")).status_code == 200
    assert len(stored(studio)) == 1
    assert (await client.delete(f"/attachments/{second['attachment_id']}")).status_code == 200
    assert stored(studio) == []
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments") == 0


async def test_an_orphan_file_is_swept_after_the_grace_period_and_a_retry_succeeds(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    kept = (await send(client, invoice, "key-kept", png(11))).json()
    actor_id = scalar(studio.settings.db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                      invoice)
    orphan = hashlib.sha256(png(12)).hexdigest()
    leave_orphan(studio, actor_id, png(12))
    db: Database = studio.studio.db
    store = studio.app.state.attachment_store
    assert await attachments.sweep_orphans(db, store) == 0  # within the grace period
    assert content_of(studio, actor_id, orphan) == png(12)
    assert await attachments.sweep_orphans(db, store, now=time.time() + 7200) == 1
    assert content_of(studio, actor_id, orphan) is None
    assert content_of(studio, actor_id, kept["sha256"]) == png(11)  # named by a row: kept
    retry = await send(client, invoice, "key-orphan", png(12))
    assert retry.status_code == 201 and content_of(studio, actor_id, orphan) == png(12)


async def test_attaching_or_removing_is_a_new_revision_so_a_stale_issue_review_is_refused(
        studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    reviewed = (await client.get(f"/invoices/{invoice}")).json()["revision"]
    made = (await send(client, invoice, "key-rev", png(31))).json()
    assert (await client.get(f"/invoices/{invoice}")).json()["revision"] == reviewed + 1
    stale = await client.post(f"/invoices/{invoice}/issue",
                              json={"request_id": "issue-rev", "revision": reviewed})
    assert stale.status_code == 409 and stale.json()["detail"] == "draft_changed"
    await client.delete(f"/attachments/{made['attachment_id']}")
    assert (await client.get(f"/invoices/{invoice}")).json()["revision"] == reviewed + 2
    fragment = await client.get(f"/invoices/{invoice}/attachments",
                                headers={"HX-Request": "true", "Accept": "text/html"})
    assert f'value="{reviewed + 2}" id="draft-revision" hx-swap-oob="true"' in fragment.text


async def test_attaching_a_receipt_does_not_mark_the_draft_edited_but_an_edit_does(studio):
    client = await studio.signed_in()
    invoice = (await make_draft(client))["id"]
    attached = (await send(client, invoice, "key-edited", png(41))).json()
    await client.delete(f"/attachments/{attached['attachment_id']}")
    await send(client, invoice, "key-edited-2", png(42))
    stored = rows(studio.settings.db_path, "SELECT revision, created_at, updated_at"
                                           " FROM invoices WHERE id = ?", invoice)[0]
    assert stored["revision"] == 4 and stored["updated_at"] == stored["created_at"]
    assert (await client.get(f"/invoices/{invoice}")).json()["edited"] is False
    page = await client.get(f"/invoices/{invoice}", headers={"Accept": "text/html"})
    assert re.search(r'id="revision-badge"[^>]*hidden', page.text)
    edited = await client.patch(f"/invoices/{invoice}", json={"revision": 4, "notes": "PO 7"})
    assert edited.json()["edited"] is True
    page = await client.get(f"/invoices/{invoice}", headers={"Accept": "text/html"})
    assert not re.search(r'id="revision-badge"[^>]*hidden', page.text)


async def test_odd_multipart_bodies_are_4xx_and_leave_no_row_and_no_file(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    before = database_digest(studio.settings.db_path)
    url = f"/invoices/{invoice}/attachments"
    long_boundary = "b" * 300
    two_files = (b"--b\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\nk2\r\n"
                 b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
                 b"\r\n%PDF-1.4 one\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; "
                 b"filename=\"b.pdf\"\r\n\r\n%PDF-1.4 two\r\n--b--\r\n")
    many_fields = "".join(f"--b\r\nContent-Disposition: form-data; name=\"f{n}\"\r\n\r\nx\r\n"
                          for n in range(40)).encode() + b"--b--\r\n"
    # A body cut off before its closing boundary is not a whole file.
    cut_off = (b"--b\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\nk3\r\n"
               b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.pdf\"\r\n"
               b"\r\n%PDF-1.4 the first half of the recei")
    answers = [
        await client.post(url, content=b"--" + long_boundary.encode() + b"--\r\n", headers={
            "Content-Type": f"multipart/form-data; boundary={long_boundary}"}),
        await client.post(url, content=two_files,
                          headers={"Content-Type": "multipart/form-data; boundary=b"}),
        await client.post(url, content=many_fields,
                          headers={"Content-Type": "multipart/form-data; boundary=b"}),
        await client.post(url, content=b"garbage", headers={"Content-Type": "text/plain"}),
        await client.post(url, content=cut_off,
                          headers={"Content-Type": "multipart/form-data; boundary=b"}),
    ]
    assert [a.status_code for a in answers] == [422] * 5, [a.text for a in answers]
    assert database_digest(studio.settings.db_path) == before
    assert files(studio) == []


async def test_a_body_past_the_limit_is_413_even_without_a_file_part(settings):
    async with running(settings.with_changes(max_upload_bytes=16 * 1024)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)

        async def endless():  # no length declared; after the end, what a parser skips
            yield (b"--b\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\nk\r\n"
                   b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
                   b"\r\n" + PDF + b"\r\n--b--\r\n")
            for _ in range(400):
                yield b"x" * 1000
        reply = await client.post(f"/invoices/{invoice}/attachments", content=endless(),
                                  headers={"Content-Type": "multipart/form-data; boundary=b"})
        assert reply.status_code == 413 and reply.json()["detail"] == "upload_too_large"
        assert files(studio) == []


async def test_studio_check_finds_a_missing_or_damaged_file_in_its_owners_keeping(studio):
    from studio.ops.checks import Target, files_vs_rows

    client = await studio.signed_in()
    made = (await send(client, await draft_id(client), "key-check", png(41))).json()
    target = Target(studio.settings)
    assert files_vs_rows(target).ok
    [(owner, sha256)] = stored(studio)
    damage(studio, owner, sha256, png(42))
    damaged = files_vs_rows(target)
    assert not damaged.ok and made["sha256"] in damaged.detail
    lose(studio, owner, sha256)
    missing = files_vs_rows(target)
    assert not missing.ok and f"missing: {made['sha256']}" in missing.detail


async def test_deleting_a_draft_deletes_its_attachments_and_their_files_once_nothing_names_them(
        studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    other = (await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61), "line_items": [
            {"description": "Widgets", "quantity": "1", "unit_price": "1", "tax_rate": "0"}]}
    )).json()["id"]
    only = (await send(client, invoice, "k-only", png(51))).json()
    shared = (await send(client, invoice, "k-shared", png(52))).json()
    elsewhere = (await send(client, other, "k-elsewhere", png(52))).json()
    db = studio.settings.db_path
    actor_id = scalar(db, "SELECT owner_id FROM invoices WHERE id = ?", invoice)

    assert (await client.delete(f"/invoices/{invoice}")).status_code == 200
    assert scalar(db, "SELECT COUNT(*) FROM attachments WHERE invoice_id = ?", invoice) == 0
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'attachment'"
                      " AND request_id IN ('k-only', 'k-shared')") == 0
    assert content_of(studio, actor_id, only["sha256"]) is None
    assert content_of(studio, actor_id, shared["sha256"]) == png(52)  # still named
    for gone in (only, shared):
        assert (await client.get(f"/attachments/{gone['attachment_id']}")).status_code == 404
    assert (await client.get(f"/attachments/{elsewhere['attachment_id']}")).content == png(52)
    # A resent upload to the deleted draft: the draft is gone, not a server error.
    resent = await send(client, invoice, "k-only", png(51))
    assert resent.status_code == 404 and resent.json()["detail"] == "invoice_not_found"
    assert stored(studio) == [(actor_id, shared["sha256"])] and arriving(studio) == []


async def test_a_crash_after_a_draft_is_deleted_leaves_only_orphans_the_sweep_removes(studio):
    from studio.billing import invoices
    from studio.store.transactions import in_transaction

    client = await studio.signed_in()
    invoice = await draft_id(client)
    made = (await send(client, invoice, "k-crash", png(53))).json()
    db_path = studio.settings.db_path
    actor_id = scalar(db_path, "SELECT owner_id FROM invoices WHERE id = ?", invoice)
    # The rows go in the transaction; a process that dies right after its commit never
    # removes the file (nor, given no store, the bytes in the database).
    db = backends.connect(db_path)
    try:
        in_transaction(db, invoices.delete_draft, actor_id, invoice)
    finally:
        db.close()
    assert scalar(db_path, "SELECT COUNT(*) FROM attachments") == 0
    assert content_of(studio, actor_id, made["sha256"]) == png(53)
    swept = await attachments.sweep_orphans(studio.studio.db, studio.app.state.attachment_store,
                                            now=time.time() + 2 * attachments.ORPHAN_GRACE_S)
    assert swept == 1 and content_of(studio, actor_id, made["sha256"]) is None


def _trickled(boundary: str, key: str, content: bytes, started: asyncio.Event,
              release: asyncio.Event):  # type: ignore[no-untyped-def]
    async def body():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"client_key\"\r\n\r\n"
               f"{key}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
               f"filename=\"slow.pdf\"\r\nContent-Type: application/pdf\r\n\r\n").encode() \
            + content[:100]
        started.set()
        await release.wait()
        yield content[100:] + f"\r\n--{boundary}--\r\n".encode()
    return body()


async def _upload_in_progress(client, invoice: str, key: str, content: bytes, incoming: Path
                              ) -> tuple[asyncio.Future, asyncio.Event, Path]:
    started, release = asyncio.Event(), asyncio.Event()
    reply = asyncio.ensure_future(client.post(
        f"/invoices/{invoice}/attachments", content=_trickled("b", key, content, started, release),
        headers={"Content-Type": "multipart/form-data; boundary=b"}))
    await asyncio.wait_for(started.wait(), 10)
    [part] = list(incoming.glob("*.part"))
    return reply, release, part


async def test_the_sweep_never_removes_a_file_an_upload_still_writes(folder_settings):
    async with running(folder_settings) as studio:
        await _the_sweep_never_removes_a_file_an_upload_still_writes(studio)


async def _the_sweep_never_removes_a_file_an_upload_still_writes(studio: Running) -> None:
    client = await studio.signed_in()
    invoice = await draft_id(client)
    store = FileStore(studio.settings.files)
    content = PDF + os.urandom(50_000)
    reply, release, part = await _upload_in_progress(client, invoice, "slow", content,
                                                     store.incoming)
    # Long after the grace period, by the sweep's clock: still being written, so kept.
    await attachments.sweep_orphans(studio.studio.db, store, grace_s=0, now=time.time() + 60)
    assert part.exists()
    release.set()
    answered = await reply
    assert answered.status_code == 201, answered.text
    actor_id = scalar(studio.settings.db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                      invoice)
    assert store.path_of(actor_id, answered.json()["sha256"]).read_bytes() == content
    assert not part.exists()
    # A temporary file nobody writes any more (its upload died with its process) is swept.
    abandoned = store.incoming / "abandoned.part"
    abandoned.write_bytes(b"half a receipt")
    await attachments.sweep_orphans(studio.studio.db, store, grace_s=0, now=time.time() + 60)
    assert not abandoned.exists()


async def test_an_upload_whose_file_vanished_before_linking_is_a_retryable_503(folder_settings):
    async with running(folder_settings) as studio:
        await _an_upload_whose_file_vanished_before_linking_is_a_retryable_503(studio)


async def _an_upload_whose_file_vanished_before_linking_is_a_retryable_503(studio: Running
                                                                           ) -> None:
    client = await studio.signed_in()
    invoice = await draft_id(client)
    store = FileStore(studio.settings.files)
    content = PDF + os.urandom(50_000)
    before = database_digest(studio.settings.db_path)
    reply, release, part = await _upload_in_progress(client, invoice, "vanish", content,
                                                     store.incoming)
    part.unlink()  # removed by hand, past every lock
    release.set()
    answered = await reply
    assert answered.status_code == 503, answered.text
    assert answered.json()["detail"] == "upload_lost" and answered.headers["retry-after"]
    assert database_digest(studio.settings.db_path) == before and files(studio) == []
    again = await send(client, invoice, "vanish", content, "slow.pdf")
    assert again.status_code == 201, again.text

"""A full database or disk: 507 `insufficient_storage` on every route, never 500, and nothing
half-written. The database is made full for real: SQLite itself refuses the write; PostgreSQL
answers with its own disk-full error (SQLSTATE 53100), as it does when a file cannot grow."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from studio.ops.demo import DEMO_PASSWORD
from studio.store.stores import CHUNK_BYTES
from tests import backends
from tests.conftest import (
    ROOT,
    Server,
    database_digest,
    days_ahead,
    free_port,
    lease_body,
    running,
    scalar,
    sign_in,
    studio_env,
    wait_for_server,
)
from tests.test_attachments import (
    ATTACHED,
    DEMO_SHA256,
    PDF,
    arriving,
    draft_id,
    files,
    in_a_folder,
    png,
    send,
)
from tests.test_invoices import draft_body

pytestmark = pytest.mark.anyio
postgres_only = pytest.mark.skipif(not backends.ON_POSTGRES,
                                   reason="the bytes are in the database only on PostgreSQL")

NO_ROOM = 64 * 1024 * 1024  # more than any free page of a test database could hold


def fill(db: sqlite3.Connection) -> None:
    """Make every write of this connection need room the file may not grow to: each table
    write also adds a large blob, and the file may not grow past its present pages. SQLite
    then refuses it with its own 'database or disk is full'. Both live on this connection only."""
    db.execute("CREATE TABLE IF NOT EXISTS ballast (bytes BLOB)")
    tables = [row[0] for row in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND name != 'ballast'")]
    for table in tables:
        for event in ("INSERT", "UPDATE", "DELETE"):
            db.execute(f"CREATE TEMP TRIGGER full_{table}_{event.lower()} AFTER {event} ON"
                       f" main.{table} BEGIN INSERT INTO ballast VALUES (zeroblob({NO_ROOM}));"
                       " END")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def make_room(db: sqlite3.Connection) -> None:
    for (name,) in db.execute("SELECT name FROM temp.sqlite_master WHERE type = 'trigger'"
                              ).fetchall():
        db.execute(f"DROP TRIGGER temp.{name}")
    db.execute("PRAGMA max_page_count = 1073741823")


DISK_FULL = """
CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'stored_chunks' THEN
        IF NEW.position < %(from_chunk)s THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'could not extend file: No space left on device'
        USING ERRCODE = 'disk_full';
END $$
"""


def pg_disk_full(db_path: Path, tables: list[str] | None = None, from_chunk: int = 0) -> None:
    """Every row written to `tables` (all of them by default) refused by PostgreSQL with the
    error a full disk gives, SQLSTATE 53100 disk_full; stored_chunks from its `from_chunk`th
    chunk of a file on."""
    db = backends.connect(db_path)
    try:
        db.execute(DISK_FULL.replace("%(from_chunk)s", str(from_chunk)))
        for table in tables or backends.tables(db):
            events = "INSERT" if table == "stored_chunks" else "INSERT OR UPDATE OR DELETE"
            db.execute(f"CREATE TRIGGER zz_disk_full BEFORE {events} ON {table}"
                       " FOR EACH ROW EXECUTE FUNCTION disk_full()")
    finally:
        db.close()


def pg_make_room(db_path: Path) -> None:
    db = backends.connect(db_path)
    try:
        for table in backends.tables(db):
            db.execute(f"DROP TRIGGER IF EXISTS zz_disk_full ON {table}")
    finally:
        db.close()


async def fill_database(studio: Any) -> None:
    if backends.ON_POSTGRES:
        pg_disk_full(studio.settings.db_path)
    else:
        await studio.studio.db.on_writer(fill)


async def make_room_in_database(studio: Any) -> None:
    if backends.ON_POSTGRES:
        pg_make_room(studio.settings.db_path)
    else:
        await studio.studio.db.on_writer(make_room)


async def test_a_full_database_is_507_on_every_write_route_and_nothing_is_written(studio):
    client = await studio.signed_in()
    invoice = await draft_id(client)
    attached = (await send(client, invoice, "before", png(1))).json()
    revision = (await client.get(f"/invoices/{invoice}")).json()["revision"]
    issued = studio.invoice_ids()[0]
    db_path = studio.settings.db_path
    await fill_database(studio)
    before, kept = database_digest(db_path), files(studio)

    newcomer = studio.client()
    answers = {
        "sign in": await newcomer.post("/login", json={"email": "ben@example.com",
                                                       "password": DEMO_PASSWORD}),
        "new draft": await client.post("/invoices", json=draft_body(request_id="full-1")),
        "edit": await client.patch(f"/invoices/{invoice}",
                                   json={"revision": revision, "customer": "Else"}),
        "upload": await send(client, invoice, "during", png(2)),
        "remove attachment": await client.delete(f"/attachments/{attached['attachment_id']}"),
        "issue": await client.post(f"/invoices/{invoice}/issue",
                                   json={"request_id": "issue-full", "revision": revision}),
        "credit note": await client.post(f"/invoices/{issued}/credit-note"),
        "settings": await client.post("/settings", json={"name": "Ada Ltd"}),
        "ask for suggestions": await client.post("/leases", json=lease_body([invoice])),
        "delete draft": await client.delete(f"/invoices/{invoice}"),
    }
    assert {what: reply.status_code for what, reply in answers.items()} == {
        what: 507 for what in answers}, {what: r.text[:200] for what, r in answers.items()}
    for reply in answers.values():
        assert reply.json()["detail"] == "insufficient_storage"
        assert "storage is full" in reply.json()["message"]
    assert database_digest(db_path) == before
    assert files(studio) == kept and arriving(studio) == []

    # As a page and as a fragment the person reads the same sentence, not an error page.
    form = {"customer": "Acme", "currency": "EUR", "due_date": days_ahead(61),
            "description": "Widgets", "quantity": "1", "unit_price": "5", "tax_rate": "0"}
    page = await client.post("/invoices", data=form, headers={"Accept": "text/html"})
    fragment = await client.post("/invoices", data=form,
                                 headers={"Accept": "text/html", "HX-Request": "true"})
    assert (page.status_code, fragment.status_code) == (507, 507)
    assert "storage is full" in page.text and "storage is full" in fragment.text
    assert database_digest(db_path) == before

    # Reading still works while a session's use cannot be recorded.
    studio.studio.sessions.touch_every = 0.0  # every request is due to record its use
    listed = await client.get("/invoices")
    assert listed.status_code == 200 and invoice in [item["id"] for item in listed.json()]
    assert database_digest(db_path) == before

    await make_room_in_database(studio)  # space freed: the studio carries on
    made = await client.post("/invoices", json=draft_body(request_id="full-1"))
    assert made.status_code == 201, made.text
    assert scalar(db_path, "SELECT COUNT(*) FROM invoices WHERE id = ?", made.json()["id"]) == 1


async def test_a_full_disk_while_the_upload_is_synced_is_507_and_leaves_no_file(
        settings, monkeypatch):
    async with running(in_a_folder(settings)) as studio:
        client = await studio.signed_in()
        invoice = await draft_id(client)
        before = database_digest(studio.settings.db_path)

        def no_space(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr("studio.store.uploads.os.fsync", no_space)
        reply = await send(client, invoice, "k-full", PDF, "r.pdf")
        monkeypatch.undo()
        assert reply.status_code == 507, reply.text
        assert reply.json()["detail"] == "insufficient_storage"
        assert database_digest(studio.settings.db_path) == before
        assert files(studio) == []
        retry = await send(client, invoice, "k-full", PDF, "r.pdf")
        assert retry.status_code == 201, retry.text


@postgres_only
async def test_a_database_full_while_the_bytes_arrive_is_507_and_leaves_no_chunk(studio):
    """The first chunk is in the database when the second finds no room: the upload is 507
    and its first chunk goes too."""
    client = await studio.signed_in()
    invoice = await draft_id(client)
    before = database_digest(studio.settings.db_path)
    receipt = PDF + os.urandom(2 * CHUNK_BYTES)
    pg_disk_full(studio.settings.db_path, ["stored_chunks"], from_chunk=1)
    try:
        reply = await send(client, invoice, "k-full", receipt, "r.pdf")
    finally:
        pg_make_room(studio.settings.db_path)
    assert reply.status_code == 507, reply.text
    assert reply.json()["detail"] == "insufficient_storage"
    assert "storage is full" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before
    assert files(studio) == []
    retry = await send(client, invoice, "k-full", receipt, "r.pdf")
    assert retry.status_code == 201, retry.text
    served = await client.get(f"/attachments/{retry.json()['attachment_id']}")
    assert served.content == receipt


def test_postgresql_s_disk_full_error_is_the_studio_s_507() -> None:
    """What a full disk raises in psycopg is what the studio answers 507 for."""
    import psycopg.errors

    from studio.errors import storage_full
    from studio.store.postgres import as_sqlite_error

    mapped = as_sqlite_error(psycopg.errors.DiskFull("could not extend file"))
    assert isinstance(mapped, sqlite3.OperationalError) and storage_full(mapped)
    assert not storage_full(as_sqlite_error(psycopg.errors.UniqueViolation("duplicate key")))


def start_limited_server(db_path: Path, file_limit: int) -> Server:
    """`studio serve --demo` whose files may not grow past `file_limit` bytes (RLIMIT_FSIZE):
    a write past it fails as on a full disk, no root needed. Its attachments are in a folder
    (on PostgreSQL, named by STUDIO_FILES)."""
    port = free_port()
    log_path = db_path.with_name(f"serve-{port}.log")
    limited = ("import resource, runpy, sys;"
               f" resource.setrlimit(resource.RLIMIT_FSIZE, ({file_limit}, {file_limit}));"
               " sys.argv = ['studio', *sys.argv[1:]];"
               " runpy.run_module('studio.ops.cli', run_name='__main__')")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", limited, "serve", "--host", "127.0.0.1", "--port",
             str(port), "--demo"], cwd=ROOT,
            env=studio_env(db_path, STUDIO_FILES=str(db_path) + ".files"), stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(process, f"http://127.0.0.1:{port}", log_path)
    wait_for_server(server)
    return server


def test_a_file_that_cannot_grow_is_507_on_a_real_server_and_leaves_no_file(tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_limited_server(db_path, 4 * 1024 * 1024)
    client = sign_in(server.url)
    try:
        invoice = next(i["id"] for i in client.get("/invoices").json()
                       if i["status"] == "draft")
        big = PDF + os.urandom(6 * 1024 * 1024)
        reply = client.post(f"/invoices/{invoice}/attachments", data={"client_key": "big"},
                            files={"file": ("big.pdf", big, "application/pdf")})
        assert reply.status_code == 507, reply.text
        assert reply.json()["detail"] == "insufficient_storage"
        assert scalar(db_path, ATTACHED) == 0
        store = Path(str(db_path) + ".files")
        assert [p for p in store.rglob("*")
                if p.is_file() and p.name not in DEMO_SHA256] == []  # the demo's receipts stay
        small = client.post(f"/invoices/{invoice}/attachments", data={"client_key": "small"},
                            files={"file": ("small.pdf", PDF, "application/pdf")})
        assert small.status_code == 201, small.text
    except (AssertionError, httpx.HTTPError):
        print(server.log())
        raise
    finally:
        client.close()
        server.stop()
    assert "Traceback" not in server.log()

"""What a hostile or careless client, or a careless host, can do at the edges (findings 3
and 4 of issue 9): a body that stalls is cut off with 408; the database, its WAL and the
signing key are readable by their owner only, and a readable key stops the start."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studio.config import Settings
from studio.store.keys import signing_key
from tests import backends
from tests.conftest import ADA, ROOT, rows, scalar, sign_in, start_server, studio_env

pytestmark = pytest.mark.anyio


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# A submission's body is read ahead by the edge; an invoice's by its handler.
@pytest.mark.parametrize("path,table", [("/leases", "leases"), ("/invoices", "invoices")])
def test_a_body_that_stalls_gets_408_and_a_closed_connection(tmp_path, path, table):
    server = start_server(tmp_path / "studio.db", "--demo", STUDIO_CLIENT_TIMEOUT_SECONDS="1")
    with contextlib.ExitStack() as stack:
        stack.callback(server.stop)
        client = sign_in(server.url)
        stack.callback(client.close)
        cookie = f"studio_session={client.cookies['studio_session']}"
        invoice = client.get("/invoices").json()[0]["id"]
        body = ('{"request_id": "stalled", "purpose": "summarize_invoice", "invoice_ids": ["'
                + invoice + '"]}').encode()
        if path == "/invoices":
            body = json.dumps({"customer": {"name": "Stalled Ltd"}, "currency": "EUR",
                               "lines": [{"description": "Design", "quantity": "1",
                                          "unit_price": "10.00"}]}).encode()
        before = scalar(tmp_path / "studio.db", f"SELECT COUNT(*) FROM {table}")
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as raw:
            raw.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + host.encode()
                        + b"\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                        + b"Cookie: " + cookie.encode() + b"\r\nContent-Length: "
                        + str(len(body)).encode() + b"\r\n\r\n" + body[:20])
            answer = b""
            while chunk := raw.recv(65536):  # ends only when the server closes
                answer += chunk
        head, _, text = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer
        assert b"connection: close" in head.lower()
        assert b"request_timeout" in text
        # Nothing of the half-sent request was written; the studio still answers others.
        assert scalar(tmp_path / "studio.db", f"SELECT COUNT(*) FROM {table}") == before
        assert client.get("/invoices").status_code == 200
    assert "Traceback" not in server.log()


def test_a_slow_download_is_not_cut_off_by_the_body_timeout(tmp_path):
    """The 408 watchdog times a request's body only: a download read slowly, for longer than
    the timeout, arrives whole (a streamed answer keeps listening for a disconnect)."""
    server = start_server(tmp_path / "studio.db", "--demo", STUDIO_CLIENT_TIMEOUT_SECONDS="1")
    with contextlib.ExitStack() as stack:
        stack.callback(server.stop)
        client = sign_in(server.url)
        stack.callback(client.close)
        draft = next(i["id"] for i in client.get("/invoices").json() if i["status"] == "draft")
        content = b"%PDF-1.4\n" + os.urandom(6 * 1024 * 1024) + b"\n%%EOF\n"
        made = client.post(f"/invoices/{draft}/attachments", data={"client_key": "slow-1"},
                           files={"file": ("big.pdf", content, "application/pdf")})
        assert made.status_code == 201, made.text
        cookie = f"studio_session={client.cookies['studio_session']}"
        host, port = server.url.removeprefix("http://").split(":")
        with socket.socket() as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            raw.settimeout(30)
            raw.connect((host, int(port)))
            raw.sendall(f"GET /attachments/{made.json()['attachment_id']} HTTP/1.1\r\n"
                        f"Host: {host}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
                        .encode())
            answer, started = b"", time.monotonic()
            while chunk := raw.recv(64 * 1024):  # about 1 MiB a second: six seconds in all
                answer += chunk
                time.sleep(0.05)
        assert time.monotonic() - started > 2  # far past the one-second timeout
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert hashlib.sha256(body).hexdigest() == hashlib.sha256(content).hexdigest()
    assert "Traceback" not in server.log()


@backends.sqlite_only
def test_database_wal_and_key_are_owner_only_after_start_and_a_write(tmp_path):
    db_path = tmp_path / "studio.db"
    previous = os.umask(0o022)  # a typical host: new files world-readable unless asked
    try:
        server = start_server(db_path, "--demo", STUDIO_SECRET_KEY="")
        try:
            sign_in(server.url).close()  # a write: the session lands in the WAL
            files = [db_path, tmp_path / "studio.db-wal", tmp_path / "studio.db-shm",
                     tmp_path / "studio.db.secret"]
            assert {file.name: mode(file) for file in files} == \
                {file.name: 0o600 for file in files}
        finally:
            server.stop()
    finally:
        os.umask(previous)
    assert scalar(db_path, "SELECT COUNT(*) FROM sessions") == 1


@backends.postgres_only
def test_on_postgresql_the_generated_key_is_kept_in_the_database_and_no_secret_on_disk(
        tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo", STUDIO_SECRET_KEY="")
    try:
        sign_in(server.url).close()
    finally:
        server.stop()
    assert [file.name for file in tmp_path.iterdir()] == [server.log_path.name]
    [(key,)] = rows(db_path, "SELECT key FROM signing_keys")
    assert len(key) >= 60 and key not in server.log()
    assert scalar(db_path, "SELECT COUNT(*) FROM sessions") == 1


@backends.sqlite_only
def test_an_existing_world_readable_database_is_tightened(tmp_path):
    from studio.store.sqlite import prepare

    db_path = tmp_path / "studio.db"
    db_path.touch(mode=0o644)
    db_path.chmod(0o644)
    prepare(db_path)
    assert mode(db_path) == 0o600
    assert scalar(db_path, "SELECT COUNT(*) FROM actors") == 0


@backends.sqlite_only
def test_a_readable_key_file_stops_the_start_saying_how_to_fix_it(tmp_path):
    db_path = tmp_path / "studio.db"
    key = tmp_path / "studio.db.secret"
    key.write_text("k" * 64)
    key.chmod(0o644)
    with pytest.raises(SystemExit, match=f"chmod 600 {key}"):
        signing_key(Settings(db_path=db_path))
    env = {**studio_env(db_path), "STUDIO_SECRET_KEY": ""}
    started = subprocess.run(
        [sys.executable, "-m", "studio.ops.cli", "serve", "--port", "1"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert f"chmod 600 {key}" in started.stderr
    assert not db_path.exists()  # refused before touching the database
    key.chmod(0o600)
    assert signing_key(Settings(db_path=db_path)) == "k" * 64


def test_a_stale_draft_key_is_removed_and_a_whole_key_made(tmp_path):
    db_path = tmp_path / "studio.db"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    draft = tmp_path / f"studio.db.secret.{dead}.draft"
    draft.write_text("half")
    key = signing_key(Settings(db_path=db_path))
    assert len(key) >= 60 and not draft.exists()
    assert mode(tmp_path / "studio.db.secret") == 0o600
    assert signing_key(Settings(db_path=db_path)) == key


def test_the_key_is_on_disk_before_it_is_linked_into_place(tmp_path, monkeypatch):
    """A crash right after the key appears must not leave a studio with a torn or empty key:
    its bytes are synced in the draft before the draft is linked under the key's name."""
    from studio.store import keys

    said: list[tuple[str, object]] = []
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd: int) -> None:
        said.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def link(source: str | Path, target: str | Path) -> None:
        said.append(("link", str(source)))
        real_link(source, target)

    monkeypatch.setattr(keys.os, "fsync", fsync)
    monkeypatch.setattr(keys.os, "link", link)
    key = signing_key(Settings(db_path=tmp_path / "studio.db"))
    draft = next(name for step, name in said if step == "link")
    assert said.index(("fsync", draft)) < said.index(("link", draft)), said
    assert (tmp_path / "studio.db.secret").read_text().strip() == key


async def test_sign_in_cookie_lives_as_long_as_the_session(settings):
    from tests.conftest import running

    async with running(settings.with_changes(session_max_seconds=3600.0)) as studio:
        reply = await studio.client().post("/login",
                                           json={"email": ADA, "password": "studio-demo"})
        assert reply.status_code == 200
        assert "max-age=3600" in reply.headers["set-cookie"].lower()

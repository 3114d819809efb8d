"""`studio backup`, `check` and `audit` on PostgreSQL: pg_dump of one snapshot, restored with
pg_restore into a fresh database as the README says, connecting with what the URL names and no
PG* variable at all."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg.conninfo
import pytest

from studio.accounts.auth import SESSION_COOKIE
from studio.store.migrations.postgres import MIGRATIONS
from studio.store.postgres import connect, prepare
from tests import backends
from tests.conftest import ADA, BEN, ROOT, rows, sign_in, start_server, studio_command
from tests.test_attachments import DEMO_SHA256, png
from tests.test_backup import back_up_under_load

pytestmark = pytest.mark.skipif(not backends.ON_POSTGRES,
                                reason="PostgreSQL's own backup; SQLite's is tests/test_backup.py")


def spelled_out(url: str) -> str:
    """The URL with its host, port, user and password written in it (from the cluster's PG*
    settings, which the studio's child processes will not see)."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    user, password = os.environ["PGUSER"], os.environ.get("PGPASSWORD", "")
    host, port = os.environ.get("PGHOST", "localhost"), os.environ.get("PGPORT", "5432")
    return f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@{host}:{port}/{name}"


def without_pg(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if not key.startswith("PG")}


def studio_alone(url: str, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """`studio ARGS --db URL` with no PG* variable set: only the URL names the database."""
    env = without_pg({key: value for key, value in os.environ.items()
                      if not key.startswith("STUDIO_")})
    env.update({"PYTHONUNBUFFERED": "1", **settings})
    return subprocess.run([sys.executable, "-m", "studio.ops.cli", *args, "--db", url], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def pg_restore(dump: Path, url: str) -> subprocess.CompletedProcess[str]:
    """The README's restore: pg_restore into a fresh, empty database, the password in
    PGPASSWORD rather than on the command line."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    env = {**without_pg(dict(os.environ)), "PGPASSWORD": info.pop("password")}
    return subprocess.run(["pg_restore", "--no-owner", "--exit-on-error",
                           f"--dbname={psycopg.conninfo.make_conninfo(**info)}", str(dump)],
                          env=env, capture_output=True, text=True, timeout=300)


def every_row(url: str) -> dict[str, list[str]]:
    db = connect(url)
    try:
        return {name: sorted(map(repr, db.execute(f"SELECT * FROM {name}").fetchall()))
                for name in backends.tables(db)}
    finally:
        db.close()


def served(url: str, cookie: str, attachment_id: str) -> bytes:
    with closing(httpx.Client(base_url=url, timeout=30, cookies={SESSION_COOKIE: cookie},
                              headers={"Accept": "application/json"})) as client:
        reply = client.get(f"/attachments/{attachment_id}")
        assert reply.status_code == 200, reply.text
        return reply.content


def test_a_backup_restored_with_pg_restore_has_the_same_rows_and_downloads_the_same_bytes(
        tmp_path):
    live = tmp_path / "live.db"
    server = start_server(live, "--demo", STUDIO_SECRET_KEY="")  # the key: kept in the database
    receipts = {"small": png(5), "large": b"%PDF-1.4\n" + os.urandom(700_000)}  # 3 chunks
    try:
        client = sign_in(server.url)
        cookie = client.cookies[SESSION_COOKIE]
        draft = next(i for i in client.get("/invoices").json() if i["status"] == "draft")
        made = {}
        for name, content in receipts.items():
            reply = client.post(f"/invoices/{draft['id']}/attachments",
                                data={"client_key": name}, files={"file": (name, content)})
            assert reply.status_code == 201, reply.text
            made[name] = reply.json()["attachment_id"]
        client.close()
    finally:
        server.stop()
    url = backends.database_url(live)
    assert url is not None

    copied = studio_alone(spelled_out(url), "backup", str(tmp_path / "backup"))
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert os.environ["PGPASSWORD"] not in copied.stdout + copied.stderr
    assert "archive: ok" in copied.stdout
    assert "key file: none; the key is kept in the database" in copied.stdout
    assert "attachments: in the database" in copied.stdout
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    backup = tmp_path / "backup"
    assert [p.name for p in backup.iterdir()] == [f"{name}.dump"]
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700
    assert stat.S_IMODE((backup / f"{name}.dump").stat().st_mode) == 0o600

    fresh = backends.create_database()
    restored = pg_restore(backup / f"{name}.dump", spelled_out(fresh))
    assert restored.returncode == 0, restored.stderr
    assert every_row(fresh) == every_row(url)
    assert rows(live, "SELECT COUNT(*) FROM stored_chunks JOIN stored_files ON id = file_id"
                      " WHERE sha256 NOT IN (?, ?)", *sorted(DEMO_SHA256))[0][0] == 4

    for command in ("check", "audit"):
        ran = studio_alone(spelled_out(fresh), command)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    checked = studio_alone(spelled_out(fresh), "check").stdout
    stored = 2 + len(DEMO_SHA256)  # the two uploads and the demo's receipts
    assert f"integrity: ok ({stored} files stored in the database, each whole" in checked
    assert "audit: ok" in checked and \
        f"files: ok ({stored} files named by rows, {stored} in the database" in checked

    # Served from the restored database: the old cookie signs in (sessions and the key came
    # along) and each attachment downloads the bytes that were uploaded.
    server = start_server(tmp_path / "restored.db", STUDIO_DATABASE_URL=fresh,
                          STUDIO_SECRET_KEY="")
    try:
        for name, content in receipts.items():
            assert served(server.url, cookie, made[name]) == content, name
    finally:
        server.stop()


def test_a_backup_under_load_restores_every_write_acknowledged_before_it(tmp_path):
    live = tmp_path / "live.db"
    url = backends.database_url(live)
    assert url is not None
    load = back_up_under_load(live, lambda: studio_alone(
        spelled_out(url), "backup", str(tmp_path / "backup")))
    assert load.copied.returncode == 0, load.copied.stdout + load.copied.stderr
    assert load.statuses == {201}, sorted(load.statuses)
    assert load.numbered, "invoices were issued before the backup began"

    fresh = backends.create_database()
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    restored = pg_restore(tmp_path / "backup" / f"{name}.dump", spelled_out(fresh))
    assert restored.returncode == 0, restored.stderr
    db = connect(fresh)
    try:
        kept = {row[0] for row in db.execute("SELECT id FROM leases").fetchall()}
        numbers = dict(db.execute("SELECT id, number FROM invoices").fetchall())
    finally:
        db.close()
    assert {lease_id for _, lease_id in load.before} <= kept
    for invoice, number in load.numbered:  # every acknowledged number, as it was answered
        assert numbers[invoice] == number
    assert len(kept) < load.acknowledged  # the copy is one moment, not the end of the load
    checked = studio_alone(spelled_out(fresh), "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    server = start_server(tmp_path / "restored.db", STUDIO_DATABASE_URL=fresh,
                          STUDIO_SECRET_KEY="")
    try:
        assert served(server.url, load.cookies[ADA], load.receipt["attachment_id"]) == png(3)
        with closing(httpx.Client(base_url=server.url, timeout=30,
                                  cookies={SESSION_COOKIE: load.cookies[BEN]},
                                  headers={"Accept": "application/json"})) as client:
            assert client.get("/invoices").status_code == 200
    finally:
        server.stop()


def test_a_backup_takes_the_shared_folder_studio_files_names(tmp_path):
    live = tmp_path / "live.db"
    folder = tmp_path / "shared"
    server = start_server(live, "--demo", STUDIO_FILES=str(folder))
    try:
        client = sign_in(server.url)
        draft = next(i for i in client.get("/invoices").json() if i["status"] == "draft")
        reply = client.post(f"/invoices/{draft['id']}/attachments",
                            data={"client_key": "k"}, files={"file": ("r.png", png(9))})
        assert reply.status_code == 201, reply.text
        client.close()
    finally:
        server.stop()
    url = backends.database_url(live)
    assert url is not None
    assert rows(live, "SELECT COUNT(*) FROM stored_files")[0][0] == 0  # the bytes: a file
    copied = studio_alone(spelled_out(url), "backup", str(tmp_path / "backup"),
                          STUDIO_FILES=str(folder))
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert f"attachments: {tmp_path / 'backup' / 'files'}" in copied.stdout
    kept = [p for p in (tmp_path / "backup" / "files").rglob("*")
            if p.is_file() and p.name not in DEMO_SHA256]  # beside the demo's receipts
    assert [p.read_bytes() for p in kept] == [png(9)]
    checked = studio_alone(spelled_out(url), "check", STUDIO_FILES=str(folder))
    assert checked.returncode == 0 and f"{1 + len(DEMO_SHA256)} in {folder}" \
        in checked.stdout, checked.stdout


def test_check_audit_and_backup_refuse_a_newer_schema_and_touch_nothing(tmp_path):
    path = tmp_path / "newer.db"
    url = backends.database_url(path)
    assert url is not None
    prepare(url)
    newer = len(MIGRATIONS) + 5
    db = connect(url)
    try:
        db.execute("INSERT INTO schema_version VALUES (?, now())", (newer,))
        before = every_row(url)
    finally:
        db.close()
    for command in (["check"], ["audit"], ["backup", str(tmp_path / "copy")]):
        ran = studio_command(path, *command)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        assert f"schema version {newer}" in ran.stderr, (command, ran.stderr)
        assert f"versions up to {len(MIGRATIONS)}" in ran.stderr, (command, ran.stderr)
        assert "ok" not in ran.stdout.split(), (command, ran.stdout)
        assert every_row(url) == before, command
        assert not (tmp_path / "copy").exists(), command


def test_an_unreachable_database_is_a_clear_message_and_no_backup_and_no_password(tmp_path):
    url = backends.database_url(tmp_path / "studio.db")
    assert url is not None
    wrong = spelled_out(url).replace(quote(os.environ.get("PGPASSWORD", ""), safe=""),
                                     "not-the-password-s3cr3t")
    for command in (["backup", str(tmp_path / "copy")], ["check"], ["audit"]):
        ran = studio_alone(wrong, *command)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        assert "cannot be reached" in ran.stderr, (command, ran.stderr)
        assert "s3cr3t" not in ran.stdout + ran.stderr, command
        assert "Traceback" not in ran.stderr, command
        assert not (tmp_path / "copy").exists(), command

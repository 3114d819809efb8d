"""Migrations: each one commits on its own; a database from a newer studio is never touched;
hosts starting together on an empty database make the schema once."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from studio.accounts.auth import add_actor
from studio.ops.demo import CREDIT_NOTES, INVOICES, OVERDUE
from studio.store.db import prepare_database
from studio.store.migrations import postgres as pg_schema
from studio.store.migrations import sqlite as store
from studio.store.migrations.sqlite import MIGRATIONS
from studio.store.sqlite import prepare
from studio.store.transactions import SchemaTooNew, after_commit, in_transaction
from tests import backends
from tests.conftest import (
    ADA,
    database_digest,
    execute,
    rows,
    scalar,
    sign_in,
    start_server,
    studio_command,
)


@backends.sqlite_only
def test_a_newer_schema_is_refused_and_the_file_is_unchanged_byte_for_byte(tmp_path):
    path = tmp_path / "studio.db"
    prepare(path)
    newer = len(MIGRATIONS) + 5
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {newer}")
    db.commit()
    db.close()  # the last connection closing folds the WAL in and removes -wal and -shm
    before = path.read_bytes()
    folder = sorted(p.name for p in tmp_path.iterdir())
    assert folder == ["studio.db"]

    with pytest.raises(SchemaTooNew) as refused:
        prepare(path)
    assert f"schema version {newer}" in str(refused.value)
    assert f"versions up to {len(MIGRATIONS)}" in str(refused.value)

    for command in (["serve", "--port", "1"], ["users", "list"], ["worker"]):
        ran = studio_command(path, *command)
        assert ran.returncode == 1, (command, ran.stderr)
        assert f"schema version {newer}" in ran.stderr, ran.stderr
        assert f"versions up to {len(MIGRATIONS)}" in ran.stderr

    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == folder  # no -wal, no -shm


@backends.sqlite_only
def test_each_migration_commits_in_its_own_transaction(tmp_path, monkeypatch):
    """A migration that fails leaves the ones before it applied, and none of itself."""
    path = tmp_path / "studio.db"
    broken = [*MIGRATIONS, "CREATE TABLE half_made (id INTEGER);\nSELECT * FROM no_such_table;\n"]
    monkeypatch.setattr(store, "MIGRATIONS", broken)
    with pytest.raises(sqlite3.OperationalError):
        prepare(path)
    assert scalar(path, "PRAGMA user_version") == len(MIGRATIONS)
    assert scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'half_made'") == 0
    assert scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'actors'") == 1


def test_what_follows_a_commit_runs_after_it_and_never_after_a_rollback(tmp_path):
    """A counter or a log line of work done must only follow work that is on disk."""
    path = tmp_path / "studio.db"
    prepare_database(backends.settings(path))
    writer = backends.connect(path)
    seen_from_outside: list[int] = []

    def count_profiles() -> None:
        seen_from_outside.append(scalar(path, "SELECT count(*) FROM profiles"))

    def save(db: Any, fail: bool) -> None:
        actor_id = add_actor(db, f"{'fail' if fail else 'ok'}@example.com", "x")
        db.execute("INSERT INTO profiles (actor_id, name, address, vat_id, updated_at)"
                   " VALUES (?, 'Ada', '', '', 0)", (actor_id,))
        after_commit(count_profiles)
        if fail:
            raise RuntimeError("refused after the write")

    with pytest.raises(RuntimeError):
        in_transaction(writer, save, True)
    assert seen_from_outside == []  # rolled back: nothing followed
    in_transaction(writer, save, False)
    assert seen_from_outside == [1]  # ran once, and another connection already saw the row
    after_commit(count_profiles)  # outside a transaction: at once
    assert seen_from_outside == [1, 1]

    def save_then_fail_to_count(db: Any) -> str:
        after_commit(lambda: 1 / 0)
        after_commit(count_profiles)
        db.execute("UPDATE profiles SET name = 'Ada Again'")
        return "saved"

    # A call after the commit that fails is logged; the committed write still answers.
    assert in_transaction(writer, save_then_fail_to_count) == "saved"
    assert seen_from_outside == [1, 1, 1]
    writer.close()


@backends.sqlite_only
def test_check_audit_and_backup_refuse_a_newer_schema_and_touch_nothing(tmp_path):
    path = tmp_path / "studio.db"
    prepare(path)
    newer = len(MIGRATIONS) + 5
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {newer}")
    db.commit()
    db.close()
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    folder = sorted(p.name for p in tmp_path.iterdir())
    assert folder == ["studio.db"]

    for command in (["check"], ["audit"], ["backup", str(tmp_path / "copy")]):
        ran = studio_command(path, *command)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        assert f"schema version {newer}" in ran.stderr, (command, ran.stderr)
        assert f"versions up to {len(MIGRATIONS)}" in ran.stderr, (command, ran.stderr)
        assert "ok" not in ran.stdout.split(), (command, ran.stdout)
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before, command
        assert sorted(p.name for p in tmp_path.iterdir()) == folder, command  # no -wal, -shm, copy


# --- PostgreSQL: the schema version in a table, migrations under an advisory lock -------------


def newer_postgresql_database(path: Path) -> tuple[int, str]:
    """A database migrated by this studio, then marked as a newer one's; and everything in it,
    tables and columns included, to show later that nothing changed."""
    prepare_database(backends.settings(path))
    newer = len(pg_schema.MIGRATIONS) + 5
    execute(path, "INSERT INTO schema_version (version, applied_at) VALUES (?, now())", newer)
    return newer, everything_in(path)


def everything_in(path: Path) -> str:
    columns = rows(path, "SELECT table_name, column_name, data_type FROM"
                         " information_schema.columns WHERE table_schema = 'public'"
                         " ORDER BY table_name, column_name")
    triggers = rows(path, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
    return f"{[tuple(c) for c in columns]}\n{[t[0] for t in triggers]}\n{database_digest(path)}"


@backends.postgres_only
def test_a_postgresql_database_of_a_newer_schema_is_refused_untouched_naming_both_versions(
        tmp_path):
    path = tmp_path / "studio.db"
    newer, before = newer_postgresql_database(path)
    known = len(pg_schema.MIGRATIONS)

    with pytest.raises(SchemaTooNew) as refused:
        prepare_database(backends.settings(path))
    assert f"schema version {newer}" in str(refused.value)
    assert f"versions up to {known}" in str(refused.value)

    for command in (["serve", "--port", "1"], ["users", "list"], ["worker"]):
        ran = studio_command(path, *command)
        assert ran.returncode == 1, (command, ran.stderr)
        assert f"schema version {newer}" in ran.stderr, ran.stderr
        assert f"versions up to {known}" in ran.stderr
        assert "Traceback" not in ran.stderr
    assert everything_in(path) == before
    assert list(tmp_path.iterdir()) == []  # and nothing made beside it


@backends.postgres_only
def test_check_audit_and_backup_refuse_a_newer_postgresql_schema_and_touch_nothing(tmp_path):
    path = tmp_path / "studio.db"
    newer, before = newer_postgresql_database(path)
    known = len(pg_schema.MIGRATIONS)

    for command in (["check"], ["audit"], ["backup", str(tmp_path / "copy")]):
        ran = studio_command(path, *command)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        assert f"schema version {newer}" in ran.stderr, (command, ran.stderr)
        assert f"versions up to {known}" in ran.stderr, (command, ran.stderr)
        assert "ok" not in ran.stdout.split(), (command, ran.stdout)
        assert everything_in(path) == before, command
        assert list(tmp_path.iterdir()) == [], command  # no copy


@backends.postgres_only
def test_each_postgresql_migration_commits_in_its_own_transaction(tmp_path, monkeypatch):
    """A migration that fails leaves the ones before it applied, and none of itself."""
    import psycopg

    path = tmp_path / "studio.db"
    broken = [*pg_schema.MIGRATIONS,
              "CREATE TABLE half_made (id INTEGER);\nSELECT * FROM no_such_table;\n"]
    monkeypatch.setattr(pg_schema, "MIGRATIONS", broken)
    with pytest.raises(psycopg.errors.UndefinedTable):
        prepare_database(backends.settings(path))
    assert scalar(path, "SELECT MAX(version) FROM schema_version") == len(broken) - 1
    assert scalar(path, "SELECT to_regclass('half_made') IS NULL") is True
    assert scalar(path, "SELECT to_regclass('actors') IS NOT NULL") is True


@backends.postgres_only
def test_two_hosts_starting_together_on_an_empty_database_make_the_schema_and_demo_once(
        tmp_path):
    """Both wait at the migration lock, held here until both are waiting, so they truly start
    together; both come up, the schema is made once and `--demo` seeds the demo once."""
    path = tmp_path / "studio.db"
    from studio.store.postgres import MIGRATION_LOCK

    gate = backends.connect(path)
    try:
        gate.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
        with ThreadPoolExecutor(2) as pool:
            starting = [pool.submit(start_server, path, "--demo", port=None) for _ in range(2)]
            deadline = time.monotonic() + 30
            while gate.execute("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory'"
                               " AND NOT granted").fetchone()[0] < 2:
                assert time.monotonic() < deadline, "the two hosts never met at the lock"
                assert not any(start.done() for start in starting), "a host did not wait"
                time.sleep(0.05)
            gate.execute(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
            servers = [start.result() for start in starting]
    finally:
        gate.close()
    try:
        for server in servers:
            sign_in(server.url, ADA).close()
    finally:
        for server in servers:
            server.stop()
    assert [tuple(row) for row in rows(
        path, "SELECT version, COUNT(*) FROM schema_version GROUP BY version ORDER BY version")
    ] == [(version, 1) for version in range(1, len(pg_schema.MIGRATIONS) + 1)]
    assert scalar(path, "SELECT COUNT(*) FROM actors") == len(INVOICES)
    # `--demo` seeds the full demo: each account's invoices, one overdue, and credit notes.
    assert scalar(path, "SELECT COUNT(*) FROM invoices") == (
        sum(map(len, INVOICES.values())) + len(OVERDUE) + len(CREDIT_NOTES))
    issued = sum(made[-1] for made in INVOICES[ADA]) + (ADA in OVERDUE)
    assert scalar(path, "SELECT MAX(sequence) FROM invoices JOIN actors ON actors.id = owner_id"
                        " WHERE email = ?", ADA) == issued
    for server in servers:
        assert "Traceback" not in server.log()

"""Migrations: each one commits on its own; a file from a newer studio is never touched."""

from __future__ import annotations

import sqlite3

import pytest

from studio import db as store
from studio.auth import add_actor
from studio.db import MIGRATIONS, SchemaTooNew, after_commit, in_transaction, prepare
from tests.conftest import scalar, studio_command


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
    prepare(path)
    writer = sqlite3.connect(path, isolation_level=None)
    seen_from_outside: list[int] = []

    def count_profiles() -> None:
        other = sqlite3.connect(path)
        seen_from_outside.append(other.execute("SELECT count(*) FROM profiles").fetchone()[0])
        other.close()

    def save(db: sqlite3.Connection, fail: bool) -> None:
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

    def save_then_fail_to_count(db: sqlite3.Connection) -> str:
        after_commit(lambda: 1 / 0)
        after_commit(count_profiles)
        db.execute("UPDATE profiles SET name = 'Ada Again'")
        return "saved"

    # A call after the commit that fails is logged; the committed write still answers.
    assert in_transaction(writer, save_then_fail_to_count) == "saved"
    assert seen_from_outside == [1, 1, 1]
    writer.close()


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

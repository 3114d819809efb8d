"""A database of a newer schema is refused by every command that would serve or read it, and
nothing is made for it: no key file beside a SQLite file, no key written into PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio.store.db import prepare_database
from studio.store.migrations.sqlite import MIGRATIONS
from tests import backends
from tests.conftest import studio_command

NEWER = len(MIGRATIONS) + 5
COMMANDS = [["serve", "--port", "1"], ["check"], ["audit"], ["backup", "copy"]]


def _newer_database(path: Path) -> None:
    """A database as a newer studio leaves it, its key not yet made."""
    prepare_database(backends.settings(path))
    db = backends.connect(path)
    try:
        if backends.ON_POSTGRES:
            db.execute("INSERT INTO schema_version VALUES (?, now())", (NEWER,))
        else:
            db.execute(f"PRAGMA user_version = {NEWER}")
    finally:
        db.close()


def _everything(path: Path) -> object:
    """What a command could have changed: the folder and the file, or every row."""
    if not backends.ON_POSTGRES:
        return sorted(p.name for p in path.parent.iterdir()), path.read_bytes()
    db = backends.connect(path)
    try:
        return {table: sorted(map(tuple, db.execute(f"SELECT * FROM {table}").fetchall()))
                for table in backends.tables(db)}
    finally:
        db.close()


@pytest.mark.parametrize("command", COMMANDS, ids=[command[0] for command in COMMANDS])
def test_a_newer_schema_makes_no_signing_key_and_nothing_beside_the_database(
        tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "studio.db"
    _newer_database(path)
    before = _everything(path)
    if not backends.ON_POSTGRES:
        assert before[0] == ["studio.db"]  # type: ignore[index]
    # No STUDIO_SECRET_KEY: the key is the one the studio would make for this database.
    ran = studio_command(path, *command, STUDIO_SECRET_KEY="")
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert f"schema version {NEWER}" in ran.stderr, ran.stderr
    assert "left untouched" in ran.stderr or command[0] != "serve", ran.stderr
    assert _everything(path) == before
    assert not (tmp_path / "copy").exists() and not (folder / "copy").exists()

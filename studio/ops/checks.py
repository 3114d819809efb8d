"""`studio check`: one list of checks over a studio's database and its attachment bytes.

Each check reads only (SQLite's file is opened read-only, PostgreSQL's transactions are
read-only, so a running studio may keep serving) and returns a Finding. To add one, write a
function taking a `Target` and append it to the list of its database (CHECKS).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studio.config import Settings
from studio.store.db import is_postgres, read_only_to, refuse_if_newer_database
from studio.store.stores import DatabaseStore, Store, store_for


@dataclass(frozen=True)
class Target:
    """A studio as its settings name it: its database, and where its attachment bytes are."""

    settings: Settings

    @classmethod
    def file(cls, db_path: Path, files_dir: Path | None = None) -> Target:
        """A SQLite file, its attachments in `files_dir` (by default `<db>.files/`)."""
        return cls(Settings(db_path=db_path, files_dir=files_dir or files_dir_for(db_path)))

    def connect(self) -> Any:
        return read_only_to(self.settings)

    def store(self) -> Store:
        return store_for(self.settings)


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{self.name}: {'ok' if self.ok else 'FAILED'} ({self.detail})"


def files_dir_for(db_path: Path) -> Path:
    """The attachment folder of a database: `<db>.files/` beside it."""
    return db_path.with_name(db_path.name + ".files")


def integrity(target: Target) -> Finding:
    """SQLite's own integrity check, and every foreign key pointing at a row that exists."""
    db = target.connect()
    try:
        problems = [row[0] for row in db.execute("PRAGMA integrity_check")]
        dangling = db.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        db.close()
    if problems != ["ok"]:
        return Finding("integrity", False, "; ".join(problems[:10]))
    if dangling:
        tables = sorted({row[0] for row in dangling})
        return Finding("integrity", False,
                       f"{len(dangling)} rows point at missing rows in {', '.join(tables)}")
    return Finding("integrity", True, "integrity_check ok, no dangling foreign keys")


def stored_bytes(target: Target) -> Finding:
    """PostgreSQL keeps its own pages and foreign keys whole; what is the studio's to check is
    the bytes it keeps in rows: every stored file's chunks, in order, are its size and hash to
    its SHA-256. One chunk is read at a time."""
    store = DatabaseStore()
    db = target.connect()
    try:
        db.execute("BEGIN")
        held = store.held(db)
        damaged = store.damaged(db, held)
        arriving = db.execute("SELECT COUNT(*) FROM stored_files WHERE sha256 IS NULL"
                              ).fetchone()[0]
    finally:
        db.close()
    detail = f"{len(held)} files stored in the database"
    if arriving:
        detail += f", {arriving} uploads not bound (yet)"
    if damaged:
        return Finding("integrity", False, f"{detail}; {len(damaged)} no longer hash to their"
                                           f" SHA-256: {', '.join(damaged[:5])}")
    return Finding("integrity", True, f"{detail}, each whole; foreign keys kept by PostgreSQL")


def files_vs_rows(target: Target) -> Finding:
    """Every file an attachment names is in its owner's keeping with the bytes its name
    promises; files no row names are reported (a crash between saving and binding leaves
    them; the sweep removes them) but do not fail the check."""
    from studio.billing.attachments import named_files

    store = target.store()
    db = target.connect()
    try:
        db.execute("BEGIN")
        wanted = named_files(db)
        stored = store.held(db)
        damaged = sorted(store.damaged(db, wanted & stored))
    finally:
        db.close()
    if not wanted and not stored:
        return Finding("files", True, "no stored files and no rows naming any")
    missing = sorted(sha for owner, sha in wanted - stored)
    orphans = len(stored - wanted)
    detail = f"{len(wanted)} files named by rows, {len(stored)} in {store.where()}"
    if orphans:
        detail += f", {orphans} not named by any row"
    if missing or damaged:
        detail += f"; missing: {', '.join(missing[:5]) or 'none'};" \
                  f" damaged: {', '.join(damaged[:5]) or 'none'}"
        return Finding("files", False, detail)
    return Finding("files", True, detail)


def books(target: Target) -> Finding:
    """`studio audit`: gapless series, issued invoices matching their frozen hash, credits
    within their invoice."""
    from studio.ops.audit import audit_database

    found = audit_database(target.settings)
    if found:
        return Finding("audit", False, "; ".join(found[:5]))
    return Finding("audit", True, "series gapless, issued invoices match their frozen hash,"
                   " credits within their invoice")


Check = Callable[[Target], Finding]
CHECKS: dict[str, list[Check]] = {
    "sqlite": [integrity, books, files_vs_rows],
    "postgresql": [stored_bytes, books, files_vs_rows],
}


def run_checks(target: Target) -> list[Finding]:
    """Every check of the target's database; one of a newer schema is refused (SchemaTooNew)
    before any check opens it."""
    refuse_if_newer_database(target.settings)
    findings = []
    for check in CHECKS["postgresql" if is_postgres(target.settings) else "sqlite"]:
        try:
            findings.append(check(target))
        except sqlite3.Error as error:
            findings.append(Finding(check.__name__, False, f"could not read: {error}"))
    return findings

"""`studio check`: one list of checks over a database file and its attachment folder.

Each check reads only (the file is opened read-only, so a running studio may keep serving)
and returns a Finding. To add one, write a function taking a `Target` and append it to
CHECKS.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from studio.db import read_only, refuse_if_newer


@dataclass(frozen=True)
class Target:
    db_path: Path
    files_dir: Path

    def connect(self) -> sqlite3.Connection:
        return read_only(self.db_path)


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


def files_vs_rows(target: Target) -> Finding:
    """Every file an attachment names is in its owner's folder with the bytes its name
    promises; files no row names are reported (a crash between saving and binding leaves
    them; the sweep removes them) but do not fail the check."""
    from studio.attachments import FileStore, named_files

    db = target.connect()
    try:
        wanted = named_files(db)
    finally:
        db.close()
    store = FileStore(target.files_dir)
    stored = {(path.parent.parent.name, path.name) for path in store.stored()}
    if not wanted and not stored:
        return Finding("files", True, "no stored files and no rows naming any")
    missing = sorted(sha for owner, sha in wanted - stored)
    damaged = sorted(sha for owner, sha in wanted & stored
                     if _sha256(store.path_of(owner, sha)) != sha)
    orphans = len(stored - wanted)
    detail = f"{len(wanted)} files named by rows, {len(stored)} in {target.files_dir}"
    if orphans:
        detail += f", {orphans} not named by any row"
    if missing or damaged:
        detail += f"; missing: {', '.join(missing[:5]) or 'none'};" \
                  f" damaged: {', '.join(damaged[:5]) or 'none'}"
        return Finding("files", False, detail)
    return Finding("files", True, detail)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def books(target: Target) -> Finding:
    """`studio audit`: gapless series, issued invoices matching their frozen hash, credits
    within their invoice."""
    from studio.audit import audit_file

    found = audit_file(target.db_path)
    if found:
        return Finding("audit", False, "; ".join(found[:5]))
    return Finding("audit", True, "series gapless, issued invoices match their frozen hash,"
                   " credits within their invoice")


CHECKS: list[Callable[[Target], Finding]] = [integrity, books, files_vs_rows]


def run_checks(target: Target) -> list[Finding]:
    """Every check; a file from a newer studio is refused (SchemaTooNew) before any opens it."""
    refuse_if_newer(target.db_path)
    findings = []
    for check in CHECKS:
        try:
            findings.append(check(target))
        except sqlite3.Error as error:
            findings.append(Finding(check.__name__, False, f"could not read: {error}"))
    return findings

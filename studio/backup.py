"""`studio backup DEST`: a consistent copy of a studio while it serves.

The database is copied with SQLite's online backup API inside one read transaction, so the
copy is the file as of one commit, however many processes are writing. Then the key file
and the attachment folder. Files are copied after the database: a row in the copy names a
file that was already in place when that row committed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from studio.checks import Finding, Target, files_dir_for, run_checks
from studio.db import read_only, refuse_if_newer, sync_path


class BackupError(Exception):
    """A backup that cannot be made, with the sentence that says why."""


@dataclass(frozen=True)
class Copied:
    db_path: Path
    key_file: Path | None
    files_dir: Path | None
    findings: list[Finding]


def backup(db_path: Path, dest: Path, files: Path | None = None) -> Copied:
    """Copy the database, its key file and its attachment folder into the folder `dest`
    (new or empty), under their own names, then check the copy. The attachments (`files`,
    by default `<db>.files/`) land in `<dest>/<db>.files/`, where the restored studio looks.
    A file from a newer studio is refused (SchemaTooNew) before anything is opened or made."""
    if not db_path.is_file():
        raise BackupError(f"There is no database at {db_path}; name it with --db or STUDIO_DB.")
    refuse_if_newer(db_path)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupError(f"{dest} already holds something; back up into a new or empty folder.")
    # The copy holds what the studio does (password hashes, every invoice): owner only, as
    # is every file SQLite makes beside it while it is written.
    previous = os.umask(0o077)
    try:
        dest.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy = dest / db_path.name
        draft = dest / f".{db_path.name}.partial"
        source = read_only(db_path)
        target = sqlite3.connect(draft)
        try:
            source.backup(target)  # all pages in one step: one read transaction, one snapshot
            # One self-contained file: the restored studio switches it back to WAL on opening.
            target.execute("PRAGMA journal_mode = DELETE")
        finally:
            target.close()
            source.close()
    finally:
        os.umask(previous)
    sync_path(draft)
    os.replace(draft, copy)

    key_file = db_path.with_name(db_path.name + ".secret")
    copied_key = None
    if key_file.is_file():
        copied_key = dest / key_file.name
        shutil.copy2(key_file, copied_key)
        os.chmod(copied_key, 0o600)
    files = files or files_dir_for(db_path)
    copied_files = None
    if files.is_dir():
        copied_files = files_dir_for(copy)
        shutil.copytree(files, copied_files)
    sync_path(dest)
    findings = run_checks(Target(copy, files_dir_for(copy)))
    return Copied(copy, copied_key, copied_files, findings)



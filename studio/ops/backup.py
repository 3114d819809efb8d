"""`studio backup DEST`: a consistent copy of a studio while it serves.

SQLite: the database is copied with SQLite's online backup API inside one read transaction,
so the copy is the file as of one commit, however many processes are writing. Then the key
file and the attachment folder.

PostgreSQL: `pg_dump --format=custom`, which reads every table in one snapshot, connecting
with what the database URL names and nothing else; then the attachment folder when
`STUDIO_FILES` names one (by default the bytes are in the database, and so in the dump).

Either way files are copied after the database: a row in the copy names a file that was
already in place when that row committed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg.conninfo

from studio.config import Settings
from studio.ops.checks import Finding, Target, files_dir_for, run_checks
from studio.store.db import is_postgres, refuse_if_newer_database
from studio.store.sqlite import read_only, refuse_if_newer
from studio.store.transactions import sync_path


class BackupError(Exception):
    """A backup that cannot be made, with the sentence that says why."""


@dataclass(frozen=True)
class Copied:
    db_path: Path
    key_file: Path | None
    files_dir: Path | None
    findings: list[Finding]


def backup(settings: Settings, dest: Path) -> Copied:
    """The database the settings name, and whatever it keeps outside itself, into the new or
    empty folder `dest`."""
    if is_postgres(settings):
        return dump(settings, dest)
    return backup_file(settings.db_path, dest, settings.files)


def _new_folder(dest: Path) -> None:
    """`dest`, new or empty, for its owner only: the copy holds what the studio does
    (password hashes, every invoice)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupError(f"{dest} already holds something; back up into a new or empty folder.")
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(dest, 0o700)


def backup_file(db_path: Path, dest: Path, files: Path | None = None) -> Copied:
    """Copy the database, its key file and its attachment folder into the folder `dest`
    (new or empty), under their own names, then check the copy. The attachments (`files`,
    by default `<db>.files/`) land in `<dest>/<db>.files/`, where the restored studio looks.
    A file from a newer studio is refused (SchemaTooNew) before anything is opened or made."""
    if not db_path.is_file():
        raise BackupError(f"There is no database at {db_path}; name it with --db or STUDIO_DB.")
    refuse_if_newer(db_path)
    # Owner only, as is every file SQLite makes beside the copy while it is written.
    previous = os.umask(0o077)
    try:
        _new_folder(dest)
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
    findings = run_checks(Target.file(copy, files_dir_for(copy)))
    return Copied(copy, copied_key, copied_files, findings)


# --- PostgreSQL --------------------------------------------------------------------------------


def dump(settings: Settings, dest: Path) -> Copied:
    """`pg_dump --format=custom` of the database into `<dest>/<name>.dump`, checked by
    `pg_restore --list`; the folder `STUDIO_FILES` names, if any, into `<dest>/files/`. The
    cookie key, when it is not STUDIO_SECRET_KEY, is a row of the dump."""
    refuse_if_newer_database(settings)  # and unreachable: DatabaseUnavailable, nothing made
    info = psycopg.conninfo.conninfo_to_dict(settings.database_url)
    name = info.get("dbname") or "studio"
    previous = os.umask(0o077)
    try:
        _new_folder(dest)
        copy, draft = dest / f"{name}.dump", dest / f".{name}.dump.partial"
        try:
            _run(["pg_dump", "--format=custom", "--no-password", f"--file={draft}",
                  f"--dbname={_without_password(info)}"], info, "pg_dump")
            entries = _run(["pg_restore", "--list", str(draft)], info, "pg_restore")
        except BaseException:
            draft.unlink(missing_ok=True)
            raise
    finally:
        os.umask(previous)
    entries = [line for line in entries.splitlines() if line and not line.startswith(";")]
    found = [Finding("archive", True, f"pg_restore reads {len(entries)} entries of "
                                      f"{copy.name}, one snapshot of the database")]
    sync_path(draft)
    os.replace(draft, copy)
    copied_files = None
    if settings.files_dir is not None and settings.files_dir.is_dir():
        copied_files = dest / "files"
        shutil.copytree(settings.files_dir, copied_files)
    sync_path(dest)
    return Copied(copy, None, copied_files, found)


def _without_password(info: dict[str, str]) -> str:
    """The connection string without its password, which goes by the environment instead,
    where no other user's `ps` shows it."""
    return psycopg.conninfo.make_conninfo(
        **{key: value for key, value in info.items() if key != "password"})


def child_environment(info: dict[str, str]) -> dict[str, str]:
    """The caller's environment without any PG* setting (the URL alone names the database),
    and the URL's password, if it has one."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    if info.get("password"):
        env["PGPASSWORD"] = info["password"]
    return env


def _run(command: list[str], info: dict[str, str], tool: str) -> str:
    try:
        ran = subprocess.run(command, env=child_environment(info), capture_output=True,
                             text=True, timeout=24 * 3600)
    except FileNotFoundError:
        raise BackupError(f"{tool} is not installed: install PostgreSQL's client programs "
                          "(Debian: postgresql-client) of the server's version or newer."
                          ) from None
    if ran.returncode != 0:
        reason = ran.stderr.strip().replace(info.get("password") or "\0", "<password>")
        raise BackupError(f"{tool} failed, nothing was kept: {reason}")
    return ran.stdout

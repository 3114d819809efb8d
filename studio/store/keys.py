"""The key that signs session cookies: the configured one, or one made once and kept beside
the SQLite file (on PostgreSQL, in the database, for every host)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from studio.config import Settings
from studio.store.sqlite import refuse_if_newer
from studio.store.transactions import sync_path


def signing_key(settings: Settings) -> str:
    """The cookie signing key: the configured one, else one generated once beside the database,
    readable by its owner only (on PostgreSQL, kept in the database for every host). A database
    of a newer schema is refused (SchemaTooNew) before its key is made: nothing new is left
    beside a database the studio refuses to touch."""
    if settings.secret_key:
        return settings.secret_key
    if settings.database_url:
        from studio.store.postgres import signing_key_in_database

        return signing_key_in_database(settings.database_url, secrets.token_urlsafe(48))
    path = settings.db_path.with_name(settings.db_path.name + ".secret")
    _remove_stale_drafts(path)
    if not path.exists():
        refuse_if_newer(settings.db_path)
        # Written aside, synced, then linked: a second process starting at once, or a crash
        # right after, finds either no key or a whole one, never a torn one.
        draft = path.with_name(f"{path.name}.{os.getpid()}.draft")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(48))
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
            sync_path(path.parent)
        finally:
            draft.unlink(missing_ok=True)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SystemExit(
            f"The signing key {path} can be read by other users (mode {mode:o}); anyone who"
            f" reads it can forge sessions. Fix it with: chmod 600 {path}")
    return path.read_text().strip()


def _remove_stale_drafts(path: Path) -> None:
    """A draft left by a process that died before linking it is useless: remove it."""
    for draft in path.parent.glob(f"{path.name}.*.draft"):
        pid = draft.name[len(path.name) + 1:-len(".draft")]
        if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
            draft.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether a process of that id lives (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signing_keys(settings: Settings) -> list[str]:
    """Every accepted cookie key, newest first: STUDIO_SECRET_KEY may list several, comma
    separated, so an old key keeps its cookies valid until it is removed from the list."""
    keys = [key.strip() for key in signing_key(settings).split(",") if key.strip()]
    if not keys:
        raise SystemExit("STUDIO_SECRET_KEY names no key; give at least one.")
    return keys

"""Which database the suite runs on: SQLite files, or PostgreSQL when STUDIO_TEST_DATABASE is
`postgresql` (tests/run.sh runs the suite a second time that way, inside a throwaway cluster
made by pg_virtualenv, which exports PGHOST, PGUSER and PGPASSWORD).

Tests name their database by a file path, as they always have. On PostgreSQL each path is
given a database of its own the first time it is named: a copy of the seeded demo for the
in-process studio, an empty one for anything else. The helpers below read and write whichever
it is, with the SQL the studio's units use.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

ON_POSTGRES = os.environ.get("STUDIO_TEST_DATABASE", "sqlite") == "postgresql"
TEMPLATE = "studio_demo_template"
SCHEMA_TEMPLATE = "studio_schema_template"
# The advisory lock the processes of one run take while they make or look for a template.
TEMPLATE_LOCK = 7_105_310_001

# path -> its database URL, for the paths that stand for a PostgreSQL database
_urls: dict[Path, str] = {}
# The templates this run has seen made: each test copies one, and need not ask again.
_templates: set[str] = set()


def url_of(name: str) -> str:
    """A URL naming a database of the cluster the environment points at (PGHOST, ...)."""
    return f"postgresql:///{name}"


def _admin() -> Any:
    import psycopg

    return psycopg.connect(url_of("postgres"), autocommit=True)


def create_database(template: str | None = None) -> str:
    name = f"studio_{uuid.uuid4().hex[:16]}"
    with _admin() as admin:
        admin.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return url_of(name)


def _made_once(name: str, make: Any) -> None:
    """Make the template database `name` with `make(url)` unless this cluster has it already.

    Several pytest processes share the cluster (pytest-xdist workers), so the check and the
    making happen under an advisory lock on the admin connection: the first process makes it,
    the others wait and then find it. It is made under a temporary name and renamed when
    complete, so a template that exists under its own name is always whole."""
    if name in _templates:
        return
    with _admin() as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK,))
        try:
            if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                 (name,)).fetchone():
                building = f"{name}_building"
                admin.execute(f"DROP DATABASE IF EXISTS {building} WITH (FORCE)")
                admin.execute(f"CREATE DATABASE {building}")
                make(url_of(building))
                admin.execute(f"ALTER DATABASE {building} RENAME TO {name}")
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK,))
    _templates.add(name)


def quick_passwords(db: Any) -> None:
    """The demo accounts' passwords hashed again with argon2id at its lowest cost, in the
    template the in-process tests copy. Each of their sign-ins still runs the studio's own
    argon2 check, in a millisecond instead of a third of a CPU-second (a pass signs in some
    thousand times). The studio's own hashes keep argon2's default cost, which
    tests/test_signin.py checks; a studio process that seeds its own demo makes those."""
    from argon2 import PasswordHasher

    from studio.ops.demo import DEMO_PASSWORD

    quick = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    for (actor_id,) in db.execute("SELECT id FROM actors").fetchall():
        db.execute("UPDATE actors SET password_hash = ? WHERE id = ?",
                   (quick.hash(DEMO_PASSWORD), actor_id))


def seeded_template() -> None:
    """The demo database made once per run (argon2 is slow on purpose), to copy per test."""

    def make(url: str) -> None:
        from studio.ops.demo import seed_demo
        from studio.store.postgres import connect, prepare
        from studio.store.transactions import in_transaction

        prepare(url)
        db = connect(url)
        try:
            in_transaction(db, seed_demo)
            in_transaction(db, quick_passwords)
        finally:
            db.close()

    _made_once(TEMPLATE, make)


def use_migrated(path: Path) -> str:
    """`path` stands for a fresh database of the studio's schema and no rows, copied from one
    migrated once per run."""
    from studio.store.postgres import prepare

    _made_once(SCHEMA_TEMPLATE, prepare)
    _urls[path] = create_database(SCHEMA_TEMPLATE)
    return _urls[path]


def emptied(db: Any) -> None:
    """Every row the tests wrote to a database made by `use_migrated` removed, so it is again
    what a fresh copy is (identities restarted); the migrations' own record is kept. One
    TRUNCATE is far cheaper than a database copied and dropped: for a test that needs a fresh
    database hundreds of times, on one connection that keeps its caches warm. The schema's
    triggers that refuse to truncate issued invoices are the studio's promise, not the test's:
    they are set aside for this one transaction (the suite's cluster user is a superuser)."""
    names = ", ".join(name for name in tables(db) if name != "schema_version")
    db.execute("BEGIN")
    db.execute("SET LOCAL session_replication_role = replica")
    db.execute(f"TRUNCATE {names} RESTART IDENTITY")
    db.execute("COMMIT")


def use_seeded(path: Path) -> str:
    """`path` stands for a fresh copy of the seeded demo database."""
    seeded_template()
    _urls[path] = create_database(TEMPLATE)
    return _urls[path]


def database_url(path: Path) -> str | None:
    """The PostgreSQL database `path` stands for, made empty the first time; None on SQLite."""
    if not ON_POSTGRES:
        return None
    if path not in _urls:
        _urls[path] = create_database()
    return _urls[path]


def drop(path: Path) -> None:
    """Remove the PostgreSQL database `path` stands for, once nothing uses it any more."""
    url = _urls.pop(path, None)
    if url is not None:
        with _admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")


def connect(path: Path) -> Any:
    """A connection to the database `path` names, speaking the units' SQL."""
    url = database_url(path)
    if url is None:
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        return db
    from studio.store.postgres import connect as pg_connect

    return pg_connect(url)


def settings(path: Path, **changes: Any) -> Any:
    """The studio's settings for the database `path` names, on either backend."""
    from studio.config import Settings

    return Settings(db_path=path, database_url=database_url(path) or "", **changes)


class ChangeWatch:
    """Tells whether anything was committed to the database since the last look, as a second
    process would see it. SQLite counts commits in `PRAGMA data_version`. PostgreSQL has no
    such counter; every committed insert or update gives a row version of a new transaction
    (`xmin`) and every committed delete lowers a count, so each table's (row count, newest
    xmin) moves with every commit that changed it, and with nothing else: not with reads,
    and not with a write that rolled back.

    Counting every table is a scan of each, so on PostgreSQL it is done only when a write may
    have happened: a transaction that writes is given a transaction id first, and the next id
    to give (the snapshot's xmax) stays where it was while nothing wrote."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        self._counted_at: Any = None  # the next transaction id when the tables were counted
        self._counted: Any = None

    def version(self) -> Any:
        if isinstance(self.db, sqlite3.Connection):
            return self.db.execute("PRAGMA data_version").fetchone()[0]
        next_id = self.db.execute(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()[0]
        if next_id != self._counted_at:
            query = " UNION ALL ".join(
                f"SELECT '{name}', COUNT(*), MAX(xmin::text::bigint) FROM {name}"
                for name in tables(self.db))
            self._counted = self.db.execute(query).fetchall()
            self._counted_at = next_id
        return self._counted

    def close(self) -> None:
        self.db.close()


def trace(db: Any, seen: Any) -> None:
    """Call `seen(sql)` with every statement the connection is given, BEGIN included."""
    if isinstance(db, sqlite3.Connection):
        db.set_trace_callback(seen)
        return
    execute, executemany = db.execute, db.executemany

    def traced_execute(sql: str, *args: Any) -> Any:
        seen(sql)
        return execute(sql, *args)

    def traced_executemany(sql: str, *args: Any) -> Any:
        seen(sql)
        return executemany(sql, *args)

    db.execute, db.executemany = traced_execute, traced_executemany


def tables(db: Any) -> list[str]:
    if isinstance(db, sqlite3.Connection):
        query = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    else:
        query = ("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                 " ORDER BY tablename")
    return [row[0] for row in db.execute(query).fetchall()]


# For tests that name no database at all (pure functions, a wheel served on SQLite in an empty
# folder): the PostgreSQL pass would run the very same thing again.
first_pass_only = pytest.mark.skipif(
    ON_POSTGRES, reason="touches no database: the first pass ran the very same thing")
sqlite_only = pytest.mark.skipif(
    ON_POSTGRES, reason="about the SQLite file itself; PostgreSQL has its own test")
postgres_only = pytest.mark.skipif(
    not ON_POSTGRES, reason="about PostgreSQL itself; SQLite has its own test")

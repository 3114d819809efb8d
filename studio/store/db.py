"""The Database interface, and which driver serves it: SQLite (`sqlite.py`) or PostgreSQL
(`postgres.py`), as the settings name it. The PostgreSQL driver is imported only when asked
for, so a studio on SQLite never loads psycopg. Everything above the store speaks to this
interface and to the units of `transactions.py`; nothing above it knows which database."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from studio.store import sqlite
from studio.store.migrations import sqlite as sqlite_schema

if TYPE_CHECKING:
    from studio.config import Settings

T = TypeVar("T")


class Database(Protocol):
    """What the studio asks of its database, whichever it is."""

    async def open(self) -> Database: ...

    async def close(self) -> None: ...

    async def write(self, unit: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one write unit as one transaction."""
        ...

    async def read(self, unit: Callable[..., T], *args: Any) -> T:
        """Run one read-only unit as one snapshot."""
        ...

    async def on_writer(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

    async def version(self) -> Any:
        """A value that changes whenever anyone commits."""
        ...


def is_postgres(settings: Settings) -> bool:
    return bool(settings.database_url)


def open_database(settings: Settings) -> Database:
    """The studio's database, SQLite or PostgreSQL as the settings name it (not yet open)."""
    if is_postgres(settings):
        from studio.store import postgres

        return postgres.PgDatabase(settings.database_url, settings.db_pool_size)
    return sqlite.SqliteDatabase(settings.db_path)


def prepare_database(settings: Settings) -> None:
    """Migrate the database the settings name, refusing one of a newer schema untouched."""
    if is_postgres(settings):
        from studio.store import postgres

        postgres.prepare(settings.database_url)
    else:
        sqlite.prepare(settings.db_path)


def connect_to(settings: Settings) -> Any:
    """A migrated connection for a one-shot command (`studio users`, `studio import`)."""
    if is_postgres(settings):
        from studio.store import postgres

        postgres.prepare(settings.database_url)
        return postgres.connect(settings.database_url)
    return sqlite.connect(settings.db_path)


def read_only_to(settings: Settings) -> Any:
    """A connection that can only read, migrating and creating nothing: for the commands that
    look at a studio while it serves (check, audit)."""
    if is_postgres(settings):
        from studio.store import postgres

        return postgres.read_only(settings.database_url)
    return sqlite.read_only(settings.db_path)


def refuse_if_newer_database(settings: Settings) -> None:
    if is_postgres(settings):
        from studio.store import postgres

        postgres.refuse_if_newer(settings.database_url)
    else:
        sqlite.refuse_if_newer(settings.db_path)


def database_name(settings: Settings) -> str:
    """What names the database in a log line or a message: never a password."""
    if is_postgres(settings):
        from studio.store import postgres

        return postgres.display(settings.database_url)
    return str(settings.db_path.resolve())


def schema_of(db: Any) -> tuple[int, int]:
    """(the schema version a connection's database has, the newest this studio knows)."""
    if isinstance(db, sqlite3.Connection):
        return db.execute("PRAGMA user_version").fetchone()[0], len(sqlite_schema.MIGRATIONS)
    from studio.store import postgres
    from studio.store.migrations import postgres as pg_schema

    return postgres.schema_version(db), len(pg_schema.MIGRATIONS)


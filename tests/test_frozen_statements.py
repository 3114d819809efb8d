"""Frozen means frozen: no SQL statement changes or removes an issued invoice or its
attachments, whatever its conflict clause, on a studio connection or a bare one (the sqlite3
command line, which knows nothing of the studio's pragmas). On PostgreSQL, the same through
its own statements (upserts, TRUNCATE), on a studio connection or a bare psycopg one."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from studio.billing import invoices
from studio.store.sqlite import connect
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import database_digest, days_ahead


@dataclass
class Books:
    path: Path
    issued: str              # an issued invoice
    draft: str               # a draft of the same owner
    issued_attachment: str   # an attachment frozen with `issued`
    draft_attachment: str    # an attachment of `draft`


def _attach(db: sqlite3.Connection, owner: str, invoice_id: str) -> str:
    attachment_id = str(uuid.uuid4())
    db.execute("INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type, size,"
               " sha256, created_at) VALUES (?, ?, ?, 'r.pdf', 'application/pdf', 4, ?, 0)",
               (attachment_id, owner, invoice_id, "ab" * 32))
    return attachment_id


DRAFT = {"customer": "C", "currency": "EUR", "due_date": days_ahead(31),
         "line_items": [{"description": "a", "quantity": "1", "unit_price": "2"}]}


@pytest.fixture
def books(tmp_path: Path, seeded_template: Path) -> Books:
    path = tmp_path / "studio.db"
    path.write_bytes(seeded_template.read_bytes())
    db = connect(path)
    try:
        def make(db: sqlite3.Connection) -> Books:
            owner = db.execute("SELECT id FROM actors ORDER BY email LIMIT 1").fetchone()[0]
            to_issue, draft = (invoices.create_draft(db, owner, invoices.parse_draft(DRAFT),
                                                     None)[0]["id"] for _ in range(2))
            frozen_attachment = _attach(db, owner, to_issue)
            draft_attachment = _attach(db, owner, draft)
            invoices.issue(db, owner, to_issue, "frozen-statements", 1)
            return Books(path, to_issue, draft, frozen_attachment, draft_attachment)

        return in_transaction(db, make)
    finally:
        db.close()


def studio_connection(path: Path) -> sqlite3.Connection:
    return connect(path)


def bare_connection(path: Path) -> sqlite3.Connection:
    """As the sqlite3 command line opens a file: no recursive_triggers, no foreign keys."""
    return sqlite3.connect(path, isolation_level=None)


CONNECTIONS = {"studio": studio_connection, "bare": bare_connection}

COLUMNS = ("id", "owner_id", "kind", "status", "credits", "number", "series_year", "sequence",
           "customer", "currency", "due_date", "line_items", "net", "tax", "total", "revision",
           "seller", "issued_at", "frozen_sha256", "created_at", "updated_at", "summary")


def copy_of(source: str, verb: str = "INSERT OR REPLACE", **values: str) -> str:
    """`verb` INTO invoices a copy of the row `source` names, some columns given as SQL."""
    chosen = ", ".join(values.get(column, column) for column in COLUMNS)
    return (f"{verb} INTO invoices ({', '.join(COLUMNS)}) SELECT {chosen} FROM invoices"
            f" WHERE id = '{source}'")


# Each statement names {issued}, {draft}, {issued_attachment} or {draft_attachment}.
STATEMENTS = {
    "insert or replace over the issued id": copy_of("{issued}", total="'1.00'"),
    "replace into over the issued id": copy_of("{issued}", "REPLACE",
                                               customer="'Someone else'"),
    "insert or replace of a new id with the issued number": copy_of(
        "{issued}", id="'new-id'", series_year="NULL", sequence="NULL"),
    "insert or replace of a new id with the issued place in its series": copy_of(
        "{issued}", id="'new-id'", number="number || '-b'"),
    "upsert over the issued id": copy_of("{issued}", "INSERT") + (
        " ON CONFLICT (id) DO UPDATE SET total = '1.00'"),
    "update or replace moving a draft onto the issued id": (
        "UPDATE OR REPLACE invoices SET id = '{issued}' WHERE id = '{draft}'"),
    "update or replace giving a draft the issued number": (
        "UPDATE OR REPLACE invoices SET status = 'issued', number = (SELECT number FROM"
        " invoices WHERE id = '{issued}') WHERE id = '{draft}'"),
    "update or replace giving a draft the issued place in its series": (
        "UPDATE OR REPLACE invoices SET (series_year, sequence) = (SELECT series_year, sequence"
        " FROM invoices WHERE id = '{issued}') WHERE id = '{draft}'"),
    "update or replace of the total": (
        "UPDATE OR REPLACE invoices SET total = '1.00' WHERE id = '{issued}'"),
    "delete": "DELETE FROM invoices WHERE id = '{issued}'",
    "an attachment moved onto the issued invoice": (
        "UPDATE attachments SET invoice_id = '{issued}' WHERE id = '{draft_attachment}'"),
    "an attachment moved off the issued invoice": (
        "UPDATE attachments SET invoice_id = '{draft}' WHERE id = '{issued_attachment}'"),
    "an attachment added to the issued invoice": (
        "INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type, size, sha256,"
        " created_at) SELECT 'new-file', owner_id, '{issued}', 'x.pdf', 'application/pdf', 1,"
        " sha256, 0 FROM attachments WHERE id = '{draft_attachment}'"),
    "insert or replace over the frozen attachment": (
        "INSERT OR REPLACE INTO attachments (id, owner_id, invoice_id, filename, content_type,"
        " size, sha256, created_at) SELECT id, owner_id, '{draft}', filename, content_type,"
        " size, sha256, created_at FROM attachments WHERE id = '{issued_attachment}'"),
    "update or replace moving an attachment onto the frozen one's id": (
        "UPDATE OR REPLACE attachments SET id = '{issued_attachment}'"
        " WHERE id = '{draft_attachment}'"),
    "a frozen attachment deleted": "DELETE FROM attachments WHERE id = '{issued_attachment}'",
}


@pytest.fixture(params=list(CONNECTIONS))
def connection(request: pytest.FixtureRequest, books: Books) -> Iterator[sqlite3.Connection]:
    db = CONNECTIONS[request.param](books.path)
    yield db
    db.close()


@backends.sqlite_only
@pytest.mark.parametrize("name", list(STATEMENTS))
def test_no_statement_changes_or_removes_an_issued_invoice_or_its_attachments(
        books: Books, connection: sqlite3.Connection, name: str) -> None:
    statement = STATEMENTS[name].format(**vars(books))
    before = database_digest(books.path)
    with pytest.raises(sqlite3.IntegrityError, match="invoice_frozen"):
        connection.execute(statement)
    assert database_digest(books.path) == before


@backends.sqlite_only
def test_every_studio_connection_fires_delete_triggers_on_replace(books: Books) -> None:
    db = connect(books.path)
    try:
        assert db.execute("PRAGMA recursive_triggers").fetchone()[0] == 1
    finally:
        db.close()


@backends.sqlite_only
@pytest.mark.parametrize("kind", list(CONNECTIONS))
def test_drafts_and_their_attachments_still_move_freely(books: Books, kind: str) -> None:
    """The guards look at issued rows only: a draft's attachment may go to another draft, and
    a draft may be replaced."""
    db = CONNECTIONS[kind](books.path)
    try:
        db.execute(copy_of(books.draft, "INSERT", id="'another-draft'"))
        db.execute("UPDATE attachments SET invoice_id = 'another-draft' WHERE id = ?",
                   (books.draft_attachment,))
        db.execute(copy_of(books.draft, customer="'Replaced'"))
        assert db.execute("SELECT invoice_id FROM attachments WHERE id = ?",
                          (books.draft_attachment,)).fetchone()[0] == "another-draft"
        assert db.execute("SELECT customer FROM invoices WHERE id = ?",
                          (books.draft,)).fetchone()[0] == "Replaced"
    finally:
        db.close()


# --- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture
def pg_books(settings: Any) -> Books:
    """The same books in a copy of the demo database on PostgreSQL."""
    db = backends.connect(settings.db_path)
    try:
        def make(db: Any) -> Books:
            owner = db.execute("SELECT id FROM actors ORDER BY email LIMIT 1").fetchone()[0]
            to_issue, draft = (invoices.create_draft(db, owner, invoices.parse_draft(DRAFT),
                                                     None)[0]["id"] for _ in range(2))
            frozen_attachment = _attach(db, owner, to_issue)
            draft_attachment = _attach(db, owner, draft)
            invoices.issue(db, owner, to_issue, "frozen-statements", 1)
            return Books(settings.db_path, to_issue, draft, frozen_attachment, draft_attachment)

        return in_transaction(db, make)
    finally:
        db.close()


def bare_postgresql(path: Path) -> Any:
    """As psql opens a database: a plain psycopg connection, each statement its own commit."""
    import psycopg

    return psycopg.connect(backends.database_url(path), autocommit=True)


PG_CONNECTIONS = {"studio": backends.connect, "bare": bare_postgresql}

# Each refused with the freeze's own words, or by a UNIQUE key where PostgreSQL has no way
# to push the issued row out of the place (no REPLACE): either way, nothing changes.
FROZEN, UNIQUE = "invoice_frozen", "unique constraint"
PG_STATEMENTS = {
    "update of the total": (FROZEN, "UPDATE invoices SET total = '1.00' WHERE id = '{issued}'"),
    "upsert over the issued id": (FROZEN, copy_of("{issued}", "INSERT") + (
        " ON CONFLICT (id) DO UPDATE SET total = '1.00'")),
    "upsert of the summary with the rest": (FROZEN, copy_of("{issued}", "INSERT") + (
        " ON CONFLICT (id) DO UPDATE SET summary = 'x', customer = 'Someone else'")),
    "a draft moved onto the issued id": (
        UNIQUE, "UPDATE invoices SET id = '{issued}' WHERE id = '{draft}'"),
    "a draft given the issued number": (
        UNIQUE, "UPDATE invoices SET status = 'issued', number = (SELECT number FROM invoices"
        " WHERE id = '{issued}') WHERE id = '{draft}'"),
    "a draft given the issued place in its series": (
        UNIQUE, "UPDATE invoices SET (series_year, sequence) = (SELECT series_year, sequence"
        " FROM invoices WHERE id = '{issued}') WHERE id = '{draft}'"),
    "delete": (FROZEN, "DELETE FROM invoices WHERE id = '{issued}'"),
    "delete of every invoice": (FROZEN, "DELETE FROM invoices"),
    "truncate of the invoices": (FROZEN, "TRUNCATE invoices CASCADE"),
    "truncate of the attachments": (FROZEN, "TRUNCATE attachments"),
    "an attachment moved onto the issued invoice": (
        FROZEN, "UPDATE attachments SET invoice_id = '{issued}' WHERE id = '{draft_attachment}'"),
    "an attachment moved off the issued invoice": (
        FROZEN, "UPDATE attachments SET invoice_id = '{draft}' WHERE id = '{issued_attachment}'"),
    "an attachment added to the issued invoice": (
        FROZEN, "INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type, size,"
        " sha256, created_at) SELECT 'new-file', owner_id, '{issued}', 'x.pdf',"
        " 'application/pdf', 1, sha256, 0 FROM attachments WHERE id = '{draft_attachment}'"),
    "upsert over the frozen attachment": (
        FROZEN, "INSERT INTO attachments (id, owner_id, invoice_id, filename, content_type,"
        " size, sha256, created_at) SELECT id, owner_id, '{draft}', filename, content_type,"
        " size, sha256, created_at FROM attachments WHERE id = '{issued_attachment}'"
        " ON CONFLICT (id) DO UPDATE SET invoice_id = EXCLUDED.invoice_id"),
    "an attachment given the frozen one's id": (
        UNIQUE, "UPDATE attachments SET id = '{issued_attachment}'"
        " WHERE id = '{draft_attachment}'"),
    "a frozen attachment deleted": (
        FROZEN, "DELETE FROM attachments WHERE id = '{issued_attachment}'"),
}


@backends.postgres_only
@pytest.mark.parametrize("kind", list(PG_CONNECTIONS))
@pytest.mark.parametrize("name", list(PG_STATEMENTS))
def test_on_postgresql_no_statement_changes_or_removes_an_issued_invoice_or_its_attachments(
        pg_books: Books, kind: str, name: str) -> None:
    import psycopg

    reason, statement = PG_STATEMENTS[name]
    before = database_digest(pg_books.path)
    db = PG_CONNECTIONS[kind](pg_books.path)
    try:
        with pytest.raises((sqlite3.IntegrityError, psycopg.errors.IntegrityError),
                           match=reason):
            db.execute(statement.format(**vars(pg_books)))
    finally:
        db.close()
    assert database_digest(pg_books.path) == before


@backends.postgres_only
@pytest.mark.parametrize("kind", list(PG_CONNECTIONS))
def test_on_postgresql_drafts_and_their_attachments_still_move_freely(pg_books: Books,
                                                                      kind: str) -> None:
    db = PG_CONNECTIONS[kind](pg_books.path)
    try:
        db.execute(copy_of(pg_books.draft, "INSERT", id="'another-draft'"))
        db.execute(f"UPDATE attachments SET invoice_id = 'another-draft'"
                   f" WHERE id = '{pg_books.draft_attachment}'")
        db.execute(copy_of(pg_books.draft, "INSERT")
                   + " ON CONFLICT (id) DO UPDATE SET customer = 'Replaced'")
        assert db.execute(f"SELECT invoice_id FROM attachments"
                          f" WHERE id = '{pg_books.draft_attachment}'"
                          ).fetchone()[0] == "another-draft"
        assert db.execute(f"SELECT customer FROM invoices WHERE id = '{pg_books.draft}'"
                          ).fetchone()[0] == "Replaced"
    finally:
        db.close()

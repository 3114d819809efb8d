"""The SQLite store: connections, pragmas, migrations and the transaction helper.

Every transaction is one plain function run on a connection's own thread, so it is one
hop for the event loop and two coroutines can never interleave statements inside one
BEGIN. Writes take `BEGIN IMMEDIATE`, which is what holds when two processes share the file.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite

if TYPE_CHECKING:
    from studio.config import Settings
    from studio.store.postgres import PgDatabase

log = logging.getLogger(__name__)
T = TypeVar("T")
Unit = Callable[..., T]

BUSY_TIMEOUT_MS = 30_000
READERS = 2

Migration = str | Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = [
    # 1: the whole first schema.
    """
    CREATE TABLE actors (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,                 -- SHA-256 of the token in the cookie
        actor_id TEXT NOT NULL REFERENCES actors(id),
        created_at REAL NOT NULL
    );
    CREATE TABLE invoices (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        number TEXT NOT NULL,
        customer TEXT NOT NULL,
        currency TEXT NOT NULL,
        total TEXT NOT NULL,                 -- a decimal string: money stays exact
        due_date TEXT NOT NULL,
        line_items TEXT NOT NULL,            -- JSON list of {description, quantity, unit_price}
        summary TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX invoices_owner ON invoices(owner_id, number);
    CREATE TABLE leases (
        id TEXT PRIMARY KEY,
        actor_id TEXT NOT NULL REFERENCES actors(id),
        session_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        options TEXT NOT NULL,               -- JSON: providers asked for, candidates
        status TEXT NOT NULL CHECK (
            status IN ('open', 'proposed', 'applied', 'rejected', 'expired', 'failed')),
        deadline_at REAL NOT NULL,
        created_at REAL NOT NULL,
        ended_at REAL,
        ended_reason TEXT,
        task_count INTEGER NOT NULL
    );
    CREATE INDEX leases_live ON leases(status, deadline_at);
    CREATE INDEX leases_session ON leases(session_id, status);
    CREATE TABLE lease_invoices (
        lease_id TEXT NOT NULL REFERENCES leases(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        position INTEGER NOT NULL,
        PRIMARY KEY (lease_id, invoice_id)
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        lease_id TEXT NOT NULL REFERENCES leases(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        provider TEXT NOT NULL,
        candidate INTEGER NOT NULL,
        position INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (
            status IN ('pending', 'running', 'done', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        claim TEXT,
        claim_expires_at REAL,
        error TEXT,
        UNIQUE (lease_id, invoice_id, provider, candidate)
    );
    CREATE INDEX tasks_lease ON tasks(lease_id, position);
    CREATE INDEX tasks_waiting ON tasks(status, claim_expires_at);
    CREATE TABLE proposals (
        id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL UNIQUE REFERENCES tasks(id),
        lease_id TEXT NOT NULL REFERENCES leases(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        provider TEXT NOT NULL,
        summary TEXT NOT NULL,
        created_at REAL NOT NULL,
        applied_at REAL
    );
    CREATE INDEX proposals_lease ON proposals(lease_id);
    CREATE TABLE request_bindings (
        actor_id TEXT NOT NULL REFERENCES actors(id),
        request_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        lease_id TEXT NOT NULL REFERENCES leases(id),
        created_at REAL NOT NULL,
        PRIMARY KEY (actor_id, request_id)
    );
    CREATE TABLE lease_events (
        id INTEGER PRIMARY KEY,
        lease_id TEXT NOT NULL REFERENCES leases(id),
        kind TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE INDEX lease_events_lease ON lease_events(lease_id, kind);
    """,
    # 2: a claim looks only at tasks still waiting, not at every finished one before them.
    """
    DROP INDEX tasks_waiting;
    CREATE INDEX tasks_waiting ON tasks(lease_id, position)
        WHERE status IN ('pending', 'running');
    """,
    # 3: part two. Invoices become drafts until issued, numbered from a counter row per
    # series, frozen by triggers once issued; sellers' profiles; one binding for all intents.
    lambda db: _invoices_of_ones_own(db),
    # 4: attachments of drafts, frozen with the invoice when it is issued.
    """
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        filename TEXT NOT NULL,              -- as the person named it; served only encoded
        content_type TEXT NOT NULL,          -- sniffed from the bytes, never declared
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,                -- names the file in the store
        created_at REAL NOT NULL
    );
    CREATE INDEX attachments_invoice ON attachments(invoice_id, created_at);
    CREATE INDEX attachments_bytes ON attachments(owner_id, sha256);
    CREATE TRIGGER issued_invoice_attachments_are_frozen_insert BEFORE INSERT ON attachments
        WHEN (SELECT status FROM invoices WHERE id = NEW.invoice_id) = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its attachments');
    END;
    CREATE TRIGGER issued_invoice_attachments_are_frozen_update BEFORE UPDATE ON attachments
        WHEN (SELECT status FROM invoices WHERE id = OLD.invoice_id) = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its attachments');
    END;
    CREATE TRIGGER issued_invoice_attachments_are_frozen_delete BEFORE DELETE ON attachments
        WHEN (SELECT status FROM invoices WHERE id = OLD.invoice_id) = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its attachments');
    END;
    """,
    # operate: accounts can be disabled; /healthz proves a write with one heartbeat row.
    """
    ALTER TABLE actors ADD COLUMN disabled_at REAL;
    CREATE TABLE health (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        checked_at REAL NOT NULL
    );
    """,
    # Hardening: sessions end when idle (last_seen_at, NULL until first touched), sign-out
    # everywhere finds an actor's sessions, and claims take turns between actors.
    """
    ALTER TABLE sessions ADD COLUMN last_seen_at REAL;
    CREATE INDEX sessions_actor ON sessions(actor_id);
    CREATE TABLE actor_turns (
        actor_id TEXT PRIMARY KEY REFERENCES actors(id),
        turn INTEGER NOT NULL                -- larger: this actor's task was claimed later
    );
    """,
    # 7: sign-in attempts counted in the database, so every process shares them.
    lambda db: _run_script(db, SIGN_IN_ATTEMPTS),
    # 8: frozen means frozen (the REPLACE forms, an attachment moved onto an issued invoice),
    # and every series numbered before part two continued.
    lambda db: _frozen_and_legacy(db),
    # 9: paged lists, and issued documents rendered once and kept.
    lambda db: _run_script(db, LISTS_AND_DOCUMENTS),
    # 10: part three. Customers, the seller's full profile and logo, the full invoice (buyer
    # frozen at issue, dates, notes), payments and balances, the outbox, share links.
    lambda db: _business(db),
    # 11: part four. Structured proposals, the state each lease's apply is fenced by, and the
    # reminder a person keeps for an invoice.
    lambda db: _run_script(db, MODEL_WORK),
]

MODEL_WORK = """
    ALTER TABLE proposals ADD COLUMN proposal TEXT;      -- JSON, the purpose's schema
    ALTER TABLE lease_invoices ADD COLUMN fence TEXT;    -- what apply must still find
    ALTER TABLE invoices ADD COLUMN reminder TEXT;       -- JSON {subject, message}
"""

SIGN_IN_ATTEMPTS = """
    CREATE TABLE sign_in_attempts (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        address TEXT NOT NULL,
        started_at REAL NOT NULL,
        -- pending while its password is checked; a pending one counts as a failure
        outcome TEXT NOT NULL DEFAULT 'pending' CHECK (outcome IN ('pending', 'failed'))
    );
    CREATE INDEX sign_in_attempts_pair ON sign_in_attempts(email, address, started_at);
    CREATE INDEX sign_in_attempts_address ON sign_in_attempts(address, started_at);
    CREATE INDEX sign_in_attempts_started ON sign_in_attempts(started_at);
    CREATE TABLE sign_in_known (             -- an address that signed in to an email lately
        email TEXT NOT NULL,
        address TEXT NOT NULL,
        signed_in_at REAL NOT NULL,
        PRIMARY KEY (email, address)
    );
    CREATE INDEX sign_in_known_age ON sign_in_known(signed_in_at);
"""

LISTS_AND_DOCUMENTS = """
    -- A page of a list is a range of one of these, in the list's own order.
    CREATE INDEX invoices_drafts_listed ON invoices(owner_id, created_at, id)
        WHERE status = 'draft';
    CREATE INDEX invoices_issued_listed ON invoices(owner_id, issued_at, number)
        WHERE status = 'issued';
    CREATE INDEX leases_listed ON leases(actor_id, created_at, id);
    CREATE INDEX lease_invoices_invoice ON lease_invoices(invoice_id);
    -- An issued invoice never changes: its document is rendered once and kept.
    CREATE TABLE issued_documents (
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        frozen_sha256 TEXT NOT NULL,            -- the content it was rendered from
        layout TEXT NOT NULL,                   -- the renderer's layout; a new one renders again
        content BLOB NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (invoice_id, frozen_sha256, layout)
    );
"""


BUSINESS = """
    CREATE TABLE customers (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        name TEXT NOT NULL,
        email TEXT NOT NULL DEFAULT '',
        address TEXT NOT NULL DEFAULT '',
        country TEXT NOT NULL DEFAULT '',       -- ISO 3166-1 alpha-2, or empty
        vat_id TEXT NOT NULL DEFAULT '',
        currency TEXT NOT NULL DEFAULT '',      -- ISO 4217, or empty
        payment_terms_days INTEGER NOT NULL DEFAULT 14,
        revision INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX customers_listed ON customers(owner_id, name, id);
    ALTER TABLE profiles ADD COLUMN country TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN tax_number TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN email TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN iban TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN bic TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN payment_terms TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN footer TEXT NOT NULL DEFAULT '';
    ALTER TABLE profiles ADD COLUMN logo_sha256 TEXT;
    -- A logo is small and kept for as long as an issued invoice may name it: never deleted.
    CREATE TABLE logos (
        owner_id TEXT NOT NULL REFERENCES actors(id),
        sha256 TEXT NOT NULL,
        content_type TEXT NOT NULL,
        content BLOB NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (owner_id, sha256)
    );
    ALTER TABLE invoices ADD COLUMN customer_id TEXT REFERENCES customers(id);
    ALTER TABLE invoices ADD COLUMN buyer TEXT;             -- JSON, frozen at issue
    ALTER TABLE invoices ADD COLUMN issue_date TEXT;        -- set when issued
    ALTER TABLE invoices ADD COLUMN supply_date TEXT;
    ALTER TABLE invoices ADD COLUMN notes TEXT NOT NULL DEFAULT '';
    CREATE INDEX invoices_customer ON invoices(customer_id) WHERE customer_id IS NOT NULL;
    CREATE INDEX invoices_issue_date ON invoices(owner_id, issue_date) WHERE status = 'issued';
    DROP TRIGGER issued_invoice_is_frozen;
    CREATE TRIGGER issued_invoice_is_frozen
        BEFORE UPDATE OF id, owner_id, kind, status, credits, number, series_year, sequence,
            customer, currency, due_date, line_items, net, tax, total, revision, seller,
            issued_at, frozen_sha256, created_at, customer_id, buyer, issue_date, supply_date,
            notes
        ON invoices WHEN OLD.status = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice never changes');
    END;
    -- A payment is recorded once and voided, never changed or deleted.
    CREATE TABLE payments (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        amount TEXT NOT NULL,                   -- a decimal string in the invoice's currency
        currency TEXT NOT NULL,
        paid_on TEXT NOT NULL,                  -- the date the money arrived
        method TEXT NOT NULL CHECK (method IN ('bank_transfer', 'card', 'cash', 'other')),
        reference TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        voided_at REAL
    );
    CREATE INDEX payments_invoice ON payments(invoice_id, created_at);
    CREATE INDEX payments_listed ON payments(owner_id, paid_on, id);
    CREATE TRIGGER payment_is_kept BEFORE DELETE ON payments
    BEGIN
        SELECT RAISE(ABORT, 'payment_kept: a payment is voided, never deleted');
    END;
    -- INSERT OR REPLACE on a connection without recursive_triggers deletes silently: refused
    -- before anything is deleted, as FROZEN_PLACES does for issued invoices.
    CREATE TRIGGER payment_keeps_its_place BEFORE INSERT ON payments
        WHEN EXISTS (SELECT 1 FROM payments WHERE id = NEW.id)
    BEGIN
        SELECT RAISE(ABORT, 'payment_kept: a payment is voided, never changed');
    END;
    CREATE TRIGGER payment_never_changes
        BEFORE UPDATE OF id, owner_id, invoice_id, amount, currency, paid_on, method, reference,
            created_at ON payments
    BEGIN
        SELECT RAISE(ABORT, 'payment_kept: a payment is voided, never changed');
    END;
    -- What is left to pay on each issued invoice, kept in step by every transaction that
    -- changes it (issuing, a credit note issued, a payment recorded or voided).
    CREATE TABLE balances (
        invoice_id TEXT PRIMARY KEY REFERENCES invoices(id),
        owner_id TEXT NOT NULL REFERENCES actors(id),
        currency TEXT NOT NULL,
        due_date TEXT NOT NULL,
        amount_paid TEXT NOT NULL,
        amount_credited TEXT NOT NULL,
        amount_due TEXT NOT NULL,
        payment_status TEXT NOT NULL CHECK (
            payment_status IN ('unpaid', 'partially_paid', 'paid')),
        updated_at REAL NOT NULL
    );
    CREATE INDEX balances_open ON balances(owner_id, payment_status, due_date);
    -- The outbox: an email written in the transaction of its request, delivered after it.
    CREATE TABLE sends (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        kind TEXT NOT NULL CHECK (kind IN ('invoice', 'reminder')),
        recipient TEXT NOT NULL,
        cc TEXT NOT NULL DEFAULT '',
        subject TEXT NOT NULL,
        message TEXT NOT NULL,
        document_sha256 TEXT NOT NULL,
        message_id TEXT NOT NULL UNIQUE,
        share_link_id TEXT,
        status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        claim TEXT,
        claim_expires_at REAL,
        reply TEXT NOT NULL DEFAULT '',         -- the mail server's last answer
        created_at REAL NOT NULL,
        sent_at REAL
    );
    CREATE INDEX sends_invoice ON sends(invoice_id, created_at);
    CREATE INDEX sends_waiting ON sends(next_attempt_at) WHERE status = 'queued';
    -- Accounts take turns at the outbox as at the tasks (actor_turns), on a count of their own.
    CREATE TABLE send_turns (
        actor_id TEXT PRIMARY KEY REFERENCES actors(id),
        turn INTEGER NOT NULL                -- larger: this actor's email was claimed later
    );
    -- A share link's token is shown once; only its SHA-256 is kept.
    CREATE TABLE share_links (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        token_sha256 TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        revoked_at REAL,
        first_viewed_at REAL,
        views INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX share_links_invoice ON share_links(invoice_id, created_at);
"""


def _business(db: sqlite3.Connection) -> None:
    from studio.billing.balances import settle_all

    _run_script(db, BUSINESS)
    settle_all(db)


# The REPLACE conflict clause deletes the row in its way without firing delete triggers
# unless `recursive_triggers` is on, which a connection such as the sqlite3 command line
# does not turn on. So these refuse, before anything is deleted, a new or changed row that
# would take the place (id, number, place in its series) of an issued invoice or of one of
# its attachments, and an attachment moved onto an issued invoice.
FROZEN_PLACES = """
    CREATE TRIGGER issued_invoice_keeps_its_place_insert BEFORE INSERT ON invoices
        WHEN EXISTS (SELECT 1 FROM invoices WHERE id = NEW.id AND status = 'issued')
          OR EXISTS (SELECT 1 FROM invoices WHERE owner_id = NEW.owner_id
                     AND number = NEW.number AND status = 'issued')
          OR EXISTS (SELECT 1 FROM invoices WHERE owner_id = NEW.owner_id AND kind = NEW.kind
                     AND series_year = NEW.series_year AND sequence = NEW.sequence
                     AND status = 'issued')
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its id and number');
    END;
    CREATE TRIGGER issued_invoice_keeps_its_place_update
        BEFORE UPDATE OF id, owner_id, kind, number, series_year, sequence ON invoices
        WHEN EXISTS (SELECT 1 FROM invoices WHERE id = NEW.id AND id != OLD.id
                     AND status = 'issued')
          OR EXISTS (SELECT 1 FROM invoices WHERE owner_id = NEW.owner_id
                     AND number = NEW.number AND id != OLD.id AND status = 'issued')
          OR EXISTS (SELECT 1 FROM invoices WHERE owner_id = NEW.owner_id AND kind = NEW.kind
                     AND series_year = NEW.series_year AND sequence = NEW.sequence
                     AND id != OLD.id AND status = 'issued')
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its id and number');
    END;
    CREATE TRIGGER issued_invoice_attachments_keep_their_place_insert
        BEFORE INSERT ON attachments
        WHEN EXISTS (SELECT 1 FROM attachments JOIN invoices ON invoices.id = attachments.invoice_id
                     WHERE attachments.id = NEW.id AND invoices.status = 'issued')
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its attachments');
    END;
    CREATE TRIGGER issued_invoice_attachments_are_frozen_move BEFORE UPDATE ON attachments
        WHEN (SELECT status FROM invoices WHERE id = NEW.invoice_id) = 'issued'
          OR EXISTS (SELECT 1 FROM attachments JOIN invoices ON invoices.id = attachments.invoice_id
                     WHERE attachments.id = NEW.id AND attachments.id != OLD.id
                     AND invoices.status = 'issued')
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice keeps its attachments');
    END;
"""


def _frozen_and_legacy(db: sqlite3.Connection) -> None:
    _run_script(db, FROZEN_PLACES)
    continue_legacy_series(db)


# A number given before part two that reads as one of the studio's series, once case and
# spaces are set aside: `inv-2026-0007 ` is INV-2026-0007. Kept here, not taken from the
# invoices unit, so this migration reads numbers the same way whatever that unit becomes.
LEGACY_SERIES_NUMBER = re.compile(r"(?P<prefix>INV|CN)-(?P<year>[0-9]{4})-(?P<sequence>[0-9]+)")
LEGACY_SERIES_KINDS = {"INV": "invoice", "CN": "credit_note"}


def series_place(number: str) -> tuple[str, int, int] | None:
    """(kind, year, sequence) of a number as its series reads it, None if it reads as none."""
    found = LEGACY_SERIES_NUMBER.fullmatch("".join(number.split()).upper())
    if found is None or int(found["sequence"]) < 1:
        return None
    return LEGACY_SERIES_KINDS[found["prefix"]], int(found["year"]), int(found["sequence"])


def continue_legacy_series(db: sqlite3.Connection) -> None:
    """Every series that a number given before part two reads as part of continues after the
    highest such number, so the studio never gives a number that is already taken."""
    highest: dict[tuple[str, str, int], int] = {}
    for owner_id, number in db.execute(
            "SELECT owner_id, number FROM invoices WHERE status = 'issued'"
            " AND sequence IS NULL").fetchall():
        place = series_place(number)
        if place is not None:
            kind, year, sequence = place
            key = (owner_id, kind, year)
            highest[key] = max(highest.get(key, 0), sequence)
    # A series the studio had already numbered in jumps past the old number; its counter
    # keeps its first number.
    db.executemany(
        "INSERT INTO invoice_series (owner_id, kind, year, last, first) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (owner_id, kind, year) DO UPDATE SET last = excluded.last"
        " WHERE invoice_series.last < excluded.last",
        [(owner, kind, year, last, last + 1) for (owner, kind, year), last in highest.items()],
    )

INVOICES_V3 = """
    CREATE TABLE invoices_v3 (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        kind TEXT NOT NULL DEFAULT 'invoice' CHECK (kind IN ('invoice', 'credit_note')),
        status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'issued', 'deleted')),
        credits TEXT REFERENCES invoices(id),   -- the issued invoice a credit note corrects
        number TEXT,                            -- given only at issue time
        series_year INTEGER,                    -- with sequence: the place in its series;
        sequence INTEGER,                       -- NULL for invoices numbered before part two
        customer TEXT NOT NULL,
        currency TEXT NOT NULL,
        due_date TEXT NOT NULL,
        line_items TEXT NOT NULL,               -- JSON: {description, quantity, unit_price,
                                                --        tax_rate} as decimal strings
        net TEXT NOT NULL,                      -- decimal strings: money stays exact
        tax TEXT NOT NULL,
        total TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 1,
        seller TEXT,                            -- JSON profile frozen at issue time
        issued_at REAL,
        frozen_sha256 TEXT,
        created_at REAL NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',       -- the studio's note, not part of the document
        CHECK ((status = 'issued') = (number IS NOT NULL)),
        UNIQUE (owner_id, number),
        UNIQUE (owner_id, kind, series_year, sequence)
    );
    INSERT INTO invoices_v3 (id, owner_id, status, number, customer, currency, due_date,
                             line_items, net, tax, total, issued_at, summary)
        SELECT id, owner_id, 'issued', number, customer, currency, due_date, line_items,
               total, '0', total, strftime('%s', 'now'), summary FROM invoices;
    DROP TABLE invoices;
    ALTER TABLE invoices_v3 RENAME TO invoices;
    CREATE INDEX invoices_owner ON invoices(owner_id, status, number);
    CREATE INDEX invoices_credits ON invoices(credits) WHERE credits IS NOT NULL;
    CREATE TABLE invoice_series (
        owner_id TEXT NOT NULL REFERENCES actors(id),
        kind TEXT NOT NULL,
        year INTEGER NOT NULL,
        last INTEGER NOT NULL,                  -- the last number given; the next is last + 1
        first INTEGER NOT NULL DEFAULT 1,       -- the studio's first; later when numbers of
                                                -- this series were given before part two
        PRIMARY KEY (owner_id, kind, year)
    );
    CREATE TABLE profiles (
        actor_id TEXT PRIMARY KEY REFERENCES actors(id),
        name TEXT NOT NULL DEFAULT '',
        address TEXT NOT NULL DEFAULT '',
        vat_id TEXT NOT NULL DEFAULT '',
        updated_at REAL NOT NULL
    );
    CREATE TABLE request_bindings_v3 (
        actor_id TEXT NOT NULL REFERENCES actors(id),
        kind TEXT NOT NULL,                     -- lease, issue, draft, credit_note, ...
        request_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        target_id TEXT NOT NULL,                -- what the request made
        created_at REAL NOT NULL,
        PRIMARY KEY (actor_id, kind, request_id)
    );
    INSERT INTO request_bindings_v3
        SELECT actor_id, 'lease', request_id, fingerprint, lease_id, created_at
          FROM request_bindings;
    DROP TABLE request_bindings;
    ALTER TABLE request_bindings_v3 RENAME TO request_bindings;
"""

# The database itself refuses to change or delete an issued invoice's frozen fields; the
# summary (the studio's note) stays writable.
FROZEN_TRIGGERS = """
    CREATE TRIGGER issued_invoice_is_frozen
        BEFORE UPDATE OF id, owner_id, kind, status, credits, number, series_year, sequence,
            customer, currency, due_date, line_items, net, tax, total, revision, seller,
            issued_at, frozen_sha256, created_at
        ON invoices WHEN OLD.status = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice never changes');
    END;
    CREATE TRIGGER issued_invoice_is_kept BEFORE DELETE ON invoices WHEN OLD.status = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice is never deleted');
    END;
"""


def _invoices_of_ones_own(db: sqlite3.Connection) -> None:
    from studio.billing.invoices import seal_legacy

    _run_script(db, INVOICES_V3)
    seal_legacy(db)  # before the triggers: it completes the rows issued before part two
    _run_script(db, FROZEN_TRIGGERS)


OWNER_ONLY = 0o600


def owner_only(path: Path) -> None:
    """The database, its WAL and shared-memory files hold password hashes and every invoice:
    readable by their owner only. SQLite gives -wal and -shm the mode of the main file."""
    if not path.exists():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, OWNER_ONLY))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                file.chmod(OWNER_ONLY)
        except FileNotFoundError:
            pass


class DatabaseUnavailable(Exception):
    """The database cannot be reached: answered 503 while it is away, never a 500."""


class SchemaTooNew(Exception):
    """The file was written by a newer studio: refused, and left exactly as it was."""

    def __init__(self, path: Path | str, found: int, known: int | None = None) -> None:
        known = len(MIGRATIONS) if known is None else known
        super().__init__(
            f"{path} has schema version {found}, but this studio knows versions up to"
            f" {known}. It was left untouched: run the newer studio that wrote it,"
            " or restore a backup made by this version."
        )


def prepare(path: Path) -> None:
    """Create the file if needed (owner only), switch it to WAL and apply pending migrations,
    each in its own transaction. A file from a newer studio is refused before anything
    writes to it."""
    refuse_if_newer(path)
    # The umask covers the files SQLite creates beside it; changed only while they appear.
    previous = os.umask(0o077)
    try:
        owner_only(path)
        db = sqlite3.connect(path, isolation_level=None)
        _set_up(db)
        db.execute("PRAGMA journal_mode = WAL")
    finally:
        os.umask(previous)
    # Rebuilding a table that others reference needs foreign keys off (SQLite's own recipe);
    # the check before COMMIT below stands in for them.
    db.execute("PRAGMA foreign_keys = OFF")
    try:
        db.execute("PRAGMA journal_mode = WAL")
        for number, migration in enumerate(MIGRATIONS, start=1):
            db.execute("BEGIN IMMEDIATE")
            try:
                # Read inside the lock: another process may have migrated meanwhile.
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version > len(MIGRATIONS):
                    raise SchemaTooNew(path, version)
                if version < number:
                    apply_migration(db, migration)
                    db.execute(f"PRAGMA user_version = {number}")
                    # Foreign keys are off while tables are rebuilt; nothing may dangle after.
                    if db.execute("PRAGMA foreign_key_check").fetchone() is not None:
                        raise sqlite3.IntegrityError("a migration left a dangling reference")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
    finally:
        db.close()


def apply_migration(db: sqlite3.Connection, migration: Migration) -> None:
    """One migration, inside the caller's transaction: a script, or a function for what SQL
    alone cannot do."""
    if callable(migration):
        migration(db)
    else:
        _run_script(db, migration)


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one inside the caller's transaction (executescript would commit).
    A trigger body holds semicolons, so statements are split where SQLite says they end."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    assert not statement.strip(), f"an unfinished statement: {statement}"


def schema_version(path: Path) -> int | None:
    """The file's user_version, read without writing a byte or creating -wal/-shm files;
    None when there is no file yet."""
    if not path.exists():
        return None
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    db = sqlite3.connect(uri, uri=True)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def refuse_if_newer(path: Path) -> None:
    found = schema_version(path)
    if found is not None and found > len(MIGRATIONS):
        raise SchemaTooNew(path, found)


def connect(path: Path) -> sqlite3.Connection:
    """A migrated, configured connection for one-shot commands (`studio users`, ...)."""
    prepare(path)
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    _set_up(db)
    return db


def read_only(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection that can only read the file, and never creates it: for the commands that
    look at a studio (audit, check, backup) while it serves."""
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=timeout)
    db.row_factory = sqlite3.Row
    return db


def sync_path(path: Path) -> None:
    """fsync a file, or a folder so that the names just made or linked in it are on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clock(now: float | None) -> float:
    """The time a unit acts at: read inside its transaction, after what it decides on is
    held (`hold`), so a wait for the lock can never make a deadline check stale. On
    PostgreSQL it is the database's clock, so a host whose own clock is wrong judges every
    deadline as the others do. Tests may pass their own."""
    if now is not None:
        return now
    current = getattr(_committing, "db", None)
    read_clock = getattr(current, "database_clock", None)
    return time.time() if read_clock is None else read_clock()


_committing = threading.local()


def after_commit(call: Callable[[], object]) -> None:
    """Run `call` once the transaction running on this thread commits, never if it rolls
    back; outside a transaction, now. For what must only follow a write that is on disk:
    a log line naming a state change, a counter of work done."""
    waiting = getattr(_committing, "calls", None)
    if waiting is None:
        call()
    else:
        waiting.append(call)


def in_transaction(db: sqlite3.Connection, unit: Unit[T], *args: Any, **kwargs: Any) -> T:
    """Run `unit(db, *args)` inside BEGIN IMMEDIATE: all of it commits, or none of it.
    What the unit asked to follow the commit (`after_commit`) runs only once it has."""
    db.execute("BEGIN IMMEDIATE")
    _committing.calls = waiting = []
    _committing.db = db
    try:
        result = unit(db, *args, **kwargs)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        _committing.calls = _committing.db = None
    for call in waiting:
        try:
            call()
        except Exception:  # the write is on disk: its answer must not become an error
            log.exception("after the commit, %r failed", call)
    return result


def in_snapshot(db: sqlite3.Connection, unit: Unit[T], *args: Any) -> T:
    """Run `unit(db, *args)` inside a read transaction: every SELECT sees one moment."""
    db.execute("BEGIN")
    _committing.db = db
    try:
        return unit(db, *args)
    finally:
        _committing.db = None
        if db.in_transaction:
            db.execute("COMMIT")


class Database:
    """One writer connection and a few readers, each on its own aiosqlite thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(READERS))
        self._watch: sqlite3.Connection | None = None

    async def open(self) -> Database:
        prepare(self.path)
        self._writer = await aiosqlite.connect(self.path, isolation_level=None)
        await self._writer._execute(_set_up, self._writer._conn)
        for _ in range(READERS):
            reader = await aiosqlite.connect(self.path, isolation_level=None)
            await reader._execute(_set_up, reader._conn)
            self._readers.append(reader)
        # Only ever asked for `PRAGMA data_version`: a counter in shared memory, no I/O.
        self._watch = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _set_up(self._watch)
        return self

    async def close(self) -> None:
        for connection in [self._writer, *self._readers]:
            if connection is not None:
                await connection.close()
        if self._watch is not None:
            self._watch.close()
        self._writer, self._readers, self._watch = None, [], None

    async def write(self, unit: Unit[T], *args: Any, **kwargs: Any) -> T:
        """Run one write transaction as one unit on the writer's thread."""
        return await self.on_writer(in_transaction, unit, *args, **kwargs)

    async def on_writer(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(connection, *args)` on the writer's thread, as one hop."""
        assert self._writer is not None, "the database is not open"
        # aiosqlite's public calls are one statement per hop; _execute runs a whole function
        # on the connection's thread, so a transaction cannot interleave or be left half-open
        # by a cancelled request.
        return await self._writer._execute(call, self._writer._conn, *args, **kwargs)

    async def version(self) -> int:
        """A number that changes whenever any other connection commits to the file."""
        assert self._watch is not None, "the database is not open"
        return self._watch.execute("PRAGMA data_version").fetchone()[0]

    async def read(self, unit: Unit[T], *args: Any) -> T:
        """Run one read-only unit on a reader's thread, as one snapshot."""
        reader = self._readers[next(self._next_reader)]
        return await reader._execute(in_snapshot, reader._conn, unit, *args)


def _set_up(db: sqlite3.Connection) -> None:
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    # FULL syncs the WAL on every commit: a 2xx answer means the write is on disk.
    db.execute("PRAGMA synchronous = FULL")
    # The row a REPLACE deletes then meets the delete triggers, so it cannot be an issued one.
    db.execute("PRAGMA recursive_triggers = ON")
    db.create_function("studio_lower", 1, _lower, deterministic=True)


def _lower(value: str | None) -> str | None:
    """SQLite's own lower() knows only ASCII; Python's lowers every script, as PostgreSQL's
    does, so `émile` finds `Émile` on both."""
    return None if value is None else value.lower()


def anywhere(text: str) -> str:
    """`text` anywhere, in any case, as a LIKE pattern (with `ESCAPE '\\'`) for text lowered
    by the dialect's `lower`; its own `%` and `_` are plain characters."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# --- the one seam between the two databases -------------------------------------------------


def is_postgres(settings: Settings) -> bool:
    return bool(settings.database_url)


def open_database(settings: Settings) -> Database | PgDatabase:
    """The studio's database, SQLite or PostgreSQL as the settings name it (not yet open)."""
    if is_postgres(settings):
        from studio.store.postgres import PgDatabase

        return PgDatabase(settings.database_url, settings.db_pool_size)
    return Database(settings.db_path)


def prepare_database(settings: Settings) -> None:
    """Migrate the database the settings name, refusing one of a newer schema untouched."""
    if is_postgres(settings):
        from studio.store import postgres

        postgres.prepare(settings.database_url)
    else:
        prepare(settings.db_path)


def connect_to(settings: Settings) -> Any:
    """A migrated connection for a one-shot command (`studio users`, `studio import`)."""
    if is_postgres(settings):
        from studio.store import postgres

        postgres.prepare(settings.database_url)
        return postgres.connect(settings.database_url)
    return connect(settings.db_path)


def read_only_to(settings: Settings) -> Any:
    """A connection that can only read, migrating and creating nothing: for the commands that
    look at a studio while it serves (check, audit)."""
    if is_postgres(settings):
        from studio.store import postgres

        return postgres.read_only(settings.database_url)
    return read_only(settings.db_path)


def refuse_if_newer_database(settings: Settings) -> None:
    if is_postgres(settings):
        from studio.store import postgres

        postgres.refuse_if_newer(settings.database_url)
    else:
        refuse_if_newer(settings.db_path)


def database_name(settings: Settings) -> str:
    """What names the database in a log line or a message: never a password."""
    if is_postgres(settings):
        from studio.store.postgres import display

        return display(settings.database_url)
    return str(settings.db_path.resolve())


def schema_of(db: Any) -> tuple[int, int]:
    """(the schema version a connection's database has, the newest this studio knows)."""
    if isinstance(db, sqlite3.Connection):
        return db.execute("PRAGMA user_version").fetchone()[0], len(MIGRATIONS)
    from studio.store import postgres
    from studio.store.migrations import postgres as pg_schema

    return postgres.schema_version(db), len(pg_schema.MIGRATIONS)


@dataclass(frozen=True)
class Dialect:
    """The few fragments of SQL the two databases must spell differently, side by side."""

    name: str
    # The claim's choice of index for waiting tasks (SQLite's planner needs telling).
    tasks_waiting: str
    # Joins in the order written (SQLite's CROSS JOIN keeps it; PostgreSQL plans its own).
    join_in_order: str
    # The claimed row, locked; another claimer passes over it instead of waiting.
    skip_locked: str
    # A row read to be changed in the same transaction, locked until it ends (SQLite's one
    # writer holds every row already).
    for_update: str = ""
    # The one row of a one-table claim (a send), locked; another claimer passes over it.
    skip_locked_row: str = ""
    # The SQL function that lowers text of any script, for a match in any case.
    lower: str = "lower"
    # A row read to be named by the rows a unit inserts: it cannot be deleted until the
    # transaction ends, while changes to its other columns go on.
    key_share: str = ""


SQLITE = Dialect("sqlite", tasks_waiting="INDEXED BY tasks_waiting", join_in_order="CROSS JOIN",
                 skip_locked="", lower="studio_lower")
POSTGRES = Dialect("postgresql", tasks_waiting="", join_in_order="JOIN",
                   skip_locked="FOR UPDATE OF tasks SKIP LOCKED", for_update="FOR UPDATE",
                   skip_locked_row="FOR UPDATE SKIP LOCKED", key_share="FOR KEY SHARE")


def dialect_of(db: Any) -> Dialect:
    return SQLITE if isinstance(db, sqlite3.Connection) else POSTGRES


def hold(db: Any, *names: str) -> None:
    """Lock what a write unit decides on, by name, until its transaction ends: the unit's
    checks and its writes then see one state, and units that name other things never wait
    for it. Call it first, before the unit reads what it decides on or reads the clock.

    One name per rule: `account:<actor id>` for an account's own records (its drafts, series
    counters, customers, payments, bindings), `sign-in:<email>` and `sign-in-from:<address>`
    for the sign-in counts of an email and of a client address. SQLite's one writer already
    holds the whole file (`BEGIN IMMEDIATE`), so there it costs nothing; PostgreSQL takes a
    transaction-scoped advisory lock per name, in one order, and a holder that stops is ended
    by the connection's timeouts (studio/postgres.py)."""
    if isinstance(db, sqlite3.Connection):
        return
    for key in sorted({lock_key(name) for name in names}):
        db.execute("SELECT pg_advisory_xact_lock(?)", (key,))


def account_lock(actor_id: str) -> str:
    """The lock name of one account's own records (see `hold`)."""
    return f"account:{actor_id}"


def lock_key(name: str) -> int:
    """A lock's name as the signed 64-bit number an advisory lock takes."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)

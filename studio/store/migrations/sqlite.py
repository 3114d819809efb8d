"""The SQLite schema: every migration in order, each carrying its own SQL. A migration that
must also compute (the balances of invoices issued before they were kept, the seal of invoices
numbered before part two) does it with the frozen code in `legacy`, never with today's domain
code: it must run the same on an old file in two years, whatever the domain has become."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from studio.store.migrations import legacy

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
    lambda db: run_script(db, SIGN_IN_ATTEMPTS),
    # 8: frozen means frozen (the REPLACE forms, an attachment moved onto an issued invoice),
    # and every series numbered before part two continued.
    lambda db: _frozen_and_legacy(db),
    # 9: paged lists, and issued documents rendered once and kept.
    lambda db: run_script(db, LISTS_AND_DOCUMENTS),
    # 10: part three. Customers, the seller's full profile and logo, the full invoice (buyer
    # frozen at issue, dates, notes), payments and balances, the outbox, share links.
    lambda db: _business(db),
    # 11: part four. Structured proposals, the state each lease's apply is fenced by, and the
    # reminder a person keeps for an invoice.
    lambda db: run_script(db, MODEL_WORK),
    # 12: when a send's worker was let end its message: before that, a claim that timed out
    # may be taken over (the mail server cannot have the email yet).
    "ALTER TABLE sends ADD COLUMN handed_at REAL;",
    # 13: part five. Recurring invoices, each period bound once with the invoice it made.
    lambda db: run_script(db, RECURRING),
    # 14: reminders that go out by themselves, each step once per invoice.
    lambda db: run_script(db, REMINDERS),
    # 15: an account's reminders are looked at again as soon as one of its balances changes.
    """
    ALTER TABLE reminder_settings ADD COLUMN looked_at REAL;
    CREATE INDEX balances_changed ON balances(owner_id, updated_at);
    """,
    # 16: the languages spoken: a customer's (null: its country's), a person's (null: the
    # browser's).
    """
    ALTER TABLE customers ADD COLUMN language TEXT;
    ALTER TABLE actors ADD COLUMN language TEXT;
    """,
    # 17: why an invoice's lines at 0 % charge no VAT, in the seller's words (empty: none),
    # and a schedule's for the invoices it makes.
    """
    ALTER TABLE invoices ADD COLUMN vat_exemption TEXT NOT NULL DEFAULT '';
    ALTER TABLE recurring ADD COLUMN vat_exemption TEXT NOT NULL DEFAULT '';
    """,
]

REMINDERS = """
    CREATE TABLE reminder_settings (
        actor_id TEXT PRIMARY KEY REFERENCES actors(id),
        enabled INTEGER NOT NULL DEFAULT 0,
        steps TEXT NOT NULL DEFAULT '[]',       -- JSON [{days, subject, message}]
        looked_on TEXT,                         -- the day every due step was last queued
        revision INTEGER NOT NULL DEFAULT 1,
        updated_at REAL NOT NULL
    );
    ALTER TABLE customers ADD COLUMN reminders INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE sends ADD COLUMN step INTEGER;  -- the reminder step (days) that queued it
    CREATE UNIQUE INDEX sends_one_per_step ON sends(invoice_id, step) WHERE step IS NOT NULL;
"""

RECURRING = """
    CREATE TABLE recurring (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES actors(id),
        customer_id TEXT NOT NULL REFERENCES customers(id),
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'ended')),
        currency TEXT NOT NULL,
        line_items TEXT NOT NULL,               -- JSON, as a draft's
        notes TEXT NOT NULL DEFAULT '',
        payment_terms_days INTEGER NOT NULL,
        every TEXT NOT NULL CHECK (every IN ('week', 'month', 'year')),
        every_n INTEGER NOT NULL CHECK (every_n >= 1),
        on_day TEXT,                            -- '1'..'28' or 'last'; NULL for a week
        starts_on TEXT NOT NULL,
        ends_on TEXT,
        stop_after INTEGER,                     -- how many invoices in all, or NULL
        action TEXT NOT NULL CHECK (action IN ('draft', 'issue', 'send')),
        email_to TEXT NOT NULL DEFAULT '',      -- '' : the customer's address
        backfill INTEGER NOT NULL DEFAULT 0,
        anchor TEXT NOT NULL,                   -- the first run date of the rule in force
        next_index INTEGER NOT NULL DEFAULT 0,  -- the next period, counted from the anchor
        next_run TEXT,                          -- its first day; NULL once ended
        made INTEGER NOT NULL DEFAULT 0,
        problem TEXT NOT NULL DEFAULT '',       -- why the last period was not issued or sent
        revision INTEGER NOT NULL DEFAULT 1,
        created_on TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX recurring_due ON recurring(next_run) WHERE status = 'active';
    CREATE INDEX recurring_listed ON recurring(owner_id, created_at, id);
    -- A period is bound once, in the transaction of the invoice it makes.
    CREATE TABLE recurring_periods (
        recurring_id TEXT NOT NULL REFERENCES recurring(id),
        period_start TEXT NOT NULL,
        period_end TEXT NOT NULL,
        invoice_id TEXT NOT NULL REFERENCES invoices(id),
        made_at REAL NOT NULL,
        UNIQUE (recurring_id, period_start)
    );
    ALTER TABLE invoices ADD COLUMN recurring_id TEXT REFERENCES recurring(id);
    ALTER TABLE invoices ADD COLUMN period_start TEXT;
    ALTER TABLE invoices ADD COLUMN period_end TEXT;
    DROP TRIGGER issued_invoice_is_frozen;
    CREATE TRIGGER issued_invoice_is_frozen
        BEFORE UPDATE OF id, owner_id, kind, status, credits, number, series_year, sequence,
            customer, currency, due_date, line_items, net, tax, total, revision, seller,
            issued_at, frozen_sha256, created_at, customer_id, buyer, issue_date, supply_date,
            notes, recurring_id, period_start, period_end
        ON invoices WHEN OLD.status = 'issued'
    BEGIN
        SELECT RAISE(ABORT, 'invoice_frozen: an issued invoice never changes');
    END;
"""

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
    run_script(db, BUSINESS)
    legacy.settle_all(db)


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
    run_script(db, FROZEN_PLACES)
    legacy.continue_legacy_series(db)


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
    run_script(db, INVOICES_V3)
    legacy.seal_legacy(db)  # before the triggers: it completes the rows issued before part two
    run_script(db, FROZEN_TRIGGERS)



def run_script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one inside the caller's transaction (executescript would commit).
    A trigger body holds semicolons, so statements are split where SQLite says they end."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    assert not statement.strip(), f"an unfinished statement: {statement}"

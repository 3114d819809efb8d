"""Invoices numbered before part two: every series they read as part of continues after them,
numbers compare as the series reads them, and their stored lines read as stored."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pypdf
import pytest

from studio.billing import invoices, profiles
from studio.ops.audit import audit_database, audit_file
from studio.store.migrations import sqlite as store
from studio.store.migrations.sqlite import MIGRATIONS
from studio.store.sqlite import prepare
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, database_digest, days_ahead, execute, rows, scalar

pytestmark = pytest.mark.anyio

DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Widgets", "quantity": "3", "unit_price": "19.99",
                         "tax_rate": "19"}]}


def this_year() -> int:
    """The year (UTC) of the series a test's numbers are in, read when the test runs: the
    suite may run across a new year."""
    return time.gmtime().tm_year


def database_before_part_two(path: Path, *numbers: str) -> None:
    """A database as the studio left it before part two: one actor, one invoice per number."""
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode = WAL")
    for script in MIGRATIONS[:2]:
        assert isinstance(script, str)
        old.executescript(script)
    old.execute("PRAGMA user_version = 2")
    old.execute("INSERT INTO actors VALUES ('a1', 'old@example.com', 'x', 0)")
    for n, number in enumerate(numbers):
        old.execute("INSERT INTO invoices (id, owner_id, number, customer, currency, total,"
                    " due_date, line_items) VALUES (?, 'a1', ?, 'Acme', 'EUR', '10.00',"
                    " '2026-01-01', ?)", (f"old-{n}", number, json.dumps(
                        [{"description": "Tea", "quantity": 1, "unit_price": "10.00"}])))
    old.close()


def issue_new(path: Path, kind: str = "invoice") -> str:
    """Issue one new invoice of actor a1 (for a credit note: of a new invoice) and answer its
    number; a refusal or an IntegrityError comes out as it is."""
    db = sqlite3.connect(path, isolation_level=None)
    db.row_factory = sqlite3.Row
    try:
        def issue_one(db: sqlite3.Connection) -> str:
            profiles.save(db, "a1", {"name": "Old Co", "address": "", "vat_id": ""})
            draft, _ = invoices.create_draft(db, "a1", invoices.parse_draft(DRAFT), None)
            number = invoices.issue(db, "a1", draft["id"], str(uuid.uuid4()), 1)[0]["number"]
            if kind == "invoice":
                return number
            note, _ = invoices.make_credit_note(db, "a1", draft["id"], None)
            return invoices.issue(db, "a1", note["id"], str(uuid.uuid4()), 1)[0]["number"]
        return in_transaction(db, issue_one)
    finally:
        db.close()


def credit_note_numbered_by_its_counter_alone(path: Path) -> str:
    """A credit note of actor a1 issued as the studio did before it knew of old numbers (at
    migration 6, before the columns today's issuing writes): the next number of its counter,
    whatever holds it already; an IntegrityError comes out as it is."""
    db = sqlite3.connect(path, isolation_level=None)
    db.row_factory = sqlite3.Row
    try:
        def issue_one(db: sqlite3.Connection) -> str:
            year = this_year()
            sequence = invoices.next_number(db, "a1", "credit_note", year)
            fields = {"id": str(uuid.uuid4()), "owner_id": "a1", "kind": "credit_note",
                      "credits": None, "customer": "Acme", "currency": "EUR",
                      "due_date": "2026-01-01", "line_items": "[]", "net": "0.00",
                      "tax": "0.00", "total": "0.00", "seller": None, "issued_at": 0.0,
                      "number": f"{invoices.series_of('credit_note', year)}-{sequence:04d}"}
            db.execute(
                "INSERT INTO invoices (id, owner_id, kind, status, number, series_year,"
                " sequence, customer, currency, due_date, line_items, net, tax, total,"
                " issued_at, frozen_sha256, created_at, updated_at) VALUES (:id, :owner_id,"
                " :kind, 'issued', :number, :year, :sequence, :customer, :currency, :due_date,"
                " :line_items, :net, :tax, :total, :issued_at, :sha, 0, 0)",
                {**fields, "year": year, "sequence": sequence,
                 "sha": invoices.frozen_sha256(db, fields, attachments=[])})
            return fields["number"]
        return in_transaction(db, issue_one)
    finally:
        db.close()


@backends.sqlite_only
def test_a_credit_note_series_numbered_before_part_two_is_continued(tmp_path: Path) -> None:
    year = this_year()
    path = tmp_path / "old.db"
    database_before_part_two(path, f"CN-{year}-0001")
    prepare(path)
    assert issue_new(path, "credit_note") == f"CN-{year}-0002"
    assert issue_new(path, "credit_note") == f"CN-{year}-0003"
    assert audit_file(path) == []


@backends.sqlite_only
def test_old_numbers_compare_as_the_series_reads_them(tmp_path: Path) -> None:
    year = this_year()
    path = tmp_path / "old.db"
    database_before_part_two(path, f"inv-{year}-0001", f"INV-{year}-0002 ", f" cn-{year}-3",
                             f"INV {year} 0009", "INV-1001")
    prepare(path)
    assert issue_new(path) == f"INV-{year}-0003"
    assert issue_new(path, "credit_note") == f"CN-{year}-0004"
    assert audit_file(path) == []


@backends.sqlite_only
def test_a_database_migrated_by_an_earlier_studio_is_repaired(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Part two continued only INV numbers written exactly so: migration 8 continues the
    series those left behind."""
    year = this_year()
    path = tmp_path / "old.db"
    database_before_part_two(path)
    with monkeypatch.context() as patched:
        patched.setattr(store, "MIGRATIONS", MIGRATIONS[:6])
        prepare(path)
    for n, number in enumerate([f"CN-{year}-0001", f"inv-{year}-0004", f"INV-{year}-0002 "]):
        execute(path, "INSERT INTO invoices (id, owner_id, status, number, customer, currency,"
                " due_date, line_items, net, tax, total, issued_at, frozen_sha256)"
                " VALUES (?, 'a1', 'issued', ?, 'Acme', 'EUR', '2026-01-01', '[]', '10.00',"
                " '0.00', '10.00', 0, 'sealed')", f"left-{n}", number)
    assert scalar(path, "SELECT COUNT(*) FROM invoice_series") == 0

    prepare(path)

    assert scalar(path, "PRAGMA user_version") == len(MIGRATIONS)
    assert issue_new(path, "credit_note") == f"CN-{year}-0002"
    assert issue_new(path) == f"INV-{year}-0006"  # the credit note's invoice took 0005


@backends.sqlite_only
def test_a_series_the_studio_numbered_already_jumps_past_an_old_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    year = this_year()
    path = tmp_path / "old.db"
    database_before_part_two(path, f"CN-{year}-0002")
    with monkeypatch.context() as patched:
        patched.setattr(store, "MIGRATIONS", MIGRATIONS[:6])
        prepare(path)
    # As the studio left it before: CN numbers given from 1, unaware of the old one.
    execute(path, "DELETE FROM invoice_series WHERE kind = 'credit_note'")
    assert credit_note_numbered_by_its_counter_alone(path) == f"CN-{year}-0001"
    with pytest.raises(sqlite3.IntegrityError):
        credit_note_numbered_by_its_counter_alone(path)

    prepare(path)

    assert issue_new(path, "credit_note") == f"CN-{year}-0003"
    assert scalar(path, "SELECT COUNT(DISTINCT number) FROM invoices") == scalar(
        path, "SELECT COUNT(*) FROM invoices WHERE number IS NOT NULL")
    # The old number holds its place: the audit reads 1, 2, 3 as one gapless series.
    assert audit_file(path) == []


# --- stored lines read as stored ------------------------------------------------------------


def legacy_invoice(db_path: Path, lines: list[dict[str, Any]], currency: str = "EUR") -> str:
    """An invoice of Ada's numbered before part two, written as the migration leaves one."""
    db = backends.connect(db_path)
    invoice_id = str(uuid.uuid4())
    try:
        def write(db: Any) -> None:
            owner = db.execute("SELECT id FROM actors WHERE email = ?", (ADA,)).fetchone()[0]
            row = invoices.sealed_legacy(db, {
                "id": invoice_id, "owner_id": owner, "number": "OLD-42", "customer": "Old",
                "currency": currency, "total": "95.00", "due_date": "2026-01-01",
                "issued_at": 0.0, "created_at": 0.0, "line_items": json.dumps(lines)})
            db.execute(
                "INSERT INTO invoices (id, owner_id, status, number, customer, currency,"
                " due_date, line_items, net, tax, total, issued_at, frozen_sha256, created_at)"
                " VALUES (:id, :owner_id, 'issued', :number, :customer, :currency, :due_date,"
                " :line_items, :net, :tax, :total, :issued_at, :frozen_sha256, :created_at)",
                row)
        in_transaction(db, write)
    finally:
        db.close()
    return invoice_id


ODD_LINES = [{"description": "", "quantity": 1, "unit_price": "100.00"},
             {"description": "Discount", "quantity": 1, "unit_price": "-5.00"},
             {"description": "Free sample", "quantity": 0, "unit_price": "3"}]


async def test_an_old_line_with_a_negative_price_or_no_description_reads_as_stored(
        studio) -> None:
    invoice_id = legacy_invoice(studio.settings.db_path, ODD_LINES)
    client = await studio.signed_in()

    got = await client.get(f"/invoices/{invoice_id}")
    assert got.status_code == 200, got.text
    lines = got.json()["line_items"]
    assert [(line["description"], line["unit_price"], line["net"]) for line in lines] == [
        ("", "100.00", "100.00"), ("Discount", "-5.00", "-5.00"), ("Free sample", "3", "0.00")]
    assert got.json()["total"] == "95.00"

    page = await client.get(f"/invoices/{invoice_id}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "-5.00" in page.text
    pdf = await client.get(f"/invoices/{invoice_id}.pdf")
    assert pdf.status_code == 200, pdf.text
    import io
    assert "Discount" in pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    review = await client.get(f"/review?purpose=summarize_invoice&invoice_id={invoice_id}")
    assert review.status_code == 200, review.text
    assert audit_database(studio.settings) == []


async def test_old_lines_whose_amounts_are_not_numbers_still_read(studio) -> None:
    invoice_id = legacy_invoice(studio.settings.db_path, [
        {"description": "Tea", "quantity": "a few", "unit_price": "NaN"},
        {"description": "Cake", "quantity": 2, "unit_price": "1e999999"},
        {"description": "Scone", "quantity": 1, "unit_price": "95.00"}])
    client = await studio.signed_in()
    got = await client.get(f"/invoices/{invoice_id}")
    assert got.status_code == 200, got.text
    assert [line["net"] for line in got.json()["line_items"]] == ["", "", "95.00"]
    pdf = await client.get(f"/invoices/{invoice_id}.pdf")
    assert pdf.status_code == 200


# --- the last resort ------------------------------------------------------------------------


async def test_a_constraint_the_checks_missed_answers_409_conflict_and_writes_nothing(
        studio, caplog: pytest.LogCaptureFixture) -> None:
    """Someone numbered an invoice by hand, around the studio, with the number it gives next:
    issuing meets the database's UNIQUE, which is a clear 409, never a 500."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    made = (await client.post("/invoices", json=DRAFT)).json()
    owner = scalar(db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    year = this_year()  # the demo's invoices may be last year's, this year's series empty
    last = scalar(db_path, "SELECT COALESCE(MAX(last), 0) FROM invoice_series WHERE"
                           " owner_id = ? AND kind = 'invoice' AND year = ?", owner, year)
    execute(db_path, "INSERT INTO invoices (id, owner_id, status, number, customer, currency,"
            " due_date, line_items, net, tax, total) VALUES ('by-hand', ?, 'issued', ?, 'X',"
            " 'EUR', '2026-01-01', '[]', '1.00', '0.00', '1.00')",
            owner, f"INV-{year}-{last + 1:04d}")
    before = database_digest(db_path)

    with caplog.at_level(logging.ERROR):
        reply = await client.post(f"/invoices/{made['id']}/issue",
                                  json={"request_id": "by-hand-clash", "revision": 1})

    assert reply.status_code == 409, reply.text
    assert reply.json()["detail"] == "conflict" and reply.json()["message"]
    assert database_digest(db_path) == before
    assert rows(db_path, "SELECT status FROM invoices WHERE id = ?", made["id"])[0][0] == "draft"
    logged = [record for record in caplog.records if record.exc_info]
    assert logged and logged[0].exc_info[0] is sqlite3.IntegrityError

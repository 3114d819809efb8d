"""`studio import`: CSV and JSON drafts, all or nothing, twice is once, dry runs write nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import ADA, database_digest, rows, scalar, studio_command

CSV = """external_id,customer,currency,due_date,description,quantity,unit_price,tax_rate
A-1,Acme Ltd,EUR,2027-01-31,Widgets,3,19.99,19
A-1,Acme Ltd,EUR,2027-01-31,Shipping,1,5.00,19
B-7,Brick & Co,JPY,2027-02-28,Bricks,100,12.5,10
"""


def run_import(db_path: Path, file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return studio_command(db_path, "import", str(file), "--owner", ADA, *extra)


def imported(db_path: Path) -> list:
    return rows(db_path, "SELECT customer, currency, net, tax, total, status, line_items"
                         " FROM invoices WHERE customer IN ('Acme Ltd', 'Brick & Co', 'Json Co')"
                         " ORDER BY customer")


def test_a_csv_makes_one_draft_per_external_id_and_twice_is_once(settings, tmp_path):
    db = settings.db_path
    source = tmp_path / "drafts.csv"
    source.write_text(CSV)
    first = run_import(db, source)
    assert first.returncode == 0, first.stderr
    assert "Imported 2 new draft(s)" in first.stdout
    found = imported(db)
    assert [(r["customer"], r["currency"], r["net"], r["tax"], r["total"], r["status"])
            for r in found] == [("Acme Ltd", "EUR", "64.97", "12.34", "77.31", "draft"),
                                ("Brick & Co", "JPY", "1250", "125", "1375", "draft")]
    assert len(json.loads(found[0]["line_items"])) == 2
    before = database_digest(db)
    again = run_import(db, source)
    assert again.returncode == 0 and "0 new draft(s)" in again.stdout
    assert "2 were imported before" in again.stdout
    assert database_digest(db) == before


def test_json_drafts_import_like_the_api_takes_them(settings, tmp_path):
    source = tmp_path / "drafts.json"
    source.write_text(json.dumps([{
        "external_id": "J-1", "customer": "Json Co", "currency": "usd",
        "due_date": "2027-03-01", "line_items": [
            {"description": "Hours", "quantity": "2.5", "unit_price": "80", "tax_rate": "0"}]}]))
    result = run_import(settings.db_path, source)
    assert result.returncode == 0, result.stderr
    [row] = imported(settings.db_path)
    assert (row["currency"], row["total"]) == ("USD", "200.00")


def test_a_bad_row_refuses_the_whole_file_and_says_where(settings, tmp_path):
    db = settings.db_path
    before = database_digest(db)
    source = tmp_path / "bad.csv"
    source.write_text(CSV + "C-1,Cee,EUR,2027-01-31,Thing,-2,1.00,0\n")
    result = run_import(db, source)
    assert result.returncode == 1
    assert "line 5: the quantity" in result.stderr and "Nothing was imported" in result.stderr
    bad_currency = tmp_path / "currency.json"
    bad_currency.write_text(json.dumps([
        {"external_id": "ok", "customer": "Fine", "currency": "EUR", "due_date": "2027-01-01",
         "line_items": [{"description": "a", "quantity": "1", "unit_price": "1"}]},
        {"external_id": "bad", "customer": "Bad", "currency": "EUX", "due_date": "2027-01-01",
         "line_items": [{"description": "a", "quantity": "1", "unit_price": "1"}]}]))
    result = run_import(db, bad_currency)
    assert result.returncode == 1
    assert "item 2 (external_id 'bad'): The currency" in result.stderr
    assert database_digest(db) == before


def test_an_external_id_imported_with_other_content_refuses_the_whole_import(
        settings, tmp_path):
    db = settings.db_path
    source = tmp_path / "drafts.csv"
    source.write_text(CSV)
    assert run_import(db, source).returncode == 0
    before = database_digest(db)
    changed = tmp_path / "changed.csv"
    changed.write_text(CSV.replace("Shipping,1,5.00", "Shipping,2,5.00")
                       + "N-1,New Co,EUR,2027-01-31,New,1,1.00,0\n")
    result = run_import(db, changed)
    assert result.returncode == 1
    assert "external_id 'A-1' was imported before with other content" in result.stderr
    assert database_digest(db) == before  # not even the new N-1


def test_a_dry_run_checks_everything_and_writes_nothing(settings, tmp_path):
    db = settings.db_path
    before = database_digest(db)
    source = tmp_path / "drafts.csv"
    source.write_text(CSV)
    result = run_import(db, source, "--dry-run")
    assert result.returncode == 0 and "Would import 2 new draft(s)" in result.stdout
    assert database_digest(db) == before
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'import'") == 0

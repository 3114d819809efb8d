"""`studio import`: CSV and JSON drafts, all or nothing, twice is once, dry runs write nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import backends
from tests.conftest import ADA, database_digest, execute, rows, scalar, studio_command

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
    assert "line 5, quantity: the quantity" in result.stderr
    assert "Nothing was imported" in result.stderr
    bad_currency = tmp_path / "currency.json"
    bad_currency.write_text(json.dumps([
        {"external_id": "ok", "customer": "Fine", "currency": "EUR", "due_date": "2027-01-01",
         "line_items": [{"description": "a", "quantity": "1", "unit_price": "1"}]},
        {"external_id": "bad", "customer": "Bad", "currency": "EUX", "due_date": "2027-01-01",
         "line_items": [{"description": "a", "quantity": "1", "unit_price": "1"}]}]))
    result = run_import(db, bad_currency)
    assert result.returncode == 1
    assert "item 2, currency: The currency" in result.stderr
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


# --- every problem, before anything is written ----------------------------------------------

HEADER = CSV.splitlines()[0]


def test_every_problem_is_listed_by_line_and_field(settings, tmp_path):
    db = settings.db_path
    before = database_digest(db)
    source = tmp_path / "bad.csv"
    source.write_text(f"{HEADER}\n"
                      "E-1,,EUR,2027-01-31,Tea,1,2.00,0\n"
                      "E-2,Fine Co,EUX,2027-02-30,Tea,0,abc,0\n"
                      "E-3,Good Co,EUR,2027-01-31,Tea,1,2.00,0\n")
    result = run_import(db, source)
    assert result.returncode == 1
    problems = result.stderr.splitlines()
    for where in ("line 2, customer:", "line 3, currency:", "line 3, due_date:",
                  "line 3, quantity:", "line 3, unit_price:"):
        assert sum(line.startswith(where) for line in problems) == 1, (where, result.stderr)
    assert "5 problem(s)" in result.stderr and "line 4" not in result.stderr
    assert database_digest(db) == before


def test_json_problems_name_the_item_and_the_field(settings, tmp_path):
    source = tmp_path / "bad.json"
    source.write_text(json.dumps([
        {"external_id": "J-1", "customer": "", "currency": "EUX", "due_date": "soon",
         "line_items": [{"description": "", "quantity": "1", "unit_price": "one"}]},
        "not a draft",
        {"external_id": "J-3", "customer": "Ok", "currency": "EUR", "due_date": "2027-01-01",
         "line_items": []}]))
    result = run_import(settings.db_path, source)
    assert result.returncode == 1
    for where in ("item 1, customer:", "item 1, currency:", "item 1, due_date:",
                  "item 1, line 1 description:", "item 1, line 1 unit_price:",
                  "item 2:", "item 3, line_items:"):
        assert where in result.stderr, (where, result.stderr)


def test_a_field_over_the_csv_limit_and_deep_json_are_clear_messages(settings, tmp_path):
    db = settings.db_path
    before = database_digest(db)
    long_field = tmp_path / "long.csv"
    long_field.write_text(f"{HEADER}\nL-1,Co,EUR,2027-01-31,{'x' * 140_000},1,1,0\n")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for source, said in ((long_field, "line 2"), (deep, "nests")):
        result = run_import(db, source)
        assert result.returncode == 1, result.stdout
        assert "Traceback" not in result.stderr and said in result.stderr, result.stderr
        assert "Nothing was imported" in result.stderr
    assert database_digest(db) == before


def test_a_file_over_the_stated_size_is_refused_before_it_is_read(settings, tmp_path):
    from studio.ops import imports

    source = tmp_path / "many.csv"
    source.write_text(HEADER + "\n" + "".join(
        f"M-{n},Co,EUR,2027-01-31,Tea,1,1,0\n" for n in range(imports.MAX_DRAFTS + 1)))
    result = run_import(settings.db_path, source)
    assert result.returncode == 1
    assert f"at most {imports.MAX_DRAFTS:,} drafts" in result.stderr
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM invoices WHERE customer = 'Co'") == 0


def test_the_write_transaction_only_writes_rows_checked_before_it(settings, tmp_path,
                                                                   monkeypatch):
    """Every check and every normalisation runs before BEGIN; inside it, only inserts."""
    from studio.billing import invoices, money
    from studio.ops import imports
    from studio.store.db import connect_to

    db = connect_to(settings)
    checked_inside: list[str] = []
    for module, name in ((invoices, "parse_draft"), (money, "parse_line")):
        original = getattr(module, name)

        def watched(*args, _original=original, _name=name, **kwargs):
            if db.in_transaction:
                checked_inside.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, watched)
    statements: list[str] = []
    backends.trace(db, statements.append)
    source = tmp_path / "drafts.csv"
    source.write_text(HEADER + "\n" + "".join(
        f"W-{n},Co {n},EUR,2027-01-31,Tea,{n + 1},1.50,19\n" for n in range(300)))
    owner = scalar(settings.db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    try:
        outcome = imports.import_drafts(db, owner, imports.read_file(source))
        assert (outcome.made, outcome.already) == (300, 0)
        assert checked_inside == []
        begun = [n for n, sql in enumerate(statements) if sql.startswith("BEGIN IMMEDIATE")]
        assert len(begun) == 1
        # Importing the same file again writes nothing and takes no write lock at all.
        statements.clear()
        again = imports.import_drafts(db, owner, imports.read_file(source))
        assert (again.made, again.already) == (0, 300)
        assert not any(sql.startswith("BEGIN IMMEDIATE") for sql in statements)
    finally:
        db.close()
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM invoices WHERE customer LIKE 'Co %'"
                                    " AND status = 'draft'") == 300
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM request_bindings"
                                    " WHERE kind = 'import'") == 300
    [row] = rows(settings.db_path, "SELECT net, tax, total FROM invoices WHERE customer = 'Co 1'")
    assert tuple(row) == ("3.00", "0.57", "3.57")


def test_json_numbers_are_read_exactly_as_the_api_reads_them(settings, tmp_path):
    source = tmp_path / "exact.json"
    source.write_text('[{"external_id": "N-1", "customer": "Json Co", "currency": "EUR",'
                      ' "due_date": "2027-03-01", "line_items": [{"description": "Big",'
                      ' "quantity": 1, "unit_price": 12345678901.123456, "tax_rate": 0}]}]')
    result = run_import(settings.db_path, source)
    assert result.returncode == 0, result.stderr
    [row] = imported(settings.db_path)
    assert json.loads(row["line_items"])[0]["unit_price"] == "12345678901.123456"
    assert row["total"] == "12345678901.12"
    nan = tmp_path / "nan.json"
    nan.write_text('[{"external_id": "N-2", "customer": "Json Co", "currency": "EUR",'
                   ' "due_date": "2027-03-01", "line_items": [{"description": "Big",'
                   ' "quantity": NaN, "unit_price": 1}]}]')
    refused = run_import(settings.db_path, nan)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr


# --- customers learned ------------------------------------------------------------------------

LEARNING = HEADER + ",customer_email,customer_vat_id,customer_country\n" + """\
L-1,Learned Co,EUR,2027-01-31,Tea,1,2.00,0,tea@learned.example,DE 136 695 976,de
L-1,Learned Co,EUR,2027-01-31,Cake,1,3.00,0,tea@learned.example,DE 136 695 976,de
L-2,LEARNED CO,EUR,2027-02-28,More tea,1,2.00,0,,,
L-3,Known Ltd,EUR,2027-02-28,Work,1,9.00,0,other@known.example,,FR
"""


def learned(db_path: Path) -> dict[str, dict]:
    return {row["name"]: dict(row) for row in rows(
        db_path, "SELECT customers.* FROM customers JOIN actors ON actors.id = owner_id"
                 " WHERE actors.email = ? AND name IN ('Learned Co', 'Known Ltd', 'known ltd')",
        ADA)}


def customer_of(db_path: Path, external_id: str) -> str | None:
    return scalar(db_path, "SELECT invoices.customer_id FROM invoices JOIN request_bindings"
                           " ON request_bindings.target_id = invoices.id"
                           " WHERE request_bindings.kind = 'import' AND request_id = ?",
                  external_id)


def test_an_import_names_the_customer_it_finds_or_makes_and_twice_makes_none(settings,
                                                                              tmp_path):
    db = settings.db_path
    owner = scalar(db, "SELECT id FROM actors WHERE email = ?", ADA)
    execute(db, "INSERT INTO customers (id, owner_id, name, email, created_at, updated_at)"
                " VALUES ('00000000-0000-4000-8000-00000000c0de', ?, 'known ltd',"
                " 'kept@known.example', 0, 0)", owner)
    source = tmp_path / "learning.csv"
    source.write_text(LEARNING)
    result = run_import(db, source)
    assert result.returncode == 0, result.stderr
    customers = learned(db)
    # One customer for the name in any case, with the details the file gives; the one there
    # already is named, and keeps what the person gave it.
    assert set(customers) == {"Learned Co", "known ltd"}
    made = customers["Learned Co"]
    assert (made["email"], made["vat_id"], made["country"], made["payment_terms_days"]) == \
        ("tea@learned.example", "DE136695976", "DE", 14)
    assert customers["known ltd"]["email"] == "kept@known.example"
    assert customer_of(db, "L-1") == customer_of(db, "L-2") == made["id"]
    assert customer_of(db, "L-3") == "00000000-0000-4000-8000-00000000c0de"
    # The draft keeps the name as the file gives it.
    assert scalar(db, "SELECT COUNT(*) FROM invoices WHERE customer = 'LEARNED CO'") == 1

    before = database_digest(db)
    again = run_import(db, source)
    assert again.returncode == 0 and "0 new draft(s)" in again.stdout
    assert database_digest(db) == before
    # A new draft in a later file names the customer made before.
    later = tmp_path / "later.csv"
    later.write_text(HEADER + "\nL-9,learned co,EUR,2027-03-31,Tea,1,2.00,0\n")
    assert run_import(db, later).returncode == 0
    assert customer_of(db, "L-9") == made["id"]
    assert scalar(db, "SELECT COUNT(*) FROM customers WHERE lower(name) = 'learned co'") == 1


def test_an_import_says_how_many_customers_it_made(settings, tmp_path):
    db = settings.db_path
    owner = scalar(db, "SELECT id FROM actors WHERE email = ?", ADA)
    execute(db, "INSERT INTO customers (id, owner_id, name, created_at, updated_at)"
                " VALUES ('00000000-0000-4000-8000-00000000c0de', ?, 'known ltd', 0, 0)", owner)
    source = tmp_path / "learning.csv"
    source.write_text(LEARNING)
    customers_before = scalar(db, "SELECT COUNT(*) FROM customers WHERE owner_id = ?", owner)
    first = run_import(db, source)
    assert first.returncode == 0, first.stderr
    # Learned Co in two spellings is one customer; Known Ltd was there already.
    assert "Imported 3 new draft(s) and 1 new customer(s)" in first.stdout
    assert scalar(db, "SELECT COUNT(*) FROM customers WHERE owner_id = ?", owner) \
        == customers_before + 1
    again = run_import(db, source)
    assert again.returncode == 0 and "Imported 0 new draft(s) and 0 new customer(s)" \
        in again.stdout


def test_json_drafts_learn_their_customers_too(settings, tmp_path):
    source = tmp_path / "drafts.json"
    source.write_text(json.dumps([{
        "external_id": "JL-1", "customer": "Learned Co", "currency": "EUR",
        "due_date": "2027-03-01", "customer_email": "json@learned.example",
        "customer_country": "AT", "customer_id": "not one of mine",
        "line_items": [{"description": "Hours", "quantity": "1", "unit_price": "8"}]}]))
    result = run_import(settings.db_path, source)
    assert result.returncode == 0, result.stderr
    made = learned(settings.db_path)["Learned Co"]
    assert (made["email"], made["country"]) == ("json@learned.example", "AT")
    assert customer_of(settings.db_path, "JL-1") == made["id"]


def test_bad_customer_details_are_named_by_line_and_field_and_nothing_is_imported(settings,
                                                                                   tmp_path):
    db = settings.db_path
    before = database_digest(db)
    source = tmp_path / "bad.csv"
    source.write_text(HEADER + ",customer_vat_id,customer_country,customer_email\n"
                      "B-1,Bad Co,EUR,2027-01-31,Tea,1,2.00,0,DE123456789,DE,ok@bad.example\n"
                      "B-2,Bad Co 2,EUR,2027-01-31,Tea,1,2.00,0,,XX,nope\n"
                      "B-3,Bad Co 3,EUR,2027-01-31,Tea,1,2.00,0,,,a@b.example\n"
                      "B-3,Bad Co 3,EUR,2027-01-31,Cake,1,2.00,0,,,c@d.example\n")
    result = run_import(db, source)
    assert result.returncode == 1
    for said in ("line 2, customer_vat_id: The VAT ID DE123456789 is not a valid",
                 "line 3, customer_country: The country must be",
                 "line 3, customer_email: The email must be",
                 "line 5, customer_email: 'c@d.example' differs from line 4"):
        assert said in result.stderr, result.stderr
    unknown = tmp_path / "unknown.csv"
    unknown.write_text(HEADER + ",customer_phone\nU-1,U,EUR,2027-01-31,Tea,1,2.00,0,123\n")
    refused = run_import(db, unknown)
    assert refused.returncode == 1 and "customer_email" in refused.stderr
    assert database_digest(db) == before


def test_a_draft_imported_before_drafts_had_notes_is_still_the_same_import(settings, tmp_path):
    """The binding's content of a draft imported before supply dates, notes and customers by
    id holds none of them, and the same file again is the same import."""
    from studio.billing import invoices
    from studio.store import bindings

    db = settings.db_path
    source = tmp_path / "old.csv"
    source.write_text(HEADER + "\nO-1,Old Co,EUR,2027-01-31,Tea,1,2.00,0\n")
    fields = invoices.parse_draft({"customer": "Old Co", "currency": "EUR",
                                   "due_date": "2027-01-31", "line_items": [
                                       {"description": "Tea", "quantity": "1",
                                        "unit_price": "2.00", "tax_rate": "0"}]})
    then = {name: fields[name] for name in ("customer", "currency", "due_date", "line_items",
                                            "net", "tax", "total")}
    assert run_import(db, source).returncode == 0
    assert scalar(db, "SELECT fingerprint FROM request_bindings WHERE kind = 'import'"
                      " AND request_id = 'O-1'") == bindings.fingerprint(then)

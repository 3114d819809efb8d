"""Drafts, issuing and credit notes through the API, asserted on the database."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pypdf
import pytest

from studio.accounts.auth import add_actor
from studio.billing import invoices, money, profiles
from studio.ops.audit import audit_database, audit_file
from studio.store.db import prepare_database
from studio.store.dialect import dialect_of
from studio.store.migrations.sqlite import MIGRATIONS
from studio.store.sqlite import prepare
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import (
    ADA,
    BEN,
    database_digest,
    days_ahead,
    execute,
    rows,
    scalar,
    studio_command,
)

pytestmark = pytest.mark.anyio


def draft_body(**changes: Any) -> dict[str, Any]:
    return {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
            "line_items": [{"description": "Widgets", "quantity": "3", "unit_price": "19.99",
                            "tax_rate": "19"}], **changes}


async def make_draft(client: Any, **changes: Any) -> dict[str, Any]:
    reply = await client.post("/invoices", json=draft_body(**changes))
    assert reply.status_code == 201, reply.text
    return reply.json()


async def issue(client: Any, invoice: dict[str, Any], request_id: str | None = None) -> Any:
    return await client.post(f"/invoices/{invoice['id']}/issue", json={
        "request_id": request_id or str(uuid.uuid4()), "revision": invoice["revision"]})


def series_last(db_path: Any, kind: str = "invoice") -> int:
    return scalar(db_path, "SELECT COALESCE(MAX(last), 0) FROM invoice_series WHERE kind = ?"
                           " AND owner_id = (SELECT id FROM actors WHERE email = ?)", kind, ADA)


# --- money -----------------------------------------------------------------------------------


def totals_of(currency: str, *lines: tuple[str, str, str]) -> money.Totals:
    parsed = money.parse_lines([{"description": "x", "quantity": q, "unit_price": p,
                                 "tax_rate": r} for q, p, r in lines])
    return money.totals(parsed, currency)


def test_each_line_rounds_half_up_to_the_currencys_minor_units() -> None:
    assert totals_of("EUR", ("1", "1.005", "0")).total == Decimal("1.01")
    nineteen = totals_of("EUR", ("3", "19.99", "19"))
    assert (nineteen.net, nineteen.tax, nineteen.total) == (
        Decimal("59.97"), Decimal("11.39"), Decimal("71.36"))
    yen = totals_of("JPY", ("3", "333.5", "10"))
    assert str(yen.net) == "1001" and str(yen.tax) == "100" and str(yen.total) == "1101"
    assert str(totals_of("KWD", ("1", "1.2345", "0")).total) == "1.235"


async def test_a_draft_answers_with_the_totals_the_server_computed(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    assert (made["status"], made["number"], made["revision"], made["kind"]) == (
        "draft", None, 1, "invoice")
    assert (made["net"], made["tax"], made["total"]) == ("59.97", "11.39", "71.36")
    stored = rows(studio.settings.db_path, "SELECT * FROM invoices WHERE id = ?", made["id"])[0]
    assert (stored["net"], stored["tax"], stored["total"]) == ("59.97", "11.39", "71.36")
    assert stored["number"] is None and stored["status"] == "draft"


BAD_DRAFTS = [
    ("unknown currency", draft_body(currency="EUX")),
    ("currency as number", draft_body(currency=978)),
    ("bad date", draft_body(due_date="2027-02-30")),
    ("date as text", draft_body(due_date="next week")),
    ("no customer", draft_body(customer="")),
    ("long customer", draft_body(customer="x" * 201)),
    ("empty lines", draft_body(line_items=[])),
    ("201 lines", draft_body(line_items=[{"description": "a", "quantity": "1",
                                          "unit_price": "1", "tax_rate": "0"}] * 201)),
    ("NaN price", draft_body(line_items=[{"description": "a", "quantity": "1",
                                          "unit_price": "NaN", "tax_rate": "0"}])),
    ("negative price", draft_body(line_items=[{"description": "a", "quantity": "1",
                                               "unit_price": "-5", "tax_rate": "0"}])),
    ("zero quantity", draft_body(line_items=[{"description": "a", "quantity": "0",
                                              "unit_price": "5", "tax_rate": "0"}])),
    ("absurd quantity", draft_body(line_items=[{"description": "a", "quantity": "9" * 40,
                                                "unit_price": "5", "tax_rate": "0"}])),
    ("exponent", draft_body(line_items=[{"description": "a", "quantity": "1",
                                         "unit_price": "1e999999", "tax_rate": "0"}])),
    ("tax over 100", draft_body(line_items=[{"description": "a", "quantity": "1",
                                             "unit_price": "5", "tax_rate": "100.5"}])),
    ("line not an object", draft_body(line_items=["a"])),
    ("a total past what any sum can hold", draft_body(currency="KWD", line_items=[
        {"description": "a", "quantity": "999999999999.999999",
         "unit_price": "999999999999.999999", "tax_rate": "100"}] * 60)),
    ("no description", draft_body(line_items=[{"quantity": "1", "unit_price": "5"}])),
]


@pytest.mark.parametrize("name, body", BAD_DRAFTS, ids=[name for name, _ in BAD_DRAFTS])
async def test_a_bad_draft_is_422_and_changes_nothing(studio, name: str, body: dict) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.post("/invoices", json=body)
    assert reply.status_code == 422, (name, reply.text)
    assert reply.json()["detail"] == "invalid_body" and reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


async def test_json_floats_nan_and_infinity_are_refused(studio) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    for raw in ('NaN', '1e999999', '-1'):
        text = json.dumps(draft_body()).replace('"19.99"', raw)
        reply = await client.post("/invoices", content=text,
                                  headers={"Content-Type": "application/json"})
        assert reply.status_code == 422, raw
    assert database_digest(studio.settings.db_path) == before


async def test_a_lost_reply_on_a_new_draft_makes_one_draft(studio) -> None:
    client = await studio.signed_in()
    body = draft_body(request_id="new-draft-1")
    first = await client.post("/invoices", json=body)
    again = await client.post("/invoices", json=body)
    other = await client.post("/invoices", json={**body, "customer": "Someone else"})
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert first.json()["id"] == again.json()["id"]
    assert other.json()["detail"] == "request_id_conflict"
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM invoices WHERE customer = 'Acme Ltd'") == 1


async def test_an_edit_of_a_stale_revision_is_409_and_keeps_the_newer_one(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    first_tab = await client.patch(f"/invoices/{made['id']}",
                                   json={"revision": 1, "customer": "First tab"})
    assert first_tab.status_code == 200 and first_tab.json()["revision"] == 2
    second_tab = await client.patch(f"/invoices/{made['id']}",
                                    json={"revision": 1, "customer": "Second tab"})
    assert second_tab.status_code == 409 and second_tab.json()["detail"] == "draft_changed"
    stored = rows(studio.settings.db_path, "SELECT customer, revision FROM invoices"
                                           " WHERE id = ?", made["id"])[0]
    assert (stored["customer"], stored["revision"]) == ("First tab", 2)


async def test_a_deleted_draft_is_gone_from_every_route(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    deleted = await client.delete(f"/invoices/{made['id']}")
    assert deleted.status_code == 200 and deleted.json()["status"] == "deleted"
    assert (await client.get(f"/invoices/{made['id']}")).status_code == 404
    assert made["id"] not in {i["id"] for i in (await client.get("/invoices")).json()}


async def test_resending_the_id_of_a_draft_deleted_since_makes_no_second_draft(studio) -> None:
    client = await studio.signed_in()
    body = draft_body(request_id="deleted-later", customer="Deleted Later Ltd")
    made = await client.post("/invoices", json=body)
    assert (await client.delete(f"/invoices/{made.json()['id']}")).status_code == 200
    again = await client.post("/invoices", json=body)
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["status"]) == (made.json()["id"], "deleted")
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices"
                                           " WHERE customer = 'Deleted Later Ltd'") == 1


# --- issuing ---------------------------------------------------------------------------------


async def test_issuing_has_three_outcomes_new_replay_and_conflict(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    last = series_last(studio.settings.db_path)

    first = await issue(client, made, "issue-1")
    again = await issue(client, made, "issue-1")
    other = await client.post(f"/invoices/{made['id']}/issue",
                              json={"request_id": "issue-1", "revision": 2})

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    number = first.json()["number"]
    assert number == f"INV-{first.json()['issued_at'][:4]}-{last + 1:04d}"
    assert again.json() == first.json()
    assert other.json()["detail"] == "request_id_conflict"
    assert series_last(studio.settings.db_path) == last + 1
    stored = rows(studio.settings.db_path, "SELECT * FROM invoices WHERE id = ?", made["id"])[0]
    assert (stored["status"], stored["number"], stored["sequence"]) == ("issued", number,
                                                                        last + 1)
    assert json.loads(stored["seller"])["name"] == "Ada Lovelace Design"
    assert audit_database(studio.settings) == []


def test_each_year_numbers_from_one_in_its_own_series(tmp_path) -> None:
    path = tmp_path / "studio.db"
    prepare_database(backends.settings(path))
    db = backends.connect(path)
    new_year = 1798761600.0  # 2027-01-01T00:00:00Z

    def seed(db: sqlite3.Connection) -> tuple[str, list[str]]:
        actor_id = add_actor(db, "years@example.com", "x")
        profiles.save(db, actor_id, {"name": "Years Ltd", "address": "", "vat_id": ""})
        fields = invoices.parse_draft(draft_body())
        return actor_id, [invoices.create_draft(db, actor_id, fields, None)[0]["id"]
                          for _ in range(4)]

    actor_id, drafts = in_transaction(db, seed)
    numbers = [in_transaction(db, invoices.issue, actor_id, draft, f"year-{n}", 1, when)[0]
               ["number"] for n, (draft, when) in enumerate(zip(drafts, [
                   new_year - 2, new_year - 1, new_year, new_year + 1], strict=True))]
    assert numbers == ["INV-2026-0001", "INV-2026-0002", "INV-2027-0001", "INV-2027-0002"]
    assert [tuple(row) for row in db.execute(
        "SELECT year, last FROM invoice_series ORDER BY year")] == [(2026, 2), (2027, 2)]
    db.close()
    assert audit_database(backends.settings(path)) == []


async def test_issuing_an_issued_invoice_is_409_naming_its_number(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    number = (await issue(client, made)).json()["number"]
    twice = await issue(client, made)
    assert twice.status_code == 409 and twice.json()["detail"] == "invoice_issued"
    assert number in twice.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices WHERE number = ?",
                  number) == 1


async def test_issuing_a_stale_revision_is_409_and_takes_no_number(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    await client.patch(f"/invoices/{made['id']}", json={"revision": 1, "customer": "Edited"})
    last = series_last(studio.settings.db_path)
    stale = await issue(client, made)
    assert stale.status_code == 409 and stale.json()["detail"] == "draft_changed"
    assert series_last(studio.settings.db_path) == last
    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  made["id"]) == "draft"


async def test_issuing_without_a_seller_name_is_422_and_takes_no_number(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    saved = await client.post("/settings", json={"name": "", "address": "Somewhere"})
    assert saved.status_code == 200
    last = series_last(studio.settings.db_path)
    before = database_digest(studio.settings.db_path)
    refused = await issue(client, made)
    assert refused.status_code == 422 and refused.json()["detail"] == "invoice_incomplete"
    assert database_digest(studio.settings.db_path) == before
    assert series_last(studio.settings.db_path) == last


async def test_a_later_change_of_address_never_rewrites_an_issued_invoice(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    await issue(client, made)
    await client.post("/settings", json={"name": "Ada Ltd", "address": "New street 1"})
    seller = (await client.get(f"/invoices/{made['id']}")).json()["seller"]
    assert seller["name"] == "Ada Lovelace Design" and "Analytical" in seller["address"]


async def test_patch_and_delete_of_an_issued_invoice_are_409_and_change_nothing(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    await issue(client, made)
    before = database_digest(studio.settings.db_path)
    patched = await client.patch(f"/invoices/{made['id']}",
                                 json={"revision": 1, "customer": "Changed"})
    deleted = await client.delete(f"/invoices/{made['id']}")
    assert patched.status_code == deleted.status_code == 409
    assert patched.json()["detail"] == deleted.json()["detail"] == "invoice_issued"
    assert database_digest(studio.settings.db_path) == before


@pytest.mark.parametrize("statement", [
    "UPDATE invoices SET total = '0.01' WHERE id = ?",
    "UPDATE invoices SET customer = 'Someone else' WHERE id = ?",
    "UPDATE invoices SET line_items = '[]' WHERE id = ?",
    "UPDATE invoices SET status = 'draft', number = NULL WHERE id = ?",
    "UPDATE invoices SET seller = NULL WHERE id = ?",
    "DELETE FROM invoices WHERE id = ?",
])
async def test_the_database_refuses_to_change_an_issued_invoice(studio, statement: str) -> None:
    invoice_id = studio.invoice_ids()[0]
    before = database_digest(studio.settings.db_path)
    with pytest.raises(sqlite3.IntegrityError, match="invoice_frozen"):
        execute(studio.settings.db_path, statement, invoice_id)
    assert database_digest(studio.settings.db_path) == before
    # The summary is the studio's note, not part of the document: it stays writable.
    execute(studio.settings.db_path, "UPDATE invoices SET summary = 'note' WHERE id = ?",
            invoice_id)


# --- credit notes ----------------------------------------------------------------------------


async def test_credit_notes_issue_in_their_own_series_and_never_exceed_the_invoice(
        studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    invoice_number = (await issue(client, made)).json()["number"]
    too_early = await client.post(f"/invoices/{(await make_draft(client))['id']}/credit-note")
    assert too_early.status_code == 409 and too_early.json()["detail"] == "invoice_not_issued"

    note = (await client.post(f"/invoices/{made['id']}/credit-note",
                              json={"request_id": "cn-1"})).json()
    assert (note["kind"], note["credits"], note["total"]) == ("credit_note", made["id"], "71.36")
    partial = await client.patch(f"/invoices/{note['id']}", json={
        "revision": 1, "line_items": [{"description": "Widgets returned", "quantity": "1",
                                       "unit_price": "19.99", "tax_rate": "19"}]})
    assert partial.json()["total"] == "23.79"
    other_currency = await client.patch(f"/invoices/{note['id']}",
                                        json={"revision": 2, "currency": "USD"})
    assert other_currency.status_code == 422
    issued = await issue(client, partial.json())
    assert issued.status_code == 201
    assert issued.json()["number"].startswith("CN-") and issued.json()["number"].endswith("-0001")

    rest = (await client.post(f"/invoices/{made['id']}/credit-note")).json()
    before = database_digest(studio.settings.db_path)
    refused = await issue(client, rest)
    assert refused.status_code == 422 and refused.json()["detail"] == "credit_exceeds_invoice"
    assert "47.57" in refused.json()["message"]  # what is left to credit
    assert database_digest(studio.settings.db_path) == before
    assert series_last(studio.settings.db_path, "credit_note") == 1

    pdf = await client.get(f"/invoices/{note['id']}.pdf")
    text = pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    assert issued.json()["number"] in text and invoice_number in text and "23.79" in text
    assert audit_database(studio.settings) == []


# --- documents -------------------------------------------------------------------------------


async def test_the_pdf_holds_the_number_and_total_and_a_drafts_pdf_is_409(studio) -> None:
    client = await studio.signed_in()
    made = await make_draft(client)
    draft_pdf = await client.get(f"/invoices/{made['id']}.pdf")
    assert draft_pdf.status_code == 409 and draft_pdf.json()["detail"] == "invoice_not_issued"
    number = (await issue(client, made)).json()["number"]
    pdf = await client.get(f"/invoices/{made['id']}.pdf")
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    text = pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    for expected in (number, "71.36", "11.39", "Acme Ltd", "Ada Lovelace Design",
                     "19 % €59.97 €11.39"):
        assert expected in text, expected
    printable = await client.get(f"/invoices/{made['id']}/document",
                                 headers={"Accept": "text/html"})
    assert printable.status_code == 200 and number in printable.text


# --- ownership -------------------------------------------------------------------------------


async def test_another_actors_invoice_is_404_on_every_route_like_a_made_up_id(studio) -> None:
    ben = await studio.signed_in(BEN)
    ada = await studio.signed_in(ADA)
    draft = await make_draft(ben)
    issued = studio.invoice_ids(BEN)[0]
    made_up = str(uuid.uuid4())
    before = database_digest(studio.settings.db_path)
    for target in (draft["id"], issued, made_up):
        answers = [
            await ada.get(f"/invoices/{target}"),
            await ada.patch(f"/invoices/{target}", json={"revision": 1, "customer": "x"}),
            await ada.delete(f"/invoices/{target}"),
            await ada.post(f"/invoices/{target}/edit", json={"revision": 1}),
            await ada.post(f"/invoices/{target}/delete"),
            await ada.get(f"/invoices/{target}/issue"),
            await ada.post(f"/invoices/{target}/issue", json={"request_id": "r", "revision": 1}),
            await ada.post(f"/invoices/{target}/credit-note"),
            await ada.get(f"/invoices/{target}.pdf"),
            await ada.get(f"/invoices/{target}/document"),
        ]
        assert [a.status_code for a in answers] == [404] * len(answers), target
        assert {a.json()["detail"] for a in answers} == {"invoice_not_found"}
    assert database_digest(studio.settings.db_path) == before


# --- migration and audit ---------------------------------------------------------------------


def database_before_part_two(path: Path, number: str, total: str, quantity: int) -> None:
    """A database as the studio left it before part two: one actor, one invoice."""
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode = WAL")
    for script in MIGRATIONS[:2]:
        assert isinstance(script, str)
        old.executescript(script)
    old.execute("PRAGMA user_version = 2")
    old.execute("INSERT INTO actors VALUES ('a1', 'old@example.com', 'x', 0)")
    old.execute("INSERT INTO invoices (id, owner_id, number, customer, currency, total, due_date,"
                " line_items, summary) VALUES ('i1', 'a1', ?, 'Acme', 'EUR', ?,"
                " '2026-01-01', ?, 'kept')",
                (number, total, json.dumps([{"description": "Tea", "quantity": quantity,
                                             "unit_price": "10.00"}])))
    old.close()


@backends.sqlite_only
def test_invoices_made_before_part_two_keep_their_numbers_and_count_as_issued(tmp_path) -> None:
    path = tmp_path / "old.db"
    database_before_part_two(path, "OLD-7", "30.00", 3)

    prepare(path)

    row = rows(path, "SELECT * FROM invoices WHERE id = 'i1'")[0]
    assert (row["number"], row["status"], row["total"], row["net"], row["tax"],
            row["summary"]) == ("OLD-7", "issued", "30.00", "30.00", "0.00", "kept")
    assert audit_file(path) == []
    with pytest.raises(sqlite3.IntegrityError):
        execute(path, "UPDATE invoices SET total = '1' WHERE id = 'i1'")


@backends.sqlite_only
def test_an_old_number_that_reads_like_a_series_is_continued_never_repeated(tmp_path) -> None:
    path = tmp_path / "old.db"
    year = time.gmtime().tm_year
    database_before_part_two(path, f"INV-{year}-0007", "10.00", 1)
    prepare(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.row_factory = sqlite3.Row
    try:
        def issue_one(db: sqlite3.Connection) -> str:
            profiles.save(db, "a1", {"name": "Old Co", "address": "", "vat_id": ""})
            draft, _ = invoices.create_draft(db, "a1", invoices.parse_draft(draft_body()), None)
            return invoices.issue(db, "a1", draft["id"], "r1", 1)[0]["number"]
        assert in_transaction(db, issue_one) == f"INV-{year}-0008"
    finally:
        db.close()
    assert audit_file(path) == []


def run_audit(db_path: Any) -> subprocess.CompletedProcess[str]:
    return studio_command(db_path, "audit")


async def test_studio_audit_finds_a_gap_a_changed_invoice_and_an_excess_credit(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    made = [await make_draft(client) for _ in range(3)]
    for invoice in made:
        await issue(client, invoice)
    note = (await client.post(f"/invoices/{made[2]['id']}/credit-note")).json()
    assert (await issue(client, note)).status_code == 201  # a whole credit: within its total
    assert run_audit(db_path).returncode == 0

    def tamper(db: Any) -> None:
        # Only someone going around the studio, triggers and all, could do this.
        for statement in FREEZE_DROPPED[dialect_of(db).name]:
            db.execute(statement)
        db.execute("DELETE FROM balances WHERE invoice_id = ?", (made[1]["id"],))
        db.execute("DELETE FROM invoices WHERE id = ?", (made[1]["id"],))
        db.execute("UPDATE invoices SET total = '1.00' WHERE id = ?", (made[2]["id"],))

    await studio.studio.db.write(tamper)
    result = run_audit(db_path)
    assert result.returncode == 1
    assert "not gapless" in result.stdout and "frozen SHA-256" in result.stdout
    # The credit note of 71.36 now exceeds the 1.00 its invoice was changed to.
    assert "more than its total 1.00" in result.stdout
    found = audit_database(studio.settings)
    assert len(found) >= 3, found


# The triggers that freeze issued invoices, dropped as someone with the database's own tools
# could: SQLite names a trigger per table, PostgreSQL one trigger for update and delete.
FREEZE_DROPPED = {
    "sqlite": ["DROP TRIGGER issued_invoice_is_frozen", "DROP TRIGGER issued_invoice_is_kept"],
    "postgresql": ["DROP TRIGGER issued_invoice_is_frozen ON invoices"],
}


def test_seeded_demo_passes_the_audit(settings) -> None:
    assert audit_database(settings) == []
    db = backends.connect(settings.db_path)
    try:
        assert in_transaction(db, lambda c: c.execute(
            "SELECT COUNT(*) FROM invoices WHERE status = 'draft'").fetchone()[0]) == 2
    finally:
        db.close()

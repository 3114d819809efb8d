"""The full invoice: a customer named by id, a supply date, notes, a discount per line, the
tax per rate exact; issuing keeps the buyer and the seller as they were and settles the
balance. Asserted on the database as well as the answers, on both backends."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest

from studio.billing import invoices
from studio.ops.audit import audit_database
from studio.store import bindings
from studio.store.dialect import dialect_of
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
from tests.test_invoices import FREEZE_DROPPED

pytestmark = pytest.mark.anyio


def actor_id(db_path: Any, email: str = ADA) -> str:
    return scalar(db_path, "SELECT id FROM actors WHERE email = ?", email)


def add_customer(db_path: Any, email: str = ADA, **changes: str) -> str:
    """A customer of the actor, written as the customers' own unit writes one."""
    customer = {"name": "Acme GmbH", "email": "billing@acme.example",
                "address": "Hauptstr. 5\n10115 Berlin", "country": "DE", "vat_id": "DE123456789",
                **changes}
    customer_id = str(uuid.uuid4())
    execute(db_path, "INSERT INTO customers (id, owner_id, name, email, address, country,"
                     " vat_id, currency, created_at, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, 'EUR', 0, 0)",
            customer_id, actor_id(db_path, email), customer["name"], customer["email"],
            customer["address"], customer["country"], customer["vat_id"])
    return customer_id


def line(description: str, quantity: str, price: str, rate: str, discount: str | None = None
         ) -> dict[str, str]:
    made = {"description": description, "quantity": quantity, "unit_price": price,
            "tax_rate": rate}
    return made if discount is None else {**made, "discount_percent": discount}


def full_body(**changes: Any) -> dict[str, Any]:
    return {"customer": "Acme GmbH", "currency": "EUR", "due_date": days_ahead(61),
            "supply_date": "2026-12-15", "notes": "Project Babbage, phase 2.\nThank you!",
            "line_items": [line("Design", "3", "19.99", "19", "10"),
                           line("Print run", "2", "12.50", "7")], **changes}


async def issue(client: Any, invoice: dict[str, Any], headers: dict[str, str] | None = None
                ) -> Any:
    return await client.post(f"/invoices/{invoice['id']}/issue", headers=headers, json={
        "request_id": str(uuid.uuid4()), "revision": invoice["revision"]})


# --- drafts ----------------------------------------------------------------------------------


async def test_a_draft_keeps_its_customer_supply_date_notes_and_discounts(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path)
    made = await client.post("/invoices", json=full_body(customer_id=customer_id))
    assert made.status_code == 201, made.text
    draft = made.json()
    assert (draft["customer_id"], draft["supply_date"], draft["notes"]) == (
        customer_id, "2026-12-15", "Project Babbage, phase 2.\nThank you!")
    assert [item["discount_percent"] for item in draft["line_items"]] == ["10", "0"]
    # 3 x 19.99 less 10 % is 53.973, rounded once: 53.97.
    assert [item["net"] for item in draft["line_items"]] == ["53.97", "25.00"]
    assert (draft["net"], draft["tax"], draft["total"]) == ("78.97", "12.00", "90.97")
    assert (draft["buyer"], draft["issue_date"]) == (None, None)

    [stored] = rows(db_path, "SELECT * FROM invoices WHERE id = ?", draft["id"])
    assert (stored["customer_id"], stored["supply_date"], stored["notes"]) == (
        customer_id, "2026-12-15", "Project Babbage, phase 2.\nThank you!")
    kept_lines = json.loads(stored["line_items"])
    assert kept_lines[0]["discount_percent"] == "10"
    assert "discount_percent" not in kept_lines[1]  # no discount is kept as none at all
    assert (await client.get(f"/invoices/{draft['id']}")).json() == draft

    edited = await client.patch(f"/invoices/{draft['id']}", json={
        "revision": 1, "notes": "", "supply_date": "", "line_items": [
            line("Design", "1", "100", "19", "12.5")]})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["notes"], edited.json()["supply_date"]) == ("", None)
    assert edited.json()["customer_id"] == customer_id  # left out of the edit: kept
    assert (edited.json()["net"], edited.json()["total"]) == ("87.50", "104.13")
    [stored] = rows(db_path, "SELECT notes, supply_date, net FROM invoices WHERE id = ?",
                    draft["id"])
    assert (stored["notes"], stored["supply_date"], stored["net"]) == ("", None, "87.50")


async def test_an_edit_that_changes_nothing_keeps_the_revision_and_writes_nothing(
        studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path)
    made = await client.post("/invoices", json=full_body(customer_id=customer_id))
    assert made.status_code == 201, made.text
    draft = made.json()
    before = database_digest(db_path)
    # Fields a draft does not edit, the same fields again, or none at all: the same draft,
    # the same revision, nothing written.
    for same in ({"status": "issued", "number": "INV-1999-0001", "issued_at": 1},
                 full_body(customer_id=customer_id),
                 {"notes": "Project Babbage, phase 2.\r\nThank you!  "}, {}):
        reply = await client.patch(f"/invoices/{draft['id']}", json={"revision": 1, **same})
        assert reply.status_code == 200, reply.text
        assert reply.json() == draft
    assert database_digest(db_path) == before
    # So another tab's edit of what it opened still saves, and issues.
    other = await client.patch(f"/invoices/{draft['id']}", json={"revision": 1, "notes": "B"})
    assert (other.status_code, other.json()["revision"]) == (200, 2), other.text
    assert tuple(rows(db_path, "SELECT notes, revision, status FROM invoices WHERE id = ?",
                      draft["id"])[0]) == ("B", 2, "draft")


async def test_the_longest_draft_the_line_rules_allow_is_saved_whatever_its_spelling(
        studio) -> None:
    """200 lines of 500 characters, with 2,000 characters of notes, as JSON with every letter
    escaped and as a form with every letter percent-encoded: far past the 64 KB that other
    requests may send, and saved, created and edited. Past the draft's own 2 MB, the 413
    says how much may be sent."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    longest = [line("€" * 499 + str(n % 10), "1", "1.00", "19") for n in range(200)]
    body = full_body(line_items=longest, notes="ü" * 2000)
    escaped = json.dumps(body).encode()  # ensure_ascii: six bytes for every € and ü
    assert len(escaped) > 64 * 1024
    made = await client.post("/invoices", content=escaped,
                             headers={"Content-Type": "application/json"})
    assert made.status_code == 201, made.text[:300]
    draft = made.json()
    [stored] = rows(db_path, "SELECT line_items, notes, total FROM invoices WHERE id = ?",
                    draft["id"])
    assert [item["description"] for item in json.loads(stored["line_items"])] == [
        item["description"] for item in longest]
    assert (stored["notes"], stored["total"]) == ("ü" * 2000, "238.00")

    form = urlencode([("revision", "1"), ("customer", "Acme GmbH"), ("currency", "EUR"),
                      ("due_date", days_ahead(61)), ("notes", "𝄞" * 2000)]
                     + [(field, value) for _ in range(200) for field, value in (
                         ("description", "𝄞" * 500), ("quantity", "1"), ("unit_price", "1.00"),
                         ("tax_rate", "19"))])
    assert len(form) > 1024 * 1024  # twelve bytes a letter
    edited = await client.post(f"/invoices/{draft['id']}/edit", content=form, headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    assert edited.status_code in (200, 303), edited.text[:300]
    [stored] = rows(db_path, "SELECT line_items, notes, revision FROM invoices WHERE id = ?",
                    draft["id"])
    assert (stored["notes"], stored["revision"]) == ("𝄞" * 2000, 2)
    assert {item["description"] for item in json.loads(stored["line_items"])} == {"𝄞" * 500}

    before = database_digest(db_path)
    too_much = await client.post("/invoices", json={**body, "padding": "x" * 2 * 1024 * 1024})
    assert (too_much.status_code, too_much.json()["detail"]) == (413, "body_too_large")
    assert "at most 2 MB (2,097,152 bytes)" in too_much.json()["message"]
    elsewhere = await client.post("/customers", json={"name": "x", "padding": "x" * 70_000})
    assert (elsewhere.status_code, elsewhere.json()["detail"]) == (413, "body_too_large")
    assert "at most 64 KB (65,536 bytes)" in elsewhere.json()["message"]
    assert database_digest(db_path) == before


async def test_a_draft_that_names_only_its_customer_takes_the_customers_name(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path, name="Babbage & Co")
    body = full_body(customer_id=customer_id)
    del body["customer"]
    made = await client.post("/invoices", json=body)
    assert made.status_code == 201, made.text
    assert made.json()["customer"] == "Babbage & Co"
    assert scalar(db_path, "SELECT customer FROM invoices WHERE id = ?",
                  made.json()["id"]) == "Babbage & Co"


def refused_drafts(foreign: str) -> list[tuple[str, dict[str, Any], int, str]]:
    return [
        ("discount 101", full_body(line_items=[line("a", "1", "5", "0", "101")]), 422,
         "invalid_body"),
        ("discount below zero", full_body(line_items=[line("a", "1", "5", "0", "-1")]), 422,
         "invalid_body"),
        ("discount in other digits", full_body(line_items=[line("a", "1", "5", "0", "١٠")]),
         422, "invalid_body"),
        ("discount as a list", full_body(line_items=[{**line("a", "1", "5", "0"),
                                                      "discount_percent": ["10"]}]),
         422, "invalid_body"),
        ("discount as an exponent", full_body(line_items=[line("a", "1", "5", "0", "1e1")]),
         422, "invalid_body"),
        ("notes too long", full_body(notes="x" * 2001), 422, "invalid_body"),
        ("notes not text", full_body(notes=["x"]), 422, "invalid_body"),
        ("supply date not a date", full_body(supply_date="2026-02-30"), 422, "invalid_body"),
        ("another person's customer", full_body(customer_id=foreign), 404,
         "customer_not_found"),
        ("a made-up customer", full_body(customer_id=str(uuid.uuid4())), 404,
         "customer_not_found"),
        ("a customer id not text", full_body(customer_id=7), 422, "invalid_body"),
    ]


async def test_a_refused_draft_or_edit_changes_nothing(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    foreign = add_customer(db_path, BEN, name="Ben's client")
    draft = (await client.post("/invoices", json=full_body())).json()
    before = database_digest(db_path)
    for name, body, status, detail in refused_drafts(foreign):
        for reply in (await client.post("/invoices", json={**body, "request_id": name}),
                      await client.patch(f"/invoices/{draft['id']}", json={**body,
                                                                           "revision": 1})):
            assert (reply.status_code, reply.json().get("detail")) == (status, detail), \
                (name, reply.text)
            assert reply.json()["message"], name
        assert database_digest(db_path) == before, name
    assert "2,000" in (await client.post("/invoices", json=full_body(notes="x" * 2001))
                       ).json()["message"]
    assert "discount" in (await client.post("/invoices", json=full_body(line_items=[
        line("a", "1", "5", "0", "101")]))).json()["message"]


async def test_notes_of_exactly_2000_characters_and_a_discount_of_100_are_taken(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/invoices", json=full_body(
        notes="n" * 2000, line_items=[line("Free sample", "1", "40", "19", "100"),
                                      line("Widget", "1", "10", "19", "0")]))
    assert made.status_code == 201, made.text
    assert len(made.json()["notes"]) == 2000
    assert [item["net"] for item in made.json()["line_items"]] == ["0.00", "10.00"]
    assert made.json()["total"] == "11.90"


async def test_a_new_drafts_request_id_binds_its_new_fields_too(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    first = await client.post("/invoices", json=full_body(request_id="draft-notes"))
    again = await client.post("/invoices", json=full_body(request_id="draft-notes"))
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    before = database_digest(db_path)
    for changed in ({"notes": "Other notes"}, {"supply_date": "2026-12-16"},
                    {"line_items": [line("Design", "3", "19.99", "19", "11"),
                                    line("Print run", "2", "12.50", "7")]}):
        conflict = await client.post("/invoices", json=full_body(request_id="draft-notes",
                                                                 **changed))
        assert conflict.status_code == 409, changed
        assert conflict.json()["detail"] == "request_id_conflict"
    assert database_digest(db_path) == before


async def test_lines_stored_before_discounts_read_as_they_always_did(studio) -> None:
    """An issued invoice of the seeded demo has lines without a discount: they still read,
    with no discount and the same nets."""
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    stored = json.loads(scalar(studio.settings.db_path,
                               "SELECT line_items FROM invoices WHERE id = ?", invoice_id))
    assert all("discount_percent" not in item for item in stored)
    shown = (await client.get(f"/invoices/{invoice_id}")).json()
    assert {item["discount_percent"] for item in shown["line_items"]} == {"0"}
    assert sum(Decimal(item["net"]) for item in shown["line_items"]) == Decimal(shown["net"])


# --- the tax per rate ------------------------------------------------------------------------


async def test_the_tax_breakdown_is_exact_per_rate_and_adds_up_to_the_totals(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/invoices", json=full_body(line_items=[
        line("Design", "3", "19.99", "19", "10"),         # 53.973 -> 53.97, tax 10.25
        line("Print run", "2", "12.50", "7"),             # 25.00, tax 1.75
        line("Licence", "1", "99.99", "19", "33.3333"),   # 66.6603... -> 66.66, tax 12.67
        line("Stamp", "1", "0.05", "7", "50"),            # 0.025 -> 0.03, tax 0.0021 -> 0.00
        line("Book", "1", "20", "0"),                     # 20.00, no tax
    ]))
    assert made.status_code == 201, made.text
    invoice = made.json()
    assert invoice["tax_breakdown"] == [
        {"rate": "0", "net": "20.00", "tax": "0.00"},
        {"rate": "7", "net": "25.03", "tax": "1.75"},
        {"rate": "19", "net": "120.63", "tax": "22.92"},
    ]
    breakdown = invoice["tax_breakdown"]
    assert sum(Decimal(rate["net"]) for rate in breakdown) == Decimal(invoice["net"])
    assert sum(Decimal(rate["tax"]) for rate in breakdown) == Decimal(invoice["tax"])
    assert Decimal(invoice["net"]) + Decimal(invoice["tax"]) == Decimal(invoice["total"])
    assert (invoice["net"], invoice["tax"], invoice["total"]) == ("165.66", "24.67", "190.33")
    assert scalar(studio.settings.db_path, "SELECT total FROM invoices WHERE id = ?",
                  invoice["id"]) == "190.33"


async def test_the_totals_preview_shows_the_tax_per_rate(studio) -> None:
    client = await studio.signed_in()
    preview = await client.get("/invoices/totals", headers={"Accept": "text/html"}, params=[
        ("currency", "EUR"), ("description", "a"), ("quantity", "3"), ("unit_price", "19.99"),
        ("discount_percent", "10"), ("tax_rate", "19"), ("description", "b"),
        ("quantity", "2"), ("unit_price", "12.50"), ("discount_percent", ""),
        ("tax_rate", "7")])
    assert preview.status_code == 200
    assert 'data-rate="19">€10.25' in preview.text and 'data-rate="7">€1.75' in preview.text
    assert "€90.97" in preview.text


# --- issuing ---------------------------------------------------------------------------------


async def test_issuing_keeps_the_buyer_and_seller_and_a_later_edit_changes_neither(
        studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path)
    execute(db_path, "UPDATE profiles SET country = 'DE', iban = 'DE89370400440532013000',"
                     " bic = 'COBADEFF', tax_number = '12/345/67890' WHERE actor_id = ?",
            actor_id(db_path))
    draft = (await client.post("/invoices", json=full_body(customer_id=customer_id))).json()
    done = await issue(client, draft)
    assert done.status_code == 201, done.text
    issued = (await client.get(f"/invoices/{draft['id']}")).json()
    assert issued["buyer"] == {"name": "Acme GmbH", "email": "billing@acme.example",
                               "address": "Hauptstr. 5\n10115 Berlin", "country": "DE",
                               "vat_id": "DE123456789", "language": "de"}
    assert issued["seller"]["iban"] == "DE89370400440532013000"
    assert issued["seller"]["tax_number"] == "12/345/67890"
    assert issued["issue_date"] == issued["issued_at"][:10]
    [stored] = rows(db_path, "SELECT buyer, issue_date FROM invoices WHERE id = ?", draft["id"])
    assert json.loads(stored["buyer"]) == issued["buyer"]
    assert stored["issue_date"] == issued["issue_date"]

    execute(db_path, "UPDATE customers SET name = 'Renamed', address = 'Elsewhere 1',"
                     " vat_id = 'DE999999999', revision = revision + 1 WHERE id = ?",
            customer_id)
    execute(db_path, "UPDATE profiles SET name = 'New name', iban = 'FR1420041010050500013M02606'"
                     " WHERE actor_id = ?", actor_id(db_path))
    assert (await client.get(f"/invoices/{draft['id']}")).json() == issued
    assert audit_database(studio.settings) == []


async def test_issuing_the_invoice_and_its_credit_note_settle_its_balance(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    draft = (await client.post("/invoices", json=full_body())).json()
    assert rows(db_path, "SELECT * FROM balances WHERE invoice_id = ?", draft["id"]) == []
    assert (await issue(client, draft)).status_code == 201
    [balance] = rows(db_path, "SELECT * FROM balances WHERE invoice_id = ?", draft["id"])
    assert (balance["amount_due"], balance["amount_credited"], balance["payment_status"]) == (
        "90.97", "0.00", "unpaid")

    note = (await client.post(f"/invoices/{draft['id']}/credit-note")).json()
    assert note["customer_id"] is None and note["supply_date"] == "2026-12-15"
    note = (await client.patch(f"/invoices/{note['id']}", json={
        "revision": 1, "line_items": [line("Print run returned", "1", "12.50", "7")]})).json()
    assert rows(db_path, "SELECT amount_due FROM balances WHERE invoice_id = ?",
                draft["id"])[0][0] == "90.97"  # a draft credit note credits nothing yet
    assert (await issue(client, note)).status_code == 201
    [balance] = rows(db_path, "SELECT * FROM balances WHERE invoice_id = ?", draft["id"])
    assert (balance["amount_due"], balance["amount_credited"]) == ("77.59", "13.38")
    assert rows(db_path, "SELECT * FROM balances WHERE invoice_id = ?", note["id"]) == []


async def test_an_invoice_due_before_the_day_it_is_issued_is_refused_at_issue(studio) -> None:
    """A draft may hold a due date in the past; issuing it is 422 due_before_issue naming both
    dates, and takes no number. Due the day it is issued is due on receipt, and issues."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    today = dt.datetime.now(dt.UTC).date()
    draft = await client.post("/invoices", json=full_body(due_date="1999-01-01"))
    assert draft.status_code == 201, draft.text
    before = database_digest(db_path)
    for headers in ({}, {"HX-Request": "true", "Accept": "text/html"}):
        refused = await issue(client, draft.json(), headers)
        assert refused.status_code == 422, refused.text
        said = refused.json()["message"] if not headers else refused.text
        assert f"issued today, {today}, but it is due 1999-01-01" in said
        assert f"Change the due date to {today} or later" in said
    assert database_digest(db_path) == before
    on_the_day = await client.patch(f"/invoices/{draft.json()['id']}", json={
        "revision": 1, "due_date": today.isoformat()})
    issued = await issue(client, on_the_day.json())
    assert issued.status_code == 201, issued.text
    assert tuple(rows(db_path, "SELECT status, issue_date, due_date FROM invoices WHERE id = ?",
                      draft.json()["id"])[0]) == ("issued", today.isoformat(),
                                                  today.isoformat())


async def test_a_supply_date_more_than_a_year_ahead_is_refused_at_issue(studio) -> None:
    """An invoice may bill what was supplied long ago, or what is to be supplied up to a year
    (366 days) after it is issued; later than that is taken for a typing slip."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    today = dt.datetime.now(dt.UTC).date()
    latest = today + dt.timedelta(days=366)
    far = await client.post("/invoices", json=full_body(
        due_date=days_ahead(400), supply_date=(latest + dt.timedelta(days=1)).isoformat()))
    assert far.status_code == 201, far.text
    before = database_digest(db_path)
    refused = await issue(client, far.json())
    assert (refused.status_code, refused.json()["detail"]) == (422, "supply_too_far_ahead")
    assert f"it may be {latest} at the latest" in refused.json()["message"]
    assert database_digest(db_path) == before
    for supplied in (latest.isoformat(), "2001-02-03"):
        made = await client.post("/invoices", json=full_body(due_date=days_ahead(400),
                                                            supply_date=supplied))
        assert (await issue(client, made.json())).status_code == 201
        assert scalar(db_path, "SELECT supply_date FROM invoices WHERE id = ?"
                               " AND status = 'issued'", made.json()["id"]) == supplied


async def test_a_credit_note_issues_whatever_its_due_and_supply_dates(studio) -> None:
    """A credit note has no due date to pay by, and keeps the supply date of what it
    corrects: neither date rule is asked of it."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    draft = (await client.post("/invoices", json=full_body())).json()
    assert (await issue(client, draft)).status_code == 201
    note = (await client.post(f"/invoices/{draft['id']}/credit-note")).json()
    note = (await client.patch(f"/invoices/{note['id']}", json={
        "revision": 1, "due_date": "1999-01-01", "supply_date": "2099-12-31",
        "line_items": [line("Print run returned", "1", "12.50", "7")]})).json()
    issued = await issue(client, note)
    assert issued.status_code == 201, issued.text
    assert tuple(rows(db_path, "SELECT status, due_date, supply_date FROM invoices WHERE id = ?",
                      note["id"])[0]) == ("issued", "1999-01-01", "2099-12-31")


async def test_a_credit_note_names_the_same_customer(studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path)
    draft = (await client.post("/invoices", json=full_body(customer_id=customer_id))).json()
    await issue(client, draft)
    note = (await client.post(f"/invoices/{draft['id']}/credit-note")).json()
    assert (note["customer_id"], note["customer"], note["notes"]) == (
        customer_id, "Acme GmbH", "")
    assert (await issue(client, note)).status_code == 201
    assert (await client.get(f"/invoices/{note['id']}")).json()["buyer"]["vat_id"] == \
        "DE123456789"


@pytest.mark.parametrize("column, value", [
    ("buyer", '{"name": "Someone else"}'), ("notes", "changed"), ("supply_date", "2020-01-01"),
    ("issue_date", "2020-01-01"), ("customer_id", None)])
async def test_the_database_refuses_to_change_the_new_fields_of_an_issued_invoice(
        studio, column: str, value: str | None) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    draft = (await client.post("/invoices", json=full_body(
        customer_id=add_customer(db_path)))).json()
    await issue(client, draft)
    before = database_digest(db_path)
    with pytest.raises(Exception, match="invoice_frozen"):
        execute(db_path, f"UPDATE invoices SET {column} = ? WHERE id = ?", value, draft["id"])
    assert database_digest(db_path) == before


# --- the frozen hash, old and new ------------------------------------------------------------


def hash_before_the_full_invoice(db: Any, fields: dict[str, Any]) -> str:
    """The frozen SHA-256 as invoices were sealed before customers, notes and supply dates."""
    content = {name: fields[name] for name in invoices.FROZEN}
    content["line_items"] = json.loads(fields["line_items"])
    content["seller"] = json.loads(fields["seller"]) if fields["seller"] else None
    content["attachments"] = []
    return bindings.fingerprint(content)


async def test_invoices_issued_before_the_full_invoice_still_pass_studio_check(studio) -> None:
    db_path = studio.settings.db_path
    owner = actor_id(db_path)
    old = {"id": str(uuid.uuid4()), "owner_id": owner, "kind": "invoice", "credits": None,
           "number": "INV-2019-0001", "customer": "Old Client", "currency": "EUR",
           "due_date": "2019-02-01",
           "line_items": json.dumps([{"description": "Tea", "quantity": "2",
                                      "unit_price": "10.00", "tax_rate": "19"}]),
           "net": "20.00", "tax": "3.80", "total": "23.80",
           "seller": json.dumps({"address": "1 Lane", "name": "Ada", "vat_id": ""},
                                sort_keys=True), "issued_at": 1546300800.0}

    def issued_long_ago(db: Any) -> None:
        db.execute(
            "INSERT INTO invoices (id, owner_id, kind, credits, status, number, series_year,"
            " sequence, customer, currency, due_date, line_items, net, tax, total, seller,"
            " issued_at, frozen_sha256, created_at, updated_at) VALUES (:id, :owner_id, :kind,"
            " :credits, 'issued', :number, 2019, 1, :customer, :currency, :due_date,"
            " :line_items, :net, :tax, :total, :seller, :issued_at, :sha, :issued_at,"
            " :issued_at)", {**old, "sha": hash_before_the_full_invoice(db, old)})
        db.execute("INSERT INTO invoice_series (owner_id, kind, year, last) VALUES (?, ?, ?, 1)",
                   (owner, "invoice", 2019))

    await studio.studio.db.write(issued_long_ago)
    client = await studio.signed_in()
    new = (await client.post("/invoices", json=full_body(
        customer_id=add_customer(db_path)))).json()
    await issue(client, new)
    assert audit_database(studio.settings) == []
    checked = studio_command(db_path, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "audit: ok" in checked.stdout

    # The new invoice's hash covers what it has beyond the old ones: its notes changed
    # behind the studio's back (triggers dropped) no longer match.
    def tamper(db: Any) -> None:
        for statement in FREEZE_DROPPED[dialect_of(db).name]:
            db.execute(statement)
        db.execute("UPDATE invoices SET notes = 'changed' WHERE id = ?", (new["id"],))
        db.execute("UPDATE invoices SET buyer = '{\"name\": \"Acme GmbH\"}' WHERE id = ?",
                   (new["id"],))

    await studio.studio.db.write(tamper)
    found = audit_database(studio.settings)
    assert len(found) == 1 and new["id"] in found[0] and "frozen SHA-256" in found[0]


def test_a_field_left_unset_leaves_the_frozen_hash_as_it_was() -> None:
    fields = {"id": "i", "owner_id": "a", "kind": "invoice", "credits": None, "number": "N",
              "customer": "C", "currency": "EUR", "due_date": days_ahead(31),
              "line_items": "[]", "net": "0", "tax": "0", "total": "0", "seller": None,
              "issued_at": 1.0}
    old = hash_before_the_full_invoice(None, fields)
    unset = {**fields, "customer_id": None, "buyer": None, "issue_date": None,
             "supply_date": None, "notes": ""}
    assert invoices.frozen_sha256(None, unset, attachments=[]) == old
    for name, value in (("customer_id", "c1"), ("buyer", '{"name": "C"}'),
                        ("issue_date", "2027-01-01"), ("supply_date", "2026-12-01"),
                        ("notes", "n")):
        assert invoices.frozen_sha256(None, {**unset, name: value}, attachments=[]) != old, name


# --- text that cannot be sent ----------------------------------------------------------------


CONTROL_TEXT = [
    ("draft's customer name", "/invoices", {**full_body(customer="Acme\x01GmbH")},
     "customer name"),
    ("draft's notes", "/invoices", full_body(notes="Thanks\x0bagain"), "notes"),
    ("line description", "/invoices",
     full_body(line_items=[line("Frame\x02work", "1", "5", "19")]), "description of line 1"),
    ("customer's name", "/customers", {"name": "Acme\x1bGmbH"}, "name"),
    ("customer's address", "/customers", {"name": "Acme", "address": "Street 1\x0c"},
     "address"),
    ("seller's footer", "/settings", {"name": "Ada Works", "footer": "Bank\x7f"}, "footer"),
    ("seller's payment terms", "/settings", {"name": "Ada Works",
                                              "payment_terms": "30 days\x85"}, "payment terms"),
]


@pytest.mark.parametrize(("where", "path", "body", "field"), CONTROL_TEXT,
                         ids=[case[0] for case in CONTROL_TEXT])
async def test_a_control_character_in_any_text_is_refused_naming_the_field(
        studio, where: str, path: str, body: dict[str, Any], field: str) -> None:
    """Such a character would keep the e-invoice and the email from ever being built, and an
    issued invoice never changes: it is refused as it is typed, changing nothing."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    before = database_digest(db_path)
    reply = await client.post(path, json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == "invalid_text"
    assert reply.json()["message"].startswith(f"The {field} holds an invisible control")
    assert database_digest(db_path) == before


async def test_line_breaks_and_tabs_are_text_and_a_forms_line_breaks_are_kept_as_one(
        studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    made = await client.post("/invoices", json=full_body(
        notes="Phase 2:\r\n\tframing\r\nThanks", line_items=[line("A\tB", "1", "5", "19")]))
    assert made.status_code == 201, made.text
    assert scalar(db_path, "SELECT notes FROM invoices WHERE id = ?", made.json()["id"]) \
        == "Phase 2:\n\tframing\nThanks"
    customer = await client.post("/customers", json={"name": "Acme",
                                                     "address": "Street 1\r\n10115 Berlin"})
    assert customer.status_code == 201, customer.text
    assert scalar(db_path, "SELECT address FROM customers WHERE id = ?",
                  customer.json()["id"]) == "Street 1\n10115 Berlin"
    saved = await client.post("/settings", json={"name": "Ada Works",
                                                 "footer": "Bank:\r\nIBAN below"})
    assert saved.status_code == 200, saved.text
    assert scalar(db_path, "SELECT footer FROM profiles WHERE actor_id = ?",
                  actor_id(db_path)) == "Bank:\nIBAN below"


async def test_an_invoice_issued_holding_a_control_character_still_has_its_e_invoice(
        studio) -> None:
    """Issued before the check, such an invoice never changes: its Factur-X XML leaves out
    what XML cannot hold, and the PDF that carries it is built."""
    from lxml import etree

    from tests.test_facturx import SELLER
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    # Both countries named, as every e-invoice needs.
    assert (await client.post("/settings", json=SELLER)).status_code == 200
    draft = (await client.post("/invoices", json=full_body(
        customer_id=add_customer(db_path)))).json()
    execute(db_path, "UPDATE invoices SET customer = 'Acme\x01GmbH', notes = 'Thanks\x0bagain'"
                     " WHERE id = ?", draft["id"])
    assert (await issue(client, draft)).status_code == 201
    xml = await client.get(f"/invoices/{draft['id']}.xml")
    assert xml.status_code == 200, xml.text
    names = etree.fromstring(xml.content).xpath(
        "//*[local-name()='BuyerTradeParty']/*[local-name()='Name']/text()")
    assert names == ["AcmeGmbH"]
    assert b"Thanksagain" in xml.content
    pdf = await client.get(f"/invoices/{draft['id']}.facturx.pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")


# --- the buyer issued is the buyer reviewed ----------------------------------------------------


async def review_of(client: Any, invoice_id: str) -> dict[str, Any]:
    reply = await client.get(f"/invoices/{invoice_id}/issue")
    assert reply.status_code == 200, reply.text
    return reply.json()["request"]


async def test_the_issue_review_carries_the_customers_revision_and_a_changed_customer_is_refused(
        studio) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path, vat_id="DE136695976")
    draft = (await client.post("/invoices", json=full_body(customer_id=customer_id))).json()
    reviewed = await review_of(client, draft["id"])
    assert reviewed == {"revision": draft["revision"], "customer_revision": 1}
    page = await client.get(f"/invoices/{draft['id']}/issue", headers={"Accept": "text/html"})
    assert "&#34;customer_revision&#34;: 1" in page.text or \
        "&quot;customer_revision&quot;: 1" in page.text, page.text
    moved = await client.patch(f"/customers/{customer_id}", json={
        "revision": 1, "address": "New Street 9"})
    assert moved.status_code == 200, moved.text
    before = database_digest(db_path)
    reply = await client.post(f"/invoices/{draft['id']}/issue",
                              json={**reviewed, "request_id": "stale"})
    assert reply.status_code == 409, reply.text
    assert reply.json()["detail"] == "customer_changed"
    assert "reload" in reply.json()["message"]
    assert database_digest(db_path) == before
    assert scalar(db_path, "SELECT status FROM invoices WHERE id = ?", draft["id"]) == "draft"

    # Reviewed again, the new address is what is issued; the same request again is one issue.
    again = {**await review_of(client, draft["id"]), "request_id": "fresh"}
    assert again["customer_revision"] == 2
    first = await client.post(f"/invoices/{draft['id']}/issue", json=again)
    replay = await client.post(f"/invoices/{draft['id']}/issue", json=again)
    assert (first.status_code, replay.status_code) == (201, 200), (first.text, replay.text)
    assert first.json() == replay.json()
    buyer = json.loads(scalar(db_path, "SELECT buyer FROM invoices WHERE id = ?", draft["id"]))
    assert buyer["address"] == "New Street 9"
    conflict = await client.post(f"/invoices/{draft['id']}/issue",
                                 json={**again, "customer_revision": 1})
    assert conflict.json()["detail"] == "request_id_conflict", conflict.text


async def test_an_issue_without_the_customers_revision_issues_as_before(studio) -> None:
    """A client that never read the review step issues the customer as it is then, and its
    request binds as it always did."""
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    customer_id = add_customer(db_path)
    draft = (await client.post("/invoices", json=full_body(customer_id=customer_id))).json()
    execute(db_path, "UPDATE customers SET address = 'Moved 2', revision = revision + 1"
                     " WHERE id = ?", customer_id)
    body = {"request_id": "plain", "revision": draft["revision"]}
    reply = await client.post(f"/invoices/{draft['id']}/issue", json=body)
    assert reply.status_code == 201, reply.text
    buyer = json.loads(scalar(db_path, "SELECT buyer FROM invoices WHERE id = ?", draft["id"]))
    assert buyer["address"] == "Moved 2"
    assert scalar(db_path, "SELECT fingerprint FROM request_bindings WHERE request_id = ?",
                  "plain") == bindings.fingerprint({"invoice_id": draft["id"],
                                                    "revision": draft["revision"]})


@pytest.mark.parametrize("customer_revision", ["x", 0, -1, 1.5])
async def test_a_customer_revision_that_is_no_revision_is_refused(studio, customer_revision
                                                                  ) -> None:
    db_path = studio.settings.db_path
    client = await studio.signed_in()
    draft = (await client.post("/invoices", json=full_body(
        customer_id=add_customer(db_path)))).json()
    before = database_digest(db_path)
    reply = await client.post(f"/invoices/{draft['id']}/issue", json={
        "request_id": "odd", "revision": draft["revision"],
        "customer_revision": customer_revision})
    assert reply.status_code == 422 and reply.json()["detail"] == "invalid_body", reply.text
    assert database_digest(db_path) == before

"""Money input: JSON numbers read exactly, ASCII digits only, currencies in use today."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pytest

from studio.billing import money
from studio.errors import Refusal
from tests.conftest import ADA, database_digest, days_ahead, execute, lease_body, rows, scalar

pytestmark = pytest.mark.anyio


def draft_body(**changes: Any) -> dict[str, Any]:
    return {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
            "line_items": [{"description": "Widgets", "quantity": "1", "unit_price": "19.99",
                            "tax_rate": "19"}], **changes}


def with_line(**line: Any) -> dict[str, Any]:
    return draft_body(line_items=[{"description": "Widgets", "quantity": "1",
                                   "unit_price": "19.99", "tax_rate": "19", **line}])


async def post_raw(client: Any, text: str) -> Any:
    return await client.post("/invoices", content=text,
                             headers={"Content-Type": "application/json"})


async def test_a_json_number_is_stored_exactly_as_written(studio) -> None:
    client = await studio.signed_in()
    text = json.dumps(with_line(unit_price="PRICE", quantity="QTY", tax_rate="RATE"))
    text = text.replace('"PRICE"', "12345678901.123456").replace('"QTY"', "2.5") \
        .replace('"RATE"', "7.25")
    reply = await post_raw(client, text)
    assert reply.status_code == 201, reply.text
    stored = json.loads(scalar(studio.settings.db_path,
                               "SELECT line_items FROM invoices WHERE id = ?", reply.json()["id"]))
    assert (stored[0]["unit_price"], stored[0]["quantity"], stored[0]["tax_rate"]) == (
        "12345678901.123456", "2.5", "7.25")
    assert reply.json()["net"] == "30864197252.81"  # 2.5 x 12345678901.123456, half up


async def test_a_json_number_in_exponent_form_is_read_exactly_too(studio) -> None:
    client = await studio.signed_in()
    text = json.dumps(with_line(unit_price="PRICE")).replace('"PRICE"', "1.999e1")
    reply = await post_raw(client, text)
    assert reply.status_code == 201, reply.text
    assert reply.json()["line_items"][0]["unit_price"] == "19.99"


async def test_whole_numbers_stay_whole_where_a_whole_number_is_asked_for(studio) -> None:
    """Reading fractions as decimals leaves the integers JSON sends as they were: candidates
    and revisions are still whole numbers, and a fraction for them is still refused."""
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    leases = scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases")
    body = json.dumps(lease_body([invoice_id], candidates=2))
    made = await client.post("/leases", content=body,
                             headers={"Content-Type": "application/json"})
    assert made.status_code == 201, made.text
    assert scalar(studio.settings.db_path, "SELECT options FROM leases WHERE id = ?",
                  made.json()["lease_id"]).count('"candidates": 2') == 1
    # The worker is busy with the first request: the count of requests tells "nothing".
    fraction = await client.post("/leases", content=json.dumps(
        lease_body([invoice_id], "req-2", candidates="TWO")).replace('"TWO"', "2.0"),
        headers={"Content-Type": "application/json"})
    assert fraction.status_code == 422 and "whole number" in fraction.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") == leases + 1


async def test_a_decimal_beside_text_that_is_not_unicode_is_a_clear_422(studio) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    text = json.dumps(with_line(unit_price="PRICE", description="\ud800")).replace(
        '"PRICE"', "1.5")
    reply = await post_raw(client, text)
    assert reply.status_code == 422 and "Unicode" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


OTHER_DIGITS = {
    "arabic-indic": "١٢",
    "extended arabic-indic": "۱۲",
    "fullwidth": "１２",
    "mathematical bold": "𝟏𝟐",
    "devanagari": "१२",
    "ascii with a fullwidth decimal": "1.５",
}


@pytest.mark.parametrize("field", ["quantity", "unit_price", "tax_rate"])
@pytest.mark.parametrize("name", list(OTHER_DIGITS))
async def test_amounts_quantities_and_rates_take_ascii_digits_only(
        studio, field: str, name: str) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.post("/invoices", json=with_line(**{field: OTHER_DIGITS[name]}))
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"] == "invalid_body" and "Line 1" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


async def test_a_form_with_other_digits_is_refused_too(studio) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.post("/invoices", data={
        "customer": "Acme", "currency": "EUR", "due_date": days_ahead(61),
        "description": "Widgets", "quantity": "1", "unit_price": "١٩", "tax_rate": "0"})
    assert reply.status_code == 422
    assert database_digest(studio.settings.db_path) == before


@pytest.mark.parametrize("code", ["DEM", "XXX", "XTS", "ADP", "XAU", "XDR", "BOV", "dem"])
async def test_historic_test_and_fund_currency_codes_are_refused(studio, code: str) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.post("/invoices", json=draft_body(currency=code))
    assert reply.status_code == 422, reply.text
    assert "ISO 4217" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


async def test_a_new_draft_without_a_currency_is_refused(studio) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    body = {name: value for name, value in draft_body().items() if name != "currency"}
    reply = await client.post("/invoices", json=body)
    assert reply.status_code == 422 and "ISO 4217" in reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


def test_the_currencies_in_use_today_are_accepted() -> None:
    for code in ("EUR", "USD", "GBP", "JPY", "KWD", "CHF", "XOF", "INR", "eur"):
        assert money.currency_code(code) == code.upper()
    for code in ("DEM", "XXX", "XTS", "ADP", "FRF", "ZWD", ""):
        with pytest.raises(Refusal):
            money.currency_code(code)


async def test_an_invoice_stored_in_a_currency_no_longer_in_use_reads_as_stored(studio) -> None:
    db_path = studio.settings.db_path
    marks = str(uuid.uuid4())
    execute(db_path, "INSERT INTO invoices (id, owner_id, status, number, customer, currency,"
            " due_date, line_items, net, tax, total) SELECT ?, id, 'draft', NULL, 'Old',"
            " 'DEM', '2001-12-31', ?, '10.00', '0.00', '10.00' FROM actors WHERE email = ?",
            marks, json.dumps([{"description": "Tea", "quantity": "1", "unit_price": "10.00",
                                "tax_rate": "0"}]), ADA)
    client = await studio.signed_in()

    got = await client.get(f"/invoices/{marks}")
    assert got.status_code == 200, got.text
    assert (got.json()["currency"], got.json()["total"]) == ("DEM", "10.00")
    page = await client.get(f"/invoices/{marks}", headers={"Accept": "text/html"})
    assert page.status_code == 200

    # Its draft keeps its currency through an edit; a change must be to one in use today.
    edited = await client.patch(f"/invoices/{marks}", json={"revision": 1, "customer": "New"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["currency"] == "DEM"
    before = database_digest(db_path)
    moved = await client.patch(f"/invoices/{marks}", json={"revision": 2, "currency": "FRF"})
    assert moved.status_code == 422
    assert database_digest(db_path) == before
    assert rows(db_path, "SELECT currency, customer FROM invoices WHERE id = ?", marks)[0][:] \
        == ("DEM", "New")


def test_a_float_never_reaches_an_amount() -> None:
    """A float has been through binary floating point: refused, never rounded into money."""
    with pytest.raises(Refusal, match="floating-point"):
        money.parse_line({"description": "a", "quantity": 1, "unit_price": 0.1}, 1)
    assert money.parse_line({"description": "a", "quantity": 1,
                             "unit_price": Decimal("0.1")}, 1).unit_price == Decimal("0.1")


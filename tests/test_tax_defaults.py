"""Tax that is right by default: a seller's new line starts at its country's standard rate, a
business in another EU member state with a VAT ID at 0 % with the reverse-charge mention, and
issuing asks the person to confirm a rate that breaks those rules. A seller whose country is
not known keeps today's 0 %. Asserted on the database as well as the answers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from studio.billing import documents, invoices
from tests.conftest import days_ahead, rows, scalar

pytestmark = pytest.mark.anyio

GERMAN_SELLER = {"name": "Ada Works GmbH", "address": "Hauptstraße 1\n10115 Berlin",
                 "country": "DE", "vat_id": "DE136695976"}
FRENCH_BUSINESS = {"name": "Acme SARL", "address": "2 Rue de la Paix\n75001 Paris",
                   "country": "FR", "vat_id": "FR40303265045"}
GERMAN_BUSINESS = {"name": "Berliner Bäckerei GmbH", "address": "Torstraße 5\n10119 Berlin",
                   "country": "DE", "vat_id": "DE811907980"}
NO_RATE_LINE = {"description": "Workshop", "quantity": "1", "unit_price": "100.00"}


async def seller(client: Any, **profile: str) -> None:
    saved = await client.post("/settings", json={**GERMAN_SELLER, **profile})
    assert saved.status_code == 200, saved.text


async def customer(client: Any, fields: dict[str, str]) -> str:
    made = await client.post("/customers", json=fields)
    assert made.status_code == 201, made.text
    return made.json()["id"]


async def draft(client: Any, lines: list[dict[str, str]], **fields: Any) -> dict[str, Any]:
    body = {"customer": "Someone", "currency": "EUR", "due_date": days_ahead(30),
            "line_items": lines, **fields}
    made = await client.post("/invoices", json={k: v for k, v in body.items() if v is not None})
    assert made.status_code == 201, made.text
    return made.json()


def stored_rates(studio: Any, invoice_id: str) -> list[str]:
    stored = scalar(studio.settings.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                    invoice_id)
    return [line["tax_rate"] for line in json.loads(stored)]


async def issue(client: Any, invoice: dict[str, Any], **extra: Any) -> Any:
    return await client.post(f"/invoices/{invoice['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": invoice["revision"], **extra})


async def test_a_german_sellers_line_without_a_rate_gets_19(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    made = await draft(client, [NO_RATE_LINE, {**NO_RATE_LINE, "tax_rate": "7"}])
    assert [line["tax_rate"] for line in made["line_items"]] == ["19", "7"]
    assert stored_rates(studio, made["id"]) == ["19", "7"]
    assert made["tax"] == "26.00"


@pytest.mark.parametrize(("country", "rate"), [("FR", "20"), ("ES", "21"), ("IT", "22"),
                                               ("AT", "20"), ("LU", "17")])
async def test_each_sellers_country_gives_its_standard_rate(studio, country: str,
                                                            rate: str) -> None:
    client = await studio.signed_in()
    await seller(client, country=country, vat_id="")
    made = await draft(client, [NO_RATE_LINE])
    assert stored_rates(studio, made["id"]) == [rate]


async def test_without_a_sellers_country_a_line_without_a_rate_stays_at_0(studio) -> None:
    client = await studio.signed_in()
    await seller(client, country="", vat_id="")
    made = await draft(client, [NO_RATE_LINE])
    assert stored_rates(studio, made["id"]) == ["0"]


async def test_a_line_added_by_an_edit_without_a_rate_gets_the_sellers_rate(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    made = await draft(client, [{**NO_RATE_LINE, "tax_rate": "7"}])
    edited = await client.patch(f"/invoices/{made['id']}", json={
        "revision": made["revision"], "line_items": [*made["line_items"], NO_RATE_LINE]})
    assert edited.status_code == 200, edited.text
    assert stored_rates(studio, made["id"]) == ["7", "19"]


async def test_a_french_business_customer_gets_0_and_the_reverse_charge_mention(
        studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    acme = await customer(client, FRENCH_BUSINESS)
    made = await draft(client, [NO_RATE_LINE], customer_id=acme, customer=None)
    assert stored_rates(studio, made["id"]) == ["0"]
    issued = await issue(client, made)
    assert issued.status_code == 201, issued.text
    invoice = (await client.get(f"/invoices/{made['id']}")).json()
    assert invoice["tax"] == "0.00"
    assert documents.category_of(invoice, "0") is documents.REVERSE_CHARGE
    assert "196" in documents.tax_notes(invoice)["0"]  # the article of the reverse charge


async def test_the_new_draft_form_starts_its_line_at_the_customers_rate(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    acme = await customer(client, FRENCH_BUSINESS)
    form = await client.get("/invoices/new", headers={"Accept": "text/html"})
    assert 'name="tax_rate" value="19"' in form.text
    form = await client.get(f"/invoices/new?customer_id={acme}", headers={"Accept": "text/html"})
    assert 'name="tax_rate" value="0"' in form.text
    line = await client.get("/invoices/line", headers={"Accept": "text/html"})
    assert 'name="tax_rate" value="19"' in line.text
    line = await client.get(f"/invoices/line?customer_id={acme}",
                            headers={"Accept": "text/html"})
    assert 'name="tax_rate" value="0"' in line.text


async def test_vat_charged_to_a_reverse_charge_business_asks_to_confirm(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    acme = await customer(client, FRENCH_BUSINESS)
    made = await draft(client, [{**NO_RATE_LINE, "tax_rate": "19"}], customer_id=acme,
                       customer=None)
    refused = await issue(client, made, confirm_tax=False)  # as the review page asks
    assert refused.status_code == 409
    assert refused.json()["detail"] == "tax_needs_confirming"
    assert "Acme SARL" in refused.json()["message"] and "reverse charge" in \
        refused.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  made["id"]) == "draft"
    review = await client.get(f"/invoices/{made['id']}/issue", headers={"Accept": "text/html"})
    assert 'id="tax-to-confirm"' in review.text and 'name="confirm_tax"' in review.text
    confirmed = await issue(client, made, confirm_tax=True)
    assert confirmed.status_code == 201, confirmed.text
    assert tuple(rows(studio.settings.db_path, "SELECT status, tax FROM invoices WHERE id = ?",
                      made["id"])[0]) == ("issued", "19.00")


async def test_a_domestic_invoice_at_0_asks_to_confirm(studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    bakery = await customer(client, GERMAN_BUSINESS)
    made = await draft(client, [{**NO_RATE_LINE, "tax_rate": "0"}], customer_id=bakery,
                       customer=None)
    frozen = (await client.get(f"/invoices/{made['id']}/issue")).json()["request"]
    assert frozen["confirm_tax"] is False  # the review page asks
    refused = await issue(client, made, **frozen)
    assert refused.status_code == 409 and refused.json()["detail"] == "tax_needs_confirming"
    assert "0 %" in refused.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  made["id"]) == "draft"
    assert (await issue(client, made, confirm_tax=True)).status_code == 201


async def test_a_client_that_does_not_ask_issues_as_it_always_did(studio) -> None:
    """The confirmation is the person's, on the review page; an API client that names no
    `confirm_tax` issues a domestic 0 % invoice as before this check existed."""
    client = await studio.signed_in()
    await seller(client)
    bakery = await customer(client, GERMAN_BUSINESS)
    made = await draft(client, [{**NO_RATE_LINE, "tax_rate": "0"}], customer_id=bakery,
                       customer=None)
    issued = await issue(client, made)
    assert issued.status_code == 201, issued.text
    assert scalar(studio.settings.db_path, "SELECT status FROM invoices WHERE id = ?",
                  made["id"]) == "issued"


async def test_a_right_invoice_or_an_unknown_seller_country_issues_without_asking(
        studio) -> None:
    client = await studio.signed_in()
    await seller(client)
    bakery = await customer(client, GERMAN_BUSINESS)
    made = await draft(client, [NO_RATE_LINE], customer_id=bakery, customer=None)
    review = await client.get(f"/invoices/{made['id']}/issue", headers={"Accept": "text/html"})
    assert 'id="tax-to-confirm"' not in review.text
    assert (await issue(client, made)).status_code == 201
    await seller(client, country="", vat_id="")
    made = await draft(client, [{**NO_RATE_LINE, "tax_rate": "0"}], customer_id=bakery,
                       customer=None)
    assert (await issue(client, made)).status_code == 201


async def test_confirm_tax_that_is_not_a_yes_or_no_is_refused_plainly(studio) -> None:
    client = await studio.signed_in()
    made = await draft(client, [NO_RATE_LINE])
    refused = await issue(client, made, confirm_tax="perhaps")
    assert refused.status_code == 422 and "confirm_tax" in refused.json()["message"]


def test_a_credit_note_is_never_asked_to_confirm() -> None:
    lines = [{"tax_rate": "19"}]
    seller, buyer = {**GERMAN_SELLER}, {**FRENCH_BUSINESS}
    assert invoices.tax_to_confirm("invoice", seller, buyer, lines, "")
    assert invoices.tax_to_confirm("credit_note", seller, buyer, lines, "") == []

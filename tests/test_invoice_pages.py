"""The pages people expect: lists, forms, history, the request list and "Try again"."""

from __future__ import annotations

import html
import json
import re
import time
from urllib.parse import urlencode

import pytest

from studio import i18n
from studio.leasing import leases
from tests.conftest import days_ahead, execute, lease_body, rows, scalar, wait_for_status

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}


async def test_the_invoice_list_separates_drafts_from_issued_invoices(studio) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    listed = rows(db, "SELECT id, number, currency, total FROM invoices"
                      " WHERE customer = 'Northwind Traders'")[0]
    execute(db, "UPDATE invoices SET summary = 'Paid early; ask about Q3' WHERE id = ?",
            listed["id"])
    page = (await client.get("/invoices", headers=PAGE)).text
    drafts, issued = page.split('id="drafts"')[1].split('id="issued"')
    assert "Pemberton Tea Rooms" in drafts and "Pemberton Tea Rooms" not in issued
    assert listed["number"] in issued and "Lindqvist Architects" in issued
    assert listed["number"] not in drafts
    # Each row: its number, its total, and the summary text itself, or that there is none.
    [row] = [tr for tr in issued.split("<tr>") if listed["number"] in tr]
    assert i18n.money(listed["total"], listed["currency"], "en") in row  # €2,700.00
    assert "Summarized" in row and "Paid early; ask about Q3" in row
    assert all("None yet" in tr for tr in drafts.split("<tr>")[2:])


async def test_a_form_with_repeated_line_fields_makes_a_draft_and_blank_lines_are_dropped(
        studio) -> None:
    client = await studio.signed_in()
    form = [("request_id", "form-1"), ("customer", "Form Co"), ("currency", "jpy"),
            ("due_date", days_ahead(151)),
            ("description", "Tea"), ("quantity", "2"), ("unit_price", "150.5"),
            ("tax_rate", "10"),
            ("description", ""), ("quantity", ""), ("unit_price", ""), ("tax_rate", "")]
    form_headers = {**HTMX, "Content-Type": "application/x-www-form-urlencoded"}
    made = await client.post("/invoices", content=urlencode(form), headers=form_headers)
    assert made.status_code == 200 and made.headers["hx-redirect"].startswith("/invoices/")
    invoice_id = made.headers["hx-redirect"].rsplit("/", 1)[1]
    stored = rows(studio.settings.db_path, "SELECT * FROM invoices WHERE id = ?", invoice_id)[0]
    assert (stored["currency"], stored["net"], stored["tax"], stored["total"]) == (
        "JPY", "301", "30", "331")
    again = await client.post("/invoices", content=urlencode(form), headers=form_headers)
    assert again.headers["hx-redirect"] == made.headers["hx-redirect"]
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM invoices WHERE customer = 'Form Co'") == 1


async def test_a_refused_form_shows_its_message_in_the_page(studio) -> None:
    client = await studio.signed_in()
    refused = await client.post("/invoices", headers=HTMX, data={
        "customer": "X", "currency": "EUR", "due_date": days_ahead(151), "description": "Tea",
        "quantity": "1", "unit_price": "3 EUR", "tax_rate": "0"})
    assert refused.status_code == 422 and refused.headers["hx-retarget"] == "#messages"
    assert "The unit price of line 1 must be a number like 1,200.50." in refused.text


async def test_totals_are_computed_by_the_server_while_typing(studio) -> None:
    client = await studio.signed_in()
    shown = await client.get("/invoices/totals", headers=HTMX, params=[
        ("currency", "EUR"), ("description", "a"), ("quantity", "3"), ("unit_price", "19.99"),
        ("tax_rate", "19"), ("description", "b"), ("quantity", "1"), ("unit_price", "1.005"),
        ("tax_rate", "0")])
    assert "€60.98" in shown.text and "€11.39" in shown.text and "€72.37" in shown.text
    half_typed = await client.get("/invoices/totals", headers=HTMX, params=[
        ("currency", "EUR"), ("description", "a"), ("quantity", "3"), ("unit_price", "19,")])
    assert half_typed.status_code == 200 and "unit price" in half_typed.text


async def test_the_review_step_speaks_a_persons_words(studio) -> None:
    client = await studio.signed_in()
    first, second = studio.invoice_ids()[:2]
    page = await client.get(f"/review?purpose=summarize_invoice&invoice_id={first}"
                            f"&invoice_id={second}&provider=local&candidates=3", headers=PAGE)
    assert "Summarize 2 invoices" in page.text
    assert "You will get <strong>6</strong> suggestions to choose from." in page.text


async def test_requests_are_listed_newest_first_and_an_ended_one_offers_try_again(
        studio) -> None:
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    older = (await client.post("/leases", json=lease_body([invoice], "older"))).json()
    await wait_for_status(client, older["lease_id"], "proposed")
    await studio.studio.db.write(leases.expire_due, time.time() + 3600)
    newer = (await client.post("/leases", json=lease_body([invoice], "newer",
                                                          candidates=2))).json()

    listed = (await client.get("/leases")).json()
    assert [item["lease_id"] for item in listed[:2]] == [newer["lease_id"], older["lease_id"]]
    assert listed[1]["status"] == "expired" and listed[1]["invoice_ids"] == [invoice]

    page = (await client.get("/leases", headers=PAGE)).text
    again = re.findall(r'class="again" href="([^"]+)"', page)
    assert len(again) == 1
    retry = (await client.get(again[0].replace("&amp;", "&"), headers=PAGE))
    assert retry.status_code == 200 and 'id="review"' in retry.text
    assert invoice in retry.text and "You will get <strong>1</strong> suggestion to" in retry.text

    history = (await client.get(f"/invoices/{invoice}", headers=PAGE)).text
    assert history.count('href="/leases/') >= 2 and "Try again" in history
    # Each request that named the invoice, with its outcome in words.
    entries = {lease_id: entry for entry in history.split("<li ")[1:]
               for lease_id in re.findall(r'href="/leases/([^"]+)"', entry)}
    assert 'data-status="expired"' in entries[older["lease_id"]]
    assert "Ended, nothing written" in entries[older["lease_id"]]
    assert "Try again" not in entries[newer["lease_id"]]


async def test_the_issue_review_shows_what_will_be_frozen(studio) -> None:
    client = await studio.signed_in()
    saved = await client.post("/settings", json={"name": "Ada Works", "address": "1 Lane",
                                                 "vat_id": "DE136695976"})
    assert saved.status_code == 200
    made = (await client.post("/invoices", json={
        "customer": "Review Co", "currency": "EUR", "due_date": days_ahead(90),
        "line_items": [{"description": "Framing", "quantity": "3", "unit_price": "19.99",
                        "tax_rate": "19"}]})).json()
    page = (await client.get(f"/invoices/{made['id']}/issue", headers=PAGE)).text
    series = f"INV-{time.gmtime().tm_year}"
    for shown in ("Ada Works", "DE136695976", "Review Co", i18n.date(made["due_date"], "en"),
                  "Framing", "71.36",
                  f'<strong id="series">{series}-…</strong>',
                  "<dt>Draft revision</dt><dd><code>1</code>"):
        assert shown in page, shown
    # What the Issue button posts is frozen in the page: this revision and nothing else.
    frozen = json.loads(html.unescape(re.search(r'data-frozen="([^"]+)"', page)[1]))
    assert frozen == {"revision": 1}  # the request id is minted beside it, in the browser


async def test_settings_keep_the_seller_profile(studio) -> None:
    client = await studio.signed_in()
    saved = await client.post("/settings", headers=PAGE, data={
        "name": "Ada & Co", "address": "1 Lane\nTown", "vat_id": "DE 136 695 976"})
    assert saved.status_code == 200 and "Saved." in saved.text
    kept = (await client.get("/settings")).json()
    assert (kept["name"], kept["address"], kept["vat_id"]) == (
        "Ada & Co", "1 Lane\nTown", "DE136695976")
    too_long = await client.post("/settings", json={"name": "x" * 201})
    assert too_long.status_code == 422

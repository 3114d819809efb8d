"""A form that creates something carries a request id from the server too (for a browser
without script), and the same form sent twice answers the first record."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from tests.conftest import days_ahead, scalar

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
FORM = {"Accept": "text/html", "Content-Type": "application/x-www-form-urlencoded"}
MINTED = re.compile(r'<input type="hidden" name="request_id" value="([0-9a-f-]{36})" data-mint>')
# The credit note's own form: the page has other forms (a payment, an email) with ids of theirs.
CREDIT_NOTE_MINTED = re.compile(r'action="/invoices/[^"]+/credit-note"[^>]*>\s*'
                                r'<input type="hidden" name="request_id" value="([0-9a-f-]{36})"'
                                r' data-mint>')


async def test_the_credit_note_form_sent_twice_makes_one_credit_note(studio) -> None:
    client = await studio.signed_in()
    issued = studio.invoice_ids()[0]
    page = (await client.get(f"/invoices/{issued}", headers=PAGE)).text
    [request_id] = CREDIT_NOTE_MINTED.findall(page)
    # Each visit gets its own.
    assert CREDIT_NOTE_MINTED.findall(
        (await client.get(f"/invoices/{issued}", headers=PAGE)).text) != [request_id]

    body = urlencode({"request_id": request_id})
    first = await client.post(f"/invoices/{issued}/credit-note", content=body, headers=FORM)
    again = await client.post(f"/invoices/{issued}/credit-note", content=body, headers=FORM)
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"] != f"/invoices/{issued}"
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM invoices WHERE credits = ?", issued) == 1


async def test_the_new_draft_form_sent_twice_makes_one_draft(studio) -> None:
    client = await studio.signed_in()
    [request_id] = MINTED.findall((await client.get("/invoices/new", headers=PAGE)).text)
    body = urlencode({"request_id": request_id, "customer": "No Script Co", "currency": "EUR",
                      "due_date": days_ahead(151), "description": "Tea", "quantity": "1",
                      "unit_price": "3", "tax_rate": "0"})
    first = await client.post("/invoices", content=body, headers=FORM)
    again = await client.post("/invoices", content=body, headers=FORM)
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"]
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM invoices WHERE customer = 'No Script Co'") == 1

"""In Chromium: a German seller's invoice to a German business with a line at 0 % is not
issued until the person ticks that the VAT is right, and then once; or, with the reason for
no VAT written on the draft, issued without being asked."""

from __future__ import annotations

import uuid

from playwright.sync_api import Page, expect

from tests.conftest import days_ahead, scalar
from tests.conftest import sign_in as api_sign_in
from tests.e2e.conftest import Studio, sign_in


def domestic_zero_draft(studio: Studio) -> str:
    client = api_sign_in(studio.url)
    try:
        customer = client.post("/customers", json={
            "name": "Bäckerei Sommer GmbH", "email": "buch@sommer.example",
            "address": "Markt 1\n10115 Berlin", "country": "DE", "vat_id": "DE811907980"})
        assert customer.status_code == 201, customer.text
        draft = client.post("/invoices", json={
            "customer_id": customer.json()["id"], "currency": "EUR",
            "due_date": days_ahead(30), "request_id": str(uuid.uuid4()),
            "line_items": [{"description": "Brot", "quantity": "1", "unit_price": "10.00",
                            "tax_rate": "0"}]})
        assert draft.status_code == 201, draft.text
    finally:
        client.close()
    return draft.json()["id"]


def test_a_domestic_zero_rate_is_issued_only_once_the_person_confirms(page: Page,
                                                                        studio: Studio) -> None:
    invoice_id = domestic_zero_draft(studio)
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{invoice_id}/issue")
    expect(page.locator("#tax-to-confirm")).to_contain_text("0 %")
    button = page.locator("#submit")
    expect(button).to_be_disabled()
    expect(page.locator("#frozen-body")).to_contain_text('"confirm_tax": false')
    page.locator("#confirm-tax").check()
    expect(button).to_be_enabled()
    expect(page.locator("#frozen-body")).to_contain_text('"confirm_tax": true')
    with page.expect_response(f"**/invoices/{invoice_id}/issue") as issued:
        button.click()
    assert issued.value.status == 201
    page.wait_for_url(f"**/invoices/{invoice_id}")
    assert scalar(studio.db_path, "SELECT status FROM invoices WHERE id = ?",
                  invoice_id) == "issued"


def test_a_reason_for_no_vat_written_on_the_draft_answers_the_question(page: Page,
                                                                      studio: Studio) -> None:
    invoice_id = domestic_zero_draft(studio)
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.locator("#draft-form [name=vat_exemption]").fill("Steuerfrei nach § 4 Nr. 21 UStG")
    # Saved, the draft's page is loaded again (HX-Redirect): the review is asked for after it.
    with page.expect_navigation(url=f"**/invoices/{invoice_id}"), \
            page.expect_response(f"**/invoices/{invoice_id}/edit") as saved:
        page.locator("#draft-form button[type=submit]").click()
    assert saved.value.status == 200
    expect(page.locator("#draft-form [name=vat_exemption]")).to_have_value(
        "Steuerfrei nach § 4 Nr. 21 UStG")
    page.goto(f"{studio.url}/invoices/{invoice_id}/issue")
    expect(page.locator("#vat-exemption")).to_have_text("Steuerfrei nach § 4 Nr. 21 UStG")
    expect(page.locator("#tax-to-confirm")).to_have_count(0)
    with page.expect_response(f"**/invoices/{invoice_id}/issue") as issued:
        page.locator("#submit").click()
    assert issued.value.status == 201
    page.wait_for_url(f"**/invoices/{invoice_id}")
    assert scalar(studio.db_path, "SELECT status || ' ' || vat_exemption FROM invoices"
                  " WHERE id = ?", invoice_id) == "issued Steuerfrei nach § 4 Nr. 21 UStG"

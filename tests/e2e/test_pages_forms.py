"""Forms as a person uses them in Chromium: a message stays until the person acts, a form
that creates something makes it once whatever Back and Reload do, and an issued invoice
shows its own address."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import days_ahead, scalar
from tests.e2e.conftest import Studio, sign_in, type_customer

pytestmark = pytest.mark.e2e

DRAFT_URL = re.compile(r".*/invoices/[0-9a-f-]{36}$")


def fill_draft(page: Page, customer: str, unit_price: str = "450", quick: bool = False
               ) -> None:
    """`quick`: typed as fast as Playwright types, not waiting for the customer picker."""
    if quick:
        page.get_by_label("Customer").fill(customer)
    else:
        type_customer(page, customer)
    page.get_by_label("Due date").fill(days_ahead(90))
    page.get_by_label("Description").nth(0).fill("Consulting")
    page.get_by_label("Quantity").nth(0).fill("1")
    page.get_by_label("Unit price").nth(0).fill(unit_price)


def drafts_for(studio: Studio, customer: str) -> int:
    return scalar(studio.db_path, "SELECT COUNT(*) FROM invoices WHERE customer = ?", customer)


# The save must beat the totals' debounced request: under the load of files run side by
# side the totals request did not come within 30 s.
@pytest.mark.alone
def test_a_refusal_of_a_quick_save_stays_when_the_totals_refresh(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    page.wait_for_load_state("networkidle")
    # Saved before the totals catch up with the typing: the totals ask afterwards.
    with page.expect_response(lambda reply: "/invoices/totals" in reply.url):
        fill_draft(page, "Quick Save Co", unit_price="3 EUR", quick=True)
        with page.expect_response(lambda reply: reply.request.method == "POST") as saved:
            page.get_by_role("button", name="Save draft").click()
        assert saved.value.status == 422
    page.wait_for_timeout(300)  # the totals reply has been swapped in
    expect(page.locator("#totals")).to_contain_text("unit price")
    expect(page.locator("#messages")).to_contain_text("The unit price of line 1")
    assert drafts_for(studio, "Quick Save Co") == 0

    # The person's next action is what replaces it.
    page.get_by_label("Unit price").nth(0).fill("450")
    expect(page.locator("#messages")).to_contain_text("The unit price of line 1")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    assert drafts_for(studio, "Quick Save Co") == 1


def test_save_back_and_save_again_makes_one_draft(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    fill_draft(page, "Back Again Co")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    first = page.url

    page.go_back()
    expect(page).to_have_url(studio.url + "/invoices/new")
    fill_draft(page, "Back Again Co")  # as it was, whether or not the browser kept it
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    assert page.url == first
    expect(page.get_by_label("Customer")).to_have_value("Back Again Co")
    assert drafts_for(studio, "Back Again Co") == 1


def test_reload_keeps_a_forms_request_id_and_a_new_visit_mints_another(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    minted = page.locator("#draft-form input[name=request_id]")
    expect(minted).to_have_value(re.compile(r"^[0-9a-f-]{36}$"))
    first = minted.input_value()
    page.reload()
    expect(minted).to_have_value(first)
    page.goto(studio.url + "/invoices")
    page.goto(studio.url + "/invoices/new")
    expect(minted).to_have_value(re.compile(r"^[0-9a-f-]{36}$"))
    assert minted.input_value() != first


def test_make_a_credit_note_back_and_again_makes_one_credit_note(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = scalar(studio.db_path, "SELECT invoices.id FROM invoices JOIN actors"
                        " ON actors.id = owner_id WHERE email = 'ada@example.com'"
                        " AND status = 'issued' AND kind = 'invoice' ORDER BY number LIMIT 1")
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.get_by_role("button", name="Make a credit note").click()
    page.wait_for_url(lambda url: bool(DRAFT_URL.match(url)) and invoice_id not in url)
    note = page.url

    page.go_back()
    expect(page).to_have_url(f"{studio.url}/invoices/{invoice_id}")
    page.get_by_role("button", name="Make a credit note").click()
    page.wait_for_url(lambda url: bool(DRAFT_URL.match(url)) and invoice_id not in url)
    assert page.url == note
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM invoices WHERE credits = ?",
                  invoice_id) == 1


def test_an_issued_invoice_shows_its_own_address_at_once(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    fill_draft(page, "Address Bar Co")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    invoice_url = page.url
    page.get_by_role("link", name="Review and issue…").click()
    expect(page.locator("#submit")).to_be_enabled()
    page.evaluate("window.reviewStep = true")  # gone once the page is loaded again
    with page.expect_response("**/issue") as issued:
        page.locator("#submit").click()
    assert issued.value.status == 201
    # Not the review step's address for a moment longer: the invoice's, as soon as it is
    # issued, while the review step is still the page shown (before it loads the invoice).
    page.wait_for_function(f"window.reviewStep === true && location.href === {invoice_url!r}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("INV-")
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"/issue$"))

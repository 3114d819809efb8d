"""In a real browser: a customer made on the Customers page is found and chosen by the picker on
a new draft, and one made in place from the draft is chosen at once; choosing one fills in the
draft's currency and its due date from the customer's payment terms."""

from __future__ import annotations

import datetime as dt
import re

from playwright.sync_api import Page, expect

from tests.conftest import days_ahead, rows
from tests.e2e.conftest import Studio, lose_first_reply, sign_in

DRAFT_URL = re.compile(r".*/invoices/[0-9a-f-]{36}$")


def fill_the_rest_and_save(page: Page) -> str:
    page.get_by_label("Due date").fill(days_ahead(90))
    page.get_by_label("Description").nth(0).fill("Design work")
    page.get_by_label("Unit price").nth(0).fill("100")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    return page.url.rsplit("/", 1)[1]


def test_a_customer_made_on_the_customers_page_is_picked_on_a_new_draft(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.get_by_role("link", name="Customers").click()
    expect(page).to_have_url(studio.url + "/customers")
    form = page.locator("#new-customer-form")
    form.get_by_label("Name", exact=True).fill("Picked Pty")
    form.get_by_label("Email", exact=True).fill("accounts@picked.example")
    form.locator("select[name=country]").select_option(label="Germany")
    form.get_by_label("VAT ID").fill("DE 811 569 869")
    form.get_by_role("button", name="Add customer").click()
    page.wait_for_url(re.compile(r".*/customers/[0-9a-f-]{36}$"))
    customer_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name="Picked Pty")).to_be_visible()
    [made] = rows(studio.db_path, "SELECT name, country, vat_id FROM customers WHERE id = ?",
                  customer_id)
    assert tuple(made) == ("Picked Pty", "DE", "DE811569869")

    page.goto(studio.url + "/invoices/new")
    page.get_by_label("Customer", exact=True).press_sequentially("picked")
    match = page.locator("#customer-matches").get_by_role("button", name=re.compile("Picked Pty"))
    match.click()
    expect(page.locator("#customer-id")).to_have_value(customer_id)
    expect(page.get_by_label("Customer", exact=True)).to_have_value("Picked Pty")
    invoice_id = fill_the_rest_and_save(page)
    [draft] = rows(studio.db_path, "SELECT customer, customer_id FROM invoices WHERE id = ?",
                   invoice_id)
    assert tuple(draft) == ("Picked Pty", customer_id)


def test_a_customer_made_in_place_on_the_draft_is_chosen_once(page: Page,
                                                               studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(studio.url + "/invoices/new")
    page.get_by_text("Make a new customer").click()
    page.locator("input[name=new_customer_name]").fill("Inline Pty")
    page.locator("input[name=new_customer_email]").fill("hello@inline.example")
    # The first reply is lost: the person presses again, and the same customer is chosen.
    lost = lose_first_reply(page, "**/customers/picker")
    page.get_by_role("button", name="Add and choose").click()
    expect(page.locator("#messages [data-code=no_reply]")).to_be_visible()
    assert lost == [200]
    page.get_by_role("button", name="Add and choose").click()
    [made] = rows(studio.db_path, "SELECT id FROM customers WHERE name = 'Inline Pty'")
    expect(page.locator("#customer-id")).to_have_value(made["id"])
    expect(page.get_by_label("Customer", exact=True)).to_have_value("Inline Pty")
    invoice_id = fill_the_rest_and_save(page)
    assert rows(studio.db_path, "SELECT customer_id FROM invoices WHERE id = ?",
                invoice_id)[0][0] == made["id"]
    assert len(rows(studio.db_path, "SELECT id FROM customers WHERE name = 'Inline Pty'")) == 1


def test_choosing_a_customer_fills_in_their_currency_and_the_due_date_from_their_terms(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    made = page.request.post(studio.url + "/customers", data={
        "name": "Alpenblick AG", "country": "CH", "currency": "CHF",
        "payment_terms_days": 30})
    assert made.status == 201, made.text()
    customer_id = made.json()["id"]
    page.goto(studio.url + "/invoices/new")
    currency, due = page.get_by_label("Currency"), page.get_by_label("Due date")
    expect(currency).to_have_value("EUR")
    expect(due).to_have_value("")
    expect(page.locator("#customer-fills")).to_contain_text("fills in their currency")
    page.get_by_label("Customer", exact=True).press_sequentially("alpen")
    page.locator("#customer-matches").get_by_role(
        "button", name=re.compile("Alpenblick AG")).click()
    expect(page.locator("#customer-id")).to_have_value(customer_id)
    # Today as the browser counts it, give or take a midnight passing during the test.
    days = [(dt.date.today() + dt.timedelta(days=n)).isoformat() for n in (30, 31)]
    expect(currency).to_have_value("CHF")
    expect(due).to_have_value(re.compile("^(" + "|".join(days) + ")$"))
    filled = due.input_value()
    expect(page.locator("#customer-filled")).to_have_text(
        f"Filled in from Alpenblick AG's details: currency CHF, due {filled} (30 days).")

    # Both stay the person's: a due date already there is kept when choosing again.
    chosen = days_ahead(211)
    due.fill(chosen)
    page.get_by_label("Customer", exact=True).fill("")
    page.get_by_label("Customer", exact=True).press_sequentially("alpen")
    page.locator("#customer-matches").get_by_role(
        "button", name=re.compile("Alpenblick AG")).click()
    expect(page.locator("#customer-id")).to_have_value(customer_id)
    expect(due).to_have_value(chosen)
    page.get_by_label("Description").nth(0).fill("Chalet photography")
    page.get_by_label("Unit price").nth(0).fill("800")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(DRAFT_URL)
    [draft] = rows(studio.db_path, "SELECT customer_id, currency, due_date FROM invoices"
                                   " WHERE id = ?", page.url.rsplit("/", 1)[1])
    assert tuple(draft) == (customer_id, "CHF", chosen)

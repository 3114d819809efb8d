"""A German-speaking person in Chromium (the browser's locale de-DE, so it asks for German):
a price typed `1.200,50` and a payment typed `500,00` are taken as meant; a refused field shows
its message beside it, in view, focused, and the button pressed says what happened."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import ADA, DEMO_PASSWORD, days_ahead, rows, scalar
from tests.e2e.conftest import NORTHWIND, Studio

pytestmark = pytest.mark.e2e


@pytest.fixture
def german(chromium: Browser, studio: Studio) -> Iterator[Page]:
    """A German browser, signed in; any script error or 5xx fails the test."""
    context = chromium.new_context(locale="de-DE")
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("response", lambda reply: problems.append(f"{reply.status} {reply.url}")
            if reply.status >= 500 else None)
    signed = context.request.post(studio.url + "/login",
                                  data={"email": ADA, "password": DEMO_PASSWORD})
    assert signed.ok, signed.text()
    try:
        yield page
    finally:
        context.close()
    assert not problems, problems


def beside(page: Page, field: str, said: str) -> None:
    """The field's message is shown right below it, in view, and names it for assistive
    technology; the field has the focus."""
    message = page.locator(f"{field} + .field-error")
    expect(message).to_have_text(said)
    expect(message).to_be_in_viewport()
    expect(page.locator(field)).to_have_attribute("aria-invalid", "true")
    described = page.locator(field).get_attribute("aria-describedby") or ""
    assert message.get_attribute("id") in described.split()
    under, box = message.bounding_box(), page.locator(field).bounding_box()
    assert under is not None and box is not None
    assert -2 <= under["y"] - (box["y"] + box["height"]) < 30  # right under it (sub-pixel)
    assert abs(under["x"] - box["x"]) < 30


def test_a_german_price_of_1_200_50_is_taken_and_the_address_is_the_drafts(
        german: Page, studio: Studio) -> None:
    page = german
    page.goto(studio.url + "/invoices/new")
    page.locator("input[name=customer]").fill("Kunde Berlin GmbH")
    page.locator("input[name=due_date]").fill(days_ahead(30))
    page.locator("#lines input[name=description]").first.fill("Beratung")
    page.locator("#lines input[name=quantity]").first.fill("1,5")
    page.locator("#lines input[name=unit_price]").first.fill("1.200,50")
    page.locator("#lines input[name=tax_rate]").first.fill("19")
    expect(page.locator("#total-net")).to_contain_text("1.800,75\xa0€")  # as German writes it
    page.locator("#draft-form button[type=submit]").click()
    page.wait_for_url(re.compile(r".*/invoices/[0-9a-f-]{36}$"))
    invoice_id = page.url.rsplit("/", 1)[1]
    lines = json.loads(scalar(studio.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                              invoice_id))
    assert (lines[0]["unit_price"], lines[0]["quantity"]) == ("1200.50", "1.5")
    # Shown back as German writes it, so saving again changes nothing.
    expect(page.locator("#lines input[name=unit_price]").first).to_have_value("1.200,50")


def test_a_german_payment_of_500_comma_00_is_taken(german: Page, studio: Studio) -> None:
    page = german
    invoice_id = studio.invoice_id(NORTHWIND)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.locator("#payment-amount").fill("500,00")
    page.locator("#record-payment").click()
    page.wait_for_url(re.compile(r".*recorded="))
    amounts = [row[0] for row in rows(
        studio.db_path, "SELECT amount FROM payments WHERE invoice_id = ? AND voided_at IS NULL",
        invoice_id)]
    assert "500.00" in amounts


def test_a_refused_payment_says_so_beside_its_amount_in_view(german: Page, studio: Studio
                                                            ) -> None:
    page = german
    invoice_id = studio.invoice_id(NORTHWIND)
    had = scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                 invoice_id)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.locator("#payment-amount").fill("fünfhundert")
    page.locator("#record-payment").click()
    beside(page, "#payment-amount", "Der Betrag muss eine Zahl wie 1.200,50 sein.")
    expect(page.locator("#payment-amount")).to_be_focused()
    expect(page.locator("#record-payment")).to_have_text(
        "Nicht gespeichert: 1 Feld zu korrigieren")
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == had
    # Mended and sent again: the message goes, the payment is taken.
    page.locator("#payment-amount").fill("12,50")
    page.locator("#record-payment").click()
    page.wait_for_url(re.compile(r".*recorded="))
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == had + 1


def test_every_refused_line_field_shows_its_message_beside_it(german: Page, studio: Studio
                                                              ) -> None:
    page = german
    page.goto(studio.url + "/invoices/new")
    page.locator("input[name=customer]").fill("Kunde Hamburg GmbH")
    page.locator("input[name=due_date]").fill(days_ahead(30))
    page.locator("#lines input[name=description]").first.fill("Beratung")
    page.locator("#lines input[name=unit_price]").first.fill("1,200,50")
    page.locator("#lines input[name=quantity]").first.fill("zwei")
    page.locator("#draft-form button[type=submit]").click()
    price = "#lines tr:nth-child(1) input[name=unit_price]"
    quantity = "#lines tr:nth-child(1) input[name=quantity]"
    beside(page, quantity, "Die Menge in Zeile 1 muss eine Zahl wie 1,5 sein.")
    beside(page, price, "Der Einzelpreis in Zeile 1 muss eine Zahl wie 1.200,50 sein.")
    expect(page.locator("#draft-form button[type=submit]")).to_have_text(
        "Nicht gespeichert: 2 Felder zu korrigieren")
    expect(page).to_have_url(re.compile(r".*/invoices/new$"))
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM invoices WHERE customer = ?",
                  "Kunde Hamburg GmbH") == 0
    # Mended, the button offers to save again, and the messages go with the next save.
    page.locator(quantity).fill("2")
    page.locator(price).fill("1.200,50")
    expect(page.locator("#draft-form button[type=submit]")).to_have_text("Entwurf speichern")
    page.locator("#draft-form button[type=submit]").click()
    page.wait_for_url(re.compile(r".*/invoices/[0-9a-f-]{36}$"))
    assert scalar(studio.db_path, "SELECT net FROM invoices WHERE customer = ?",
                  "Kunde Hamburg GmbH") == "2401.00"

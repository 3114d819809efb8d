"""A German-speaking browser gets the studio in German, until its person chooses English in
Settings: then English, whatever the browser asks for."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from studio.ops.demo import DEMO_PASSWORD
from tests.conftest import ADA, scalar
from tests.e2e.conftest import Studio

pytestmark = pytest.mark.e2e


def test_a_german_browser_sees_german_until_english_is_chosen_in_settings(
        chromium: Browser, studio: Studio) -> None:
    context = chromium.new_context(locale="de-DE")
    page = context.new_page()
    try:
        page.goto(studio.url + "/login")
        expect(page.locator("html")).to_have_attribute("lang", "de")
        page.get_by_label("E-Mail").fill(ADA)
        page.get_by_label("Passwort").fill(DEMO_PASSWORD)
        page.get_by_role("button", name="Anmelden").click()
        expect(page).to_have_url(studio.url + "/invoices")
        expect(page.get_by_role("heading", name="Ihre Rechnungen")).to_be_visible()
        # Amounts as German writes them: 2.700,00 €.
        expect(page.locator("#issued")).to_contain_text(re.compile(r"\d\.\d{3},\d\d\s€"))

        page.get_by_role("link", name="Einstellungen").click()
        page.get_by_label("Sprache dieser Seiten").select_option("en")
        page.get_by_role("button", name="Speichern", exact=True).click()
        expect(page.locator("#saved")).to_have_text("Saved.")
        assert scalar(studio.db_path, "SELECT language FROM actors WHERE email = ?",
                      ADA) == "en"

        page.get_by_role("link", name="Invoices", exact=True).click()
        expect(page.get_by_role("heading", name="Your invoices")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("lang", "en")
        expect(page.locator("#issued")).to_contain_text(re.compile(r"€\d,\d{3}\.\d\d"))
    finally:
        context.close()

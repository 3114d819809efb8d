"""Times read in the person's own time zone, as the browser knows it; dates stay dates."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, expect

from studio import i18n
from tests.conftest import scalar
from tests.e2e.conftest import NORTHWIND, Studio, sign_in

pytestmark = pytest.mark.e2e
ZONE = "Pacific/Auckland"  # far from UTC on any day of the year


def test_times_show_in_the_browsers_time_zone_and_dates_as_dates(
        chromium: Browser, studio: Studio) -> None:
    context = chromium.new_context(timezone_id=ZONE, locale="en-GB")
    page = context.new_page()
    try:
        sign_in(page, studio.url)
        invoice_id = studio.invoice_id(NORTHWIND)
        page.goto(f"{studio.url}/invoices/{invoice_id}")
        page.locator("#share-create").click()
        made = page.locator("#share-links time").first
        expect(made).not_to_have_attribute("data-local", "")
        at = dt.datetime.fromtimestamp(scalar(
            studio.db_path, "SELECT MAX(created_at) FROM share_links WHERE invoice_id = ?",
            invoice_id), ZoneInfo(ZONE))
        shown = made.text_content()
        assert "UTC" not in shown, shown
        # en-GB, medium date and short time: "4 Dec 2026, 00:41" in Auckland.
        assert shown == f"{at.day} {at:%b} {at.year}, {at:%H:%M}", shown
        # The issue date is a date: not moved into another day by the zone.
        issued = scalar(studio.db_path, "SELECT issue_date FROM invoices WHERE id = ?",
                        invoice_id)
        if issued:
            expect(page.locator("#invoice")).to_contain_text(i18n.date(issued, "en"))
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                            made.get_attribute("datetime"))
    finally:
        context.close()

"""On a plain-http LAN address there is no `crypto.randomUUID`; the review step still works."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.conftest import rows
from tests.e2e.conftest import KESTREL, Studio, launch_options, lease_posts, sign_in

pytestmark = pytest.mark.e2e

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture
def lan_page() -> Iterator[Page]:
    """A browser that reaches the studio as http://studio.lan, which is not a secure context."""
    options = launch_options("--host-resolver-rules=MAP studio.lan 127.0.0.1")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(**options)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def test_review_on_a_non_secure_origin_mints_an_id_and_submits(
        lan_page: Page, studio: Studio) -> None:
    page = lan_page
    lan_url = studio.url.replace("127.0.0.1", "studio.lan")
    sign_in(page, lan_url)
    assert page.evaluate("window.isSecureContext") is False
    assert page.evaluate("typeof crypto.randomUUID") == "undefined"

    page.get_by_label(f"Choose {KESTREL}").check()
    page.get_by_role("button", name="Summarize the chosen invoices").click()
    expect(page.locator("#submit")).to_be_enabled()
    request_id = page.locator("#request-id").text_content()
    assert UUID4.match(request_id)

    posts = lease_posts(page)
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(re.compile(r"^http://studio\.lan:\d+/leases/"))
    lease_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#lease-status")).to_have_attribute("data-status", "proposed")

    assert [post["request_id"] for post in posts] == [request_id]
    bound = rows(studio.db_path, "SELECT target_id AS lease_id FROM request_bindings"
                 " WHERE request_id = ?",
                 request_id)
    assert [row["lease_id"] for row in bound] == [lease_id]

"""A poll reply that arrives late cannot bring Apply back (finding 6 of issue 9): the poll
and the decisions share one hx-sync queue on #lease, so a decision aborts a poll in flight
and the newest state is the one on screen."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import (
    NORTHWIND,
    Studio,
    open_review,
    sign_in,
    submit_and_open_lease,
    wait_until,
)

pytestmark = pytest.mark.e2e

STUDIO_SETTINGS = {"STUDIO_LEASE_SECONDS": "120"}

# Watches the page from the moment it is installed: did an enabled Apply ever show up?
WATCH_FOR_APPLY = """() => {
  window.applyCameBack = false;
  const look = () => {
    const button = document.querySelector('#apply');
    if (button && !button.disabled) { window.applyCameBack = true; }
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true,
                                                     attributes: true});
}"""


def test_a_delayed_poll_reply_cannot_bring_apply_back_after_applying(page: Page,
                                                                     studio: Studio) -> None:
    sign_in(page, studio.url)
    open_review(page, studio, NORTHWIND)
    lease_id = submit_and_open_lease(page)
    expect(page.locator("#apply")).to_be_enabled()  # proposed

    held: list[tuple[Route, Any]] = []

    def hold_one_poll(route: Route) -> None:
        request = route.request
        if request.method == "GET" and request.headers.get("hx-request") == "true" \
                and not held:
            # The server answers now ("proposed"); the browser gets it only when we say so.
            held.append((route, route.fetch()))
            return
        route.continue_()

    page.route(f"**/leases/{lease_id}", hold_one_poll)
    wait_until(page, lambda: bool(held))
    page.locator("#apply").click()
    expect(page.locator("#lease-status-text")).to_contain_text("Saved")
    studio.wait_for_lease(lease_id, "applied")

    page.evaluate(WATCH_FOR_APPLY)
    route, stale = held[0]
    try:
        route.fulfill(response=stale)  # the stale "proposed" reply lands after "applied"
    except Exception:
        pass  # the browser already gave up on that poll: exactly what hx-sync is for
    page.wait_for_timeout(2500)  # a few poll periods: any stale swap would have happened
    assert page.evaluate("window.applyCameBack") is False
    expect(page.locator("#lease-status-text")).to_contain_text("Saved")
    expect(page.locator("#apply")).to_have_count(0)
    assert studio.lease(lease_id)["status"] == "applied"

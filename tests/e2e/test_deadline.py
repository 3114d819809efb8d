"""The deadline wins: a closed tab, a page left open, and an apply that comes too late."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, Route, expect

from tests.conftest import execute, rows
from tests.e2e.conftest import (
    BLUE_HARBOR,
    KESTREL,
    NORTHWIND,
    ORCHARD,
    Studio,
    lease_polls,
    open_review,
    sign_in,
    submit_and_open_lease,
)

pytestmark = pytest.mark.e2e

# Short leases: each test here waits for a deadline. Long enough that two suggestions of a
# second each are made well before it on a busy machine.
STUDIO_SETTINGS = {"STUDIO_PROVIDER_DELAY_S": "1", "STUDIO_WORKER_SLOTS": "1",
                   "STUDIO_LEASE_SECONDS": "10"}


def test_closed_tab_lease_still_proposes_then_expires_and_writes_nothing(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    open_review(page, studio, NORTHWIND, BLUE_HARBOR)
    lease_id = submit_and_open_lease(page)
    assert studio.lease(lease_id)["status"] == "open"
    page.close()

    studio.wait_for_lease(lease_id, "proposed")
    proposals = rows(studio.db_path, "SELECT invoice_id FROM proposals WHERE lease_id = ?",
                     lease_id)
    assert len(proposals) == 2
    lease = studio.wait_for_lease(lease_id, "expired")
    assert lease["ended_reason"] == "deadline"
    assert lease["ended_at"] >= lease["deadline_at"]
    assert studio.summary(NORTHWIND) == studio.summary(BLUE_HARBOR) == ""


def test_deadline_passing_shows_the_expiry_without_a_reload(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    open_review(page, studio, KESTREL)
    lease_id = submit_and_open_lease(page)
    polls = lease_polls(page, lease_id)
    page.evaluate("window.sameDocument = true")
    expect(page.locator("#apply")).to_be_enabled()

    status = page.locator("#lease-status")
    expect(status).to_contain_text("The time ran out. Nothing was written.", timeout=30_000)
    expect(page.locator("#lease-announcer")).to_contain_text("The time ran out.")
    expect(page.locator("#apply")).to_have_count(0)
    assert page.evaluate("window.sameDocument") is True, "the page was reloaded"
    stopped_at = polls()
    page.wait_for_timeout(1500)
    assert polls() == stopped_at
    assert studio.lease(lease_id)["status"] == "expired"
    assert studio.summary(KESTREL) == ""


def test_apply_after_the_deadline_shows_the_expiry_message(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    open_review(page, studio, ORCHARD)
    lease_id = submit_and_open_lease(page)
    apply = page.locator("#apply")
    expect(apply).to_be_enabled()

    # The view goes stale (polls get no answer) while the deadline passes on the server.
    def no_answer(route: Route) -> None:
        if route.request.method == "GET":
            route.abort()
        else:
            route.continue_()

    page.route(f"**/leases/{lease_id}", no_answer)
    expect(page.locator("#messages")).to_contain_text("No reply from the studio")
    execute(studio.db_path, "UPDATE leases SET deadline_at = ? WHERE id = ?",
            time.time() - 0.1, lease_id)

    page.evaluate("""window.unansweredPolls = 0;
        document.addEventListener("htmx:sendError", () => { window.unansweredPolls += 1; });""")
    apply.click()
    refusal = "The time ran out: nothing was written. Ask again for new suggestions."
    expect(page.locator("#messages")).to_have_text(refusal)
    # A poll that gets no answer after it does not hide it (this listener runs after the page's).
    asked = page.evaluate("window.unansweredPolls")
    page.wait_for_function(f"window.unansweredPolls > {asked}")
    expect(page.locator("#messages")).to_have_text(refusal)
    lease = studio.lease(lease_id)
    assert lease["status"] == "expired"
    assert studio.summary(ORCHARD) == ""

    page.unroute(f"**/leases/{lease_id}")
    expect(page.locator("#lease-status")).to_contain_text("The time ran out.")
    # The refusal stays readable after the view catches up.
    expect(page.locator("#messages")).to_contain_text("The time ran out: nothing was written.")

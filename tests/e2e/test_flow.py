"""The studio in a real browser: sign in, review, submit, watch, decide; and every refusal."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from studio import i18n
from tests.conftest import ADA, BEN, rows, scalar
from tests.conftest import sign_in as api_sign_in
from tests.e2e.conftest import (
    BLUE_HARBOR,
    KESTREL,
    NORTHWIND,
    ORCHARD,
    Studio,
    lease_polls,
    lease_posts,
    lose_first_reply,
    open_review,
    review_url,
    sign_in,
    submit_and_open_lease,
    wait_until,
)

pytestmark = pytest.mark.e2e

# Candidates arrive one by one, slowly enough to watch; no deadline gets in the way.
STUDIO_SETTINGS = {"STUDIO_PROVIDER_DELAY_S": "0.8", "STUDIO_WORKER_SLOTS": "1",
                   "STUDIO_LEASE_SECONDS": "120"}

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def api_lease(studio: Studio, number: str, request_id: str, email: str = ADA) -> str:
    client = api_sign_in(studio.url, email)
    try:
        reply = client.post("/leases", json={
            "request_id": request_id, "purpose": "summarize_invoice",
            "invoice_ids": [studio.invoice_id(number)], "providers": ["local"]})
    finally:
        client.close()
    assert reply.status_code == 201, reply.text
    return reply.json()["lease_id"]


def test_whole_flow_review_submit_watch_choose_and_apply(page: Page, studio: Studio) -> None:
    page.goto(studio.url + "/invoices")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Finvoices$"))
    expect(page.get_by_role("complementary", name="Demo accounts")).to_contain_text("studio-demo")
    sign_in(page, studio.url)

    row = page.get_by_role("row").filter(has_text=NORTHWIND)
    due = scalar(studio.db_path, "SELECT due_date FROM invoices WHERE id = ?",
                 studio.invoice_id(NORTHWIND))
    # The amount and the date as English writes them: €2,700.00, 4 Jan 2027.
    for fact in ("Northwind Traders", "€2,700.00", i18n.date(due, "en"), "None yet"):
        expect(row).to_contain_text(fact)
    page.get_by_label(f"Choose {NORTHWIND}").check()
    page.get_by_label(f"Choose {BLUE_HARBOR}").check()
    page.get_by_role("button", name="Summarize the chosen invoices").click()
    expect(page).to_have_url(re.compile(r"/review\?"))
    expect(page.locator("#submit")).to_be_enabled()
    first_id = page.locator("#request-id").text_content()

    # Changing the request is a new review step, with a new id.
    page.get_by_label("The AI model if it answers, else the studio", exact=True).uncheck()
    page.get_by_label("The studio", exact=True).check()
    page.get_by_label("Suggestions from each, for each invoice").fill("2")
    page.get_by_role("button", name="Review again").click()
    expect(page.locator("#submit")).to_be_enabled()
    request_id = page.locator("#request-id").text_content()
    assert UUID4.match(request_id) and request_id != first_id

    review = page.locator("#review")
    for shown in ("Summarize invoice", f"{NORTHWIND} · Northwind Traders",
                  f"{BLUE_HARBOR} · Blue Harbor Cafe", "The studio"):
        expect(review).to_contain_text(shown)
    expect(page.locator("#task-count")).to_have_text("4")
    page.get_by_text("Technical details").click()
    frozen = json.loads(page.locator("#frozen-body").text_content())
    assert frozen == {
        "purpose": "summarize_invoice", "providers": ["local"], "candidates": 2,
        "invoice_ids": sorted([studio.invoice_id(NORTHWIND), studio.invoice_id(BLUE_HARBOR)]),
        "request_id": request_id,
    }

    posts = lease_posts(page)
    lease_id = submit_and_open_lease(page)
    assert posts == [frozen]
    polls = lease_polls(page, lease_id)

    progress = page.get_by_role("progressbar")
    expect(progress).to_have_attribute("max", "4")
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^\d+ s left$"))
    # Candidates appear while the lease is still open, before all four are done.
    expect(page.locator("#lease-status")).to_contain_text(re.compile(r"[123] / 4 done"))
    expect(page.locator("#lease-status")).to_have_attribute("data-status", "open")

    # Choose the second suggestion for Northwind from the keyboard while polling goes on.
    first_invoice = page.get_by_role("group", name=re.compile(NORTHWIND))
    radios = first_invoice.get_by_role("radio")
    expect(radios).to_have_count(2)
    radios.nth(0).focus()
    page.keyboard.press("ArrowDown")
    chosen_id = radios.nth(1).get_attribute("value")
    expect(radios.nth(1)).to_be_checked()
    seen = polls()
    # Four suggestions one after another on one slot, maybe behind other tests' requests.
    expect(page.locator("#lease-status")).to_have_attribute("data-status", "proposed",
                                                            timeout=30_000)
    wait_until(page, lambda: polls() > seen + 1)
    expect(radios.nth(1)).to_be_checked()
    expect(radios.nth(1)).to_be_focused()
    expect(page.get_by_role("progressbar")).to_have_attribute("value", "4")
    expect(page.locator("#lease-announcer")).to_contain_text("Suggestions are ready")

    page.locator("#apply").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#lease-status")).to_contain_text("Saved.")
    expect(page.locator("#lease-announcer")).to_contain_text("Saved.")
    stopped_at = polls()
    page.wait_for_timeout(2500)
    assert polls() == stopped_at, "polling went on after the lease was final"

    lease = studio.lease(lease_id)
    assert lease["status"] == "applied"
    chosen = {row["invoice_id"]: row["summary"] for row in rows(
        studio.db_path, "SELECT invoice_id, summary FROM proposals WHERE applied_at IS NOT NULL"
        " AND lease_id = ?", lease_id)}
    assert chosen[studio.invoice_id(NORTHWIND)] == scalar(
        studio.db_path, "SELECT summary FROM proposals WHERE id = ?", chosen_id)
    assert studio.summary(NORTHWIND) == chosen[studio.invoice_id(NORTHWIND)] != ""
    assert studio.summary(BLUE_HARBOR) == chosen[studio.invoice_id(BLUE_HARBOR)] != ""

    page.goto(f"{studio.url}/invoices/{studio.invoice_id(NORTHWIND)}")
    expect(page.locator("#summary")).to_have_text(studio.summary(NORTHWIND))
    page.goto(studio.url + "/invoices")
    expect(page.get_by_role("row").filter(has_text=NORTHWIND)).to_contain_text("Summarized")


def test_reloading_keeps_the_review_step_and_a_new_step_mints_a_new_id(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{studio.invoice_id(KESTREL)}")
    page.get_by_role("button", name="Summarize").click()
    expect(page.locator("#submit")).to_be_enabled()
    request_id = page.locator("#request-id").text_content()
    body = page.locator("#frozen-body").text_content()

    page.reload()
    expect(page.locator("#request-id")).to_have_text(request_id)
    expect(page.locator("#frozen-body")).to_have_text(body)

    page.goto(f"{studio.url}/invoices/{studio.invoice_id(KESTREL)}")
    page.get_by_role("button", name="Summarize").click()
    expect(page.locator("#submit")).to_be_enabled()
    assert page.locator("#request-id").text_content() not in (request_id, "minting…")


def test_lost_reply_is_submitted_again_with_the_same_id_and_makes_one_lease(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    request_id = open_review(page, studio, KESTREL)
    leases_before = studio.lease_count()
    posts = lease_posts(page)
    dropped = lose_first_reply(page, "**/leases")  # the server did the work; reply lost
    submit = page.locator("#submit")
    submit.click()
    expect(page.locator("#submit-status")).to_contain_text("No reply - submit again; it is safe")
    expect(submit).to_be_enabled()
    expect(submit).to_have_text("Submit again")
    assert dropped == [201]
    assert studio.lease_count() == leases_before + 1

    with page.expect_response("**/leases") as resent:
        submit.click()
    assert resent.value.status == 200
    page.wait_for_url("**/leases/*")

    assert len(posts) == 2 and posts[0] == posts[1] and posts[0]["request_id"] == request_id
    assert studio.lease_count() == leases_before + 1
    bindings = rows(studio.db_path, "SELECT target_id AS lease_id FROM request_bindings"
                 " WHERE request_id = ?",
                    request_id)
    assert [row["lease_id"] for row in bindings] == [page.url.rsplit("/", 1)[1]]


def test_cancel_ends_the_lease_and_writes_nothing(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    open_review(page, studio, ORCHARD)
    lease_id = submit_and_open_lease(page)
    polls = lease_polls(page, lease_id)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#lease-status")).to_contain_text("Stopped. Nothing was written.")
    expect(page.locator("#apply")).to_have_count(0)
    stopped_at = polls()
    page.wait_for_timeout(1500)
    assert polls() == stopped_at
    assert studio.lease(lease_id)["status"] == "rejected"
    assert studio.summary(ORCHARD) == ""


def test_request_id_conflict_shows_its_message(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    request_id = open_review(page, studio, KESTREL)
    # The same id was already used, by this actor, for different input.
    api_lease(studio, ORCHARD, request_id)
    leases_before = studio.lease_count()

    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submit-status")).to_have_text(
        "This form was already sent with different content. Reload the page to start again.")
    expect(page).to_have_url(re.compile(r"/review\?"))
    assert studio.lease_count() == leases_before
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM request_bindings WHERE request_id = ?",
                  request_id) == 1


def test_another_actors_lease_and_invoice_are_404_pages(page: Page, studio: Studio) -> None:
    lease_id = api_lease(studio, BLUE_HARBOR, "ada-private")
    sign_in(page, studio.url, BEN)
    reply = page.goto(f"{studio.url}/leases/{lease_id}")
    assert reply is not None and reply.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.locator(".message")).to_have_text("That request does not exist or is not yours.")
    reply = page.goto(f"{studio.url}/invoices/{studio.invoice_id(NORTHWIND)}")
    assert reply is not None and reply.status == 404
    expect(page.locator(".message")).to_have_text("That invoice does not exist or is not yours.")


def test_refusals_of_the_review_step_show_their_messages(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    reply = page.goto(review_url(studio, NORTHWIND, candidates=9))
    assert reply is not None and reply.status == 422
    expect(page.locator(".message")).to_have_text(
        "Ask for 1 to 5 suggestions from each (a whole number).")
    reply = page.goto(review_url(studio, NORTHWIND, provider="nobody"))
    assert reply is not None and reply.status == 422
    expect(page.locator(".message")).to_contain_text(
        "That is not one the studio can ask for suggestions")

    page.goto(studio.url + "/invoices")
    page.get_by_role("button", name="Summarize the chosen invoices").click()
    expect(page.locator(".message")).to_contain_text("invoice")


def test_signed_out_browser_signs_in_and_returns_where_it_was_going(
        page: Page, studio: Studio) -> None:
    wanted = review_url(studio, BLUE_HARBOR, candidates=3)
    page.goto(wanted)
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.get_by_label("Email").fill(ADA)
    page.get_by_label("Password").fill("studio-demo")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(wanted)
    expect(page.locator("#task-count")).to_have_text("3")


UNLABELLED_CONTROLS = """
    Array.from(document.querySelectorAll(
        "input:not([type=hidden]), button, select, textarea, progress"))
      .filter(el => !(el.labels && el.labels.length) && !el.getAttribute("aria-label")
                    && !el.textContent.trim())
      .map(el => el.outerHTML)
"""


def test_pages_fit_a_phone_and_every_control_has_a_label(page: Page, studio: Studio) -> None:
    page.set_viewport_size({"width": 360, "height": 740})
    lease_id = api_lease(studio, ORCHARD, "phone-width")
    sign_in(page, studio.url)
    # Ada's own, so each page is the one named, not another person's 404.
    draft = scalar(studio.db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                   " owner_id WHERE email = ? AND status = 'draft' ORDER BY invoices.id", ADA)
    issued = studio.invoice_id(NORTHWIND)
    for path in ("/invoices", f"/invoices/{studio.invoice_id(ORCHARD)}",
                 review_url(studio, NORTHWIND, BLUE_HARBOR, KESTREL).removeprefix(studio.url),
                 f"/leases/{lease_id}", "/leases", "/invoices/new", f"/invoices/{draft}",
                 f"/invoices/{draft}/issue", f"/invoices/{issued}", f"/invoices/{issued}/document",
                 "/settings", "/login"):
        page.goto(studio.url + path)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than a phone"
        assert page.evaluate(UNLABELLED_CONTROLS) == [], path


def test_one_path_answers_a_page_a_fragment_or_json(studio: Studio) -> None:
    lease_id = api_lease(studio, NORTHWIND, "negotiation")
    client = api_sign_in(studio.url)
    cookies = dict(client.cookies)
    client.close()
    path = f"{studio.url}/leases/{lease_id}"
    fragment = httpx.get(path, cookies=cookies, headers={"HX-Request": "true"})
    page = httpx.get(path, cookies=cookies)
    data = httpx.get(path, cookies=cookies, headers={"Accept": "application/json"})
    assert "HX-Request" in fragment.headers["vary"] and "HX-Request" in page.headers["vary"]
    assert 'id="lease-status"' in fragment.text and "<html" not in fragment.text
    assert "<html" in page.text and 'id="lease-status"' in page.text
    assert data.json()["lease_id"] == lease_id

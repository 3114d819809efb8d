"""The invoicing flow in Chromium: a draft with two lines, issuing through a lost reply,
a credit note, and the PDF."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pypdf
from playwright.sync_api import Page, expect

from tests.conftest import days_ahead, rows, scalar
from tests.e2e.conftest import Studio, lose_first_reply, sign_in, type_customer


def new_draft(page: Page, studio: Studio, customer: str) -> str:
    page.goto(studio.url + "/invoices/new")
    type_customer(page, customer)
    page.get_by_label("Due date").fill(days_ahead(90))
    page.get_by_label("Description").nth(0).fill("Design work")
    page.get_by_label("Quantity").nth(0).fill("3")
    page.get_by_label("Unit price").nth(0).fill("19.99")
    page.get_by_label("Tax rate in percent").nth(0).fill("19")
    page.get_by_role("button", name="Add line").click()
    expect(page.get_by_label("Description")).to_have_count(2)
    page.get_by_label("Description").nth(1).fill("Travel")
    page.get_by_label("Unit price").nth(1).fill("10.005")
    # A new line starts at the seller's standard rate (19 %, a German seller); travel at 0.
    expect(page.get_by_label("Tax rate in percent").nth(1)).to_have_value("19")
    page.get_by_label("Tax rate in percent").nth(1).fill("0")
    # The server computes the totals as the person types.
    expect(page.locator("#total-total")).to_have_text("€81.37")
    page.get_by_role("button", name="Save draft").click()
    page.wait_for_url(re.compile(r".*/invoices/[0-9a-f-]{36}$"))
    return page.url.rsplit("/", 1)[1]


def test_a_new_draft_is_issued_once_through_a_lost_reply(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = new_draft(page, studio, "Juniper Bakery")
    assert rows(studio.db_path, "SELECT status, total, revision FROM invoices WHERE id = ?",
                invoice_id)[0][:] == ("draft", "81.37", 1)

    page.get_by_role("link", name="Review and issue…").click()
    expect(page.locator("#submit")).to_be_enabled()
    review = page.locator("#review")
    for shown in ("Juniper Bakery", "Design work", "Travel", "€81.37", "INV-"):
        expect(review).to_contain_text(shown)
    request_id = page.locator("#request-id").text_content()
    posts: list[dict] = []
    page.on("request", lambda r: posts.append(r.post_data_json)
            if r.method == "POST" and r.url.endswith("/issue") else None)
    dropped = lose_first_reply(page, "**/issue")  # issued on the server; the reply is lost
    button = page.locator("#submit")
    button.click()
    expect(page.locator("#submit-status")).to_contain_text("it is safe")
    expect(button).to_have_text("Issue again")
    assert dropped == [201]
    number = scalar(studio.db_path, "SELECT number FROM invoices WHERE id = ?", invoice_id)
    assert number.startswith("INV-")

    with page.expect_response("**/issue") as resent:
        button.click()
    assert resent.value.status == 200
    expect(page.locator("#submit-status")).to_contain_text(f"Issued as {number}")
    page.wait_for_url(f"**/invoices/{invoice_id}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(number)

    assert len(posts) == 2 and posts[0] == posts[1] == {"request_id": request_id, "revision": 1}
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM invoices WHERE number = ?", number) == 1
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'issue'"
                                  " AND request_id = ?", request_id) == 1

    # The PDF downloads and holds the number and the total.
    with page.expect_download() as download:
        page.get_by_role("link", name="Download PDF").click()
    pdf = Path(download.value.path()).read_bytes()
    text = pypdf.PdfReader(io.BytesIO(pdf)).pages[0].extract_text()
    assert number in text and "81.37" in text


def test_a_credit_note_corrects_an_issued_invoice(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = new_draft(page, studio, "Corvid Books")
    page.goto(f"{studio.url}/invoices/{invoice_id}/issue")
    page.locator("#submit").click()
    page.wait_for_url(f"**/invoices/{invoice_id}")
    number = scalar(studio.db_path, "SELECT number FROM invoices WHERE id = ?", invoice_id)

    page.get_by_role("button", name="Make a credit note").click()
    page.wait_for_url(lambda url: bool(re.search(r"/invoices/[0-9a-f-]{36}$", url))
                      and invoice_id not in url)
    note_id = page.url.rsplit("/", 1)[1]
    assert note_id != invoice_id
    expect(page.locator("#invoice")).to_contain_text(f"Corrects invoice {number}")
    page.get_by_role("button", name="Remove this line").nth(1).click()
    page.get_by_label("Quantity").nth(0).fill("1")
    expect(page.locator("#total-total")).to_have_text("€23.79")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#revision-badge")).to_have_text("Edited")
    expect(page.locator("#draft-revision")).to_have_value("2")

    page.get_by_role("link", name="Review and issue…").click()
    expect(page.locator("#series")).to_contain_text("CN-")
    page.locator("#submit").click()
    page.wait_for_url(f"**/invoices/{note_id}")
    note = rows(studio.db_path, "SELECT number, total, credits, kind FROM invoices WHERE id = ?",
                note_id)[0]
    assert note["number"].startswith("CN-") and note["total"] == "23.79"
    assert (note["credits"], note["kind"]) == (invoice_id, "credit_note")
    expect(page.get_by_role("heading", level=1)).to_contain_text(note["number"])

    page.goto(f"{studio.url}/invoices/{invoice_id}")
    expect(page.locator("#invoice")).to_contain_text(note["number"])


def test_a_stale_edit_shows_its_message_and_keeps_the_newer_draft(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = new_draft(page, studio, "First tab")
    other = page.context.new_page()
    other.goto(f"{studio.url}/invoices/{invoice_id}")
    type_customer(other, "Second tab")
    other.get_by_role("button", name="Save changes").click()
    expect(other.locator("#revision-badge")).to_be_visible()
    expect(other.locator("#draft-revision")).to_have_value("2")

    type_customer(page, "Stale tab")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#messages")).to_contain_text("changed since you opened it")
    assert scalar(studio.db_path, "SELECT customer FROM invoices WHERE id = ?",
                  invoice_id) == "Second tab"

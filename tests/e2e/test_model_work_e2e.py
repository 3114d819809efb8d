"""The model doing a person's work, in Chromium: the demo's photographed receipt read into its
draft's lines (a lost reply resent is one request), and a reminder written, kept and offered in
the invoice's reminder form, for the person to send."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from studio import i18n
from studio.leasing.readers import tesseract
from tests.conftest import free_port, scalar
from tests.e2e.conftest import Studio, lease_posts, lose_first_reply, sign_in
from tests.mailserver import Inbox, MailServer
from tests.test_sending import SENDER

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(tesseract() is None,
                                 reason="the OCR engine (tesseract-ocr) is missing")]

INBOX = Inbox()
SMTP = MailServer(INBOX, free_port())
# Long enough to read a photographed receipt on a busy machine.
STUDIO_SETTINGS = {"STUDIO_SMTP_URL": SMTP.url, "STUDIO_MAIL_FROM": SENDER,
                   "STUDIO_LEASE_SECONDS": "300"}


@pytest.fixture(scope="module", autouse=True)
def mail_server() -> Iterator[MailServer]:
    SMTP.start()
    try:
        yield SMTP
    finally:
        SMTP.stop()


def test_the_demos_receipt_is_read_into_its_draft_once_though_the_reply_was_lost(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    draft = scalar(studio.db_path, "SELECT invoice_id FROM attachments JOIN actors"
                                   " ON actors.id = attachments.owner_id WHERE email = ?",
                   "ada@example.com")
    before = json.loads(scalar(studio.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                               draft))
    page.goto(f"{studio.url}/invoices/{draft}")
    page.get_by_role("button", name="Read the receipt").click()
    expect(page.locator("h1")).to_contain_text("Read the receipts of 1 invoice")
    posted = lease_posts(page)
    lost = lose_first_reply(page, "**/leases")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("body")).to_contain_text("it is safe")
    assert lost == [201]
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/leases/*")
    assert len(posted) == 2 and posted[0] == posted[1]  # the same frozen body, the same id
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM leases WHERE purpose = ?",
                  "read_receipt") == 1

    expect(page.locator("#lease-status-text")).to_contain_text("Suggestions are ready",
                                                               timeout=120_000)
    reading = page.locator(".reading").first
    expect(reading).to_contain_text("Lines it would add")
    expect(reading).to_contain_text("Batterien AA 4er")
    page.get_by_role("button", name="Use this suggestion").click()
    expect(page.locator("#lease-status-text")).to_contain_text("Added.")
    page.locator("#to-invoice").click()
    expect(page.locator("#invoice")).to_be_visible()

    after = json.loads(scalar(studio.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                              draft))
    assert after[:len(before)] == before
    assert [line["description"] for line in after[len(before):]] == [
        "Vollmilch 3,5%", "Bananen", "Spülmittel Zitrone", "Roggenbrot", "Batterien AA 4er",
        "Kaffee gemahlen"]


def test_a_reminder_written_and_kept_fills_the_reminder_form_and_sends_nothing(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    overdue = scalar(studio.db_path, "SELECT invoices.id FROM invoices JOIN actors"
                                     " ON actors.id = owner_id WHERE email = ? AND customer = ?",
                     "ada@example.com", "Hollow Oak Bakery")
    page.goto(f"{studio.url}/invoices/{overdue}")
    # Hollow Oak Bakery is in Belgium: its reminder speaks French, the amount as French
    # writes what the invoice page shows as left to pay.
    amount_due = scalar(studio.db_path, "SELECT amount_due FROM balances WHERE invoice_id = ?",
                        overdue)
    assert page.locator("#amount-due").text_content() == i18n.money(amount_due, "EUR", "en")
    due = i18n.money(amount_due, "EUR", "fr")
    page.get_by_role("button", name="Write a reminder").click()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/leases/*")
    expect(page.locator("#lease-status-text")).to_contain_text("Suggestions are ready",
                                                               timeout=60_000)
    email = page.locator(".email").first
    expect(email).to_contain_text("The email it would offer")
    expect(email).to_contain_text(due)
    subject = email.locator(".subject").text_content()
    page.get_by_role("button", name="Use this suggestion").click()
    expect(page.locator("#lease-status-text")).to_contain_text("Kept.")
    page.locator("#to-invoice").click()

    form = page.locator("#remind-form")
    expect(form).to_be_visible()
    expect(page.locator("#kept-reminder")).to_be_visible()
    expect(form.get_by_label("Subject")).to_have_value(subject)
    expect(form.get_by_label("Message")).to_contain_text(due)
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM sends") == 0
    assert INBOX.messages == []

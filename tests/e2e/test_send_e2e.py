"""Emailing an invoice in Chromium: a lost reply, Send again, one send and one email."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import Page, Request, expect

from tests.conftest import free_port, rows
from tests.e2e.conftest import NORTHWIND, Studio, lose_first_reply, sign_in
from tests.mailserver import Inbox, MailServer
from tests.test_sending import SENDER

pytestmark = pytest.mark.e2e

INBOX = Inbox()
SMTP = MailServer(INBOX, free_port())
STUDIO_SETTINGS = {"STUDIO_SMTP_URL": SMTP.url, "STUDIO_MAIL_FROM": SENDER}


@pytest.fixture(scope="module", autouse=True)
def mail_server() -> Iterator[MailServer]:
    SMTP.start()
    try:
        yield SMTP
    finally:
        SMTP.stop()


def test_a_send_whose_reply_was_lost_is_one_send_on_the_page_and_one_email(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = studio.invoice_id(NORTHWIND)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    card = page.locator("#sending")
    expect(card).to_contain_text("Not emailed yet")
    form = page.locator("#send-form")
    form.get_by_label("To", exact=True).fill("accounts@northwind.test")
    form.get_by_label("Message").fill("Hello,\n\nthe invoice for the redesign is attached.")

    posted: list[dict[str, list[str]]] = []

    def on_request(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/send"):
            posted.append(parse_qs(request.post_data or ""))

    page.on("request", on_request)
    dropped = lose_first_reply(page, re.compile(r".*/send$"))  # queued, reply lost
    form.get_by_role("button", name="Send email").click()
    expect(page.locator("#messages")).to_contain_text("it is safe")
    assert dropped == [200]

    form.get_by_role("button", name="Send email").click()
    sends = page.locator("#send-list tr[data-send]")
    expect(sends).to_have_count(1)
    expect(sends.first).to_contain_text("accounts@northwind.test")
    expect(sends.first).to_contain_text("Sent", timeout=20_000)

    assert len(posted) == 2 and posted[0]["request_id"] == posted[1]["request_id"]
    stored = rows(studio.db_path, "SELECT * FROM sends WHERE invoice_id = ?", invoice_id)
    assert len(stored) == 1 and stored[0]["status"] == "sent"
    time.sleep(1.0)  # a second email would have had time to arrive
    assert INBOX.message_ids() == [stored[0]["message_id"]]
    # The page came back with a fresh form: the next email is a new request.
    fresh = page.locator("#send-form input[name=request_id]").input_value()
    assert fresh and fresh != posted[0]["request_id"][0]

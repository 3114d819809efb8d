"""Recording a payment in Chromium: the reply to the first Record is lost, the person records
again, and the invoice has one payment, on the page and in the database."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import rows, scalar
from tests.e2e.conftest import NORTHWIND, Studio, lose_first_reply, sign_in

pytestmark = pytest.mark.e2e


def test_a_payment_recorded_again_after_a_lost_reply_is_one_payment(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = studio.invoice_id(NORTHWIND)
    due = Decimal(scalar(studio.db_path, "SELECT amount_due FROM balances WHERE invoice_id = ?",
                         invoice_id))
    had = scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                 invoice_id)
    assert due > 100
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    payments = page.locator("#payments")
    # Pre-filled with what is due, today, and a bank transfer.
    expect(page.get_by_label("Amount (EUR)")).to_have_value(str(due))
    expect(page.get_by_label("Method")).to_have_value("bank_transfer")
    expect(page.get_by_label("Date received")).to_have_value(re.compile(r"^\d{4}-\d{2}-\d{2}$"))
    page.get_by_label("Amount (EUR)").fill("100")
    page.get_by_label("Reference (optional)").fill("Transfer 881")
    minted = page.locator("#payment-form input[name=request_id]").input_value()

    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.post_data or "")
            if r.method == "POST" and r.url.endswith("/payments") else None)
    dropped = lose_first_reply(page, "**/payments")  # recorded on the server; reply lost
    button = page.locator("#record-payment")
    button.click()
    expect(page.locator("#messages")).to_contain_text("it is safe")
    expect(button).to_have_text("Record again")
    expect(button).to_be_enabled()
    assert dropped == [200]  # htmx is answered 200 with the page to go to; the row tells
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == had + 1

    button.click()
    page.wait_for_url(re.compile(rf".*/invoices/{invoice_id}\?recorded=[0-9a-f-]{{36}}$"))
    left = due - 100
    expect(payments).to_contain_text("Payment of EUR 100.00 recorded.")
    expect(payments.locator("li.payment")).to_have_count(had + 1)
    expect(page.locator("#amount-due")).to_have_text(f"EUR {left}")
    # The same form, sent twice: the same id both times.
    assert len(posts) == 2 and posts[0] == posts[1] and f"request_id={minted}" in posts[0]
    [row] = rows(studio.db_path, "SELECT amount, reference, voided_at FROM payments"
                                 " WHERE invoice_id = ? AND reference = 'Transfer 881'",
                 invoice_id)
    assert tuple(row) == ("100.00", "Transfer 881", None)
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == had + 1
    assert scalar(studio.db_path, "SELECT amount_due FROM balances WHERE invoice_id = ?",
                  invoice_id) == str(left)
    # The next payment's form is a new one, with an id of its own.
    expect(page.get_by_label("Amount (EUR)")).to_have_value(str(left))
    assert page.locator("#payment-form input[name=request_id]").input_value() != minted

    # Void it, confirming: it stays listed, struck through, and the balance is whole again.
    page.once("dialog", lambda dialog: dialog.accept())
    row_of_it = payments.locator("li.payment", has_text="Transfer 881")
    row_of_it.get_by_role("button", name="Void").click()
    page.wait_for_url(re.compile(r".*\?voided="))
    expect(row_of_it.locator("s").first).to_be_visible()
    expect(row_of_it).to_contain_text("Voided")
    expect(page.locator("#amount-due")).to_have_text(f"EUR {due}")
    assert scalar(studio.db_path, "SELECT voided_at IS NOT NULL FROM payments"
                                  " WHERE invoice_id = ? AND reference = 'Transfer 881'",
                  invoice_id) in (1, True)

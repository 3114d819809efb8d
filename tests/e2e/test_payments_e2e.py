"""Recording a payment in Chromium: the reply to the first Record is lost, the form keeps what was
sent, the person records again, and the invoice has one payment, on the page and in the
database; Start over is a new form, and a form that already recorded a payment says so."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect

from studio import i18n
from tests.conftest import rows, scalar
from tests.e2e.conftest import (
    KESTREL,
    NORTHWIND,
    ORCHARD,
    Studio,
    lose_first_reply,
    sign_in,
)

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
    expect(page.get_by_label("Amount (EUR)")).to_have_value(f"{due:,}")  # as English writes it
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
    expect(page.locator("#payment-status")).to_have_text(
        "No answer from the studio. Your payment of EUR 100.00 may or may not have been"
        " recorded: Record again sends exactly the same payment, so it is counted once.")
    expect(button).to_have_text("Record again")
    expect(button).to_be_enabled()
    expect(page.locator("#payment-start-over")).to_be_visible()
    assert dropped == [200]  # htmx is answered 200 with the page to go to; the row tells
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == had + 1
    # What was sent can no longer be changed, so Record again cannot become another payment.
    for field in ("Amount (EUR)", "Date received", "Method", "Reference (optional)"):
        expect(page.get_by_label(field)).not_to_be_editable()
    expect(page.get_by_label("Amount (EUR)")).to_have_value("100")

    button.click()
    page.wait_for_url(re.compile(rf".*/invoices/{invoice_id}\?recorded=[0-9a-f-]{{36}}$"))
    left = due - 100
    expect(payments).to_contain_text("Payment of €100.00 recorded.")
    expect(payments.locator("li.payment")).to_have_count(had + 1)
    expect(page.locator("#amount-due")).to_have_text(i18n.money(left, "EUR", "en"))
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
    expect(page.get_by_label("Amount (EUR)")).to_have_value(f"{left:,}")
    assert page.locator("#payment-form input[name=request_id]").input_value() != minted

    # Void it, confirming: it stays listed, struck through, and the balance is whole again.
    page.once("dialog", lambda dialog: dialog.accept())
    row_of_it = payments.locator("li.payment", has_text="Transfer 881")
    row_of_it.get_by_role("button", name="Cancel payment").click()
    page.wait_for_url(re.compile(r".*\?voided="))
    expect(row_of_it.locator("s").first).to_be_visible()
    expect(row_of_it).to_contain_text("Cancelled")
    expect(page.locator("#amount-due")).to_have_text(i18n.money(due, "EUR", "en"))
    assert scalar(studio.db_path, "SELECT voided_at IS NOT NULL FROM payments"
                                  " WHERE invoice_id = ? AND reference = 'Transfer 881'",
                  invoice_id) in (1, True)


def payments_of(studio: Studio, invoice_id: str) -> list[tuple[str, str]]:
    return [tuple(row) for row in rows(
        studio.db_path, "SELECT amount, reference FROM payments WHERE invoice_id = ?"
                        " AND voided_at IS NULL ORDER BY created_at, id", invoice_id)]


def test_start_over_after_a_lost_reply_is_a_new_form_with_a_new_id(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = studio.invoice_id(ORCHARD)
    had = payments_of(studio, invoice_id)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.get_by_label("Amount (EUR)").fill("12.5")
    page.get_by_label("Reference (optional)").fill("Lost then changed")
    first_id = page.locator("#payment-form input[name=request_id]").input_value()
    assert lose_first_reply(page, "**/payments") == []
    page.locator("#record-payment").click()
    expect(page.locator("#payment-status")).to_contain_text("EUR 12.50 may or may not")
    expect(page.get_by_label("Amount (EUR)")).not_to_be_editable()

    # The person really wants another payment: a new form, editable, with a new id.
    page.get_by_role("link", name="Start over").click()
    page.wait_for_url(f"{studio.url}/invoices/{invoice_id}#payments")
    expect(page.get_by_label("Amount (EUR)")).to_be_editable()
    expect(page.locator("#payment-status")).to_be_empty()
    expect(page.locator("#payment-start-over")).to_be_hidden()
    expect(page.locator("#record-payment")).to_have_text("Record payment")
    second_id = page.locator("#payment-form input[name=request_id]").input_value()
    assert second_id != first_id
    page.get_by_label("Amount (EUR)").fill("7")
    page.get_by_label("Reference (optional)").fill("Started over")
    page.locator("#record-payment").click()
    page.wait_for_url(re.compile(r".*\?recorded="))
    expect(page.locator("#payments")).to_contain_text("Payment of €7.00 recorded.")
    # The lost one counted once, the new one once: both, and nothing else.
    assert payments_of(studio, invoice_id) == [
        *had, ("12.50", "Lost then changed"), ("7.00", "Started over")]
    expect(page.locator("#payments li.payment:not(.voided)")).to_have_count(len(had) + 2)


def test_a_form_that_already_recorded_a_payment_says_to_start_over(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    invoice_id = studio.invoice_id(KESTREL)
    had = payments_of(studio, invoice_id)
    page.goto(f"{studio.url}/invoices/{invoice_id}")
    page.get_by_label("Amount (USD)").fill("3")
    page.locator("#record-payment").click()
    page.wait_for_url(re.compile(r".*\?recorded="))
    # Back to the page before: the same form, with the id that recorded EUR 3.00.
    page.go_back()
    page.wait_for_url(f"{studio.url}/invoices/{invoice_id}")
    expect(page.locator("#record-payment")).to_be_enabled()
    page.get_by_label("Amount (USD)").fill("4")
    page.locator("#record-payment").click()
    expect(page.locator("#messages")).to_contain_text(
        "This form already recorded a different payment")
    expect(page.locator("#messages")).to_contain_text("Start over")
    expect(page.locator("#payment-status")).to_have_text(
        "This payment was not recorded. To record a payment, start over with a new form.")
    page.get_by_role("link", name="Start over").click()
    page.wait_for_url(f"{studio.url}/invoices/{invoice_id}#payments")
    page.get_by_label("Amount (USD)").fill("4")
    page.locator("#record-payment").click()
    page.wait_for_url(re.compile(r".*\?recorded="))
    assert payments_of(studio, invoice_id) == [*had, ("3.00", ""), ("4.00", "")]

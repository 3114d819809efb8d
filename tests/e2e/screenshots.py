"""Screenshots of the real app for the docs: a receipt read into a draft (the reading, then
the draft with its lines), the review step, a lease with candidates, the
invoice list, a draft with an attached receipt, the issue review step, the customers, an
issued invoice's document with its tax table and payment QR code, an invoice with its
payments, and an invoice's emails (delivered to a real SMTP server on loopback).

Run from the repository root: `python -m tests.e2e.screenshots`. Writes docs/*.png from a
fresh demo server in a temporary folder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.conftest import ROOT, scalar, start_server
from tests.e2e.conftest import BLUE_HARBOR, CHROMIUM, CHROMIUM_ARGS, NORTHWIND, sign_in
from tests.mailserver import Inbox, MailServer
from tests.test_attachments import png

DOCS = ROOT / "docs"


def main() -> int:
    if not CHROMIUM.exists():
        print(f"no Chromium at {CHROMIUM} (set STUDIO_CHROMIUM)", file=sys.stderr)
        return 1
    DOCS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "studio.db"
        mail = MailServer(Inbox())
        mail.start()
        server = start_server(db_path, "--demo", STUDIO_PROVIDER_DELAY_S="0.3",
                              STUDIO_SMTP_URL=mail.url, STUDIO_MAIL_FROM="ada@example.com")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                     args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 960, "height": 720})
                sign_in(page, server.url)
                ids = [scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                              " actors.id = owner_id WHERE number = ?"
                              " AND email = 'ada@example.com'", number)
                       for number in (NORTHWIND, BLUE_HARBOR)]
                query = "&".join(f"invoice_id={invoice_id}" for invoice_id in ids)
                page.goto(f"{server.url}/review?purpose=summarize_invoice&{query}"
                          "&provider=local&candidates=2")
                expect(page.locator("#submit")).to_be_enabled()
                page.get_by_text("Technical details").click()
                page.screenshot(path=DOCS / "review.png", full_page=True)

                page.get_by_role("button", name="Submit").click()
                page.wait_for_url("**/leases/*")
                expect(page.locator("#lease-status")).to_have_attribute(
                    "data-status", "proposed", timeout=20_000)
                page.locator("input[type=radio]").nth(1).check()
                page.screenshot(path=DOCS / "lease.png", full_page=True)

                page.goto(f"{server.url}/invoices")
                page.screenshot(path=DOCS / "invoices.png", full_page=True)
                draft = scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                                        " actors.id = owner_id WHERE status = 'draft'"
                                        " AND email = 'ada@example.com'")
                # The demo's photographed receipt, read into its draft's lines.
                page.goto(f"{server.url}/invoices/{draft}")
                page.get_by_role("button", name="Read the receipt").click()
                page.get_by_role("button", name="Submit").click()
                page.wait_for_url("**/leases/*")
                expect(page.locator("#lease-status")).to_have_attribute(
                    "data-status", "proposed", timeout=60_000)
                page.screenshot(path=DOCS / "receipt.png", full_page=True)
                page.get_by_role("button", name="Use this suggestion").click()
                expect(page.locator("#lease-status-text")).to_contain_text("Added.")
                page.goto(f"{server.url}/invoices/{draft}")
                page.screenshot(path=DOCS / "receipt-added.png", full_page=True)
                page.goto(f"{server.url}/invoices/{draft}")
                page.get_by_label("Attach a receipt or document (PDF or photo)").set_input_files(
                    files=[{"name": "receipt.png", "mimeType": "image/png", "buffer": png(90)}])
                expect(page.locator("#attach-status")).to_contain_text("Attached")
                page.screenshot(path=DOCS / "draft.png", full_page=True)
                page.goto(f"{server.url}/invoices/{draft}/issue")
                expect(page.locator("#submit")).to_be_enabled()
                page.screenshot(path=DOCS / "issue.png", full_page=True)

                page.goto(f"{server.url}/customers")
                page.screenshot(path=DOCS / "customers.png", full_page=True)
                overdue = issued_to(db_path, "Hollow Oak Bakery")
                page.goto(f"{server.url}/invoices/{overdue}/document")
                page.screenshot(path=DOCS / "document.png", full_page=True)
                page.goto(f"{server.url}/invoices/{issued_to(db_path, 'Northwind Traders')}")
                page.screenshot(path=DOCS / "payments.png", full_page=True)

                page.goto(f"{server.url}/invoices/{overdue}")
                open_forms = "document.querySelectorAll('details.send-form')" \
                             ".forEach(form => form.open = true)"
                page.evaluate(open_forms)
                page.get_by_role("button", name="Send email").click()
                expect(page.locator("#sending")).to_contain_text("Sent", timeout=20_000)
                page.evaluate(open_forms)
                page.get_by_role("button", name="Send reminder").click()
                expect(page.locator("#sending")).not_to_contain_text("Waiting", timeout=20_000)
                page.screenshot(path=DOCS / "sending.png", full_page=True)
                browser.close()
        finally:
            server.stop()
            mail.stop()
    print(f"wrote receipt, receipt-added, review, lease, invoices, draft, issue, customers,"
          f" document, payments and sending screenshots to {DOCS}")
    return 0


def issued_to(db_path: Path, customer: str) -> str:
    return scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id = owner_id"
                           " WHERE customer = ? AND status = 'issued' AND kind = 'invoice'"
                           " AND email = 'ada@example.com'", customer)


if __name__ == "__main__":
    raise SystemExit(main())

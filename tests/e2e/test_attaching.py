"""Attaching a receipt in Chromium: the progress bar, a lost reply, one attachment."""

from __future__ import annotations

import re

from playwright.sync_api import Page, Request, expect

from tests.conftest import rows, scalar
from tests.e2e.conftest import Studio, lose_first_reply, sign_in
from tests.test_attachments import png


def test_a_lost_upload_reply_is_sent_again_with_the_same_key_and_attaches_once(
        page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    draft = scalar(studio.db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                                   " owner_id WHERE email = 'ada@example.com'"
                                   " AND status = 'draft'")
    page.goto(f"{studio.url}/invoices/{draft}")
    picker = page.get_by_label("Attach a receipt or document (PDF or photo)")
    assert picker.get_attribute("accept") == "image/*,application/pdf"
    assert picker.get_attribute("capture") is not None

    bodies: list[bytes] = []

    def on_request(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/attachments"):
            bodies.append(request.post_data_buffer or b"")

    page.on("request", on_request)
    dropped = lose_first_reply(page, re.compile(r".*/attachments$"))  # stored, reply lost
    picker.set_input_files(files=[{"name": "receipt.png", "mimeType": "image/png",
                                   "buffer": png(21) * 1}])
    expect(page.locator("#attach-progress-label")).to_be_hidden()
    expect(page.locator("#attach-status")).to_contain_text("it is safe")
    assert dropped == [201]
    again = page.get_by_role("button", name="Send again")
    expect(again).to_be_visible()
    again.click()
    expect(page.locator("#attach-status")).to_contain_text("Attached receipt.png")
    # Beside the demo's own till receipt, one attachment more.
    expect(page.locator("#attachments li[data-attachment]")).to_have_count(2)
    expect(page.locator("#attachments")).to_contain_text("receipt.png")

    keys = {re.search(rb'name="client_key"\r\n\r\n([^\r]+)', body).group(1) for body in bodies}
    assert len(bodies) == 2 and len(keys) == 1
    stored = rows(studio.db_path, "SELECT id, filename FROM attachments WHERE invoice_id = ?"
                  " AND filename != 'receipt.jpg'", draft)
    assert [row["filename"] for row in stored] == ["receipt.png"]
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM request_bindings WHERE kind ="
                                  " 'attachment' AND request_id = ?",
                  next(iter(keys)).decode()) == 1


def test_the_progress_bar_shows_while_the_bytes_go_up(page: Page, studio: Studio) -> None:
    sign_in(page, studio.url)
    draft = scalar(studio.db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                                   " owner_id WHERE email = 'ada@example.com'"
                                   " AND status = 'draft'")
    page.goto(f"{studio.url}/invoices/{draft}")
    # A weak phone signal: uploads go at 100 KiB/s, so the bar has time to move.
    network = page.context.new_cdp_session(page)
    network.send("Network.enable")
    network.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 20, "downloadThroughput": -1,
        "uploadThroughput": 100 * 1024})
    page.get_by_label("Attach a receipt or document (PDF or photo)").set_input_files(files=[
        {"name": "big.pdf", "mimeType": "application/pdf",
         "buffer": b"%PDF-1.4\n" + b"0" * 300_000}])
    expect(page.locator("#attach-progress-label")).to_be_visible()
    expect(page.locator("#attach-status")).to_contain_text("Sending big.pdf")
    page.wait_for_function("(() => { const v = document.getElementById('attach-progress').value;"
                           " return v > 0 && v < 100; })()", timeout=10_000)
    expect(page.locator("#attach-status")).to_contain_text("Attached big.pdf", timeout=20_000)
    expect(page.locator("#attach-progress-label")).to_be_hidden()
    assert scalar(studio.db_path, "SELECT COUNT(*) FROM attachments WHERE filename = 'big.pdf'"
                  ) == 1

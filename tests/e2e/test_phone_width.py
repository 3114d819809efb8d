"""Every page of the studio fits a phone 390 px wide: nothing scrolls sideways, nothing is drawn
over anything else, with the long names and addresses real customers have."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from studio.leasing.readers import tesseract
from tests.conftest import ADA, BEN, days_ahead, free_port, scalar
from tests.conftest import sign_in as api_sign_in
from tests.e2e.conftest import NORTHWIND, Studio, sign_in
from tests.mailserver import Inbox, MailServer
from tests.test_sending import SENDER

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
SMTP = MailServer(Inbox(), free_port())
# Long enough to read a photographed receipt on a busy machine.
STUDIO_SETTINGS = {"STUDIO_SMTP_URL": SMTP.url, "STUDIO_MAIL_FROM": SENDER,
                   "STUDIO_LEASE_SECONDS": "300"}

LONG_NAME = "Donaudampfschifffahrtsgesellschaftskapitänswitwenkasse und Söhne Handelsgesellschaft"
LONG_EMAIL = "accounts.payable.northern-region@donaudampfschifffahrtsgesellschaft.example"
LONG_ADDRESSES = [
    "invoices.and.remittances.department@aldergrove-cooperative-bakery.example",
    "finance-operations-team-leader@very-long-subdomain.northwind-traders.example",
    "jurgen.schmidt-hagenbeck-von-der-heide@kapitaenswitwenkasse-hamburg.example",
]


@pytest.fixture(scope="module", autouse=True)
def mail_server() -> Iterator[MailServer]:
    SMTP.start()
    try:
        yield SMTP
    finally:
        SMTP.stop()


def made(reply: httpx.Response) -> Any:
    assert reply.status_code in (200, 201, 202), reply.text
    return reply.json()


def rid() -> str:
    return uuid.uuid4().hex


@pytest.fixture(scope="module")
def long_invoice(studio: Studio, mail_server: MailServer) -> dict[str, str]:
    return make_long_invoice(studio)


def make_long_invoice(studio: Studio) -> dict[str, str]:
    """A customer with a long name and email, an invoice issued to them with payments, a credit
    note, a share link and several emails to long addresses; and a draft of theirs."""
    client = api_sign_in(studio.url, ADA)
    try:
        customer = made(client.post("/customers", json={
            "request_id": rid(), "name": LONG_NAME, "email": LONG_EMAIL, "country": "DE",
            "address": "Kapitän-Hagenbeck-Straße 1234\n20095 Hamburg", "currency": "EUR"}))
        lines = [{"description": "Überholung der Dampfschiffmaschinen nach Herstellervorgabe",
                  "quantity": "1", "unit_price": "1200.00", "tax_rate": "19"}]
        draft = {"customer": LONG_NAME, "customer_id": customer["id"], "currency": "EUR",
                 "due_date": days_ahead(400), "line_items": lines}
        invoice = made(client.post("/invoices", json={**draft, "request_id": rid()}))
        kept = made(client.post("/invoices", json={**draft, "request_id": rid()}))  # a draft
        invoice_id = invoice["id"]
        made(client.post(f"/invoices/{invoice_id}/issue", json={
            "request_id": rid(), **made(client.get(f"/invoices/{invoice_id}/issue"))["request"]}))
        for amount, reference in (("100.00", "Überweisung Kapitänswitwenkasse Teil 1 von 3"),
                                  ("200.00", "SEPA-REF-0000000000000000000000000000000002")):
            made(client.post(f"/invoices/{invoice_id}/payments", json={
                "request_id": rid(), "amount": amount, "date": "2026-01-15",
                "method": "bank_transfer", "reference": reference}))
        share = made(client.post(f"/invoices/{invoice_id}/share"))
        lease = made(client.post("/leases", json={
            "request_id": rid(), "purpose": "summarize_invoice", "invoice_ids": [invoice_id],
            "providers": ["local"]}))
        for kind, to in zip(("send", "send", "remind"), LONG_ADDRESSES, strict=True):
            made(client.post(f"/invoices/{invoice_id}/{kind}", json={
                "request_id": rid(), "to": to, "cc": LONG_ADDRESSES[:2]}))
        made(client.post(f"/invoices/{invoice_id}/send", json={"request_id": rid()}))
        # The mail server offers no SMTPUTF8: this one fails, with the server's long reply.
        made(client.post(f"/invoices/{invoice_id}/send", json={
            "request_id": rid(), "to": "jürgen.schmidt-hagenbeck@kapitaenswitwenkasse.example"}))
        credit = made(client.post(f"/invoices/{invoice_id}/credit-note",
                                  json={"request_id": rid()}))
        made(client.post(f"/invoices/{credit['id']}/issue", json={
            "request_id": rid(), **made(client.get(f"/invoices/{credit['id']}/issue"))["request"]}))
    finally:
        client.close()
    return {"customer": customer["id"], "invoice": invoice_id, "credit": credit["id"],
            "draft": kept["id"], "lease": lease["lease_id"],
            "share": share["url"].removeprefix(studio.url)}


# The elements (or their text) that stick out past the phone's right edge while their parent
# does not: where each sideways scroll begins.
STICKING_OUT = """width => Array.from(document.querySelectorAll('body *'))
    .filter(el => (el.getBoundingClientRect().right > width + 0.5
                   || getComputedStyle(el).overflowX === 'visible' && !el.matches('input, textarea')
                      && el.getBoundingClientRect().left + el.scrollWidth > width + 0.5)
                  && el.parentElement.getBoundingClientRect().right <= width + 0.5)
    .map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
               + (el.className && typeof el.className === 'string' ? '.' + el.className : '')
               + ' ' + Math.round(el.getBoundingClientRect().left + el.scrollWidth) + 'px')"""


def overflow(page: Page, url: str | None = None) -> tuple[int, list[str]]:
    """How far the page at `url` (or the one open) is wider than the phone (0 when it fits),
    and what sticks out."""
    if url:
        page.goto(url)
        page.wait_for_load_state("networkidle")
    return (page.evaluate("document.documentElement.scrollWidth") - PHONE["width"],
            page.evaluate(STICKING_OUT, PHONE["width"]))


def test_every_page_fits_a_phone_390_px_wide(page: Page, studio: Studio,
                                             long_invoice: dict[str, str]) -> None:
    page.set_viewport_size(PHONE)
    wide: dict[str, tuple[int, list[str]]] = {}
    for path in ("/login", "/", "/no-such-page", long_invoice["share"], "/i/not-a-real-link"):
        wide[path] = overflow(page, studio.url + path)
    sign_in(page, studio.url)
    invoice, credit, draft = (long_invoice[key] for key in ("invoice", "credit", "draft"))
    for path in ("/", "/invoices", "/invoices?status=issued&q=Donau&from=2020-01-01&to=2099-12-31",
                 "/invoices?status=draft", f"/invoices/{draft}", f"/invoices/{draft}/issue",
                 f"/invoices/{invoice}", f"/invoices/{credit}", f"/invoices/{invoice}/document",
                 f"/invoices/{credit}/document", "/customers", "/customers?q=donau",
                 f"/customers/{long_invoice['customer']}", "/invoices/new", "/settings",
                 f"/review?purpose=summarize_invoice&invoice_id={invoice}"
                 f"&invoice_id={studio.invoice_id(NORTHWIND)}&provider=local&candidates=2",
                 "/leases", f"/leases/{long_invoice['lease']}", "/invoices/not-an-invoice",
                 "/customers/not-a-customer", "/invoices/not-an-invoice/document"):
        wide[path] = overflow(page, studio.url + path)
    # The picker's matches, long name and long email, on a new draft.
    page.goto(studio.url + "/invoices/new")
    page.locator("#customer-name").fill("Donau")
    expect(page.locator("#customer-match-list button")).to_have_count(1)
    wide["/invoices/new (picker matches)"] = overflow(page)
    assert [path for path, (px, _) in wide.items() if px > 0] == [], " | ".join(
        f"{path} +{px}px {out}" for path, (px, out) in wide.items() if px > 0)


def name_cell_widths(page: Page) -> list[float]:
    return page.evaluate("""Array.from(document.querySelectorAll('#customer-list tbody tr'))
        .map(row => row.querySelector('td').getBoundingClientRect().width)""")


def cells_overlapping(page: Page, selector: str) -> list[str]:
    """The cells of the rows in `selector` whose boxes cross another cell's of the same row."""
    return page.evaluate("""selector => {
        const crossed = [];
        for (const row of document.querySelectorAll(selector)) {
            const boxes = Array.from(row.children).map(cell => cell.getBoundingClientRect())
                .filter(box => box.width > 0 && box.height > 0);
            boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
                if (a.left < b.right - 1 && b.left < a.right - 1
                        && a.top < b.bottom - 1 && b.top < a.bottom - 1)
                    crossed.push(row.textContent.trim().replace(/\\s+/g, ' ').slice(0, 60));
            }));
        }
        return crossed;
    }""", selector)


@pytest.mark.parametrize("email", [ADA, BEN])
def test_the_customers_page_shows_whole_names_beside_nothing_drawn_over_them(
        page: Page, studio: Studio, long_invoice: dict[str, str], email: str) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, studio.url, email)
    page.goto(studio.url + "/customers")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    widths = name_cell_widths(page)
    assert widths and min(widths) >= 100, widths
    assert cells_overlapping(page, "#customer-list tbody tr") == []
    card = page.locator("#customer-list").evaluate("table => table.closest('.card')"
                                                   ".getBoundingClientRect().right")
    assert page.locator("#customer-list").evaluate(
        "table => table.getBoundingClientRect().right") <= card


def test_the_email_list_stays_inside_its_card_on_a_phone(
        page: Page, studio: Studio, long_invoice: dict[str, str]) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/invoices/{long_invoice['invoice']}")
    sends = page.locator("#send-list tr[data-send]")
    expect(sends).to_have_count(5)
    expect(page.locator('#send-list tr[data-status=queued]')).to_have_count(0, timeout=20_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert cells_overlapping(page, "#send-list tr[data-send]") == []
    right = page.locator("#sending").evaluate("card => card.getBoundingClientRect().right")
    assert page.locator("#send-list table").evaluate(
        "table => table.getBoundingClientRect().right") <= right


def test_the_desktop_keeps_its_tables(page: Page, studio: Studio,
                                      long_invoice: dict[str, str]) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, studio.url)
    page.goto(studio.url + "/customers")
    expect(page.locator("#customer-list thead")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.goto(f"{studio.url}/invoices/{long_invoice['invoice']}")
    expect(page.locator("#send-list thead")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


# How far each line table's cells reach past the box the table sits in, or the table scrolls
# inside itself (0 when neither): a Net column cut off is one or the other.
LINES_CUT = """tables => tables.map(table => {
    const box = table.parentElement.getBoundingClientRect();
    const cells = Array.from(table.querySelectorAll('th, td'));
    const past = cells.map(cell => Math.round(cell.getBoundingClientRect().right - box.right));
    return Math.max(0, table.scrollWidth - table.clientWidth, ...past);
})"""


def test_the_lines_show_their_net_column_whole_on_a_phone(
        page: Page, studio: Studio, long_invoice: dict[str, str]) -> None:
    page.set_viewport_size(PHONE)
    cut: dict[str, list[int]] = {}
    page.goto(studio.url + long_invoice["share"])
    expect(page.locator("table.lines").first).to_be_visible()
    cut["share page"] = page.locator("table.lines").evaluate_all(LINES_CUT)
    sign_in(page, studio.url)
    for name, path in (("invoice page", f"/invoices/{long_invoice['invoice']}"),
                       ("credit note", f"/invoices/{long_invoice['credit']}"),
                       ("printable", f"/invoices/{long_invoice['invoice']}/document")):
        page.goto(studio.url + path)
        cut[name] = page.locator("table.lines").evaluate_all(LINES_CUT)
    assert all(cut.values()) and max(px for each in cut.values() for px in each) <= 1, cut


@pytest.mark.skipif(tesseract() is None, reason="the OCR engine (tesseract-ocr) is missing")
def test_a_receipts_suggestion_fits_a_phone(page: Page, studio: Studio) -> None:
    draft = scalar(studio.db_path, "SELECT invoice_id FROM attachments JOIN actors"
                                   " ON actors.id = attachments.owner_id WHERE email = ?", ADA)
    client = api_sign_in(studio.url, ADA)
    try:
        lease = made(client.post("/leases", json={
            "request_id": rid(), "purpose": "read_receipt", "invoice_ids": [draft],
            "providers": ["local"]}))
    finally:
        client.close()
    studio.wait_for_lease(lease["lease_id"], "proposed", seconds=240)
    page.set_viewport_size(PHONE)
    sign_in(page, studio.url)
    page.goto(f"{studio.url}/leases/{lease['lease_id']}")
    expect(page.locator(".reading").first).to_contain_text("Batterien AA 4er")
    px, out = overflow(page)
    assert px <= 0, out

"""Forms and pages meet the person: the review step counts what will be made, a request that
ran out of time offers to ask again, forms start from where the person came, a credit note asks
only what a credit note has, an empty form shows no error, a customer's VAT ID is not the
seller's own, and one working share link per invoice serves every email."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import time
import uuid

import pytest

from studio.leasing import leases
from tests.conftest import lease_body, rows, running, scalar, wait_for_status
from tests.test_words_pages import visible

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}


def words(html: str) -> str:
    return " ".join(" ".join(visible(html).text).split())


async def test_the_review_step_counts_the_suggestions_that_will_be_made(studio) -> None:
    client = await studio.signed_in()
    ids = studio.invoice_ids()[:3]
    query = "&".join(f"invoice_id={invoice_id}" for invoice_id in ids)
    # Two writers ticked, but the best available one is the built-in one here: 3 x 1 x 2.
    review = await client.get(f"/review?purpose=summarize_invoice&{query}&provider=local"
                              "&provider=auto&candidates=2", headers=PAGE)
    assert review.status_code == 200
    counted = re.search(r'id="task-count">(\d+)<', review.text)
    assert counted is not None and counted.group(1) == "6", words(review.text)
    assert "exactly what will be asked" not in review.text

    made = await client.post("/leases", json=lease_body(ids, "counted", providers=["local", "auto"],
                                                        candidates=2))
    assert made.status_code == 201, made.text
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM tasks WHERE lease_id = ?",
                  made.json()["lease_id"]) == 6


async def test_a_request_that_ran_out_of_time_offers_the_same_review_again(studio) -> None:
    client = await studio.signed_in()
    ids = sorted(studio.invoice_ids()[:2])
    made = await client.post("/leases", json=lease_body(ids, "late", candidates=3))
    assert made.status_code == 201, made.text
    lease_id = made.json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    await studio.studio.db.write(leases.expire_due, time.time() + 3600)

    for headers in (PAGE, HTMX):
        page = await client.get(f"/leases/{lease_id}", headers=headers)
        assert "The time ran out. Nothing was written." in words(page.text)
        again = re.findall(r'<a[^>]*id="ask-again"[^>]*href="([^"]+)"', page.text)
        assert len(again) == 1, page.text
        assert 'id="attach-another"' not in page.text
    review = await client.get(html.unescape(again[0]), headers=PAGE)
    assert review.status_code == 200 and 'id="review"' in review.text
    frozen = json.loads(html.unescape(re.search(r'data-frozen="([^"]+)"', review.text)[1]))
    assert frozen == {"purpose": "summarize_invoice", "invoice_ids": ids,
                      "providers": ["local"], "candidates": 3}
    # Asking again is a new request: the expired one is left as it ended.
    assert scalar(studio.settings.db_path, "SELECT status FROM leases WHERE id = ?",
                  lease_id) == "expired"


async def test_new_invoice_from_a_customer_starts_with_that_customer_chosen(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/customers", json={
        "name": "Müller & Söhne GmbH", "currency": "GBP", "payment_terms_days": 21})
    assert made.status_code == 201, made.text
    customer = made.json()
    page = await client.get(f"/customers/{customer['id']}", headers=PAGE)
    [link] = re.findall(r'<a[^>]*href="(/invoices/new\?[^"]+)"[^>]*>New invoice</a>', page.text)
    form = await client.get(html.unescape(link), headers=PAGE)
    assert form.status_code == 200
    assert re.search(rf'id="customer-name" value="{re.escape(html.escape(customer["name"]))}"',
                     form.text), form.text
    assert f'id="customer-id" value="{customer["id"]}"' in form.text
    assert 'name="currency" value="GBP"' in form.text
    due = (dt.datetime.now(dt.UTC).date()
           + dt.timedelta(days=customer["payment_terms_days"])).isoformat()
    assert f'name="due_date" value="{due}"' in form.text
    # Saved as it opened, the draft names that customer.
    made = await client.post("/invoices", json={
        "customer": customer["name"], "customer_id": customer["id"],
        "currency": "GBP", "due_date": due,
        "line_items": [{"description": "Work", "quantity": "1", "unit_price": "10",
                        "tax_rate": "0"}]})
    assert made.status_code == 201 and made.json()["customer_id"] == customer["id"]

    other = await client.get(f"/invoices/new?customer_id={uuid.uuid4()}", headers=PAGE)
    assert other.status_code == 404
    assert "customer" in words(other.text).lower()


async def test_a_draft_credit_note_asks_only_what_a_credit_note_has(studio) -> None:
    client = await studio.signed_in()
    original = studio.invoice_ids()[0]
    made = await client.post(f"/invoices/{original}/credit-note",
                             json={"request_id": str(uuid.uuid4())})
    assert made.status_code == 201, made.text
    note = made.json()
    page = await client.get(f"/invoices/{note['id']}", headers=PAGE)
    form = re.search(r'<form id="draft-form".*?</form>', page.text, re.S)[0]
    for absent in ('id="customer-picker"', "Make a new customer", 'name="due_date"',
                   'name="customer"', 'name="customer_id"', "Due date"):
        assert absent not in form, absent
    assert note["customer"] in words(form)

    # The form as a browser sends it: lines lowered, the buyer and dates left as they were.
    sent = await client.post(f"/invoices/{note['id']}/edit", headers=PAGE, data={
        "revision": str(note["revision"]), "currency": note["currency"], "supply_date": "",
        "notes": "", "description": "Refund", "quantity": "1", "unit_price": "100",
        "discount_percent": "", "tax_rate": "0"}, follow_redirects=False)
    assert sent.status_code == 303, sent.text
    row = rows(studio.settings.db_path, "SELECT customer, customer_id, due_date, total, revision"
                                        " FROM invoices WHERE id = ?", note["id"])[0]
    assert (row["customer"], row["customer_id"], row["due_date"]) == (
        note["customer"], note["customer_id"], note["due_date"])
    assert row["total"] == "100.00" and row["revision"] == note["revision"] + 1


async def test_a_new_invoice_form_shows_no_error_before_anything_is_typed(studio) -> None:
    client = await studio.signed_in()
    form = await client.get("/invoices/new", headers=PAGE)
    assert "must be" not in words(form.text)
    # What the form sends for its totals as it opens: one line, nothing typed in it.
    blank = [("customer", ""), ("customer_id", ""), ("currency", "EUR"), ("due_date", ""),
             ("supply_date", ""), ("description", ""), ("quantity", "1"), ("unit_price", ""),
             ("discount_percent", ""), ("tax_rate", "0"), ("notes", "")]
    shown = await client.get("/invoices/totals", headers=HTMX, params=blank)
    assert shown.status_code == 200 and "data-problem" not in shown.text, shown.text
    assert "must be" not in words(shown.text)
    # A price typed before its description: the totals follow at once.
    priced = [(name, "120" if name == "unit_price" else value) for name, value in blank]
    shown = await client.get("/invoices/totals", headers=HTMX, params=priced)
    assert "data-problem" not in shown.text and "€120.00" in shown.text, shown.text
    # A price that is not one still says so.
    wrong = [(name, "12,,0" if name == "unit_price" else value) for name, value in blank]
    shown = await client.get("/invoices/totals", headers=HTMX, params=wrong)
    assert "data-problem" in shown.text and "unit price" in shown.text
    for odd in ([("line_items", "abc")], [("line_items", "")], [("description", "x")]):
        shown = await client.get("/invoices/totals", headers=HTMX, params=odd)
        assert shown.status_code == 200, (odd, shown.text)


async def test_a_customer_never_takes_the_sellers_own_vat_id(studio) -> None:
    client = await studio.signed_in()
    saved = await client.post("/settings", json={"name": "Ada Works", "vat_id": "DE136695976"})
    assert saved.status_code == 200, saved.text
    form = await client.get("/customers", headers=PAGE)
    assert "DE136695976" not in form.text  # no one's real VAT ID as the example

    before = scalar(studio.settings.db_path, "SELECT COUNT(*) FROM customers")
    mine = await client.post("/customers", json={"name": "Me Myself", "vat_id": "de 136 695 976"})
    assert mine.status_code == 422, mine.text
    assert mine.json()["message"].startswith("DE136695976 is your own VAT ID")
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM customers") == before

    theirs = await client.post("/customers", json={"name": "Kunde AG", "vat_id": "DE811569869"})
    assert theirs.status_code == 201, theirs.text
    edited = await client.patch(f"/customers/{theirs.json()['id']}", json={
        "revision": theirs.json()["revision"], "vat_id": "DE136695976"})
    assert edited.status_code == 422 and "your own VAT ID" in edited.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT vat_id FROM customers WHERE id = ?",
                  theirs.json()["id"]) == "DE811569869"


async def test_every_email_of_an_invoice_names_its_one_working_share_link(settings) -> None:
    ready = settings.with_changes(smtp_url="smtp://127.0.0.1:9", mail_from="ada@example.com")
    async with running(ready) as studio:
        client = await studio.signed_in()
        invoice_id = studio.invoice_ids()[0]
        db_path = studio.settings.db_path

        async def send() -> str:
            reply = await client.post(f"/invoices/{invoice_id}/send", json={
                "request_id": str(uuid.uuid4()), "to": "buyer@example.com"})
            assert reply.status_code == 202, reply.text
            message = scalar(db_path, "SELECT message FROM sends WHERE id = ?",
                             reply.json()["send_id"])
            return re.findall(r"/i/([A-Za-z0-9_-]{22})", message)[-1]

        first, second = await send(), await send()
        assert first == second
        assert scalar(db_path, "SELECT COUNT(*) FROM share_links WHERE invoice_id = ?",
                      invoice_id) == 1
        assert (await studio.client().get(f"/i/{first}", headers=PAGE)).status_code == 200

        # Stopped, the link is not handed out again: the next email makes a new one.
        assert (await client.delete(f"/invoices/{invoice_id}/share")).status_code == 200
        third = await send()
        assert third != first
        assert (await studio.client().get(f"/i/{third}", headers=PAGE)).status_code == 200
        assert scalar(db_path, "SELECT COUNT(*) FROM share_links WHERE invoice_id = ?"
                               " AND revoked_at IS NULL", invoice_id) == 1


async def test_moments_are_sent_for_the_browser_to_read_in_its_own_time_zone(studio) -> None:
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    made = await client.post("/leases", json=lease_body([invoice_id], "moments"))
    assert made.status_code == 201, made.text
    assert (await client.post(f"/invoices/{invoice_id}/share")).status_code == 201
    for path in ("/leases", f"/invoices/{invoice_id}"):
        page = (await client.get(path, headers=PAGE)).text
        moments = re.findall(r'<time datetime="([^"]+)" data-local>', page)
        assert moments, path
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", at) for at in moments)


# Words a person who never saw the studio would stop at: the code's (writer, series), a
# setting only whoever runs the studio can change, and words that say less than they should.
STOPPING_WORDS = re.compile(
    r"\bwriters?\b|\bseries\b|STUDIO_[A-Z_]+|\bPick\b|\bselected\b|\bVoid(?:ed)?\b"
    r"|\bWorking\b|\bStopped\b(?! ?\.)|Time allowed|Suggestions to write")


async def test_the_pages_use_words_a_newcomer_reads_without_stopping(studio) -> None:
    client = await studio.signed_in()
    first, second = studio.invoice_ids()[:2]
    pages: dict[str, str] = {}
    pages["review"] = (await client.get(
        f"/review?purpose=summarize_invoice&invoice_id={first}&invoice_id={second}"
        "&provider=local&provider=auto&candidates=2", headers=PAGE)).text
    made = await client.post("/leases", json=lease_body([first], "newcomer"))
    await wait_for_status(client, made.json()["lease_id"], "proposed")
    pages["request"] = (await client.get(f"/leases/{made.json()['lease_id']}",
                                         headers=PAGE)).text
    pages["invoices"] = (await client.get("/invoices", headers=PAGE)).text
    draft = (await client.post("/invoices", json={
        "customer": "Words Co", "currency": "EUR", "due_date": "2099-01-01",
        "line_items": [{"description": "Framing", "quantity": "1", "unit_price": "450",
                        "tax_rate": "19"}]})).json()
    pages["issue review"] = (await client.get(f"/invoices/{draft['id']}/issue",
                                              headers=PAGE)).text
    paid = await client.post(f"/invoices/{first}/payments", json={
        "request_id": str(uuid.uuid4()), "amount": "10.00",
        "date": dt.datetime.now(dt.UTC).date().isoformat(), "method": "cash"})
    assert paid.status_code == 201, paid.text
    voided = await client.post(f"/payments/{paid.json()['id']}/void", json={})
    assert voided.status_code == 200, voided.text
    kept = await client.post(f"/invoices/{first}/payments", json={
        "request_id": str(uuid.uuid4()), "amount": "5.00",
        "date": dt.datetime.now(dt.UTC).date().isoformat(), "method": "cash"})
    assert kept.status_code == 201, kept.text
    assert (await client.post(f"/invoices/{first}/share")).status_code == 201
    assert (await client.delete(f"/invoices/{first}/share")).status_code == 200
    assert (await client.post(f"/invoices/{first}/share")).status_code == 201
    pages["issued invoice"] = (await client.get(f"/invoices/{first}", headers=PAGE)).text
    for name, page in pages.items():
        text = " ".join(" ".join(visible(page).text).split())
        found = sorted({match.group(0) for match in STOPPING_WORDS.finditer(text)})
        assert not found, f"{name} says {found}: {text}"
    # Each control still says what it does, in the page's own words.
    invoice_page = words(pages["issued invoice"])
    for said in ("Cancel payment", "Cancelled", "Active", "Turned off"):
        assert said in invoice_page or said in pages["issued invoice"], said
    assert "Summarize the chosen invoices" in pages["invoices"]
    assert "The AI model if it answers, else the studio" in words(pages["review"])

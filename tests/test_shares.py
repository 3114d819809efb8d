"""Share links: anyone holding `/i/{token}` sees that one issued invoice and its PDF, without an
account and without a cookie, until it is revoked or expires; every other token is one plain
404 that writes nothing; only the token's SHA-256 is kept."""

from __future__ import annotations

import asyncio
import hashlib
import io
import re
import secrets
import time
import uuid
from typing import Any

import pypdf
import pytest

from studio.billing import shares
from tests import backends
from tests.conftest import BEN, database_digest, days_ahead, execute, rows, running, scalar

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}
DAY = 86400


async def issued(client: Any, **changes: Any) -> dict[str, Any]:
    """A new issued invoice of the signed-in person; its JSON."""
    saved = await client.post("/settings", json={"name": "Ada Works", "address": "1 Lane"})
    assert saved.status_code == 200, saved.text
    made = await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Widget", "quantity": "3", "unit_price": "19.99",
                        "tax_rate": "19"}], **changes})
    assert made.status_code == 201, made.text
    done = await client.post(f"/invoices/{made.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    return (await client.get(f"/invoices/{made.json()['id']}")).json()


async def shared(client: Any, invoice_id: str) -> tuple[str, str]:
    """A new share link of the invoice: (its URL, its token)."""
    reply = await client.post(f"/invoices/{invoice_id}/share")
    assert reply.status_code == 201, reply.text
    url = reply.json()["url"]
    return url, url.rsplit("/", 1)[1]


def links(db_path: Any, invoice_id: str) -> list[Any]:
    return rows(db_path, "SELECT * FROM share_links WHERE invoice_id = ? ORDER BY created_at",
                invoice_id)


def assert_shared_headers(reply: Any) -> None:
    assert reply.headers["x-robots-tag"].startswith("noindex")
    assert reply.headers["referrer-policy"] == "no-referrer"
    assert "no-store" in reply.headers["cache-control"]
    assert "private" in reply.headers["cache-control"]
    assert "set-cookie" not in reply.headers


async def test_a_share_link_shows_the_issued_invoice_to_anyone_without_a_cookie(
        studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    before = time.time()
    reply = await owner.post(f"/invoices/{invoice['id']}/share")
    assert reply.status_code == 201, reply.text
    answer = reply.json()
    url, token = answer["url"], answer["url"].rsplit("/", 1)[1]
    assert url == f"http://studio.test/i/{token}"
    assert len(token) == 22 and re.fullmatch(r"[A-Za-z0-9_-]+", token)  # 128 bits
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["token_sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert link["expires_at"] - link["created_at"] == pytest.approx(90 * DAY)
    assert link["created_at"] >= before - 5 and link["views"] == 0
    assert link["first_viewed_at"] is None and link["revoked_at"] is None
    assert answer["expires_at"].startswith(
        time.strftime("%Y-%m-%d", time.gmtime(link["expires_at"])))

    async with studio.client(Accept="text/html") as anyone:
        page = await anyone.get(f"/i/{token}")
        assert page.status_code == 200, page.text
        assert "cookie" not in page.request.headers
        assert_shared_headers(page)
        assert not anyone.cookies
    assert invoice["number"] in page.text and "Acme Ltd" in page.text
    assert '<meta name="robots" content="noindex' in page.text
    # The page leads nowhere but to its own PDF (and the stylesheet).
    hrefs = set(re.findall(r'(?:href|src|action)="([^"]*)"', page.text))
    assert hrefs <= {f"/i/{token}.pdf", "/static/studio.css"} | {
        h for h in hrefs if h.startswith("data:")}, hrefs


async def test_a_share_link_downloads_the_same_pdf_as_its_owner(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    url, token = await shared(owner, invoice["id"])
    async with studio.client() as anyone:
        pdf = await anyone.get(f"/i/{token}.pdf")
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    assert_shared_headers(pdf)
    text = "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf.content)).pages)
    assert invoice["number"] in text
    own = await owner.get(f"/invoices/{invoice['id']}.pdf")
    assert own.content == pdf.content


async def test_a_signed_in_owner_opening_the_link_gets_no_cookie_either(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    for path in (f"/i/{token}", f"/i/{token}.pdf", "/i/" + secrets.token_urlsafe(16)):
        reply = await owner.get(path, headers=PAGE)
        assert "set-cookie" not in reply.headers, path


async def test_nothing_else_is_reachable_through_a_share_link(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    other = await issued(owner, customer="Other Co")
    _, token = await shared(owner, invoice["id"])
    missing = None
    async with studio.client(Accept="text/html") as anyone:
        for path in [f"/i/{other['id']}", f"/i/{invoice['id']}",
                     f"/i/{token}/x", f"/i/{token}.xml", f"/i/{token}.facturx.pdf",
                     f"/i/{token}%2F..%2F..%2Finvoices", f"/i/{token}/%2E%2E/invoices",
                     f"/i/{token}.pdf/x", f"/i/{token}x", f"/i/{token[:-1]}",
                     f"/i/{token.upper() if token.upper() != token else token.lower()}"]:
            reply = await anyone.get(path)
            assert reply.status_code == 404, path
            assert "set-cookie" not in reply.headers, path
            if path.startswith(f"/i/{other['id']}"):
                missing = reply.text
        # A trailing slash leads back to the link itself, nowhere else.
        slashed = await anyone.get(f"/i/{token}/")
        assert slashed.status_code == 307
        assert slashed.headers["location"] == f"http://studio.test/i/{token}"
        # The same invoice whatever the query names.
        page = await anyone.get(f"/i/{token}", params={"invoice_id": other["id"]})
        assert page.status_code == 200 and invoice["number"] in page.text
        assert other["number"] not in page.text
        # The studio itself still asks for an account.
        for path in ("/invoices", f"/invoices/{invoice['id']}", f"/invoices/{other['id']}.pdf",
                     f"/invoices/{invoice['id']}/document"):
            reply = await anyone.get(path, headers={"Accept": "application/json"})
            assert reply.status_code == 401, path
        assert not anyone.cookies
    assert missing is not None and other["number"] not in missing


async def test_revoking_stops_every_live_link_of_the_invoice(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, first = await shared(owner, invoice["id"])
    _, second = await shared(owner, invoice["id"])
    reply = await owner.delete(f"/invoices/{invoice['id']}/share")
    assert reply.status_code == 200 and reply.json() == {"revoked": 2}
    assert all(link["revoked_at"] is not None for link in links(studio.settings.db_path,
                                                                   invoice["id"]))
    async with studio.client(Accept="text/html") as anyone:
        for token in (first, second):
            for path in (f"/i/{token}", f"/i/{token}.pdf"):
                gone = await anyone.get(path)
                assert gone.status_code == 404, path
                assert_shared_headers(gone)
                assert invoice["number"] not in gone.text
        guessed = await anyone.get("/i/" + secrets.token_urlsafe(16))
    assert gone.text == guessed.text  # one answer, whatever the reason
    again = await owner.delete(f"/invoices/{invoice['id']}/share")
    assert again.status_code == 200 and again.json() == {"revoked": 0}
    # A new link works again.
    _, third = await shared(owner, invoice["id"])
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{third}")).status_code == 200


async def test_an_expired_link_is_not_found(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}")).status_code == 200
        execute(studio.settings.db_path,
                "UPDATE share_links SET expires_at = ? WHERE invoice_id = ?",
                time.time() - 1, invoice["id"])
        for path in (f"/i/{token}", f"/i/{token}.pdf"):
            gone = await anyone.get(path)
            assert gone.status_code == 404 and invoice["number"] not in gone.text
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["views"] == 1  # the refused views wrote nothing
    page = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert 'data-share-state="expired"' in page.text


async def test_the_link_lasts_as_many_days_as_the_setting_says(settings) -> None:
    async with running(settings.with_changes(share_link_days=7.0)) as studio:
        owner = await studio.signed_in()
        invoice = await issued(owner)
        await shared(owner, invoice["id"])
        [link] = links(studio.settings.db_path, invoice["id"])
        assert link["expires_at"] - link["created_at"] == pytest.approx(7 * DAY)


async def test_a_share_link_is_written_on_the_public_address_when_one_is_set(
        settings) -> None:
    """Behind a proxy the request's own address is not the one people outside can open:
    STUDIO_PUBLIC_URL is, in the API's answer and on the page's card alike."""
    public = "https://billing.example.com/studio"
    async with running(settings.with_changes(public_url=public)) as studio:
        owner = await studio.signed_in()
        invoice = await issued(owner)
        url, token = await shared(owner, invoice["id"])
        assert url == f"{public}/i/{token}"
        card = await owner.post(f"/invoices/{invoice['id']}/share", headers=HTMX)
        assert card.status_code == 201
        shown = re.search(r'value="([^"]+)"[^>]*id="share-url"', card.text)
        assert shown is not None and shown.group(1).startswith(f"{public}/i/"), card.text
        assert "studio.test/i/" not in card.text
        tokens = (token, shown.group(1).rsplit("/", 1)[1])
        assert {link["token_sha256"] for link in links(studio.settings.db_path, invoice["id"])
                } == {hashlib.sha256(made.encode()).hexdigest() for made in tokens}
        async with studio.client(Accept="text/html") as anyone:
            assert (await anyone.get(f"/i/{token}")).status_code == 200


def test_the_share_link_setting_is_read_from_the_environment() -> None:
    from studio.config import from_environment

    assert from_environment({}).share_link_days == 90
    assert from_environment({"STUDIO_SHARE_LINK_DAYS": "30"}).share_link_days == 30


async def test_guessed_and_malformed_tokens_are_one_plain_404_that_writes_nothing(
        studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    watch = backends.ChangeWatch(studio.settings.db_path)
    try:
        before = watch.version()
        answers = set()
        async with studio.client(Accept="text/html") as anyone:
            for guess in [secrets.token_urlsafe(16) for _ in range(50)] + [
                    "x", "a" * 500, "%00", token + "=", token + "A", "%2e%2e",
                    "AAAAAAAAAAAAAAAAAAAAAA"]:
                for path in (f"/i/{guess}", f"/i/{guess}.pdf"):
                    reply = await anyone.get(path)
                    assert reply.status_code == 404, path
                    assert_shared_headers(reply)
                    answers.add(reply.text)
        assert len(answers) == 1
        assert "Sign in" not in answers.pop()  # a plain page, not the studio's
        assert watch.version() == before
    finally:
        watch.close()


async def test_a_token_is_looked_up_by_its_digest_and_compared_in_constant_time(
        studio, monkeypatch) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    assert token not in database_digest(studio.settings.db_path)
    compared: list[tuple[str, str]] = []
    original = shares.hmac.compare_digest

    def recording(a: str, b: str) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(shares.hmac, "compare_digest", recording)
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}")).status_code == 200
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert compared == [(digest, digest)]


async def test_the_first_view_is_recorded_once_and_every_view_counted(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    page = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert "Not yet" in page.text
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}")).status_code == 200
        [link] = links(studio.settings.db_path, invoice["id"])
        first = link["first_viewed_at"]
        assert first is not None and link["views"] == 1
        assert (await anyone.get(f"/i/{token}")).status_code == 200
        assert (await anyone.get(f"/i/{token}.pdf")).status_code == 200
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["first_viewed_at"] == first and link["views"] == 3
    page = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert "Not yet" not in page.text and 'data-share-state="live"' in page.text


async def test_views_at_once_are_each_counted_and_the_first_kept(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    async with studio.client() as anyone:
        replies = await asyncio.gather(*[anyone.get(f"/i/{token}") for _ in range(20)])
    assert {reply.status_code for reply in replies} == {200}
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["views"] == 20 and link["first_viewed_at"] is not None


async def test_another_person_cannot_share_or_revoke_my_invoice(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    ben = await studio.signed_in(BEN)
    made = await ben.post(f"/invoices/{invoice['id']}/share")
    assert made.status_code == 404 and made.json()["detail"] == "invoice_not_found"
    revoked = await ben.delete(f"/invoices/{invoice['id']}/share")
    assert revoked.status_code == 404
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["revoked_at"] is None
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}")).status_code == 200


async def test_a_draft_cannot_be_shared(studio) -> None:
    owner = await studio.signed_in()
    draft = await owner.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Widget", "quantity": "1", "unit_price": "5",
                        "tax_rate": "0"}]})
    reply = await owner.post(f"/invoices/{draft.json()['id']}/share")
    assert reply.status_code == 409 and reply.json()["detail"] == "invoice_not_issued"
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM share_links") == 0
    missing = await owner.post(f"/invoices/{uuid.uuid4()}/share")
    assert missing.status_code == 404


async def test_a_link_to_an_invoice_whose_owner_shared_it_shows_nothing_of_another(
        studio) -> None:
    """A link names one invoice by its row: minting checks the invoice is the owner's."""
    owner = await studio.signed_in()
    ben = await studio.signed_in(BEN)
    bens = await issued(ben)
    reply = await owner.post(f"/invoices/{bens['id']}/share")
    assert reply.status_code == 404
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM share_links") == 0


async def test_the_invoice_page_makes_a_link_shown_once_and_stops_it(studio) -> None:
    owner = await studio.signed_in()
    invoice = await issued(owner)
    page = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert "Create a share link" in page.text and 'id="share-revoke"' not in page.text
    fragment = await owner.post(f"/invoices/{invoice['id']}/share", headers=HTMX)
    assert fragment.status_code == 201
    url = re.search(r'id="share-url"[^>]*|value="([^"]+)"[^>]*id="share-url"', fragment.text)
    assert url is not None
    shown = re.search(r'value="(http://studio\.test/i/[A-Za-z0-9_-]{22})"', fragment.text)
    assert shown is not None and 'id="share-copy"' in fragment.text
    assert 'id="share-revoke"' in fragment.text and "<html" not in fragment.text
    token = shown.group(1).rsplit("/", 1)[1]
    again = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert token not in again.text and 'data-share-state="live"' in again.text
    # Without script: the form answers a whole page with the new link.
    whole = await owner.post(f"/invoices/{invoice['id']}/share", headers=PAGE)
    assert whole.status_code == 201 and "<html" in whole.text and 'id="share-url"' in whole.text
    stopped = await owner.post(f"/invoices/{invoice['id']}/share/revoke", headers=HTMX)
    assert stopped.status_code == 200 and 'id="share-revoke"' not in stopped.text
    assert stopped.text.count('data-share-state="revoked"') == 2
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}")).status_code == 404
    plain = await owner.post(f"/invoices/{invoice['id']}/share/revoke", headers=PAGE)
    assert plain.status_code == 303 and plain.headers["location"] == f"/invoices/{invoice['id']}"


async def test_a_head_request_is_not_a_view(studio) -> None:
    """Link checkers and previews ask HEAD; only a person's GET of the page or PDF counts."""
    owner = await studio.signed_in()
    invoice = await issued(owner)
    _, token = await shared(owner, invoice["id"])
    async with studio.client(Accept="text/html") as anyone:
        for path in (f"/i/{token}", f"/i/{token}.pdf"):
            checked = await anyone.head(path)
            assert checked.status_code == 200, path
            assert_shared_headers(checked)
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["views"] == 0 and link["first_viewed_at"] is None
    page = await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)
    assert "Not yet" in page.text
    async with studio.client() as anyone:
        assert (await anyone.get(f"/i/{token}.pdf")).status_code == 200
    [link] = links(studio.settings.db_path, invoice["id"])
    assert link["views"] == 1 and link["first_viewed_at"] is not None


async def test_the_share_card_and_the_emails_show_no_token_or_id_outside_technical_details(
        settings) -> None:
    from tests.test_words_pages import assert_plain, visible

    mailing = settings.with_changes(smtp_url="smtp://127.0.0.1:9", mail_from="b@studio.test")
    async with running(mailing) as studio:
        owner = await studio.signed_in()
        invoice = await issued(owner)
        _, token = await shared(owner, invoice["id"])
        sent = await owner.post(f"/invoices/{invoice['id']}/send", json={
            "request_id": "words", "to": "accounts@acme.test"})
        assert sent.status_code == 202, sent.text
        made = await owner.post(f"/invoices/{invoice['id']}/share", headers=HTMX)
        assert made.status_code == 201
        pages = {
            "invoice page": (await owner.get(f"/invoices/{invoice['id']}", headers=PAGE)).text,
            "new link card": made.text,
            "emails list": (await owner.get(f"/invoices/{invoice['id']}/sends",
                                            headers=HTMX)).text,
            "stopped card": (await owner.post(f"/invoices/{invoice['id']}/share/revoke",
                                              headers=HTMX)).text,
        }
        db = studio.settings.db_path
        secrets_ = {invoice["id"], token, hashlib.sha256(token.encode()).hexdigest()}
        secrets_ |= {row[0] for row in rows(db, "SELECT id FROM share_links")}
        secrets_ |= {row[0] for row in rows(db, "SELECT token_sha256 FROM share_links")}
        for row in rows(db, "SELECT id, message_id, share_link_id FROM sends"):
            secrets_ |= {row[0], row[1], row[1].strip("<>"), row[2]}
        secrets_ |= {row[0] for row in rows(db, "SELECT id FROM actors")}
    assert "words" in {r[0] for r in rows(db, "SELECT request_id FROM request_bindings")}
    # The ids are there for whoever opens the disclosure, so the check below has teeth.
    assert any(secret in pages["emails list"] for secret in secrets_)
    for name, html in pages.items():
        assert_plain(name, html)
        shown = " ".join(visible(html).text)
        leaked = sorted(secret for secret in secrets_ if secret in shown)
        assert not leaked, f"{name} shows {leaked}"
    # The one exception is the point of the card: a new link, shown once to be copied,
    # in a read-only field; the email's own link lives only in the email.
    new_url = re.search(r'value="(http://studio\.test/i/[A-Za-z0-9_-]{22})"', pages[
        "new link card"])
    assert new_url is not None and new_url.group(1).rsplit("/", 1)[1] != token
    assert 'id="share-url"' not in pages["invoice page"]
    assert "/i/" not in pages["invoice page"] and "/i/" not in pages["emails list"]


async def test_the_shared_page_leads_nowhere_into_the_studio_whatever_the_invoice_holds(
        studio) -> None:
    """A seller with a logo, bank details (a payment code), notes and a footer: the page still
    links only to its own PDF, and carries no id of the studio's."""
    from PIL import Image

    owner = await studio.signed_in()
    logo = io.BytesIO()
    Image.new("RGB", (40, 20), (200, 30, 30)).save(logo, "PNG")
    saved = await owner.post("/settings", data={
        "name": "Ada Works", "address": "1 Lane", "country": "DE", "email": "ada@works.test",
        "iban": "DE89370400440532013000", "bic": "DEUTDEFF", "footer": "Thank you!"},
        files={"logo": ("logo.png", logo.getvalue(), "image/png")})
    assert saved.status_code in (200, 303), saved.text
    made = await owner.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "notes": "See /invoices for more", "line_items": [
            {"description": "Widget", "quantity": "3", "unit_price": "19.99",
             "tax_rate": "19"}]})
    assert made.status_code == 201, made.text
    invoice_id = made.json()["id"]
    done = await owner.post(f"/invoices/{invoice_id}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    _, token = await shared(owner, invoice_id)
    async with studio.client(Accept="text/html") as anyone:
        page = (await anyone.get(f"/i/{token}")).text
    assert 'class="logo"' in page and 'id="payment-qr"' in page and "Thank you!" in page
    targets = re.findall(r'\b(?:href|src|action|formaction|hx-[a-z]+|data-[a-z-]+)="([^"]*)"',
                         page)
    assert set(targets) - {t for t in targets if t.startswith("data:")} <= {
        f"/i/{token}.pdf", "/static/studio.css"}, targets
    assert "<form" not in page and "<script" not in page and "<base" not in page
    owner_id = scalar(studio.settings.db_path, "SELECT owner_id FROM invoices WHERE id = ?",
                      invoice_id)
    assert invoice_id not in page and owner_id not in page

"""Pages speak the person's words: no code word in visible text; ids, hashes and the exact
body a request sends sit only inside a closed "Technical details" disclosure."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from studio import leases
from tests.conftest import lease_body, wait_for_status

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}

FORBIDDEN = re.compile(
    r"\blease[sd]?\b|\bproviders?\b|\bcandidates?\b|\brevisions?\b|\bfrozen\b|request body"
    r"|request id|summarize_invoice|model calls", re.IGNORECASE)
# Elements whose text never shows (void elements have no end tag to wait for).
SILENT = {"script", "style", "template", "title"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class VisibleText(HTMLParser):
    """The text a person reads: no attributes, no scripts, and nothing inside a <details>
    whose summary is "Technical details" (a closed disclosure the person may open)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.silent_depth: int | None = None  # depth of the element that hides its content
        self.details_at: list[int] = []
        self.summary_text: list[str] | None = None
        self.text: list[str] = []
        self.disclosures: list[bool] = []  # each Technical details: was it open?

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag == "details":
            self.details_at.append(len(self.stack))
            self.open_details = any(name == "open" for name, _ in attrs)
        if tag == "summary" and self.details_at and self.silent_depth is None:
            self.summary_text = []
        if tag in SILENT and self.silent_depth is None:
            self.silent_depth = len(self.stack)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or tag not in self.stack:
            return
        while self.stack:
            depth = len(self.stack)
            closed = self.stack.pop()
            if self.silent_depth == depth:
                self.silent_depth = None
            if closed == "summary" and self.summary_text is not None:
                said = " ".join("".join(self.summary_text).split())
                self.summary_text = None
                if said == "Technical details" and self.silent_depth is None:
                    self.disclosures.append(self.open_details)
                    # The rest of this <details> is hidden until the person opens it.
                    self.silent_depth = self.details_at[-1]
            if closed == "details" and self.details_at and self.details_at[-1] == depth:
                self.details_at.pop()
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.silent_depth is not None:
            return
        if self.summary_text is not None:
            self.summary_text.append(data)
        self.text.append(data)


def visible(html: str) -> VisibleText:
    parser = VisibleText()
    parser.feed(html)
    parser.close()
    return parser


def assert_plain(name: str, html: str) -> VisibleText:
    seen = visible(html)
    text = " ".join(" ".join(seen.text).split())
    found = sorted({match.group(0) for match in FORBIDDEN.finditer(text)})
    assert not found, f"{name} shows {found}: {text}"
    assert not any(seen.disclosures), f"{name} opens its Technical details"
    return seen


def test_the_visible_text_reader_skips_attributes_scripts_and_technical_details() -> None:
    html = ('<p title="lease">Plain</p><script>var lease;</script><details><summary>'
            'Technical details</summary><code>request id</code></details><p>Revision 2</p>')
    assert " ".join(visible(html).text).split() == ["Plain", "Technical", "details",
                                                    "Revision", "2"]
    with pytest.raises(AssertionError, match="Revision"):
        assert_plain("sample", html)


async def test_every_page_speaks_a_persons_words(studio) -> None:
    client = await studio.signed_in()
    first, second = studio.invoice_ids()[:2]
    pages: dict[str, str] = {}

    review = f"/review?purpose=summarize_invoice&invoice_id={first}&invoice_id={second}"
    pages["review"] = (await client.get(review, headers=PAGE)).text
    pages["review with writers"] = (await client.get(
        review + "&provider=local&provider=auto&candidates=2", headers=PAGE)).text

    lease = (await client.post("/leases", json=lease_body([first, second], "words",
                                                          candidates=2))).json()
    status = f"/leases/{lease['lease_id']}"
    pages["request, writing"] = (await client.get(status, headers=PAGE)).text
    await wait_for_status(client, lease["lease_id"], "proposed")
    pages["request, ready"] = (await client.get(status, headers=PAGE)).text
    pages["request, ready, fragment"] = (await client.get(status, headers=HTMX)).text
    await client.post(f"{status}/apply", json={})
    pages["request, used"] = (await client.get(status, headers=PAGE)).text
    stopped = (await client.post("/leases", json=lease_body([second], "stopped"))).json()
    await client.post(f"/leases/{stopped['lease_id']}/cancel", json={})
    pages["request, stopped"] = (await client.get(f"/leases/{stopped['lease_id']}",
                                                  headers=HTMX)).text
    ended = (await client.post("/leases", json=lease_body([first], "ended"))).json()
    await studio.studio.db.write(leases.expire_due, 10**10)
    pages["request, ended"] = (await client.get(f"/leases/{ended['lease_id']}",
                                                headers=PAGE)).text

    made = (await client.post("/invoices", json={
        "customer": "Words Co", "currency": "EUR", "due_date": "2027-03-01",
        "line_items": [{"description": "Framing", "quantity": "3", "unit_price": "450",
                        "tax_rate": "19"}]})).json()
    edited = await client.patch(f"/invoices/{made['id']}", json={"revision": 1,
                                                                 "customer": "Words & Co"})
    assert edited.status_code == 200, edited.text
    pages["draft"] = (await client.get(f"/invoices/{made['id']}", headers=PAGE)).text
    pages["issue review"] = (await client.get(f"/invoices/{made['id']}/issue",
                                              headers=PAGE)).text
    pages["issued invoice"] = (await client.get(f"/invoices/{first}", headers=PAGE)).text
    pages["new draft"] = (await client.get("/invoices/new", headers=PAGE)).text
    pages["settings"] = (await client.get("/settings", headers=PAGE)).text
    missing = await client.get("/invoices/00000000-0000-4000-8000-000000000000", headers=PAGE)
    assert missing.status_code == 404
    pages["not found"] = missing.text

    for name, html in pages.items():
        assert_plain(name, html)
    # What an engineer wants is still there, behind the disclosure.
    for name in ("review", "issue review"):
        assert "<summary>Technical details</summary>" in pages[name], name
    nav = re.search(r'<nav class="links".*?</nav>', pages["settings"], re.S)[0]
    assert re.search(r'<a href="/leases">History</a>', nav)
    shown = " ".join(visible(pages["review with writers"]).text).lower()
    for said in ("the built-in writer", "the best available writer"):
        assert said in shown, said

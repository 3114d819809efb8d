"""Pages speak the person's words: no code word in visible text; ids, hashes and the exact
body a request sends sit only inside a closed "Technical details" disclosure."""

from __future__ import annotations

import ast
import asyncio
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from studio import errors
from studio.errors import REFUSALS
from studio.leasing import leases
from tests.conftest import ADA, days_ahead, lease_body, rows, running, table_counts, wait_for_status

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
        "customer": "Words Co", "currency": "EUR", "due_date": days_ahead(90),
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
    for said in ("the studio", "the ai model if it answers, else the studio"):
        assert said in shown, said


# --- the lists, sign-in, and every refusal a page can show --------------------------------

# Words the glossary renames for a message too: a refusal says "suggestion", "use", "stop".
MESSAGE_WORDS = re.compile(r"\bproposals?\b|\btasks?\b|\bappl(?:y|ied|ying)\b|\bcancel",
                           re.IGNORECASE)


class ScriptedWriter:
    """Writes for most invoices, never for one, and holds another until released: so one
    person's history holds a request in every state at once."""

    name = "local"

    def __init__(self, fails: str, holds: str) -> None:
        self.fails, self.holds = fails, holds
        self.release = asyncio.Event()

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        if invoice["id"] == self.fails:
            raise RuntimeError("writer down")
        if invoice["id"] == self.holds:
            await self.release.wait()
        return f"Summary {candidate} of {invoice['number']}"


def assert_says_it_plainly(name: str, message: str) -> None:
    found = sorted({match.group(0) for match in FORBIDDEN.finditer(message)}
                   | {match.group(0) for match in MESSAGE_WORDS.finditer(message)})
    assert not found, f"{name} says {found}: {message}"


def refusal_sentences() -> dict[str, str]:
    """Every sentence a refusal can carry: the defaults, and each message written where the
    studio refuses (the literal text of an f-string; what it fills in is the person's own)."""
    said = {code: message for code, (_, message) in REFUSALS.items()}
    package = Path(errors.__file__).parent
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and len(node.args) > 1 and getattr(
                    node.func, "id", getattr(node.func, "attr", None)) == "Refusal":
                said[f"{path.relative_to(package)}:{node.lineno}"] = literal_text(node.args[1])
    return said


def literal_text(node: ast.expr) -> str:
    """The words a message spells out; what an f-string fills in is left as a gap."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(literal_text(part) if isinstance(part, ast.Constant) else "…"
                       for part in node.values)
    if isinstance(node, ast.BinOp):
        return literal_text(node.left) + literal_text(node.right)
    return "…"


def test_every_refusal_says_what_happened_in_a_persons_words() -> None:
    sentences = refusal_sentences()
    assert len(sentences) > len(REFUSALS)  # the written-out messages were found too
    for name, message in sentences.items():
        assert_says_it_plainly(name, message)


async def test_history_invoices_and_sign_in_speak_a_persons_words(settings) -> None:
    ids = [row[0] for row in rows(
        settings.db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
        " invoices.owner_id WHERE actors.email = ? AND invoices.status = 'issued'"
        " ORDER BY number", ADA)]
    used, stopped, ended, fails, holds = ids[:5]
    writer = ScriptedWriter(fails=fails, holds=holds)
    async with running(settings, {"local": writer}) as studio:
        pages: dict[str, str] = {}
        signed_out = studio.client(Accept="text/html")
        pages["sign in"] = (await signed_out.get("/login")).text
        wrong = await signed_out.post("/login", data={"email": ADA, "password": "wrong"})
        assert wrong.status_code == 401
        pages["sign in, refused"] = wrong.text
        client = await studio.signed_in()

        gone = (await client.post("/leases", json=lease_body([ended], "ended"))).json()
        await wait_for_status(client, gone["lease_id"], "proposed")
        await studio.studio.db.write(leases.expire_due, 10**10)
        made = (await client.post("/leases", json=lease_body([used], "used"))).json()
        await wait_for_status(client, made["lease_id"], "proposed")
        assert (await client.post(f"/leases/{made['lease_id']}/apply", json={})).is_success
        halted = (await client.post("/leases", json=lease_body([stopped], "stopped"))).json()
        assert (await client.post(f"/leases/{halted['lease_id']}/cancel", json={})).is_success
        failed = (await client.post("/leases", json=lease_body([fails], "failed"))).json()
        await wait_for_status(client, failed["lease_id"], "failed", seconds=30)
        ready = (await client.post("/leases", json=lease_body([ended], "ready",
                                                              candidates=2))).json()
        await wait_for_status(client, ready["lease_id"], "proposed")
        waiting = (await client.post("/leases", json=lease_body([holds], "waiting"))).json()

        listed = {item["status"] for item in (await client.get("/leases")).json()}
        assert listed == {"open", "proposed", "applied", "rejected", "expired", "failed"}
        pages["history"] = (await client.get("/leases", headers=PAGE)).text
        pages["history, fragment"] = (await client.get("/leases", headers=HTMX)).text

        draft = (await client.post("/invoices", json={
            "customer": "Words Co", "currency": "EUR", "due_date": days_ahead(90),
            "line_items": [{"description": "Framing", "quantity": "3", "unit_price": "450",
                            "tax_rate": "19"}]})).json()
        note = (await client.post(f"/invoices/{used}/credit-note",
                                  json={"request_id": "words-note"})).json()
        issued = await client.post(f"/invoices/{note['id']}/issue",
                                   json={"request_id": "words-note-issue", "revision": 1})
        assert issued.status_code == 201, issued.text
        pages["invoices"] = (await client.get("/invoices", headers=PAGE)).text
        for shown in (draft["id"], note["id"], used, "Credit note", "Summarized"):
            assert shown in pages["invoices"], shown
        writer.release.set()
        await wait_for_status(client, waiting["lease_id"], "proposed")

    for name, html in pages.items():
        assert_plain(name, html)
    history = " ".join(visible(pages["history"]).text)
    for said in ("Saved", "Stopped", "Suggestions ready", "Writing suggestions",
                 "Ended, nothing written", "Failed, nothing written"):
        assert said in history, said
    assert "<title>History" in pages["history"]


async def test_refusals_shown_as_pages_and_fragments_speak_a_persons_words(studio) -> None:
    client = await studio.signed_in()
    first, second = studio.invoice_ids()[:2]
    review = f"/review?purpose=summarize_invoice&invoice_id={first}"
    form = {"request_id": "words-form", "purpose": "summarize_invoice", "invoice_id": first,
            "provider": "local", "candidates": "1"}
    made = await client.post("/leases", data=form, headers=PAGE)
    assert made.status_code == 303
    lease_id = made.headers["location"].rsplit("/", 1)[1]
    await wait_for_status(client, lease_id, "proposed")
    before = table_counts(studio.settings.db_path)
    shown: dict[str, str] = {}

    async def refused(name: str, code: str, status: int, method: str, url: str,
                      **sent: Any) -> None:
        for kind, headers in (("page", PAGE), ("fragment", HTMX)):
            reply = await client.request(method, url, headers=headers, **sent)
            assert reply.status_code == status, (name, kind, reply.text)
            assert f'data-code="{code}"' in reply.text, (name, kind, reply.text)
            shown[f"{name}, {kind}"] = reply.text
            if kind == "fragment":
                assert reply.headers["HX-Retarget"] == "#messages"

    await refused("form sent again with other content", "request_id_conflict", 409, "POST",
                  "/leases", data={**form, "invoice_id": second})
    await refused("unknown writer on the review", "unknown_provider", 422, "GET",
                  review + "&provider=nobody")
    await refused("too many suggestions on the review", "invalid_body", 422, "GET",
                  review + "&candidates=9")
    await refused("too much to send", "body_too_large", 413, "POST", "/leases",
                  data={**form, "padding": "x" * 70_000})
    await refused("a choice that is not a suggestion", "invalid_choice", 422, "POST",
                  f"/leases/{lease_id}/apply",
                  data={f"choice:{first}": "nothing"})
    assert table_counts(studio.settings.db_path) == before  # nothing changed

    assert (await client.post(f"/leases/{lease_id}/apply", json={})).is_success
    await refused("used twice", "lease_applied", 409, "POST", f"/leases/{lease_id}/apply",
                  data={})
    await refused("stopped after use", "lease_not_cancelable", 409, "POST",
                  f"/leases/{lease_id}/cancel", data={})
    halted = (await client.post("/leases", json=lease_body([second], "halted"))).json()
    assert (await client.post(f"/leases/{halted['lease_id']}/cancel", json={})).is_success
    await refused("used after stopping", "lease_rejected", 409, "POST",
                  f"/leases/{halted['lease_id']}/apply", data={})

    draft = (await client.post("/invoices", json={
        "customer": "Words Co", "currency": "EUR", "due_date": days_ahead(90),
        "line_items": [{"description": "Framing", "quantity": "3", "unit_price": "450",
                        "tax_rate": "19"}]})).json()
    assert (await client.patch(f"/invoices/{draft['id']}",
                               json={"revision": 1, "customer": "Words & Co"})).is_success
    stale = {"revision": "1", "customer": "Stale Co", "currency": "EUR",
             "due_date": days_ahead(90), "description": "Framing", "quantity": "3",
             "unit_price": "450", "tax_rate": "19"}
    await refused("a draft edited elsewhere", "draft_changed", 409, "POST",
                  f"/invoices/{draft['id']}/edit", data=stale)
    await refused("a draft edited without saying which", "invalid_body", 422, "POST",
                  f"/invoices/{draft['id']}/edit", data={**stale, "revision": "x"})

    for name, html in shown.items():
        assert_plain(name, html)
        assert_says_it_plainly(name, " ".join(visible(html).text))
    # An API client still reads the same code; only the sentence is a person's.
    reply = await client.post("/leases", data={**form, "invoice_id": second})
    assert reply.json()["detail"] == "request_id_conflict"

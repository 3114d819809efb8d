"""Headers the studio reads, whatever their content, never make it answer 500 (finding 2 of
issue 9): an Origin nobody can read is cross-origin, an unreadable current URL is absent.

The fuzz calls the ASGI app directly with raw header bytes, so values no HTTP client library
would send (unbalanced brackets, stray bytes) reach the code exactly as a server hands them on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio.accounts.auth import SESSION_COOKIE
from tests.conftest import ADA, database_digest, days_ahead, lease_body, scalar

pytestmark = pytest.mark.anyio

UNREADABLE_URLS = ["http://[", "http://[::1", "http://a]b", "http://]", "http://[::1]:x",
                   "http://a:99999", "//[", "[", "http://%zz"]
# Every request header the studio's own code looks at.
READ_HEADERS = ["origin", "sec-fetch-site", "host", "hx-request", "hx-current-url", "accept",
                "content-type", "content-length", "cookie", "authorization"]
BOUNDARY = "fuzzboundary"
MULTIPART = "\r\n".join([
    f"--{BOUNDARY}", 'Content-Disposition: form-data; name="client_key"', "", "fuzz",
    f"--{BOUNDARY}", 'Content-Disposition: form-data; name="file"; filename="r.pdf"',
    "Content-Type: application/pdf", "", "%PDF-1.4\n%%EOF\n", f"--{BOUNDARY}--", ""]).encode()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


async def call(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]],
               body: bytes = b"") -> Reply:
    """One request straight into the ASGI app; an exception that escapes it counts as a 500."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 40000),
        "server": ("studio.test", 80),
    }
    delivered = False
    reply = Reply(0, {}, b"")

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                             for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            reply.body += message.get("body", b"")

    try:
        await app(scope, receive, send)
    except Exception:
        return Reply(500, {}, b"")
    return reply


@pytest.mark.parametrize("origin", UNREADABLE_URLS)
async def test_an_unreadable_origin_is_cross_origin_and_changes_nothing(studio, origin):
    client = await studio.signed_in()
    cookie = f"{SESSION_COOKIE}={client.cookies.get(SESSION_COOKIE)}".encode()
    before = database_digest(studio.settings.db_path)
    body = json.dumps(lease_body(studio.invoice_ids()[:1])).encode()
    for path in ("/leases", "/logout", "/login"):
        reply = await call(studio.app, "POST", path, [
            (b"host", b"studio.test"), (b"origin", origin.encode()), (b"cookie", cookie),
            (b"accept", b"application/json"), (b"content-type", b"application/json")], body)
        assert reply.status == 403, (path, reply)
        assert json.loads(reply.body)["detail"] == "cross_origin_request"
    assert database_digest(studio.settings.db_path) == before


@pytest.mark.parametrize("current", UNREADABLE_URLS)
async def test_an_unreadable_current_url_counts_as_absent(studio, current):
    reply = await call(studio.app, "GET", "/invoices", [
        (b"host", b"studio.test"), (b"hx-request", b"true"),
        (b"hx-current-url", current.encode())])
    assert reply.status == 401
    assert reply.headers["hx-redirect"] == "/login?next=%2Finvoices"


async def test_an_unreadable_host_still_gets_a_sign_in_redirect(studio):
    reply = await call(studio.app, "GET", "/invoices", [(b"host", b"[")])
    assert reply.status == 303 and reply.headers["location"] == "/login?next=%2Finvoices"


header_values = st.one_of(
    st.sampled_from(UNREADABLE_URLS),
    st.sampled_from(["true", "same-origin", "cross-site", "none", "null", "studio.test",
                     "http://studio.test", "application/json", "text/html", "0", "-1",
                     "99999999999999999999", "application/x-www-form-urlencoded", "json",
                     f"multipart/form-data; boundary={BOUNDARY}", "Bearer x", "Basic Og=="]),
    # What an HTTP/1.1 server passes on: any byte but CR, LF and NUL.
    st.binary(max_size=40).map(lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"")
                               .replace(b"\0", b"").decode("latin-1")),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40),
)
requests_ = st.tuples(
    st.sampled_from([("POST", "/leases"), ("GET", "/invoices"), ("GET", "/leases/@lease@"),
                     ("POST", "/leases/@lease@/cancel"), ("POST", "/leases/@lease@/apply"),
                     ("GET", "/review"), ("GET", "/login"), ("POST", "/login"),
                     ("GET", "/nowhere"), ("POST", "/logouts"), ("POST", "/invoices"),
                     ("GET", "/invoices/@invoice@"), ("PATCH", "/invoices/@invoice@"),
                     ("GET", "/invoices/@invoice@/issue"), ("POST", "/invoices/@invoice@/issue"),
                     ("GET", "/invoices/@invoice@.pdf"),
                     ("POST", "/invoices/@invoice@/attachments"),
                     ("GET", "/invoices/totals"), ("GET", "/settings"), ("POST", "/settings"),
                     ("GET", "/metrics"), ("GET", "/healthz")]),
    st.dictionaries(st.sampled_from(READ_HEADERS), header_values, max_size=5),
    st.booleans(),  # signed in
)


def generate(count: int) -> list[Any]:
    generated: list[Any] = []

    @settings(max_examples=count // 20, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(requests_, min_size=20, max_size=20))
    def collect(batch: list[Any]) -> None:
        generated.extend(batch)

    collect()
    return generated


async def test_fuzzed_headers_on_every_route_never_answer_500(studio):
    client = await studio.signed_in()
    cookie = f"{SESSION_COOKIE}={client.cookies.get(SESSION_COOKIE)}"
    lease_id = (await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
                ).json()["lease_id"]
    draft = next(i["id"] for i in (await client.get("/invoices")).json() if i["status"] == "draft")
    invoices_before = scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices")
    bodies = {"/leases": json.dumps(lease_body(studio.invoice_ids()[:1], "fuzz")).encode(),
              "/login": json.dumps({"email": ADA, "password": "wrong"}).encode(),
              "/invoices": json.dumps({"request_id": "fuzz", "customer": "Fuzz Ltd",
                                       "currency": "EUR", "due_date": days_ahead(61),
                                       "line_items": []}).encode(),
              # A revision that never was: each of these is refused before it writes.
              "/invoices/@invoice@": json.dumps({"revision": 999, "customer": "X"}).encode(),
              "/invoices/@invoice@/issue": json.dumps({"request_id": "fuzz",
                                                       "revision": 999}).encode(),
              "/invoices/@invoice@/attachments": MULTIPART,
              "/settings": json.dumps({"name": "Ada Fuzz", "address": "",
                                       "vat_id": ""}).encode()}
    cases = generate(3000)
    assert len(cases) >= 3000
    statuses: dict[int, int] = {}
    for (method, path), fuzzed, signed_in in cases:
        headers = {"host": "studio.test", "accept": "application/json", **fuzzed}
        if signed_in and "cookie" not in fuzzed:
            headers["cookie"] = cookie
        raw = [(name.encode(), value.encode("latin-1")) for name, value in headers.items()]
        body = bodies.get(path, b"") if method in ("POST", "PATCH") else b""
        path = path.replace("@lease@", lease_id).replace("@invoice@", draft)
        reply = await call(studio.app, method, path, raw, body)
        statuses[reply.status] = statuses.get(reply.status, 0) + 1
        assert reply.status != 500, (method, path, headers)
    # The run reached past the guards as well as into them.
    assert statuses.get(200, 0) > 0 and statuses.get(403, 0) > 0 and statuses.get(401, 0) > 0
    assert 500 not in statuses
    # The one lease the fuzz may make is its own "fuzz" request: nothing else was written.
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") <= 2
    # And the one draft its own "fuzz" id may make.
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices") <= invoices_before + 1
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM invoices"
                                           " WHERE status = 'issued' AND id = ?", draft) == 0

"""What crosses the boundary: identity only from the signed cookie, browsers from this site
only, bad input refused with a clear 4xx that changes nothing."""

from __future__ import annotations

import pytest

from studio.accounts.auth import SESSION_COOKIE
from tests.conftest import ADA, database_digest, lease_body, scalar, wait_for_status

pytestmark = pytest.mark.anyio

LEASE = "00000000-0000-4000-8000-000000000000"


async def test_sign_in_answers_json_with_a_signed_http_only_cookie(studio):
    client = studio.client()
    reply = await client.post("/login", json={"email": ADA, "password": "studio-demo"})
    assert reply.status_code == 200
    assert reply.json()["email"] == ADA
    cookie = reply.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    token = client.cookies.get(SESSION_COOKIE)
    # The database holds only a digest of the session token, never the cookie's value.
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sessions WHERE id = ?",
                  token) == 0


async def test_a_form_sign_in_redirects_back_where_it_was_going(studio):
    client = studio.client(Accept="text/html")
    reply = await client.post("/login", data={"email": ADA, "password": "studio-demo",
                                              "next": "/invoices?x=1"})
    assert reply.status_code == 303 and reply.headers["location"] == "/invoices?x=1"
    elsewhere = await client.post("/login", data={"email": ADA, "password": "studio-demo",
                                                  "next": "//evil.example/"})
    assert elsewhere.headers["location"] == "/invoices"


async def test_wrong_password_and_unknown_email_are_the_same_401(studio):
    client = studio.client()
    odd = await client.post("/login", content=b'{"email": "\\udc80@x", "password": "p"}',
                            headers={"Content-Type": "application/json"})
    assert odd.status_code == 422
    wrong = await client.post("/login", json={"email": ADA, "password": "nope"})
    nobody = await client.post("/login", json={"email": "x@example.com", "password": "nope"})
    assert wrong.status_code == nobody.status_code == 401
    assert wrong.json() == nobody.json()
    assert wrong.json()["detail"] == "invalid_credentials"
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sessions") == 0


async def test_a_tampered_cookie_is_401(studio):
    client = await studio.signed_in()
    good = client.cookies.get(SESSION_COOKIE)
    forged = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    stranger = studio.client()
    stranger.cookies.set(SESSION_COOKIE, forged)
    assert (await stranger.get("/invoices")).status_code == 401
    posted = await stranger.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    assert posted.status_code == 401 and posted.json()["detail"] == "not_signed_in"
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") == 0


async def test_a_signed_out_browser_is_sent_to_sign_in_and_back(studio):
    browser = studio.client(Accept="text/html")
    reply = await browser.get("/invoices?page=2")
    assert reply.status_code == 303
    assert reply.headers["location"] == "/login?next=%2Finvoices%3Fpage%3D2"


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
])
async def test_a_cross_origin_post_is_403_and_leaves_no_binding(studio, headers):
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    for path, body in [("/leases", lease_body(studio.invoice_ids()[:1])),
                       ("/logout", {}), ("/login", {"email": ADA, "password": "studio-demo"})]:
        reply = await client.post(path, json=body, headers=headers)
        assert reply.status_code == 403, path
        assert reply.json()["detail"] == "cross_origin_request"
    assert database_digest(studio.settings.db_path) == before


async def test_same_origin_browsers_and_non_browsers_pass(studio):
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[:1]
    same = await client.post("/leases", json=lease_body(invoice, "a"),
                             headers={"Sec-Fetch-Site": "same-origin"})
    by_origin = await client.post("/leases", json=lease_body(invoice, "b"),
                                  headers={"Origin": "http://studio.test"})
    script = await client.post("/leases", json=lease_body(invoice, "c"))
    assert same.status_code == by_origin.status_code == script.status_code == 201


async def test_html_fragment_and_json_answer_from_one_path(studio):
    client = await studio.signed_in()
    made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    path = f"/leases/{made.json()['lease_id']}"
    as_json = await client.get(path)
    fragment = await client.get(path, headers={"HX-Request": "true", "Accept": "text/html"})
    page = await client.get(path, headers={"Accept": "text/html"})
    assert as_json.headers["content-type"].startswith("application/json")
    assert "<html" not in fragment.text and 'id="lease-status"' in fragment.text
    assert "<html" in page.text and 'id="lease-status"' in page.text
    for reply in (as_json, fragment, page):
        assert "HX-Request" in reply.headers["vary"]


async def test_htmx_polling_gets_286_once_the_lease_is_final(studio):
    client = await studio.signed_in()
    made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1]))
    lease_id = made.json()["lease_id"]
    await client.post(f"/leases/{lease_id}/cancel")
    polled = await client.get(f"/leases/{lease_id}",
                              headers={"HX-Request": "true", "Accept": "text/html"})
    assert polled.status_code == 286
    assert "hx-trigger" not in polled.text


BAD_BODIES = [
    ("not json", b"{not json", "application/json", 422, "invalid_body"),
    ("a list", b"[1, 2]", "application/json", 422, "invalid_body"),
    ("deep nesting", b"[" * 50_000 + b"]" * 50_000, "application/json", 413, "body_too_large"),
    ("deep but small", b"{\"a\":" * 5000 + b"1" + b"}" * 5000, "application/json", 422,
     "invalid_body"),
    ("huge string", b'{"request_id": "' + b"x" * 70_000 + b'"}', "application/json", 413,
     "body_too_large"),
    ("multipart", b"--x\r\n", "multipart/form-data; boundary=x", 422, "invalid_body"),
    ("lone surrogate", b'{"request_id": "\\ud800"}', "application/json", 422, "invalid_body"),
    ("huge number", b'{"request_id": "r", "candidates": ' + b"9" * 5000 + b"}",
     "application/json", 422, "invalid_body"),
    ("not utf-8", b'{"request_id": "\xff\xfe"}', "application/json", 422, "invalid_body"),
]


@pytest.mark.parametrize("name,raw,content_type,status,detail", BAD_BODIES,
                         ids=[case[0] for case in BAD_BODIES])
async def test_bad_raw_bodies_are_4xx_and_change_nothing(studio, name, raw, content_type,
                                                          status, detail):
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.post("/leases", content=raw, headers={"Content-Type": content_type})
    assert reply.status_code == status, reply.text
    assert reply.json()["detail"] == detail
    assert reply.json()["message"]
    assert database_digest(studio.settings.db_path) == before


def _bad_lease_bodies(invoice: str, bens: str) -> list[tuple[str, dict, int, str]]:
    good = lease_body([invoice])
    return [
        ("no request id", {k: v for k, v in good.items() if k != "request_id"}, 422,
         "invalid_request_id"),
        ("numeric request id", {**good, "request_id": 7}, 422, "invalid_request_id"),
        ("unknown purpose", {**good, "purpose": "write_anything"}, 422, "purpose_not_allowed"),
        ("purpose as list", {**good, "purpose": ["summarize_invoice"]}, 422,
         "purpose_not_allowed"),
        ("no invoices", {**good, "invoice_ids": []}, 422, "invalid_body"),
        ("invoice ids as object", {**good, "invoice_ids": {"a": 1}}, 422, "invalid_body"),
        ("non-uuid invoice", {**good, "invoice_ids": ["1 OR 1=1"]}, 422, "invalid_body"),
        ("numeric invoice", {**good, "invoice_ids": [12]}, 422, "invalid_body"),
        ("huge invoice string", {**good, "invoice_ids": ["a" * 10_000]}, 422, "invalid_body"),
        ("unknown provider", {**good, "providers": ["gpt-9"]}, 422, "unknown_provider"),
        ("provider as number", {**good, "providers": [1]}, 422, "invalid_body"),
        ("no providers", {**good, "providers": []}, 422, "invalid_body"),
        ("zero candidates", {**good, "candidates": 0}, 422, "invalid_body"),
        ("six candidates", {**good, "candidates": 6}, 422, "invalid_body"),
        ("fractional candidates", {**good, "candidates": 1.5}, 422, "invalid_body"),
        ("boolean candidates", {**good, "candidates": True}, 422, "invalid_body"),
        ("string candidates", {**good, "candidates": "lots"}, 422, "invalid_body"),
        ("superscript digit", {**good, "candidates": "\u00b2"}, 422, "invalid_body"),
        ("another actor's invoice", {**good, "invoice_ids": [bens]}, 404, "invoice_not_found"),
        ("made-up invoice", {**good, "invoice_ids": [LEASE]}, 404, "invoice_not_found"),
    ]


async def test_a_table_of_bad_lease_bodies_is_all_4xx_and_changes_nothing(studio):
    client = await studio.signed_in()
    cases = _bad_lease_bodies(studio.invoice_ids()[0], studio.invoice_ids("ben@example.com")[0])
    before = database_digest(studio.settings.db_path)
    for name, body, status, detail in cases:
        reply = await client.post("/leases", json=body)
        assert (reply.status_code, reply.json()["detail"]) == (status, detail), name
        assert reply.json()["message"], name
    assert database_digest(studio.settings.db_path) == before


BAD_PATHS = [
    ("GET", "/leases/not-a-uuid", 404, "lease_not_found"),
    ("GET", "/leases/" + "f" * 5000, 404, "lease_not_found"),
    ("POST", "/leases/../../etc/passwd/apply", 404, "not_found"),
    ("POST", "/leases/1%27%20OR%201=1/apply", 404, "lease_not_found"),
    ("POST", f"/leases/{LEASE}/apply", 404, "lease_not_found"),
    ("POST", f"/leases/{LEASE}/cancel", 404, "lease_not_found"),
    ("GET", "/invoices/<script>", 404, "invoice_not_found"),
    ("GET", f"/invoices/{LEASE}", 404, "invoice_not_found"),
    ("DELETE", "/leases", 405, "method_not_allowed"),
    ("GET", "/nowhere", 404, "not_found"),
]


@pytest.mark.parametrize("method,path,status,detail", BAD_PATHS,
                         ids=[f"{m} {p[:40]}" for m, p, *_ in BAD_PATHS])
async def test_bad_paths_are_4xx_with_a_detail_and_change_nothing(studio, method, path, status,
                                                                  detail):
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.request(method, path)
    assert reply.status_code == status
    assert reply.json()["detail"] == detail
    assert database_digest(studio.settings.db_path) == before


async def test_bad_apply_choices_are_422_and_change_nothing(studio):
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    made = await client.post("/leases", json=lease_body([invoice]))
    lease_id = made.json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    before = database_digest(studio.settings.db_path)
    cases = [({"x": "y"}, "invalid_choice"), (["a"], "invalid_body"),
             ({invoice: LEASE}, "invalid_choice"), ("all", "invalid_body"),
             ({invoice: ["nested"]}, "invalid_choice")]
    for choices, detail in cases:
        reply = await client.post(f"/leases/{lease_id}/apply", json={"choices": choices})
        assert (reply.status_code, reply.json()["detail"]) == (422, detail), choices
    assert database_digest(studio.settings.db_path) == before


async def test_only_the_exact_issued_cookie_is_accepted(studio):
    client = await studio.signed_in()
    padded = studio.client()
    padded.cookies.set(SESSION_COOKIE, client.cookies.get(SESSION_COOKIE) + "==")
    assert (await padded.get("/invoices")).status_code == 401


async def test_answers_are_private_and_a_405_names_what_is_allowed(studio):
    client = await studio.signed_in()
    for reply in [await client.get("/invoices"),
                  await client.get("/invoices", headers={"Accept": "text/html"}),
                  await client.get("/leases/not-a-lease")]:
        assert reply.headers["cache-control"] == "no-store"
    wrong = await client.put("/leases")
    assert wrong.status_code == 405 and "POST" in wrong.headers["allow"]


async def test_an_htmx_request_without_a_session_returns_to_the_page_it_came_from(studio):
    stranger = studio.client(**{"HX-Request": "true", "Accept": "text/html"})
    page = "http://studio.test/leases/00000000-0000-4000-8000-000000000000"
    reply = await stranger.post("/leases/00000000-0000-4000-8000-000000000000/apply",
                                headers={"HX-Current-URL": page})
    assert reply.status_code == 401
    assert reply.headers["hx-redirect"] == (
        "/login?next=%2Fleases%2F00000000-0000-4000-8000-000000000000")
    elsewhere = await stranger.post("/logout", headers={"HX-Current-URL": "http://evil.example/x"})
    assert elsewhere.headers["hx-redirect"] == "/login?next=%2Finvoices"

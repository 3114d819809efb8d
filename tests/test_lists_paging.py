"""Long lists come in pages: at most `limit` items, an RFC 8288 Link to the next, every item
once, in the list's own order; the pages show 50 with a link onwards."""

from __future__ import annotations

import base64
import re
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from studio.billing import invoices
from studio.leasing import leases
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, rows, scalar

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def actor_id(db_path: Path, email: str = ADA) -> str:
    return scalar(db_path, "SELECT id FROM actors WHERE email = ?", email)


def insert_drafts(db_path: Path, count: int, email: str = ADA) -> None:
    """Many drafts at once, as a fast client would make them; some share a created_at."""
    owner, now = actor_id(db_path, email), time.time()
    lines = '[{"description": "Tea", "quantity": "1", "unit_price": "1.00", "tax_rate": "0"}]'
    db = backends.connect(db_path)
    try:
        in_transaction(db, lambda db: db.executemany(
            "INSERT INTO invoices (id, owner_id, customer, currency, due_date, line_items,"
            " net, tax, total, created_at, updated_at) VALUES (?, ?, ?, 'EUR', '2027-01-01',"
            " ?, '1.00', '0.00', '1.00', ?, ?)",
            [(str(uuid.uuid4()), owner, f"Bulk {n}", lines, now - n // 3, now - n // 3)
             for n in range(count)]))
    finally:
        db.close()


def insert_requests(db_path: Path, count: int, email: str = ADA) -> None:
    """Many ended requests at once, each naming one of the actor's invoices."""
    owner = actor_id(db_path, email)
    invoice = scalar(db_path, "SELECT id FROM invoices WHERE owner_id = ? AND status = 'issued'"
                              " LIMIT 1", owner)
    now = time.time()
    made = [(str(uuid.uuid4()), now - 1000 - n // 4) for n in range(count)]
    def insert(db: Any) -> None:
        db.executemany(
            "INSERT INTO leases (id, actor_id, session_id, purpose, options, status,"
            " deadline_at, created_at, ended_at, ended_reason, task_count) VALUES"
            " (?, ?, 'gone', 'summarize_invoice', '{\"providers\": [\"local\"],"
            " \"candidates\": 1}', 'expired', ?, ?, ?, 'deadline', 1)",
            [(lease_id, owner, created + 90, created, created + 90)
             for lease_id, created in made])
        db.executemany("INSERT INTO lease_invoices (lease_id, invoice_id, position)"
                       " VALUES (?, ?, 0)", [(lease_id, invoice) for lease_id, _ in made])

    db = backends.connect(db_path)
    try:
        in_transaction(db, insert)
    finally:
        db.close()


async def walk(client: Any, first: str) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """Every page, following the Link headers from `first`; and the links followed."""
    pages, links, url = [], [], first
    while url:
        reply = await client.get(url)
        assert reply.status_code == 200, reply.text
        pages.append(reply.json())
        found = NEXT.search(reply.headers.get("link", ""))
        url = found[1] if found else ""
        if url:
            links.append(url)
        assert len(pages) < 200, "the links never end"
    return pages, links


async def test_walking_the_link_headers_returns_every_invoice_exactly_once_in_order(
        studio) -> None:
    db = studio.settings.db_path
    insert_drafts(db, 1200)
    client = await studio.signed_in()
    pages, links = await walk(client, "/invoices?limit=500")
    assert [len(page) for page in pages] == [500, 500, len(pages[-1])]
    assert all("limit=500" in link for link in links)
    listed = [item["id"] for page in pages for item in page]
    # The list's own order: drafts newest first, then issued invoices newest first.
    expected = [row[0] for row in rows(
        db, "SELECT id FROM invoices WHERE owner_id = ? AND status != 'deleted'"
            " ORDER BY status = 'issued', issued_at DESC, number DESC, created_at DESC, id DESC",
        actor_id(db))]
    assert listed == expected and len(set(listed)) == len(listed) > 1200

    default = await client.get("/invoices")
    assert len(default.json()) == 100 and 'rel="next"' in default.headers["link"]
    # The last page names no next page.
    last = await client.get(links[-1])
    assert "link" not in last.headers


async def test_a_deleted_draft_between_pages_loses_no_other_invoice(studio) -> None:
    db = studio.settings.db_path
    insert_drafts(db, 30)
    client = await studio.signed_in()
    first = await client.get("/invoices?limit=10")
    boundary = first.json()[-1]["id"]
    assert (await client.delete(f"/invoices/{boundary}")).status_code == 200
    rest, _ = await walk(client, NEXT.search(first.headers["link"])[1])
    listed = [item["id"] for item in first.json()] + [i["id"] for page in rest for i in page]
    assert len(listed) == len(set(listed))
    assert set(listed) - {boundary} == {row[0] for row in rows(
        db, "SELECT id FROM invoices WHERE owner_id = ? AND status != 'deleted'",
        actor_id(db))}


@pytest.mark.parametrize("path", ["/invoices", "/leases"])
async def test_a_limit_outside_1_to_500_or_a_malformed_cursor_is_422(studio, path) -> None:
    client = await studio.signed_in()
    for limit in ("0", "501", "abc", "-1", "1.5", "", "٣"):
        reply = await client.get(path, params={"limit": limit})
        assert reply.status_code == 422, limit
        assert reply.json()["detail"] == "invalid_limit" and "500" in reply.json()["message"]
    for cursor in ("garbage", "", "eyJ4IjogMX0", "W10", "!!!", "a" * 5000):
        reply = await client.get(path, params={"after": cursor})
        assert reply.status_code == 422, cursor
        assert reply.json()["detail"] == "invalid_cursor"
    page = await client.get(path, params={"limit": "abc"}, headers=PAGE)
    assert page.status_code == 422 and "500" in page.text


async def test_the_invoice_page_shows_fifty_and_a_link_onwards(studio) -> None:
    db = studio.settings.db_path
    insert_drafts(db, 120)
    client = await studio.signed_in()
    seen: list[str] = []
    url = "/invoices"
    while url:
        page = await client.get(url, headers=PAGE)
        assert page.status_code == 200
        ids = re.findall(r'name="invoice_id" value="([^"]+)"', page.text)
        assert len(ids) <= 50
        seen += ids
        onwards = re.search(r'<a [^>]*rel="next"[^>]*href="([^"]+)"', page.text) \
            or re.search(r'<a [^>]*href="([^"]+)"[^>]*rel="next"', page.text)
        url = onwards[1].replace("&amp;", "&") if onwards else ""
    assert len(seen) == len(set(seen)) == scalar(
        db, "SELECT COUNT(*) FROM invoices WHERE owner_id = ? AND status != 'deleted'",
        actor_id(db))
    first = (await client.get("/invoices", headers=PAGE)).text
    assert len(re.findall(r'name="invoice_id"', first)) == 50


async def test_walking_the_history_returns_every_request_exactly_once_newest_first(
        studio) -> None:
    db = studio.settings.db_path
    insert_requests(db, 230)
    client = await studio.signed_in()
    pages, _ = await walk(client, "/leases?limit=100")
    assert [len(page) for page in pages] == [100, 100, 30]
    listed = [item["lease_id"] for page in pages for item in page]
    expected = [row[0] for row in rows(
        db, "SELECT id FROM leases WHERE actor_id = ? ORDER BY created_at DESC, id DESC",
        actor_id(db))]
    assert listed == expected
    assert all(item["invoice_ids"] and item["status"] == "expired" for page in pages
               for item in page)
    html = (await client.get("/leases", headers=PAGE)).text
    assert html.count('data-status="') == 50 and 'rel="next"' in html
    assert "<h1>History</h1>" in html


@backends.sqlite_only
def test_the_lists_read_by_index_without_sorting(settings) -> None:
    """A page is a range of an index: no scan of the whole list, no sort of it."""
    db = sqlite3.connect(settings.db_path)
    try:
        for sql, params in [*invoices.LIST_QUERIES, *leases.LIST_QUERIES]:
            plan = " | ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            assert "USING" in plan and "INDEX" in plan, (sql, plan)
            assert "TEMP B-TREE" not in plan and "SCAN" not in plan.replace(
                "SCAN CONSTANT ROW", ""), (sql, plan)
    finally:
        db.close()


@backends.postgres_only
def test_on_postgresql_the_lists_read_by_index_without_sorting(settings) -> None:
    """The same promise in PostgreSQL's plans. Its tables here are small enough to read whole,
    so scans and sorts are priced out: a plan still holding one has no index to page by."""
    db = backends.connect(settings.db_path)
    try:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            db.execute(f"SET {setting} = off")
        for sql, params in [*invoices.LIST_QUERIES, *leases.LIST_QUERIES]:
            plan = " | ".join(row[0] for row in db.execute(f"EXPLAIN {sql}", params))
            assert "Index" in plan, (sql, plan)
            assert "Sort" not in plan and "Seq Scan" not in plan, (sql, plan)
    finally:
        db.close()


async def test_an_empty_list_shows_a_sentence_not_an_empty_table(studio) -> None:
    from studio.accounts.auth import add_actor
    from studio.ops.demo import DEMO_PASSWORD

    db = backends.connect(studio.settings.db_path)
    try:
        in_transaction(db, add_actor, "new@example.com", DEMO_PASSWORD)
    finally:
        db.close()
    client = await studio.signed_in("new@example.com")
    page = (await client.get("/invoices", headers=PAGE)).text
    assert "<table" not in page and "Summarize the chosen invoices" not in page
    assert "No invoices yet" in page
    assert (await client.get("/invoices")).json() == []
    history = (await client.get("/leases", headers=PAGE)).text
    assert "No summary requests yet" in history and 'rel="next"' not in history


async def test_drafts_and_issued_invoices_share_one_table_so_columns_line_up(studio) -> None:
    client = await studio.signed_in()
    page = (await client.get("/invoices", headers=PAGE)).text
    assert page.count("<table") == 1
    table = page.split("<table")[1].split("</table>")[0]
    assert '<tbody id="drafts"' in table and '<tbody id="issued"' in table


def _made(text: str) -> str:
    """A cursor encoded the studio's way around JSON text the studio never wrote."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# Per list, its cursor's shape with a lone surrogate where a text goes.
SURROGATES = {"/customers": r'["a","\ud800"]', "/invoices": r'["draft",1.0,"\ud800"]',
              "/leases": r'[1.0,"\udfff"]'}
NOT_WRITTEN = [
    r'[{"a":1},"x"]', r'[[1],[2]]', r'[true,"x"]', r'[1e999,"x"]', r'["x",1e999,"y"]',
    r'[null,null,null]', r'"draft"', r'{"a":1}', r'null', r'[1,2,3]', r'["a\u0000b","x"]',
    "[" * 300 + "]" * 300, r'["issued",1' + "0" * 400 + r',"x"]', r'[1' + "0" * 400 + r',"x"]',
    r'["draft", 1.0, "x"]', r'[1.0, "x"]', r'["a", "x"]',
]


@pytest.mark.parametrize("path", ["/customers", "/invoices", "/leases"])
async def test_a_cursor_the_studio_did_not_write_is_422_never_a_500(studio, path) -> None:
    """A lone surrogate, garbage or a value of the wrong type in `after` is refused with
    `invalid_cursor` and a sentence, as JSON and as a page, on each list."""
    client = await studio.signed_in()
    raw = ["%ED%A0%80", "%ED%A0%80%ED%B0%80", "%FF", "a%00b", "%C0%AF", _made(SURROGATES[path])]
    raw += [_made(text) for text in NOT_WRITTEN]
    for query in raw:
        for url in (f"{path}?after={query}", f"{path}?limit=2&status=issued&after={query}"):
            for headers in ({}, PAGE):
                reply = await client.get(url, headers=headers)
                assert reply.status_code == 422, (url, reply.text[-500:])
                if not headers:
                    assert reply.json() == {"detail": "invalid_cursor", "message": reply.json()[
                        "message"]} and "first page" in reply.json()["message"], reply.text
    # The studio's own cursors still lead onwards.
    assert (await client.get(f"{path}?limit=1")).status_code == 200

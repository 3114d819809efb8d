"""Finding invoices: the list's filters (status, customer, text, issue dates), paged with the
filters kept, each invoice's payment status, and the totals outstanding and overdue per
currency; on both backends, against the database."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any

import pytest

from studio import i18n
from studio.billing import finding
from tests.conftest import ADA, database_digest, days_ahead, rows
from tests.test_words_pages import assert_plain

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
TODAY = dt.datetime.now(dt.UTC).date()


def at(day: str) -> float:
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(12), dt.UTC).timestamp()


def on_day(monkeypatch: pytest.MonkeyPatch, day: str) -> None:
    """The list judges overdue by the transaction's clock: set it to noon of `day`."""
    monkeypatch.setattr(finding, "clock", lambda now: now or at(day))


def day_after_due(studio: Any, customer: str, days: int = 1) -> str:
    """The day `days` after the due date of Ada's demo invoice to that customer (0: the due
    date itself): the demo's invoices are due some days after the day the suite began."""
    due = rows(studio.settings.db_path, "SELECT due_date FROM invoices JOIN actors ON"
               " actors.id = owner_id WHERE email = ? AND customer = ?", ADA, customer)[0][0]
    return (dt.date.fromisoformat(due) + dt.timedelta(days=days)).isoformat()


async def pay(client: Any, invoice_id: str, amount: str) -> None:
    reply = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": str(uuid.uuid4()), "amount": amount, "date": TODAY.isoformat(),
        "method": "bank_transfer"})
    assert reply.status_code == 201, reply.text


async def customers_of(client: Any, url: str) -> list[str]:
    reply = await client.get(url)
    assert reply.status_code == 200, reply.text
    return [item["customer"] for item in reply.json()]


@pytest.fixture
async def ada(studio) -> Any:
    """Ada's demo invoices with Blue Harbor paid in full and Northwind in part."""
    client = await studio.signed_in()
    northwind, blue_harbor = studio.invoice_ids()[:2]
    await pay(client, blue_harbor, "770.00")
    await pay(client, northwind, "700.00")
    return client


ISSUED = ["Lindqvist Architects", "Orchard and Vine Wines", "Kestrel Logistics",
          "Blue Harbor Cafe", "Northwind Traders"]  # newest first


async def test_each_status_finds_its_invoices(studio, ada, monkeypatch) -> None:
    assert await customers_of(ada, "/invoices?status=draft") == ["Pemberton Tea Rooms"]
    assert await customers_of(ada, "/invoices?status=issued") == ISSUED
    assert await customers_of(ada, "/invoices?status=unpaid") == [
        "Lindqvist Architects", "Orchard and Vine Wines", "Kestrel Logistics",
        "Northwind Traders"]
    assert await customers_of(ada, "/invoices?status=paid") == ["Blue Harbor Cafe"]
    # Overdue flips the day after each due date, and never for a paid invoice.
    for day, overdue in ((day_after_due(studio, "Northwind Traders", 0), []),
                         (day_after_due(studio, "Northwind Traders"), ["Northwind Traders"]),
                         (day_after_due(studio, "Blue Harbor Cafe"), ["Northwind Traders"]),
                         (day_after_due(studio, "Kestrel Logistics"),
                          ["Kestrel Logistics", "Northwind Traders"])):
        on_day(monkeypatch, day)
        assert await customers_of(ada, "/invoices?status=overdue") == overdue, day
    # The database agrees: what is listed as unpaid is what the balances say still owes.
    owing = {row[0] for row in rows(
        studio.settings.db_path, "SELECT invoices.customer FROM balances JOIN invoices ON"
        " invoices.id = balances.invoice_id JOIN actors ON actors.id = balances.owner_id"
        " WHERE actors.email = ? AND balances.payment_status != 'paid'", ADA)}
    assert owing == set(await customers_of(ada, "/invoices?status=unpaid"))


async def test_every_invoice_in_the_list_says_what_it_has_paid_and_is_due(
        studio, ada, monkeypatch) -> None:
    on_day(monkeypatch, day_after_due(studio, "Northwind Traders"))
    for url in ("/invoices", "/invoices?status=issued"):
        listed = {item["customer"]: item for item in (await ada.get(url)).json()}
        northwind = listed["Northwind Traders"]
        assert (northwind["amount_paid"], northwind["amount_due"], northwind["payment_status"],
                northwind["overdue"]) == ("700.00", "2000.00", "partially_paid", True)
        assert listed["Blue Harbor Cafe"]["payment_status"] == "paid"
        assert listed["Blue Harbor Cafe"]["overdue"] is False
        if "Pemberton Tea Rooms" in listed:
            assert listed["Pemberton Tea Rooms"]["payment_status"] is None


async def test_text_finds_a_customer_or_a_number_whatever_the_case(studio, ada) -> None:
    number = rows(studio.settings.db_path, "SELECT number FROM invoices WHERE id = ?",
                  studio.invoice_ids()[1])[0][0]
    assert await customers_of(ada, "/invoices?q=NORTHWIND") == ["Northwind Traders"]
    assert await customers_of(ada, "/invoices?q=tea") == ["Pemberton Tea Rooms"]
    assert await customers_of(ada, f"/invoices?q={number.lower()}") == ["Blue Harbor Cafe"]
    assert await customers_of(ada, "/invoices?q=tea&status=issued") == []
    # A person's % or _ is a character to find, not a wildcard.
    assert await customers_of(ada, "/invoices?q=%25") == []
    assert await customers_of(ada, "/invoices?q=_") == []
    # Letters beyond ASCII match whatever their case, on either database.
    made = await ada.post("/invoices", json={
        "customer": "Ölmühle Émile", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Oil", "quantity": "1", "unit_price": "5"}]})
    assert made.status_code == 201
    assert await customers_of(ada, "/invoices?q=ÖLMÜHLE") == ["Ölmühle Émile"]
    assert await customers_of(ada, "/invoices?q=émile") == ["Ölmühle Émile"]


async def test_issue_dates_and_a_customer_narrow_the_list(studio, ada) -> None:
    today = TODAY.isoformat()
    day = dt.timedelta(days=1)
    issued_today = await customers_of(ada, f"/invoices?from={today}&to={today}")
    assert issued_today == ISSUED  # drafts have no issue date
    assert await customers_of(ada, f"/invoices?from={TODAY + day}") == []
    assert await customers_of(ada, f"/invoices?to={TODAY - day}") == []
    assert await customers_of(ada, f"/invoices?status=paid&from={today}") == [
        "Blue Harbor Cafe"]

    customer = await ada.post("/customers", json={"name": "Quill & Co"})
    assert customer.status_code == 201, customer.text
    customer_id = customer.json()["id"]
    made = await ada.post("/invoices", json={
        "customer_id": customer_id, "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Pens", "quantity": "1", "unit_price": "5"}]})
    assert made.status_code == 201, made.text
    assert await customers_of(ada, f"/invoices?customer_id={customer_id}") == [
        made.json()["customer"]]
    assert await customers_of(ada, f"/invoices?customer_id={uuid.uuid4()}") == []


async def test_pages_of_a_filtered_list_keep_the_filters_and_list_each_once(
        studio, ada) -> None:
    url, seen, links = "/invoices?status=unpaid&limit=1", [], []
    while url:
        reply = await ada.get(url)
        assert reply.status_code == 200, reply.text
        seen += [item["customer"] for item in reply.json()]
        link = reply.headers.get("link")
        url = re.match(r"<([^>]+)>", link)[1] if link else ""
        links.append(url)
    assert seen == await customers_of(ada, "/invoices?status=unpaid")
    assert len(seen) == 4 and all("status=unpaid" in link for link in links[:-1])
    # The page's own links keep the filters too, and its form shows them.
    html = (await ada.get("/invoices?status=unpaid&q=o&limit=1", headers=PAGE)).text
    onwards = re.search(r'rel="next" href="([^"]+)"', html)[1].replace("&amp;", "&")
    assert "status=unpaid" in onwards and "q=o" in onwards
    assert '<option value="unpaid" selected>' in html
    assert 'name="q" id="filter-text" value="o"' in html
    later = (await ada.get(onwards, headers=PAGE)).text
    newest = re.search(r'href="([^"]+)">Newest</a>', later)[1].replace("&amp;", "&")
    assert newest == "/invoices?status=unpaid&q=o&limit=1"


async def test_the_list_page_shows_what_is_outstanding_and_overdue_per_currency(
        studio, ada, monkeypatch) -> None:
    day = day_after_due(studio, "Kestrel Logistics")
    on_day(monkeypatch, day)
    owing: dict[str, list[Decimal]] = {}
    for currency, due, due_date in rows(
            studio.settings.db_path, "SELECT balances.currency, amount_due, due_date FROM"
            " balances JOIN actors ON actors.id = owner_id WHERE email = ?"
            " AND payment_status != 'paid'", ADA):
        sums = owing.setdefault(currency, [Decimal(0), Decimal(0)])
        sums[0] += Decimal(due)
        sums[1] += Decimal(due) if due_date < day else 0
    assert {currency: [str(s) for s in sums] for currency, sums in owing.items()} == {
        "EUR": ["5290.40", "2000.00"], "USD": ["2110.50", "2110.50"]}
    html = (await ada.get("/invoices", headers=PAGE)).text
    for currency, (outstanding, overdue) in owing.items():
        shown = re.search(rf'id="owed-{currency}">(.*?)</dd>', html, re.S)[1]
        # As English writes amounts, with thousands separators: `$2,110.50`.
        assert f"Outstanding {i18n.money(outstanding, currency, 'en')}" in shown
        assert f"Overdue {i18n.money(overdue, currency, 'en')}" in shown
    assert html.count('class="badge overdue"') == 2
    assert "Partly paid" in html and ">Paid</span>" in html
    assert_plain("invoice list", html)
    # The totals are the person's whole position, whatever the list shows.
    filtered = (await ada.get("/invoices?status=paid", headers=PAGE)).text
    assert "Outstanding €5,290.40" in filtered
    assert_plain("filtered invoice list", filtered)


@pytest.mark.parametrize("query, said", [
    ("status=bogus", "draft, issued, unpaid, paid or overdue"),
    ("from=2026-02-30", "from date"),
    ("to=tomorrow", "to date"),
    ("from=2026-12-02&to=2026-12-01", "not be after"),
    ("customer_id=not-a-customer", "not one of yours"),
    ("q=" + "x" * 201, "at most 200"),
    ("q=%00", "The search holds an invisible control character (U+0000)"),
    ("q=tea%1B%5B2J", "The search holds an invisible control character (U+001B)"),
])
async def test_a_bad_filter_is_refused_with_a_message_and_changes_nothing(
        studio, query: str, said: str) -> None:
    client = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    reply = await client.get(f"/invoices?{query}")
    assert reply.status_code == 422 and said in reply.json()["message"], reply.text
    page = await client.get(f"/invoices?{query}", headers=PAGE)
    assert page.status_code == 422 and said in page.text
    assert database_digest(studio.settings.db_path) == before


async def test_an_empty_field_of_the_filter_form_is_no_filter(studio, ada) -> None:
    everything = await customers_of(ada, "/invoices")
    assert await customers_of(ada, "/invoices?status=&q=&from=&to=&customer_id=") == everything
    html = (await ada.get("/invoices?status=overdue&q=nobody", headers=PAGE)).text
    assert "No invoices match" in html and "No invoices yet" not in html

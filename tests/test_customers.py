"""Customers: made once per request id, edited with the version seen, deleted only while no
invoice names them, listed in pages with search; anyone else's is as absent as a made-up id."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from studio.billing import customers
from studio.errors import Refusal
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import (
    ADA,
    BEN,
    database_digest,
    days_ahead,
    execute,
    rows,
    scalar,
    table_counts,
)

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}
FORM = {"Accept": "text/html", "Content-Type": "application/x-www-form-urlencoded"}
NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
MINTED = re.compile(r'<input type="hidden" name="request_id" value="([0-9a-f-]{36})" data-mint>')
ACME = {"name": "Acme GmbH", "email": "billing@acme.example", "address": "Hauptstr. 1\nBerlin",
        "country": "de", "vat_id": "DE 136 695 976", "currency": "eur",
        "payment_terms_days": 30}
DRAFT = {"currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "19"}]}


def owner_of(db_path: Path, email: str = ADA) -> str:
    return scalar(db_path, "SELECT id FROM actors WHERE email = ?", email)


def stored(db_path: Path, customer_id: str) -> dict[str, Any] | None:
    found = rows(db_path, "SELECT * FROM customers WHERE id = ?", customer_id)
    return dict(found[0]) if found else None


def name_a_customer(db_path: Path, invoice_id: str, customer_id: str) -> None:
    """An invoice naming the customer, as a draft saved with the picker leaves it."""
    execute(db_path, "UPDATE invoices SET customer_id = ? WHERE id = ?", customer_id, invoice_id)


# --- making one, once ------------------------------------------------------------------------


async def test_a_customer_is_stored_normalised_and_read_back(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/customers", json=ACME)
    assert made.status_code == 201, made.text
    body = made.json()
    assert {key: body[key] for key in customers.FIELDS} == {
        "name": "Acme GmbH", "email": "billing@acme.example", "address": "Hauptstr. 1\nBerlin",
        "country": "DE", "vat_id": "DE136695976", "currency": "EUR", "payment_terms_days": 30}
    assert body["revision"] == 1
    row = stored(studio.settings.db_path, body["id"])
    assert row["owner_id"] == owner_of(studio.settings.db_path)
    assert (row["country"], row["vat_id"], row["currency"]) == ("DE", "DE136695976", "EUR")
    read = (await client.get(f"/customers/{body['id']}")).json()
    assert read["name"] == "Acme GmbH" and read["invoices"] == 0
    # Only a name is needed; the payment terms are 14 days unless said.
    bare = (await client.post("/customers", json={"name": "  Bare Co  "})).json()
    assert (bare["name"], bare["payment_terms_days"], bare["country"]) == ("Bare Co", 14, "")


async def test_the_same_request_id_makes_one_customer_and_other_input_is_refused(studio) -> None:
    client = await studio.signed_in()
    path = studio.settings.db_path
    first = await client.post("/customers", json={**ACME, "request_id": "c-1"})
    again = await client.post("/customers", json={**ACME, "request_id": "c-1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    before = table_counts(path)
    other = await client.post("/customers", json={**ACME, "name": "Other",
                                                   "request_id": "c-1"})
    assert other.status_code == 409 and other.json()["detail"] == "request_id_conflict"
    assert table_counts(path) == before
    assert scalar(path, "SELECT COUNT(*) FROM customers WHERE name IN ('Acme GmbH', 'Other')") == 1
    [binding] = rows(path, "SELECT target_id FROM request_bindings WHERE kind = 'customer'"
                           " AND request_id = 'c-1'")
    assert binding["target_id"] == first.json()["id"]
    # Another person's same id is their own.
    ben = await studio.signed_in(BEN)
    theirs = await ben.post("/customers", json={**ACME, "request_id": "c-1"})
    assert theirs.status_code == 201 and theirs.json()["id"] != first.json()["id"]


async def test_eight_racing_posts_with_one_request_id_make_one_customer(studio) -> None:
    client = await studio.signed_in()
    replies = await asyncio.gather(*(
        client.post("/customers", json={**ACME, "name": "Racer Ltd", "request_id": "race"})
        for _ in range(8)))
    assert sorted(reply.status_code for reply in replies) == [200] * 7 + [201]
    assert len({reply.json()["id"] for reply in replies}) == 1
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM customers WHERE name = 'Racer Ltd'") == 1


async def test_the_new_customer_form_sent_twice_makes_one_customer(studio) -> None:
    client = await studio.signed_in()
    page = (await client.get("/customers", headers=PAGE)).text
    [request_id] = MINTED.findall(page)
    assert MINTED.findall((await client.get("/customers", headers=PAGE)).text) != [request_id]
    body = urlencode({"request_id": request_id, "name": "Form Co", "email": "", "country": "FR",
                      "address": "", "vat_id": "", "currency": "", "payment_terms_days": "14"})
    first = await client.post("/customers", content=body, headers=FORM)
    again = await client.post("/customers", content=body, headers=FORM)
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"]
    assert scalar(studio.settings.db_path,
                  "SELECT COUNT(*) FROM customers WHERE name = 'Form Co'") == 1


@pytest.mark.parametrize(("field", "value", "code"), [
    ("vat_id", "DE123456789", "invalid_vat_id"),
    ("vat_id", "FRXX", "invalid_vat_id"),
    ("country", "XX", "invalid_country"),
    ("country", "DEU", "invalid_country"),
    ("email", "not-an-address", "invalid_email"),
    ("currency", "EUX", "invalid_body"),
    ("name", "", "invalid_body"),
    ("name", "x" * 201, "invalid_body"),
    ("address", "x" * 1001, "invalid_body"),
    ("payment_terms_days", 366, "invalid_body"),
    ("payment_terms_days", True, "invalid_body"),
    ("name", "Nul\x00Co", "invalid_body"),
])
async def test_invalid_fields_are_refused_by_name_and_change_nothing(
        studio, field: str, value: Any, code: str) -> None:
    client = await studio.signed_in()
    made = (await client.post("/customers", json=ACME)).json()
    before = table_counts(studio.settings.db_path), stored(studio.settings.db_path, made["id"])
    refused = await client.post("/customers", json={**ACME, field: value})
    assert refused.status_code == 422 and refused.json()["detail"] == code
    words = {"vat_id": "VAT ID", "payment_terms_days": "payment terms"}.get(field, field)
    assert words.lower() in refused.json()["message"].lower()
    edited = await client.patch(f"/customers/{made['id']}", json={"revision": 1, field: value})
    assert edited.status_code == 422 and edited.json()["detail"] == code
    assert (table_counts(studio.settings.db_path),
            stored(studio.settings.db_path, made["id"])) == before


async def test_a_vat_id_outside_the_eu_is_kept_as_typed(studio) -> None:
    client = await studio.signed_in()
    made = await client.post("/customers", json={"name": "Swiss AG", "country": "CH",
                                                  "vat_id": " CHE-123.456.789  MWST "})
    assert made.status_code == 201 and made.json()["vat_id"] == "CHE-123.456.789 MWST"
    # A customer in the EU: its VAT ID is checked even without the country's prefix.
    greek = await client.post("/customers", json={"name": "Hellas", "country": "GR",
                                                  "vat_id": "094259216"})
    assert greek.status_code == 201 and greek.json()["vat_id"] == "EL094259216"


# --- editing ---------------------------------------------------------------------------------


async def test_an_edit_of_a_stale_version_is_refused_and_changes_nothing(studio) -> None:
    client = await studio.signed_in()
    made = (await client.post("/customers", json=ACME)).json()
    edited = await client.patch(f"/customers/{made['id']}",
                                json={"revision": 1, "email": "new@acme.example"})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["email"], edited.json()["revision"]) == ("new@acme.example", 2)
    # What the edit left out is kept.
    assert edited.json()["vat_id"] == "DE136695976"
    before = stored(studio.settings.db_path, made["id"])
    stale = await client.patch(f"/customers/{made['id']}", json={"revision": 1, "name": "Old"})
    assert stale.status_code == 409 and stale.json()["detail"] == "customer_changed"
    assert stored(studio.settings.db_path, made["id"]) == before
    # The page's form edits too, and goes back to the customer.
    form = urlencode({"revision": "2", "name": "Acme AG", "email": "", "country": "AT",
                      "address": "", "vat_id": "", "currency": "", "payment_terms_days": ""})
    saved = await client.post(f"/customers/{made['id']}/edit", content=form, headers=FORM)
    assert saved.status_code == 303 and saved.headers["location"] == f"/customers/{made['id']}"
    row = stored(studio.settings.db_path, made["id"])
    assert (row["name"], row["country"], row["payment_terms_days"], row["revision"]) == \
        ("Acme AG", "AT", 14, 3)


async def test_an_edit_that_changes_nothing_keeps_the_revision_and_writes_nothing(
        studio) -> None:
    client = await studio.signed_in()
    made = (await client.post("/customers", json=ACME)).json()
    before = database_digest(studio.settings.db_path)
    # The same fields again (as typed, before they are tidied), fields it does not edit, or
    # none at all: the same customer, the same revision, nothing written.
    for same in ({**ACME, "revision": 1}, {"revision": 1, "id": "other", "revision_": 9},
                 {"revision": 1, "name": "  Acme GmbH ", "country": "DE"}, {"revision": 1}):
        reply = await client.patch(f"/customers/{made['id']}", json=same)
        assert reply.status_code == 200, reply.text
        assert reply.json() == {key: made[key] for key in reply.json()}
        assert reply.json()["revision"] == 1
    assert database_digest(studio.settings.db_path) == before
    # So another tab's edit of what it opened still saves.
    other = await client.patch(f"/customers/{made['id']}",
                               json={"revision": 1, "email": "new@acme.example"})
    assert (other.status_code, other.json()["revision"]) == (200, 2), other.text
    assert stored(studio.settings.db_path, made["id"])["email"] == "new@acme.example"


# --- deleting --------------------------------------------------------------------------------


async def test_a_customer_an_invoice_names_cannot_be_deleted(studio) -> None:
    client = await studio.signed_in()
    path = studio.settings.db_path
    made = (await client.post("/customers", json={**ACME, "request_id": "del-1"})).json()
    draft = (await client.post("/invoices", json={**DRAFT, "customer": "Acme GmbH"})).json()
    name_a_customer(path, draft["id"], made["id"])
    before = table_counts(path)
    refused = await client.delete(f"/customers/{made['id']}")
    assert refused.status_code == 409 and refused.json()["detail"] == "customer_in_use"
    assert table_counts(path) == before and stored(path, made["id"]) is not None
    assert (await client.get(f"/customers/{made['id']}")).json()["invoices"] == 1
    # A deleted draft names no one: the customer can go then; its request id stays bound.
    assert (await client.delete(f"/invoices/{draft['id']}")).status_code == 200
    gone = await client.delete(f"/customers/{made['id']}")
    assert gone.status_code == 200, gone.text
    assert stored(path, made["id"]) is None
    assert scalar(path, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'customer'"
                        " AND target_id = ?", made["id"]) == 1
    assert scalar(path, "SELECT customer_id FROM invoices WHERE id = ?", draft["id"]) is None
    assert (await client.get(f"/customers/{made['id']}")).status_code == 404
    # The same request again answers that its customer is gone, and makes none.
    remade = await client.post("/customers", json={**ACME, "request_id": "del-1"})
    assert remade.status_code == 404 and remade.json()["detail"] == "customer_not_found"
    assert scalar(path, "SELECT COUNT(*) FROM customers WHERE name = ?", ACME["name"]) == 0


async def test_an_issued_invoice_keeps_its_customer_for_good(studio) -> None:
    client = await studio.signed_in()
    path = studio.settings.db_path
    made = (await client.post("/customers", json=ACME)).json()
    issued = studio.invoice_ids()[0]
    # The issued invoice's row never changes: name the customer through a draft, then issue it.
    draft = (await client.post("/invoices", json={**DRAFT, "customer": "Acme GmbH"})).json()
    name_a_customer(path, draft["id"], made["id"])
    await client.post("/settings", json={"name": "Ada Ltd"})
    done = await client.post(f"/invoices/{draft['id']}/issue",
                             json={"request_id": "issue-acme", "revision": 1})
    assert done.status_code == 201, done.text
    refused = await client.delete(f"/customers/{made['id']}")
    assert refused.status_code == 409 and refused.json()["detail"] == "customer_in_use"
    assert "INV-" in refused.json()["message"]
    assert stored(path, made["id"]) is not None and issued


# --- whose -----------------------------------------------------------------------------------


async def test_another_persons_customer_is_not_found(studio) -> None:
    ada = await studio.signed_in()
    path = studio.settings.db_path
    made = (await ada.post("/customers", json=ACME)).json()
    ben = await studio.signed_in(BEN)
    before = table_counts(path), stored(path, made["id"])
    for reply in (await ben.get(f"/customers/{made['id']}"),
                  await ben.patch(f"/customers/{made['id']}", json={"revision": 1, "name": "B"}),
                  await ben.delete(f"/customers/{made['id']}"),
                  await ben.get(f"/customers/picker?chosen={made['id']}", headers=HTMX),
                  await ben.get("/customers/not-a-uuid")):
        assert reply.status_code == 404, reply.text
    assert (table_counts(path), stored(path, made["id"])) == before
    assert all(item["id"] != made["id"] for item in (await ben.get("/customers")).json())
    db = backends.connect(path)
    try:
        with pytest.raises(Refusal, match="customer_not_found"):
            in_transaction(db, customers.owned, owner_of(path, BEN), made["id"])
    finally:
        db.close()


# --- the list --------------------------------------------------------------------------------


def insert_customers(db_path: Path, names: list[str], email: str = ADA) -> None:
    owner = owner_of(db_path, email)
    db = backends.connect(db_path)
    try:
        in_transaction(db, lambda db: db.executemany(
            "INSERT INTO customers (id, owner_id, name, email, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 0, 0)",
            [(str(uuid.uuid4()), owner, name, f"{name.split()[-1].lower()}@mail.example")
             for name in names]))
    finally:
        db.close()


async def pages(client: Any, url: str) -> list[list[dict[str, Any]]]:
    found = []
    while url:
        reply = await client.get(url)
        assert reply.status_code == 200, reply.text
        found.append(reply.json())
        link = NEXT.search(reply.headers.get("link", ""))
        url = link[1] if link else None
    return found


async def test_the_list_comes_in_pages_by_name_each_customer_once(studio) -> None:
    path = studio.settings.db_path
    names = [f"Paged {n:03d}" for n in range(25)]
    insert_customers(path, names)
    insert_customers(path, ["Paged 999"], BEN)
    client = await studio.signed_in()
    found = await pages(client, "/customers?limit=10&q=paged")
    assert [len(page) for page in found] == [10, 10, 5]
    assert [item["name"] for page in found for item in page] == names
    whole = (await client.get("/customers?q=Paged")).json()
    assert [item["name"] for item in whole] == names
    assert "link" not in (await client.get("/customers?q=Paged")).headers
    assert (await client.get("/customers?limit=0")).json()["detail"] == "invalid_limit"
    assert (await client.get("/customers?after=nonsense")).json()["detail"] == "invalid_cursor"


async def test_search_finds_names_and_emails_in_any_case_and_takes_wildcards_literally(
        studio) -> None:
    path = studio.settings.db_path
    insert_customers(path, ["Northwind Traders", "Blue Harbor", "Kestrel Northwind",
                            "Percent 100% Co", "Under_score"])
    client = await studio.signed_in()

    async def found(q: str) -> list[str]:
        reply = await client.get("/customers", params={"q": q})
        assert reply.status_code == 200, reply.text
        return sorted(item["name"] for item in reply.json())

    assert await found("NORTHWIND") == ["Kestrel Northwind", "Northwind Traders"]
    assert await found("harbor@MAIL") == ["Blue Harbor"]  # the email holds it
    assert await found("100%") == ["Percent 100% Co"]
    assert await found("%") == ["Percent 100% Co"]
    assert await found("r_s") == ["Under_score"]
    assert await found("e_s") == []
    assert await found("nobody") == []
    assert (await client.get("/customers", params={"q": "x" * 201})).status_code == 422


@pytest.mark.parametrize("q", ["a\x00", "\x00", "North\x1bwind", "\x7f"])
async def test_a_search_with_a_control_character_says_so_as_the_invoice_list_does(
        studio, q: str) -> None:
    client = await studio.signed_in()
    before = table_counts(studio.settings.db_path)
    answers = [await client.get(path, params={"q": q})
               for path in ("/customers", "/invoices", "/customers/picker")]
    for reply in answers:
        assert (reply.status_code, reply.json()["detail"]) == (422, "invalid_text"), reply.text
        assert reply.json()["message"].startswith(
            "The search holds an invisible control character"), reply.text
        assert "200 characters" not in reply.json()["message"]
    assert table_counts(studio.settings.db_path) == before


async def test_search_finds_letters_of_every_script_in_any_case_as_the_invoice_list_does(
        studio) -> None:
    path = studio.settings.db_path
    insert_customers(path, ["Émile Zola", "Ölmühle Nord", "Ελληνικά Δίκτυα", "Emile Plain"])
    client = await studio.signed_in()
    before = table_counts(path)

    async def found(q: str) -> list[str]:
        reply = await client.get("/customers", params={"q": q})
        assert reply.status_code == 200, reply.text
        return sorted(item["name"] for item in reply.json())

    assert await found("émile") == ["Émile Zola"]
    assert await found("ÉMILE ZOLA") == ["Émile Zola"]
    assert await found("ölMÜHLE") == ["Ölmühle Nord"]
    assert await found("ΕΛΛΗΝΙΚΆ") == ["Ελληνικά Δίκτυα"]
    assert await found("emile") == ["Emile Plain"]  # letters are lowered, not stripped of accents
    # The invoice list's text filter matches by the same rule.
    draft = await client.post("/invoices", json={**DRAFT, "customer": "Émile Zola"})
    assert draft.status_code == 201, draft.text
    listed = (await client.get("/invoices", params={"q": "émile"})).json()
    assert [item["customer"] for item in listed] == ["Émile Zola"]
    assert table_counts(path) == {**before, "invoices": before["invoices"] + 1}


async def test_the_customers_page_lists_searches_and_pages(studio) -> None:
    path = studio.settings.db_path
    insert_customers(path, [f"Shown {n:02d}" for n in range(55)])
    client = await studio.signed_in()
    page = (await client.get("/customers?q=shown", headers=PAGE)).text
    assert page.count('href="/customers/') == 50
    assert 'value="shown"' in page
    onwards = re.search(r'<a rel="next" href="([^"]+)">More customers</a>', page)[1]
    assert "q=shown" in onwards
    rest = (await client.get(onwards.replace("&amp;", "&"), headers=PAGE)).text
    assert rest.count('href="/customers/') == 5 and "First page" in rest
    assert "No customer" in (await client.get("/customers?q=zzz", headers=PAGE)).text
    nav = re.search(r'<nav class="links".*?</nav>', page, re.S)[0]
    assert '<a href="/customers">Customers</a>' in nav


# --- the picker ------------------------------------------------------------------------------


async def test_the_picker_lists_matches_and_fills_in_the_chosen_customer(studio) -> None:
    client = await studio.signed_in()
    made = (await client.post("/customers", json=ACME)).json()
    matches = await client.get("/customers/picker", params={"customer": "acme"}, headers=HTMX)
    assert matches.status_code == 200
    assert f"/customers/picker?chosen={made['id']}" in matches.text
    assert "Acme GmbH" in matches.text
    none = await client.get("/customers/picker", params={"customer": "zzz"}, headers=HTMX)
    assert "None of your customers matches" in none.text
    chosen = await client.get(f"/customers/picker?chosen={made['id']}", headers=HTMX)
    assert f'name="customer_id" id="customer-id" value="{made["id"]}"' in chosen.text
    assert 'value="Acme GmbH"' in chosen.text


async def test_a_customer_made_in_the_picker_is_made_once_and_chosen(studio) -> None:
    client = await studio.signed_in()
    body = {"new_customer_request_id": "picker-1", "new_customer_name": "Inline Ltd",
            "new_customer_email": "hi@inline.example"}
    first = await client.post("/customers/picker", data=body, headers=HTMX)
    again = await client.post("/customers/picker", data=body, headers=HTMX)
    assert first.status_code == again.status_code == 200
    [row] = rows(studio.settings.db_path, "SELECT id, email FROM customers"
                                          " WHERE name = 'Inline Ltd'")
    assert row["email"] == "hi@inline.example"
    for reply in (first, again):
        assert f'name="customer_id" id="customer-id" value="{row["id"]}"' in reply.text
    # A fresh id for the next customer made in place.
    minted = re.findall(r'name="new_customer_request_id" value="([0-9a-f]{32})"', first.text)
    assert len(minted) == 1
    refused = await client.post("/customers/picker", data={**body, "new_customer_email": "x"},
                                headers=HTMX)
    assert refused.status_code == 422 and refused.headers["hx-retarget"] == "#messages"


async def test_the_customer_pages_speak_the_persons_words(studio) -> None:
    from tests.test_words_pages import assert_plain

    client = await studio.signed_in()
    made = (await client.post("/customers", json=ACME)).json()
    await client.post("/customers/picker", data={"new_customer_name": "Words Co"},
                      headers=HTMX)
    stale = await client.post(f"/customers/{made['id']}/edit", headers=HTMX,
                              data={"revision": "9", "name": "Stale"})
    in_use_draft = (await client.post("/invoices", json={**DRAFT, "customer": "Acme"})).json()
    name_a_customer(studio.settings.db_path, in_use_draft["id"], made["id"])
    in_use = await client.post(f"/customers/{made['id']}/delete", headers=PAGE)
    pages = {
        "customers": (await client.get("/customers", headers=PAGE)).text,
        "customer": (await client.get(f"/customers/{made['id']}", headers=PAGE)).text,
        "matches": (await client.get("/customers/picker?q=acme", headers=HTMX)).text,
        "chosen": (await client.get(f"/customers/picker?chosen={made['id']}",
                                    headers=HTMX)).text,
        "new draft": (await client.get("/invoices/new", headers=PAGE)).text,
        "stale edit": stale.text, "in use": in_use.text,
        "settings": (await client.get("/settings", headers=PAGE)).text,
    }
    assert stale.status_code == in_use.status_code == 409
    for name, html in pages.items():
        assert_plain(name, html)
    assert made["id"] in pages["customer"].split("Technical details")[1]


async def test_the_chosen_customer_brings_their_currency_and_payment_terms_to_the_draft(
        studio) -> None:
    client = await studio.signed_in()
    made = (await client.post("/customers", json={**ACME, "currency": "chf",
                                                  "payment_terms_days": 45})).json()
    chosen = (await client.get(f"/customers/picker?chosen={made['id']}", headers=HTMX)).text
    assert re.search(r'<div id="customer-picker" class="stack" data-picked-name="Acme GmbH"'
                     r' data-picked-currency="CHF" data-picked-terms-days="45">', chosen)
    bare = (await client.post("/customers", json={"name": "Bare & Co"})).json()
    chosen = (await client.get(f"/customers/picker?chosen={bare['id']}", headers=HTMX)).text
    assert 'data-picked-name="Bare &amp; Co" data-picked-currency=""' in chosen
    assert 'data-picked-terms-days="14"' in chosen
    # The draft form itself names no customer just chosen, so nothing is filled on load.
    new_draft = (await client.get("/invoices/new", headers=PAGE)).text
    assert "data-picked" not in new_draft and "fills in their currency" in new_draft

"""Searching customers and the invoice list finds letters of every script in any case, on both
backends alike, and on PostgreSQL whatever locale the database was made with: under the C
locale PostgreSQL's own lower() lowers ASCII letters alone.

The rule is lowering (Python's str.lower, ICU's lower), not Unicode case folding: É finds é,
Σ finds σ, ẞ finds ß, but ß and ss stay two spellings, so `STRASSE` does not find `Straße`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from studio.config import Settings
from studio.ops.demo import seed_demo
from studio.store import postgres
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, Running, days_ahead, running, scalar, table_counts

pytestmark = pytest.mark.anyio
NAMES = ["ÉMILE Durand", "émile Zola", "ΣΟΦΊΑ Papadaki", "σοφία Nikolaou", "Straße Bau GmbH",
         "STRASSE 1 AG", "Plain Emile"]
EMILES, SOPHIAS = ["ÉMILE Durand", "émile Zola"], ["ΣΟΦΊΑ Papadaki", "σοφία Nikolaou"]
DRAFT = {"currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "19"}]}
# What each search finds, of NAMES: the same on both backends, whatever the locale.
FOUND = {
    "ÉMILE": EMILES,
    "émile": EMILES,
    "Émile ZOLA": ["émile Zola"],
    "emile": ["Plain Emile"],  # letters are lowered, not stripped of their accents
    "σοφία": SOPHIAS,
    "ΣΟΦΊΑ": SOPHIAS,
    "straße": ["Straße Bau GmbH"],
    "STRAẞE": ["Straße Bau GmbH"],  # the capital sharp s lowers to ß
    "STRASSE": ["STRASSE 1 AG"],  # lowered, not folded: ß is not ss
    "strasse": ["STRASSE 1 AG"],
}


def add_customers(db: Any, owner_id: str) -> None:
    db.executemany(
        "INSERT INTO customers (id, owner_id, name, email, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, 0, 0)",
        [(str(uuid.uuid4()), owner_id, name, f"c{number}@mail.example")
         for number, name in enumerate(NAMES)])


async def searched(client: Any) -> dict[str, tuple[list[str], list[str]]]:
    """Each search of FOUND, as the customer list and the invoice list answer it, a draft
    naming each customer."""
    for name in NAMES:
        reply = await client.post("/invoices", json={**DRAFT, "customer": name})
        assert reply.status_code == 201, reply.text
    found = {}
    for text in FOUND:
        customers = await client.get("/customers", params={"q": text})
        invoices = await client.get("/invoices", params={"q": text})
        assert customers.status_code == invoices.status_code == 200, (customers, invoices)
        found[text] = (sorted(item["name"] for item in customers.json()),
                       sorted(item["customer"] for item in invoices.json()))
    return found


async def test_search_lowers_every_script_alike_on_both_backends(studio) -> None:
    path = studio.settings.db_path
    owner_id = scalar(path, "SELECT id FROM actors WHERE email = ?", ADA)
    db = backends.connect(path)
    try:
        in_transaction(db, add_customers, owner_id)
    finally:
        db.close()
    client = await studio.signed_in()
    before = table_counts(path)
    assert await searched(client) == {text: (names, names) for text, names in FOUND.items()}
    # Searching wrote nothing: only the drafts searched for are new.
    assert table_counts(path) == {**before, "invoices": before["invoices"] + len(NAMES)}


# --- PostgreSQL under the C locale -----------------------------------------------------------


@pytest.fixture
def c_locale_url() -> Iterator[str]:
    """A studio database made with LC_COLLATE and LC_CTYPE C (from template0, as a locale
    other than the cluster's needs), seeded with the demo."""
    name = f"studio_c_{uuid.uuid4().hex[:12]}"
    with backends._admin() as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'"
                      " LC_COLLATE 'C' LC_CTYPE 'C'")
    url = backends.url_of(name)
    try:
        postgres.prepare(url)
        db = postgres.connect(url)
        try:
            in_transaction(db, seed_demo)
            owner_id = db.execute("SELECT id FROM actors WHERE email = ?", (ADA,)).fetchone()[0]
            in_transaction(db, add_customers, owner_id)
        finally:
            db.close()
        yield url
    finally:
        with backends._admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def c_locale_studio(c_locale_url: str, tmp_path: Path) -> AsyncIterator[Running]:
    settings = Settings(db_path=tmp_path / "studio.db", database_url=c_locale_url,
                        secret_key="test-secret", demo=True)
    async with running(settings) as started:
        yield started


def in_c_locale(url: str, sql: str) -> Any:
    db = postgres.connect(url)
    try:
        return db.execute(sql).fetchone()[0]
    finally:
        db.close()


@backends.postgres_only
async def test_search_lowers_every_script_in_a_database_made_with_the_c_locale(
        c_locale_url, c_locale_studio) -> None:
    # The database is one whose own lower() leaves É, Σ and ẞ as they are.
    assert in_c_locale(c_locale_url, "SHOW lc_ctype") == "C"
    assert in_c_locale(c_locale_url, "SELECT lower('ÉMILE ΣΟΦΊΑ STRAẞE')") == "Émile ΣΟΦΊΑ straẞe"
    found = await searched(await c_locale_studio.signed_in())
    assert found == {text: (names, names) for text, names in FOUND.items()}


@backends.postgres_only
async def test_without_icu_search_still_answers_with_the_databases_own_lowering(
        c_locale_url, c_locale_studio, monkeypatch) -> None:
    """A server built without ICU: searches answer, lowering as the database's locale does
    (under C, ASCII letters alone), and never fail."""
    monkeypatch.setattr(postgres, "EVERY_SCRIPT", "no-such-collation")
    monkeypatch.setattr(postgres, "_collated", type(postgres._collated)())
    found = await searched(await c_locale_studio.signed_in())
    # The search's own letters are lowered by the studio; the stored ones only in ASCII.
    assert found["ÉMILE"] == (["émile Zola"], ["émile Zola"])
    assert found["ΣΟΦΊΑ"] == (["σοφία Nikolaou"], ["σοφία Nikolaou"])
    assert found["emile"] == (["Plain Emile"], ["Plain Emile"])
    assert found["STRASSE"] == (["STRASSE 1 AG"], ["STRASSE 1 AG"])

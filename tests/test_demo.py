"""`studio serve --demo`: accounts with full seller profiles, customers, and invoices that are
paid, partly paid, unpaid and overdue, plus a credit note, made once through the studio's
own units; and `seed_demo`, the ground the suite builds on, left as it was."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from schwifty import BIC, IBAN
from stdnum.eu import vat

from studio.billing import documents
from studio.ops.audit import problems
from studio.ops.demo import INVOICES, seed_demo, seed_full_demo
from studio.store.sqlite import prepare
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, BEN, rows, scalar, start_server, table_counts

EU = {"AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE",
      "IT", "LT", "LU", "LV", "MT", "NL", "PL", "PT", "RO", "SE", "SI", "SK"}


def fresh(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    if backends.ON_POSTGRES:
        backends.use_migrated(path)
    else:
        prepare(path)
    return path


def seeded(path: Path, seed: Any) -> None:
    db = backends.connect(path)
    try:
        in_transaction(db, seed)
    finally:
        db.close()


def statuses(path: Path, email: str) -> list[tuple[str, str, bool]]:
    """(customer, payment status, overdue) of each issued invoice, in number order."""
    today = dt.datetime.now(dt.UTC).date().isoformat()
    return [(row["customer"], row["payment_status"],
             row["payment_status"] != "paid" and row["due_date"] < today)
            for row in rows(path, "SELECT invoices.customer, balances.payment_status,"
                                  " balances.due_date FROM invoices JOIN balances"
                                  " ON balances.invoice_id = invoices.id JOIN actors"
                                  " ON actors.id = invoices.owner_id WHERE actors.email = ?"
                                  " ORDER BY invoices.number", email)]


def test_the_served_demo_has_customers_paid_partly_paid_unpaid_overdue_and_a_credit_note(
        tmp_path: Path) -> None:
    path = fresh(tmp_path)
    seeded(path, seed_full_demo)
    ada = statuses(path, ADA)
    # Issued at most four weeks ago, each due at least 30 days after: none overdue but one,
    # which is due a week ago; on 1 January, with nothing of this year's before today, it is
    # due that day.
    new_years_day = dt.datetime.now(dt.UTC).strftime("%m-%d") == "01-01"
    assert ("Blue Harbor Cafe", "paid", False) in ada
    assert ("Northwind Traders", "partially_paid", False) in ada
    assert ("Kestrel Logistics", "unpaid", False) in ada
    assert ("Hollow Oak Bakery", "unpaid", not new_years_day) in ada
    assert [customer for customer, _, overdue in ada if overdue] == (
        [] if new_years_day else ["Hollow Oak Bakery"])
    assert {status for _, status, _ in statuses(path, BEN)} == {
        "paid", "partially_paid", "unpaid"}
    assert [customer for customer, _, overdue in statuses(path, BEN) if overdue] == (
        [] if new_years_day else ["Quayside Florist"])
    # The credit note lowers what is due on the invoice it corrects.
    assert rows(path, "SELECT invoices.number, balances.amount_credited, balances.amount_due"
                      " FROM invoices JOIN balances ON balances.invoice_id = invoices.id"
                      " WHERE invoices.customer = 'Orchard and Vine Wines'")[0][1:] == (
        "180.00", "540.00")
    assert scalar(path, "SELECT COUNT(*) FROM invoices WHERE kind = 'credit_note'"
                        " AND status = 'issued'") == 1
    # Every issued invoice (the credit note too) names its customer and froze its details.
    for row in rows(path, "SELECT customer_id, buyer, customer FROM invoices"
                          " WHERE status = 'issued'"):
        assert row["customer_id"] is not None and row["customer"] in row["buyer"]
    # Each invoice was issued before its payments arrived, in this year's series, in order.
    year = dt.datetime.now(dt.UTC).year
    numbers = [row[0] for row in rows(path, "SELECT number FROM invoices WHERE status ="
                                            " 'issued' AND kind = 'invoice' AND owner_id ="
                                            " (SELECT id FROM actors WHERE email = ?)"
                                            " ORDER BY issued_at", ADA)]
    assert numbers == [f"INV-{year}-{n:04d}" for n in range(1, 7)]
    db = backends.connect(path)
    try:
        assert problems(db) == []
    finally:
        db.close()


@pytest.mark.parametrize("moment", ["2027-01-01T00:00:05", "2027-01-01T23:59:00",
                                    "2027-01-02T00:30:00", "2027-01-29T12:00:00",
                                    "2027-12-31T23:30:00", "2028-02-29T12:00:00"])
def test_the_demos_are_made_on_any_day_in_that_years_series_each_due_on_or_after_its_issue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    """Due dates count days from the day each invoice is made; the full demo's history starts
    on 1 January at the earliest, so its invoices keep one series, and its overdue invoice is
    overdue on every day but 1 January, when it is due that day."""
    now = dt.datetime.fromisoformat(moment).replace(tzinfo=dt.UTC)
    monkeypatch.setattr("studio.ops.demo.time", SimpleNamespace(time=now.timestamp))
    (tmp_path / "suite").mkdir()
    suites, served = fresh(tmp_path / "suite"), fresh(tmp_path)
    seeded(suites, seed_demo)
    seeded(served, seed_full_demo)
    for path in (suites, served):
        issued = rows(path, "SELECT number, customer, issue_date, due_date FROM invoices"
                            " WHERE status = 'issued' AND kind = 'invoice' ORDER BY number")
        assert {row["number"][:9] for row in issued} == {f"INV-{now.year}-"}
        assert all(row["issue_date"] <= row["due_date"] for row in issued)
        db = backends.connect(path)
        try:
            assert problems(db) == []
        finally:
            db.close()
    days = {customer: days for made in INVOICES.values() for customer, _, days, _, _ in made}
    for row in rows(suites, "SELECT customer, due_date FROM invoices"):
        assert row["due_date"] == (now.date() + dt.timedelta(days[row["customer"]])).isoformat()
    overdue = [row["customer"] for row in rows(served, "SELECT customer FROM invoices JOIN"
                                                       " balances ON invoice_id = invoices.id"
                                                       " WHERE payment_status != 'paid'"
                                                       " AND balances.due_date < ?"
                                                       " ORDER BY customer",
                                               now.date().isoformat())]
    assert overdue == ([] if moment.startswith("2027-01-01") else
                       ["Hollow Oak Bakery", "Quayside Florist"])


def test_the_demos_customers_and_sellers_pass_the_studios_own_checks(tmp_path: Path) -> None:
    path = fresh(tmp_path)
    seeded(path, seed_full_demo)
    found = rows(path, "SELECT name, country, vat_id, address, email FROM customers")
    assert len(found) == 13
    for row in found:
        assert row["address"] and row["email"] and row["country"]
        if row["country"] in EU:
            assert vat.is_valid(row["vat_id"]), row["name"]
    assert sum(1 for row in found if row["vat_id"]) >= 6
    for row in rows(path, "SELECT name, address, vat_id, iban, bic FROM profiles"):
        assert row["address"] and row["vat_id"]
        assert IBAN(row["iban"]).compact == row["iban"] and BIC(row["bic"]).compact == row["bic"]
    ada = rows(path, "SELECT iban, bic, vat_id FROM profiles JOIN actors ON actors.id ="
                     " profiles.actor_id WHERE actors.email = ?", ADA)[0]
    assert tuple(ada) == ("DE89370400440532013000", "COBADEFF", "DE136695976")


def test_the_demo_charges_no_vat_to_businesses_in_other_member_states(tmp_path: Path) -> None:
    """Ada sells from Germany: her Swedish and Belgian customers, businesses with VAT IDs,
    pay their own VAT (reverse charge), so their invoices are at 0 % and say why."""
    path = fresh(tmp_path)
    seeded(path, seed_full_demo)
    found = {row["customer"]: row for row in rows(
        path, "SELECT invoices.customer, invoices.tax, invoices.line_items, invoices.seller,"
              " invoices.buyer FROM invoices JOIN actors ON actors.id = invoices.owner_id"
              " WHERE actors.email = ? AND invoices.kind = 'invoice'"
              " AND invoices.status = 'issued'", ADA)}
    for customer in ("Lindqvist Architects", "Hollow Oak Bakery"):
        invoice = found[customer]
        assert Decimal(invoice["tax"]) == 0, customer
        assert {line["tax_rate"] for line in json.loads(invoice["line_items"])} == {"0"}
        parties = {"seller": json.loads(invoice["seller"]), "buyer": json.loads(invoice["buyer"])}
        assert documents.zero_rate_category(parties) is documents.REVERSE_CHARGE


def test_the_demo_is_made_once(tmp_path: Path) -> None:
    path = fresh(tmp_path)
    seeded(path, seed_full_demo)
    before = table_counts(path)
    seeded(path, seed_full_demo)
    seeded(path, seed_demo)
    assert table_counts(path) == before


def test_the_suites_ground_keeps_its_invoices_unpaid_and_nameless(tmp_path: Path) -> None:
    path = fresh(tmp_path)
    seeded(path, seed_demo)
    assert scalar(path, "SELECT COUNT(*) FROM customers") == 0
    assert scalar(path, "SELECT COUNT(*) FROM payments") == 0
    assert scalar(path, "SELECT COUNT(*) FROM invoices WHERE status = 'issued'") == sum(
        1 for made in INVOICES.values() for invoice in made if invoice[-1])
    assert {row[0] for row in rows(path, "SELECT payment_status FROM balances")} == {"unpaid"}


@pytest.mark.timeout(120)
def test_studio_serve_demo_signs_in_and_exports_the_demo(tmp_path: Path) -> None:
    import httpx

    path = tmp_path / "served.db"
    server = start_server(path, "--demo")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            signed = client.post("/login", json={"email": ADA, "password": "studio-demo"})
            signed.raise_for_status()
            # The answers do not name the server's software.
            assert "server" not in signed.headers and signed.headers["date"]
            reply = client.get("/exports/invoices.csv")
            assert reply.status_code == 200
            text = reply.content.decode("utf-8")
            assert "Hollow Oak Bakery" in text and ",-180.00," in text
            payments = client.get("/exports/payments.csv").content.decode("utf-8")
            assert "NW-PO-7781" in payments and "1000.00" in payments
    finally:
        server.stop()
        backends.drop(path)

"""Demo data: Ada and Ben, each with a seller profile, invoices issued through the studio
(one series, `INV-<year>-0001` onwards) and a draft; created once if absent.

`seed_demo` makes the accounts and invoices the test suite builds on. `studio serve --demo`
seeds more on the same ground (`seed_full_demo`): full seller profiles with bank details,
customers with addresses and VAT IDs named by the invoices, invoices issued over the last
weeks, paid, partly paid, unpaid and overdue, and a credit note. All of it goes through the
studio's own units, in one transaction.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import sqlite3
import time

from studio import assets
from studio.accounts.auth import add_actor
from studio.billing import attachments, customers, invoices, payments, profiles, taxes
from studio.config import Settings
from studio.store.db import Database
from studio.store.dialect import hold
from studio.store.stores import store_for
from studio.store.uploads import HEAD_BYTES, Upload

DEMO_PASSWORD = "studio-demo"

SELLERS = {
    "ada@example.com": {"name": "Ada Lovelace Design", "address": "12 Analytical Row\nLondon",
                        "vat_id": "GB123456789"},
    "ben@example.com": {"name": "Ben's Repairs", "address": "4 Quay Street\nBristol",
                        "vat_id": ""},
}

# (customer, currency, days to pay, lines as (description, quantity, unit price, tax rate),
# issue it?), issued in this order: each actor's first invoice is INV-<year>-0001. Each is
# due that many days after the day it is made, whatever day that is: the full demo's were
# issued some four weeks ago, so a few fall due within days and none is overdue but OVERDUE.
INVOICES = {
    "ada@example.com": [
        ("Northwind Traders", "EUR", 30,
         [("Website redesign", "1", "2400.00", "0"), ("Hosting, 12 months", "12", "25.00", "0")],
         True),
        ("Blue Harbor Cafe", "EUR", 35,
         [("Menu photography", "1", "650.00", "0"), ("Print-ready files", "3", "40.00", "0")],
         True),
        ("Kestrel Logistics", "USD", 50,
         [("Route planning workshop", "2", "900.00", "0"), ("Travel", "1", "310.50", "0")],
         True),
        ("Orchard and Vine Wines", "EUR", 60, [("Label design", "4", "180.00", "0")],
         True),
        ("Lindqvist Architects", "EUR", 75,
         [("Brand workshop", "1", "1800.00", "19"), ("Logo files", "3", "120.00", "19")], True),
        ("Pemberton Tea Rooms", "EUR", 90,
         [("Signage concepts", "2", "350.00", "19"), ("Site visit", "1", "90.00", "7")], False),
    ],
    "ben@example.com": [
        ("Marlow Books", "GBP", 33, [("Copy editing, 80 pages", "80", "6.50", "0")],
         True),
        ("Tidewater Yoga", "GBP", 42,
         [("Booking system setup", "1", "1200.00", "0"), ("Training session", "2", "150.00", "0")],
         True),
        ("Fernhill School", "GBP", 55,
         [("Laptop repairs", "6", "85.00", "0"), ("Parts", "1", "214.99", "0")], True),
        ("Harbour Dental", "GBP", 65,
         [("Network cabling", "8", "45.00", "20"), ("Router", "1", "189.99", "20")], True),
        ("St Anne's Library", "GBP", 80,
         [("Printer servicing", "3", "60.00", "20")], False),
    ],
}


# What `studio serve --demo` adds: each seller in full, with bank details.
FULL_SELLERS = {
    "ada@example.com": {
        "name": "Ada Lovelace Design", "address": "Analytical Row 12\n10115 Berlin",
        "country": "DE", "vat_id": "DE136695976", "tax_number": "12/345/67890",
        "email": "ada@example.com", "iban": "DE89370400440532013000", "bic": "COBADEFF",
        "payment_terms": "Please pay by bank transfer, quoting the invoice number.",
        "footer": "Ada Lovelace Design · Analytical Row 12 · 10115 Berlin"},
    "ben@example.com": {
        "name": "Ben's Repairs", "address": "4 Quay Street\nBristol BS1 4DJ", "country": "GB",
        "vat_id": "GB980780684", "email": "ben@example.com", "iban": "GB33BUKB20201555555555",
        "bic": "BUKBGB22", "payment_terms": "Bank transfer or card, please.", "footer": ""},
}

# Each invoice's customer, by the name the invoice gives: (email, address, country, VAT ID,
# currency, payment terms in days).
CUSTOMERS = {
    "ada@example.com": {
        "Northwind Traders": ("accounts@northwind.example", "Keizersgracht 100\n1015 CW"
                              " Amsterdam", "NL", "NL004495445B01", "EUR", 14),
        "Blue Harbor Cafe": ("hello@blueharbor.example", "5 Quay Road\nDublin 2", "IE",
                             "IE6388047V", "EUR", 14),
        "Kestrel Logistics": ("ap@kestrel.example", "200 Harbor Blvd\nOakland, CA 94607", "US",
                              "", "USD", 30),
        "Orchard and Vine Wines": ("cave@orchardvine.example", "12 quai des Chartrons\n33000"
                                   " Bordeaux", "FR", "FR40303265045", "EUR", 14),
        "Lindqvist Architects": ("info@lindqvist.example", "Götgatan 9\n116 46 Stockholm",
                                 "SE", "SE556188840401", "EUR", 30),
        "Pemberton Tea Rooms": ("tea@pemberton.example", "3 Market Place\nBath BA1 1AA", "GB",
                                "", "EUR", 14),
        "Hollow Oak Bakery": ("orders@hollowoak.example", "Rue Haute 42\n1000 Bruxelles", "BE",
                              "BE0403170701", "EUR", 7),
    },
    "ben@example.com": {
        "Marlow Books": ("shop@marlowbooks.example", "8 High Street\nMarlow SL7 1AX", "GB", "",
                         "GBP", 14),
        "Tidewater Yoga": ("studio@tidewater.example", "21 Harbourside\nBristol BS1 5DB", "GB",
                           "", "GBP", 14),
        "Fernhill School": ("bursar@fernhill.example", "Fernhill Lane\nBristol BS9 1AA", "GB",
                            "", "GBP", 30),
        "Harbour Dental": ("practice@harbourdental.example", "2 Anchor Road\nBristol BS1 5TT",
                           "GB", "", "GBP", 14),
        "St Anne's Library": ("library@stannes.example", "St Anne's Park\nBristol BS4 4AB",
                              "GB", "", "GBP", 14),
        "Quayside Florist": ("flowers@quayside.example", "Grand Canal Dock 4\nDublin 2", "IE",
                             "IE6388047V", "GBP", 7),
    },
}

# Issued a day after the rest, due a week ago (or the day it was issued, if later): overdue;
# but on 1 January, when nothing of this year's series can be due before today, due today.
OVERDUE = {
    "ada@example.com": ("Hollow Oak Bakery", "EUR",
                        [("Packaging design", "1", "980.00", "19"),
                         ("Printed bread bags, 500", "1", "210.00", "7")]),
    "ben@example.com": ("Quayside Florist", "GBP", [("Till repair", "1", "145.00", "20")]),
}
# (customer, amount, days after the first issue, method, reference)
PAYMENTS = {
    "ada@example.com": [("Blue Harbor Cafe", "770.00", 3, "card", "Card ending 4242"),
                        ("Northwind Traders", "1000.00", 5, "bank_transfer", "NW-PO-7781")],
    "ben@example.com": [("Marlow Books", "520.00", 2, "bank_transfer", "MB 2291"),
                        ("Tidewater Yoga", "500.00", 6, "cash", "")],
}
# A credit note for part of an invoice: (customer, its lines).
CREDIT_NOTES = {
    "ada@example.com": ("Orchard and Vine Wines", [("Label design", "1", "180.00", "0")]),
}
# How far back the full demo's first invoices were issued.
HISTORY = dt.timedelta(days=28)


def _day_of(moment: float) -> dt.date:
    """The day (UTC) a moment falls on, as issuing dates an invoice."""
    return dt.datetime.fromtimestamp(moment, dt.UTC).date()


def _lines(lines: list[tuple[str, str, str, str]], rate: str | None = None
           ) -> list[dict[str, str]]:
    """The lines, each at `rate` when one is given (the rate the customer is billed at)."""
    return [{"description": d, "quantity": q, "unit_price": p, "tax_rate": rate or r}
            for d, q, p, r in lines]


def _billed_at(db: sqlite3.Connection, actor_id: str, customer_id: str | None) -> str | None:
    """0 for a business in another member state, which pays its own VAT (reverse charge), so
    the full demo's German seller charges it none; else each line's own rate."""
    if customer_id is None:
        return None
    rate = invoices.default_rate(db, actor_id, customer_id)
    return rate if rate == taxes.NO_RATE else None


def seed_demo(db: sqlite3.Connection) -> None:
    """Create the demo actors and their invoices unless they already exist."""
    now = time.time()
    for email in INVOICES:
        if db.execute("SELECT 1 FROM actors WHERE email = ?", (email,)).fetchone():
            continue
        actor_id = add_actor(db, email, DEMO_PASSWORD)
        profiles.save(db, actor_id, SELLERS[email], now)
        _issued_for(db, actor_id, email, {}, now)


def seed_full_demo(db: sqlite3.Connection) -> list[str]:
    """What `studio serve --demo` seeds: each account as `seed_demo` makes it, issued a few
    weeks ago (within this year, so this year's series), with its customers, payments, an
    overdue invoice and a credit note; unless the account exists already. Returns the
    emails of the accounts it made."""
    hold(db, "demo")
    now = time.time()
    today = _day_of(now)
    new_year = dt.datetime(today.year, 1, 1, tzinfo=dt.UTC).timestamp()
    start = max(now - HISTORY.total_seconds(), new_year)
    first_day = _day_of(start)
    made = []
    for email in INVOICES:
        if db.execute("SELECT 1 FROM actors WHERE email = ?", (email,)).fetchone():
            continue
        made.append(email)
        # The account first, so its customers have an owner; its invoices then name them.
        actor_id = add_actor(db, email, DEMO_PASSWORD)
        named = {name: customers.create(db, actor_id, customers.parse_customer({
            "name": name, "email": mail, "address": address, "country": country,
            "vat_id": vat_id, "currency": currency, "payment_terms_days": days}),
            None, start)[0]["id"]
            for name, (mail, address, country, vat_id, currency, days)
            in CUSTOMERS[email].items()}
        profiles.save(db, actor_id, profiles.parse_profile(FULL_SELLERS[email]), start)
        issued = _issued_for(db, actor_id, email, named, start)

        customer, currency, lines = OVERDUE[email]
        issued_at = start + 86_400
        if _day_of(issued_at) >= today:  # since 1 January only: right after the rest
            issued_at = start + len(INVOICES[email])
        due = max(_day_of(issued_at), today - dt.timedelta(days=7))
        draft, _ = invoices.create_draft(db, actor_id, invoices.parse_draft({
            "customer": customer, "customer_id": named[customer], "currency": currency,
            "due_date": due.isoformat(),
            "line_items": _lines(lines, _billed_at(db, actor_id, named[customer]))}),
            None, issued_at)
        invoices.issue(db, actor_id, draft["id"], f"demo-{draft['id']}", 1, issued_at,
                       tax_confirmed=False)

        if email in CREDIT_NOTES:
            credited, lines = CREDIT_NOTES[email]
            note, _ = invoices.make_credit_note(db, actor_id, issued[credited], None,
                                                issued_at + 1)
            invoices.edit_draft(db, actor_id, note["id"], 1, {"line_items": _lines(lines)},
                                issued_at + 1)
            invoices.issue(db, actor_id, note["id"], f"demo-{note['id']}", 2, issued_at + 1)

        for customer, amount, days, method, reference in PAYMENTS[email]:
            paid_on = min(first_day + dt.timedelta(days=days), today)
            payments.record_payment(db, actor_id, issued[customer], f"demo-{customer}",
                                    payments.parse_payment({
                                        "amount": amount, "date": paid_on.isoformat(),
                                        "method": method, "reference": reference}), now)
    return made


def _issued_for(db: sqlite3.Connection, actor_id: str, email: str, named: dict[str, str],
                start: float) -> dict[str, str]:
    """The account's invoices, issued at `start` in order, each naming its customer when
    `named` has one by that name; the issued ones by customer."""
    issued: dict[str, str] = {}
    for n, (customer, currency, days, lines, issue) in enumerate(INVOICES[email]):
        due = _day_of(start + n) + dt.timedelta(days=days)
        rate = _billed_at(db, actor_id, named.get(customer))
        draft, _ = invoices.create_draft(db, actor_id, invoices.parse_draft({
            "customer": customer, "customer_id": named.get(customer), "currency": currency,
            "due_date": due.isoformat(), "line_items": _lines(lines, rate)}), None, start + n)
        if issue:  # the demo's tax follows the rules issuing asks a person to confirm
            invoices.issue(db, actor_id, draft["id"], f"demo-{draft['id']}", 1, start + n,
                           tax_confirmed=False)
            issued[customer] = draft["id"]
    return issued


# Each account's draft holds a photographed till receipt, ready to be read into its lines.
RECEIPTS = {"ada@example.com": "demo-receipt-eur.jpg", "ben@example.com": "demo-receipt-gbp.jpg"}


def _drafts_to_attach(db: sqlite3.Connection, emails: list[str]
                      ) -> list[tuple[str, str, str]]:
    """(actor id, draft id, receipt file) of those accounts with nothing attached yet."""
    found = []
    for email, name in RECEIPTS.items():
        if email not in emails:
            continue
        row = db.execute(
            "SELECT invoices.owner_id, invoices.id FROM invoices JOIN actors"
            " ON actors.id = invoices.owner_id WHERE actors.email = ? AND invoices.status ="
            " 'draft' AND invoices.kind = 'invoice' AND NOT EXISTS (SELECT 1 FROM attachments"
            " WHERE attachments.owner_id = invoices.owner_id) ORDER BY invoices.created_at"
            " LIMIT 1", (email,)).fetchone()
        if row is not None:
            found.append((row[0], row[1], name))
    return found


async def attach_receipts(db: Database, settings: Settings, emails: list[str]) -> None:
    """Attach each of these demo accounts' receipt to its draft, as an upload would."""
    store = store_for(settings).ensure()
    quota = attachments.Quota(settings.max_storage_per_actor,
                              settings.max_attachments_per_invoice)
    for actor_id, draft_id, name in await db.read(_drafts_to_attach, emails):
        data = (assets.folder("static") / name).read_bytes()
        part = store.begin(db, actor_id)
        upload = Upload(filename="receipt.jpg", size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(), head=data[:HEAD_BYTES],
                        part=part)
        try:  # the temporary file is removed however this ends (a full disk, a stop)
            part.write(data)
            await part.finish()
            await asyncio.to_thread(store.place, upload, actor_id)
            await db.write(attachments.bind, actor_id, draft_id, f"demo-receipt-{draft_id}",
                           upload, attachments.sniff(upload.head), store, quota)
        finally:
            await upload.discard()


async def ensure_demo(db: Database, settings: Settings | None = None) -> None:
    """The demo's accounts, made once; the receipts on the drafts of those made now."""
    made = await db.write(seed_full_demo)
    if settings is not None and made:
        await attach_receipts(db, settings, made)

"""Demo data: Ada and Ben, each with a seller profile, invoices issued through the studio
(one series, `INV-<year>-0001` onwards) and a draft; created once if absent."""

from __future__ import annotations

import sqlite3
import time

from studio import invoices, profiles
from studio.auth import add_actor
from studio.db import Database

DEMO_PASSWORD = "studio-demo"

SELLERS = {
    "ada@example.com": {"name": "Ada Lovelace Design", "address": "12 Analytical Row\nLondon",
                        "vat_id": "GB123456789"},
    "ben@example.com": {"name": "Ben's Repairs", "address": "4 Quay Street\nBristol",
                        "vat_id": ""},
}

# (customer, currency, due date, lines as (description, quantity, unit price, tax rate),
# issue it?), issued in this order: each actor's first invoice is INV-<year>-0001.
INVOICES = {
    "ada@example.com": [
        ("Northwind Traders", "EUR", "2026-12-15",
         [("Website redesign", "1", "2400.00", "0"), ("Hosting, 12 months", "12", "25.00", "0")],
         True),
        ("Blue Harbor Cafe", "EUR", "2026-12-20",
         [("Menu photography", "1", "650.00", "0"), ("Print-ready files", "3", "40.00", "0")],
         True),
        ("Kestrel Logistics", "USD", "2027-01-05",
         [("Route planning workshop", "2", "900.00", "0"), ("Travel", "1", "310.50", "0")],
         True),
        ("Orchard and Vine Wines", "EUR", "2027-01-12", [("Label design", "4", "180.00", "0")],
         True),
        ("Lindqvist Architects", "EUR", "2027-01-31",
         [("Brand workshop", "1", "1800.00", "19"), ("Logo files", "3", "120.00", "19")], True),
        ("Pemberton Tea Rooms", "EUR", "2027-02-14",
         [("Signage concepts", "2", "350.00", "19"), ("Site visit", "1", "90.00", "7")], False),
    ],
    "ben@example.com": [
        ("Marlow Books", "GBP", "2026-12-18", [("Copy editing, 80 pages", "80", "6.50", "0")],
         True),
        ("Tidewater Yoga", "GBP", "2026-12-28",
         [("Booking system setup", "1", "1200.00", "0"), ("Training session", "2", "150.00", "0")],
         True),
        ("Fernhill School", "GBP", "2027-01-09",
         [("Laptop repairs", "6", "85.00", "0"), ("Parts", "1", "214.99", "0")], True),
        ("Harbour Dental", "GBP", "2027-01-20",
         [("Network cabling", "8", "45.00", "20"), ("Router", "1", "189.99", "20")], True),
        ("St Anne's Library", "GBP", "2027-02-02",
         [("Printer servicing", "3", "60.00", "20")], False),
    ],
}


def seed_demo(db: sqlite3.Connection) -> None:
    """Create the demo actors and their invoices unless they already exist."""
    now = time.time()
    for email, made in INVOICES.items():
        if db.execute("SELECT 1 FROM actors WHERE email = ?", (email,)).fetchone():
            continue
        actor_id = add_actor(db, email, DEMO_PASSWORD)
        profiles.save(db, actor_id, SELLERS[email], now)
        for n, (customer, currency, due, lines, issue) in enumerate(made):
            fields = invoices.parse_draft({
                "customer": customer, "currency": currency, "due_date": due,
                "line_items": [{"description": d, "quantity": q, "unit_price": p,
                                "tax_rate": r} for d, q, p, r in lines]})
            draft, _ = invoices.create_draft(db, actor_id, fields, None, now + n)
            if issue:
                invoices.issue(db, actor_id, draft["id"], f"demo-{draft['id']}", 1, now + n)


async def ensure_demo(db: Database) -> None:
    await db.write(seed_demo)

"""Demo data: Ada and Ben, each with a few invoices, created once if absent."""

from __future__ import annotations

import json
import sqlite3
import uuid
from decimal import Decimal

from studio.auth import add_actor
from studio.db import Database

DEMO_PASSWORD = "studio-demo"

DEMO_INVOICES = {
    "ada@example.com": [
        ("INV-1001", "Northwind Traders", "EUR", "2026-12-15", [
            ("Website redesign", 1, "2400.00"), ("Hosting, 12 months", 12, "25.00")]),
        ("INV-1002", "Blue Harbor Cafe", "EUR", "2026-12-20", [
            ("Menu photography", 1, "650.00"), ("Print-ready files", 3, "40.00")]),
        ("INV-1003", "Kestrel Logistics", "USD", "2027-01-05", [
            ("Route planning workshop", 2, "900.00"), ("Travel", 1, "310.50")]),
        ("INV-1004", "Orchard & Vine <Wines>", "EUR", "2027-01-12", [
            ("Label design", 4, "180.00")]),
    ],
    "ben@example.com": [
        ("INV-2001", "Marlow Books", "GBP", "2026-12-18", [
            ("Copy editing, 80 pages", 80, "6.50")]),
        ("INV-2002", "Tidewater Yoga", "GBP", "2026-12-28", [
            ("Booking system setup", 1, "1200.00"), ("Training session", 2, "150.00")]),
        ("INV-2003", "Fernhill School", "GBP", "2027-01-09", [
            ("Laptop repairs", 6, "85.00"), ("Parts", 1, "214.99")]),
    ],
}


def _total(items: list[tuple[str, int, str]]) -> str:
    return str(sum((quantity * Decimal(price) for _, quantity, price in items), Decimal("0.00")))


def seed_demo(db: sqlite3.Connection) -> None:
    """Create the demo actors and their invoices unless they already exist."""
    for email, invoices in DEMO_INVOICES.items():
        if db.execute("SELECT 1 FROM actors WHERE email = ?", (email,)).fetchone():
            continue
        actor_id = add_actor(db, email, DEMO_PASSWORD)
        db.executemany(
            "INSERT INTO invoices (id, owner_id, number, customer, currency, total, due_date,"
            " line_items) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (str(uuid.uuid4()), actor_id, number, customer, currency, _total(items), due,
                 json.dumps([{"description": d, "quantity": q, "unit_price": p}
                             for d, q, p in items]))
                for number, customer, currency, due, items in invoices
            ],
        )


async def ensure_demo(db: Database) -> None:
    await db.write(seed_demo)

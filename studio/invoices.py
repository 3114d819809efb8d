"""Reading the actor's own invoices."""

from __future__ import annotations

import sqlite3
from typing import Any

from studio.auth import Actor
from studio.db import Database
from studio.errors import Refusal
from studio.purposes import invoice_fields

LISTED = ("id", "number", "customer", "total", "currency", "due_date", "summary")


def _owned(db: sqlite3.Connection, actor_id: str) -> list[dict[str, Any]]:
    rows = db.execute(
        "SELECT id, number, customer, total, currency, due_date, summary FROM invoices"
        " WHERE owner_id = ? ORDER BY number",
        (actor_id,),
    )
    return [{key: row[key] for key in LISTED} for row in rows]


def _one(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT * FROM invoices WHERE id = ? AND owner_id = ?", (invoice_id, actor_id)
    ).fetchone()
    return invoice_fields(row) if row else None


def _some(db: sqlite3.Connection, actor_id: str, invoice_ids: list[str]) -> list[dict[str, Any]]:
    found = [_one(db, actor_id, invoice_id) for invoice_id in invoice_ids]
    if any(invoice is None for invoice in found):
        raise Refusal("invoice_not_found")
    return found  # type: ignore[return-value]


async def list_invoices(db: Database, actor: Actor) -> list[dict[str, Any]]:
    return await db.read(_owned, actor.id)


async def get_invoice(db: Database, actor: Actor, invoice_id: str) -> dict[str, Any]:
    """One invoice, if it is the actor's; anyone else's is as absent as a made-up id."""
    found = await db.read(_one, actor.id, invoice_id)
    if found is None:
        raise Refusal("invoice_not_found")
    return found


async def get_invoices(db: Database, actor: Actor, invoice_ids: list[str]) -> list[dict[str, Any]]:
    return await db.read(_some, actor.id, invoice_ids)

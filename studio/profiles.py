"""The account's profile: the seller that issuing freezes into each invoice."""

from __future__ import annotations

import sqlite3
from typing import Any

from studio.auth import Actor
from studio.db import Database, clock
from studio.errors import Refusal

LIMITS = {"name": 200, "address": 1000, "vat_id": 50}
EMPTY = {"name": "", "address": "", "vat_id": ""}


def parse_profile(body: dict[str, Any]) -> dict[str, str]:
    profile = {}
    for field, limit in LIMITS.items():
        value = body.get(field, "")
        if not isinstance(value, str) or len(value.strip()) > limit:
            raise Refusal("invalid_body", f"The {field.replace('_', ' ')} must be text of at "
                                          f"most {limit} characters.")
        profile[field] = value.strip()
    return profile


def _read(db: sqlite3.Connection, actor_id: str) -> dict[str, str]:
    row = db.execute("SELECT name, address, vat_id FROM profiles WHERE actor_id = ?",
                     (actor_id,)).fetchone()
    return dict(row) if row else dict(EMPTY)


def save(db: sqlite3.Connection, actor_id: str, profile: dict[str, str],
         now: float | None = None) -> dict[str, str]:
    """Issued invoices keep the seller frozen in them; only later ones see the change."""
    db.execute(
        "INSERT INTO profiles (actor_id, name, address, vat_id, updated_at)"
        " VALUES (:actor_id, :name, :address, :vat_id, :now)"
        " ON CONFLICT (actor_id) DO UPDATE SET name = excluded.name,"
        " address = excluded.address, vat_id = excluded.vat_id, updated_at = excluded.updated_at",
        {**profile, "actor_id": actor_id, "now": clock(now)},
    )
    return _read(db, actor_id)


SELLER = ("name", "address", "country", "vat_id", "tax_number", "email", "iban", "bic",
          "payment_terms", "footer", "logo_sha256")


def seller_snapshot(db: sqlite3.Connection, actor_id: str) -> dict[str, str | None]:
    """The seller as issuing freezes it into an invoice; refused without a business name."""
    row = db.execute(f"SELECT {', '.join(SELLER)} FROM profiles WHERE actor_id = ?",
                     (actor_id,)).fetchone()
    if row is None or not row["name"].strip():
        raise Refusal("invoice_incomplete", "Add your business name in Settings before issuing: "
                                            "it is printed on the invoice as the seller.")
    return {name: row[name] for name in SELLER}


async def get_profile(db: Database, actor: Actor) -> dict[str, str]:
    return await db.read(_read, actor.id)


async def save_profile(db: Database, actor: Actor, profile: dict[str, str]) -> dict[str, str]:
    return await db.write(save, actor.id, profile)

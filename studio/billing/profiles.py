"""The account's profile: the seller that issuing freezes into each invoice, and its logo."""

from __future__ import annotations

import hashlib
import io
import sqlite3
import warnings
from dataclasses import dataclass
from typing import Any

import filetype
from PIL import Image

from studio import i18n
from studio.accounts import languages
from studio.accounts.auth import Actor
from studio.billing import identifiers
from studio.errors import N_, Refusal
from studio.i18n import gettext
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.transactions import clock

FIELDS = ("name", "address", "country", "vat_id", "tax_number", "email", "iban", "bic",
          "payment_terms", "footer")
LIMITS = {"name": 200, "address": 1000, "tax_number": 50, "payment_terms": 500, "footer": 500}
EMPTY = dict.fromkeys(FIELDS, "")
# Each field as a message names it (in English; `identifiers.text` says it in the language).
WORDS = {"name": N_("business name"), "address": N_("address"), "tax_number": N_("tax number"),
         "payment_terms": N_("payment terms"), "footer": N_("footer")}
MAX_LOGO_BYTES = 512 * 1024
MAX_LOGO_SIDE = 2000  # pixels: sharp on paper, and small to decode
LOGO_TYPES = {"image/png", "image/jpeg"}


@dataclass(frozen=True)
class Logo:
    content_type: str
    content: bytes
    sha256: str


def parse_profile(body: dict[str, Any]) -> dict[str, str]:
    """Every field of the seller, checked and stored compact; one left out is empty."""
    country = identifiers.country(body.get("country"))
    profile = {field: identifiers.text(body.get(field), WORDS.get(field, field), limit)
               for field, limit in LIMITS.items()}
    return {**profile, "country": country,
            "vat_id": identifiers.vat_id(body.get("vat_id"), country),
            "email": identifiers.email(body.get("email")),
            "iban": identifiers.iban(body.get("iban")),
            "bic": identifiers.bic(body.get("bic"))}


def parse_logo(content: bytes) -> Logo:
    """A PNG or JPEG of at most 512 KB and 2,000 pixels a side that decodes whole: the PDF
    can always draw it."""
    if len(content) > MAX_LOGO_BYTES:
        raise Refusal("upload_too_large", gettext(
            "A logo may be at most %(most)s KB; save a smaller image and choose it again.") % {
                "most": MAX_LOGO_BYTES // 1024})
    guessed = filetype.guess(content[:512])
    if guessed is None or guessed.mime not in LOGO_TYPES:
        raise Refusal("unsupported_media_type", gettext(
            "A logo must be a PNG or JPEG image; that file is neither."))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(content)) as image:
                if max(image.size) > MAX_LOGO_SIDE:
                    raise Refusal("upload_too_large", gettext(
                        "A logo may be at most %(most)s pixels wide and high; save a smaller"
                        " image and choose it again.") % {"most": i18n.number(MAX_LOGO_SIDE)})
                image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError,
            Image.DecompressionBombWarning):
        raise Refusal("unsupported_media_type", gettext(
            "That logo could not be read as an image; save it again as a PNG or JPEG.")
        ) from None
    return Logo(guessed.mime, content, hashlib.sha256(content).hexdigest())


def profile_of(db: sqlite3.Connection, actor_id: str) -> dict[str, Any]:
    row = db.execute(f"SELECT {', '.join(FIELDS)}, logo_sha256 FROM profiles"
                     " WHERE actor_id = ?", (actor_id,)).fetchone()
    return dict(row) if row else {**EMPTY, "logo_sha256": None}


def save(db: sqlite3.Connection, actor_id: str, profile: dict[str, str],
         now: float | None = None, logo: Logo | None = None, remove_logo: bool = False
         ) -> dict[str, Any]:
    """Issued invoices keep the seller frozen in them; only later ones see the change. A field
    the profile leaves out is saved empty; the logo changes only when one is given or
    removed."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    fields = {**EMPTY, **{name: profile[name] for name in FIELDS if name in profile}}
    db.execute(
        f"INSERT INTO profiles (actor_id, {', '.join(FIELDS)}, updated_at)"
        f" VALUES (:actor_id, {', '.join(':' + name for name in FIELDS)}, :now)"
        " ON CONFLICT (actor_id) DO UPDATE SET "
        + ", ".join(f"{name} = excluded.{name}" for name in (*FIELDS, "updated_at")),
        {**fields, "actor_id": actor_id, "now": now},
    )
    if logo is not None:
        # Kept for good once stored: an issued invoice may name it.
        db.execute("INSERT INTO logos (owner_id, sha256, content_type, content, created_at)"
                   " VALUES (?, ?, ?, ?, ?) ON CONFLICT (owner_id, sha256) DO NOTHING",
                   (actor_id, logo.sha256, logo.content_type, logo.content, now))
    if logo is not None or remove_logo:
        db.execute("UPDATE profiles SET logo_sha256 = ? WHERE actor_id = ?",
                   (logo.sha256 if logo else None, actor_id))
    return profile_of(db, actor_id)


def logo(db: sqlite3.Connection, owner_id: str, sha256: str) -> tuple[str, bytes] | None:
    """A logo the owner stored, as (content type, bytes): the current one or one an issued
    invoice names."""
    row = db.execute("SELECT content_type, content FROM logos WHERE owner_id = ? AND sha256 = ?",
                     (owner_id, sha256)).fetchone()
    return (row["content_type"], bytes(row["content"])) if row else None


def _current_logo(db: sqlite3.Connection, actor_id: str) -> tuple[str, bytes] | None:
    sha256 = profile_of(db, actor_id)["logo_sha256"]
    return logo(db, actor_id, sha256) if sha256 else None


def seller_snapshot(db: sqlite3.Connection, actor_id: str) -> dict[str, str | None]:
    """The seller as issuing freezes it into an invoice: the whole profile with its logo;
    refused without a business name."""
    seller = profile_of(db, actor_id)
    if not seller["name"].strip():
        raise Refusal("invoice_incomplete", gettext(
            "Add your business name in Settings before issuing: it is printed on the invoice as"
            " the seller."))
    return seller


async def get_profile(db: Database, actor: Actor) -> dict[str, Any]:
    return await db.read(profile_of, actor.id)


async def save_profile(db: Database, actor: Actor, profile: dict[str, str],
                       logo: Logo | None = None, remove_logo: bool = False,
                       language: str | None = None) -> dict[str, Any]:
    """The settings form's save: the profile and the language the pages speak (None follows
    the browser) in one transaction, so a save is kept whole or not at all."""
    def unit(db: sqlite3.Connection) -> dict[str, Any]:
        saved = save(db, actor.id, profile, None, logo, remove_logo)
        languages.store(db, actor.id, language)
        return saved
    return await db.write(unit)


async def current_logo(db: Database, actor: Actor) -> tuple[str, bytes] | None:
    return await db.read(_current_logo, actor.id)

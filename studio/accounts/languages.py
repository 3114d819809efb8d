"""The language a person's pages speak: their own choice, kept on their account; without one,
their browser's."""

from __future__ import annotations

import sqlite3

from studio import i18n
from studio.errors import Refusal


def parse_language(value: object) -> str | None:
    """A language the studio speaks (`de`), or None to follow the browser; anything else is
    refused, naming the choices."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().lower() in i18n.PAGE_LANGUAGES:
        return value.strip().lower()
    raise Refusal("invalid_language")


def store(db: sqlite3.Connection, actor_id: str, language: str | None) -> None:
    db.execute("UPDATE actors SET language = ? WHERE id = ?", (language, actor_id))

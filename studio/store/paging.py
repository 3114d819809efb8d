"""Pages of a long list: at most `limit` items, and an opaque cursor to the next page.

Keyset paging: the cursor holds the sort key of the last item shown, and the next page is
the range of the list's index after it. A page costs the same on the first page as on the
thousandth, and an item added or removed meanwhile shifts nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from studio.errors import Refusal

T = TypeVar("T")
DEFAULT_LIMIT = 100  # JSON
PAGE_LIMIT = 50  # what a page in the browser shows
MAX_LIMIT = 500
MAX_CURSOR = 1000  # characters; a real one is under 150


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    after: str | None  # the cursor of the next page; None on the last one


def limit_of(query: Mapping[str, str], default: int = DEFAULT_LIMIT) -> int:
    """`?limit=`: a whole number from 1 to 500."""
    raw = query.get("limit")
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= MAX_LIMIT):
        raise Refusal("invalid_limit")
    return int(raw)


def cursor_of(query: Mapping[str, str]) -> list[Any] | None:
    """`?after=`: a cursor this studio made, decoded; anything else (garbage, a lone
    surrogate, a value no list sorts by) is refused with 422 `invalid_cursor`, never let
    through to the database."""
    raw = query.get("after")
    if raw is None:
        return None
    try:
        if not raw or len(raw) > MAX_CURSOR:
            raise ValueError(raw)
        key = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        # Only the exact text `cursor` writes: a key it could not have written (an escaped
        # lone surrogate, a number past a float) is no cursor of this studio's.
        if not isinstance(key, list) or not key or cursor(key) != raw:
            raise ValueError(raw)
    except (ValueError, TypeError, binascii.Error, RecursionError):
        raise Refusal("invalid_cursor") from None
    return key


def cursor(key: list[Any]) -> str:
    """The opaque text of a sort key: the client passes it back and never reads it."""
    text = json.dumps(key, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def key_of(key: list[Any], *kinds: type) -> list[Any]:
    """A decoded cursor of the shape a list expects (a float may arrive as a whole number)."""
    if len(key) != len(kinds):
        raise Refusal("invalid_cursor")
    checked = []
    for value, kind in zip(key, kinds, strict=True):
        if kind is float and type(value) is int:
            try:
                value = float(value)
            except OverflowError:  # a whole number past any float: not one this studio made
                raise Refusal("invalid_cursor") from None
        if type(value) is not kind or (kind is float and not math.isfinite(value)) \
                or (kind is str and "\x00" in value):
            raise Refusal("invalid_cursor")
        checked.append(value)
    return checked


def next_url(path: str, query: Mapping[str, str], after: str | None) -> str | None:
    """The address of the next page: this one's query with the new cursor."""
    if after is None:
        return None
    kept = {name: value for name, value in query.items() if name != "after"}
    return f"{path}?{urlencode({**kept, 'after': after})}"


def link_header(url: str | None) -> dict[str, str]:
    """RFC 8288: `Link: <url>; rel="next"` while more remain."""
    return {"Link": f'<{url}>; rel="next"'} if url else {}

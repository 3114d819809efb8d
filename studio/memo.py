"""Answers remembered per database version.

Polling is the studio's hottest path: every open tab asks once a second, while a lease
changes a handful of times in its life. SQLite's `PRAGMA data_version` moves whenever any
other connection, in this process or another, commits; so an answer remembered at the
current version is exactly the answer that reading again would give.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from studio.db import Database

SIZE = 1024
LARGEST_BYTES = 64 * 1024  # at most SIZE x this is held: a bounded 64 MiB


class Memo:
    def __init__(self, db: Database, size: int = SIZE) -> None:
        self.db = db
        self.size = size
        self._kept: OrderedDict[Hashable, tuple[int, Any]] = OrderedDict()

    def version(self) -> int:
        """Read this before computing an answer, so a commit racing it only makes it stale."""
        return self.db.version()

    def get(self, key: Hashable, version: int) -> Any | None:
        kept = self._kept.get(key)
        if kept is None or kept[0] != version:
            return None
        self._kept.move_to_end(key)
        return kept[1]

    def put(self, key: Hashable, version: int, value: Any) -> None:
        if len(getattr(value, "body", b"")) > LARGEST_BYTES:
            return
        self._kept[key] = (version, value)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

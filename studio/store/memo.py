"""Answers remembered per database version.

Polling is the studio's hottest path: every open tab asks once a second, while a lease
changes a handful of times in its life. SQLite's `PRAGMA data_version` moves whenever any
other connection, in this process or another, commits; so an answer remembered at the
current version is exactly the answer that reading again would give. PostgreSQL's version
(studio/store/postgres.py `Versions`) is read after the request arrived, so it has moved for every
commit any host acknowledged before; when it cannot be read it is None, and nothing is
remembered or served from memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable

from starlette.responses import Response

from studio.store.db import Database

SIZE = 1024
LARGEST_BYTES = 64 * 1024  # with SIZE, at most about 64 MiB of answers are held

# What is kept of an answer: status, headers, body. Never the Response object itself, so no
# middleware editing one request's headers can change what another request is sent.
Kept = tuple[int, tuple[tuple[bytes, bytes], ...], bytes]


class Memo:
    def __init__(self, db: Database, size: int = SIZE) -> None:
        self.db = db
        self.size = size
        self._kept: OrderedDict[Hashable, tuple[object, Kept]] = OrderedDict()

    async def answer(
        self, key: Hashable, compute: Callable[[], Awaitable[Response]],
        keep: Callable[[Response], bool] = lambda response: True,
    ) -> Response:
        """The answer remembered under `key` at the current version, else `compute()`'s,
        remembered when `keep` says so. A refusal raised by `compute` is never remembered."""
        # Read before computing: a commit racing the computation only leaves it unused.
        version = await self.db.version()
        if version is None:
            return await compute()
        kept = self._get(key, version)
        if kept is not None:
            return kept
        response = await compute()
        if keep(response):
            self._put(key, version, response)
        return response

    def _get(self, key: Hashable, version: object) -> Response | None:
        kept = self._kept.get(key)
        if kept is None or kept[0] != version:
            return None
        self._kept.move_to_end(key)
        status, headers, body = kept[1]
        response = Response(body, status_code=status)
        response.raw_headers = list(headers)
        return response

    def _put(self, key: Hashable, version: object, response: Response) -> None:
        if len(response.body) > LARGEST_BYTES:
            return
        kept: Kept = (response.status_code, tuple(response.raw_headers), bytes(response.body))
        self._kept[key] = (version, kept)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

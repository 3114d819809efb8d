"""`list_page_ms_150k`: one JSON page of `GET /invoices` (the default page) for an owner with
150,000 drafts, timed at the client over loopback; median and p95 of several requests."""

from __future__ import annotations

import sqlite3
import statistics
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from bench.loaded import percentile
from bench.setup import seed_drafts, signed_in

EMAIL, PASSWORD = "list@example.com", "bench-password"


def seed_many(db_path: Path, count: int) -> None:
    """One draft made by the studio's own code, then `count - 1` copies of its row with new
    ids and times, so every column the schema has is filled as the studio fills it."""
    _, (template,) = seed_drafts(db_path, 1, EMAIL, PASSWORD)
    db = sqlite3.connect(db_path, isolation_level=None)
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(invoices)")]
        varying = [c for c in ("id", "created_at", "updated_at") if c in columns]
        kept = [c for c in columns if c not in varying]
        insert = (f"INSERT INTO invoices ({', '.join(varying + kept)}) SELECT"
                  f" {', '.join(['?'] * len(varying) + kept)} FROM invoices WHERE id = ?")
        start = time.time() - count
        rows = []
        for n in range(count - 1):
            at = start + n
            values = {"id": str(uuid.uuid4()), "created_at": at, "updated_at": at}
            rows.append((*(values[c] for c in varying), template))
        db.execute("BEGIN IMMEDIATE")
        db.executemany(insert, rows)
        db.execute("COMMIT")
        db.execute("ANALYZE")
    finally:
        db.close()


def bench_list(server: Any, count: int, budget_s: float = 20.0, most: int = 15
               ) -> dict[str, Any]:
    """`server` is a running `studio serve` on the database `seed_many` made."""
    times, sizes, items, links = [], [], [], []
    with closing(signed_in(server.url, EMAIL, PASSWORD)) as client:
        client.get("/invoices").raise_for_status()  # warm the page cache and the statements
        until = time.monotonic() + budget_s
        while len(times) < most and (len(times) < 3 or time.monotonic() < until):
            started = time.perf_counter()
            reply = client.get("/invoices")
            times.append((time.perf_counter() - started) * 1000)
            reply.raise_for_status()
            sizes.append(len(reply.content))
            items.append(len(reply.json()))
            links.append("next" in reply.headers.get("link", ""))
    return {"list_page_ms_150k": statistics.median(times),
            "list_page_p95_ms_150k": percentile(times, 0.95),
            "list_page_requests": len(times), "list_page_items": items[-1],
            "list_page_bytes": sizes[-1], "list_page_has_next_link": all(links),
            "list_drafts": count}

"""`idle_writes`: writer transactions per second of an idle studio, as `studio serve` runs it
(the web app's lifespan with its embedded worker, its delivery of email and its sweeper), on a
fresh SQLite file or, given STUDIO_DATABASE_URL, on PostgreSQL. Nothing waits, so every write
counted is the price of looking.

    .venv/bin/python -m bench.idle_writes [seconds]
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from studio.config import Settings
from studio.store import sqlite as sqlite_db


def counting(counts: collections.Counter[str], transaction: Any) -> Any:
    def counted(connection: Any, unit: Any, *args: Any, **kwargs: Any) -> Any:
        counts[getattr(unit, "__qualname__", repr(unit))] += 1
        return transaction(connection, unit, *args, **kwargs)
    return counted


async def measure(seconds: float) -> tuple[collections.Counter[str], float]:
    from app import create_app

    counts: collections.Counter[str] = collections.Counter()
    url = os.environ.get("STUDIO_DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(db_path=Path(folder) / "idle.db", database_url=url,
                            smtp_url="smtp://127.0.0.1:9", mail_from="billing@bench.test")
        if url:
            from studio.store import postgres
            postgres.in_transaction = counting(counts, postgres.in_transaction)
        else:
            sqlite_db.in_transaction = counting(counts, sqlite_db.in_transaction)
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            await asyncio.sleep(2.0)  # past the start's own writes
            counts.clear()
            started = time.monotonic()
            await asyncio.sleep(seconds)
            taken = time.monotonic() - started
    return counts, taken


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    counts, taken = asyncio.run(measure(seconds))
    total = sum(counts.values())
    print(f"{total} writer transactions in {taken:.1f} s: {total / taken:.2f} per second")
    for unit, count in counts.most_common():
        print(f"  {unit}: {count} ({count / taken:.2f}/s)")


if __name__ == "__main__":
    main()

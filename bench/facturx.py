"""`facturx_ms`: building the Factur-X PDF of an issued 50-line invoice, from nothing kept to
the PDF/A-3 kept with its XML inside (the document rendered in a renderer process, the XML
written and embedded on a thread). The median of several builds, reported beside how long the
event loop went without a turn meanwhile, which shows the build runs off it."""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from bench.setup import open_studio_db
from studio.accounts.auth import add_actor
from studio.billing import documents, facturx, invoices, profiles

LINES = 50
SELLER = {"name": "Bench GmbH", "address": "Hauptstraße 1\n10115 Berlin", "country": "DE",
          "vat_id": "DE136695976", "tax_number": "12/345/67890", "iban": "DE89370400440532013000",
          "bic": "COBADEFF", "payment_terms": "Within 14 days."}


def seed(db: sqlite3.Connection) -> tuple[str, str]:
    """An actor with a full seller profile and one issued 50-line invoice at two tax rates."""
    actor_id = add_actor(db, "bench@example.com", "x")
    profiles.save(db, actor_id, SELLER)
    fields = invoices.parse_draft({
        "customer": "Bench Customer SARL", "currency": "EUR", "due_date": "2030-01-31",
        "line_items": [{"description": f"Line {n}: consulting, design and delivery",
                        "quantity": str(1 + n % 5), "unit_price": "129.90",
                        "tax_rate": "19" if n % 3 else "7"} for n in range(LINES)]})
    draft, _ = invoices.create_draft(db, actor_id, fields, None)
    invoices.issue(db, actor_id, draft["id"], str(uuid.uuid4()), 1)
    return actor_id, draft["id"]


def _forget(db: sqlite3.Connection, invoice_id: str) -> None:
    db.execute("DELETE FROM issued_documents WHERE invoice_id = ?", (invoice_id,))


async def _loop_lag(stop: asyncio.Event, lags: list[float]) -> None:
    """How late a 1 ms sleep wakes, again and again, until stopped."""
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - asked - 0.001)


async def _measure(db_path: Path, rounds: int) -> dict[str, Any]:
    db = await open_studio_db(db_path)
    try:
        actor_id, invoice_id = await db.write(seed)
        await facturx.facturx_pdf(db, actor_id, invoice_id)  # the renderer process started
        builds, lags = [], []
        for _ in range(rounds):
            await db.write(_forget, invoice_id)
            stop, lagged = asyncio.Event(), []
            ticker = asyncio.create_task(_loop_lag(stop, lagged))
            started = time.perf_counter()
            made = await facturx.facturx_pdf(db, actor_id, invoice_id)
            builds.append((time.perf_counter() - started) * 1000)
            stop.set()
            await ticker
            lags.append(max(lagged, default=0.0) * 1000)
        invoice = await facturx.issued_document(db, actor_id, invoice_id)
        started = time.perf_counter()
        xml = facturx.xml_of(invoice)
        xml_ms = (time.perf_counter() - started) * 1000
        return {"facturx_ms": statistics.median(builds), "facturx_max_ms": max(builds),
                "facturx_xml_ms": xml_ms, "facturx_loop_lag_max_ms": max(lags),
                "facturx_pdf_bytes": len(made), "facturx_xml_bytes": len(xml),
                "facturx_lines": LINES, "facturx_rounds": rounds}
    finally:
        await db.close()
        documents.stop_renderers()


def bench_facturx(work: Path, rounds: int) -> dict[str, Any]:
    return asyncio.run(_measure(work / "facturx.db", rounds))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        print(bench_facturx(Path(folder), 5))

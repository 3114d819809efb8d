"""The issued document as a PDF, made with fpdf2 (pure Python, no system libraries), rendered
once per issued invoice in a process of its own and kept in the database.

The text face is the vendored DejaVu Sans, so any customer or line text a person can type
prints as typed. The printable HTML view (`templates/document.html`) shows the same facts.
A credit note says it is one, names the invoice it credits, shows its amounts as credit and
has no due date.

Why another process: fpdf2 holds the GIL for the whole render (a 200-line invoice takes a
while), so a thread of the serving process, the writer's included, would stall the event
loop's every request. A small process pool has its own GIL. An issued invoice never
changes, so its bytes are kept under its frozen hash and every later download is one read.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sqlite3
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from fpdf import FPDF

from studio import assets
from studio.db import Database
from studio.money import shown

FONTS = assets.folder("static") / "fonts"
TITLES = {"invoice": "Invoice", "credit_note": "Credit note"}
# The document's layout; a new one renders kept documents again (they are keyed by it).
LAYOUT = "pdf-2"
# Half the cores: the serving process keeps the rest.
RENDERERS = max(1, (os.cpu_count() or 2) // 2)

_renderers: ProcessPoolExecutor | None = None
# The renders under way in this process, so concurrent first downloads wait for one.
_rendering: dict[tuple[str, ...], asyncio.Future[bytes]] = {}


def title_of(invoice: dict[str, Any]) -> str:
    return f"{TITLES[invoice['kind']]} {invoice['number'] or '(draft)'}"


def is_credit(invoice: dict[str, Any]) -> bool:
    return invoice["kind"] == "credit_note"


def as_credit(amount: str, invoice: dict[str, Any]) -> str:
    """A credit note's amount reads as credit: below zero (a zero stays zero)."""
    if not is_credit(invoice) or not amount.strip("-0."):
        return amount
    return amount[1:] if amount.startswith("-") else f"-{amount}"


def facts_of(invoice: dict[str, Any]) -> list[tuple[str, str]]:
    """The dates and references at the top of the document."""
    if is_credit(invoice):
        return [("Credits invoice", invoice.get("credits_number") or ""),
                ("Issued", (invoice["issued_at"] or "")[:10])]
    return [("Issued", (invoice["issued_at"] or "")[:10]), ("Due", invoice["due_date"])]


def render_pdf(invoice: dict[str, Any], fonts: Path = FONTS) -> bytes:
    """Number, issue date, the frozen seller, customer, lines, tax per rate and totals; for a
    credit note, the invoice it corrects."""
    currency = invoice["currency"]
    pdf = FPDF(format="A4")
    pdf.set_title(title_of(invoice))
    pdf.set_creator("Studio")
    pdf.add_font("Sans", "", str(fonts / "DejaVuSans.ttf"))
    pdf.add_font("Sans", "B", str(fonts / "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    width = pdf.epw

    pdf.set_font("Sans", "B", 18)
    pdf.cell(width, 10, title_of(invoice), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    for label, value in facts_of(invoice):
        pdf.cell(40, 6, label)
        pdf.cell(width - 40, 6, value, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)

    seller = invoice["seller"] or {}
    top = pdf.get_y()
    pdf.set_font("Sans", "B", 10)
    pdf.cell(width / 2, 6, "From", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    seller_lines = [seller.get("name", ""), *seller.get("address", "").splitlines()]
    if seller.get("vat_id"):
        seller_lines.append(f"VAT ID {seller['vat_id']}")
    pdf.multi_cell(width / 2 - 4, 5, "\n".join(line for line in seller_lines if line))
    bottom = pdf.get_y()
    pdf.set_xy(pdf.l_margin + width / 2, top)
    pdf.set_font("Sans", "B", 10)
    pdf.cell(width / 2, 6, "Bill to", new_x="LEFT", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    pdf.multi_cell(width / 2, 5, invoice["customer"])
    pdf.set_y(max(bottom, pdf.get_y()) + 6)

    columns = [("Item", 0.46, "L"), ("Qty", 0.1, "R"), ("Unit price", 0.16, "R"),
               ("Tax", 0.1, "R"), ("Net", 0.18, "R")]
    pdf.set_font("Sans", "B", 10)
    for name, share, align in columns:
        pdf.cell(width * share, 7, name, border="B", align=align)
    pdf.ln()
    pdf.set_font("Sans", "", 10)
    for line in invoice["line_items"]:
        values = [line["description"], line["quantity"], line["unit_price"],
                  f"{line['tax_rate']} %", shown(as_credit(line["net"], invoice), currency)]
        for (_, share, align), value in zip(columns, values, strict=True):
            pdf.cell(width * share, 7, value, align=align)
        pdf.ln()
    pdf.ln(3)

    label_width, amount_width = width * 0.82, width * 0.18
    for rate in invoice["tax_by_rate"]:
        on = shown(as_credit(rate["net"], invoice), currency)
        pdf.cell(label_width, 6, f"Tax {rate['rate']} % on {on}", align="R")
        pdf.cell(amount_width, 6, shown(as_credit(rate["tax"], invoice), currency), align="R",
                 new_x="LMARGIN", new_y="NEXT")
    total = "Total credited" if is_credit(invoice) else "Total"
    for label, key in (("Net", "net"), ("Tax", "tax"), (total, "total")):
        pdf.set_font("Sans", "B" if key == "total" else "", 11 if key == "total" else 10)
        pdf.cell(label_width, 7, f"{label} ({currency})", align="R")
        pdf.cell(amount_width, 7, shown(as_credit(invoice[key], invoice), currency), align="R",
                 new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _render_here(invoice: dict[str, Any]) -> bytes:
    """What a renderer process runs (by name, so it is the module's own render_pdf)."""
    return render_pdf(invoice)


def _pool() -> ProcessPoolExecutor:
    global _renderers
    if _renderers is None:
        # spawn: a fork of a process with running threads (aiosqlite's) may inherit held locks.
        _renderers = ProcessPoolExecutor(RENDERERS, mp_context=multiprocessing.get_context("spawn"))
    return _renderers


def stop_renderers() -> None:
    """End the renderer processes, if any were started: at the end of the app's life."""
    global _renderers
    if _renderers is not None:
        _renderers.shutdown(wait=True, cancel_futures=True)
        _renderers = None


async def render_elsewhere(invoice: dict[str, Any]) -> bytes:
    """Render in a renderer process; the event loop only waits. A pool whose process died
    (killed, out of memory) is replaced once rather than refusing every render after."""
    global _renderers
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_pool(), _render_here, invoice)
    except BrokenProcessPool:
        _renderers = None
        return await loop.run_in_executor(_pool(), _render_here, invoice)


def _kept(db: sqlite3.Connection, invoice_id: str, frozen_sha256: str, layout: str
          ) -> bytes | None:
    row = db.execute(
        "SELECT content FROM issued_documents WHERE invoice_id = ? AND frozen_sha256 = ?"
        " AND layout = ?", (invoice_id, frozen_sha256, layout)).fetchone()
    return None if row is None else bytes(row[0])


def _kept_of_owner(db: sqlite3.Connection, actor_id: str, invoice_id: str
                   ) -> sqlite3.Row | None:
    return db.execute(
        "SELECT invoices.number, issued_documents.content FROM invoices"
        " JOIN issued_documents ON issued_documents.invoice_id = invoices.id"
        " AND issued_documents.frozen_sha256 = invoices.frozen_sha256"
        " AND issued_documents.layout = ?"
        " WHERE invoices.id = ? AND invoices.owner_id = ? AND invoices.status = 'issued'",
        (LAYOUT, invoice_id, actor_id)).fetchone()


async def kept_pdf(db: Database, actor_id: str, invoice_id: str) -> tuple[str, bytes] | None:
    """The number and kept PDF of the actor's issued invoice, read without reading the whole
    document: a download after the first costs one indexed look-up."""
    row = await db.read(_kept_of_owner, actor_id, invoice_id)
    return None if row is None else (row[0], bytes(row[1]))


def _keep(db: sqlite3.Connection, invoice_id: str, frozen_sha256: str, layout: str,
          content: bytes) -> bytes:
    """Keep the bytes, unless another process kept its own first: then everyone gets those."""
    db.execute(
        "INSERT INTO issued_documents (invoice_id, frozen_sha256, layout, content, created_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (invoice_id, frozen_sha256, layout) DO NOTHING",
        (invoice_id, frozen_sha256, layout, content, time.time()))
    kept = _kept(db, invoice_id, frozen_sha256, layout)
    assert kept is not None, "inserted or already there, inside this transaction"
    return kept


async def _render_and_keep(db: Database, invoice: dict[str, Any], key: tuple[str, str, str]
                           ) -> bytes:
    return await db.write(_keep, *key, await render_elsewhere(invoice))


async def issued_pdf(db: Database, invoice: dict[str, Any]) -> bytes:
    """The PDF of an issued invoice: the kept bytes, or rendered once and kept. Concurrent
    first downloads in one process share one render; across processes the first kept wins."""
    key = (invoice["id"], invoice["frozen_sha256"], LAYOUT)
    kept = await db.read(_kept, *key)
    if kept is not None:
        return kept
    waiting_for = (str(db.path), *key)
    rendering = _rendering.get(waiting_for)
    if rendering is None:
        rendering = asyncio.ensure_future(_render_and_keep(db, invoice, key))
        _rendering[waiting_for] = rendering
        rendering.add_done_callback(lambda _: _rendering.pop(waiting_for, None))
    # A download that goes away does not cancel the render the others wait for.
    return await asyncio.shield(rendering)

"""The built-in writer reading receipts: how long one takes and how exactly it reads, and what
four readings at once do to a poll beside them.

- `receipt_s`: median seconds for the built-in writer to read one photographed receipt (the
  receipts tests/receipts.py draws, held out from the reader's tuning and photographed as a
  phone would), in its pool of reader processes, as the worker calls it.
- `receipt_lines_exact`: the share of those receipts' lines whose quantity and unit price are
  read exactly as printed; `receipt_totals_exact` the share of totals.
- `poll_under_receipts_ratio`: poll p50 on a `studio serve --demo` while four receipts are
  read through it (four read_receipt requests), over the same poll idle before and after.
- `receipt_rss_mb`: the memory the readers add: the peak resident size of a reader process.
- `receipt_real_*`: the same reader on the real receipts of ../shared/receipts (photos and
  scans of real tills nobody here made; read from there, never copied into the project),
  against the `truth.json` beside them: `receipt_real_totals_exact` and `receipt_real_whole`
  (every line and the total) as shares of the receipts, `receipt_real_lines_exact` of their
  lines (quantity, and unit price as printed or net of the line's rate to the cent, signs
  included, each truth line matched once), `receipt_real_s_mean` and `receipt_real_s_max`
  the seconds a reading takes in the pool, as the worker waits for it.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import time
import uuid
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from bench import loaded
from bench.setup import signed_in
from studio.leasing.providers import local
from studio.leasing.purposes import PURPOSES
from studio.leasing.readers import ocr, processes
from tests import receipts as drawn


def photographed(count: int | None = None) -> list[tuple[drawn.Receipt, bytes]]:
    """The first `count` held-out receipts (all unless given), photographed."""
    held_out = [make() for make in drawn.HELD_OUT[:count]]
    return [(receipt, drawn.photograph(drawn.draw(receipt), seed=n))
            for n, receipt in enumerate(held_out)]


async def _read_each(photos: list[tuple[drawn.Receipt, bytes]]) -> dict[str, Any]:
    writer = local.LocalProvider()
    purpose = PURPOSES["read_receipt"]
    seconds, exact, lines, totals = [], 0, 0, 0
    readers = processes.readers()
    await _warmed(readers)
    for receipt, photo in photos:
        started = time.perf_counter()
        await writer.complete(purpose, {"receipts": [
            {"content_type": "image/jpeg", "data": photo, "filename": "r.jpg"}]}, "bench",
            candidate=1, timeout=60)
        seconds.append(time.perf_counter() - started)
        # Exactness is judged on the reading as printed, before prices are made net.
        reading = await readers.run("bench", 60, local.read_receipt, photo, "image/jpeg",
                                    60.0)
        exact += drawn.exact_lines(reading, receipt)
        lines += len(receipt.items)
        totals += drawn.total_exact(reading, receipt)
    peak = await readers.run("bench", 60, _peak_rss_mb)
    local.stop_readers()
    return {"receipt_s": statistics.median(seconds), "receipt_s_max": max(seconds),
            "receipt_lines_exact": exact / lines, "receipt_lines": lines,
            "receipt_totals_exact": totals / len(photos), "receipt_rss_mb": peak}


async def _warmed(readers: processes.Readers) -> None:
    """The reader processes started and their OCR engines made, each once; a reading is what
    the worker waits for after that."""
    await asyncio.gather(*(readers.run("bench", 60, _warm) for _ in range(readers.count)))


def _warm() -> None:
    time.sleep(0.5)  # long enough that every reader takes one
    if ocr.rapid_installed():
        ocr.warm()


# The real receipts: beside the checkout, never in it.
REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "receipts"
TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
         ".pdf": "application/pdf"}


def _decimal(value: Any) -> Decimal | None:
    try:
        return None if value is None else Decimal(str(value))
    except InvalidOperation:
        return None


def _line_exact(truth: dict[str, Any], read: dict[str, Any]) -> bool:
    """The quantity as printed, the unit price as printed or net of the line's rate."""
    quantity, price = _decimal(read.get("quantity")), _decimal(read.get("unit_price"))
    printed = _decimal(truth["unit_price"])
    if quantity is None or price is None or printed is None or \
            quantity != _decimal(truth["quantity"]):
        return False
    if price == printed:
        return True
    rate = _decimal(read.get("tax_rate"))
    if not rate:
        return False
    net = printed * 100 / (100 + rate)
    cent = Decimal("0.01")
    return price == net.quantize(cent, rounding=ROUND_HALF_UP) or \
        (abs(price - net) <= cent and price == price.quantize(cent))


def real_score(truth: dict[str, Any], reading: dict[str, Any] | None
               ) -> tuple[bool, int, bool]:
    """(total exact, truth lines read exactly, every line and the total exact)."""
    reading = reading or {"lines": [], "total": None}
    left = list(reading["lines"])
    exact = 0
    for line in truth["lines"]:
        match = next((read for read in left if _line_exact(line, read)), None)
        if match is not None:
            left.remove(match)
            exact += 1
    total = _decimal(reading["total"]) is not None and \
        _decimal(reading["total"]) == _decimal(truth["total"])
    return total, exact, total and exact == len(truth["lines"])


async def _read_real(count: int | None) -> dict[str, Any]:
    truths = json.loads((REAL / "truth.json").read_text())[:count]
    writer = local.LocalProvider()
    purpose = PURPOSES["read_receipt"]
    readers = processes.readers()
    await _warmed(readers)
    seconds, totals, lines, whole, of = [], 0, 0, 0, 0
    for truth in truths:
        path = REAL / truth["file"]
        receipt = {"content_type": TYPES[path.suffix.lower()], "data": path.read_bytes(),
                   "filename": path.name}
        started = time.perf_counter()
        try:
            await writer.complete(purpose, {"receipts": [receipt]}, "bench-real",
                                  candidate=1, timeout=60)
        except Exception:  # an unreadable receipt is a reading that got nothing right
            pass
        seconds.append(time.perf_counter() - started)
        try:  # the reading as printed, before prices are made net: kept, not read again
            reading = await local.read_once("bench-real", receipt["data"],
                                            receipt["content_type"])
        except local.UnreadableReceipt:
            reading = None
        total, exact, right = real_score(truth, reading)
        totals, lines, whole, of = totals + total, lines + exact, whole + right, \
            of + len(truth["lines"])
    local.stop_readers()
    return {"receipt_real_totals_exact": totals / len(truths),
            "receipt_real_lines_exact": lines / of if of else 1.0,
            "receipt_real_whole": whole / len(truths),
            "receipt_real_s_mean": statistics.fmean(seconds),
            "receipt_real_s_max": max(seconds), "receipt_real_count": len(truths)}


def bench_real(count: int | None = None) -> dict[str, Any]:
    """The real receipts of ../shared/receipts (the first `count`, all unless given); none
    when the folder is not beside the checkout."""
    if not (REAL / "truth.json").is_file():
        print(f"bench: {REAL} is absent: no receipt_real_* figures")
        return {}
    return asyncio.run(_read_real(count))


def _peak_rss_mb() -> float:
    """A reader process's peak resident size, its OCR children's included."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def bench_reading(count: int | None = None) -> dict[str, Any]:
    return asyncio.run(_read_each(photographed(count)))


def bench_poll_under_receipts(server: Any, seconds: float, count: int | None = None
                              ) -> dict[str, Any]:
    """Four read_receipt requests at once (fewer if `count` says so) through the demo's
    server, a poll beside them."""
    photos = [photo for _, photo in photographed(min(4, count or 4))]
    client = signed_in(server.url)
    reader = signed_in(server.url)
    path = loaded.poll_path(client, "receipts")
    before = loaded.idle_polls(client, path, seconds)
    drafts = []
    for n, photo in enumerate(photos):
        made = reader.post("/invoices", json={
            "customer": "Bench Ltd", "currency": "EUR", "due_date": "2030-01-01",
            "line_items": [{"description": "Work", "quantity": "1", "unit_price": "1.00",
                            "tax_rate": "19"}]})
        made.raise_for_status()
        draft = made.json()["id"]
        reader.post(f"/invoices/{draft}/attachments", data={"client_key": f"r-{n}"},
                    files={"file": ("receipt.jpg", photo, "image/jpeg")}).raise_for_status()
        drafts.append(draft)
    with loaded.Poller(client, path) as poller:
        leases = [reader.post("/leases", json={
            "request_id": str(uuid.uuid4()), "purpose": "read_receipt", "invoice_ids": [draft],
            "providers": ["local"]}).json()["lease_id"] for draft in drafts]
        deadline = time.monotonic() + 120
        while any(reader.get(f"/leases/{lease}").json()["status"] == "open"
                  for lease in leases):
            if time.monotonic() > deadline:
                raise SystemExit("the receipts were never read")
            time.sleep(0.2)
    after = loaded.idle_polls(client, path, seconds)
    statuses = [reader.get(f"/leases/{lease}").json()["status"] for lease in leases]
    client.close()
    reader.close()
    return {**loaded.ratio_of("poll_under_receipts", before, poller.latencies, after),
            "receipts_read": statuses.count("proposed")}


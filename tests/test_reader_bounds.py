"""A reader no file can break (issue 32, items 1 to 4): a dead reader process is replaced, every
image the reader makes is bounded, a reading has a time limit that kills it, stops when its
lease does, takes turns between accounts, and what cannot succeed is not tried again.

Hostile files are made here, by pypdf and Pillow; slow readings are functions of this module,
which the reader processes import by name."""

from __future__ import annotations

import asyncio
import io
import math
import multiprocessing
import os
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from studio.billing import money
from studio.leasing.providers import local
from studio.leasing.providers.local import LocalProvider, as_lines_billed
from studio.leasing.purposes import PURPOSES
from studio.leasing.readers import UnreadableReceipt, ocr
from studio.leasing.readers import processes as reader_processes
from studio.leasing.readers.processes import Readers, ReadingStopped, reader_count
from tests import backends
from tests import receipts as R
from tests.conftest import scalar, wait_for_status
from tests.test_model_work import PAGE, draft_with_receipt, read

pytestmark = pytest.mark.anyio
# Bytes and processes only, but for the one test that reads through a lease.
no_database = backends.first_pass_only
READ = PURPOSES["read_receipt"]


@pytest.fixture(autouse=True)
def own_readers(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each test starts the studio's readers afresh (two of them) and ends them."""
    monkeypatch.setattr(reader_processes, "reader_count", lambda: 2)
    local._kept.clear()
    reader_processes.stop_readers()
    yield
    reader_processes.stop_readers()
    local._kept.clear()


def receipt(data: bytes, content_type: str = "application/pdf") -> dict[str, Any]:
    return {"receipts": [{"content_type": content_type, "data": data, "filename": "r"}]}


def blank_pdf(*pages: tuple[float, float]) -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for width, height in pages:
        writer.add_blank_page(width=width, height=height)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# What a reader process runs in these tests (by name, so the process imports this module).

def slow_reading(data: bytes, content_type: str, timeout: float = 30.0) -> dict[str, Any]:
    """A reading that takes as long as its bytes say: b"heavy" three seconds."""
    time.sleep(3.0 if data.startswith(b"heavy") else 0.05)
    return {"supplier": data.decode(), "date": None, "currency": None, "lines": [],
            "total": None}


def counted_reading(data: bytes, content_type: str, timeout: float = 30.0) -> dict[str, Any]:
    """A reading that leaves a mark in the file its bytes name, once per time it runs."""
    with open(data.decode(), "a") as marks:
        marks.write("read\n")
    time.sleep(0.3)
    return slow_reading(b"light", content_type)


def drawn_sizes(data: bytes) -> list[tuple[int, int]]:
    return [page.size for page in ocr.pdf_images(data)]


def own_peak_mb() -> float:
    """This process's own peak memory (VmHWM starts afresh at exec; ru_maxrss would carry the
    peak of the test process that spawned it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


# --- item 1: a dead reader process ------------------------------------------------------


@no_database
async def test_a_killed_reader_is_replaced_and_another_actors_next_reading_succeeds():
    writer = LocalProvider()
    first = await writer.complete(READ, receipt(R.pdf(R.frischmarkt())), "ada", candidate=1,
                                  timeout=60)
    assert first["supplier"] == "Frischmarkt Sommer"
    readers = multiprocessing.active_children()
    assert readers
    for child in readers:  # the kernel's out-of-memory killer, or a crash in pdfium
        os.kill(child.pid, signal.SIGKILL)
    started = time.monotonic()
    reading = await writer.complete(READ, receipt(R.pdf(R.crown_inn())), "ben", candidate=1,
                                    timeout=60)
    assert reading["supplier"] == R.crown_inn().expected()["supplier"]
    assert time.monotonic() - started < 20


@no_database
async def test_a_reader_that_dies_while_reading_is_tried_once_more_and_the_others_read_on():
    readers = Readers(1)
    try:
        dying = asyncio.ensure_future(readers.run("ada", 30, time.sleep, 30))
        for _ in range(2):  # killed, replaced, tried again, killed again
            async with asyncio.timeout(20):
                while not (pids := readers.pids()):
                    await asyncio.sleep(0.05)
            os.kill(pids[0], signal.SIGKILL)
            async with asyncio.timeout(20):
                while readers.pids() == pids:
                    await asyncio.sleep(0.05)
        with pytest.raises(UnreadableReceipt, match="stopped while reading it"):
            await dying
        assert await readers.run("ben", 30, os.getpid) in readers.pids()
    finally:
        readers.stop()


# --- item 2: a PDF page drawn within the pixel limit --------------------------------------


@pytest.mark.parametrize("points", [5000, 14400])
@no_database
def test_a_huge_pdf_page_is_drawn_within_the_pixel_limit(points):
    pytest.importorskip("pypdfium2")
    pages = ocr.pdf_images(blank_pdf((points, points), (points, points)))
    assert len(pages) == 2
    for page in pages:
        assert page.width * page.height <= ocr.MOST_MADE_PIXELS
        assert page.width >= 0.9 * math.sqrt(ocr.MOST_MADE_PIXELS)  # scaled down, not refused


@no_database
async def test_reading_four_huge_pdf_pages_keeps_the_reader_within_its_memory():
    pytest.importorskip("pypdfium2")
    huge = blank_pdf(*[(5000, 5000)] * 4)
    readers = Readers(1)
    try:
        sizes = await readers.run("ada", 60, drawn_sizes, huge)
        assert len(sizes) == 4 and all(w * h <= ocr.MOST_MADE_PIXELS for w, h in sizes)
        # Four 5000 pt pages at 300 dpi would be 4 x 434 megapixels (7.9 GB seen).
        assert await readers.run("ada", 10, own_peak_mb) < 600
    finally:
        readers.stop()


@no_database
def test_the_remote_model_s_pages_are_drawn_in_a_reader_process_not_the_server(monkeypatch):
    pytest.importorskip("pypdfium2")
    from studio.leasing.providers.openai import image_urls

    def drawn_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a page was drawn in the server's own process")

    monkeypatch.setattr(ocr, "pdf_images", drawn_here)
    urls = image_urls({"content_type": "application/pdf", "data": blank_pdf((5000, 5000)),
                       "filename": "r.pdf"})
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,")
    assert len(urls[0]) < 4 * ocr.MOST_MADE_PIXELS  # a bounded page, whatever it says


# --- item 3: every intermediate image bounded ------------------------------------------------


@no_database
@pytest.mark.parametrize("size", [(100, 600_000), (600_000, 100)])
def test_a_tall_thin_image_is_refused_quickly_before_any_enlargement(size):
    """On every path a reading takes (the OCR engine's and Tesseract's), refused as what it is:
    a file that cannot be read, said once, never an engine's error retried."""
    out = io.BytesIO()
    Image.new("L", size, 255).save(out, format="PNG")
    started = time.monotonic()
    with pytest.raises(UnreadableReceipt, match="too long and thin"):
        ocr.receipt_text(out.getvalue(), "image/png")
    if size[0] < size[1]:  # Tesseract's own step would enlarge it to a readable width
        with pytest.raises(UnreadableReceipt, match="too long and thin"):
            ocr.prepare(ocr.open_image(out.getvalue()))
    assert time.monotonic() - started < 10


@no_database
def test_every_image_prepare_makes_is_within_the_pixel_limit(monkeypatch):
    made: list[tuple[int, int]] = []
    resize, rotate = Image.Image.resize, Image.Image.rotate

    def resized(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        image = resize(self, *args, **kwargs)
        made.append(image.size)
        return image

    def rotated(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        image = rotate(self, *args, **kwargs)
        made.append(image.size)
        return image

    monkeypatch.setattr(Image.Image, "resize", resized)
    monkeypatch.setattr(Image.Image, "rotate", rotated)
    monkeypatch.setattr(ocr, "skew", lambda image: 4.0)  # a photo four degrees off
    # A long till roll, narrow enough to be enlarged to 600 px wide, then straightened.
    prepared = ocr.prepare(Image.new("L", (300, 13_000), 255))
    assert made and all(w * h <= ocr.MOST_MADE_PIXELS for w, h in made), made
    assert prepared.width * prepared.height <= ocr.MOST_MADE_PIXELS
    # An ordinary photo is prepared as before: scaled to 2600 px and straightened whole.
    made.clear()
    assert ocr.prepare(Image.new("L", (3000, 4000), 255)).height > 2600


# --- item 4: time limits that kill, turns between accounts, no retry of what cannot succeed --


@no_database
async def test_a_reading_past_its_time_is_killed():
    readers = Readers(1)
    try:
        started = time.monotonic()
        with pytest.raises(UnreadableReceipt, match="longer than 0.5 s"):
            await readers.run("ada", 0.5, time.sleep, 30)
        assert time.monotonic() - started < 10
        assert readers.pids() == []  # killed, to be replaced at the next reading
    finally:
        readers.stop()


@no_database
async def test_a_reading_whose_lease_ended_leaves_no_reader_running_it():
    readers = Readers(1)
    try:
        # The worker ends a task's wait at the lease's deadline (asyncio.timeout) or on Stop.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(3):
                await readers.run("ada", 30, time.sleep, 30)
        async with asyncio.timeout(5):
            while readers.pids() or readers._running:
                await asyncio.sleep(0.05)
        assert await readers.run("ada", 10, os.getpid) in readers.pids()
    finally:
        readers.stop()


@no_database
async def test_the_ocr_a_killed_reading_started_is_killed_with_it():
    readers = Readers(1)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(3):
                await readers.run("ada", 30, os.system, "sleep 45 # studio-ocr-stand-in")
        await asyncio.sleep(0.5)
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and b"studio-ocr-stand-in"
                in _command_line(pid)]
        assert left == []
    finally:
        readers.stop()


def _command_line(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@no_database
async def test_a_second_actors_reading_is_not_stuck_behind_the_first_actors_heavy_ones(
        monkeypatch):
    monkeypatch.setattr(local, "read_receipt", slow_reading)
    writer = LocalProvider()
    finished: list[str] = []

    async def reading(actor: str, data: bytes) -> None:
        await writer.complete(READ, receipt(data), actor, candidate=1, timeout=60)
        finished.append(data.decode())

    adas = [asyncio.ensure_future(reading("ada", f"heavy {n}".encode())) for n in range(4)]
    await asyncio.sleep(0.5)  # Ada's four are asked for first
    await reading("ben", b"light ben")
    # Ben's began as soon as a reader was free: two of Ada's four have not even begun.
    assert len(finished) <= 3 and finished[-1] == "light ben", finished
    for job in adas:
        job.cancel()
    await asyncio.gather(*adas, return_exceptions=True)


@no_database
async def test_the_last_free_reader_is_kept_for_another_account():
    """Ada's heavy readings (a minute each) never take both readers: Ben's, asked for after
    them, starts at once on the one kept free instead of waiting for one of hers to end."""
    readers = Readers(2)
    adas = [asyncio.ensure_future(readers.run("ada", 120, time.sleep, 60)) for _ in range(3)]
    try:
        await asyncio.sleep(1.0)
        started = time.monotonic()
        async with asyncio.timeout(30):
            assert await readers.run("ben", 30, pow, 2, 10) == 1024
        assert time.monotonic() - started < 20
        assert not any(job.done() for job in adas)  # Ada's are still reading
    finally:
        for job in adas:
            job.cancel()
        await asyncio.gather(*adas, return_exceptions=True)
        await asyncio.to_thread(readers.stop)


@no_database
async def test_shutdown_does_not_wait_for_a_running_reading():
    readers = Readers(1)
    running = asyncio.ensure_future(readers.run("ada", 60, time.sleep, 60))
    async with asyncio.timeout(20):
        while not (pids := readers.pids()):
            await asyncio.sleep(0.05)
    started = time.monotonic()
    await asyncio.to_thread(readers.stop)
    assert time.monotonic() - started < 3
    with pytest.raises(ReadingStopped):
        await running
    assert not alive(pids[0])


@no_database
async def test_the_candidates_of_one_reading_read_the_receipt_once(monkeypatch, tmp_path):
    monkeypatch.setattr(local, "read_receipt", counted_reading)
    marks = tmp_path / "marks"
    writer = LocalProvider()
    data = str(marks).encode()
    together = [writer.complete(READ, receipt(data), "ada", candidate=n, timeout=60)
                for n in range(1, 5)]
    readings = await asyncio.gather(*together)
    readings.append(await writer.complete(READ, receipt(data), "ada", candidate=5, timeout=60))
    assert all(reading == readings[0] for reading in readings)
    assert marks.read_text().count("read") == 1


@no_database
def test_readers_share_the_machine_s_cores_among_the_serving_processes(monkeypatch):
    assert reader_count(2, 1) == 2
    assert reader_count(8, 4) == 2
    assert reader_count(2, 4) == 1  # at least one each
    assert reader_count(16, 1) == 16
    monkeypatch.setenv("WEB_CONCURRENCY", "2")  # `studio serve --workers 2`
    assert reader_count(4) == 2


def encrypted_pdf() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.encrypt(user_password="secret", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def test_a_receipt_that_cannot_be_read_fails_once_saying_why(studio):
    client = await studio.signed_in()
    invoice_id = await draft_with_receipt(client, encrypted_pdf())
    made = await client.post("/leases", json=read(invoice_id))
    assert made.status_code == 201, made.text
    lease = await wait_for_status(client, made.json()["lease_id"], "failed", seconds=60)
    why = "The receipt could not be read: the PDF is locked with a password."
    # Tried once: the same file would fail the same way at every attempt.
    assert scalar(studio.settings.db_path, "SELECT attempts FROM tasks WHERE lease_id = ?",
                  lease["lease_id"]) == 1
    assert scalar(studio.settings.db_path, "SELECT error FROM tasks WHERE lease_id = ?",
                  lease["lease_id"]) == why
    assert lease["failures"] == [why]
    page = (await client.get(f"/leases/{lease['lease_id']}", headers=PAGE)).text
    assert "the PDF is locked with a password." in page
    # Asking again would read the same file: the page sends the person to the draft for another.
    assert lease["file_unreadable"] is True
    assert 'id="attach-another"' in page and f'href="/invoices/{invoice_id}"' in page


# --- a cent lost to rounding ---------------------------------------------------------------


def draft_total(reading: dict[str, Any]) -> Decimal:
    """What a draft adds up to with these lines, by the draft's own rules."""
    lines = [money.Line(line["description"] or "x", Decimal(line["quantity"]),
                        Decimal(line["unit_price"]), Decimal(line["tax_rate"] or 0))
             for line in reading["lines"] if line["quantity"] and line["unit_price"]]
    return money.add_up(lines, reading["currency"] or "EUR").total


def till(*prices: str, rate: str = "19") -> dict[str, Any]:
    lines = [{"description": f"Item {n}", "quantity": "1", "unit_price": price,
              "tax_rate": rate} for n, price in enumerate(prices)]
    total = sum(Decimal(price) for price in prices)
    return {"supplier": "Shop", "date": None, "currency": "EUR", "lines": lines,
            "total": str(total)}


@pytest.mark.parametrize("reading", [
    till("30.34", "56.53"), till("52.85", "81.44", rate="10"),
    till("5.88", "26.35", "73.11", rate="7"), till("62.55", "35.58", "69.25", "4.85", "86.54"),
], ids=["two lines", "ten percent", "seven percent", "five lines"])
@no_database
def test_net_prices_taxed_as_a_draft_taxes_them_come_to_the_receipt_s_total(reading):
    assert draft_total(as_lines_billed(reading)) == Decimal(reading["total"])


@no_database
def test_tills_of_several_lines_come_to_their_total_and_one_line_within_a_cent():
    import random

    draw = random.Random(32)
    for _ in range(500):
        prices = [f"{draw.randint(10, 9000) / 100:.2f}" for _ in range(draw.choice([1, 2, 5]))]
        reading = till(*prices, rate=draw.choice(["19", "7", "20", "10", "5.5"]))
        off = abs(draw_total_of(reading) - Decimal(reading["total"]))
        # One line's net taxed may not reach every amount (a 19 % tax skips a cent now and
        # then); two lines always can between them.
        assert off == 0 or (len(prices) == 1 and off == Decimal("0.01")), reading


def draw_total_of(reading: dict[str, Any]) -> Decimal:
    return draft_total(as_lines_billed(reading))


@no_database
def test_every_drawn_till_receipt_comes_to_its_total_on_a_draft():
    for shop in [*R.SHAPED_ON, *R.HELD_OUT]:
        reading = shop().expected()
        billed = as_lines_billed(reading)
        if billed is reading or not reading["total"]:
            continue  # an invoice's net lines, kept as they are
        taxed = [line for line in reading["lines"] if line["tax_rate"]]
        if len(taxed) == len(reading["lines"]):
            assert draft_total(billed) == Decimal(reading["total"]), shop.__name__


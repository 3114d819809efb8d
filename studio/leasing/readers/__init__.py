"""The built-in writer's receipt reader: a receipt's bytes -> a reading.

    read_receipt(data, content_type, timeout=30.0) -> Reading

A Reading is the `read_receipt` purpose's proposal: `{supplier, date, currency, lines:
[{description, quantity, unit_price, tax_rate}], total}`, the date in ISO 8601, the currency
as an ISO 4217 code, amounts, quantities and rates as decimal strings, None where unread.
Unit prices are as the receipt prints them (a till's prices include VAT, an invoice's columns
are usually net), signed (a deposit returned, a discount: `"-0.25"`); `tax_rate` is the
percentage (`"19"`, `"5.5"`).

Pure functions of bytes: nothing is fetched, stored or logged. The OCR (RapidOCR in this
process, or the tesseract program it waits for) takes seconds and up to a gigabyte, so the
caller decides where this runs and how long it may take: `processes.readers()`, reader
processes that take turns between actors and are killed past a reading's time. Every image
a reading makes is bounded in pixels (`ocr.MOST_MADE_PIXELS`), whatever the file says.
"""

from __future__ import annotations

from studio.leasing.readers.ocr import N_, UnreadableReceipt, receipt_text, tesseract
from studio.leasing.readers.parsing import Line, Reading, parse, parse_amount

__all__ = ["Line", "Reading", "UnreadableReceipt", "parse", "parse_amount", "read_receipt",
           "receipt_text", "tesseract"]


def read_receipt(data: bytes, content_type: str, timeout: float = 30.0) -> Reading:
    """Read one receipt (PNG, JPEG, WebP, HEIC or PDF). Raises UnreadableReceipt when the
    bytes are no such file, the OCR is missing or fails, or it takes longer than `timeout`
    seconds, or when nothing on it reads as a receipt's (blank, too blurred, a photo of
    something else): never a reading of invented lines."""
    reading = parse(receipt_text(data, content_type, timeout=timeout))
    if not reading["lines"] and reading["total"] is None:
        raise UnreadableReceipt(N_("no article and no total could be read on it: it may be"
                                   " blank, too blurred, or not a receipt"))
    return reading

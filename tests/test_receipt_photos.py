"""Receipts as phones photograph them (DESIGN.md part five): a receipt drawn here (Pillow and the
vendored font, as tests/receipts.py draws) and then photographed the way people do, at an
angle, bowed or half in shadow, read in a reader process as the studio reads it."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageChops, ImageFilter

from studio.leasing.readers import ocr
from tests import backends
from tests import receipts as R

# The OCR reads in a reader process, never in the test process (see tests/test_readers.py).
from tests.test_readers import read_receipt, reader_process  # noqa: F401

# Bytes in, a reading out: no database, so one pass proves it.
pytestmark = [backends.first_pass_only,
              pytest.mark.skipif(not ocr.rapid_installed(), reason="rapidocr and onnxruntime"
                                 " are not installed (pip install -e .)")]


def jpeg(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, format="JPEG", quality=85)
    return out.getvalue()


def from_the_side(image: Image.Image, nearer: float = 0.16) -> Image.Image:
    """The receipt photographed from its left, at an angle: its right edge farther off and
    shorter by `nearer` of its height, so that its rows fan out, rising at the top and falling
    at the foot, on a dark table."""
    w, h = image.size
    flat = [(0, 0), (w, 0), (w, h), (0, h)]
    seen = [(0, 0), (w, nearer / 2 * h), (w, h - nearer / 2 * h), (0, h)]
    # The perspective that takes each seen corner back to its flat one.
    rows, wanted = [], []
    for (x, y), (u, v) in zip(flat, seen, strict=True):
        rows += [[u, v, 1, 0, 0, 0, -x * u, -x * v], [0, 0, 0, u, v, 1, -y * u, -y * v]]
        wanted += [x, y]
    coefficients = np.linalg.solve(np.array(rows, float), np.array(wanted, float))
    return image.convert("RGB").transform(image.size, Image.PERSPECTIVE,
                                          tuple(coefficients), Image.BICUBIC,
                                          fillcolor=(70, 60, 50))


def bowed(image: Image.Image, depth: float = 0.05) -> Image.Image:
    """The receipt lying bowed, its middle sagging by `depth` of its height: every row bends,
    a name at the left stands higher than its price at the right."""
    pixels = np.asarray(image.convert("L"))
    h, w = pixels.shape
    out = np.full((h, w), 255, np.uint8)
    for x in range(w):
        sag = int(depth * h * np.sin(np.pi * x / (w - 1) * 0.8))
        out[sag:, x] = pixels[:h - sag, x]
    return Image.fromarray(out)


def lines_of(reading: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    return [(line["quantity"], line["unit_price"]) for line in reading["lines"]]


@pytest.mark.parametrize("shop, photograph", [(R.drogerie, from_the_side),
                                             (R.frischmarkt, bowed)],
                         ids=["at an angle", "bowed"])
def test_a_receipt_whose_rows_do_not_run_straight_is_read_row_by_row(shop, photograph):
    receipt = shop()
    reading = read_receipt(jpeg(photograph(R.draw(receipt))), "image/jpeg")
    want = receipt.expected()
    assert lines_of(reading) == [(line["quantity"], line["unit_price"])
                                 for line in want["lines"]]
    assert reading["total"] == want["total"]


def half_in_shadow(image: Image.Image, light: float = 0.45) -> Image.Image:
    """A close photo, the paper filling the frame, the phone's shadow over its lower half."""
    page = image.convert("RGB")
    w, h = page.size
    lit = Image.new("L", (w, h), 255)
    lit.paste(int(255 * light), (0, h // 2, w, h))
    lit = lit.filter(ImageFilter.GaussianBlur(h // 40))
    return ImageChops.multiply(page, Image.merge("RGB", [lit] * 3))


def test_a_close_photo_half_in_shadow_is_read_to_its_foot():
    receipt = R.frischmarkt()
    reading = read_receipt(jpeg(half_in_shadow(R.draw(receipt))), "image/jpeg")
    want = receipt.expected()
    assert lines_of(reading) == [(line["quantity"], line["unit_price"])
                                 for line in want["lines"]]
    assert reading["total"] == want["total"]
    assert reading["date"] == want["date"]

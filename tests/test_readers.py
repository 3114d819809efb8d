"""The receipt reader: bytes in, a reading out, on receipts these tests draw themselves.

The parser was shaped on receipts.SHAPED_ON and must read every line and total of those
exactly; receipts.HELD_OUT (other shops, layouts and words, never used to shape it) measure
how it holds on receipts nobody tuned for. Parser tests need no OCR; OCR tests need the
tesseract program.
"""

from __future__ import annotations

import io
import unicodedata
from decimal import Decimal
from typing import Any

import pytest
from PIL import Image

from studio.leasing import readers
from studio.leasing.readers import UnreadableReceipt, parse, parse_amount, tesseract
from studio.leasing.readers.ocr import pdf_text
from studio.leasing.readers.processes import Readers
from tests import backends
from tests import receipts as R

# Bytes in, a reading out: no database, so one pass proves it.
pytestmark = backends.first_pass_only

# Held out: the share of lines whose quantity and unit price must be read exactly.
HELD_OUT_LINES = 0.9
HELD_OUT_TOTALS = 0.8

needs_ocr = pytest.mark.skipif(tesseract() is None, reason="the tesseract program is not "
                               "installed (apt-get install tesseract-ocr tesseract-ocr-deu "
                               "tesseract-ocr-fra)")


READER: list[Readers] = []


@pytest.fixture(autouse=True, scope="module")
def reader_process() -> Any:
    """The OCR reads in a reader process of its own, as the studio's does, never in the test
    process: its engine's memory (up to a gigabyte) would otherwise stay in the test process's
    peak, which every process it starts later inherits (tests/test_reader_bounds.py measures
    a reader's)."""
    yield
    while READER:
        READER.pop().stop()


def read_receipt(data: bytes, content_type: str, timeout: float = 120.0) -> Any:
    """readers.read_receipt, in the reader process of these tests. What a reading reads is
    asserted here, not how fast (bench/receipts.py measures that; the limit's own test gives
    it 0.01 s): a reader's first reading loads its engine's models, and a test command
    sharing two cores among four pytest workers has taken more than the studio's 30 s."""
    if not READER:
        READER.append(Readers(1))
    return READER[0].call("tests", timeout + 30, readers.read_receipt, data, content_type,
                          timeout)


def plain_letters(text: str | None) -> str:
    folded = unicodedata.normalize("NFKD", text or "")
    return "".join(c for c in folded if not unicodedata.combining(c)).casefold()


def assert_reads(reading: dict[str, Any], receipt: R.Receipt, ocr: bool = False) -> None:
    want = receipt.expected()
    assert [(line["quantity"], line["unit_price"], line["tax_rate"])
            for line in reading["lines"]] == \
        [(line["quantity"], line["unit_price"], line["tax_rate"]) for line in want["lines"]]
    assert reading["total"] == want["total"]
    assert reading["date"] == want["date"]
    assert reading["currency"] == want["currency"]
    if ocr:
        assert plain_letters(reading["supplier"]) == plain_letters(want["supplier"])
    else:
        assert reading["supplier"] == want["supplier"]
        assert [line["description"] for line in reading["lines"]] == \
            [line["description"] for line in want["lines"]]


# --- the parser alone ---------------------------------------------------------------------

@pytest.mark.parametrize("shop", R.SHAPED_ON, ids=lambda f: f.__name__)
def test_the_text_of_receipts_shaped_on_reads_exactly(shop):
    receipt = shop()
    assert_reads(parse(receipt.text()), receipt)


def test_held_out_receipts_text_reads_most_lines_exactly():
    lines = totals = exact = right = 0
    for shop in R.HELD_OUT:
        receipt = shop()
        reading = parse(receipt.text())
        lines += len(receipt.items)
        exact += R.exact_lines(reading, receipt)
        totals += 1
        right += R.total_exact(reading, receipt)
    assert exact / lines >= HELD_OUT_LINES, f"{exact}/{lines} lines"
    assert right / totals >= HELD_OUT_TOTALS, f"{right}/{totals} totals"


@pytest.mark.parametrize("printed, value", [
    ("1.234,56", "1234.56"), ("1 234,56", "1234.56"), ("1,234.56", "1234.56"),
    ("12,50 €", "12.50"), ("£45.00", "45.00"), ("EUR 7,90", "7.90"), ("CHF 4.50", "4.50"),
    ("1'234.50", "1234.50"), ("0,99", "0.99"), ("-3,20", "-3.20"), ("12.345.678,90", "12345678.90"),
])
def test_amounts_as_receipts_print_them(printed, value):
    assert parse_amount(printed) == Decimal(value)


@pytest.mark.parametrize("printed", ["03.12.2026", "03/12/2026", "2026-12-03", "3 déc. 2026",
                                     "3 Dec 2026", "3. Dezember 2026", "3 décembre 2026",
                                     "03.12.26 14:02", "December 3, 2026"])
def test_dates_as_receipts_print_them(printed):
    reading = parse(f"Shop\n{printed}\nBrot 2,50\nSumme 2,50\n")
    assert reading["date"] == "2026-12-03"


def lines_of(text: str) -> list[tuple[str | None, str | None, str | None]]:
    return [(line["quantity"], line["unit_price"], line["tax_rate"])
            for line in parse(text)["lines"]]


@pytest.mark.parametrize("row, quantity, unit_price", [
    ("2 x 4,99 Croissant 9,98", "2", "4.99"),
    ("Butter 2x4.99 9.98", "2", "4.99"),
    ("1 @ £45.00 Double room £45.00", "1", "45.00"),
    ("3 Stk Schrauben 4,99 14,97", "3", "4.99"),
    ("2 Knödel à 6,40 12,80", "2", "6.40"),
    ("3x Gipfeli 7.20", "3", "2.40"),
    ("Brötchen 0,45", "1", "0.45"),
])
def test_quantities_as_receipts_print_them(row, quantity, unit_price):
    total = parse_amount(row.split()[-1])
    assert lines_of(f"Shop\n{row}\nTotal {total}\n") == [(quantity, unit_price, None)]


def test_a_quantity_line_belongs_to_the_article_it_multiplies():
    below = "Shop\nBananen 1,98 B\n  2 Stk x 0,99\nBrot 2,50 B\nSUMME 4,48\nB= 7,0% 4,19 0,29\n"
    assert lines_of(below) == [("2", "0.99", "7"), ("1", "2.50", "7")]
    above = "Shop\nBrot 2,50\n2 x 0,99\nBananen 1,98\nTOTAL 4,48\n"
    assert lines_of(above) == [("1", "2.50", None), ("2", "0.99", None)]


@pytest.mark.parametrize("tax_line, rate", [
    ("MwSt 19% 0,40", "19"), ("USt. 7 % 0,16", "7"), ("TVA 20,0 % 0,42", "20"),
    ("VAT 20% 0.42", "20"), ("incl. TVA 5,5 % 0,13", "5.5"), ("MWST 8.1% inkl. 0.19", "8.1"),
])
def test_one_rate_on_the_receipt_is_every_line_s_rate(tax_line, rate):
    text = f"Shop\nTee 2,50\nKaffee 0,00\nTotal 2,50\n{tax_line}\n"
    assert {line[2] for line in lines_of(text)} == {rate}


def test_a_rate_line_beginning_with_its_rate_is_no_rate_table_code():
    text = "Shop\nPapier 4,29\nOrdner 2,15\nSumme netto 6,44\n19 % USt 1,22\nBetrag 7,66\n"
    assert lines_of(text) == [("1", "4.29", "19"), ("1", "2.15", "19")]


def test_the_most_particular_total_word_names_the_total():
    text = "Shop\nTent 100.00\nMat 20.00\nGoods total 120.00\nVAT at 20% 24.00\nTotal due 144.00\n"
    assert parse(text)["total"] == "144.00"


def test_letter_codes_take_their_rate_from_the_receipt_s_table():
    text = ("Shop\nMilch 1,19 B\nSeife 1,45 A\nSUMME 2,64\n"
            "A= 19,0% 1,22 0,23 1,45\nB= 7,0% 1,11 0,08 1,19\n")
    assert lines_of(text) == [("1", "1.19", "7"), ("1", "1.45", "19")]


def test_the_noise_of_a_receipt_is_not_read_as_lines():
    text = """Bäckerei Horn
Bahnhofstraße 4
34117 Kassel
Tel. 0561 123456
USt-IdNr. DE123456789
FR 12 345678901
VAT Reg No GB 123 4567 89
03.12.2026 08:15 Bon 12
Brezel 0,90
Kaffee 2,40
Summe 3,30
EC-Karte 3,30
Gegeben 5,00
Rückgeld 1,70
MwSt 7% 0,22
"""
    reading = parse(text)
    assert reading["supplier"] == "Bäckerei Horn"
    assert [(line["description"], line["unit_price"]) for line in reading["lines"]] == \
        [("Brezel", "0.90"), ("Kaffee", "2.40")]
    # No sign printed; a German VAT number and MwSt say euros.
    assert reading["total"] == "3.30" and reading["currency"] == "EUR"


@pytest.mark.parametrize("text, currency", [
    ("Shop\nTee 2,50 €\nTotal 2,50 €\n", "EUR"), ("Shop\nTea £2.50\nTotal £2.50\n", "GBP"),
    ("Shop\nTee 2.50\nTotal CHF 2.50\n", "CHF"), ("Shop\nTee 2,50\nSUMME EUR 2,50\n", "EUR"),
    ("Shop\nCHE-123.456.789 MWST\nTee 2.50\nTotal 2.50\n", "CHF"),
    ("Shop\nTea 2.50\nTotal 2.50\n", None),
])
def test_the_currency_as_printed(text, currency):
    assert parse(text)["currency"] == currency


def test_an_ocr_misreading_is_corrected_when_the_sums_confirm_it():
    # 1,I9 is 1,19, 2,8O is 2,80 and 145 is 1,45: the total says so.
    text = "Shop\nMilch 1,I9\nBrot 2,8O\nSeife 145 A\nSUMME 5,44\nA= 19% 1,22 0,23\n"
    assert lines_of(text) == [("1", "1.19", None), ("1", "2.80", None), ("1", "1.45", "19")]


def test_an_ocr_misreading_the_sums_do_not_confirm_stays_unread():
    text = "Shop\nMilch 1,I9\nBrot 2,80\nSUMME 9,99\n"
    assert lines_of(text) == [("1", None, None), ("1", "2.80", None)]


def test_one_digit_misread_is_put_right_only_where_the_sums_leave_no_other_choice():
    # 7,95 read as 1,95: 6,00 short. 11,16 could also be 17,16, but 4 x 2,79 says it is not.
    text = "Shop\nDübel 6,98\nKabel 4,99\nBirne 4 x 2,79 11,16\nRolle 1,95\nSumme 31,08\n"
    assert lines_of(text) == [("1", "6.98", None), ("1", "4.99", None), ("4", "2.79", None),
                              ("1", "7.95", None)]
    # Two lines could each be the one misread: neither is changed.
    assert lines_of("Shop\nTee 1,95\nMilch 1,95\nSumme 9,90\n") == [("1", "1.95", None),
                                                                       ("1", "1.95", None)]


def test_the_sums_choose_between_readings_of_a_spaced_amount():
    # 1 049,00 is a thousand and forty-nine; 12 125,00 is twelve at a hundred and twenty-five.
    text = ("Quincaillerie\n1 Perceuse 1 049,00 1 049,00\n12 Vis 125,00 1 500,00\n"
            "Total HT 2 549,00\nTVA 20 % 509,80\nNet à payer 3 058,80 €\n")
    assert lines_of(text) == [("1", "1049.00", "20"), ("12", "125.00", "20")]
    assert parse(text)["total"] == "3058.80"


def test_a_reading_is_plain_data_with_decimal_strings():
    reading = parse(R.crown_inn().text())
    assert set(reading) == {"supplier", "date", "currency", "lines", "total"}
    for line in reading["lines"]:
        assert set(line) == {"description", "quantity", "unit_price", "tax_rate"}
        for key in ("quantity", "unit_price", "tax_rate"):
            assert isinstance(line[key], str)
            Decimal(line[key])
    assert parse("")["lines"] == [] and parse("")["total"] is None


# --- PDFs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shop", [R.eisenwaren, R.crown_inn, R.frischmarkt, R.druckerei,
                                  R.quincaillerie], ids=lambda f: f.__name__)
def test_a_pdf_s_text_layer_is_read_without_ocr(shop, monkeypatch):
    receipt = shop()
    monkeypatch.setattr("studio.leasing.readers.ocr.tesseract", lambda: None)
    monkeypatch.setattr("studio.leasing.readers.ocr.rapid_installed", lambda: False)
    # Read here, where the OCR is taken away: a PDF's text layer needs none.
    assert_reads(readers.read_receipt(R.pdf(receipt), "application/pdf"), receipt)


def test_held_out_pdfs_read_most_lines_exactly():
    exact = lines = 0
    for shop in R.HELD_OUT:
        receipt = shop()
        reading = read_receipt(R.pdf(receipt), "application/pdf")
        exact += R.exact_lines(reading, receipt)
        lines += len(receipt.items)
    assert exact / lines >= HELD_OUT_LINES, f"{exact}/{lines} lines"


def test_what_is_no_receipt_is_refused():
    with pytest.raises(UnreadableReceipt):
        read_receipt(b"hello", "text/plain")
    with pytest.raises(UnreadableReceipt):
        read_receipt(b"%PDF-1.4 broken", "application/pdf")
    with pytest.raises(UnreadableReceipt):
        read_receipt(b"\x89PNG\r\n\x1a\nbroken", "image/png")


def test_an_image_larger_than_any_receipt_is_refused_before_it_is_decoded():
    out = io.BytesIO()
    Image.new("1", (8000, 8000), 1).save(out, format="PNG")
    with pytest.raises(UnreadableReceipt, match="larger than any receipt"):
        read_receipt(out.getvalue(), "image/png")


def test_a_text_of_endless_numbers_is_read_in_bounded_time():
    import time

    started = time.perf_counter()
    for chunk in ("1,00 2 3,5 x 4,99 ", "1 234,56 "):
        reading = parse(("Item " + chunk * 40 + "\n") * 2000)
    assert time.perf_counter() - started < 20
    assert isinstance(reading["lines"], list)


# --- OCR ----------------------------------------------------------------------------------

def photo_of(receipt: R.Receipt, seed: int) -> bytes:
    return R.photograph(R.draw(receipt), seed)


@needs_ocr
@pytest.mark.parametrize("n, shop", list(enumerate(R.SHAPED_ON)), ids=lambda v: getattr(
    v, "__name__", str(v)))
def test_a_phone_photo_of_a_receipt_shaped_on_reads_exactly(n, shop):
    receipt = shop()
    assert_reads(read_receipt(photo_of(receipt, n), "image/jpeg"), receipt, ocr=True)


@needs_ocr
def test_clean_scans_read_exactly_as_png_and_webp():
    receipt = R.frischmarkt()
    assert_reads(read_receipt(R.png(R.draw(receipt)), "image/png"), receipt, ocr=True)
    receipt = R.boulangerie()
    out = io.BytesIO()
    R.draw(receipt).save(out, format="WEBP", quality=90)
    assert_reads(read_receipt(out.getvalue(), "image/webp"), receipt, ocr=True)


@needs_ocr
def test_held_out_phone_photos_read_most_lines_exactly():
    exact = lines = right = 0
    for n, shop in enumerate(R.HELD_OUT):
        receipt = shop()
        reading = read_receipt(photo_of(receipt, 100 + n), "image/jpeg")
        exact += R.exact_lines(reading, receipt)
        lines += len(receipt.items)
        right += R.total_exact(reading, receipt)
    assert exact / lines >= HELD_OUT_LINES, f"{exact}/{lines} lines"
    assert right / len(R.HELD_OUT) >= HELD_OUT_TOTALS, f"{right} totals"


@needs_ocr
def test_a_scanned_pdf_without_text_is_read_by_ocr():
    pytest.importorskip("pypdfium2")
    from fpdf import FPDF

    receipt = R.lindenhof()
    doc = FPDF(format=(80, 200))
    doc.add_page()
    image = R.draw(receipt)
    doc.image(image, x=0, y=0, w=80)
    data = bytes(doc.output())
    assert pdf_text(data) is None
    assert_reads(read_receipt(data, "application/pdf"), receipt, ocr=True)


@needs_ocr
def test_a_heic_photo_is_read():
    heif = pytest.importorskip("pillow_heif")
    receipt = R.crown_inn()
    out = io.BytesIO()
    heif.from_pillow(Image.open(io.BytesIO(photo_of(receipt, 3)))).save(out, quality=90)
    assert_reads(read_receipt(out.getvalue(), "image/heic"), receipt, ocr=True)


@needs_ocr
def test_ocr_past_its_time_is_refused():
    with pytest.raises(UnreadableReceipt, match="longer than"):
        read_receipt(R.png(R.draw(R.eisenwaren())), "image/png", timeout=0.01)

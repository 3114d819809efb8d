"""Receipt layouts of shops and countries the reader was not shaped on (DESIGN.md part five):
Italian, British, US, Dutch, Portuguese, Austrian and Swiss tills. Each text is written here
as such a till prints it and OCR reads it; each test fails without the reading it asks for."""

from __future__ import annotations

from typing import Any

from studio.leasing.readers import parse


def lines_of(reading: dict[str, Any]) -> list[tuple[str | None, str | None, str | None]]:
    return [(line["quantity"], line["unit_price"], line["tax_rate"])
            for line in reading["lines"]]


def test_an_italian_till_prints_each_article_s_rate_before_its_price():
    # A documento commerciale: DESCRIZIONE  IVA  Prezzo; an article whose name starts with
    # A to D is no row of a rate table, and its rate is no amount.
    text = """BAR CENTRALE SNC
Piazza Duomo 3 Firenze
P. IVA 05544332211
DOCUMENTO COMMERCIALE
di vendita o prestazione
DESCRIZIONE IVA Prezzo(€)
2 x 1,40
CAFFE' MACCHIATO 10,00% 2,80
BRIOCHE 10,00% 1,30
ACQUA FRIZZANTE 22,00% 1,50
DOLCE DEL GIORNO 10,00% 4,00
SCONTO 10,00% -0,60
TOTALE COMPLESSIVO 9,00
DI CUI IVA 0,87
PAGAMENTO CONTANTE 10,00
RESTO 1,00
IMPORTO PAGATO 9,00
14-06-2024 10:21
DOCUMENTO N. 0012-0034
"""
    reading = parse(text)
    assert lines_of(reading) == [("2", "1.40", "10"), ("1", "1.30", "10"), ("1", "1.50", "22"),
                                 ("1", "4.00", "10"), ("1", "-0.60", "10")]
    assert [line["description"] for line in reading["lines"]][:2] == ["CAFFE' MACCHIATO",
                                                                      "BRIOCHE"]
    assert (reading["total"], reading["date"], reading["currency"]) == ("9.00", "2024-06-14",
                                                                        "EUR")


def test_a_column_of_counts_before_the_articles_is_each_line_s_quantity():
    # A café's bill: the count, the article, what the count costs; one count above one is
    # enough to read the column as counts.
    text = """THE LITTLE KITCHEN
8 Mill Lane
Leeds LS2 7HU
1 Americano 2.80
3 Scone 7.50
1 Hot Chocolate 3.40
SUBTOTAL £13.70
VAT 20% £2.28
TOTAL TO PAY £13.70
CARD £13.70
"""
    reading = parse(text)
    assert lines_of(reading) == [("1", "2.80", "20"), ("3", "2.50", "20"), ("1", "3.40", "20")]
    assert (reading["total"], reading["currency"]) == ("13.70", "GBP")


def test_a_us_receipt_writes_its_dates_month_first():
    dollars = """CORNER MARKET
Sourdough 5.49
Coffee beans 2 @ 7.99 15.98
SUBTOTAL $21.47
TAX $0.00
TOTAL $21.47
VISA $21.47
04/09/2024 06:12 PM
"""
    assert parse(dollars)["date"] == "2024-04-09"
    unsigned = """HARDWARE DEPOT
1200 Elm Street
Austin, TX 78701
HAMMER 12.97
SCREWS 4.28
SUBTOTAL 17.25
TAX 8.250 % 1.42
TOTAL 18.67
DEBIT TEND 18.67
04/09/24 10:15:03
"""
    assert parse(unsigned)["date"] == "2024-04-09"
    # Pounds and euros stay day first.
    pounds = "SHOP\nTea 2.10\nTOTAL £2.10\nCARD £2.10\n04/09/2024 12:00\n"
    assert parse(pounds)["date"] == "2024-09-04"


def test_what_the_discounts_came_to_is_neither_an_article_nor_the_total():
    # The oat milk's price was lost to a crease: the lines do not come to the total, and the
    # total is still the total, not the savings.
    text = """GREENGROCER & CO
Cherry tomatoes 2.20
Free range eggs 2.75
Oat milk
MULTIBUY SAVING -0.60
TOTAL 6.15
TOTAL SAVINGS 0.60
CONTACTLESS 6.15
"""
    reading = parse(text)
    assert reading["total"] == "6.15"
    assert [line["unit_price"] for line in reading["lines"]] == ["2.20", "2.75", "-0.60"]


def test_a_discount_printed_under_the_subtotal_is_a_line():
    italian = """FERRAMENTA MORETTI
P.IVA 04455667788
DOCUMENTO COMMERCIALE
VITI LEGNO 22,00% 3,20
COLLA VINILICA 22,00% 4,80
SUBTOTALE 8,00
SCONTO 22,00% -0,80
TOTALE COMPLESSIVO 7,20
DI CUI IVA 1,30
PAGAMENTO ELETTRONICO 7,20
"""
    reading = parse(italian)
    assert lines_of(reading) == [("1", "3.20", "22"), ("1", "4.80", "22"), ("1", "-0.80", "22")]
    assert reading["total"] == "7.20"
    dutch = """SUPERMARKT DE HOEK
1 APPELS 2,49
2 YOGHURT 1,15 2,30
SUBTOTAAL 4,79
BONUS YOGHURT -0,50
UW VOORDEEL 0,50
TOTAAL 4,29
PIN 4,29
"""
    reading = parse(dutch)
    assert [(line["quantity"], line["unit_price"]) for line in reading["lines"]] == [
        ("1", "2.49"), ("2", "1.15"), ("1", "-0.50")]
    assert reading["total"] == "4.29"

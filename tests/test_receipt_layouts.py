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

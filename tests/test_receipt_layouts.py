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
    # A dollar sign read in the noise of a receipt that names its MwSt changes nothing.
    stray = "LADEN\nBrot 2,10 $\nSUMME 2,10\nMwSt 7% 0,14\n04/09/2024 12:00\n"
    assert parse(stray)["date"] == "2024-09-04"


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


def test_the_currency_a_till_does_not_sign_is_its_country_s():
    # OCR often loses the pound and dollar signs; the country's marks remain.
    british = """NEWSAGENT LTD
14 Station Road, Reading RG1 1LB
VAT Reg No. 123 4567 89
Newspaper 2.50
Chocolate 1.10
TOTAL 3.60
CASH 5.00
CHANGE DUE 1.40
"""
    assert parse(british)["currency"] == "GBP"
    american = "DELI ON 5TH\n210 5th Ave, New York NY 10010\nBagel 3.25\nBALANCE 3.25\n"
    assert parse(american)["currency"] == "USD"
    italian = "EDICOLA\nGIORNALE 1,80\nTOTALE EURO 1,80\nCONTANTI 2,00\nRESTO 0,20\n"
    assert parse(italian)["currency"] == "EUR"
    for dutch_or_italian in ["BAKKER\nBrood 2,10\nTotaal 2,10\n", "BAR\nPANE 2,10\nTOTALE 2,10\n"]:
        assert parse(dutch_or_italian)["currency"] == "EUR"


def test_a_month_s_name_with_a_two_digit_year_is_a_date():
    assert parse("KIOSK\nTea 2.10\nTotal 2.10\n14-Feb-24 09:12\n")["date"] == "2024-02-14"
    assert parse("KIOSK\nTea 2.10\nTotal 2.10\n03 MAR 23 18:40\n")["date"] == "2023-03-03"


def test_the_till_s_rounding_is_no_article():
    text = """DORFLADEN
Brot 3.40
Kaese 7.85
Rundung -0.05
Total CHF 11.20
Bar CHF 20.00
Rueckgeld CHF 8.80
"""
    reading = parse(text)
    assert [line["unit_price"] for line in reading["lines"]] == ["3.40", "7.85"]
    assert (reading["total"], reading["currency"]) == ("11.20", "CHF")


def test_a_total_printed_large_is_read_from_the_row_under_its_word():
    # Double-height type: OCR reads the word and its amount as two rows.
    italian = "ALIMENTARI\nPANE 2,10\nLATTE 1,29\nTOTALE COMPLESSIVO\n3,39\nCONTANTI 5,00\n"
    assert parse(italian)["total"] == "3.39"
    british = "CORNER SHOP\nMilk 1.45\nBread 1.10\nBALANCE DUE\n£2.55\nCASH £5.00\n"
    assert parse(british)["total"] == "2.55"


def test_a_row_of_numbers_under_an_article_s_name_is_that_article():
    # Portuguese and Italian tills count pieces (2 UN X, 3 PZ X) on a row of their own.
    text = """MERCEARIA CENTRAL
LEITE MEIO GORDO
2 UN X 0,89 1,78
PAO DE FORMA 1,49
BANANA
0,845 kg x 1,29 EUR/kg 1,09
TOTAL A PAGAR 4,36
"""
    reading = parse(text)
    assert [(line["description"], line["quantity"], line["unit_price"])
            for line in reading["lines"]] == [("LEITE MEIO GORDO", "2", "0.89"),
                                              ("PAO DE FORMA", "1", "1.49"),
                                              ("BANANA", "0.845", "1.29")]
    italian = "BAR\nTRAMEZZINO 3 PZ x 2,50 7,50\nTOTALE 7,50\n"
    assert [(line["description"], line["quantity"]) for line in parse(italian)["lines"]] == [
        ("TRAMEZZINO", "3")]


def test_the_ways_of_paying_of_more_countries_are_no_articles():
    # The total's row lost to a fold: what was handed over is no article.
    for paid in ["TWINT 10.00", "CARTAO 10,00", "Numerário 10,00", "PIN 10,00", "CASHBACK 10.00",
                 "Retour EUR 1,50",
                 "AMOUNT TENDERED 10.00"]:
        reading = parse(f"SHOP\nBrot 3.40\nKaese 5.10\n{paid}\n")
        assert [line["unit_price"] for line in reading["lines"]] == ["3.40", "5.10"], paid


def test_a_weight_in_pounds_is_the_article_s_quantity():
    text = "FARM STAND\nBANANAS 1.20\n2.04 lb @ $0.59/lb\nMILK 3.49\nTOTAL $4.69\n"
    assert [(line["quantity"], line["unit_price"]) for line in parse(text)["lines"]] == [
        ("2.04", "0.59"), ("1", "3.49")]


def test_dates_as_more_countries_print_them():
    for printed in ["2024/03/12 10:05", "2024.03.12", "12 marzo 2024", "12 mrt 2024",
                    "12 março 2024", "12-MAR-24"]:
        assert parse(f"NEGOZIO\n{printed}\nPANE 2,10\nTOTALE 2,10\n")["date"] == "2024-03-12", \
            printed


def test_the_kind_of_document_printed_above_the_shop_is_not_its_name():
    for heading in ["DOCUMENTO COMMERCIALE", "SCONTRINO", "FATURA SIMPLIFICADA", "KASSABON"]:
        text = f"{heading}\nOSTERIA DEL PONTE\nPANE 2,10\nTOTALE 2,10\n"
        assert parse(text)["supplier"] == "OSTERIA DEL PONTE", heading


def test_more_words_for_the_total():
    # One price lost to a crease: only the word says which amount is the total.
    for word in ["TOTALE DOCUMENTO", "TOTALE SCONTRINO", "Totaal bedrag", "Te voldoen",
                 "T0TALE COMPLESSIVO"]:
        text = f"NEGOZIO\nPANE 2,10\nFORMAGGIO\nVINO 7,80\n{word} 13,40\nCONTANTE 20,00\n"
        assert parse(text)["total"] == "13.40", word


def test_a_count_of_each_under_the_article_is_its_quantity():
    text = "HARDWARE\nLIGHT BULB 6.98\n2 EA @ 3.49\nTAPE 2.99\nTOTAL $9.97\n"
    assert [(line["quantity"], line["unit_price"]) for line in parse(text)["lines"]] == [
        ("2", "3.49"), ("1", "2.99")]


def test_an_article_named_with_a_word_for_paying_is_an_article():
    text = """NEWS & GIFTS
BIRTHDAY CARD 2.99
PHONE CREDIT 10.00
WRAPPING PAPER 1.50
TOTAL 14.49
CARD 14.49
"""
    reading = parse(text)
    assert [line["unit_price"] for line in reading["lines"]] == ["2.99", "10.00", "1.50"]
    assert reading["total"] == "14.49"


def test_a_date_a_voucher_is_valid_until_is_not_the_receipt_s():
    for valid in ["BUONO VALIDO FINO AL 31/12/2024", "Geldig tot 31-12-2024",
                  "Cupão válido até 31/12/2024", "Use by 31/12/2024"]:
        text = f"NEGOZIO\n{valid}\nPANE 2,10\nTOTALE 2,10\n14/06/2024 10:00\n"
        assert parse(text)["date"] == "2024-06-14", valid


def test_a_zero_read_as_u_is_put_right_where_the_weight_times_its_price_confirms_it():
    text = """FRUTERIA
TOMATES
0,375 kg x 2,40 €/kg U,90
PAN 1,10
TOTAL 2,00
"""
    assert [(line["quantity"], line["unit_price"]) for line in parse(text)["lines"]] == [
        ("0.375", "2.40"), ("1", "1.10")]


def test_a_total_that_says_its_tax_is_in_it_is_the_total():
    # One price lost to a crease: only the words say which amount is the total.
    for word in ["TOTAL c/IVA", "TOTALE IVA COMPRESA", "Total IVA incluído",
                 "Totaal inclusief BTW"]:
        text = f"LOJA\nPAO 2,10\nQUEIJO\nVINHO 7,80\n{word} 13,40\nIVA 23% 2,51\n"
        assert parse(text)["total"] == "13.40", word


def test_a_discount_printed_without_its_minus_takes_its_amount_off():
    text = """ALIMENTARI
PANE 2,10
LATTE 1,29
SCONTO 0,50
TOTALE 2,89
TOTAL SAVING 0,50
"""
    reading = parse(text)
    assert [line["unit_price"] for line in reading["lines"]] == ["2.10", "1.29", "-0.50"]
    assert reading["total"] == "2.89"


def test_a_date_glued_to_its_time_is_read_and_a_time_is_no_year():
    glued = "LADEN\n03.12.202614:02 0761/2\nBrot 2,50\nSUMME 2,50\n"
    assert parse(glued)["date"] == "2026-12-03"
    hours = "LADEN\nBrot 2,50\nSUMME 2,50\nMittwoch 24.12. 08:00-14:00 Uhr\n03.12.2026 14:02\n"
    assert parse(hours)["date"] == "2026-12-03"


def test_a_total_s_word_with_a_digit_ocr_put_for_a_letter_still_names_the_total():
    for word in ["T0TALE", "5UMME", "TOTA1", "T0TAAL"]:
        text = f"NEGOZIO\nPANE 2,10\nFORMAGGIO\nVINO 7,80\n{word} 13,40\nCONTANTE 20,00\n"
        assert parse(text)["total"] == "13.40", word


def test_a_payer_read_glued_or_without_its_a_still_names_the_total():
    # Shadow or an angle: OCR glues "A payer" or loses its A; one price lost to a crease.
    for word in ["Apayer", "payer", "A payer"]:
        text = f"MAGASIN\nPAIN 2,10\nFROMAGE\nVIN 7,80\n{word} 13,40\nCB 13,40\n"
        assert parse(text)["total"] == "13.40", word


def test_a_discounts_own_percent_is_no_tax_rate_where_no_article_is_taxed_at_it():
    own = "ALIMENTARI\nPANE 10,00% 2,10\nLATTE 10,00% 1,29\nSCONTO 20% 0,26\nTOTALE 3,13\n"
    reading = parse(own)
    assert [(line["unit_price"], line["tax_rate"]) for line in reading["lines"]] == [
        ("2.10", "10"), ("1.29", "10"), ("-0.26", None)]
    assert reading["total"] == "3.13"
    # The till's rate column, printed on the discount too, stays its rate.
    column = "ALIMENTARI\nPANE 10,00% 2,10\nLATTE 10,00% 1,29\nSCONTO 10,00% 0,26\nTOTALE 3,13\n"
    assert [line["tax_rate"] for line in parse(column)["lines"]] == ["10", "10", "10"]

"""Text read from a receipt -> a reading: the supplier, the date, the currency, the lines
(description, quantity, unit price, VAT rate) and the total.

Receipts print amounts, quantities and rates in many ways; a line can often be read more than
one way, and OCR confuses O with 0, l with 1, S with 5 and drops or doubles a decimal comma.
Each line therefore yields every reading it allows, and the arithmetic the receipt carries
chooses among them: quantity x unit price = amount, the lines add up to the total or to the
net, tax at a statutory rate. A reading that needs a correction of what was printed is taken
only when that arithmetic confirms it; otherwise the field stays unread (None).

Everything here is pure: text in, a reading out. Amounts are Decimals, written as decimal
strings; nothing passes through a float.
"""

from __future__ import annotations

import datetime
import itertools
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import TypedDict

from studio import lines as rule

CENT = Decimal("0.01")
# What is read of a text, however long it is: a receipt has far fewer and shorter lines.
MAX_TEXT_LINES = 300
MAX_LINE = 160
CONTROL = re.compile(rule.CONTROL)


def times(quantity: Decimal, unit_price: Decimal) -> Decimal:
    """What a till prints for a quantity at a unit price: rounded half up to the cent
    (38,52 l x 1,749 = 67,37)."""
    return (quantity * unit_price).quantize(CENT, rounding=ROUND_HALF_UP)


class Line(TypedDict):
    description: str | None
    quantity: str | None
    unit_price: str | None
    tax_rate: str | None


class Reading(TypedDict):
    supplier: str | None
    date: str | None
    currency: str | None
    lines: list[Line]
    total: str | None


# --- the words receipts use ----------------------------------------------------------------

KNOWN_RATES = {Decimal(r) for rates in rule.STATUTORY_RATES.values() for r in rates}

TOTAL_WORDS = {
    "de": ["zu zahlen", "zu bezahlen", "endsumme", "gesamtbetrag", "rechnungsbetrag",
           "bruttobetrag", "bruttosumme", "rechnungssumme", "zahlbetrag", "endbetrag",
           "gesamtsumme", "summe", "gesamt", "betrag", "brutto"],
    "fr": ["total ttc", "net à payer", "net a payer", "montant ttc", "montant dû", "montant du",
           "à payer", "a payer", "à régler", "total",
           # "A payer" as OCR reads it in shadow or at an angle: glued, or its A lost.
           "àpayer", "apayer", "payer"],
    "en": ["amount due", "balance due", "total due", "grand total", "total to pay", "to pay",
           "balance to pay", "balance", "total"],
    "es": ["total a pagar", "importe total", "total factura", "total compra", "a pagar",
           "importe", "total"],
    "it": ["totale complessivo", "complessivo", "totale euro", "totale eur", "totale documento",
           "totale scontrino", "totale dovuto", "importo pagato", "totale da pagare",
           "da pagare", "totale", "importo"],
    "nl": ["totaal te betalen", "te betalen", "totaalbedrag", "totaal bedrag", "te voldoen",
           "totaal", "bedrag"],
    "pt": ["total a pagar", "valor a pagar", "valor total", "a pagar", "total"],
}
GENERIC_TOTAL_WORDS = {"total", "summe", "gesamt", "betrag", "brutto", "importe", "importo",
                       "balance",
                       "totale", "totaal", "bedrag"}
# Total words that also head a column (Descripción  Precio  Importe): alone on a row, no total.
COLUMN_WORDS = {"importe", "importo", "bedrag", "balance"}
NET_WORDS = {
    "de": ["zwischensumme", "nettobetrag", "summe netto", "netto", "warenwert"],
    "fr": ["total ht", "sous-total", "sous total", "montant ht"],
    "en": ["subtotal", "sub-total", "sub total", "net total", "total net", "net amount"],
    "es": ["subtotal", "base imponible", "base imp", "total sin iva"],
    "it": ["subtotale", "sub totale", "imponibile", "totale imponibile"],
    "nl": ["subtotaal", "sub-totaal", "excl. btw", "excl btw", "netto bedrag"],
    "pt": ["subtotal", "sub-total", "base tributável", "base tributavel", "valor líquido"],
}
TAX_WORDS = ["mwst", "mw.-st", "mwst.", "ust", "ust.", "umsatzsteuer", "mehrwertsteuer",
             "steuer", "tva", "vat", "tax", "iva", "btw", "imposta", "cuota"]
# An amount taken off the articles above it.
DISCOUNT_WORDS = ["sconto", "rabatt", "nachlass", "korting", "discount", "remise", "réduction",
                  "reduction", "descuento", "desconto", "price cut", "saving"]
# A total that says its tax is in it (TOTAL INC VAT, TOTALE IVA COMPRESA, Total c/IVA).
INCLUDING = re.compile(r"\b(?:inc|incl|including|inkl|inklusive|ttc|inclusive|inclusief|inclusa"
                       r"|incluso|compresa|compreso|incluído|incluido|incluída|incluida|com|con)\b"
                       r"|\bc/ ?(?:iva|btw)")
# What the discounts came to, printed beside them: neither an article nor the total.
SAVING_WORDS = ["savings", "total saving", "you saved", "you save", "uw voordeel", "voordeel",
                "sie sparen", "ihre ersparnis", "ersparnis", "gespart", "risparmio",
                "hai risparmiato", "économie", "economie", "économisé", "ahorro", "ha ahorrado",
                "poupança", "poupanca", "poupou"]
ROUNDING_WORDS = ["rundung", "rundungsdifferenz", "gerundet", "arrondi", "arrondi caisse",
                  "arrotondamento", "arrot.", "afronding", "afrondingsverschil", "rounding",
                  "redondeo", "arredondamento"]
# A line naming a way of paying, change given back, or a tip is never an article.
PAYMENT_WORDS = [
    "ec-cash", "ec cash", "ec-karte", "girocard", "kartenzahlung", "karte", "bar", "gegeben",
    "geg.", "visa", "mastercard", "maestro", "amex", "bankomat", "kreditkarte", "kontaktlos",
    "carte bancaire", "carte", "cb", "espèces", "especes", "chèque", "cheque", "card", "cash",
    "debit", "credit", "contactless", "paid", "payé", "bezahlt", "rückgeld", "ruckgeld",
    "zurück", "wechselgeld", "rendu", "monnaie", "change", "trinkgeld", "pourboire",
    # es / it / nl / pt: cash handed over, change, cards
    "efectivo", "entregado", "entrega", "cambio", "devolución", "devolucion", "tarjeta",
    "contante", "contanti", "resto", "pagamento", "bancomat", "carta di credito", "pagato",
    "contant", "wisselgeld", "terug", "pinnen", "pinbetaling", "betaald",
    "dinheiro", "troco", "multibanco", "pago", "pagado", "cartão", "cartao", "numerário",
    "numerario", "pin", "twint", "postfinance", "v pay", "vpay", "cashback", "tendered", "tend",
    "retour", "retourgeld", "non riscosso",
]
# A tip is a payment only where the line is the word and an amount (Tip 2.00, Pourboire: 3,00),
# never a shop's brand before an article's name (TIP BALKANKAESE 0,79).
# Words that are also in articles' names (Supp. resto, Cambio olio, Carte cadeau, Birthday card):
# a payment only where the word heads the line and it does not start as an article does, with
# its quantity.
WEAK_PAYMENT_WORDS = {"resto", "cambio", "change", "pago", "carte", "card", "bar", "entrega",
                      "terug", "credit", "debit", "pin"}
ARTICLE_START = re.compile(r"^\s*\d{1,3}(?:[.,]\d{1,3})?\s*(?:x|×)?\s+[^\W\d_]{2}")


def _payment(line: str, lower: str) -> bool:
    said = [w for w in PAYMENT_WORDS if _has_word(lower, [w])]
    if not said:
        return bool(TIP_LINE.match(line))
    if all(w in WEAK_PAYMENT_WORDS for w in said):
        # A way of paying heads its line (CARD 10.30, Resto 1,62); after an article's name
        # the word is part of it (BIRTHDAY CARD 2.99, Supp. resto 1,50).
        first = re.match(r"[\W\d_]*([^\W\d_]+)", lower)
        return not ARTICLE_START.match(line) and bool(first) and any(
            lower[first.start(1):].startswith(w) for w in said)
    return True


TIP_LINE = re.compile(r"^\s*(?:tip|tips|gratuity|service tip)\s*[:.]?\s*(?:€|£|\$|eur|gbp)?\s*"
                      r"[-−]?\d[\d.,]*\s*(?:€|£|\$|eur|gbp)?\s*$", re.I)
UK_POSTCODE = re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}\b")
SKIP_PATTERNS = [
    r"\b(?:ust|mwst|vat|tva)[-. ]?(?:id|nr|no|reg|intracom)",  # VAT numbers
    r"\b(?:DE|AT|FR|GB|IE|BE|NL|LU|IT|ES)\s?\d[\d ]{7,13}\b",
    r"\bATU\d{8}\b", r"\bCHE[-. ]?\d{3}", r"\bIE\d{7}[A-Z]{1,2}\b",
    r"\b(?:siret|siren|rcs|ape|naf|steuer-?nr|st\.?-?nr|hrb|hra|iban|bic|swift|uid)\b",
    r"\b(?:tel|tél|telefon|phone|fax|mobil)\b",
    r"\b\d{5}\s+[A-ZÄÖÜ][a-zäöüß]+",  # a postcode and a town
    UK_POSTCODE.pattern,
    r"\b(?:straße|strasse|str\.|weg|platz|allee|gasse|rue|avenue|boulevard|place|chemin|quai"
    r"|street|road|lane|square|avenue)\b",
    r"\b(?:bon|beleg|kasse|caisse|ticket|receipt|order|table|tisch|trans|terminal)\b\s*[-:#]?"
    r"\s*\d",
    r"\b(?:rechnung|facture|invoice|quittung)\b.*\b(?:nr|no|n°)",
]
MONTHS = {
    "jan": 1, "janv": 1, "januar": 1, "janvier": 1, "january": 1, "jän": 1, "jänner": 1,
    "feb": 2, "févr": 2, "fevr": 2, "fév": 2, "februar": 2, "février": 2, "february": 2,
    "mär": 3, "mar": 3, "märz": 3, "mars": 3, "march": 3, "mrz": 3,
    "apr": 4, "avr": 4, "april": 4, "avril": 4,
    "mai": 5, "may": 5,
    "jun": 6, "juin": 6, "juni": 6, "june": 6,
    "jul": 7, "juil": 7, "juli": 7, "juillet": 7, "july": 7,
    "aug": 8, "août": 8, "aout": 8, "aoû": 8, "august": 8,
    "sep": 9, "sept": 9, "september": 9, "septembre": 9,
    "okt": 10, "oct": 10, "oktober": 10, "octobre": 10, "october": 10,
    "nov": 11, "november": 11, "novembre": 11,
    "dez": 12, "déc": 12, "dec": 12, "dezember": 12, "décembre": 12, "decembre": 12,
    "december": 12,
    # it, nl, pt, es
    "gen": 1, "gennaio": 1, "januari": 1, "janeiro": 1, "enero": 1, "ene": 1,
    "febbraio": 2, "februari": 2, "fevereiro": 2, "fev": 2, "febrero": 2,
    "marzo": 3, "maart": 3, "mrt": 3, "março": 3, "marco": 3,
    "aprile": 4, "abril": 4, "abr": 4,
    "maggio": 5, "mag": 5, "mei": 5, "maio": 5, "mayo": 5,
    "giugno": 6, "giu": 6, "junho": 6, "junio": 6,
    "luglio": 7, "lug": 7, "julho": 7, "julio": 7,
    "agosto": 8, "ago": 8, "augustus": 8,
    "settembre": 9, "set": 9, "setembro": 9, "septiembre": 9,
    "ottobre": 10, "ott": 10, "outubro": 10, "out": 10, "octubre": 10,
    "novembro": 11, "noviembre": 11,
    "dicembre": 12, "dic": 12, "dezembro": 12, "diciembre": 12,
}
DUE_WORDS = ["fällig", "bis zum", "zahlbar bis", "due", "échéance", "echeance", "payable by",
             "valid", "gültig", "expire", "avant le", "scadenza", "scad", "valido", "validità",
             "geldig", "vervaldatum", "válido", "validade", "vencimiento", "vence", "use by",
             "best before", "expiry"]
CURRENCY_SIGNS = [("€", "EUR"), ("EUR", "EUR"), ("EURO", "EUR"), ("£", "GBP"), ("GBP", "GBP"),
                  ("CHF", "CHF"), ("SFr", "CHF"), ("Fr.", "CHF"), ("USD", "USD"), ("US$", "USD"),
                  ("$", "USD")]

# Words only tills of the euro's countries print (Italian, Dutch, Portuguese, Spanish, German).
EURO_WORDS = (r"\b(?:totale|totaal|te betalen|summe|zu zahlen|a pagar|importe|importo|contanti?"
              r"|wisselgeld|rückgeld|troco|entregado|documento commerciale)\b")

# --- numbers as printed -------------------------------------------------------------------

_CUR = r"(?:€|EUR|£|GBP|CHF|\$|USD)"
# An amount with two decimals, thousands grouped by dot, comma, apostrophe or space, a currency
# before or after it, never a rate (22,00%). OCR's confusions of digits are undone before (see
# _digits).
MONEY = re.compile(
    r"(?<![\d.,A-WYZa-wyzÄÖÜäöüßÀ-ÿ_])(?<![A-Za-z0-9]-)"
    r"(?P<negpre>(?<![^\s(])[-−](?=\s?" + _CUR + r"))?(?P<pre>" + _CUR + r"\s?)?"
    r"(?P<neg>(?<![^\s€£$(])[-−])?"
    r"(?P<num>\d{1,3}(?:(?P<sep>[ .,'’])\d{3})(?:(?P=sep)\d{3})*[.,]\d{2}|\d+[.,]\d{2})"
    r"(?![\d]|[.,]\d|\s?%)(?P<negpost>[-−](?![\d]))?(?:\s?(?P<post>€|EUR|CHF|£))?"
)
RATE = re.compile(r"(?<![\d.,])(\d{1,2}(?:[.,]\d{1,2})?)\s?%")
QTY = r"(\d{1,5}(?:[.,]\d{1,3})?)"
# Pieces, as tills write them between a count and its price (3 Stk x, 2 PZ x, 2 UN X, 2 EA @).
PIECES = r"(?:stk\.?|st\.?|stück|pcs?\.?|pz\.?|un\.?|uds?\.?|ea\.?)"
UNIT_WORDS = (r"(?:stk\.?|st\.?|stück|pz\.?|pcs?\.?|pc|pce|pces|x|×|\*|@|à|a|kg|lbs?|g|l|m|"
              r"pack|pkt\.?|block|rolle|paar|btl\.?|karton|bout\.?|std\.?)")

_CONFUSABLE = str.maketrans({"O": "0", "o": "0", "D": "0", "Q": "0", "U": "0", "l": "1",
                             "I": "1", "|": "1", "i": "1", "!": "1", "S": "5", "s": "5",
                             "B": "8", "Z": "2", "z": "2"})


def dec(text: str) -> Decimal:
    """A printed number -> Decimal: the last dot or comma followed by one to three digits is the
    decimal point, any other separator groups thousands."""
    text = text.replace("−", "-").replace(" ", "").replace("'", "").replace("’", "")
    match = re.search(r"[.,](\d{1,3})$", text)
    if match:
        whole = re.sub(r"[.,]", "", text[: match.start()])
        return Decimal(f"{whole}.{match.group(1)}")
    return Decimal(re.sub(r"[.,]", "", text))


def text_of(value: Decimal | None) -> str | None:
    """An amount as the reading writes it: no exponent, the decimals as printed (4.99,
    1.749)."""
    if value is None:
        return None
    return format(value, "f")


def plain(value: Decimal | None) -> str | None:
    """Quantities and rates: no trailing zeros (2, 1.5, 5.5)."""
    if value is None:
        return None
    text = format(value.normalize(), "f")
    return text


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\u00a0", " ").replace("\t", " ")


def _has_word(lower: str, words: list[str]) -> str | None:
    for word in words:
        if re.search(r"(?<![a-zäöüéèàç])" + re.escape(word) + r"(?![a-zäöüéèàç])", lower):
            return word
    return None


def _digits(line: str) -> tuple[str, bool]:
    """Undo OCR's confusions inside tokens shaped like an amount (S,5O -> 5,50; 1O,OO; l2.99);
    says whether anything changed, so the reading can ask the arithmetic to confirm it."""
    changed = False

    def fix(match: re.Match[str]) -> str:
        nonlocal changed
        token = match.group(0)
        digits = sum(c.isdigit() for c in token)
        if digits < 2:
            return token
        fixed = token.translate(_CONFUSABLE)
        if fixed != token:
            changed = True
        return fixed

    out = re.sub(r"(?<![\w])[\dOoDQUlI|i!SsBZz]{1,4}[.,][\dOoDQUlI|i!SsBZz]{2}(?![\w])", fix,
                 line)
    return out, changed


# --- lines of the receipt -----------------------------------------------------------------

@dataclass
class Amount:
    value: Decimal
    start: int
    end: int
    corrected: bool = False


@dataclass
class Candidate:
    quantity: Decimal | None
    unit_price: Decimal | None
    amount: Decimal
    description: str
    penalty: float
    corrected: bool = False
    rate: Decimal | None = None
    code: str | None = None
    # Not an article at all: a line read as one only through a correction.
    drop: bool = False
    # The quantity is the number the line starts with (a quantity column).
    lead: bool = False


@dataclass
class ItemLine:
    index: int
    text: str
    candidates: list[Candidate]
    qty_lines: list[tuple[Decimal, Decimal]] = field(default_factory=list)


def _amounts(line: str) -> list[list[Amount]]:
    """Every way of reading the amounts in a line: an amount grouped by a space (1 049,00) can
    also be a number and an amount (12 125,00 read as 12 and 125,00)."""
    found: list[list[Amount]] = []
    for m in MONEY.finditer(line):
        num = m.group("num")
        sign = -1 if m.group("neg") or m.group("negpost") or m.group("negpre") else 1
        ways = [Amount(sign * dec(num), m.start(), m.end())]
        if m.group("sep") == " ":
            head, _, rest = num.partition(" ")
            ways.append(Amount(sign * dec(rest), m.start("num") + len(head) + 1, m.end()))
        found.append(ways)
    # Only the last two amounts of a line (the unit price, the amount) are worth two readings.
    found = [ways[:1] for ways in found[:-2]] + found[-2:]
    return [list(w) for w in itertools.product(*found)] if found else [[]]


def _integer_tail(line: str) -> Amount | None:
    """An amount whose decimal comma OCR dropped (145 A for 1,45 A): the last number of the
    line, read as cents; only ever a corrected reading."""
    m = re.search(r"(?<![\w.,])(\d{3,6})(?:\s*[A-D1-4]|\s*€|\s*EUR)?\s*$", line)
    if not m:
        return None
    return Amount(Decimal(m.group(1)) / 100, m.start(1), m.end(1), corrected=True)


UNITS = (r"(?:kg|lbs?|g|l|m|stk\.?|st\.?|pcs?\.?|pce|bout\.?|fr\.?|std\.?|pack|pkt\.?|block|rolle|"
         r"paar|btl\.?|karton|eur|€|£|chf|x|×|@|à|je|each)")
TRAILING_UNITS = re.compile(r"(?<!\d)(?:\s+" + UNITS + r")+\s*$", re.I)


def _clean_description(text: str) -> str:
    """The article's words: without the position and article numbers before them, nor the
    units and signs left after its numbers were taken out."""
    text = re.sub(r"\s+", " ", text).strip(" -:;*.,")
    text = re.sub(r"^(?:\d[\d./-]*\s+)+(?=\S*[^\W\d_])", "", text)
    text = TRAILING_UNITS.sub("", " " + text).strip(" -:;*.,")
    return text.strip()


def _read_item(line: str, codes: dict[str, Decimal]) -> list[Candidate]:
    """The readings of one article line, each with a penalty (lower is likelier)."""
    fixed, corrected = _digits(line)
    # A decimal point read as a colon (9:99), where more amounts follow on the line.
    colon = re.sub(r"(?<![\d:])(\d{1,4}):(\d{2})(?=\s.*\d[.,]\d{2})", r"\1.\2", fixed)
    corrected = corrected or colon != fixed
    fixed = colon
    printed = {new: old for old, new in zip(line.split(), fixed.split(), strict=False)
               if old != new}
    readings = _readings(fixed, codes, corrected)
    if printed:
        for c in readings:
            c.description = " ".join(printed.get(word, word) for word in c.description.split())
    return readings


def _readings(fixed: str, codes: dict[str, Decimal], corrected: bool) -> list[Candidate]:
    readings: list[Candidate] = []
    for amounts in _amounts(fixed):
        if not amounts:
            tail = _integer_tail(fixed)
            if tail is None:
                continue
            amounts = [tail]
        readings += _item_readings(fixed, amounts, codes, corrected)
    return readings


def _item_readings(line: str, amounts: list[Amount], codes: dict[str, Decimal],
                   corrected: bool) -> list[Candidate]:
    last = amounts[-1]
    corrected = corrected or last.corrected
    after = line[last.end:]
    rate: Decimal | None = None
    code: str | None = None
    rate_match = RATE.search(after)
    if rate_match:
        rate = dec(rate_match.group(1))
    code_match = re.search(r"(?:^|\s|(?<=\d))([A-D1-4])\s*\*?\s*$", after)
    if code_match and code_match.group(1) in codes:
        code = code_match.group(1)
        rate = codes[code]
    head = line[: last.start]

    def rate_column(m: re.Match[str]) -> bool:
        """A rate printed between the unit price and the amount (4,99 19% 14,97), or right
        before the amount where no unit price is printed (CAPPUCCINO 10% 3,00)."""
        if dec(m.group(1)) not in KNOWN_RATES:
            return False
        if len(amounts) > 1:
            return m.start() > amounts[-2].end
        return not head[m.end():].strip()

    if rate is None:
        inner = list(RATE.finditer(head))
        if inner and rate_column(inner[-1]):
            rate = dec(inner[-1].group(1))
    head_no_rate = RATE.sub(lambda m: " " * len(m.group(0)) if rate_column(m) else m.group(0),
                            head)
    total = last.value
    out: list[Candidate] = []

    def add(q: Decimal | None, u: Decimal | None, desc: str, penalty: float,
            lead: bool = False) -> None:
        out.append(Candidate(q, u, total, _clean_description(desc), penalty, corrected,
                             rate, code, lead=lead))

    before = amounts[:-1]
    # 2 x 4,99 / 2x4.99 / 1 @ £45.00 / 3 Stk x 0,99 / 2 Wiener Schnitzel à 16,90
    for unit in before[-3:]:
        left = head_no_rate[: unit.start]
        right = head_no_rate[unit.end:]
        m = re.search(QTY + r"\s*" + PIECES + r"?\s*[x×X\*@]\s*" + _CUR + r"?\s*$",
                      left, re.I)
        if m:
            q = dec(m.group(1))
            desc = left[: m.start()] + " " + right
            add(q, unit.value, desc, 0 if times(q, unit.value) == total else 6)
            continue
        m = re.search(r"(?:\s|^)(?:à|a|@|je|per|chacun|each|/stk)\s*" + _CUR + r"?\s*$", left,
                      re.I)
        lead = re.match(r"\s*" + QTY + r"\s*(?:x|×|stk\.?|st\.?)?\s+(?=\D)", left, re.I)
        if m and lead:
            q = dec(lead.group(1))
            add(q, unit.value, left[lead.end(): m.start()] + " " + right,
                0 if times(q, unit.value) == total else 6)
            continue
        # Columns: quantity first, then the article, the unit price, (the rate,) the amount.
        numbers = re.match(r"\s*((?:\d{1,5}(?:[.,]\d{1,3})?\s+){1,2})(?:" + UNIT_WORDS +
                           r"\s+)?", left, re.I)
        if numbers:
            parts = numbers.group(1).split()
            options = [parts[-1]]
            if len(parts) == 2:
                options.append(parts[0] + parts[1])
                options.append(parts[0])
            for n, option in enumerate(options):
                q = dec(option)
                if q == 0:
                    continue
                desc = left[numbers.end():] + " " + right
                add(q, unit.value, desc, (0 if times(q, unit.value) == total else 8) + n,
                    lead=True)
    # Any two numbers before the amount that multiply to it, in whatever columns they stand
    # (Cappuccino 2 3,80 7,60; Nuitée 2 89,00 178,00).
    for q, u, spans, distance in _pairs(head_no_rate, before, total):
        # The quantity takes its unit with it (3 bout., 25 m, 5 Pack).
        spans = [(start, end + len(unit.group(0)) if (unit := re.match(
            r"\s*" + UNITS + r"(?!\w)", head_no_rate[end:], re.I)) else end)
            for start, end in spans]
        desc = head_no_rate
        for start, end in sorted(spans, reverse=True):
            desc = desc[:start] + " " * (end - start) + desc[end:]
        add(q, u, _strip_markers(desc), 0.3 + 0.1 * distance)
    # The amount alone, the quantity before the article (2x Cod & Chips).
    marked = re.match(r"\s*(\d{1,4})\s*(?:x|×|X|stk\.?|st\.?)\s*(?=\D)", head_no_rate, re.I)
    lead = marked or re.match(r"\s*(\d{1,3})\s+(?=[A-Za-zÄÖÜÉÈÀäöüéèà])", head_no_rate)
    if lead and not before:
        q = Decimal(lead.group(1))
        if q > 0 and (total / q).quantize(CENT) * q == total:
            add(q, (total / q).quantize(CENT), head_no_rate[lead.end():], 0.2 if marked else 1,
                lead=True)
    # The count after the article (Latte x2, Scone with jam 3x).
    after = re.search(r"\s(?:[x×X]\s?(\d{1,3})|(\d{1,3})\s?[x×X])\s*$", head_no_rate)
    if after and not before:
        q = Decimal(after.group(1) or after.group(2))
        if q > 0 and (total / q).quantize(CENT) * q == total:
            add(q, (total / q).quantize(CENT), head_no_rate[: after.start()], 0.2)
    if not before or not out:
        desc = head_no_rate
        for unit in reversed(before):
            desc = desc[: unit.start] + desc[unit.end:]
        add(Decimal(1), total, desc, 2 if before else 0.5 if lead or after else 0)
    return out


NUMBER = re.compile(r"(?<![\w.,/])(\d{1,6}(?:[.,]\d{1,3})?)(?![\d]|[.,]\d)")
MARKERS = (r"(?:x|×|\*|@|à|a|je|per|each|le|la|kg|lbs?|g|l|ltr|stk\.?|st\.?|stück|pz\.?|"
           r"pcs?\.?|pce|eur|€|£|chf|\$|/)")


def _numbers(text: str, amounts: list[Amount]) -> list[tuple[Decimal, int, int, str]]:
    found = {(m.start(1), m.end(1)): (dec(m.group(1)), m.group(1)) for m in NUMBER.finditer(text)}
    for a in amounts:
        if not any(start <= a.start < end or a.start <= start < a.end for start, end in found):
            found[(a.start, a.end)] = (a.value, text[a.start:a.end])
    return sorted(((v, start, end, printed) for (start, end), (v, printed) in found.items()),
                  key=lambda item: item[1])


def _roles(text: str, a: tuple[Decimal, int, int, str], b: tuple[Decimal, int, int, str]
           ) -> tuple[Decimal, Decimal]:
    """Which of two numbers is the quantity and which the unit price."""
    after_b = text[b[2]:b[2] + 8]
    after_a = text[a[2]:a[2] + 6]
    before_a = text[max(0, a[1] - 3):a[1]]
    money_a = re.search(r"[.,]\d{2}$", a[3]) is not None
    money_b = re.search(r"[.,]\d{2}$", b[3]) is not None
    if re.match(r"\s*(?:€|EUR|CHF|£)?\s*/\s*\w", after_b, re.I):
        return a[0], b[0]
    if re.match(r"\s*(?:kg|g|l|ltr|stk|st|pcs|x|×|@|à)(?![a-z])", after_a, re.I):
        return a[0], b[0]
    if re.search(r"(?:€|£|à|@|x)\s*$", before_a, re.I) or (money_a and not money_b):
        return b[0], a[0]
    return a[0], b[0]


def _pairs(head: str, amounts: list[Amount], total: Decimal
           ) -> list[tuple[Decimal, Decimal, list[tuple[int, int]], int]]:
    numbers = _numbers(head, amounts)[-8:]
    out = []
    for i, j in itertools.combinations(range(len(numbers)), 2):
        q, u = _roles(head, numbers[i], numbers[j])
        distance = len(numbers) - 1 - j
        if q <= 0 or q > 10000 or u <= 0 or (q == 1 and distance > 0) or times(q, u) != total:
            continue
        spans = [numbers[i][1:3], numbers[j][1:3]]
        out.append((q, u, spans, distance + (5 if q == 1 else 0)))
    return sorted(out, key=lambda pair: pair[3])[:6]


def _strip_markers(text: str) -> str:
    """The article's words once its numbers are gone: no x, @, à, kg or EUR/kg left over."""
    marker = MARKERS + r"(?:\s*/\s*\w{1,3})?"
    text = re.sub(r"(?<=\s)" + marker + r"(?=\s|$)", " ", " " + text + " ", flags=re.I)
    text = re.sub(r"(?:\s" + marker + r")+\s*$", " ", text, flags=re.I)
    return text


def _quantity_line(line: str) -> tuple[Decimal, Decimal | None] | None:
    """A line that holds only a quantity and a unit price (2 Stk x 0,99; 150 x 0.12; à 5.20)."""
    fixed, _ = _digits(line)
    fixed = re.sub(r"^(\s*\d{1,4})[aà&]?([aà@xX×&])(?=\d)", r"\1 \2 ", fixed)  # 3a1,79, 3&1,79
    fixed = re.sub(r"(?<=\d )&(?= ?\d)", "à", fixed)
    # A litre's l read as 1 between a measured quantity and its price (38,52 1× 1,749).
    fixed = re.sub(r"(\d[.,]\d{1,3}\s+)1\s?(?=[x×])", r"\1l ", fixed)
    m = re.fullmatch(r"\s*" + QTY + r"\s*(?:" + PIECES + r"|kg|lbs?)?\s*[x×X\*@]\s*"
                     + _CUR + r"?\s*(\d+[.,]\d{2,3})\s*(?:" + _CUR + r"|/\s*\w+)?\s*", fixed,
                     re.I)
    if m:
        return dec(m.group(1)), dec(m.group(2))
    m = re.fullmatch(r"\s*(?:à|a|@|je)\s*" + _CUR + r"?\s*(\d+[.,]\d{2,3})\s*" + _CUR + r"?\s*",
                     fixed, re.I)
    if m:
        return Decimal(0), dec(m.group(1))
    # Two numbers and nothing else but units and signs (38,52 l x 1,749 EUR/l; 3 à 1,79).
    numbers = _numbers(fixed, [])
    rest = NUMBER.sub(" ", fixed)
    rest = re.sub(r"(?<![a-zäöüé])" + MARKERS + r"(?![a-zäöüé])", " ", rest, flags=re.I)
    rest = re.sub(r"(?<![\w|])[|I](?![\w|])", " ", rest)  # a litre's l read as | or I
    if len(numbers) == 2 and not re.search(r"[^\s.,:=/-]", rest):
        q, u = _roles(fixed, numbers[0], numbers[1])
        return q, u
    return None


# --- the reading --------------------------------------------------------------------------

def _currency(text: str) -> str | None:
    counts: dict[str, int] = {}
    for sign, code in CURRENCY_SIGNS:
        pattern = re.escape(sign) if not sign.isalpha() else r"(?<![A-Za-z])" + sign + \
            r"(?![A-Za-z])"
        n = len(re.findall(pattern, text))
        if n:
            counts[code] = counts.get(code, 0) + n
    if not counts:
        # No sign printed: the country's tax numbers and words say which money it is.
        if re.search(r"\bCHE[-. ]?\d{3}", text):
            return "CHF"
        if re.search(r"\b(?:MwSt|USt|TVA|Steuer-?Nr|St\.-?Nr|ATU\d|DE ?\d{3} ?\d{3} ?\d{3}|"
                     r"FR ?\w{2} ?\d{3}|(?:IVA|BTW|P\.? ?IVA|C\.?I\.?F|N\.?I\.?F|NIPC)\b|"
                     r"(?:Partita|KvK)\b)", text, re.I):
            return "EUR"
        if re.search(r"\bGB ?\d{3} ?\d{4} ?\d{2}\b", text) or (
                re.search(r"\bVAT\b", text, re.I) and UK_POSTCODE.search(text)):
            return "GBP"
        if US_ADDRESS.search(text) or re.search(r"\bsales tax\b", text, re.I):
            return "USD"
        if re.search(EURO_WORDS, text, re.I):
            return "EUR"
        return None
    return max(counts, key=lambda k: counts[k])


MONTH_NAMES = "|".join(sorted((re.escape(k) for k in MONTHS), key=len, reverse=True))


def _dates_in(line: str, month_first: bool = False) -> list[datetime.date]:
    """The dates a line prints: 2026-12-03, 03.12.2026, 03/12/26, 3 déc. 2026, Dec 3, 2026;
    12/03/2026 is the 3rd of December where the receipt writes its dates month first."""
    lower = line.lower()
    found: list[datetime.date | None] = []
    for m in re.finditer(r"(?<![\d.,])(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?![\d]|[.,]\d)", line):
        found.append(_make_date(int(m[1]), int(m[3]), int(m[4])))
    # The year may run into the time OCR glued to it (11.12.201411:05); the time after a day and
    # a month is no year (Mittwoch 24.12. 08:00).
    for m in re.finditer(r"(?<![\d,])(?<!\d\.)(\d{1,2})([./-])(\d{1,2})(?:[./-]|[.,] )"
                         r"(\d{4}(?=\d{1,2}:\d{2})|(?:\d{4}|\d{2})(?![\d:]|[.,]\d))", line):
        year = int(m[4]) + (2000 if len(m[4]) == 2 else 0)
        day, month = int(m[1]), int(m[3])
        if month_first and m[2] != ".":  # nobody writes 12.03.2026 month first
            day, month = month, day
        if month > 12 >= day:
            day, month = month, day
        found.append(_make_date(year, month, day))
    for m in re.finditer(r"(?<!\d)(\d{1,2})(?:er|\.)?[\s-]*(" + MONTH_NAMES + r")\.?,?[\s-]*"
                         r"(\d{4})(?!\d)", lower):
        found.append(_make_date(int(m[3]), MONTHS[m[2]], int(m[1])))
    # 14-Feb-24, 14 FEB 24: a two-digit year only where a month's name is between.
    for m in re.finditer(r"(?<![\d.,])(\d{1,2})([\s-])(" + MONTH_NAMES + r")\2(\d{2})(?![\d.,:])",
                         lower):
        found.append(_make_date(2000 + int(m[4]), MONTHS[m[3]], int(m[1])))
    for m in re.finditer(r"\b(" + MONTH_NAMES + r")\.?\s+(\d{1,2}),?\s+(\d{4})(?!\d)", lower):
        found.append(_make_date(int(m[3]), MONTHS[m[1]], int(m[2])))
    return [date for date in found if date is not None]


# Where a receipt writes its dates month first: in dollars, with a US state and ZIP code, or
# charging a tax (sales tax) where European tills name theirs (VAT, MwSt, IVA, TVA, BTW).
US_ADDRESS = re.compile(r"\b(?:AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI"
                        r"|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA"
                        r"|WA|WV|WI|WY),?\s+\d{5}(?:-\d{4})?\b")


def _month_first(lines: list[str], currency: str | None) -> bool:
    lower = [line.lower() for line in lines]
    taxes = {word for line in lower for word in TAX_WORDS if _has_word(line, [word])}
    if taxes - {"tax"}:
        return False  # a European tax is named: a stray $ read in the noise says nothing
    return currency == "USD" or (currency is None and "tax" in taxes)


def _date(lines: list[str], month_first: bool = False) -> str | None:
    """The receipt's date: the first one printed that is not a due date."""
    found: list[tuple[int, datetime.date]] = []
    for n, line in enumerate(lines):
        due = _has_word(line.lower(), DUE_WORDS) is not None
        found += [(n + (1000 if due else 0), date) for date in _dates_in(line, month_first)]
    if not found:
        # A till's compact stamp (20210923 142810), only where no other date is printed.
        for n, line in enumerate(lines):
            for m in re.finditer(r"(?<![\d.,])((?:19|20)\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])"
                                 r"(?!\d|[.,]\d)", line):
                date = _make_date(int(m[1]), int(m[2]), int(m[3]))
                if date is not None and date <= datetime.date.today():
                    found.append((n, date))
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1].isoformat()


def _make_date(year: int, month: int, day: int) -> datetime.date | None:
    try:
        date = datetime.date(year, month, day)
    except ValueError:
        return None
    return date if 1990 <= year <= 2100 else None


def _noise(line: str) -> bool:
    """An address, a VAT or company number, a telephone, the till's and the bill's numbers."""
    return any(re.search(p, line, re.I if p.startswith(r"\b(?:") else 0) for p in SKIP_PATTERNS)


def _is_skip(line: str, lower: str) -> bool:
    return _payment(line, lower) or _noise(line)


def _supplier(lines: list[str]) -> str | None:
    for line in lines[:8]:
        lower = line.lower()
        letters = sum(c.isalpha() for c in line)
        if letters < 3 or letters < len(line.replace(" ", "")) * 0.6:
            continue
        if _noise(line) or MONEY.search(line) or _dates_in(line):
            continue
        if _has_word(lower, ["rechnung", "facture", "invoice", "quittung", "kassenbon",
                             "receipt", "ticket", "beleg", "willkommen", "bienvenue",
                             "welcome", "documento commerciale", "scontrino", "fattura",
                             "ricevuta", "benvenuti", "kassabon", "welkom", "fatura", "factura",
                             "recibo", "bem-vindo", "bienvenido", "customer copy"]):
            continue
        return re.sub(r"\s+", " ", line).strip(" *-=")
    return None


# A rate table's row starts with its code standing alone (A 19%, B= 7,0 %, 1 USt. 19%), never
# with an article whose name starts with the letter (CAPPUCCINO 10% 3,00).
RATE_ROW = re.compile(r"^[A-D1-4](?![^\W\d_])\s*[=:)]?\s*(?:\w+\.?\s*)?\d{1,2}(?:[.,]\d{1,2})?\s?%")


def _rate_codes(lines: list[str]) -> dict[str, Decimal]:
    """A rate table's letter or digit codes: A= 19,0%; B 7%; 1 USt. 19 %; A TVA 5,50 %."""
    codes: dict[str, Decimal] = {}
    for line in lines:
        m = re.match(r"\s*([A-D1-4])(?![\d.,])\s*[=:)]?\s*"
                     r"(?:(?:MwSt|USt|TVA|VAT|Steuer|MWST)\.?\s*)?"
                     r"(\d{1,2}(?:[.,]\d{1,2})?)\s?%", line, re.I)
        if m:
            rate = dec(m.group(2))
            if rate in KNOWN_RATES:
                codes.setdefault(m.group(1).upper(), rate)
    return codes


def _rates_named(lines: list[str]) -> list[Decimal]:
    rates: list[Decimal] = []
    for line in lines:
        lower = line.lower()
        if not _has_word(lower, TAX_WORDS + ["inkl", "incl", "included", "includes", "dont"]):
            continue
        for m in RATE.finditer(line):
            rate = dec(m.group(1))
            if rate in KNOWN_RATES and rate not in rates:
                rates.append(rate)
    return rates


@dataclass
class Sums:
    totals: list[tuple[float, Decimal]] = field(default_factory=list)
    nets: list[Decimal] = field(default_factory=list)
    taxes: list[Decimal] = field(default_factory=list)
    paid: list[Decimal] = field(default_factory=list)


def _words_of(line: str) -> str:
    """The line's words as the receipt printed them, where OCR put a digit for a letter inside
    a word (T0TALE, 5UMME, TOTA1): read for its words only, never for its amounts."""
    def letters(match: re.Match[str]) -> str:
        token = match.group(0)
        if sum(c.isalpha() for c in token) < 3:
            return token
        return token.translate(str.maketrans("0158", "olsb"))

    return re.sub(r"\w+", letters, line.lower())


def _amount_only(line: str) -> bool:
    """A row that holds amounts and nothing else but currency signs and a code (£4.94; 8,38 €)."""
    rest = MONEY.sub(" ", _digits(line)[0])
    return not re.search(r"[^\W\d_]{2,}", re.sub(r"(?i)\b(?:eur|euro|gbp|chf|usd)\b", " ", rest))


def _line_amounts(line: str) -> list[Decimal]:
    fixed, _ = _digits(line)
    return [a.value for a in _amounts(fixed)[0]]


def parse(text: str) -> Reading:
    """The reading of a receipt's text."""
    raw = [CONTROL.sub("", _fold(line)).strip() for line in text.splitlines()[:MAX_TEXT_LINES]]
    lines = [re.sub(r"\s+", " ", line)[:MAX_LINE] for line in raw if line.strip()]
    # Letter-spaced words (S u m m e, B E Z A H L T) as the words they are.
    lines = [re.sub(r"(?<!\S)((?:[^\W\d_] ){3,}[^\W\d_])(?!\S)",
                    lambda m: m[1].replace(" ", ""), line) for line in lines]
    # A decimal comma OCR parted from its cents (16, 66; 16 ,66).
    lines = [re.sub(r"(?<![\d.,])(\d{1,4}) ?([.,]) ?(\d{2})(?![\d.,%])(?=\s|$|[A-Z€-])",
                    lambda m: m[1] + m[2] + m[3] if " " in m[0] else m[0], line) for line in lines]
    codes = _rate_codes(lines)
    named = _rates_named(lines)

    sums = Sums()
    items: list[ItemLine] = []
    qty_lines: list[tuple[int, Decimal, Decimal | None]] = []
    pending_desc: str | None = None
    split_total: float | None = None
    ended = False
    for n, line in enumerate(lines):
        lower = _words_of(line)
        amounts = _line_amounts(line)
        net_word = next((w for ws in NET_WORDS.values() for w in ws if _has_word(lower, [w])),
                        None) or re.match(r"net\b(?!\s*(?:à|a)\s*payer)", lower)
        # The most particular word names the total (Total due over Goods total).
        said = [(5.0 if word in GENERIC_TOTAL_WORDS else rank / 100, word)
                for words in TOTAL_WORDS.values() for rank, word in enumerate(words)
                if _has_word(lower, [word])]
        total_word = min(said) if said else None
        tax_word = _has_word(lower, TAX_WORDS)
        if _has_word(lower, SAVING_WORDS) and amounts and (min(amounts) >= 0 or total_word):
            continue  # what the discounts came to, already in the lines and the total
        if _has_word(lower, ROUNDING_WORDS):
            continue  # the till's rounding to its smallest coin: no article
        if net_word and amounts:
            sums.nets.append(amounts[-1])
            ended = True
            continue
        including = INCLUDING.search(lower)
        if total_word and amounts and (not tax_word or including):
            sums.totals.append((total_word[0] + (0.5 if "netto" in lower else 0), amounts[-1]))
            ended = True
            continue
        if total_word and not amounts and items and total_word[1] not in COLUMN_WORDS:
            # The word alone: OCR split the total's line; the next amount is the total.
            fixed = _integer_tail(line)
            if fixed:
                sums.totals.append((total_word[0] + 5, fixed.value))
            else:
                split_total = total_word[0]
            ended = True
            continue
        if split_total is not None and amounts and _amount_only(line):
            # The total printed large, its amount read as a row of its own under its word.
            sums.totals.append((split_total + 0.1, amounts[-1]))
            split_total = None
            continue
        split_total = None
        if tax_word and amounts and (RATE.search(line) or ended):
            sums.taxes.append(amounts[-1])
            ended = True
            continue
        if _payment(line, lower):
            sums.paid.extend(amounts[-1:])
            if items:
                ended = True
            continue
        # A discount printed under the subtotal (Clubcard Price -0,50; SCONTO -0,94) is a line
        # the total takes off.
        discount = sums.nets and not sums.totals and not sums.paid and amounts \
            and amounts[-1] < 0
        if ended and not discount:
            continue
        quantity = _quantity_line(line)
        if quantity:
            qty_lines.append((len(items), quantity[0], quantity[1]))
            continue
        if _is_skip(line, lower) and not re.search(r"\d[.,]\d{2}\s*[A-D€]?\s*$", line):
            continue
        if RATE_ROW.match(line):
            continue  # a rate table's row
        if _date_only(line):
            continue
        if codes:
            # A code OCR joined to its amount (49.981 for 49.98 1).
            line = re.sub(r"(\d[.,]\d{2})([" + "".join(codes) + r"])\s*$", r"\1 \2", line)
        candidates = _read_item(line, codes)
        if not candidates:
            has_letters = sum(c.isalpha() for c in line) >= 3
            pending_desc = line if has_letters else None
            continue
        # A row of numbers and units only (2 UN X 1,45 2,90) takes the article's name above it.
        if pending_desc and all(not re.search(r"[^\W\d_]{3}", c.description)
                                for c in candidates):
            for c in candidates:
                c.description = _clean_description(pending_desc)
        pending_desc = None
        if len(items) >= 2 and _is_running_sum(items, candidates, qty_lines):
            # Worded as no table here says, but it is what the lines above add up to.
            sums.totals.append((10, candidates[0].amount))
            ended = True
            continue
        if _has_word(lower, DISCOUNT_WORDS):
            candidates = _taken_off(candidates)
        items.append(ItemLine(n, line, candidates))

    _attach_quantities(items, qty_lines)
    chosen, confirmed, total = _choose(items, sums)
    chosen = _same_layout(items, chosen)

    currency = _currency("\n".join(lines))
    out_lines: list[Line] = []
    single_rate = named[0] if len(named) == 1 and not codes else None
    rates = _discounts_own_percent(items, chosen, [c.rate for c in chosen])
    if single_rate is None and len(named) == 2 and all(r is None for r in rates):
        rates = _rates_by_sums([c.amount for c in chosen], named, _rate_figures(lines))
    for item, c, rate in zip(items, chosen, rates, strict=True):
        if c.drop:
            continue
        unit = c.unit_price
        quantity = c.quantity
        if c.corrected and not confirmed:
            unit = None
        rate = rate if rate is not None else single_rate
        out_lines.append(_by_the_rule(c.description or item.text, plain(quantity),
                                      text_of(unit), plain(rate)))
    return {
        "supplier": _supplier(lines),
        "date": _date(lines, _month_first(lines, currency)),
        "currency": currency,
        # A draft holds no more; the lines then do not come to the total, and say so.
        "lines": out_lines[:rule.MAX_LINES],
        "total": text_of(total.quantize(CENT)) if total is not None else None,
    }


def _discounts_own_percent(items: list[ItemLine], chosen: list[Candidate],
                           rates: list[Decimal | None]) -> list[Decimal | None]:
    """A discount's percent read as its rate (SCONTO 20% 0,26) where no article of the
    receipt is taxed at it is the discount's own, no tax rate. An Italian till prints its rate
    column on a discount too (SCONTO 10,00% -0,60), at a rate its articles have."""
    discount = [bool(_has_word(_words_of(item.text), DISCOUNT_WORDS)) for item in items]
    taxed = {rate for rate, off in zip(rates, discount, strict=True)
             if rate is not None and not off}
    if not taxed:
        return rates
    return [None if off and rate not in taxed and c.code is None else rate
            for rate, off, c in zip(rates, discount, chosen, strict=True)]


def _by_the_rule(description: str, quantity: str | None, unit_price: str | None,
                 tax_rate: str | None) -> Line:
    """A line as a draft takes it (`studio.lines`): what the rule refuses is unread, never
    a line apply would refuse (a quantity read as 0, a rate of 999)."""
    return {"description": rule.description_of(description),
            "quantity": quantity if quantity and rule.quantity_fits(quantity) else None,
            "unit_price": unit_price if unit_price and rule.amount_fits(unit_price) else None,
            "tax_rate": tax_rate if tax_rate and rule.percent_fits(tax_rate) else None}


def _same_layout(items: list[ItemLine], chosen: list[Candidate]) -> list[Candidate]:
    """Where most lines start with their quantity, a line that starts with a number whose
    amount it divides exactly is read the same way, though its printed unit price was lost.
    A column of counts before the articles (1 Tea 2.10, 2 Croissant 5.00) is such a layout
    too, though only one count in it is more than one."""
    leading = sum(1 for c in chosen if c.lead and c.quantity != 1)
    counted = sum(1 for item in items if any(o.lead for o in item.candidates))
    column = counted >= 2 and counted * 2 >= len(items) and any(
        o.lead and o.quantity != 1 for item in items for o in item.candidates)
    if leading < 2 and not column:
        return chosen
    out = list(chosen)
    for n, (item, c) in enumerate(zip(items, chosen, strict=True)):
        if c.lead or c.quantity != 1:
            continue
        alike = [o for o in item.candidates if o.lead and o.amount == c.amount and o.quantity
                 and times(o.quantity, o.unit_price or Decimal(0)) == c.amount]
        if alike:
            out[n] = min(alike, key=lambda o: o.penalty)
    return out


def _taken_off(candidates: list[Candidate]) -> list[Candidate]:
    """A discount printed without its minus (SCONTO 0,50) takes its amount off; read as
    printed only where the sums say so."""
    out = []
    for c in candidates:
        if c.amount > 0:
            out.append(Candidate(c.quantity, -c.unit_price if c.unit_price else None, -c.amount,
                                 c.description, c.penalty, c.corrected, c.rate, c.code,
                                 lead=c.lead))
            c.penalty += 1
        out.append(c)
    return out


def _is_running_sum(items: list[ItemLine], candidates: list[Candidate],
                    qty_lines: list[tuple[int, Decimal, Decimal | None]]) -> bool:
    """A line whose one reading is a single article costing exactly what every line above it
    costs together is their total, not another article."""
    if any(c.quantity != 1 for c in candidates) or len({c.amount for c in candidates}) != 1:
        return False
    if any(position == len(items) for position, _, _ in qty_lines):
        return False  # a quantity line just above belongs to this article
    running = sum((min(i.candidates, key=lambda c: c.penalty).amount for i in items), Decimal(0))
    return candidates[0].amount == running


def _date_only(line: str) -> bool:
    """A line with a date or a time and no amount (the bill's number and date, the till's
    clock) is no article, whatever number ends it."""
    has_time = re.search(r"(?<!\d)\d{1,2}:\d{2}(?!\d)", line)
    # The date's own digits are no amount (23.09, 2021 read as 23.09 and 2021).
    rest = re.sub(r"(?<!\d)\d{1,2}[./-]\d{1,2}(?:[./-]|[.,] )\d{2,4}(?!\d)", " ", line)
    return bool(has_time or _dates_in(line)) and not MONEY.search(rest)


def _attach_quantities(items: list[ItemLine], qty_lines: list[tuple[int, Decimal,
                                                                     Decimal | None]]) -> None:
    """A quantity line belongs to the article above it or below it: the one whose amount is
    the quantity times the price."""
    for position, quantity, unit in qty_lines:
        neighbours = [p for p in (position - 1, position) if 0 <= p < len(items)]
        best: tuple[float, int, Candidate] | None = None
        for order, p in enumerate(neighbours):
            for c in items[p].candidates:
                q = quantity
                if q == 0 and unit:  # à 5.20 under 2x Cappuccino: the quantity is the line's
                    q = c.quantity if c.quantity else Decimal(1)
                if unit is not None and unit > 0 and c.amount < 0 and times(q, -unit) == c.amount:
                    unit = -unit
                if unit is None or times(q, unit) != c.amount:
                    continue
                score = c.penalty + order * 0.5
                if best is None or score < best[0]:
                    best = (score, p, Candidate(q, unit, c.amount, c.description, c.penalty,
                                                c.corrected, c.rate, c.code))
        if best is None and neighbours and unit is not None and quantity:
            # The arithmetic does not hold as read: the line above, its amount marked unsure.
            p = neighbours[0]
            base = min(items[p].candidates, key=lambda c: c.penalty)
            items[p].candidates = [Candidate(quantity, unit, base.amount, base.description,
                                             base.penalty + 10, True, base.rate, base.code)]
            continue
        if best is not None:
            items[best[1]].candidates = [best[2]]


def _choose(items: list[ItemLine], sums: Sums
            ) -> tuple[list[Candidate], bool, Decimal | None]:
    """The readings of the lines whose amounts add up to what the receipt says they add up to
    (the total, the net, the total less its taxes), least corrected first."""
    for item in items:
        item.candidates.sort(key=lambda c: c.penalty)
        if all(c.corrected for c in item.candidates):
            item.candidates.append(Candidate(None, None, Decimal(0), "", 4, drop=True))
    default = [item.candidates[0] for item in items]
    targets: list[tuple[float, Decimal, Decimal | None]] = []
    for rank, value in sorted(sums.totals):
        targets.append((rank, value, value))
        for tax in [sum(sums.taxes, Decimal(0))] + sums.taxes:
            if tax:
                targets.append((rank + 0.2, value - tax, value))
    for value in sums.nets:
        total = next((v for _, v in sorted(sums.totals)), None)
        targets.append((1, value, total))
    for value in sums.paid:
        targets.append((20, value, value))
    ambiguous = [i for i, item in enumerate(items) if len(
        {c.amount for c in item.candidates}) > 1]
    options = [_best_per_amount(items[i].candidates)[:4] for i in ambiguous]
    fixed_sum = sum((default[i].amount for i in range(len(items)) if i not in ambiguous),
                    Decimal(0))
    best: tuple[float, list[Candidate], Decimal | None] | None = None
    size = 1
    for o in options:
        size *= len(o)
    combos = itertools.product(*options) if size <= 20000 else [tuple(o[0] for o in options)]
    for combo in combos:
        total_lines = fixed_sum + sum((c.amount for c in combo), Decimal(0))
        penalty = sum(c.penalty for c in combo)
        for rank, target, total in targets:
            if total_lines == target:
                score = penalty + rank
                if best is None or score < best[0]:
                    chosen = list(default)
                    for i, c in zip(ambiguous, combo, strict=True):
                        chosen[i] = c
                    best = (score, chosen, total)
    added = sums.nets[-1] + sum(sums.taxes, Decimal(0)) if sums.nets and sums.taxes else None
    if best is not None:
        return best[1], True, best[2] if best[2] is not None else added
    repaired = _repair(default, targets)
    if repaired is not None:
        return repaired[0], True, repaired[1] if repaired[1] is not None else added
    total = sorted(sums.totals)[0][1] if sums.totals else added
    return default, False, total


# Digits OCR takes for one another on a till's print.
CONFUSED = {"0": "869", "1": "74", "2": "7", "3": "85", "4": "1", "5": "63", "6": "508",
            "7": "12", "8": "3069", "9": "80"}


def _repair(chosen: list[Candidate], targets: list[tuple[float, Decimal, Decimal | None]]
            ) -> tuple[list[Candidate], Decimal | None] | None:
    """One digit OCR misread in one line's amount (7,95 read as 1,95): taken only when it is
    the single change of one digit that makes the lines add up to what the receipt says."""
    if not chosen:
        return None
    read = sum((c.amount for c in chosen), Decimal(0))
    for _, target, total in sorted(targets, key=lambda t: t[0]):
        found: list[tuple[int, Decimal]] = []
        for n, c in enumerate(chosen):
            if c.corrected or c.drop or (c.quantity not in (None, 1) and c.unit_price is not None
                                         and times(c.quantity, c.unit_price) == c.amount):
                continue  # corrected once already, or its own line's arithmetic holds
            printed = f"{c.amount:.2f}"
            for k, digit in enumerate(printed):
                for other in CONFUSED.get(digit, ""):
                    value = Decimal(printed[:k] + other + printed[k + 1:])
                    if read - c.amount + value == target:
                        found.append((n, value))
        if len(found) == 1:
            n, value = found[0]
            c = chosen[n]
            unit = c.unit_price
            if c.quantity == 1:
                unit = value
            elif c.quantity is None or unit is None or times(c.quantity, unit) != value:
                unit = None
            out = list(chosen)
            out[n] = Candidate(c.quantity, unit, value, c.description, c.penalty, True, c.rate,
                               c.code, lead=c.lead)
            return out, total
        if found:
            return None
    return None


def _rate_figures(lines: list[str]) -> dict[Decimal, list[Decimal]]:
    """The amounts printed beside each rate (its tax, its net, its gross)."""
    figures: dict[Decimal, list[Decimal]] = {}
    for line in lines:
        if not _has_word(line.lower(), TAX_WORDS + ["auf", "sur", "on"]):
            continue
        found = [dec(m.group(1)) for m in RATE.finditer(line)]
        found = [r for r in found if r in KNOWN_RATES]
        if len(found) == 1:
            figures.setdefault(found[0], []).extend(_line_amounts(line))
    return figures


def _rates_by_sums(amounts: list[Decimal], rates: list[Decimal],
                   figures: dict[Decimal, list[Decimal]]) -> list[Decimal | None]:
    """Which lines bear which of two rates, when the receipt prints no rate per line: the one
    split of the lines whose sums give the tax, net or gross printed beside each rate."""
    unknown: list[Decimal | None] = [None] * len(amounts)
    if len(amounts) > 14 or not all(figures.get(r) for r in rates):
        return unknown

    def fits(gross: Decimal, rate: Decimal) -> bool:
        net = (gross * 100 / (100 + rate)).quantize(CENT)
        added = (gross * rate / 100).quantize(CENT)
        return any(abs(f - value) <= CENT for f in figures[rate]
                   for value in (gross, net, gross - net, added))

    found: list[tuple[int, ...]] = []
    for mask in range(1, 2 ** len(amounts) - 1):
        first = [i for i in range(len(amounts)) if mask >> i & 1]
        gross = sum((amounts[i] for i in first), Decimal(0))
        rest = sum(amounts, Decimal(0)) - gross
        if fits(gross, rates[0]) and fits(rest, rates[1]):
            found.append(tuple(first))
            if len(found) > 1:
                return unknown
    if not found:
        return unknown
    return [rates[0] if i in found[0] else rates[1] for i in range(len(amounts))]


def _best_per_amount(candidates: list[Candidate]) -> list[Candidate]:
    """The likeliest reading for each amount a line may hold: the sums check amounts."""
    seen: dict[Decimal, Candidate] = {}
    for c in sorted(candidates, key=lambda c: c.penalty):
        seen.setdefault(c.amount, c)
    return list(seen.values())


def parse_amount(text: str) -> Decimal | None:
    """One amount as printed (1.234,56; 1 234,56; 1,234.56; 12,50 €; £45.00; CHF 4.50)."""
    m = MONEY.search(_fold(text))
    if not m:
        return None
    try:
        value = dec(m.group("num"))
    except InvalidOperation:
        return None
    return -value if m.group("neg") or m.group("negpost") or m.group("negpre") else value

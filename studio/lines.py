"""One rule for a line of an invoice, whoever writes it: a person through a draft's form or the
API (`billing.money.parse_line`), a model held to a proposal's JSON schema
(`leasing.purposes`), and the receipt reader (`leasing.readers.parsing`). A line that fits
here is one a draft takes, so a reading that fits its schema never fails apply for its lines.

The patterns are written once for Python's `re` and JSON Schema (ECMA 262) alike: no
look-around, ASCII digits only (`\\d` would take Arabic-Indic or fullwidth digits too).
"""

from __future__ import annotations

import re
import unicodedata

MAX_LINES = 200  # on one invoice
# Rates in force where the studio's sellers buy and sell, the standard rate first: the receipt
# reader knows a rate by them, and a seller's new line starts at its country's first.
STATUTORY_RATES = {
    "DE": ["19", "7", "0"], "AT": ["20", "10", "13", "0"], "FR": ["20", "10", "5.5", "2.1"],
    "GB": ["20", "5", "0"], "CH": ["8.1", "2.6", "3.8"], "BE": ["21", "12", "6"],
    "NL": ["21", "9"], "LU": ["17", "14", "8", "3"], "IE": ["23", "13.5", "9", "4.8"],
    "IT": ["22", "10", "5", "4"], "ES": ["21", "10", "4"],
}
MAX_DESCRIPTION = 500
MAX_TOTAL = 10**15  # an invoice's total stays below it, so no sum ever loses a digit


def _not_all_zero(digits: int) -> str:
    """1 to `digits` digits, one at least not 0: zeros, the first other digit, then any."""
    return "(" + "|".join(f"{'0' * zeros}[1-9][0-9]{{0,{digits - 1 - zeros}}}"
                          for zeros in range(digits)) + ")"


# An amount: at most twelve digits before the point and six after.
AMOUNT = r"[0-9]{1,12}(\.[0-9]{1,6})?"
# A unit price is signed: a deposit returned (`Leergut -0,25`), a discount or a cancelled
# article is a line of its own at a price below 0, its quantity still above 0. A draft's
# total never goes below 0 (`billing.money.totals`): money given back is a credit note.
PRICE = f"-?{AMOUNT}"
# A quantity: the same, above 0 (1000000000 x 0,01 read as a quantity of 0 is no quantity).
QUANTITY = f"({_not_all_zero(12)}(\\.[0-9]{{1,6}})?|0{{1,12}}\\.{_not_all_zero(6)})"
# A tax rate or a discount: a percent from 0 to 100, at most four decimals.
PERCENT = r"(100(\.0{1,4})?|0?[0-9]{1,2}(\.[0-9]{1,4})?)"
# What no text a person types holds: control characters other than the line break and the tab
# (NUL among them, which PostgreSQL cannot store), and what XML cannot carry.
CONTROL = r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]"
# A description for a schema: no such character, and one at least that is neither a space nor
# one of the common invisible ones (`shows` decides the rest).
DESCRIPTION = (f"[^{CONTROL[1:-1]}]*[^\\s{CONTROL[1:-1]}\\u00ad\\u200b-\\u200f\\u2060-\\u2064"
               f"\\ufeff][^{CONTROL[1:-1]}]*")

_QUANTITY = re.compile(QUANTITY)
_PRICE = re.compile(PRICE)
_PERCENT = re.compile(PERCENT)
_CONTROL = re.compile(CONTROL)


def shows(text: str) -> bool:
    """Whether text shows anything: spaces and format characters alone (a zero-width space)
    are no text."""
    return any(unicodedata.category(c)[0] not in "CZ" for c in text)


def quantity_fits(text: str) -> bool:
    return _QUANTITY.fullmatch(text) is not None


def amount_fits(text: str) -> bool:
    """Whether text is a unit price a line may hold, signed."""
    return _PRICE.fullmatch(text) is not None


def percent_fits(text: str) -> bool:
    return _PERCENT.fullmatch(text) is not None


def description_of(text: str) -> str | None:
    """Text as a line's description: control characters left out, trimmed, at most
    MAX_DESCRIPTION characters; None when nothing shows."""
    found = _CONTROL.sub("", text).strip()[:MAX_DESCRIPTION].strip()
    return found if shows(found) else None

"""Money: currency codes and their minor units from Babel, arithmetic in `Decimal`.

No float ever holds an amount. Each line is rounded half-up to the currency's minor units
(two for EUR, none for JPY, three for KWD), and the totals are the sums of rounded lines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from babel.numbers import format_currency, get_currency_precision, list_currencies

from studio.errors import Refusal

MAX_LINES = 200
MAX_DESCRIPTION = 500
# Sane sizes: a quantity or price of at most twelve whole digits and six decimals.
AMOUNT = re.compile(r"\d{1,12}(\.\d{1,6})?")
RATE = re.compile(r"\d{1,3}(\.\d{1,4})?")


@functools.cache
def currencies() -> frozenset[str]:
    return frozenset(list_currencies())


def currency_code(value: object) -> str:
    """An ISO 4217 code Babel knows, upper case; anything else is refused."""
    code = value.strip().upper() if isinstance(value, str) else ""
    if code not in currencies():
        raise Refusal("invalid_body", "The currency must be an ISO 4217 code such as EUR or USD.")
    return code


def minor_units(currency: str) -> int:
    return get_currency_precision(currency)


def rounded(amount: Decimal, currency: str) -> Decimal:
    """Half-up to the currency's minor units: 1.005 EUR is 1.01, 0.5 JPY is 1."""
    return amount.quantize(Decimal(1).scaleb(-minor_units(currency)), rounding=ROUND_HALF_UP)


def text(amount: Decimal, currency: str) -> str:
    """An amount as the decimal string the API and the database keep."""
    return str(rounded(amount, currency))


def _decimal(value: object, pattern: re.Pattern[str], what: str, line: int) -> Decimal:
    # JSON numbers arrive as int or float; their shortest text is what the person wrote.
    raw = str(value).strip() if isinstance(value, str | int | float) and \
        not isinstance(value, bool) else ""
    if not pattern.fullmatch(raw):
        raise Refusal("invalid_body", f"Line {line}: {what}")
    return Decimal(raw)


@dataclass(frozen=True)
class Line:
    description: str
    quantity: Decimal
    unit_price: Decimal
    tax_rate: Decimal

    def as_json(self) -> dict[str, str]:
        return {"description": self.description, "quantity": str(self.quantity),
                "unit_price": str(self.unit_price), "tax_rate": str(self.tax_rate)}


def parse_line(raw: object, line: int) -> Line:
    """One line item, every field checked; `line` counts from 1 for the message."""
    if not isinstance(raw, dict):
        raise Refusal("invalid_body", f"Line {line} must be an object with a description, "
                                      "quantity, unit price and tax rate.")
    description = raw.get("description")
    if not isinstance(description, str) or not 1 <= len(description.strip()) <= MAX_DESCRIPTION:
        raise Refusal("invalid_body",
                      f"Line {line}: the description must be 1 to {MAX_DESCRIPTION} characters.")
    quantity = _decimal(raw.get("quantity"), AMOUNT, "the quantity must be a number above 0 "
                        "with at most 12 digits before the point and 6 after.", line)
    if quantity <= 0:
        raise Refusal("invalid_body", f"Line {line}: the quantity must be above 0.")
    unit_price = _decimal(raw.get("unit_price"), AMOUNT, "the unit price must be a number, 0 "
                          "or more, with at most 12 digits before the point and 6 after.", line)
    tax_rate = _decimal(raw.get("tax_rate", "0"), RATE,
                        "the tax rate must be a percent from 0 to 100, like 19 or 7.5.", line)
    if tax_rate > 100:
        raise Refusal("invalid_body", f"Line {line}: the tax rate must be at most 100 percent.")
    return Line(description.strip(), quantity.normalize() if quantity % 1 else
                quantity.quantize(Decimal(1)), unit_price, tax_rate.normalize()
                if tax_rate % 1 else tax_rate.quantize(Decimal(1)))


def parse_lines(raw: object) -> list[Line]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_LINES:
        raise Refusal("invalid_body", f"An invoice needs 1 to {MAX_LINES} line items.")
    return [parse_line(item, n) for n, item in enumerate(raw, start=1)]


@dataclass(frozen=True)
class Totals:
    net: Decimal
    tax: Decimal
    total: Decimal
    # Per tax rate: (rate, net, tax), in rate order, as the document lists them.
    by_rate: tuple[tuple[Decimal, Decimal, Decimal], ...]
    line_nets: tuple[Decimal, ...]

    def as_json(self, currency: str) -> dict[str, Any]:
        return {"net": text(self.net, currency), "tax": text(self.tax, currency),
                "total": text(self.total, currency)}


def totals(lines: list[Line], currency: str) -> Totals:
    """Each line's net and tax rounded half-up, then summed: the document adds up exactly."""
    zero = rounded(Decimal(0), currency)
    nets, rates = [], {}
    for line in lines:
        net = rounded(line.quantity * line.unit_price, currency)
        tax = rounded(net * line.tax_rate / 100, currency)
        nets.append(net)
        rate_net, rate_tax = rates.get(line.tax_rate, (zero, zero))
        rates[line.tax_rate] = (rate_net + net, rate_tax + tax)
    net = sum(nets, zero)
    tax = sum((rate_tax for _, rate_tax in rates.values()), zero)
    by_rate = tuple((rate, *rates[rate]) for rate in sorted(rates))
    return Totals(net, tax, net + tax, by_rate, tuple(nets))


def shown(amount: str, currency: str) -> str:
    """An amount as a person reads it on a document: `€2,570.40`, `¥1,200`."""
    return format_currency(Decimal(amount), currency, locale="en")

"""Money: currency codes and their minor units from Babel, arithmetic in `Decimal`.

No float ever holds an amount. Each line is rounded half-up to the currency's minor units
(two for EUR, none for JPY, three for KWD), and the totals are the sums of rounded lines.
A line's net is quantity x unit price, less its discount in percent when it has one. A unit
price may be below 0 (a deposit returned, a discount, a cancelled article: `studio.lines`),
its line then a deduction; rounding half-up is away from zero, so -0.125 is -0.13. The total
of an invoice never goes below 0: money given back is a credit note.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext
from typing import Any

from babel.core import get_global
from babel.numbers import (
    format_currency,
    get_currency_precision,
    get_territory_currencies,
    list_currencies,
)

from studio import i18n
from studio import lines as rule
from studio.billing.identifiers import plain
from studio.errors import N_, FieldChecks, Refusal
from studio.i18n import gettext

# What a line may hold is `studio.lines`, the rule proposals and the receipt reader keep too.
MAX_LINES = rule.MAX_LINES
# Room for 200 lines of the largest amounts at 100 % tax, so no sum ever loses a digit.
ARITHMETIC = Context(prec=60, rounding=ROUND_HALF_UP)
MAX_TOTAL = Decimal(rule.MAX_TOTAL)
MAX_DESCRIPTION = rule.MAX_DESCRIPTION
AMOUNT = re.compile(rule.AMOUNT)
PRICE = re.compile(rule.PRICE)
QUANTITY = re.compile(rule.QUANTITY)
RATE = re.compile(rule.PERCENT)
# A JSON number in exponent form is written out in full only while that stays short.
LONGEST_EXPONENT = 15
# A stored amount past 10**15 is not read as a number (no studio ever took one), so no
# line's arithmetic outgrows ARITHMETIC.
LARGEST_STORED = 15


@functools.cache
def currencies() -> frozenset[str]:
    """The ISO 4217 codes that are legal tender in some territory today, as Babel's CLDR data
    says: no historic codes such as DEM, no testing or fund codes, no precious metals. Read
    once."""
    return frozenset(code for territory in get_global("territory_currencies")
                     for code in get_territory_currencies(territory, tender=True))


def currency_code(value: object) -> str:
    """An ISO 4217 code in use today, upper case; anything else is refused."""
    code = value.strip().upper() if isinstance(value, str) else ""
    if code in currencies():
        return code
    if code in list_currencies():
        raise Refusal("invalid_body", gettext(
            "%(code)s is not a currency in use today; choose a current ISO 4217 code such as EUR"
            " or USD.") % {"code": code})
    raise Refusal("invalid_body", gettext(
        "The currency must be an ISO 4217 code such as EUR or USD."))


# Read once per currency: an export rounds a dozen amounts per invoice, and Babel's look-up
# costs more than the rounding.
@functools.cache
def minor_units(currency: str) -> int:
    return get_currency_precision(currency)


@functools.cache
def _smallest_unit(currency: str) -> Decimal:
    """0.01 for EUR, 1 for JPY, 0.001 for KWD."""
    return Decimal(1).scaleb(-minor_units(currency))


def rounded(amount: Decimal, currency: str) -> Decimal:
    """Half-up to the currency's minor units: 1.005 EUR is 1.01, 0.5 JPY is 1."""
    return amount.quantize(_smallest_unit(currency), rounding=ROUND_HALF_UP, context=ARITHMETIC)


def text(amount: Decimal, currency: str) -> str:
    """An amount as the decimal string the API and the database keep."""
    return str(rounded(amount, currency))


def as_written(value: object) -> str:
    """A number's text as the person wrote it, to be checked against a pattern: text from a
    form or JSON, or a JSON number read exactly (an int or a Decimal; 1.5E+1 is 15). Empty for
    anything else, a float among them: it has been through binary floating point and may no
    longer be what the person wrote."""
    if isinstance(value, Decimal) and value.is_finite() \
            and abs(value.adjusted()) <= LONGEST_EXPONENT:
        return format(value, "f")
    if isinstance(value, str | int | Decimal) and not isinstance(value, bool):
        return str(value).strip()
    return ""


def compact(value: Decimal) -> Decimal:
    """One number one way, however it was written: 50, 50.0 and 50.00 are 50; 7.50 is 7.5."""
    return value.normalize() if value % 1 else value.quantize(Decimal(1))


def _decimal(value: object, pattern: re.Pattern[str], what: str, line: int) -> Decimal:
    if isinstance(value, float):
        raise Refusal("invalid_body", gettext(
            'Line %(line)s: an amount came as a binary floating-point number, which cannot hold'
            ' every decimal exactly; send it as text, like "19.99".') % {"line": line})
    raw = as_written(value)
    if not pattern.fullmatch(raw):
        raise Refusal("invalid_body", gettext("Line %(line)s: %(fault)s") % {
            "line": line, "fault": gettext(what)})
    return Decimal(raw)


@dataclass(frozen=True)
class Line:
    description: str
    quantity: Decimal
    unit_price: Decimal
    tax_rate: Decimal
    # None: no discount. A line stored without one keeps no such key, so its content (and
    # the frozen hash of an invoice issued before discounts) reads as it always did.
    discount_percent: Decimal | None = None

    def as_json(self) -> dict[str, str]:
        kept = {"description": self.description, "quantity": str(self.quantity),
                "unit_price": str(self.unit_price), "tax_rate": str(self.tax_rate)}
        if self.discount_percent is not None:
            kept["discount_percent"] = str(self.discount_percent)
        return kept

    def net(self) -> Decimal:
        """Quantity x unit price, less the discount, before rounding."""
        gross = self.quantity * self.unit_price
        if self.discount_percent is None:
            return gross
        return gross * (100 - self.discount_percent) / 100


def parse_line(raw: object, line: int) -> Line:
    """One line item, every field checked; `line` counts from 1 for the message."""
    if not isinstance(raw, dict):
        raise Refusal("invalid_body", gettext(
            "Line %(line)s must be an object with a description, quantity, unit price and tax"
            " rate.") % {"line": line})
    checks = FieldChecks()  # every field of the line refused at once, each by its name
    text = checks.check(f"description.{line}", _description, raw.get("description"), line)
    quantity = checks.check(f"quantity.{line}", _decimal, raw.get("quantity"), QUANTITY,
                            N_("the quantity must be a number above 0 with at most 12 digits"
                               " before the point and 6 after."), line)
    unit_price = checks.check(f"unit_price.{line}", _decimal, raw.get("unit_price"), PRICE,
                              N_("the unit price must be a number (below 0 for a deduction,"
                                 " like -0.25) with at most 12 digits before the point and 6"
                                 " after."), line)
    tax_rate = checks.check(f"tax_rate.{line}", _decimal, raw.get("tax_rate", "0"), RATE,
                            N_("the tax rate must be a percent from 0 to 100, like 19 or 7.5."),
                            line)
    discount_percent = checks.check(f"discount_percent.{line}", _discount,
                                    raw.get("discount_percent"), line)
    checks.done()
    assert text is not None and quantity is not None and unit_price is not None \
        and tax_rate is not None
    unit_price += 0  # -0 is 0: a price is kept one way
    return Line(text, compact(quantity), unit_price, compact(tax_rate), discount_percent)


def _description(description: object, line: int) -> str:
    if not isinstance(description, str) or not 1 <= len(description.strip()) <= MAX_DESCRIPTION:
        raise Refusal("invalid_body", gettext(
            "Line %(line)s: the description must be 1 to %(most)s characters.") % {
                "line": line, "most": MAX_DESCRIPTION})
    text = plain(description, gettext("description of line %(line)s") % {"line": line}).strip()
    if not rule.shows(text):
        raise Refusal("invalid_body", gettext(
            "Line %(line)s: the description shows nothing: invisible characters alone are not"
            " text.") % {"line": line})
    return text


def _discount(discount: object, line: int) -> Decimal | None:
    if discount is None or (isinstance(discount, str) and not discount.strip()):
        return None  # left out, or a form's blank field
    discount_percent = _decimal(discount, RATE, N_("the discount must be a percent from 0 to"
                                                   " 100, like 10 or 2.5."), line)
    # No discount is one thing, however it is written: a zero is left out.
    return compact(discount_percent) if discount_percent else None


def stored_line(raw: object) -> Line | None:
    """A line as it was stored, read and never judged: only input is checked, so a line
    numbered before part two (a discount at a negative price, no description) still reads.
    None when its amounts are not numbers at all."""
    if not isinstance(raw, dict):
        return None
    try:
        amounts = [Decimal(str(raw.get(name, 0)).strip())
                   for name in ("quantity", "unit_price", "tax_rate")]
        discount = raw.get("discount_percent")
        discount_percent = None if discount is None else Decimal(str(discount).strip())
    except InvalidOperation:
        return None
    if not all(amount.is_finite() and amount.adjusted() <= LARGEST_STORED
               for amount in [*amounts, discount_percent or Decimal(0)]):
        return None
    return Line(str(raw.get("description", "")), *amounts, discount_percent)


def form_row(item: object, n: int) -> int:
    """The row of the form a line came from, as `form_row` names it (a form's blank rows are
    not lines, yet a message names the row the person sees); else its place in the list."""
    row = item.get("form_row") if isinstance(item, dict) else None
    return row if isinstance(row, int) and not isinstance(row, bool) and row >= 1 else n


def parse_lines(raw: object) -> list[Line]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_LINES:
        raise Refusal("invalid_body", gettext("An invoice needs 1 to %(most)s line items.") % {
            "most": MAX_LINES})
    checks = FieldChecks()  # every line's refused fields at once
    rows = [form_row(item, n) for n, item in enumerate(raw, start=1)]
    lines = [checks.check(f"line_items.{row}", parse_line, item, row)
             for row, item in zip(rows, raw, strict=True)]
    checks.done()
    return [line for line in lines if line is not None]


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
    """The totals of lines given as input, which must stay below MAX_TOTAL and not go below 0:
    deductions (a deposit returned, a discount) come off what the invoice bills."""
    found = add_up(lines, currency)
    if found.total >= MAX_TOTAL:
        raise Refusal("invalid_body", gettext(
            "The total must stay below %(most)s; split the amounts over several invoices.") % {
                "most": i18n.number(MAX_TOTAL)})
    if found.total < 0:
        raise Refusal("invalid_body", below_zero(found.total, currency))
    return found


def below_zero(total: Decimal, currency: str) -> str:
    return gettext(
        "The lines come to a total of %(currency)s %(total)s, below 0, and an invoice's total"
        " cannot be: its deductions may only take off what its other lines bill. To give money"
        " back, make a credit note for the invoice it was paid on.") % {
            "currency": currency, "total": text(total, currency)}


def add_up(lines: list[Line], currency: str) -> Totals:
    """Each line's net and tax rounded half-up, then summed: the document adds up exactly."""
    with localcontext(ARITHMETIC):
        zero = rounded(Decimal(0), currency)
        nets, rates = [], {}
        for line in lines:
            net = rounded(line.net(), currency)
            tax = rounded(net * line.tax_rate / 100, currency)
            nets.append(net)
            rate_net, rate_tax = rates.get(line.tax_rate, (zero, zero))
            rates[line.tax_rate] = (rate_net + net, rate_tax + tax)
        net = sum(nets, zero)
        tax = sum((rate_tax for _, rate_tax in rates.values()), zero)
        total = net + tax
    by_rate = tuple((rate, *rates[rate]) for rate in sorted(rates))
    return Totals(net, tax, total, by_rate, tuple(nets))


def shown(amount: str, currency: str) -> str:
    """An amount as a person reads it on a document: `€2,570.40`, `¥1,200`; what is not a
    number (a line stored before part two) as it was stored."""
    try:
        return format_currency(Decimal(amount), currency, locale="en")
    except (InvalidOperation, TypeError, ValueError):
        return str(amount)

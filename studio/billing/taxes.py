"""Tax that is right by default: the rate a new line starts at, and what issuing asks the
person to confirm.

A line's rate starts at the seller's standard rate (its country's first in
`studio.lines.STATUTORY_RATES`), or at 0 % for a business in another EU member state with a
VAT ID, which accounts for the VAT itself (reverse charge, `documents.zero_rate_category`).
Issuing asks to confirm what breaks those rules where they are known to apply: VAT charged to
such a business, or a domestic line at 0 % with no reason the document can print. A seller
whose country is not known gets neither: its new lines start at 0 % as they always did.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from studio import i18n
from studio import lines as rule
from studio.billing import documents

NO_RATE = "0"  # a line's rate when nothing better is known


def seller_country(seller: dict[str, Any] | None) -> str:
    """The seller's country as its profile gives it, or "" when not given."""
    return ((seller or {}).get("country") or "").strip().upper()


def standard_rate(country: str) -> str | None:
    """The standard VAT rate of a country, when the studio knows it."""
    rates = rule.STATUTORY_RATES.get(country)
    return rates[0] if rates else None


def reverse_charge(seller: dict[str, Any], buyer: dict[str, Any] | None) -> bool:
    """Whether the buyer is a business in another EU member state with a VAT ID, billed by a
    seller in the EU with one: the buyer accounts for the VAT."""
    if not buyer:
        return False
    parties = {"seller": seller, "buyer": buyer, "customer": buyer.get("name", "")}
    return documents.zero_rate_category(parties) is documents.REVERSE_CHARGE


def default_rate(seller: dict[str, Any] | None, buyer: dict[str, Any] | None) -> str | None:
    """The rate a new line starts at for this seller and buyer; None when the seller's country
    is not known (a line then starts at 0 %, as before the seller said where it is)."""
    if not seller_country(seller):
        return None
    assert seller is not None
    if reverse_charge(seller, buyer):
        return NO_RATE
    return standard_rate(seller_country(seller))


def with_default_rate(body: dict[str, Any], rate: str | None) -> dict[str, Any]:
    """The body with `rate` on each line that gives none (left out or blank); the rest as
    sent, for the draft's own checks."""
    lines = body.get("line_items")
    if rate is None or not isinstance(lines, list):
        return body
    return {**body, "line_items": [
        {**line, "tax_rate": rate} if isinstance(line, dict) and _no_rate(line) else line
        for line in lines]}


def _no_rate(line: dict[str, Any]) -> bool:
    rate = line.get("tax_rate")
    return rate is None or (isinstance(rate, str) and not rate.strip())


def _rates(lines: list[dict[str, Any]]) -> set[Decimal]:
    found = set()
    for line in lines:
        try:
            found.add(Decimal(str(line.get("tax_rate", "0"))))
        except ArithmeticError:
            continue  # not a rate at all: the draft's own checks say so
    return found


def to_confirm(seller: dict[str, Any] | None, buyer: dict[str, Any] | None,
               lines: list[dict[str, Any]], exemption: str = "") -> list[str]:
    """What looks wrong with an invoice's tax, each in a sentence a person acts on: VAT
    charged to a business that accounts for it itself, or a domestic line at 0 % with no
    reason for it (`exemption`, the invoice's `vat_exemption`). Only where the seller's
    country and the buyer's are known."""
    seller, buyer = seller or {}, buyer or {}
    selling_from = seller_country(seller)
    buying_in = documents.vat_country_of(buyer)
    if selling_from not in documents.EU or not buying_in:
        return []
    rates = _rates(lines)
    name = buyer.get("name") or i18n.gettext("This customer")
    found = []
    if reverse_charge(seller, buyer) and any(rates):
        charged = ", ".join(f"{i18n.number(rate)} %" for rate in sorted(rates) if rate)
        found.append(i18n.gettext(
            "%(name)s is a business in another EU country with the VAT ID %(vat_id)s, so it"
            " pays the VAT itself (reverse charge) and its lines are usually at 0 %%; this"
            " invoice charges %(charged)s VAT.") % {
                "name": name, "vat_id": buyer.get("vat_id", ""), "charged": charged})
    if buying_in == documents.vat_country_of(seller) and Decimal(0) in rates \
            and not exemption.strip():
        found.append(i18n.gettext(
            "%(name)s is in your own country, and a line is at 0 %% VAT without a reason on"
            " the invoice. If the sale is exempt from VAT, give the reason on the draft (the"
            " law that exempts it) so the invoice says it.") % {"name": name})
    return found

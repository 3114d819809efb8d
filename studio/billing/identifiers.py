"""The identifiers a business is known by, checked and stored compact: email, country, VAT ID,
IBAN and BIC. Each check names its field when it refuses, and an empty value is allowed
(every one of them is optional)."""

from __future__ import annotations

import functools
import re
import unicodedata

import pycountry
from schwifty import BIC, IBAN
from stdnum.eu import vat as eu_vat
from stdnum.exceptions import ValidationError

from studio import addresses, lines
from studio.errors import Refusal

MAX_VAT_ID = 50
# A VAT ID's prefix is its member state's code, except Greece's (EL); XI is Northern Ireland.
EU_PREFIXES = {"EL" if code == "gr" else code.upper() for code in eu_vat.MEMBER_STATES}
# What no text a person types holds: control characters other than the line break and the tab
# (NUL among them, which PostgreSQL cannot store), and what XML cannot carry (lone surrogates,
# U+FFFE, U+FFFF). Stored, any of them would keep the e-invoice and the email from being built.
CONTROL = re.compile(lines.CONTROL)


def text(value: object, what: str, limit: int, least: int = 0) -> str:
    """Plain text of `least` to `limit` characters, trimmed; left out is empty. Text that
    must be there must also show: format characters alone (a zero-width space) are none."""
    found = _text(value, what)
    if not least <= len(found) <= limit:
        raise Refusal("invalid_body", f"The {what} must be text of {least} to {limit:,} "
                      "characters." if least else f"The {what} must be text of at most "
                      f"{limit:,} characters.")
    if least and not any(unicodedata.category(c)[0] not in "CZ" for c in found):
        raise Refusal("invalid_body", f"The {what} shows nothing: invisible characters alone"
                                      " are not text. Type it again.")
    return found


def plain(value: str, what: str) -> str:
    """Text a person typed, each line break as one \\n (a form sends \\r\\n); refused, naming
    `what`, when it holds a character that is not text."""
    found = value.replace("\r\n", "\n")
    control = CONTROL.search(found)
    if control:
        raise Refusal("invalid_text", f"The {what} holds an invisible control character"
                                      f" (U+{ord(control.group()):04X}), which is not text;"
                                      " remove it and try again.")
    return found


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refusal("invalid_body", f"The {what} must be text.")
    return plain(value, what).strip()


def email(value: object, what: str = "email") -> str:
    """An address by the one rule the studio keeps and sends to (`addresses.address_fault`),
    trimmed; left out is empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refusal("invalid_body", f"The {what} must be text.")
    try:
        return addresses.address(value) if value.strip() else ""
    except addresses.NotAnAddress as fault:
        raise Refusal("invalid_email", f"The {what} {fault}.") from None


@functools.cache
def countries() -> list[tuple[str, str]]:
    """Every ISO 3166-1 country as (code, name), by name: the choices a form offers."""
    return sorted(((item.alpha_2, item.name) for item in pycountry.countries),
                  key=lambda pair: pair[1])


def country(value: object) -> str:
    """An ISO 3166-1 alpha-2 code, upper case."""
    code = _text(value, "country").upper()
    if code and (len(code) != 2 or pycountry.countries.get(alpha_2=code) is None):
        raise Refusal("invalid_country", "The country must be a two-letter ISO 3166 code such "
                                         "as DE, FR or US.")
    return code


def vat_id(value: object, country_code: str = "") -> str:
    """An EU VAT ID (one with an EU prefix, or any of a customer in the EU) is checked with
    its member state's rules and stored compact with its prefix (`DE136695976`); any other
    is kept as typed, its spaces squeezed."""
    text = " ".join(_text(value, "VAT ID").split())
    if not text:
        return ""
    compact = re.sub(r"[\s.\-/]", "", text).upper()
    member = "EL" if country_code == "GR" else country_code
    if compact[:2] not in EU_PREFIXES and member in EU_PREFIXES:
        compact = member + compact
    if compact[:2] in EU_PREFIXES:
        try:
            return eu_vat.validate(compact)
        except ValidationError:
            raise Refusal("invalid_vat_id", f"The VAT ID {text} is not a valid "
                                            f"{compact[:2]} VAT number; check it for a typo "
                                            "(it starts with the country's code, like "
                                            "DE136695976).") from None
    if len(text) > MAX_VAT_ID:
        raise Refusal("invalid_vat_id", f"The VAT ID must be at most {MAX_VAT_ID} characters.")
    return text


def iban(value: object) -> str:
    text = _text(value, "IBAN")
    if not text:
        return ""
    try:
        return IBAN(text).compact
    except ValueError:  # schwifty's own errors are ValueErrors
        raise Refusal("invalid_iban", f"The IBAN {text[:50]} is not a valid one; check it for "
                                      "a typo (it starts with the country's code, like "
                                      "DE89 3704 0044 0532 0130 00).") from None


def bic(value: object) -> str:
    text = _text(value, "BIC")
    if not text:
        return ""
    try:
        return BIC(text).compact
    except ValueError:  # schwifty's own errors are ValueErrors
        raise Refusal("invalid_bic", f"The BIC {text[:50]} is not a valid one; it is 8 or 11 "
                                     "letters and digits, like DEUTDEFF.") from None


def revision(value: object, what: str) -> int:
    """The version of a draft or customer the person edited: a whole number from 1 (a form
    field is text)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        value = int(value)
    if type(value) is not int or value < 1:
        raise Refusal("invalid_body", f"Reload the {what} and make your change again: the form"
                                      " did not say which version of it you edited.")
    return value

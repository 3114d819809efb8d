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

from studio import addresses, i18n, lines
from studio.errors import N_, Refusal
from studio.i18n import gettext

MAX_VAT_ID = 50
# A VAT ID's prefix is its member state's code, except Greece's (EL); XI is Northern Ireland.
EU_PREFIXES = {"EL" if code == "gr" else code.upper() for code in eu_vat.MEMBER_STATES}
# What no text a person types holds: control characters other than the line break and the tab
# (NUL among them, which PostgreSQL cannot store), and what XML cannot carry (lone surrogates,
# U+FFFE, U+FFFF). Stored, any of them would keep the e-invoice and the email from being built.
CONTROL = re.compile(lines.CONTROL)
# What a form without its version says, by what was edited (each said whole, as a language
# puts the words around it).
RELOAD = {
    "draft": N_("Reload the draft and make your change again: the form did not say which version"
                " of it you edited."),
    "customer": N_("Reload the customer and make your change again: the form did not say which"
                   " version of it you edited."),
    "schedule": N_("Reload the schedule and make your change again: the form did not say which"
                   " version of it you edited."),
}


def text(value: object, what: str, limit: int, least: int = 0) -> str:
    """Plain text of `least` to `limit` characters, trimmed; left out is empty. Text that
    must be there must also show: format characters alone (a zero-width space) are none."""
    found = _text(value, what)
    if not least <= len(found) <= limit:
        said = {"what": gettext(what), "least": least, "limit": i18n.number(limit)}
        raise Refusal("invalid_body", (
            gettext("The %(what)s must be text of %(least)s to %(limit)s characters.") if least
            else gettext("The %(what)s must be text of at most %(limit)s characters.")) % said)
    if least and not any(unicodedata.category(c)[0] not in "CZ" for c in found):
        raise Refusal("invalid_body", gettext(
            "The %(what)s shows nothing: invisible characters alone are not text. Type it"
            " again.") % {"what": gettext(what)})
    return found


def plain(value: str, what: str) -> str:
    """Text a person typed, each line break as one \\n (a form sends \\r\\n); refused, naming
    `what` (an English word the catalogue translates, marked `N_()` where it is written), when
    it holds a character that is not text."""
    found = value.replace("\r\n", "\n")
    control = CONTROL.search(found)
    if control:
        raise Refusal("invalid_text", gettext(
            "The %(what)s holds an invisible control character (%(char)s), which is not text;"
            " remove it and try again.") % {"what": gettext(what),
                                            "char": f"U+{ord(control.group()):04X}"})
    return found


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refusal("invalid_body", gettext("The %(what)s must be text.") % {
            "what": gettext(what)})
    return plain(value, what).strip()


def email(value: object, what: str = N_("email")) -> str:
    """An address by the one rule the studio keeps and sends to (`addresses.address_fault`),
    trimmed; left out is empty."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Refusal("invalid_body", gettext("The %(what)s must be text.") % {
            "what": gettext(what)})
    try:
        return addresses.address(value) if value.strip() else ""
    except addresses.NotAnAddress as fault:
        raise Refusal("invalid_email", gettext("The %(what)s %(fault)s.") % {
            "what": gettext(what), "fault": fault}) from None


@functools.cache
def countries() -> list[tuple[str, str]]:
    """Every ISO 3166-1 country as (code, name), by name: the choices a form offers."""
    return sorted(((item.alpha_2, item.name) for item in pycountry.countries),
                  key=lambda pair: pair[1])


def country(value: object) -> str:
    """An ISO 3166-1 alpha-2 code, upper case."""
    code = _text(value, N_("country")).upper()
    if code and (len(code) != 2 or pycountry.countries.get(alpha_2=code) is None):
        raise Refusal("invalid_country", gettext(
            "The country must be a two-letter ISO 3166 code such as DE, FR or US."))
    return code


def vat_id(value: object, country_code: str = "") -> str:
    """An EU VAT ID (one with an EU prefix, or any of a customer in the EU) is checked with
    its member state's rules and stored compact with its prefix (`DE136695976`); any other
    is kept as typed, its spaces squeezed."""
    text = " ".join(_text(value, N_("VAT ID")).split())
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
            raise Refusal("invalid_vat_id", gettext(
                "The VAT ID %(vat_id)s is not a valid %(country)s VAT number; check it for a"
                " typo (it starts with the country's code, like DE136695976).") % {
                    "vat_id": text, "country": compact[:2]}) from None
    if len(text) > MAX_VAT_ID:
        raise Refusal("invalid_vat_id", gettext(
            "The VAT ID must be at most %(most)s characters.") % {"most": MAX_VAT_ID})
    return text


def iban(value: object) -> str:
    text = _text(value, N_("IBAN"))
    if not text:
        return ""
    try:
        return IBAN(text).compact
    except ValueError:  # schwifty's own errors are ValueErrors
        raise Refusal("invalid_iban", gettext(
            "The IBAN %(iban)s is not a valid one; check it for a typo (it starts with the"
            " country's code, like DE89 3704 0044 0532 0130 00).") % {"iban": text[:50]}
        ) from None


def bic(value: object) -> str:
    text = _text(value, N_("BIC"))
    if not text:
        return ""
    try:
        return BIC(text).compact
    except ValueError:  # schwifty's own errors are ValueErrors
        raise Refusal("invalid_bic", gettext(
            "The BIC %(bic)s is not a valid one; it is 8 or 11 letters and digits, like"
            " DEUTDEFF.") % {"bic": text[:50]}) from None


def revision(value: object, what: str) -> int:
    """The version of a draft or customer the person edited: a whole number from 1 (a form
    field is text)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        value = int(value)
    if type(value) is not int or value < 1:
        said = RELOAD.get(what)
        raise Refusal("invalid_body", gettext(said) if said else gettext(
            "Reload the %(what)s and make your change again: the form did not say which"
            " version of it you edited.") % {"what": gettext(what)})
    return value

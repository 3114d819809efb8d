"""The languages the studio speaks: one catalogue of every string a person reads (gettext
through Babel, `studio/locale/<language>/LC_MESSAGES/messages.po`), and amounts and dates as
each language writes them (Babel's CLDR data).

Which language is spoken is per context: a page follows its person (`use` in the web edge),
a document its customer (`use` around the rendering). English is the source language: its
strings are the catalogue's keys, and a string without a translation reads in English.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import functools
import io
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

from babel.dates import format_date
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_currency, format_decimal
from babel.support import NullTranslations, Translations

LANGUAGES = ("en", "de", "fr", "es", "it", "nl")
# The languages the studio's own pages speak whole: a person's choice or browser among these.
# A customer's documents speak every one of LANGUAGES.
PAGE_LANGUAGES = ("en", "de", "fr")
NAMES = {"en": "English", "de": "Deutsch", "fr": "Français", "es": "Español",
         "it": "Italiano", "nl": "Nederlands"}
DEFAULT = "en"
# A country's language, where the studio speaks it (ISO 3166-1 alpha-2); English elsewhere.
BY_COUNTRY = {"DE": "de", "AT": "de", "CH": "de", "LI": "de", "FR": "fr", "BE": "fr",
              "LU": "fr", "MC": "fr", "ES": "es", "IT": "it", "SM": "it", "NL": "nl"}
# Dates as each language writes them in a document: 05.12.2026, 05/12/2026.
DATE_PATTERNS = {"en": "d MMM y", "de": "dd.MM.y", "fr": "dd/MM/y", "es": "dd/MM/y",
                 "it": "dd/MM/y", "nl": "dd-MM-y"}
LOCALE = Path(__file__).parent / "locale"

_current: contextvars.ContextVar[str] = contextvars.ContextVar("language", default=DEFAULT)


def known(language: object) -> str | None:
    """The language code if the studio speaks it (`de`, `de-AT` and `DE` read as `de`)."""
    if not isinstance(language, str):
        return None
    code = language.strip().replace("_", "-").split("-")[0].lower()
    return code if code in LANGUAGES else None


def of_country(country: str | None) -> str:
    """The language a customer in that country is written to by default."""
    return BY_COUNTRY.get((country or "").strip().upper(), DEFAULT)


def from_accept_language(header: str | None) -> str | None:
    """The first language of an `Accept-Language` header the pages speak, by its weights."""
    asked: list[tuple[float, int, str]] = []
    for n, part in enumerate((header or "")[:500].split(",")):
        name, _, params = part.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        code = known(name)
        if code in PAGE_LANGUAGES and weight > 0:
            asked.append((-weight, n, code))
    return min(asked)[2] if asked else None


def current() -> str:
    return _current.get()


@contextlib.contextmanager
def use(language: str | None) -> Iterator[str]:
    """Speak `language` (English when unknown) for what runs inside."""
    code = known(language) or DEFAULT
    token = _current.set(code)
    try:
        yield code
    finally:
        _current.reset(token)


def speak(language: str | None) -> None:
    """Speak `language`, if the studio speaks it, from here to the end of the enclosing `use`:
    a page's person chose one, and is known only once the request has been read."""
    code = known(language)
    if code is not None:
        _current.set(code)


@functools.cache
def translations(language: str) -> NullTranslations:
    """The language's catalogue, read once: its `messages.po` compiled in memory."""
    path = LOCALE / language / "LC_MESSAGES" / "messages.po"
    if language == DEFAULT or not path.exists():
        return NullTranslations()
    with path.open("rb") as source:
        catalog = read_po(source, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Translations(compiled)


def gettext(message: str) -> str:
    return translations(current()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return translations(current()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """A string whose words depend on where it stands: a document's "Issued" is its date."""
    return translations(current()).pgettext(context, message)


def npgettext(context: str, singular: str, plural: str, n: int) -> str:
    return translations(current()).npgettext(context, singular, plural, n)


_ = gettext


def _exact(value: Decimal | str | int) -> Decimal | None:
    """The value as a finite decimal, None when it is none (then shown as written)."""
    try:
        exact = Decimal(str(value))
    except ArithmeticError:
        return None
    return exact if exact.is_finite() else None


def money(amount: Decimal | str | int | None, currency: str, language: str | None = None
          ) -> str:
    """An amount as the language writes it: `1.428,60 €`, `1 200,50 €`, `€1,200.50`; what
    is no amount is shown as written, never failing the page."""
    if amount is None or amount == "":
        return ""
    exact = _exact(amount)
    if exact is None:
        return f"{currency} {amount}"
    return format_currency(exact, currency, locale=language or current())


def number(value: Decimal | str | int | None, language: str | None = None) -> str:
    """A quantity or rate with the language's separators, its decimals kept as written."""
    if value is None or value == "":
        return ""
    exact = _exact(value)
    if exact is None:
        return str(value)
    exponent = exact.as_tuple().exponent
    places = max(0, -exponent) if isinstance(exponent, int) else 0
    pattern = "#,##0" + ("." + "0" * places if places else "")
    return format_decimal(exact, format=pattern, locale=language or current())


def date(value: dt.date | str | None, language: str | None = None) -> str:
    """A date as the language writes it in a document: `05.12.2026`, `05/12/2026`; what is
    no date (a model's `2024-02-30`) is shown as written, never failing the page."""
    if value is None or value == "":
        return ""
    try:
        day = dt.date.fromisoformat(value[:10]) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    code = language or current()
    return format_date(day, DATE_PATTERNS.get(code, DATE_PATTERNS[DEFAULT]), locale=code)


def install(environment: object) -> None:
    """Give a Jinja environment the catalogue (`_`, `gettext`, `ngettext`, `{% trans %}`) and
    the filters `money`, `number` and `date`, all speaking the current language."""
    env = environment  # a jinja2.Environment
    env.add_extension("jinja2.ext.i18n")  # type: ignore[attr-defined]
    env.install_gettext_callables(gettext, ngettext, newstyle=True,  # type: ignore[attr-defined]
                                  pgettext=pgettext, npgettext=npgettext)
    env.filters.update(money=money, number=number, date=date)  # type: ignore[attr-defined]
    env.globals.update(language=current)  # type: ignore[attr-defined]

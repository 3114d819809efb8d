"""Numbers in a form as the person's language writes them (`1.200,50`, `1 200,50`, `1,200.50`),
read into the one machine format the studio's rules check (`1200.50`). JSON never comes here.

Which mark is which: in German, French, Spanish, Italian and Dutch `,` is the decimal mark and
`.` or a space groups thousands; in English the reverse. Where only one mark is written once, a
group mark is followed by exactly three digits, so `1.200` is 1200 in German and `1,200` is 1200
in English, while `35.00` (in German) or `35,00` (in English) has its decimals after the other
mark. Where both marks are written, the last one is the decimal mark.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from studio import i18n

# Languages whose decimal mark is the comma; the others write a point.
DECIMAL_COMMA = {"de", "fr", "es", "it", "nl"}
# The spaces people and CLDR put between groups of thousands: plain, no-break, narrow no-break,
# thin.
GROUP_SPACES = re.compile(r"[ \u00a0\u202f\u2009]")
MINUS = ("-", "\u2212")
# The fields of the studio's forms that hold an amount, a quantity or a percent.
NUMBER_FIELDS = ("quantity", "unit_price", "discount_percent", "tax_rate", "amount")
# The fields of a draft's or a schedule's line, each sent once per line of the form.
LINE_FIELDS = ("description", "quantity", "unit_price", "discount_percent", "tax_rate")
_DIGITS = re.compile(r"[0-9]+")
# A group of thousands never follows a lone 0: `0.500` is half, not five hundred.
_GROUPED = re.compile(r"[1-9][0-9]{0,2}( [0-9]{3})+")


def as_machine_number(text: str, language: str) -> str:
    """`text` as the language writes a number, in the machine format (`-1200.50`); blank stays
    blank. ValueError when it is no number in that language."""
    written = text.strip()
    if not written:
        return ""
    sign = ""
    if written.startswith(MINUS):
        sign, written = "-", written[1:].lstrip()
    written = GROUP_SPACES.sub(" ", written)
    decimal, group = (",", ".") if language in DECIMAL_COMMA else (".", ",")
    if decimal in written and group in written:
        # Both written: the last is the decimal mark, whichever the language prefers.
        if written.rfind(group) > written.rfind(decimal):
            decimal, group = group, decimal
    elif written.count(group) == 1 and not re.fullmatch(rf"[1-9][0-9]{{0,2}}\{group}[0-9]{{3}}",
                                                        written):
        decimal, group = group, decimal  # `35.00` in German: one point, no group of thousands
    whole, _, fraction = written.replace(group, " ").partition(decimal)
    if decimal in fraction or " " in fraction or (fraction == "" and written.endswith(decimal)):
        raise ValueError(text)
    if not (_DIGITS.fullmatch(whole) or _GROUPED.fullmatch(whole)):
        raise ValueError(text)
    if fraction and not _DIGITS.fullmatch(fraction):
        raise ValueError(text)
    return sign + whole.replace(" ", "") + (f".{fraction}" if fraction else "")


def example(field: str, language: str) -> str:
    """A number of the kind the field holds, as the language writes it."""
    value = "1200.50" if field in ("unit_price", "amount") else \
        "1.5" if field == "quantity" else "7.5"
    return i18n.number(Decimal(value), language)


def refusal_of(field: str, line: int | None, language: str) -> str:
    """What the person reads when a number is not one: the field, its line, the form expected."""
    _ = i18n.gettext
    shown = example(field, language)
    with i18n.use(language):
        if line is None:
            return _("The amount must be a number like %(example)s.") % {"example": shown}
        messages = {
            "quantity": _("The quantity of line %(line)s must be a number like %(example)s."),
            "unit_price": _("The unit price of line %(line)s must be a number like"
                            " %(example)s."),
            "discount_percent": _("The discount of line %(line)s must be a percent like"
                                  " %(example)s."),
            "tax_rate": _("The tax rate of line %(line)s must be a percent like %(example)s."),
        }
        return messages[field] % {"line": line, "example": shown}


def form_numbers(form: dict[str, Any], language: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A form's numbers in the machine format, and what is wrong with each that is no number,
    by field (`amount`, or `unit_price.2` for the second line of the form). A number refused is
    left as written, so the rules that follow refuse it too."""
    read = dict(form)
    refused: dict[str, str] = {}
    for field in NUMBER_FIELDS:
        if field not in form:
            continue
        values = form[field]
        listed = values if isinstance(values, list) else [values]
        machine = []
        for row, value in enumerate(listed, start=1):
            try:
                machine.append(as_machine_number(value, language) if isinstance(value, str)
                               else value)
            except ValueError:
                machine.append(value)
                many = isinstance(values, list)
                refused[f"{field}.{row}" if many else field] = refusal_of(
                    field, row if many else None, language)
        read[field] = machine if isinstance(values, list) else machine[0]
    return read, refused


def form_rows(form: dict[str, Any]) -> list[int]:
    """The rows of a form's line table that are lines, counted from 1: a row left wholly blank
    is not a line."""
    columns = [form.get(field, []) for field in LINE_FIELDS]
    columns = [column if isinstance(column, list) else [column] for column in columns]
    rows = max((len(column) for column in columns), default=0)
    return [row + 1 for row in range(rows)
            if any(str(column[row]).strip() for column in columns if row < len(column))]


def at_form_rows(fields: dict[str, str], rows: list[int]) -> dict[str, str]:
    """Field errors keyed by line (`unit_price.2`, the second line) keyed by the form's row
    instead, where blank rows between lines make the two differ."""
    placed = {}
    for key, message in fields.items():
        name, _, line = key.rpartition(".")
        if name in LINE_FIELDS and line.isdigit() and 1 <= int(line) <= len(rows):
            key = f"{name}.{rows[int(line) - 1]}"
        placed[key] = message
    return placed

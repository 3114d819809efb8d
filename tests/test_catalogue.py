"""The one catalogue is complete: every string Babel extracts (`pybabel extract -F babel.cfg`)
has a German and a French translation, no template holds words a person reads outside it, and
the catalogue files themselves read cleanly."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from studio import i18n
from studio.errors import REFUSALS

TOP = Path(__file__).resolve().parent.parent
TEMPLATES = TOP / "templates"
CHECKED = ("de", "fr")  # the languages every string must have; es, it and nl may lag
# Words a page may show as they are in every language: the product's name, codes and samples.
SAME_IN_EVERY_LANGUAGE = frozenset({
    "Studio", "IBAN", "BIC", "PDF", "HEIC", "UTC", "EUR", "DE136695976",
    "DE89 3704 0044 0532 0130 00",
})
PUNCTUATION = " ·—–-:;,.()…←→"
# Attributes whose values a person reads (or hears, from a screen reader).
READ_ATTRIBUTES = re.compile(
    r"""\b(aria-label|placeholder|title|alt|hx-confirm|data-confirm)\s*=\s*"([^"]*)\"""")
LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)


@functools.cache
def extracted() -> dict[str, list[str]]:
    """Every msgid Babel extracts with the project's own mapping, and where it stands."""
    with (TOP / "babel.cfg").open() as config:
        method_map, options_map = parse_mapping_cfg(config)
    found: dict[str, list[str]] = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(TOP), method_map, options_map):
        for msgid in (message,) if isinstance(message, str) else message[:1]:
            if msgid:
                found.setdefault(msgid, []).append(f"{filename}:{lineno}")
    return found


def catalogues(language: str) -> list[tuple[Path, Catalog]]:
    folder = i18n.LOCALE / language / "LC_MESSAGES"
    read: list[tuple[Path, Catalog]] = []
    for path in sorted(folder.glob("*.po")):
        with path.open("rb") as source:
            read.append((path, read_po(source, locale=language)))
    return read


@pytest.mark.parametrize("language", [code for code in i18n.LANGUAGES if code != i18n.DEFAULT])
def test_each_language_has_one_catalogue(language: str) -> None:
    """One file a language: a string has one translation, never one per area of the code."""
    folder = i18n.LOCALE / language / "LC_MESSAGES"
    assert sorted(path.name for path in folder.glob("*.po")) == ["messages.po"]


def translated(language: str) -> set[str]:
    """The msgids with a translation in any of the language's catalogue files."""
    done: set[str] = set()
    for _path, catalog in catalogues(language):
        for message in catalog:
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            if message.id and all(strings) and not message.fuzzy:
                done.add(message.id if isinstance(message.id, str) else message.id[0])
    return done


def words_left_out(source: str) -> list[str]:
    """The text of a template a person would read that does not go through the catalogue:
    what is left once Jinja's comments, `{% trans %}` blocks, expressions and tags, scripts,
    styles, HTML tags and entities are taken out, and the read attributes' plain words."""
    text = re.sub(r"\{#.*?#\}", "", source, flags=re.S)
    text = re.sub(r"\{%-?\s*trans\b.*?%\}.*?\{%-?\s*endtrans\s*-?%\}", "\x00", text, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "\x00", text, flags=re.S)
    text = re.sub(r"<(script|style)\b.*?</\1\s*>", "\x00", text, flags=re.S | re.I)
    left: list[str] = [value for _name, value in READ_ATTRIBUTES.findall(text)]
    text = re.sub(r"<[^>]*>", "\x00", text)
    left += text.split("\x00")
    found: list[str] = []
    for piece in left:
        for part in re.sub(r"&#?\w+;", " ", piece).split("\x00"):
            said = " ".join(part.split()).strip(PUNCTUATION)
            if LETTERS.search(said) and said not in SAME_IN_EVERY_LANGUAGE:
                found.append(said)
    return found


def test_the_extraction_finds_the_pages_words_and_the_refusals() -> None:
    found = extracted()
    for msgid in ("Your invoices", "Sign in to continue.", "Language of these pages"):
        assert msgid in found, msgid


def test_every_refusals_own_sentence_is_marked_for_the_catalogue() -> None:
    """A default message left unmarked (`N_`) is never extracted, so never translated."""
    unmarked = [code for code, (_status, message) in REFUSALS.items()
                if message not in extracted()]
    assert not unmarked, f"studio/errors.py: wrap these codes' messages in N_(): {unmarked}"


@pytest.mark.parametrize("language", CHECKED)
def test_every_extracted_string_has_a_translation(language: str) -> None:
    missing = {msgid: where for msgid, where in extracted().items()
               if msgid not in translated(language)}
    assert not missing, (
        f"{len(missing)} strings have no {language} translation in"
        f" studio/locale/{language}/LC_MESSAGES/messages.po:\n"
        + "\n".join(f"  {where[0]}: {msgid!r}" for msgid, where in sorted(
            missing.items(), key=lambda item: item[1][0])))


@pytest.mark.parametrize("template", sorted(path.name for path in TEMPLATES.glob("*.html")))
def test_no_template_holds_words_outside_the_catalogue(template: str) -> None:
    left = words_left_out((TEMPLATES / template).read_text(encoding="utf-8"))
    assert not left, f"templates/{template} shows words no catalogue translates:\n" + \
        "\n".join(f"  {said!r}" for said in left)


def test_the_check_of_left_out_words_sees_text_attributes_and_passes_the_catalogue() -> None:
    assert words_left_out('<p>Hello <b>there</b></p>') == ["Hello", "there"]
    assert words_left_out('<a aria-label="Main menu" href="/x">{{ _("Go") }}</a>') == \
        ["Main menu"]
    assert words_left_out('{% trans n=1 %}One <b>{{ n }}</b>{% endtrans %} {# note #}'
                          '<script>let a = "b";</script>&nbsp;— 42 €') == []


@pytest.mark.parametrize("language", CHECKED)
def test_the_catalogue_files_read_whole_without_fuzzy_or_empty_entries(language: str) -> None:
    files = catalogues(language)
    assert files, f"no catalogue for {language}"
    problems: list[str] = []
    for path, catalog in files:
        for message in catalog:
            if not message.id:
                continue
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            if message.fuzzy:
                problems.append(f"{path.name}: fuzzy {message.id!r}")
            if not all(strings):
                problems.append(f"{path.name}: empty {message.id!r}")
            for error in message.check(catalog):  # placeholders kept, plural forms whole
                problems.append(f"{path.name}: {message.id!r}: {error}")
    assert not problems, "\n".join(problems)
    # Compiled as the studio compiles them: each language answers in its own words.
    with i18n.use(language):
        assert i18n.gettext("Your invoices") != "Your invoices"

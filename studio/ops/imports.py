"""`studio import`: drafts from a CSV or JSON file, all or nothing, and twice is once.

Each draft names an `external_id`. It is bound, like every other intent, through the request
binding: (owner, "import", external_id) -> the draft it made. Importing the same file again
finds every id bound to the same content and makes nothing; an id bound to other content
refuses the whole file.

The whole file is read, checked and normalised before anything is written, and every
problem is listed by its line (CSV) or item (JSON) and field. Only then does one short
transaction insert the prepared rows, so a large file holds its account for the inserts
alone and a studio serving the same database keeps answering.

Imports learn customers: a draft names its customer by name, and the owner's customer of that
name (in any case) is the one it names; where there is none, the import makes it, with the
email, country and VAT ID the file gives (optional columns). A customer already there keeps
the details the person gave it.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from studio.billing import identifiers, invoices, money
from studio.errors import Refusal
from studio.store import bindings
from studio.store.dialect import account_lock, hold
from studio.store.transactions import clock, in_transaction

CSV_HEADER = ["external_id", "customer", "currency", "due_date", "description", "quantity",
              "unit_price", "tax_rate"]
DRAFT_FIELDS = ("customer", "currency", "due_date")
# Optional, after the others: what the import learns about a customer it makes.
CUSTOMER_COLUMNS = ("customer_email", "customer_country", "customer_vat_id")
# What a draft's binding was made of before drafts had these: left out while unset, so a file
# imported before them is still the same import.
LATER_FIELDS = ("customer_id", "supply_date", "notes", "vat_exemption")
LINE_FIELDS = ("description", "quantity", "unit_price", "tax_rate")
MAX_BYTES = 20 * 1024 * 1024
MAX_DRAFTS = 50_000
MAX_EXTERNAL_ID = 100
# Stand-ins that pass every check, so one field at a time can be checked by the same parse
# functions the API uses: each problem is then named by its own field.
VALID_LINE = {"description": "-", "quantity": "1", "unit_price": "0", "tax_rate": "0"}
VALID_DRAFT = {"customer": "-", "currency": "EUR", "due_date": "2000-01-01",
               "line_items": [VALID_LINE]}
_LINE_PREFIX = re.compile(r"^Line \d+: ")


class ImportError_(Exception):  # noqa: N801 - `ImportError` is Python's own
    """A file that cannot be imported, with every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class Planned:
    """One draft as the file gives it: where it came from, its body as the API would take it."""

    external_id: str
    where: str  # "line 4" or "item 2", for messages
    body: dict[str, Any]
    lines_checked: bool = False  # CSV: each line was checked as its row was read
    buyer: dict[str, Any] = field(default_factory=dict)  # customer_email, ... as given


@dataclass(frozen=True)
class Prepared:
    """One draft checked and normalised, ready to insert."""

    external_id: str
    where: str
    fields: dict[str, Any]  # as `invoices.parse_draft` makes them
    fingerprint: str
    buyer: dict[str, str] = field(default_factory=dict)  # email, country, vat_id, checked


@dataclass(frozen=True)
class Outcome:
    made: int
    already: int
    customers: int = 0  # customers the import made


# --- reading and checking: before any transaction --------------------------------------------


def read_file(path: Path) -> list[Prepared]:
    """The drafts a file holds, in file order, every one checked and normalised; or every
    problem found."""
    if not path.is_file():
        raise ImportError_([f"There is no file at {path}."])
    if path.stat().st_size > MAX_BYTES:
        raise ImportError_([f"{path} is larger than {MAX_BYTES // 2**20} MiB; a file may hold "
                            f"at most {MAX_DRAFTS:,} drafts in {MAX_BYTES // 2**20} MiB: "
                            "split it."])
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ImportError_([f"{path} is not UTF-8 text."]) from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("["):
        planned = _from_json(text)
    else:
        planned = _from_csv(text)
    return prepare(planned)


def _too_many() -> ImportError_:
    return ImportError_([f"The file holds more than {MAX_DRAFTS:,} drafts; a file may hold at "
                         f"most {MAX_DRAFTS:,} drafts: split it into several files."])


def _from_json(text: str) -> list[Planned]:
    try:
        # Numbers exactly, as the API reads them: a decimal, never a binary float.
        items = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
    except RecursionError:
        raise ImportError_(["The JSON nests too deeply: a draft's fields are text and its "
                            "line_items a list of objects."]) from None
    except ValueError as error:
        raise ImportError_([f"The JSON does not parse: {error}."]) from None
    if not isinstance(items, list):
        raise ImportError_(["The JSON must be a list of drafts, each with an external_id."])
    if len(items) > MAX_DRAFTS:
        raise _too_many()
    planned: dict[str, Planned] = {}
    problems: list[str] = []
    for n, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            problems.append(f"item {n}: a draft must be an object with an external_id, "
                            "customer, currency, due_date and line_items.")
            continue
        external_id = item.get("external_id")
        if not isinstance(external_id, str) or not 1 <= len(external_id) <= MAX_EXTERNAL_ID:
            problems.append(f"item {n}, external_id: must be text of 1 to "
                            f"{MAX_EXTERNAL_ID} characters.")
            continue
        if external_id in planned:
            problems.append(f"item {n}, external_id: {external_id!r} is also "
                            f"{planned[external_id].where}.")
            continue
        # A draft names its customer by name: the import finds or makes the customer.
        body = {key: value for key, value in item.items()
                if key not in ("external_id", "customer_id", *CUSTOMER_COLUMNS)}
        buyer = {key: item[key] for key in CUSTOMER_COLUMNS if key in item}
        planned[external_id] = Planned(external_id, f"item {n}", body, buyer=buyer)
    if problems:
        # Checking the drafts too lists everything at once.
        prepare(list(planned.values()), problems)
    return list(planned.values())


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a draft can hold")


def _from_csv(text: str) -> list[Planned]:
    reader = csv.reader(io.StringIO(text))
    problems: list[str] = []
    planned: dict[str, Planned] = {}
    try:
        header = [name.strip() for name in next(reader, [])]
        extra = header[len(CSV_HEADER):]
        if header[:len(CSV_HEADER)] != CSV_HEADER or not set(extra) <= set(CUSTOMER_COLUMNS) \
                or len(set(extra)) != len(extra):
            raise ImportError_([f"line 1: the header must be {','.join(CSV_HEADER)}, then "
                                f"any of {','.join(CUSTOMER_COLUMNS)} if the file has them."])
        for row in reader:
            _read_row(header, row, reader.line_num, planned, problems)
    except csv.Error as error:
        line = reader.line_num
        if "field limit" in str(error):
            problems.append(f"line {line}: a field is longer than {csv.field_size_limit():,} "
                            "characters; nothing past this line was read.")
        else:
            problems.append(f"line {line}: this is not CSV ({error}); nothing past this line "
                            "was read.")
    if problems:
        prepare(list(planned.values()), problems)
    return list(planned.values())


def _read_row(header: list[str], row: list[str], line: int, planned: dict[str, Planned],
              problems: list[str]) -> None:
    """One CSV row: a line of the draft its external_id names."""
    if not any(cell.strip() for cell in row):
        return
    if len(row) != len(header):
        problems.append(f"line {line}: {len(row)} fields, not {len(header)}.")
        return
    values = dict(zip(header, (cell.strip() for cell in row), strict=True))
    buyer = {name: values[name] for name in CUSTOMER_COLUMNS if name in values}
    external_id = values["external_id"]
    if not 1 <= len(external_id) <= MAX_EXTERNAL_ID:
        problems.append(f"line {line}, external_id: must be 1 to {MAX_EXTERNAL_ID} "
                        "characters.")
        return
    item = {name: values[name] for name in LINE_FIELDS}
    problems += line_problems(item, f"line {line}, ")
    draft = planned.get(external_id)
    if draft is None:
        if len(planned) == MAX_DRAFTS:
            raise _too_many()
        draft = planned[external_id] = Planned(
            external_id, f"line {line}",
            {name: values[name] for name in DRAFT_FIELDS} | {"line_items": []},
            lines_checked=True, buyer=buyer)
    else:
        for name in DRAFT_FIELDS:
            if values[name] != draft.body[name]:
                problems.append(f"line {line}, {name}: {values[name]!r} differs from "
                                f"{draft.where} of external_id {external_id!r}.")
        for name, value in buyer.items():
            if value != draft.buyer[name]:
                problems.append(f"line {line}, {name}: {value!r} differs from "
                                f"{draft.where} of external_id {external_id!r}.")
    draft.body["line_items"].append(item)


def _bare(refusal: Refusal) -> str:
    return _LINE_PREFIX.sub("", refusal.message)


def _fails(body: dict[str, Any], name: str, check: Any, valid: dict[str, Any]) -> str | None:
    """The problem with one field alone, the others standing in as valid; None if none."""
    alone = {**valid, name: body[name]} if name in body else \
        {key: value for key, value in valid.items() if key != name}
    try:
        check(alone)
    except Refusal as refusal:
        return _bare(refusal)
    return None


def line_problems(item: object, where: str) -> list[str]:
    """Every problem of one line item, each by its field: `where` + "quantity: ..."."""
    try:
        money.parse_line(item, 1)
        return []
    except Refusal as refusal:
        if not isinstance(item, dict):
            return [f"{where.rstrip(', ')}: {_bare(refusal)}"]
        whole = _bare(refusal)
    found = [f"{where}{name}: {problem}" for name in LINE_FIELDS
             if (problem := _fails(item, name, lambda line: money.parse_line(line, 1),
                                   VALID_LINE))]
    return found or [f"{where.rstrip(', ')}: {whole}"]


def _draft_problems(draft: Planned, whole: str) -> list[str]:
    """Every problem of a draft that did not pass, each by its field."""
    body, where = draft.body, draft.where
    found = [f"{where}, {name}: {problem}" for name in DRAFT_FIELDS
             if (problem := _fails(body, name, invoices.parse_draft, VALID_DRAFT))]
    lines = body.get("line_items")
    if draft.lines_checked:  # each CSV row was checked, and listed, as it was read
        lines_failed = any(line_problems(item, "") for item in lines)
    elif isinstance(lines, list) and 1 <= len(lines) <= money.MAX_LINES:
        line_found = [problem for n, item in enumerate(lines, start=1)
                      for problem in line_problems(item, f"{where}, line {n} ")]
        found += line_found
        lines_failed = bool(line_found)
    else:  # not a list, or too few or too many lines: said as the API says it
        count = {"line_items": [VALID_LINE] * len(lines) if isinstance(lines, list) else lines}
        found.append(f"{where}, line_items: "
                     f"{_fails(count, 'line_items', invoices.parse_draft, VALID_DRAFT)}")
        lines_failed = True
    if not found and not lines_failed:  # the draft as a whole: its total, say
        found.append(f"{where} (external_id {draft.external_id!r}): {whole}")
    return found


def _buyer(draft: Planned) -> tuple[dict[str, str], list[str]]:
    """The customer details a draft gives, checked as the customers API checks them, and
    every problem by its field."""
    given, buyer, problems = draft.buyer, {}, []
    checks = (("customer_country", "country", identifiers.country),
              ("customer_vat_id", "vat_id",
               lambda value: identifiers.vat_id(value, buyer.get("country", ""))),
              ("customer_email", "email", identifiers.email))
    for column, name, check in checks:
        try:
            buyer[name] = check(given.get(column))
        except Refusal as refusal:
            problems.append(f"{draft.where}, {column}: {refusal.message}")
    return buyer, problems


def _bound_content(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items()
            if name not in LATER_FIELDS or value not in (None, "")}


def prepare(planned: list[Planned], problems: list[str] | None = None) -> list[Prepared]:
    """Every draft checked as the API checks it and normalised; every problem listed."""
    problems = list(problems or [])
    prepared = []
    for draft in planned:
        buyer, buyer_problems = _buyer(draft)
        problems += buyer_problems
        try:
            fields = invoices.parse_draft(draft.body)
        except Refusal as refusal:
            problems += _draft_problems(draft, refusal.message)
            continue
        if not buyer_problems:
            prepared.append(Prepared(draft.external_id, draft.where, fields,
                                     bindings.fingerprint(_bound_content(fields)), buyer))
    if problems:
        raise ImportError_(problems)
    return prepared


# --- writing: one short transaction of inserts ------------------------------------------------


class _Raced(Exception):
    """An external id was bound by another import between the check and the write."""


def _sorted_out(db: sqlite3.Connection, owner_id: str, prepared: list[Prepared]
                ) -> tuple[list[Prepared], int]:
    """The drafts not imported before, and how many were; other content under a known id
    refuses the whole file."""
    bound = dict(db.execute(
        "SELECT request_id, fingerprint FROM request_bindings"
        " WHERE actor_id = ? AND kind = 'import'", (owner_id,)).fetchall())
    problems = [f"{draft.where}: external_id {draft.external_id!r} was imported before with "
                "other content (import_conflict)." for draft in prepared
                if bound.get(draft.external_id, draft.fingerprint) != draft.fingerprint]
    if problems:
        raise ImportError_(problems)
    new = [draft for draft in prepared if draft.external_id not in bound]
    return new, len(prepared) - len(new)


def _insert(db: sqlite3.Connection, owner_id: str, rows: list[tuple[Prepared, str]],
            now: float) -> int:
    """Bind every new id and insert its draft naming its customer, in the caller's
    transaction; the number of customers made. An id bound meanwhile by another import is
    caught here, where it counts."""
    hold(db, account_lock(owner_id))
    bound = db.executemany(
        "INSERT INTO request_bindings (actor_id, kind, request_id, fingerprint, target_id,"
        " created_at) VALUES (?, 'import', ?, ?, ?, ?)"
        " ON CONFLICT (actor_id, kind, request_id) DO NOTHING",
        [(owner_id, draft.external_id, draft.fingerprint, invoice_id, now)
         for draft, invoice_id in rows]).rowcount
    if bound != len(rows):
        raise _Raced()
    named, made = _learn_customers(db, owner_id, [draft for draft, _ in rows], now)
    db.executemany(
        "INSERT INTO invoices (id, owner_id, customer, customer_id, currency, due_date,"
        " supply_date, notes, line_items, net, tax, total, created_at, updated_at)"
        " VALUES (:id, :owner_id, :customer, :customer_id, :currency, :due_date, :supply_date,"
        " :notes, :line_items, :net, :tax, :total, :now, :now)",
        [{"supply_date": None, "notes": "", **draft.fields, "id": invoice_id,
          "owner_id": owner_id, "now": now, "customer_id": named[draft.external_id]}
         for draft, invoice_id in rows])
    return made


def _learn_customers(db: sqlite3.Connection, owner_id: str, drafts: list[Prepared],
                     now: float) -> tuple[dict[str, str], int]:
    """Each draft's customer by external id: the owner's customer of the draft's name, in any
    case (the oldest, if several), or one made for a name there is none of, with the details
    the file first gives it; and how many were made."""
    known: dict[str, str] = {}
    for row in db.execute("SELECT id, name FROM customers WHERE owner_id = ?"
                          " ORDER BY created_at, id", (owner_id,)):
        known.setdefault(row["name"].casefold(), row["id"])
    made: dict[str, dict[str, Any]] = {}
    named: dict[str, str] = {}
    for draft in drafts:
        key = draft.fields["customer"].casefold()
        if key not in known:
            known[key] = str(uuid.uuid4())
            made[key] = {"id": known[key], "name": draft.fields["customer"], **draft.buyer}
        elif key in made:  # a detail a later draft gives that an earlier one left blank
            for name, value in draft.buyer.items():
                made[key][name] = made[key][name] or value
        named[draft.external_id] = known[key]
    db.executemany(
        "INSERT INTO customers (id, owner_id, name, email, country, vat_id, created_at,"
        " updated_at) VALUES (:id, :owner_id, :name, :email, :country, :vat_id, :now, :now)",
        [{"email": "", "country": "", "vat_id": "", **customer, "owner_id": owner_id,
          "now": now} for customer in made.values()])
    return named, len(made)


def import_drafts(db: sqlite3.Connection, owner_id: str, prepared: list[Prepared],
                  dry_run: bool = False, now: float | None = None) -> Outcome:
    """Every new draft of the file in one transaction, or none. Drafts imported before
    stay as they are; a file with nothing new writes nothing at all."""
    for _ in range(3):
        new, already = _sorted_out(db, owner_id, prepared)
        if dry_run or not new:
            return Outcome(len(new), already)
        rows = [(draft, str(uuid.uuid4())) for draft in new]
        try:
            customers = in_transaction(db, _insert, owner_id, rows, clock(now))
        except _Raced:
            continue  # rolled back: sort the file out again against what is bound now
        return Outcome(len(new), already, customers)
    raise ImportError_(["Other imports of the same external ids kept running at the same "
                        "time; run this one again."])

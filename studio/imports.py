"""`studio import`: drafts from a CSV or JSON file, all or nothing, and twice is once.

Each draft names an `external_id`. It is bound, like every other intent, through the request
binding: (owner, "import", external_id) -> the draft it made. Importing the same file again
finds every id bound to the same content and makes nothing; an id bound to other content
refuses the whole file. Every row is checked as the API checks a draft, and every problem
names its line (CSV) or item (JSON) and its field.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio import invoices, money
from studio.db import clock
from studio.errors import Refusal

CSV_HEADER = ["external_id", "customer", "currency", "due_date", "description", "quantity",
              "unit_price", "tax_rate"]
DRAFT_FIELDS = ("customer", "currency", "due_date")
MAX_BYTES = 20 * 1024 * 1024


class ImportError_(Exception):  # noqa: N801 - `ImportError` is Python's own
    """A file that cannot be imported, with every problem found (at most a screenful)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class Planned:
    """One draft to import: where it came from, and its body as the API would take it."""

    external_id: str
    where: str  # "line 4" or "item 2", for messages
    body: dict[str, Any] = field(default_factory=dict)


def read_file(path: Path) -> list[Planned]:
    """The drafts a file holds, by `external_id`, in file order; every problem at once."""
    if not path.is_file():
        raise ImportError_([f"There is no file at {path}."])
    if path.stat().st_size > MAX_BYTES:
        raise ImportError_([f"{path} is larger than {MAX_BYTES // 2**20} MiB; split it."])
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ImportError_([f"{path} is not UTF-8 text."]) from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("["):
        return _from_json(text)
    return _from_csv(text)


def _from_json(text: str) -> list[Planned]:
    try:
        items = json.loads(text)
    except ValueError as error:
        raise ImportError_([f"The JSON does not parse: {error}."]) from None
    if not isinstance(items, list):
        raise ImportError_(["The JSON must be a list of drafts, each with an external_id."])
    planned: dict[str, Planned] = {}
    problems = []
    for n, item in enumerate(items, start=1):
        external_id = item.get("external_id") if isinstance(item, dict) else None
        if not isinstance(external_id, str) or not 1 <= len(external_id) <= 100:
            problems.append(f"item {n}: external_id must be text of 1 to 100 characters.")
            continue
        if external_id in planned:
            problems.append(f"item {n}: external_id {external_id!r} is also "
                            f"{planned[external_id].where}.")
            continue
        body = {key: value for key, value in item.items() if key != "external_id"}
        planned[external_id] = Planned(external_id, f"item {n}", body)
    if problems:
        raise ImportError_(problems)
    return list(planned.values())


def _from_csv(text: str) -> list[Planned]:
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader, [])]
    if header != CSV_HEADER:
        raise ImportError_([f"line 1: the header must be {','.join(CSV_HEADER)}."])
    planned: dict[str, Planned] = {}
    problems = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(CSV_HEADER):
            problems.append(f"line {line}: {len(row)} fields, not {len(CSV_HEADER)}.")
            continue
        values = dict(zip(CSV_HEADER, (cell.strip() for cell in row), strict=True))
        external_id = values["external_id"]
        if not 1 <= len(external_id) <= 100:
            problems.append(f"line {line}: external_id must be 1 to 100 characters.")
            continue
        item = {name: values[name] for name in ("description", "quantity", "unit_price",
                                                "tax_rate")}
        try:
            money.parse_line(item, line)
        except Refusal as refusal:
            problems.append(refusal.message.replace(f"Line {line}:", f"line {line}:"))
            continue
        draft = planned.setdefault(external_id, Planned(external_id, f"line {line}", {
            name: values[name] for name in DRAFT_FIELDS} | {"line_items": []}))
        for name in DRAFT_FIELDS:
            if values[name] != draft.body[name]:
                problems.append(f"line {line}: {name} {values[name]!r} differs from "
                                f"{draft.where} of external_id {external_id!r}.")
        draft.body["line_items"].append(item)
    if problems:
        raise ImportError_(problems)
    return list(planned.values())


@dataclass(frozen=True)
class Outcome:
    made: int
    already: int


def import_drafts(db: sqlite3.Connection, owner_id: str, planned: list[Planned],
                  now: float | None = None) -> Outcome:
    """Every draft of the file in this one transaction, or none: the first problem found
    refuses the whole import (the caller's transaction rolls back)."""
    now = clock(now)
    problems, made, already = [], 0, 0
    for draft in planned:
        try:
            fields = invoices.parse_draft(draft.body)
        except Refusal as refusal:
            problems.append(f"{draft.where} (external_id {draft.external_id!r}): "
                            f"{refusal.message}")
            continue
        try:
            _, created = invoices.create_draft(db, owner_id, fields, draft.external_id, now,
                                               binding="import")
        except Refusal as refusal:
            problems.append(f"{draft.where}: external_id {draft.external_id!r} was imported "
                            f"before with other content ({refusal.code}).")
            continue
        made, already = made + created, already + (not created)
    if problems:
        raise ImportError_(problems)
    return Outcome(made, already)

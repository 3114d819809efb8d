"""What one kind of model work is (a `Purpose`), as plain data: the providers read it to
ask a model, and never reach further in. The allow-list itself, and the units that refuse,
fence and write, are in `purposes.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from studio import lines

Invoice = dict[str, Any]
Row = Any
# What a receipt may be: the attachment types the store accepts, judged by their bytes.
RECEIPT_TYPES = ("application/pdf", "image/png", "image/jpeg", "image/webp", "image/heic")
# A line of a reading, by the one rule a draft's lines keep (`studio.lines`); null where unread.
# Its amounts are signed: a deposit returned or a discount is a line at a price below 0.
AMOUNT = {"type": ["string", "null"], "pattern": f"^{lines.PRICE}$"}
QUANTITY = {"type": ["string", "null"], "pattern": f"^{lines.QUANTITY}$"}
PERCENT = {"type": ["string", "null"], "pattern": f"^{lines.PERCENT}$"}
DESCRIPTION = {"type": ["string", "null"], "maxLength": lines.MAX_DESCRIPTION,
               "pattern": f"^{lines.DESCRIPTION}$"}
TEXT = {"type": ["string", "null"], "maxLength": 500,
        "pattern": f"^[^{lines.CONTROL[1:-1]}]*$"}


@dataclass(frozen=True)
class Purpose:
    name: str
    label: str
    verb: str  # how the review step says it: "Summarize 2 invoices"
    schema: dict[str, Any]  # what a proposal is; a writer's answer outside it is never kept
    prompt: Callable[[Invoice], str]
    refuse: Callable[[Any, Row], None]  # at submit: raises when the invoice is no target
    # The state apply must still find, given what else the request asked (its `days`).
    fence: Callable[[Any, Row, dict[str, Any]], str]
    write: Callable[[Any, str, Row, dict[str, Any], str], None]  # apply's one write
    # The proposal in a line a person reads, for the invoice as the writer was given it.
    summary: Callable[[dict[str, Any], Invoice], str]
    # What the schema cannot say: raises when the proposal still cannot be used.
    check: Callable[[dict[str, Any]], None] = lambda proposal: None
    # What the studio works out from a fitting proposal itself, by name (a reading's `check`):
    # a writer's own word for it is never taken, and the proposal is kept with these.
    worked_out: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    lease_seconds: float = 90.0
    reads_receipts: bool = False
    asks_days: bool = False  # the request names a reminder step by its days from the due date


def strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict object schema: every property required, nothing else allowed (as OpenAI's
    strict structured outputs ask)."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}

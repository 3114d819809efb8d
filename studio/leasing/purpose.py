"""What one kind of model work is (a `Purpose`), as plain data: the providers read it to
ask a model, and never reach further in. The allow-list itself, and the units that refuse,
fence and write, are in `purposes.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Invoice = dict[str, Any]
Row = Any
# What a receipt may be: the attachment types the store accepts, judged by their bytes.
RECEIPT_TYPES = ("application/pdf", "image/png", "image/jpeg", "image/webp", "image/heic")
AMOUNT = {"type": ["string", "null"], "pattern": r"^[0-9]{1,12}(\.[0-9]{1,6})?$"}
TEXT = {"type": ["string", "null"], "maxLength": 500}


@dataclass(frozen=True)
class Purpose:
    name: str
    label: str
    verb: str  # how the review step says it: "Summarize 2 invoices"
    schema: dict[str, Any]  # what a proposal is; a writer's answer outside it is never kept
    prompt: Callable[[Invoice], str]
    refuse: Callable[[Any, Row], None]  # at submit: raises when the invoice is no target
    fence: Callable[[Any, Row], str]  # the state apply must still find
    write: Callable[[Any, str, Row, dict[str, Any], str], None]  # apply's one write
    summary: Callable[[dict[str, Any]], str]  # the proposal in one line a person reads
    lease_seconds: float = 90.0
    reads_receipts: bool = False


def strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict object schema: every property required, nothing else allowed (as OpenAI's
    strict structured outputs ask)."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}

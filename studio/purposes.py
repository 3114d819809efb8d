"""The allow-list of model work: each purpose names its prompt, the field it writes, its lease."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from studio.errors import Refusal

Invoice = dict[str, Any]


@dataclass(frozen=True)
class Purpose:
    name: str
    label: str
    verb: str  # how the review step says it: "Summarize 2 invoices"
    writes: str  # the one invoice column an applied proposal may change
    prompt: Callable[[Invoice], str]
    lease_seconds: float = 90.0


def summarize_prompt(invoice: Invoice) -> str:
    """The prompt carries the invoice's own fields and nothing else: no keys, no cookies."""
    lines = "\n".join(
        f"- {item['description']}: {item['quantity']} x {item['unit_price']}"
        for item in invoice["line_items"]
    )
    return (
        "Summarize this invoice in one or two plain sentences for its owner. "
        "Mention the customer, what was billed, the total and the due date.\n"
        f"Invoice {invoice['number']} for {invoice['customer']}, "
        f"total {invoice['currency']} {invoice['total']}, due {invoice['due_date']}.\n"
        f"Line items:\n{lines}"
    )


PURPOSES: dict[str, Purpose] = {
    "summarize_invoice": Purpose(
        name="summarize_invoice",
        label="Summarize invoice",
        verb="Summarize",
        writes="summary",
        prompt=summarize_prompt,
    ),
}


def purpose_named(name: object) -> Purpose:
    """The allow-listed purpose of that name; anything else is refused."""
    if not isinstance(name, str) or name not in PURPOSES:
        raise Refusal("purpose_not_allowed")
    return PURPOSES[name]


def invoice_fields(row: Any) -> Invoice:
    """An invoice row as the dict prompts read; a draft, having no number yet, says so."""
    return {
        "id": row["id"],
        "number": row["number"] or "(draft)",
        "customer": row["customer"],
        "currency": row["currency"],
        "total": row["total"],
        "due_date": row["due_date"],
        "line_items": json.loads(row["line_items"]),
        "summary": row["summary"],
    }

"""The embedded provider: deterministic, offline, made from the invoice's own fields. A
summary never states an amount owed that is not what is left to pay, and says when an invoice
is overdue."""

from __future__ import annotations

import asyncio
from typing import Any

from studio.purposes import Purpose


def _items(invoice: dict[str, Any]) -> str:
    names = [item["description"] for item in invoice["line_items"]]
    if not names:
        return "no line items"
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _standing(i: dict[str, Any]) -> str:
    """What is owed, as the invoice page says it: left to pay after credit notes and payments,
    paid in full, or overdue. Without a kept balance (a draft) no amount is said to be owed."""
    if i.get("amount_due") is None:
        return f"due {i['due_date']}"
    if i.get("payment_status") == "paid":
        return "paid in full"
    left = f"{i['currency']} {i['amount_due']} left to pay"
    if i.get("overdue"):
        return f"{left}, overdue since {i['due_date']}"
    return f"{left} by {i['due_date']}"


def _number(i: dict[str, Any]) -> str:
    return i.get("number") or "draft"


STYLES = [
    lambda i: (
        f"Invoice {_number(i)} bills {i['customer']} {i['currency']} {i['total']} "
        f"for {_items(i)}: {_standing(i)}."
    ),
    lambda i: (
        f"{i['customer']}: {_standing(i)} on invoice {_number(i)} "
        f"({len(i['line_items'])} line items)."
    ),
    lambda i: (
        f"{_items(i)} for {i['customer']}, invoiced at {i['currency']} {i['total']} "
        f"({_number(i)}): {_standing(i)}."
    ),
    lambda i: f"{_number(i)}: {_items(i)} for {i['customer']}; {_standing(i)}.",
    lambda i: (
        f"A {i['currency']} {i['total']} invoice to {i['customer']} ({_number(i)}), "
        f"settling {_items(i)}: {_standing(i)}."
    ),
]


class LocalProvider:
    name = "local"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def complete(
        self, purpose: Purpose, invoice: dict[str, Any], actor_id: str, *,
        candidate: int, timeout: float,
    ) -> str:
        if self.delay_s:
            await asyncio.sleep(min(self.delay_s, max(timeout, 0.0)))
        return STYLES[(candidate - 1) % len(STYLES)](invoice)

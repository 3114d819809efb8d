"""The embedded provider: deterministic, offline, made from the invoice's own fields."""

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


STYLES = [
    lambda i: (
        f"Invoice {i['number']} bills {i['customer']} {i['currency']} {i['total']} "
        f"for {_items(i)}, due {i['due_date']}."
    ),
    lambda i: (
        f"{i['customer']} owes {i['currency']} {i['total']} by {i['due_date']} "
        f"({len(i['line_items'])} line items on invoice {i['number']})."
    ),
    lambda i: (
        f"Due {i['due_date']}: {i['currency']} {i['total']} from {i['customer']}, "
        f"covering {_items(i)}."
    ),
    lambda i: (
        f"{i['number']}: {_items(i)} for {i['customer']}; "
        f"{i['currency']} {i['total']} payable by {i['due_date']}."
    ),
    lambda i: (
        f"A {i['currency']} {i['total']} invoice to {i['customer']} ({i['number']}), "
        f"settling {_items(i)} before {i['due_date']}."
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

"""The embedded provider: deterministic, offline, made from the invoice's own fields. A
summary never states an amount owed that is not what is left to pay, and says when an invoice
is overdue."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
from decimal import Decimal
from typing import Any

from studio.leasing.providers.seam import ProviderError
from studio.leasing.purpose import Purpose
from studio.leasing.readers import Reading, UnreadableReceipt, read_receipt


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


# Reminders in the customer's language: (subject, message) with {number}, {amount}, {due},
# {late} and {seller} filled in. The amount is what is left to pay, as the invoice page says it.
REMINDERS = {
    "en": ("Reminder: invoice {number} is {late_words}",
           "Hello,\n\nour records show that invoice {number}, due on {due}, still has {amount}"
           " left to pay{late_sentence}. We would be grateful if you could settle it at your"
           " earliest convenience. If you have already paid, please ignore this email.\n\n"
           "Kind regards,\n{seller}"),
    "de": ("Zahlungserinnerung: Rechnung {number}",
           "Guten Tag,\n\nbei Rechnung {number}, fällig am {due}, sind laut unseren Unterlagen"
           " noch {amount} offen{late_sentence}. Wir bitten Sie, den Betrag zeitnah zu"
           " begleichen. Sollten Sie bereits gezahlt haben, betrachten Sie diese E-Mail bitte"
           " als gegenstandslos.\n\nMit freundlichen Grüßen\n{seller}"),
    "fr": ("Rappel : facture {number}",
           "Bonjour,\n\nsauf erreur de notre part, la facture {number}, échue le {due},"
           " présente encore un solde de {amount}{late_sentence}. Nous vous remercions de bien"
           " vouloir la régler dans les meilleurs délais. Si le paiement a déjà été effectué,"
           " merci de ne pas tenir compte de ce message.\n\nCordialement,\n{seller}"),
}
LATE = {
    "en": (" ({days} days after its due date)", "overdue", "still open"),
    "de": (" (seit {days} Tagen überfällig)", "", ""),
    "fr": (" (en retard de {days} jours)", "", ""),
}


def reminder(invoice: dict[str, Any]) -> dict[str, str]:
    """A polite reminder naming the number, what is left to pay exactly as the invoice page
    says it, the due date and how late it is, in the invoice's language."""
    language = invoice.get("language") if invoice.get("language") in REMINDERS else "en"
    subject, message = REMINDERS[language]
    late_days = int(invoice.get("days_late") or 0)
    late_sentence, overdue, open_ = LATE[language]
    words = {"number": invoice["number"], "due": invoice["due_date"],
             "amount": f"{invoice['currency']} {invoice['amount_due']}",
             "seller": invoice.get("seller") or "",
             "late_sentence": late_sentence.format(days=late_days) if late_days else "",
             "late_words": overdue if late_days else open_}
    return {"subject": subject.format(**words), "message": message.format(**words).rstrip()}


# Receipts are read in a few processes of their own: the event loop never waits on the OCR,
# no more readings run at once than the machine has cores for, and they run at a lower
# priority (nice 10, which their OCR inherits), so pages and polls answer first.
READERS = 2
READER_NICENESS = 10
_readers: concurrent.futures.ProcessPoolExecutor | None = None


def _pool() -> concurrent.futures.ProcessPoolExecutor:
    global _readers
    if _readers is None:
        _readers = concurrent.futures.ProcessPoolExecutor(
            READERS, mp_context=multiprocessing.get_context("spawn"),
            initializer=os.nice, initargs=(READER_NICENESS,))
    return _readers


def stop_readers() -> None:
    """End the reader processes, if any were started: at the end of the app's life."""
    global _readers
    if _readers is not None:
        _readers.shutdown(wait=True, cancel_futures=True)
        _readers = None


def as_lines_billed(reading: Reading) -> Reading:
    """The reading with its prices as a draft's lines hold them: net of VAT. A till prints
    prices with VAT included (its lines add up to its total); those are divided by 1 + rate."""
    lines = reading["lines"]
    priced = [line for line in lines if line["quantity"] and line["unit_price"]]
    if not priced or not reading["total"]:
        return reading
    gross = sum(Decimal(line["quantity"]) * Decimal(line["unit_price"]) for line in priced)
    if abs(gross - Decimal(reading["total"])) > Decimal("0.02") * len(priced):
        return reading  # the lines add up to the net: already as billed
    net_lines = []
    for line in lines:
        if line["unit_price"] and line["tax_rate"]:
            rate = Decimal(line["tax_rate"])
            net = (Decimal(line["unit_price"]) * 100 / (100 + rate)).quantize(Decimal("0.000001"))
            line = {**line, "unit_price": format(net.normalize(), "f")}
        net_lines.append(line)
    return {**reading, "lines": net_lines}


def combined(readings: list[Reading]) -> dict[str, Any]:
    """Several receipts of one draft as one reading: every line, the first's supplier, date
    and currency, the totals added up when each was read."""
    first = readings[0]
    totals = [reading["total"] for reading in readings]
    return {"supplier": first["supplier"], "date": first["date"], "currency": first["currency"],
            "lines": [line for reading in readings for line in reading["lines"]],
            "total": str(sum(Decimal(total) for total in totals if total is not None))
            if all(total is not None for total in totals) else None}


class LocalProvider:
    name = "local"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def complete(
        self, purpose: Purpose, invoice: dict[str, Any], actor_id: str, *,
        candidate: int, timeout: float,
    ) -> str | dict[str, Any]:
        if self.delay_s:
            await asyncio.sleep(min(self.delay_s, max(timeout, 0.0)))
        if purpose.name == "draft_reminder":
            return reminder(invoice)
        if purpose.name == "read_receipt":
            return await self.read(invoice["receipts"], timeout)
        return STYLES[(candidate - 1) % len(STYLES)](invoice)

    async def read(self, receipts: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        readings = []
        for receipt in receipts:
            try:
                readings.append(await loop.run_in_executor(
                    _pool(), read_receipt, receipt["data"], receipt["content_type"],
                    max(timeout, 1.0)))
            except UnreadableReceipt:
                continue  # another receipt of the draft may read
        if not readings:
            raise ProviderError("no receipt of this draft could be read")
        return combined([as_lines_billed(reading) for reading in readings])

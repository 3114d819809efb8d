"""The embedded provider: deterministic, offline, made from the invoice's own fields. A
summary never states an amount owed that is not what is left to pay, and says when an invoice
is overdue."""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from babel.numbers import get_currency_precision

from studio import i18n
from studio.errors import N_
from studio.leasing.providers.seam import ProviderError, Unreadable
from studio.leasing.purpose import Purpose
from studio.leasing.readers import Reading, UnreadableReceipt, read_receipt
from studio.leasing.readers.processes import ReadingStopped, readers
from studio.leasing.readers.processes import stop_readers as stop_readers


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
# {late} and {seller} filled in. The amount is what is left to pay, the amount and the date as
# that language writes them.
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
    "es": ("Recordatorio de pago: factura {number}",
           "Buenos días:\n\nsegún nuestros registros, la factura {number}, con vencimiento el"
           " {due}, tiene todavía un importe pendiente de {amount}{late_sentence}. Les"
           " agradeceríamos que procedieran a su pago a la mayor brevedad posible. Si ya han"
           " efectuado el pago, rogamos que ignoren este mensaje.\n\nAtentamente,\n{seller}"),
    "it": ("Sollecito di pagamento: fattura {number}",
           "Gentile cliente,\n\ndai nostri registri risulta che la fattura {number}, con"
           " scadenza il {due}, presenta ancora un importo da saldare di {amount}"
           "{late_sentence}. Le saremmo grati se potesse provvedere al pagamento quanto prima."
           " Se ha già effettuato il pagamento, non tenga conto di questa e-mail.\n\n"
           "Cordiali saluti,\n{seller}"),
    "nl": ("Betalingsherinnering: factuur {number}",
           "Goedendag,\n\nvolgens onze administratie staat van factuur {number}, met"
           " vervaldatum {due}, nog {amount} open{late_sentence}. Wij verzoeken u vriendelijk"
           " het bedrag zo spoedig mogelijk te voldoen. Heeft u inmiddels betaald, dan kunt u"
           " deze e-mail als niet verzonden beschouwen.\n\nMet vriendelijke groet,\n{seller}"),
}
LATE = {
    "en": (" ({days} days after its due date)", "overdue", "still open"),
    "de": (" (seit {days} Tagen überfällig)", "", ""),
    "fr": (" (en retard de {days} jours)", "", ""),
    "es": (" (vencida hace {days} días)", "", ""),
    "it": (" (scaduta da {days} giorni)", "", ""),
    "nl": (" ({days} dagen na de vervaldatum)", "", ""),
}


def reminder(invoice: dict[str, Any]) -> dict[str, str]:
    """A polite reminder naming the number, what is left to pay exactly as the invoice page
    says it, the due date and how late it is, in the invoice's language."""
    language = invoice.get("language") if invoice.get("language") in REMINDERS else "en"
    subject, message = REMINDERS[language]
    late_days = int(invoice.get("days_late") or 0)
    late_sentence, overdue, open_ = LATE[language]
    words = {"number": invoice["number"], "due": i18n.date(invoice["due_date"], language),
             "amount": i18n.money(invoice["amount_due"], invoice["currency"], language),
             "seller": invoice.get("seller") or "",
             "late_sentence": late_sentence.format(days=late_days) if late_days else "",
             "late_words": overdue if late_days else open_}
    return {"subject": subject.format(**words), "message": message.format(**words).rstrip()}


# A reminder step's words, with the placeholders the studio fills in for each invoice:
# (subject, message) before the due date, then after it.
WORDINGS = {
    "en": (("Invoice {number} is due on {due_date}",
            "Hello,\n\na friendly note that invoice {number} for {currency} {amount_due} is due"
            " on {due_date}. If it is already on its way, thank you.\n\nView the invoice:"
            " {link}"),
           ("Reminder: invoice {number} is {days_overdue} days overdue",
            "Hello,\n\ninvoice {number}, due on {due_date}, still has {currency} {amount_due}"
            " to pay. We would be grateful if you could settle it soon; if you have already"
            " paid, please ignore this email.\n\nView the invoice: {link}")),
    "de": (("Rechnung {number} ist am {due_date} fällig",
            "Guten Tag,\n\nwir möchten Sie freundlich daran erinnern, dass Rechnung {number}"
            " über {currency} {amount_due} am {due_date} fällig wird.\n\nRechnung ansehen:"
            " {link}"),
           ("Zahlungserinnerung: Rechnung {number}",
            "Guten Tag,\n\nbei Rechnung {number}, fällig am {due_date}, sind noch {currency}"
            " {amount_due} offen (seit {days_overdue} Tagen). Bitte begleichen Sie den Betrag"
            " zeitnah; sollten Sie bereits gezahlt haben, betrachten Sie diese E-Mail als"
            " gegenstandslos.\n\nRechnung ansehen: {link}")),
    "fr": (("La facture {number} arrive à échéance le {due_date}",
            "Bonjour,\n\nnous vous rappelons que la facture {number} de {currency} {amount_due}"
            " arrive à échéance le {due_date}.\n\nVoir la facture : {link}"),
           ("Rappel : facture {number}",
            "Bonjour,\n\nsauf erreur de notre part, la facture {number}, échue le {due_date},"
            " présente encore un solde de {currency} {amount_due} ({days_overdue} jours de"
            " retard). Merci de bien vouloir la régler ; si le paiement a déjà été effectué,"
            " ne tenez pas compte de ce message.\n\nVoir la facture : {link}")),
    "es": (("La factura {number} vence el {due_date}",
            "Hola:\n\nle recordamos que la factura {number} por {currency} {amount_due} vence"
            " el {due_date}.\n\nVer la factura: {link}"),
           ("Recordatorio: factura {number}",
            "Hola:\n\nla factura {number}, con vencimiento el {due_date}, tiene aún {currency}"
            " {amount_due} pendientes ({days_overdue} días de retraso). Le rogamos que la abone"
            " en breve; si ya la ha pagado, ignore este mensaje.\n\nVer la factura: {link}")),
    "it": (("La fattura {number} scade il {due_date}",
            "Buongiorno,\n\nle ricordiamo che la fattura {number} di {currency} {amount_due}"
            " scade il {due_date}.\n\nVedi la fattura: {link}"),
           ("Promemoria: fattura {number}",
            "Buongiorno,\n\nla fattura {number}, scaduta il {due_date}, presenta ancora"
            " {currency} {amount_due} da pagare ({days_overdue} giorni di ritardo). La"
            " preghiamo di saldarla a breve; se ha già pagato, ignori questo messaggio.\n\n"
            "Vedi la fattura: {link}")),
    "nl": (("Factuur {number} vervalt op {due_date}",
            "Goedendag,\n\nwe herinneren u eraan dat factuur {number} van {currency}"
            " {amount_due} vervalt op {due_date}.\n\nFactuur bekijken: {link}"),
           ("Herinnering: factuur {number}",
            "Goedendag,\n\nop factuur {number}, vervallen op {due_date}, staat nog {currency}"
            " {amount_due} open ({days_overdue} dagen te laat). Wilt u dit bedrag spoedig"
            " betalen? Heeft u al betaald, dan kunt u dit bericht negeren.\n\nFactuur"
            " bekijken: {link}")),
}


def reminder_wording(invoice: dict[str, Any]) -> dict[str, str]:
    """A reminder step's words in the example invoice's language, with placeholders only:
    the studio fills them in for each invoice it reminds."""
    before, after = WORDINGS.get(invoice.get("language") or "en", WORDINGS["en"])
    subject, message = before if int(invoice["reminder_days"]) <= 0 else after
    return {"subject": subject, "message": message}


# Receipts are read in the reader processes (readers/processes.py): the event loop never
# waits on the OCR, and a reading is killed past this many seconds, as its OCR is.
READING_SECONDS = 30.0
# Readings kept, by (actor, the receipt's sha256, its type): the candidates of one task, and a
# reading asked for again, read the receipt once.
READINGS_KEPT = 64
_kept: OrderedDict[tuple[str, str, str], Reading | UnreadableReceipt] = OrderedDict()


async def read_once(actor_id: str, data: bytes, content_type: str) -> Reading:
    """A receipt's reading, in `actor_id`'s turn in a reader process; the same bytes read
    once. Raises UnreadableReceipt with why, in words a person reads."""
    key = (actor_id, hashlib.sha256(data).hexdigest(), content_type)
    if key in _kept:
        _kept.move_to_end(key)
        kept = _kept[key]
        if isinstance(kept, UnreadableReceipt):
            raise kept
        return kept
    try:
        reading: Reading | UnreadableReceipt = await readers().run(
            actor_id, READING_SECONDS, read_receipt, data, content_type, READING_SECONDS,
            key=key)
    except UnreadableReceipt as error:
        reading = error
    except ReadingStopped as error:
        raise ProviderError("the reading was stopped") from error
    _kept[key] = reading
    while len(_kept) > READINGS_KEPT:
        _kept.popitem(last=False)
    if isinstance(reading, UnreadableReceipt):
        raise reading
    return reading


def smallest_unit(currency: str | None) -> Decimal:
    try:
        return Decimal(1).scaleb(-get_currency_precision(currency or "EUR"))
    except Exception:  # a code Babel does not know: cents
        return Decimal("0.01")


def as_lines_billed(reading: Reading) -> Reading:
    """The reading with its prices as a draft's lines hold them: net of VAT. A till prints
    prices with VAT included (its lines add up to its total); those are divided by 1 + rate,
    choosing each line's net to the cent so that the lines, taxed as a draft taxes them (each
    line's net and tax rounded, then summed), come to what the till's lines came to."""
    lines = reading["lines"]
    priced = [line for line in lines if line["quantity"] and line["unit_price"]]
    if not priced or not reading["total"]:
        return reading
    gross = sum(Decimal(line["quantity"]) * Decimal(line["unit_price"]) for line in priced)
    if abs(gross - Decimal(reading["total"])) > Decimal("0.02") * len(priced):
        return reading  # the lines add up to the net: already as billed
    cent = smallest_unit(reading["currency"])

    def rounded(amount: Decimal) -> Decimal:
        return amount.quantize(cent, rounding=ROUND_HALF_UP)

    def billed(net: Decimal, rate: Decimal) -> Decimal:
        return net + rounded(net * rate / 100)

    taxed = [n for n, line in enumerate(lines) if line["unit_price"] and line["tax_rate"]]
    quantity = {n: Decimal(lines[n]["quantity"] or 1) for n in taxed}
    rate = {n: Decimal(lines[n]["tax_rate"]) for n in taxed}
    till = {n: rounded(quantity[n] * Decimal(lines[n]["unit_price"])) for n in taxed}
    net = {n: rounded(till[n] * 100 / (100 + rate[n])) for n in taxed}
    # A cent lost to rounding line by line is found again on the line it costs least.
    for _ in range(4 * len(taxed)):
        short = sum(till[n] - billed(net[n], rate[n]) for n in taxed)
        if not short:
            break
        step = cent if short > 0 else -cent
        moves = sorted((abs(till[n] - billed(net[n] + step, rate[n])), n) for n in taxed
                       if 0 < abs(billed(net[n] + step, rate[n]) - billed(net[n], rate[n]))
                       <= abs(short))
        if moves:
            net[moves[0][1]] += step
            continue
        # Every line moves by two cents one way: two lines, one each way, move by one.
        ups = [n for n in taxed if billed(net[n] + step, rate[n]) - billed(net[n], rate[n])
               == 2 * step]
        downs = [n for n in taxed if billed(net[n] - step, rate[n]) - billed(net[n], rate[n])
                 == -step and n not in ups[:1]]
        if not ups or not downs:
            break
        net[ups[0]] += step
        net[downs[0]] -= step
    net_lines = []
    for n, line in enumerate(lines):
        if n in net:
            price = (net[n] / quantity[n]).quantize(Decimal("0.000001"))
            line = {**line, "unit_price": format(price.normalize(), "f")}
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
        if purpose.name == "reminder_wording":
            return reminder_wording(invoice)
        if purpose.name == "read_receipt":
            return await self.read(invoice["receipts"], actor_id)
        return STYLES[(candidate - 1) % len(STYLES)](invoice)

    async def read(self, receipts: list[dict[str, Any]], actor_id: str) -> dict[str, Any]:
        """The draft's receipts read in the actor's turn; the lease's deadline cancels the
        wait, which kills the reading (readers/processes.py)."""
        readings, why = [], []
        for receipt in receipts:
            try:
                readings.append(await read_once(actor_id, receipt["data"],
                                                receipt["content_type"]))
            except UnreadableReceipt as error:
                why.append(str(error))  # another receipt of the draft may read
        if not readings:
            # The same file fails the same way at every attempt: said once, not retried.
            # Kept in English with the task; its page says it in its person's language.
            raise Unreadable(N_("The receipt could not be read: %(why)s.") % {"why": why[0]}
                             if why else N_("The draft has no receipt to read."))
        return combined([as_lines_billed(reading) for reading in readings])

"""The issued document as a PDF, made with fpdf2 (pure Python, no system libraries), rendered
once per issued invoice in a process of its own and kept in the database.

The text face is the vendored DejaVu Sans, so any customer or line text a person can type
prints as typed. The document carries what Directive 2006/112/EC article 226 asks of a VAT
invoice: number, issue and supply dates, both parties' names, addresses, countries and VAT
IDs, the lines with their discounts, net and tax per rate, the total; and what a buyer needs
to pay it: due date, payment terms, bank details and, for EUR, an EPC QR code (the European
Payments Council's SEPA credit-transfer code, which banking apps scan to fill in the
transfer). A rate of 0 % says why no VAT is charged where the parties show it (art. 226(11)
and (11a)): see `category_of`. The printable HTML view (`templates/document.html`) shows the
same facts, from the same functions below. A credit note says it is one, names the invoice it
credits, shows its amounts as credit and has no due date and nothing to pay.

Why another process: fpdf2 holds the GIL for the whole render (a 200-line invoice takes a
while), so a thread of the serving process, the writer's included, would stall the event
loop's every request. A small process pool has its own GIL. An issued invoice never
changes, so its bytes are kept under its frozen hash and every later download is one read.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import io
import json
import multiprocessing
import os
import re
import sqlite3
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import filetype
from babel import Locale
from fpdf import FPDF
from segno import QRCode, helpers

from studio import assets, i18n
from studio.billing.money import rounded
from studio.billing.money import text as money_text
from studio.i18n import npgettext, pgettext
from studio.store.db import Database

FONTS = assets.folder("static") / "fonts"


def N_(message: str) -> str:
    """A string the catalogue translates where it is shown (`pybabel extract` finds it)."""
    return message


# The document's layout; a new one renders kept documents again (they are keyed by it), and
# the bytes kept under an earlier one stay in the table as they were.
LAYOUT = "pdf-4"
# Half the cores: the serving process keeps the rest.
RENDERERS = max(1, (os.cpu_count() or 2) // 2)
# What the EPC QR code can carry (the EPC069-12 guidelines): a name of 70 characters, an
# amount of 0.01 to 999,999,999.99 euro.
EPC_NAME = 70

_renderers: ProcessPoolExecutor | None = None
# The renders under way in this process, so concurrent first downloads wait for one.
_rendering: dict[tuple[str, ...], asyncio.Future[bytes]] = {}


def language_of(invoice: dict[str, Any]) -> str:
    """The language the document speaks: its customer's, frozen with the buyer at issue, so
    an issued document never changes. An invoice issued before customers had a language was
    written in English, and reads so still: its page, share page and PDF as they were."""
    return i18n.known(buyer_of(invoice).get("language")) or i18n.DEFAULT


def stored_language(row: Any) -> str:
    """`language_of` an invoice row as the database keeps it, its buyer frozen as JSON: what
    its emails, reminders and the model's words about it speak too."""
    buyer = json.loads(row["buyer"]) if row["buyer"] else None
    return language_of({"buyer": buyer, "customer": row["customer"]})


def seller_language(invoice: dict[str, Any]) -> str:
    """The language of the seller's country, which a tax note speaks too."""
    return i18n.of_country(country_of(invoice.get("seller") or {}))


def title_of(invoice: dict[str, Any]) -> str:
    """The document's title, in the document's language wherever it is read (the Factur-X
    PDF's metadata too). Its words are the document's own (`pgettext` "document"), apart from
    the same English word on a page."""
    with i18n.use(language_of(invoice)):
        number = invoice["number"] or pgettext("document", "(draft)")
        kind = pgettext("document", "Credit note") if is_credit(invoice) \
            else pgettext("document", "Invoice")
        return f"{kind} {number}"


def amount_shown(amount: Any, currency: str) -> str:
    """An amount as the document's language writes it (`1.428,60 €`, `€1,200.50`); what is
    not a number (a line stored before part two) as it was stored."""
    try:
        return i18n.money(amount, currency)
    except (InvalidOperation, TypeError, ValueError):
        return str(amount)


def number_shown(value: Any) -> str:
    """A quantity, price or rate with the language's separators; what is not a number as
    stored."""
    try:
        return i18n.number(value)
    except (InvalidOperation, TypeError, ValueError):
        return str(value)


def is_credit(invoice: dict[str, Any]) -> bool:
    return invoice["kind"] == "credit_note"


def as_credit(amount: str, invoice: dict[str, Any]) -> str:
    """A credit note's amount reads as credit: below zero (a zero stays zero)."""
    if not is_credit(invoice) or not amount.strip("-0."):
        return amount
    return amount[1:] if amount.startswith("-") else f"-{amount}"


def issue_date_of(invoice: dict[str, Any]) -> str:
    """The date of issue: kept since invoices had one, else the day of the issue time."""
    return invoice.get("issue_date") or (invoice["issued_at"] or "")[:10]


def facts_of(invoice: dict[str, Any]) -> list[tuple[str, str]]:
    """The dates and references at the top of the document."""
    day = i18n.date
    supply = [(pgettext("document", "Date of supply"), day(invoice["supply_date"]))] \
        if invoice.get("supply_date") else []
    if invoice.get("period_start"):  # a recurring invoice's service period
        period = pgettext("document", "{start} to {end}").format(
            start=day(invoice["period_start"]), end=day(invoice["period_end"]))
        supply.append((pgettext("document", "Service period"), period))
    if is_credit(invoice):
        return [(pgettext("document", "Credits invoice"), invoice.get("credits_number") or ""),
                (pgettext("document", "Date of issue"), day(issue_date_of(invoice))), *supply]
    return [(pgettext("document", "Issued"), day(issue_date_of(invoice))), *supply,
            (pgettext("document", "Due"), day(invoice["due_date"]))]


def country_name(code: str, language: str = "en") -> str:
    """An ISO 3166-1 code as the language names it (DE: Germany, Deutschland); an unknown code
    as written."""
    return Locale(language).territories.get(code.upper(), code) if code else ""


def party_lines(party: dict[str, Any] | None) -> list[str]:
    """A seller or buyer as the document names them: name, address, country, VAT ID and the
    seller's tax number, each only when known."""
    party = party or {}
    lines = [party.get("name") or "", *(party.get("address") or "").splitlines(),
             country_name(party.get("country") or "", i18n.current())]
    if party.get("vat_id"):
        lines.append(pgettext("document", "VAT ID {vat_id}").format(vat_id=party["vat_id"]))
    if party.get("tax_number"):
        lines.append(pgettext("document", "Tax number {number}").format(
            number=party["tax_number"]))
    if party.get("email"):
        lines.append(party["email"])
    return [line for line in lines if line.strip()]


def buyer_of(invoice: dict[str, Any]) -> dict[str, Any]:
    """The buyer kept at issue; one issued before buyers were kept has its name alone."""
    return invoice.get("buyer") or {"name": invoice["customer"]}


# --- why a rate of 0 % charges no VAT -------------------------------------------------------

# The EU's member states, by ISO 3166-1 code, and XI: Northern Ireland, which the EU's VAT
# rules for goods still cover, and whose traders have VAT IDs beginning XI.
EU = frozenset("AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IT LT LU LV MT NL PL PT RO SE SI"
               " SK XI".split())
# The VAT ID prefixes that are not the ISO country code.
VAT_PREFIX_COUNTRY = {"EL": "GR", "XI": "GB"}


@dataclass(frozen=True)
class VatCategory:
    """A VAT category of EN 16931 (UNTDID 5305), with the exemption reason text and code
    (VATEX) the e-invoice gives, and the words the document prints under the rate."""

    code: str
    reason: str = ""
    reason_code: str = ""
    words: str = ""


STANDARD = VatCategory("S")
ZERO_RATED = VatCategory("Z")
# The words are the catalogue's (`tax_notes` speaks them); the reason stays the e-invoice's.
REVERSE_CHARGE = VatCategory(
    "AE", "Reverse charge", "VATEX-EU-AE",
    N_("Reverse charge: VAT is due from the buyer (Article 196, Directive 2006/112/EC)"))
EXPORT = VatCategory(
    "G", "Export outside the EU", "VATEX-EU-G",
    N_("Export outside the EU: exempt from VAT (Article 146, Directive 2006/112/EC)"))


def country_of(party: dict[str, Any]) -> str:
    """The party's ISO 3166-1 country, or, when it has none, the one its EU VAT ID begins
    with."""
    country = (party.get("country") or "").strip().upper()
    prefix = _vat_prefix(party)
    if not country and prefix:
        country = VAT_PREFIX_COUNTRY.get(prefix, prefix)
    return country


def vat_country_of(party: dict[str, Any]) -> str:
    """Where the party trades for VAT: XI for a VAT ID of Northern Ireland (its country being
    GB), else its country."""
    return "XI" if _vat_prefix(party) == "XI" else country_of(party)


def _vat_prefix(party: dict[str, Any]) -> str:
    """The member state an EU VAT ID begins with (EL for Greece, XI for Northern Ireland),
    or nothing."""
    vat_id = (party.get("vat_id") or "").strip().upper()
    prefix = vat_id[:2]
    known = prefix in EU or VAT_PREFIX_COUNTRY.get(prefix) in EU
    return prefix if len(vat_id) > 2 and known else ""


def zero_rate_category(invoice: dict[str, Any]) -> VatCategory:
    """Why a rate of 0 % on this invoice charges no VAT, judged only from the seller and buyer
    kept at issue, so an issued invoice always says the same:

    - seller and buyer in different EU member states, both with a VAT ID: reverse charge
      (the buyer accounts for the VAT, art. 196);
    - a seller in the EU with a VAT ID, a buyer whose country is outside the EU: export;
    - anything else (same country, a buyer without a VAT ID, a party whose country is not
      known, a seller outside the EU): zero rated, which needs no reason; or exempt (E), when
      the invoice gives the reason in its seller's words (`vat_exemption`, a credit note's
      copied from its invoice).

    Goods dispatched to another member state (category K, art. 138) are not told apart from
    services: a seller of goods writes its own words in the notes.
    """
    exemption = (invoice.get("vat_exemption") or "").strip()
    home = VatCategory("E", exemption, "", exemption) if exemption else ZERO_RATED
    # A credit note reverses its invoice's treatment: judged from that invoice's parties.
    invoice = invoice.get("credited") or invoice
    seller, buyer = invoice.get("seller") or {}, buyer_of(invoice)
    selling_from, buying_in = vat_country_of(seller), vat_country_of(buyer)
    if selling_from not in EU or not (seller.get("vat_id") or "").strip():
        return home
    if buying_in in EU and buying_in != selling_from and (buyer.get("vat_id") or "").strip():
        return REVERSE_CHARGE
    if buying_in and buying_in not in EU:
        return EXPORT
    return home


def category_of(invoice: dict[str, Any], rate: str) -> VatCategory:
    """The VAT category of a rate on this invoice: standard above 0 %, else as the parties
    say (`zero_rate_category`)."""
    return STANDARD if Decimal(rate) else zero_rate_category(invoice)


def tax_notes(invoice: dict[str, Any]) -> dict[str, str]:
    """The words the tax table prints under each rate that has some, by rate: in the
    document's language, and on a line of their own in the seller's where that differs."""
    languages = dict.fromkeys([i18n.current(), seller_language(invoice)])
    notes = {rate["rate"]: category_of(invoice, rate["rate"]).words
             for rate in invoice["tax_breakdown"]}
    # The seller's own words (an exemption's reason) are the same in both: said once.
    return {rate: "\n".join(dict.fromkeys(_in(language, words) for language in languages))
            for rate, words in notes.items() if words}


def _in(language: str, message: str) -> str:
    with i18n.use(language):
        return i18n.gettext(message)


# A time to pay in days, as sellers write it in English, German, French, Spanish, Italian or
# Dutch: "within 14 days", "14 Tage", "30 jours".
TERM_IN_DAYS = re.compile(
    r"\b\d+\s*(?:-\s*)?(?:days?|tagen?|tage|jours?|d[ií]as|giorni|dagen)\b", re.IGNORECASE)


def seller_instructions(invoice: dict[str, Any]) -> str:
    """The seller's payment text, unless it states a time to pay of its own: the document
    states one term, its due date's."""
    text = ((invoice["seller"] or {}).get("payment_terms") or "").strip()
    return "" if TERM_IN_DAYS.search(text) else text


def _days_to_pay(invoice: dict[str, Any]) -> int:
    try:
        return (dt.date.fromisoformat(invoice["due_date"])
                - dt.date.fromisoformat(issue_date_of(invoice))).days
    except ValueError:
        return -1


def due_date_term(invoice: dict[str, Any]) -> str:
    """The one payment term as the e-invoice states it, in English with the ISO date (the
    Factur-X XML is not a language): the days from issue to the due date, and the date."""
    days = _days_to_pay(invoice)
    if days > 0:
        return f"Payment within {days} days, by {invoice['due_date']}."
    return f"Payment by {invoice['due_date']}."


def payment_term(invoice: dict[str, Any]) -> str:
    """The one payment term as the document states it, in its language."""
    days = _days_to_pay(invoice)
    due = i18n.date(invoice["due_date"])
    if days > 0:
        return npgettext("document", "Payment within {days} day, by {date}.",
                         "Payment within {days} days, by {date}.", days).format(
            days=days, date=due)
    return pgettext("document", "Payment by {date}.").format(date=due)


def payment_lines(invoice: dict[str, Any]) -> list[str]:
    """How to pay: the due date's term, the seller's instructions, the bank account. A
    credit note asks for nothing."""
    if is_credit(invoice):
        return []
    seller = invoice["seller"] or {}
    lines = [payment_term(invoice)]
    if seller_instructions(invoice):
        lines.append(seller_instructions(invoice))
    if seller.get("iban"):
        lines.append(f"IBAN {seller['iban']}")
    if seller.get("bic"):
        lines.append(f"BIC {seller['bic']}")
    return lines


def has_discounts(invoice: dict[str, Any]) -> bool:
    return any(line.get("discount_percent", "0").strip("0.") for line in invoice["line_items"])


def payment_qr(invoice: dict[str, Any], amount: str | None = None) -> QRCode | None:
    """The EPC QR code for paying an EUR invoice into the seller's IBAN: `amount` (its total
    when not given), its number as the transfer's text. None for a credit note, another
    currency, no IBAN, nothing to pay, or an amount the code cannot carry."""
    seller = invoice["seller"] or {}
    if is_credit(invoice) or invoice["currency"] != "EUR" or not seller.get("iban"):
        return None
    amount = invoice["total"] if amount is None else amount
    if not Decimal(amount) > 0:
        return None
    try:
        return helpers.make_epc_qr(
            name=seller["name"][:EPC_NAME], iban="".join(seller["iban"].split()),
            amount=amount, text=invoice["number"],
            bic="".join((seller.get("bic") or "").split()) or None)
    except ValueError:
        return None


def left_to_pay(invoice: dict[str, Any]) -> str:
    """What the customer has still to pay: the kept balance of an issued invoice (credit notes
    and payments taken off), else its total."""
    due = invoice.get("amount_due")
    return invoice["total"] if due is None else due


def credited(invoice: dict[str, Any]) -> Decimal:
    """The total of the invoice's issued credit notes."""
    return sum((Decimal(note["total"]) for note in invoice.get("credit_notes") or []
                if note["status"] == "issued"), Decimal(0))


def standing_lines(invoice: dict[str, Any]) -> list[tuple[str, str]]:
    """What a page the customer pays from says beside the total: credited, paid and left to
    pay. Nothing for a credit note or an invoice without a kept balance."""
    if is_credit(invoice) or invoice.get("amount_due") is None:
        return []
    currency = invoice["currency"]
    lines = []
    if credited(invoice):
        lines.append((pgettext("document", "Credited"),
                      amount_shown(money_text(credited(invoice), currency), currency)))
    if Decimal(invoice.get("amount_paid") or 0):
        lines.append((pgettext("document", "Paid"),
                      amount_shown(invoice["amount_paid"], currency)))
    if Decimal(invoice["amount_due"]) > 0:
        lines.append((pgettext("document", "Left to pay"),
                      amount_shown(invoice["amount_due"], currency)))
    return lines


def paid_in_full(invoice: dict[str, Any]) -> bool:
    """An issued invoice whose credit notes and payments leave nothing to pay."""
    due = invoice.get("amount_due")
    return not is_credit(invoice) and due is not None and not Decimal(due) > 0


def qr_data_uri(invoice: dict[str, Any]) -> str | None:
    """The payment QR code for a page the customer pays from, asking for what is left to pay,
    as a PNG data URI (an image every scanner and browser reads)."""
    code = payment_qr(invoice, left_to_pay(invoice))
    return None if code is None else code.png_data_uri(scale=4, border=2)


def logo_data_uri(invoice: dict[str, Any]) -> str | None:
    """The seller's logo for the printable page, as a data URI of its own image type."""
    logo = invoice.get("logo")
    kind = filetype.guess_mime(logo) if logo else None
    if not logo or not kind or not kind.startswith("image/"):
        return None
    return f"data:{kind};base64,{base64.b64encode(logo).decode()}"


def with_prices_shown(invoice: dict[str, Any]) -> dict[str, Any]:
    """Unit prices as the amounts beside them read, in the currency's minor units: `450` shows
    as `450.00`; a price with more decimals (`10.005`) is shown whole, never rounded."""
    def completed(price: Any) -> Any:
        try:
            amount = Decimal(str(price))
            in_minor_units = rounded(amount, invoice["currency"])
        except (InvalidOperation, ValueError, KeyError):  # stored rows are shown as stored
            return price
        return str(in_minor_units) if in_minor_units == amount else price

    lines = [{**line, "unit_price": completed(line.get("unit_price", ""))}
             for line in invoice["line_items"]]
    return {**invoice, "line_items": lines}


def page_of(invoice: dict[str, Any]) -> dict[str, Any]:
    """What `templates/document.html` shows, from the same functions as the PDF, in the
    document's language; render the page inside `i18n.use(language_of(invoice))` too."""
    language = language_of(invoice)
    with i18n.use(language):
        return {"invoice": invoice, "language": language, "title": title_of(invoice),
                "facts": facts_of(invoice), "seller_lines": party_lines(invoice["seller"]),
                "buyer_lines": party_lines(buyer_of(invoice)),
                "payment_lines": payment_lines(invoice), "qr": qr_data_uri(invoice),
                "standing": standing_lines(invoice), "paid_in_full": paid_in_full(invoice),
                "logo": logo_data_uri(invoice), "tax_notes": tax_notes(invoice)}


def _heading(pdf: FPDF, text: str, width: float, **where: Any) -> None:
    pdf.set_font("Sans", "B", 10)
    pdf.cell(width, 6, text, **where)
    pdf.set_font("Sans", "", 10)


def render_pdf(invoice: dict[str, Any], fonts: Path = FONTS) -> bytes:
    """The whole document (see the module's docstring), in its language (`language_of`, read
    from the invoice itself: a renderer process has no request's language). Rendering the
    same issued invoice again gives the same bytes: its creation date is its issue time."""
    with i18n.use(language_of(invoice)):
        return _render(invoice, fonts)


def _render(invoice: dict[str, Any], fonts: Path) -> bytes:
    currency = invoice["currency"]
    pdf = FPDF(format="A4")
    pdf.set_title(title_of(invoice))
    pdf.set_creator("Studio")
    if invoice.get("issued_at"):
        pdf.set_creation_date(dt.datetime.fromisoformat(invoice["issued_at"]))
    pdf.add_font("Sans", "", str(fonts / "DejaVuSans.ttf"))
    pdf.add_font("Sans", "B", str(fonts / "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    width = pdf.epw

    if invoice.get("logo"):
        try:
            pdf.image(io.BytesIO(invoice["logo"]), x=pdf.l_margin + width - 50, y=pdf.t_margin,
                      w=50, h=20, keep_aspect_ratio=True)
        except Exception:  # a logo fpdf2 cannot read leaves the rest of the document whole
            pass
    pdf.set_font("Sans", "B", 18)
    pdf.cell(width - 55, 10, title_of(invoice), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    for label, value in facts_of(invoice):
        pdf.cell(58, 6, label)  # room for the longest label, "Date de livraison/prestation"
        pdf.cell(width - 113, 6, value, new_x="LMARGIN", new_y="NEXT")
    pdf.set_y(max(pdf.get_y(), pdf.t_margin + 22) + 4)

    top = pdf.get_y()
    _heading(pdf, pgettext("document", "From"), width / 2, new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(width / 2 - 4, 5, "\n".join(party_lines(invoice["seller"])))
    bottom = pdf.get_y()
    pdf.set_xy(pdf.l_margin + width / 2, top)
    _heading(pdf, pgettext("document", "Bill to"), width / 2, new_x="LEFT", new_y="NEXT")
    pdf.multi_cell(width / 2, 5, "\n".join(party_lines(buyer_of(invoice))))
    pdf.set_y(max(bottom, pdf.get_y()) + 6)

    discounts = has_discounts(invoice)
    item, tax, net = (pgettext("document", "Item"), pgettext("document", "Tax"),
                      pgettext("document", "Net"))
    columns = [(item, 0.46, "L"), (pgettext("document", "Qty"), 0.1, "R"),
               (pgettext("document", "Unit price"), 0.16, "R"), (tax, 0.1, "R"),
               (net, 0.18, "R")]
    if discounts:
        columns[0] = (item, 0.36, "L")
        columns.insert(3, (pgettext("document", "Discount"), 0.1, "R"))
    pdf.set_font("Sans", "B", 10)
    for name, share, align in columns:
        pdf.cell(width * share, 7, name, border="B", align=align)
    pdf.ln()
    pdf.set_font("Sans", "", 10)
    for line in invoice["line_items"]:
        values = [line["description"], number_shown(line["quantity"]),
                  number_shown(line["unit_price"]), f"{number_shown(line['tax_rate'])} %",
                  amount_shown(as_credit(line["net"], invoice), currency)]
        if discounts:
            discount = line.get("discount_percent", "0")
            values.insert(3, f"{number_shown(discount)} %" if discount.strip("0.") else "")
        for (_name, share, align), value in zip(columns, values, strict=True):
            pdf.cell(width * share, 7, value, align=align)
        pdf.ln()
    pdf.ln(3)

    # The tax table: per rate, the net it is on and the tax (Directive 2006/112/EC, art. 226).
    label_width, amount_width = width * 0.64, width * 0.18
    pdf.set_font("Sans", "B", 10)
    for name, cell_width in ((pgettext("document", "Tax rate"), label_width),
                             (net, amount_width), (tax, amount_width)):
        pdf.cell(cell_width, 6, name, border="B", align="R")
    pdf.ln()
    pdf.set_font("Sans", "", 10)
    notes = tax_notes(invoice)
    for rate in invoice["tax_breakdown"]:
        pdf.cell(label_width, 6, f"{number_shown(rate['rate'])} %", align="R")
        pdf.cell(amount_width, 6, amount_shown(as_credit(rate["net"], invoice), currency),
                 align="R")
        pdf.cell(amount_width, 6, amount_shown(as_credit(rate["tax"], invoice), currency),
                 align="R", new_x="LMARGIN", new_y="NEXT")
        if rate["rate"] in notes:  # why this rate charges no VAT (art. 226(11), (11a))
            pdf.set_font("Sans", "", 8)
            pdf.multi_cell(width, 4, notes[rate["rate"]], align="R", new_x="LMARGIN",
                           new_y="NEXT")
            pdf.set_font("Sans", "", 10)
    pdf.ln(2)
    total = pgettext("document", "Total credited") if is_credit(invoice) \
        else pgettext("document", "Total")
    label_width = width * 0.82
    for label, key in ((net, "net"), (tax, "tax"), (total, "total")):
        pdf.set_font("Sans", "B" if key == "total" else "", 11 if key == "total" else 10)
        pdf.cell(label_width, 7, f"{label} ({currency})", align="R")
        pdf.cell(amount_width, 7, amount_shown(as_credit(invoice[key], invoice), currency),
                 align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)

    paying = payment_lines(invoice)
    if paying:
        pdf.ln(4)
        code = payment_qr(invoice)
        if code is not None and pdf.get_y() + 40 > pdf.page_break_trigger:
            pdf.add_page()  # the code and the terms beside it stay on one page
        top = pdf.get_y()
        _heading(pdf, pgettext("document", "Payment"), width, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(width - 40, 5, "\n".join(paying), new_x="LMARGIN", new_y="NEXT")
        if code is not None:
            png = io.BytesIO()
            code.save(png, kind="png", scale=4, border=2)
            pdf.image(png, x=pdf.l_margin + width - 32, y=top, w=32, h=32)
            pdf.set_xy(pdf.l_margin + width - 32, top + 32)
            pdf.set_font("Sans", "", 7)
            pdf.cell(32, 4, pgettext("document", "Scan to pay"), align="C", new_x="LMARGIN",
                     new_y="NEXT")
            pdf.set_font("Sans", "", 10)
            pdf.set_y(max(pdf.get_y(), top + 38))
    if invoice.get("notes"):
        pdf.ln(4)
        _heading(pdf, pgettext("document", "Notes"), width, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(width, 5, invoice["notes"], new_x="LMARGIN", new_y="NEXT")
    footer = (invoice["seller"] or {}).get("footer")
    if footer:
        pdf.ln(6)
        pdf.set_font("Sans", "", 8)
        pdf.multi_cell(width, 4, footer, align="C", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _render_here(invoice: dict[str, Any]) -> bytes:
    """What a renderer process runs (by name, so it is the module's own render_pdf)."""
    return render_pdf(invoice)


def _pool() -> ProcessPoolExecutor:
    global _renderers
    if _renderers is None:
        # spawn: a fork of a process with running threads (aiosqlite's) may inherit held locks.
        _renderers = ProcessPoolExecutor(RENDERERS, mp_context=multiprocessing.get_context("spawn"))
    return _renderers


def stop_renderers() -> None:
    """End the renderer processes, if any were started: at the end of the app's life."""
    global _renderers
    if _renderers is not None:
        _renderers.shutdown(wait=True, cancel_futures=True)
        _renderers = None


async def render_elsewhere(invoice: dict[str, Any]) -> bytes:
    """Render in a renderer process; the event loop only waits. A pool whose process died
    (killed, out of memory) is replaced once rather than refusing every render after."""
    global _renderers
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_pool(), _render_here, invoice)
    except BrokenProcessPool:
        _renderers = None
        return await loop.run_in_executor(_pool(), _render_here, invoice)


def kept(db: sqlite3.Connection, invoice_id: str, frozen_sha256: str, layout: str
         ) -> bytes | None:
    """The bytes kept for an issued invoice's content in one layout, if any."""
    row = db.execute(
        "SELECT content FROM issued_documents WHERE invoice_id = ? AND frozen_sha256 = ?"
        " AND layout = ?", (invoice_id, frozen_sha256, layout)).fetchone()
    return None if row is None else bytes(row[0])


def _kept_of_owner(db: sqlite3.Connection, actor_id: str, invoice_id: str
                   ) -> sqlite3.Row | None:
    return db.execute(
        "SELECT invoices.number, issued_documents.content FROM invoices"
        " JOIN issued_documents ON issued_documents.invoice_id = invoices.id"
        " AND issued_documents.frozen_sha256 = invoices.frozen_sha256"
        " AND issued_documents.layout = ?"
        " WHERE invoices.id = ? AND invoices.owner_id = ? AND invoices.status = 'issued'",
        (LAYOUT, invoice_id, actor_id)).fetchone()


async def kept_pdf(db: Database, actor_id: str, invoice_id: str) -> tuple[str, bytes] | None:
    """The number and kept PDF of the actor's issued invoice, read without reading the whole
    document: a download after the first costs one indexed look-up."""
    row = await db.read(_kept_of_owner, actor_id, invoice_id)
    return None if row is None else (row[0], bytes(row[1]))


def keep(db: sqlite3.Connection, invoice_id: str, frozen_sha256: str, layout: str,
         content: bytes) -> bytes:
    """Keep the bytes, unless another process kept its own first: then everyone gets those."""
    db.execute(
        "INSERT INTO issued_documents (invoice_id, frozen_sha256, layout, content, created_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (invoice_id, frozen_sha256, layout) DO NOTHING",
        (invoice_id, frozen_sha256, layout, content, time.time()))
    found = kept(db, invoice_id, frozen_sha256, layout)
    assert found is not None, "inserted or already there, inside this transaction"
    return found


async def _render_and_keep(db: Database, invoice: dict[str, Any], key: tuple[str, str, str]
                           ) -> bytes:
    return await db.write(keep, *key, await render_elsewhere(invoice))


async def issued_pdf(db: Database, invoice: dict[str, Any]) -> bytes:
    """The PDF of an issued invoice: the kept bytes, or rendered once and kept. Concurrent
    first downloads in one process share one render; across processes the first kept wins."""
    key = (invoice["id"], invoice["frozen_sha256"], LAYOUT)
    found = await db.read(kept, *key)
    if found is not None:
        return found
    waiting_for = (str(db.path), *key)
    rendering = _rendering.get(waiting_for)
    if rendering is None:
        rendering = asyncio.ensure_future(_render_and_keep(db, invoice, key))
        _rendering[waiting_for] = rendering
        rendering.add_done_callback(lambda _: _rendering.pop(waiting_for, None))
    # A download that goes away does not cancel the render the others wait for.
    return await asyncio.shield(rendering)


async def document_pdf(db: Database, invoice: dict[str, Any]) -> bytes:
    """The issued invoice's own PDF, the one every download of it gives: its prices shown as
    its page shows them, kept, or rendered once and kept."""
    return await issued_pdf(db, with_prices_shown(invoice))

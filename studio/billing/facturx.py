"""The e-invoice: an issued invoice as Factur-X / ZUGFeRD, EN 16931 profile.

`xml_of` writes the invoice's UN/CEFACT Cross Industry Invoice (CII) XML from the same dict
its PDF is rendered from, so the two carry the same number, dates, parties, tax per rate and
totals. `facturx_pdf` embeds that XML into the kept PDF of the document with the factur-x
library, which also makes it a PDF/A-3; the result is kept beside the PDF in
`issued_documents` under a layout of its own, so it is built once.

A credit note is type 381 with positive amounts (the type says they are credited) and names
the invoice it credits. A line at a price below 0 (a deposit returned, a discount) is billed
as a negative quantity at a positive price, as EN 16931 asks (BR-27: no price below 0), its
net below 0. A rate of 0 % is reverse charge, an export or zero rated as the
kept seller and buyer say (`documents.zero_rate_category`), the first two with their
exemption reason and VATEX code in the tax breakdown (BT-120, BT-121). An invoice issued
before buyers and full sellers were kept carries what it has: the buyer's name alone, and
the seller's name, address and VAT ID.
"""

from __future__ import annotations

import asyncio
import io
import re
import threading
from decimal import Decimal
from typing import Any

import facturx
from lxml import etree
from PIL import ImageCms

# pypdf comes with factur-x, which writes the PDF/A-3 with it.
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    NameObject,
    NumberObject,
    TextStringObject,
)

from studio.billing import documents, invoices, money
from studio.errors import N_, Refusal
from studio.i18n import gettext
from studio.store.db import Database

RSM = "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
RAM = "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100"
UDT = "urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100"
QDT = "urn:un:unece:uncefact:data:standard:QualifiedDataType:100"
NAMESPACES = {"rsm": RSM, "ram": RAM, "udt": UDT, "qdt": QDT}
EN16931 = "urn:cen.eu:en16931:2017"
# UNTDID 1001: commercial invoice, credit note.
TYPE_CODES = {"invoice": "380", "credit_note": "381"}
# UNTDID 4461: SEPA credit transfer.
SEPA_CREDIT_TRANSFER = "58"
# UN/ECE Recommendation 20: "one", a unit without a name of its own.
UNIT = "C62"
# The e-invoice's own layout, kept beside the document's: a change to either builds it anew.
LAYOUT = "facturx-4"


def layout() -> str:
    return f"{LAYOUT}+{documents.LAYOUT}"


# --- the XML ---------------------------------------------------------------------------------


# What XML 1.0 cannot hold. Text is checked as it is typed, but an invoice issued before that
# check never changes: its e-invoice leaves such characters out rather than never being built.
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _el(parent: etree._Element, tag: str, text: str | None = None, **attributes: str
        ) -> etree._Element:
    prefix, name = tag.split(":")
    element = etree.SubElement(parent, f"{{{NAMESPACES[prefix]}}}{name}", attributes)
    if text is not None:
        element.text = NOT_XML.sub("", text)
    return element


def _date(parent: etree._Element, tag: str, day: str, kind: str = "udt") -> None:
    _el(_el(parent, tag), f"{kind}:DateTimeString", day.replace("-", ""), format="102")


def address_parts(address: str, country: str = "") -> dict[str, str]:
    """A typed address as CII's parts, by one fixed rule (the studio keeps an address as the
    person typed it, so the parts are read from its lines):

    1. Its lines, blank ones left out; a single line is split at its commas
       (`Hauptstr. 5, 10115 Berlin` reads as two lines).
    2. A last line that only names the party's country (`Germany`, `DE`) is left out: the
       country has a field of its own.
    3. With two lines or more, the last is the city line; its first word is the postcode when
       it holds a digit and more words follow (`10115 Berlin`, `75001 Paris`); otherwise the
       whole line is the city (`London W1`: no postcode is guessed from the end).
    4. The lines before it are lines one and two; any further are joined into line three.

    A one-line address without commas is line one alone, with no city or postcode.
    """
    lines = [line.strip() for line in address.splitlines() if line.strip()]
    if len(lines) == 1:
        lines = [part.strip() for part in lines[0].split(",") if part.strip()]
    if len(lines) > 1 and country and lines[-1].casefold() in (
            country.casefold(), documents.country_name(country).casefold()):
        lines.pop()
    parts: dict[str, str] = {}
    if len(lines) > 1:
        city = lines.pop()
        first, _, rest = city.partition(" ")
        if rest.strip() and any(ch.isdigit() for ch in first):
            parts["postcode"], city = first, rest.strip()
        parts["city"] = city
    for name, line in zip(("line_one", "line_two"), lines, strict=False):
        parts[name] = line
    if len(lines) > 2:
        parts["line_three"] = ", ".join(lines[2:])
    return parts


def _address(parent: etree._Element, party: dict[str, Any]) -> None:
    """The party's address in CII's parts (`address_parts`). CII wants a country in every
    address, so a party without one has none."""
    country = documents.country_of(party)
    if not country:
        return
    parts = address_parts(party.get("address") or "", country)
    address = _el(parent, "ram:PostalTradeAddress")
    for name, tag in (("postcode", "ram:PostcodeCode"), ("line_one", "ram:LineOne"),
                      ("line_two", "ram:LineTwo"), ("line_three", "ram:LineThree"),
                      ("city", "ram:CityName")):
        if parts.get(name):
            _el(address, tag, parts[name])
    _el(address, "ram:CountryID", country)


def _party(parent: etree._Element, tag: str, party: dict[str, Any]) -> None:
    element = _el(parent, tag)
    _el(element, "ram:Name", party.get("name") or "")
    _address(element, party)
    if party.get("email"):
        _el(_el(element, "ram:URIUniversalCommunication"), "ram:URIID", party["email"],
            schemeID="EM")
    if party.get("vat_id"):
        _el(_el(element, "ram:SpecifiedTaxRegistration"), "ram:ID", party["vat_id"],
            schemeID="VA")
    if party.get("tax_number"):
        _el(_el(element, "ram:SpecifiedTaxRegistration"), "ram:ID", party["tax_number"],
            schemeID="FC")


def _line_tax(parent: etree._Element, rate: str, invoice: dict[str, Any]) -> None:
    tax = _el(parent, "ram:ApplicableTradeTax")
    _el(tax, "ram:TypeCode", "VAT")
    _el(tax, "ram:CategoryCode", documents.category_of(invoice, rate).code)
    _el(tax, "ram:RateApplicablePercent", rate)


def _line(parent: etree._Element, number: int, line: dict[str, Any], invoice: dict[str, Any]
          ) -> None:
    currency = invoice["currency"]
    item = _el(parent, "ram:IncludedSupplyChainTradeLineItem")
    _el(_el(item, "ram:AssociatedDocumentLineDocument"), "ram:LineID", str(number))
    _el(_el(item, "ram:SpecifiedTradeProduct"), "ram:Name", line["description"])
    price, quantity = str(line["unit_price"]), str(line["quantity"])
    if price.startswith("-"):  # a deduction: the quantity carries the sign (BR-27)
        price, quantity = price[1:], quantity[1:] if quantity.startswith("-") else f"-{quantity}"
    agreement = _el(item, "ram:SpecifiedLineTradeAgreement")
    _el(_el(agreement, "ram:NetPriceProductTradePrice"), "ram:ChargeAmount", price)
    _el(_el(item, "ram:SpecifiedLineTradeDelivery"), "ram:BilledQuantity", quantity,
        unitCode=UNIT)
    settlement = _el(item, "ram:SpecifiedLineTradeSettlement")
    _line_tax(settlement, str(line["tax_rate"]), invoice)
    discount = str(line.get("discount_percent") or "0")
    if Decimal(discount):
        gross = money.rounded(Decimal(line["quantity"]) * Decimal(line["unit_price"]), currency)
        allowance = _el(settlement, "ram:SpecifiedTradeAllowanceCharge")
        _el(_el(allowance, "ram:ChargeIndicator"), "udt:Indicator", "false")
        _el(allowance, "ram:CalculationPercent", discount)
        _el(allowance, "ram:BasisAmount", str(gross))
        _el(allowance, "ram:ActualAmount", str(gross - Decimal(line["net"])))
        _el(allowance, "ram:Reason", "Discount")
    _el(_el(settlement, "ram:SpecifiedTradeSettlementLineMonetarySummation"),
        "ram:LineTotalAmount", line["net"])


def xml_of(invoice: dict[str, Any]) -> bytes:
    """The issued invoice or credit note as Factur-X EN 16931 CII XML, UTF-8."""
    currency = invoice["currency"]
    seller = invoice.get("seller") or {}
    credit = invoice["kind"] == "credit_note"
    issued_on = documents.issue_date_of(invoice)
    root = etree.Element(f"{{{RSM}}}CrossIndustryInvoice", nsmap=NAMESPACES)
    context = _el(root, "rsm:ExchangedDocumentContext")
    _el(_el(context, "ram:GuidelineSpecifiedDocumentContextParameter"), "ram:ID", EN16931)

    document = _el(root, "rsm:ExchangedDocument")
    _el(document, "ram:ID", invoice["number"])
    _el(document, "ram:TypeCode", TYPE_CODES[invoice["kind"]])
    _date(document, "ram:IssueDateTime", issued_on)
    if invoice.get("notes"):
        _el(_el(document, "ram:IncludedNote"), "ram:Content", invoice["notes"])

    trade = _el(root, "rsm:SupplyChainTradeTransaction")
    for number, line in enumerate(invoice["line_items"], start=1):
        _line(trade, number, line, invoice)

    agreement = _el(trade, "ram:ApplicableHeaderTradeAgreement")
    _party(agreement, "ram:SellerTradeParty", seller)
    _party(agreement, "ram:BuyerTradeParty", documents.buyer_of(invoice))

    delivery = _el(trade, "ram:ApplicableHeaderTradeDelivery")
    _date(_el(delivery, "ram:ActualDeliverySupplyChainEvent"), "ram:OccurrenceDateTime",
          invoice.get("supply_date") or issued_on)

    settlement = _el(trade, "ram:ApplicableHeaderTradeSettlement")
    iban = "".join((seller.get("iban") or "").split())
    if iban and not credit:
        _el(settlement, "ram:PaymentReference", invoice["number"])
    _el(settlement, "ram:InvoiceCurrencyCode", currency)
    if iban and not credit:
        means = _el(settlement, "ram:SpecifiedTradeSettlementPaymentMeans")
        _el(means, "ram:TypeCode", SEPA_CREDIT_TRANSFER)
        _el(_el(means, "ram:PayeePartyCreditorFinancialAccount"), "ram:IBANID", iban)
        bic = "".join((seller.get("bic") or "").split())
        if bic:
            _el(_el(means, "ram:PayeeSpecifiedCreditorFinancialInstitution"), "ram:BICID", bic)
    for rate in invoice["tax_breakdown"]:
        category = documents.category_of(invoice, rate["rate"])
        tax = _el(settlement, "ram:ApplicableTradeTax")
        _el(tax, "ram:CalculatedAmount", rate["tax"])
        _el(tax, "ram:TypeCode", "VAT")
        if category.reason:  # BT-120; S and Z must have none (BR-S-10, BR-Z-10)
            _el(tax, "ram:ExemptionReason", category.reason)
        _el(tax, "ram:BasisAmount", rate["net"])
        _el(tax, "ram:CategoryCode", category.code)
        if category.reason_code:  # BT-121
            _el(tax, "ram:ExemptionReasonCode", category.reason_code)
        _el(tax, "ram:RateApplicablePercent", rate["rate"])
    if invoice.get("period_start") and invoice.get("period_end"):  # BG-14: a schedule's period
        billed = _el(settlement, "ram:BillingSpecifiedPeriod")
        _date(billed, "ram:StartDateTime", invoice["period_start"])
        _date(billed, "ram:EndDateTime", invoice["period_end"])
    if not credit:  # a credit note asks for no payment
        terms = _el(settlement, "ram:SpecifiedTradePaymentTerms")
        # BT-20: the document's one term (the due date's) and the seller's instructions.
        said = [documents.due_date_term(invoice), documents.seller_instructions(invoice)]
        _el(terms, "ram:Description", " ".join(words for words in said if words))
        _date(terms, "ram:DueDateDateTime", invoice["due_date"])
    summation = _el(settlement, "ram:SpecifiedTradeSettlementHeaderMonetarySummation")
    _el(summation, "ram:LineTotalAmount", invoice["net"])
    _el(summation, "ram:TaxBasisTotalAmount", invoice["net"])
    _el(summation, "ram:TaxTotalAmount", invoice["tax"], currencyID=currency)
    _el(summation, "ram:GrandTotalAmount", invoice["total"])
    _el(summation, "ram:DuePayableAmount", invoice["total"])
    if credit and invoice.get("credits_number"):
        _el(_el(settlement, "ram:InvoiceReferencedDocument"), "ram:IssuerAssignedID",
            invoice["credits_number"])
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


# --- the PDF ---------------------------------------------------------------------------------


# The colour space the document's images (the payment code, a logo) are meant in, as PDF/A
# asks of a file that holds any: sRGB, its ICC profile made by Pillow's LittleCMS.
SRGB = "sRGB IEC61966-2.1"


def srgb_profile() -> bytes:
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def with_srgb_intent(pdf: bytes) -> bytes:
    """The PDF with an sRGB output intent whose ICC profile is embedded (PDF/A-3B, 6.2.3)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    profile = DecodedStreamObject()
    profile.set_data(srgb_profile())
    profile[NameObject("/N")] = NumberObject(3)
    intent = DictionaryObject({
        NameObject("/Type"): NameObject("/OutputIntent"),
        NameObject("/S"): NameObject("/GTS_PDFA1"),
        NameObject("/OutputConditionIdentifier"): TextStringObject(SRGB),
        NameObject("/Info"): TextStringObject(SRGB),
        NameObject("/RegistryName"): TextStringObject("http://www.color.org"),
        NameObject("/DestOutputProfile"): writer._add_object(profile.flate_encode()),
    })
    writer._root_object[NameObject("/OutputIntents")] = ArrayObject(
        [writer._add_object(intent)])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# factur-x parses its XSD with lxml on every check, and two parses at once in two threads
# fail ("Internal error: xmlSchemaPValAttrNodeValue"): one e-invoice is made at a time.
_EMBEDDING = threading.Lock()


def embed(pdf: bytes, xml: bytes, invoice: dict[str, Any]) -> bytes:
    """The document's PDF as a PDF/A-3 with the XML inside, checked against the schema."""
    title = documents.title_of(invoice)
    seller = (invoice.get("seller") or {}).get("name") or ""
    subject = f"{title}, issued {documents.issue_date_of(invoice)} by {seller}"
    with _EMBEDDING:
        return facturx.generate_from_binary(
            with_srgb_intent(pdf), xml, flavor="factur-x", level="en16931", check_xsd=True,
            lang="en", pdf_metadata={"author": seller, "title": title,
                                     "keywords": "Factur-X, Invoice", "subject": subject})


def missing(invoice: dict[str, Any]) -> list[str]:
    """What EN 16931 asks of every e-invoice that this issued invoice does not carry, in a
    person's words (in English, marked for the catalogue; `refuse_unless_complete` says them
    in the language): the seller's country (BR-9) and VAT ID (BR-CO-26 with the category
    rules), the buyer's country (BR-11). An invoice issued to a buyer typed by name alone
    has no buyer country: its PDF is a whole invoice, but no e-invoice can be made of it."""
    seller = invoice.get("seller") or {}
    lacks = []
    if not documents.country_of(seller):
        lacks.append(N_("your country"))
    if not (seller.get("vat_id") or "").strip():
        lacks.append(N_("your VAT ID"))
    if not documents.country_of(documents.buyer_of(invoice)):
        lacks.append(N_("the buyer's country"))
    return lacks


def refuse_unless_complete(invoice: dict[str, Any]) -> None:
    lacks = missing(invoice)
    if lacks:
        named = gettext(lacks[0])
        for lack in lacks[1:]:
            named = gettext("%(one)s or %(other)s") % {"one": named, "other": gettext(lack)}
        raise Refusal("einvoice_incomplete", gettext(
            "No e-invoice can be made of %(number)s: it does not name %(lacks)s, which every"
            " e-invoice must. Its PDF is a complete invoice to send as it is. An issued invoice"
            " never changes, so for invoices to come, add what is missing in Settings or on the"
            " customer before issuing.") % {"number": invoice["number"], "lacks": named})


async def issued_document(db: Database, owner_id: str, invoice_id: str) -> dict[str, Any]:
    """The owner's issued invoice as its document shows it, the seller's logo included; a
    draft has no e-invoice yet."""
    invoice = await db.read(invoices.document_of, owner_id, invoice_id, True)
    if invoice is None:
        raise Refusal("invoice_not_found")
    if invoice["status"] != "issued":
        raise Refusal("invoice_not_issued", gettext(
            "This invoice is still a draft; it has an e-invoice once it is issued."))
    return invoice


async def facturx_pdf(db: Database, owner_id: str, invoice_id: str) -> bytes:
    """The owner's issued invoice as a Factur-X PDF (a PDF/A-3 of its document with its CII
    XML inside)."""
    return await pdf_of(db, await issued_document(db, owner_id, invoice_id))


async def pdf_of(db: Database, invoice: dict[str, Any]) -> bytes:
    """The Factur-X PDF of an issued invoice: kept, or built once and kept. The
    embedding runs on a thread, off the event loop."""
    key = (invoice["id"], invoice["frozen_sha256"], layout())
    kept = await db.read(documents.kept, *key)
    if kept is not None:
        return kept
    pdf = await documents.document_pdf(db, invoice)
    made = await asyncio.to_thread(embed, pdf, xml_of(invoice), invoice)
    return await db.write(documents.keep, *key, made)

"""The issued document as a PDF, made with fpdf2 (pure Python, no system libraries).

The text face is the vendored DejaVu Sans, so any customer or line text a person can type
prints as typed. The printable HTML view (`templates/document.html`) shows the same facts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fpdf import FPDF

from studio import assets
from studio.money import shown

FONTS = assets.folder("static") / "fonts"
TITLES = {"invoice": "Invoice", "credit_note": "Credit note"}


def title_of(invoice: dict[str, Any]) -> str:
    return f"{TITLES[invoice['kind']]} {invoice['number'] or '(draft)'}"


def render_pdf(invoice: dict[str, Any], fonts: Path = FONTS) -> bytes:
    """Number, issue date, the frozen seller, customer, lines, tax per rate and totals; for a
    credit note, the invoice it corrects."""
    currency = invoice["currency"]
    pdf = FPDF(format="A4")
    pdf.set_title(title_of(invoice))
    pdf.set_creator("Studio")
    pdf.add_font("Sans", "", str(fonts / "DejaVuSans.ttf"))
    pdf.add_font("Sans", "B", str(fonts / "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    width = pdf.epw

    pdf.set_font("Sans", "B", 18)
    pdf.cell(width, 10, title_of(invoice), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    facts = [("Issued", (invoice["issued_at"] or "")[:10]), ("Due", invoice["due_date"])]
    if invoice["kind"] == "credit_note":
        facts.insert(0, ("Corrects invoice", invoice.get("credits_number") or ""))
    for label, value in facts:
        pdf.cell(40, 6, label)
        pdf.cell(width - 40, 6, value, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)

    seller = invoice["seller"] or {}
    top = pdf.get_y()
    pdf.set_font("Sans", "B", 10)
    pdf.cell(width / 2, 6, "From", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    seller_lines = [seller.get("name", ""), *seller.get("address", "").splitlines()]
    if seller.get("vat_id"):
        seller_lines.append(f"VAT ID {seller['vat_id']}")
    pdf.multi_cell(width / 2 - 4, 5, "\n".join(line for line in seller_lines if line))
    bottom = pdf.get_y()
    pdf.set_xy(pdf.l_margin + width / 2, top)
    pdf.set_font("Sans", "B", 10)
    pdf.cell(width / 2, 6, "Bill to", new_x="LEFT", new_y="NEXT")
    pdf.set_font("Sans", "", 10)
    pdf.multi_cell(width / 2, 5, invoice["customer"])
    pdf.set_y(max(bottom, pdf.get_y()) + 6)

    columns = [("Item", 0.46, "L"), ("Qty", 0.1, "R"), ("Unit price", 0.16, "R"),
               ("Tax", 0.1, "R"), ("Net", 0.18, "R")]
    pdf.set_font("Sans", "B", 10)
    for name, share, align in columns:
        pdf.cell(width * share, 7, name, border="B", align=align)
    pdf.ln()
    pdf.set_font("Sans", "", 10)
    for line in invoice["line_items"]:
        values = [line["description"], line["quantity"], line["unit_price"],
                  f"{line['tax_rate']} %", shown(line["net"], currency)]
        for (_, share, align), value in zip(columns, values, strict=True):
            pdf.cell(width * share, 7, value, align=align)
        pdf.ln()
    pdf.ln(3)

    label_width, amount_width = width * 0.82, width * 0.18
    for rate in invoice["tax_by_rate"]:
        pdf.cell(label_width, 6, f"Tax {rate['rate']} % on {shown(rate['net'], currency)}",
                 align="R")
        pdf.cell(amount_width, 6, shown(rate["tax"], currency), align="R",
                 new_x="LMARGIN", new_y="NEXT")
    for label, key in (("Net", "net"), ("Tax", "tax"), ("Total", "total")):
        pdf.set_font("Sans", "B" if key == "total" else "", 11 if key == "total" else 10)
        pdf.cell(label_width, 7, f"{label} ({currency})", align="R")
        pdf.cell(amount_width, 7, shown(invoice[key], currency), align="R",
                 new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())

"""E-invoice handlers: an issued invoice as Factur-X, the PDF with its XML inside or the XML
alone, for its owner."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response

from studio.billing import facturx
from studio.web.negotiation import PRIVATE, current_actor, path_id, studio_of


def _file_name(number: str, ending: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", number) + ending


async def facturx_pdf(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    db = studio_of(request).db
    invoice = await facturx.issued_document(db, actor.id, invoice_id)
    facturx.refuse_unless_complete(invoice)
    pdf = await facturx.pdf_of(db, invoice)
    name = _file_name(invoice["number"], ".facturx.pdf")
    return Response(pdf, media_type="application/pdf", headers={
        "Content-Disposition": f'attachment; filename="{name}"', **PRIVATE})


async def facturx_xml(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    invoice = await facturx.issued_document(studio_of(request).db, actor.id, invoice_id)
    facturx.refuse_unless_complete(invoice)
    name = _file_name(invoice["number"], ".xml")
    return Response(facturx.xml_of(invoice), media_type="application/xml", headers={
        "Content-Disposition": f'attachment; filename="{name}"', **PRIVATE})

"""Payment handlers: record a payment on an issued invoice, list them, void one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from studio import i18n
from studio.billing import payments
from studio.errors import N_, Refusal
from studio.store import bindings
from studio.web.negotiation import (
    PRIVATE,
    answer_kind,
    current_actor,
    moved_to,
    path_id,
    read_body,
    read_numbers,
    studio_of,
)

# The form's id already recorded another payment (the page came back after a payment, say):
# with script a reload keeps that id, so the way out is the form's own "Start over".
FORM_USED = N_("This form already recorded a different payment, so it cannot record this one."
                " Press \u201cStart over\u201d below the form for a new one, then enter the"
                " payment again.")


async def record(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    request_id = bindings.parse_request_id(body)
    fields = payments.parse_payment(read_numbers(request, body))
    try:
        payment, created = await studio_of(request).db.write(
            payments.record_payment, actor.id, invoice_id, request_id, fields)
    except Refusal as refusal:
        if refusal.code == "request_id_conflict" and answer_kind(request) == "fragment":
            raise Refusal(refusal.code, i18n.gettext(FORM_USED)) from None
        raise
    # A new address after each payment: the next visit's form mints a new id of its own.
    return moved_to(request, f"/invoices/{invoice_id}?recorded={payment['id']}", payment,
                    201 if created else 200)


async def payment_list(request: Request) -> Response:
    """JSON: the invoice's payments; a browser sees them on the invoice's page."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    listed = await payments.list_payments(studio_of(request).db, actor, invoice_id)
    if answer_kind(request) == "json":
        return JSONResponse(listed, headers=PRIVATE)
    return RedirectResponse(f"/invoices/{invoice_id}#payments", status_code=303,
                            headers=PRIVATE)


async def void(request: Request) -> Response:
    payment_id = path_id(request, "payment_id", "payment_not_found")
    await read_body(request)
    actor = await current_actor(request)
    payment = await studio_of(request).db.write(payments.void_payment, actor.id, payment_id)
    return moved_to(request, f"/invoices/{payment['invoice_id']}?voided={payment_id}", payment)

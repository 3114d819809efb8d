"""Sending handlers: an invoice or a payment reminder queued by email, and the invoice's sends."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from studio.errors import Refusal
from studio.mail import outbox
from studio.store import bindings
from studio.web.negotiation import answer, current_actor, moved_to, path_id, read_body, studio_of
from studio.web.views.shares import public_base

HTMX_ACCEPTED = 202


async def _queue(request: Request, binding: str) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    studio = studio_of(request)
    if not studio.settings.smtp_url:
        raise Refusal("sending_not_configured")
    send, created = await studio.db.write(
        outbox.queue, actor.id, invoice_id, binding, bindings.parse_request_id(body),
        outbox.parse_send(body), studio.settings.mail_from, public_base(request),
        share_days=studio.settings.share_link_days)
    delivery = studio.worker.delivery if studio.worker else None
    if created and delivery is not None:
        delivery.wake.set()
    # A page of its own address, so the forms there mint new ids: the next email is new.
    return moved_to(request, f"/invoices/{invoice_id}?sent={send['send_id']}", send,
                    HTMX_ACCEPTED if created else 200)


async def send_invoice(request: Request) -> Response:
    """`POST /invoices/{id}/send`: 202 and the queued send; the same request again, 200 and
    that send."""
    return await _queue(request, "send")


async def remind(request: Request) -> Response:
    """`POST /invoices/{id}/remind`: a payment reminder for an invoice with money still due."""
    return await _queue(request, "reminder")


def page_context(request: Request, sending: dict[str, Any]) -> dict[str, Any]:
    """What the invoice page shows of sending, from what `outbox.sending_of` read with the
    rest of the page; each form's id minted once per page."""
    studio = studio_of(request)
    just = request.query_params.get("sent")
    return {"sending": {**sending, "ready": bool(studio.settings.smtp_url),
                        "just_sent": next((send for send in sending["sends"]
                                           if send["send_id"] == just), None),
                        "send_request_id": str(uuid.uuid4()),
                        "remind_request_id": str(uuid.uuid4())}}


async def send_list(request: Request) -> Response:
    """`GET /invoices/{id}/sends`: every send of the invoice, newest first."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    sends = await studio_of(request).db.read(outbox.sends_of, actor.id, invoice_id)
    context = {"sending": {"sends": sends}, "invoice": {"id": invoice_id}}
    return answer(request, sends, template="_sends.html", context=context,
                  fragment="_sends.html")

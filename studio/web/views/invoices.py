"""Invoice handlers: the list, drafts, the issue review step, credit notes, documents."""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
import uuid
from itertools import zip_longest
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from studio import i18n
from studio.billing import (
    balances,
    customers,
    documents,
    facturx,
    finding,
    invoices,
    payments,
    profiles,
    shares,
    taxes,
)
from studio.billing.documents import with_prices_shown
from studio.errors import Refusal
from studio.leasing import leases
from studio.mail import outbox
from studio.store import bindings, paging
from studio.web.negotiation import (
    MAX_DRAFT_BYTES,
    PRIVATE,
    answer,
    answer_kind,
    current_actor,
    id_of,
    moved_to,
    path_id,
    read_body,
    read_numbers,
    render,
    studio_of,
)
from studio.web.numbers import LINE_FIELDS, form_numbers
from studio.web.views import sending


def line_items_of(body: dict[str, Any]) -> dict[str, Any]:
    """A form names each line's fields once per line, in order; JSON sends `line_items`."""
    if "line_items" in body or not any(field in body for field in LINE_FIELDS):
        return body
    columns = [body.get(field, []) for field in LINE_FIELDS]
    columns = [column if isinstance(column, list) else [column] for column in columns]
    lines = [dict(zip(LINE_FIELDS, values, strict=True))
             for values in zip_longest(*columns, fillvalue="")]
    # A line left wholly blank in the form is not a line; a blank discount is no discount.
    # Each keeps its row, so that a refusal names the row the person sees.
    lines = [{**{name: value for name, value in line.items()
                 if name != "discount_percent" or str(value).strip()}, "form_row": row}
             for row, line in enumerate(lines, start=1)
             if any(str(value).strip() for value in line.values())]
    return {**body, "line_items": lines}


async def invoice_list(request: Request) -> Response:
    """A page of the person's invoices that match the filters, drafts first, each with what
    it has paid and is due; the page adds what is outstanding and overdue per currency.
    `Link` names the next page, filters kept."""
    actor = await current_actor(request)
    query = request.query_params
    as_json = answer_kind(request) == "json"
    limit = paging.limit_of(query, paging.DEFAULT_LIMIT if as_json else paging.PAGE_LIMIT)
    after, filters = paging.cursor_of(query), finding.filters_of(query)
    found = await finding.find(studio_of(request).db, actor, filters, limit, after,
                               with_totals=not as_json)
    page = found.page
    onwards = paging.next_url(request.scope["path"], query, page.after)
    context = {"drafts": [i for i in page.items if i["status"] == "draft"],
               "issued": [i for i in page.items if i["status"] == "issued"],
               "onwards": onwards, "first_page": after is None, "filters": filters,
               "totals": found.totals, "statuses": finding.STATUSES,
               "newest": finding.first_page_url(request.scope["path"], query)}
    response = answer(request, page.items, template="invoices.html", context=context)
    response.headers.update(paging.link_header(onwards))
    return response


async def new_invoice_page(request: Request) -> Response:
    """A blank draft form; `?customer_id=` (from a customer's page) starts it with that
    customer chosen, their currency, and the due date their payment terms give."""
    actor = await current_actor(request)
    db = studio_of(request).db
    seller = await profiles.get_profile(db, actor)
    blank = {"customer": "", "customer_id": None, "currency": "EUR", "due_date": "",
             "supply_date": None, "notes": "", "revision": 0,
             "line_items": [{"description": "", "quantity": "1", "unit_price": "",
                             "discount_percent": "", "tax_rate": "0"}]}
    chosen_id = request.query_params.get("customer_id")
    rate = await db.read(invoices.default_rate, actor.id, chosen_id)
    blank["line_items"][0]["tax_rate"] = rate or taxes.NO_RATE
    if "customer_id" in request.query_params:
        chosen = await customers.get_customer(
            db, actor, id_of(request.query_params["customer_id"], "customer_not_found"))
        due = balances.today() + dt.timedelta(days=chosen["payment_terms_days"])
        blank.update({"customer": chosen["name"], "customer_id": chosen["id"],
                      "currency": chosen["currency"] or "EUR", "due_date": due.isoformat()})
    return render(request, "invoice_new.html", {"invoice": blank, "seller": seller,
                                                "request_id": str(uuid.uuid4())})


async def create_invoice(request: Request) -> Response:
    actor = await current_actor(request)  # before the body: only a person may send 2 MB
    body = line_items_of(read_numbers(request, await read_body(request, MAX_DRAFT_BYTES)))
    db = studio_of(request).db
    rate = await db.read(invoices.default_rate, actor.id, body.get("customer_id"))
    fields = invoices.parse_draft(taxes.with_default_rate(body, rate))
    request_id = bindings.optional_request_id(body)
    made, created = await db.write(invoices.create_draft, actor.id, fields, request_id)
    return moved_to(request, f"/invoices/{made['id']}", made, 201 if created else 200)


def _typed_lines(lines: list[Any]) -> list[Any]:
    """The lines the totals count while the person types: a line with neither description nor
    price is not typed in yet, and a missing description is no fault here (saving asks)."""
    typed = []
    for line in lines:
        if not isinstance(line, dict):  # not a line at all: the draft's rules say so
            typed.append(line)
            continue
        description = str(line.get("description") or "").strip()
        if description or str(line.get("unit_price") or "").strip():
            typed.append({**line, "description": description or "-"})
    return typed


async def totals_preview(request: Request) -> Response:
    """The totals as the server computes them, while the person types; nothing is saved."""
    await current_actor(request)
    typed, refused = form_numbers(dict(request.query_params.multi_items()) | {
        field: request.query_params.getlist(field) for field in LINE_FIELDS}, i18n.current())
    body = line_items_of(typed)
    given = body.get("line_items") or []
    lines = _typed_lines(given) if isinstance(given, list) else given
    context: dict[str, Any] = {"problem": None, "preview": None}
    if not lines:
        return render(request, "_totals.html", context)
    try:
        preview = invoices.parse_draft({**body, "line_items": lines, "customer": "-",
                                        "due_date": "2000-01-01"})
        context["preview"] = {**preview, "tax_breakdown": invoices.tax_breakdown(
            json.loads(preview["line_items"]), preview["currency"])}
    except Refusal as refusal:
        context["problem"] = next(iter(refused.values()), refusal.message)
    return render(request, "_totals.html", context)


async def blank_line(request: Request) -> Response:
    """A new line for the form, at the rate its customer (`?customer_id=`) is billed at."""
    actor = await current_actor(request)
    rate = await studio_of(request).db.read(invoices.default_rate, actor.id,
                                            request.query_params.get("customer_id"))
    return render(request, "_line.html", {"line": {"quantity": "1",
                                                   "tax_rate": rate or taxes.NO_RATE,
                                                   "discount_percent": ""}})


def _page_of(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> dict[str, Any]:
    """What the invoice's page shows, read in one snapshot: the invoice as its document shows
    it (its balance with it), the requests that named it, its payments and credit notes, its
    share links and its sends."""
    invoice = invoices.document_of(db, actor_id, invoice_id)
    if invoice is None:
        raise Refusal("invoice_not_found")
    return {"invoice": invoice, "history": leases.requests_of(db, actor_id, invoice_id, 20),
            "account": payments.account(db, invoice),
            "share_links": shares.links(db, actor_id, invoice_id),
            "sending": outbox.sending_of(db, actor_id, invoice_id)}


async def invoice_page(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    db = studio_of(request).db
    if answer_kind(request) == "json":
        return JSONResponse(await invoices.get_invoice(db, actor, invoice_id), headers=PRIVATE)
    page = await db.read(_page_of, actor.id, invoice_id)
    # The credit-note form's id, for browsers without script (studio.js keeps its own).
    return render(request, "invoice.html", {**page,
                                            "invoice": with_prices_shown(page["invoice"]),
                                            "request_id": str(uuid.uuid4()),
                                            "payment_request_id": str(uuid.uuid4()),
                                            "recorded": request.query_params.get("recorded"),
                                            "voided": request.query_params.get("voided"),
                                            "einvoice_lacks": (
                                                facturx.missing(page["invoice"])
                                                if page["invoice"]["status"] == "issued"
                                                else []),
                                            **sending.page_context(request, page["sending"])})


async def edit_invoice(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    body = line_items_of(read_numbers(request, await read_body(request, MAX_DRAFT_BYTES)))
    edited = await studio_of(request).db.write(
        invoices.edit_draft, actor.id, invoice_id, invoices.parse_revision(body), body)
    return moved_to(request, f"/invoices/{invoice_id}", edited)


async def delete_invoice(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    await read_body(request)
    actor = await current_actor(request)
    await studio_of(request).db.write(invoices.delete_draft, actor.id, invoice_id,
                                      store=request.app.state.attachment_store)
    return moved_to(request, "/invoices", {"status": "deleted", "invoice_id": invoice_id})


def _review_of(db: sqlite3.Connection, actor_id: str, invoice_id: str
               ) -> tuple[dict[str, Any], dict[str, Any], tuple[dict[str, str], int | None]]:
    """What the review step shows, read in one snapshot: the draft, the seller and the buyer
    that issuing it now would keep, with the revision of the customer the buyer comes from."""
    invoice = invoices.document_of(db, actor_id, invoice_id)
    if invoice is None:
        raise Refusal("invoice_not_found")
    if invoice["status"] == "issued":
        return invoice, {}, ({}, None)
    return (invoice, profiles.profile_of(db, actor_id),
            invoices.buyer_of_draft(db, actor_id, invoice_id))


async def issue_review(request: Request) -> Response:
    """The issue review step: exactly what will be frozen; the page mints the id."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    invoice, seller, (buyer, customer_revision) = await studio_of(request).db.read(
        _review_of, actor.id, invoice_id)
    if invoice["status"] == "issued":
        return RedirectResponse(f"/invoices/{invoice_id}", status_code=303, headers=PRIVATE)
    invoice = with_prices_shown(invoice)
    frozen = {"revision": invoice["revision"]}
    if customer_revision is not None:
        frozen["customer_revision"] = customer_revision
    # What the person confirms before issuing: the page asks (`confirm_tax: false`) and the
    # button, once ticked, sends `confirm_tax: true`.
    tax_to_confirm = invoices.tax_to_confirm(invoice["kind"], seller, buyer,
                                             invoice["line_items"], invoice["vat_exemption"])
    if tax_to_confirm:
        frozen["confirm_tax"] = False
    data = {"request": frozen, "series": invoices.series_of(invoice["kind"]),
            "tax_to_confirm": tax_to_confirm}
    context = {"invoice": invoice, "seller": seller, "buyer": buyer,
               "tax_to_confirm": tax_to_confirm,
               "customer_revision": customer_revision, "frozen_json": json.dumps(frozen),
               "series": data["series"], "action": f"/invoices/{invoice_id}/issue"}
    return answer(request, data, template="issue_review.html", context=context)


async def issue_invoice(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    receipt, created = await studio_of(request).db.write(
        invoices.issue, actor.id, invoice_id, bindings.parse_request_id(body),
        invoices.parse_revision(body),
        customer_revision=invoices.parse_customer_revision(body),
        tax_confirmed=invoices.parse_confirm_tax(body))
    return moved_to(request, f"/invoices/{invoice_id}", receipt, 201 if created else 200)


async def credit_note(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    note, created = await studio_of(request).db.write(
        invoices.make_credit_note, actor.id, invoice_id, bindings.optional_request_id(body))
    return moved_to(request, f"/invoices/{note['id']}", note, 201 if created else 200)


async def _issued_document(request: Request) -> dict[str, Any]:
    """The issued invoice as its document shows it, the seller's logo included."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    invoice = await invoices.get_document(studio_of(request).db, actor, invoice_id, logo=True)
    if invoice["status"] != "issued":
        raise Refusal("invoice_not_issued")
    return with_prices_shown(invoice)  # the PDF and the printable page read as the page does


async def invoice_pdf(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    kept = await documents.kept_pdf(studio_of(request).db, actor.id, invoice_id)
    if kept is None:
        invoice = await _issued_document(request)
        kept = invoice["number"], await documents.issued_pdf(studio_of(request).db, invoice)
    number, pdf = kept
    name = re.sub(r"[^A-Za-z0-9._-]", "_", number) + ".pdf"
    return Response(pdf, media_type="application/pdf", headers={
        "Content-Disposition": f'inline; filename="{name}"', **PRIVATE})


async def printable(request: Request) -> Response:
    invoice = await _issued_document(request)
    page = documents.page_of(invoice)
    with i18n.use(page["language"]):  # the customer's document, in the customer's language
        return render(request, "document.html", page)

"""Recurring invoice handlers: the list, one schedule with what it made, making one (from an
invoice's "Repeat this invoice"), editing it, and pausing, resuming or ending it."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from babel.dates import format_date
from starlette.requests import Request
from starlette.responses import Response

from studio import i18n
from studio.billing import balances, customers, invoices, recurring
from studio.errors import N_
from studio.store import bindings, paging
from studio.web.negotiation import (
    MAX_DRAFT_BYTES,
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
from studio.web.views.invoices import line_items_of

# How often, said whole in each language: a week, a month and a year differ in gender.
EVERY_WORDS = {"week": (N_("Every week"), N_("Every %(count)s weeks")),
               "month": (N_("Every month"), N_("Every %(count)s months")),
               "year": (N_("Every year"), N_("Every %(count)s years"))}
ACTION_WORDS = {"draft": N_("Make a draft for you to check"), "issue": N_("Issue it"),
                "send": N_("Issue it and email it to the customer")}


def _wake_the_clock(request: Request) -> None:
    worker = studio_of(request).worker
    if worker is not None:
        worker.clock_wake.set()


def _words(schedule: dict[str, Any]) -> dict[str, Any]:
    """How the pages say a schedule: "Every 2 months, on the last day"."""
    one, many = EVERY_WORDS[schedule["every"]]
    every = i18n.gettext(one) if schedule["interval"] == 1 else \
        i18n.gettext(many) % {"count": schedule["interval"]}
    if schedule["every"] == "week":
        starts = dt.date.fromisoformat(schedule["starts"])
        if i18n.current() == i18n.DEFAULT:
            weekday = starts.strftime("%A")
        else:  # the weekday as the language names it
            weekday = format_date(starts, "EEEE", locale=i18n.current())
        every = i18n.gettext("%(every)s, on %(weekday)ss") % {"every": every,
                                                               "weekday": weekday}
    elif schedule["day"] == "last":
        every = i18n.gettext("%(every)s, on the last day of the month") % {"every": every}
    else:
        every = i18n.gettext("%(every)s, on day %(day)s") % {"every": every,
                                                              "day": schedule["day"]}
    return {**schedule, "every_words": every,
            "action_words": i18n.gettext(ACTION_WORDS[schedule["action"]]),
            "email_to": schedule["email"]["to"] or ""}


def _body(raw: dict[str, Any]) -> dict[str, Any]:
    """A form's fields as the API's: lines gathered, the checkbox for backfill."""
    body = line_items_of(raw)
    if "email_to" in body and "email" not in body:
        body = {**body, "email": {"to": body.pop("email_to") or None}}
    return body


async def schedule_list(request: Request) -> Response:
    """A page of the person's recurring invoices, newest first, each with its next run;
    `Link` names the next page."""
    actor = await current_actor(request)
    query = request.query_params
    shown = paging.DEFAULT_LIMIT if answer_kind(request) == "json" else paging.PAGE_LIMIT
    limit, after = paging.limit_of(query, shown), paging.cursor_of(query)
    page = await recurring.list_schedules(studio_of(request).db, actor, limit, after)
    onwards = paging.next_url(request.scope["path"], query, page.after)
    context = {"schedules": [_words(item) for item in page.items], "onwards": onwards,
               "first_page": after is None}
    response = answer(request, page.items, template="recurring_list.html", context=context)
    response.headers.update(paging.link_header(onwards))
    return response


async def create_schedule(request: Request) -> Response:
    actor = await current_actor(request)
    body = _body(read_numbers(request, await read_body(request, MAX_DRAFT_BYTES)))
    request_id = bindings.parse_request_id(body)
    fields = recurring.parse_schedule(body)
    made, created = await recurring.create_schedule(studio_of(request).db, actor, fields,
                                                    request_id)
    if created:
        _wake_the_clock(request)
    return moved_to(request, f"/recurring/{made['id']}", {"recurring": made},
                    201 if created else 200)


async def new_schedule_page(request: Request) -> Response:
    """The form for a new recurring invoice; `?invoice_id=` fills it from that invoice (its
    customer, currency, lines, notes, reason for no VAT and payment terms)."""
    actor = await current_actor(request)
    db = studio_of(request).db
    today = balances.today()
    start = {"customer_id": "", "customer": "", "currency": "EUR", "notes": "",
             "vat_exemption": "",
             "payment_terms_days": 14, "every": "month", "interval": 1,
             "day": str(min(today.day, 28)) if today.day <= 28 else "last",
             "starts": today.isoformat(), "ends": "", "count": "", "action": "draft",
             "email_to": "", "backfill": False,
             "line_items": [{"description": "", "quantity": "1", "unit_price": "",
                             "discount_percent": "", "tax_rate": "0"}]}
    if "invoice_id" in request.query_params:
        invoice = await invoices.get_invoice(
            db, actor, id_of(request.query_params["invoice_id"], "invoice_not_found"))
        issued_on = dt.date.fromisoformat(invoice["issue_date"] or today.isoformat())
        terms = (dt.date.fromisoformat(invoice["due_date"]) - issued_on).days
        start.update({"customer_id": invoice["customer_id"] or "",
                      "customer": invoice["customer"], "currency": invoice["currency"],
                      "notes": invoice["notes"], "vat_exemption": invoice["vat_exemption"],
                      "line_items": invoice["line_items"],
                      "payment_terms_days": max(0, min(terms, recurring.MAX_TERMS_DAYS)),
                      "from_number": invoice["number"]})
    known = [] if start["customer_id"] else \
        (await customers.list_customers(db, actor, paging.MAX_LIMIT)).items
    return render(request, "recurring_new.html", {"schedule": start, "customers": known,
                                                  "request_id": str(uuid.uuid4())})


async def schedule_page(request: Request) -> Response:
    recurring_id = path_id(request, "recurring_id", "recurring_not_found")
    actor = await current_actor(request)
    schedule = await recurring.get_schedule(studio_of(request).db, actor, recurring_id)
    return answer(request, {"recurring": schedule}, template="recurring.html",
                  context={"schedule": _words(schedule)})


async def edit_schedule(request: Request) -> Response:
    recurring_id = path_id(request, "recurring_id", "recurring_not_found")
    raw = await read_body(request, MAX_DRAFT_BYTES)
    actor = await current_actor(request)
    body = _body(read_numbers(request, raw))
    edited = await recurring.edit_schedule(studio_of(request).db, actor, recurring_id,
                                           recurring.parse_revision(body), body)
    _wake_the_clock(request)
    return moved_to(request, f"/recurring/{recurring_id}", {"recurring": edited})


async def _set_status(request: Request, wanted: str) -> Response:
    recurring_id = path_id(request, "recurring_id", "recurring_not_found")
    await read_body(request)
    actor = await current_actor(request)
    changed = await recurring.set_status(studio_of(request).db, actor, recurring_id, wanted)
    _wake_the_clock(request)
    return moved_to(request, f"/recurring/{recurring_id}", {"recurring": changed})


async def pause(request: Request) -> Response:
    return await _set_status(request, "paused")


async def resume(request: Request) -> Response:
    return await _set_status(request, "active")


async def end(request: Request) -> Response:
    return await _set_status(request, "ended")

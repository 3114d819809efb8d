"""Customer handlers: the list with search, one customer, and the draft's customer picker."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from studio import i18n
from studio.billing import customers, identifiers
from studio.store import bindings, paging
from studio.web.negotiation import (
    PRIVATE,
    answer,
    answer_kind,
    current_actor,
    id_of,
    moved_to,
    path_id,
    read_body,
    render,
    studio_of,
)

# The picker's own fields, named apart from the draft form's around it.
NEW_CUSTOMER = {"new_customer_name": "name", "new_customer_email": "email",
                "new_customer_request_id": "request_id"}


async def customer_list(request: Request) -> Response:
    """A page of the person's customers by name, `?q=` finding names and emails; `Link` names
    the next page."""
    actor = await current_actor(request)
    query = request.query_params
    shown = paging.DEFAULT_LIMIT if answer_kind(request) == "json" else paging.PAGE_LIMIT
    limit, after = paging.limit_of(query, shown), paging.cursor_of(query)
    searched = customers.parse_query(query.get("q"))
    page = await customers.list_customers(studio_of(request).db, actor, limit, after, searched)
    onwards = paging.next_url(request.scope["path"], query, page.after)
    context = {"customers": page.items, "onwards": onwards, "first_page": after is None,
               "q": searched, "request_id": str(uuid.uuid4()),
               "countries": identifiers.countries(), "language_names": i18n.NAMES}
    response = answer(request, page.items, template="customers.html", context=context)
    response.headers.update(paging.link_header(onwards))
    return response


async def create_customer(request: Request) -> Response:
    body = await read_body(request)
    actor = await current_actor(request)
    fields = customers.parse_customer(body)
    made, created = await customers.create_customer(
        studio_of(request).db, actor, fields, bindings.optional_request_id(body))
    return moved_to(request, f"/customers/{made['id']}", made, 201 if created else 200)


async def customer_page(request: Request) -> Response:
    customer_id = path_id(request, "customer_id", "customer_not_found")
    actor = await current_actor(request)
    customer = await customers.get_customer(studio_of(request).db, actor, customer_id)
    if answer_kind(request) == "json":
        return JSONResponse(customer, headers=PRIVATE)
    return render(request, "customer.html", {"customer": customer,
                                             "countries": identifiers.countries(),
                                             "language_names": i18n.NAMES})


async def edit_customer(request: Request) -> Response:
    customer_id = path_id(request, "customer_id", "customer_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    edited = await customers.edit_customer(studio_of(request).db, actor, customer_id,
                                           customers.parse_revision(body), body)
    return moved_to(request, f"/customers/{customer_id}", edited)


async def delete_customer(request: Request) -> Response:
    customer_id = path_id(request, "customer_id", "customer_not_found")
    await read_body(request)
    actor = await current_actor(request)
    await customers.delete_customer(studio_of(request).db, actor, customer_id)
    return moved_to(request, "/customers", {"status": "deleted", "customer_id": customer_id})


def _picker(request: Request, customer: dict[str, Any] | None) -> Response:
    """The picker with a customer chosen, as the draft form shows it; `picked` carries the
    customer's currency and payment terms for the draft to fill in."""
    chosen = {"customer": customer["name"], "customer_id": customer["id"]} if customer else None
    return render(request, "_customer_picker.html", {"invoice": chosen, "picked": customer})


async def picker(request: Request) -> Response:
    """While the person types: up to eight of their customers whose name or email holds the
    text. `?chosen=` answers the picker with that customer chosen."""
    actor = await current_actor(request)
    db = studio_of(request).db
    query = request.query_params
    if "chosen" in query:
        chosen_id = id_of(query["chosen"], "customer_not_found")
        chosen = await customers.get_customer(db, actor, chosen_id)
        return _picker(request, chosen)
    typed = customers.parse_query(query.get("q", query.get("customer")))
    page = await customers.list_customers(db, actor, customers.PICKER_MATCHES, None, typed)
    return render(request, "_customer_matches.html", {"matches": page.items, "typed": typed})


async def picker_create(request: Request) -> Response:
    """Make a customer in place from the draft form, once per picker, and choose it."""
    body = await read_body(request)
    actor = await current_actor(request)
    given = {field: body[name] for name, field in NEW_CUSTOMER.items() if name in body}
    fields = customers.parse_customer(given)
    made, created = await customers.create_customer(
        studio_of(request).db, actor, fields, bindings.optional_request_id(given))
    if answer_kind(request) == "json":
        return JSONResponse(made, status_code=201 if created else 200, headers=PRIVATE)
    return _picker(request, made)

"""Requests to the model, as a person makes and follows them: the review step (what will be
asked, exactly), the submission (the same request twice is one), the lease page polled by
every open tab, the list of requests, and apply and cancel, the person's decisions."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import uuid
from collections.abc import Hashable
from typing import Any

from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import Scope

from studio import i18n
from studio.accounts.auth import SESSION_COOKIE, Actor
from studio.billing import invoices
from studio.errors import Refusal
from studio.leasing import intents, leases
from studio.leasing.providers import AUTO
from studio.leasing.purposes import PURPOSES
from studio.store import paging
from studio.store.memo import Kept
from studio.web.negotiation import (
    CANONICAL_ID,
    HTMX_STOP_POLLING,
    MAX_PATH_ID,
    PRIVATE,
    Studio,
    answer,
    answer_kind,
    current_actor,
    kind_of,
    moved_to,
    parse_body,
    path_id,
    read_body,
    read_raw,
    studio_of,
)


def parse_choices(body: dict[str, Any]) -> dict[str, str]:
    """Apply choices from JSON `{"choices": {invoice: proposal}}` or form `choice:<invoice>`."""
    raw = body.get("choices")
    if raw is None:
        raw = {key.removeprefix("choice:"): value for key, value in body.items()
               if key.startswith("choice:")}
    if not isinstance(raw, dict):
        raise Refusal("invalid_body", i18n.gettext("Choose one suggestion for each invoice."))
    choices: dict[str, str] = {}
    for invoice_id, proposal_id in raw.items():
        try:
            choices[str(uuid.UUID(invoice_id))] = str(uuid.UUID(str(proposal_id)[:MAX_PATH_ID]))
        except ValueError:
            raise Refusal("invalid_choice") from None
    return choices


async def review(request: Request) -> Response:
    """The review step: what will be sent, exactly; the page mints and freezes the id."""
    actor = await current_actor(request)
    studio = studio_of(request)
    query = request.query_params
    asked: dict[str, Any] = {
        "purpose": query.get("purpose", "summarize_invoice"),
        "invoice_ids": query.getlist("invoice_id"),
    }
    if query.getlist("provider"):
        asked["providers"] = query.getlist("provider")
    if "candidates" in query:
        asked["candidates"] = query["candidates"]
    if query.get("attachment_id"):
        asked["attachment_id"] = query["attachment_id"]
    if query.get("days"):
        asked["days"] = query["days"]
    intent = intents.parse_intent(asked, studio.providers, studio.settings.max_batch_tasks)
    await studio.db.read(intents.check_targets, actor.id, intent)
    chosen = await invoices.get_invoices(studio.db, actor, list(intent.invoice_ids))
    chosen.sort(key=lambda invoice: invoice["number"] or "")
    frozen = intent.normalised()
    # What will be made: `auto` names the writer it resolves to now, as it will at submit.
    writers = await studio.providers.resolve(list(intent.providers))
    tasks = len(intents.plan_tasks(intent, writers))
    # Why the studio writes what "the AI model if it answers" was ticked for, when it does.
    instead_of_model = None
    if AUTO in intent.providers and "openai" not in writers:
        instead_of_model = "no_answer" if "openai" in studio.providers.names() \
            else "not_set_up"
    data = {"request": frozen, "tasks": tasks}
    context = {
        "intent": intent, "frozen_json": json.dumps(frozen), "invoices": chosen,
        "purpose": PURPOSES[intent.purpose], "provider_names": studio.providers.names(),
        "max_candidates": intents.MAX_CANDIDATES, "tasks": tasks, "writers": writers,
        "lease_seconds": studio.settings.lease_seconds, "instead_of_model": instead_of_model,
    }
    return answer(request, data, template="review.html", context=context)


async def submit_lease(request: Request) -> Response:
    raw = await read_raw(request)
    studio = studio_of(request)
    kind = answer_kind(request)

    async def submit() -> Response:
        body = parse_body(request, raw)
        actor = await current_actor(request)
        lease_request = intents.parse_request(
            body, studio.providers, studio.settings.max_batch_tasks
        )
        receipt, created = await intents.submit(
            studio.db, studio.providers, actor, lease_request, studio.settings.lease_seconds,
            max_open_tasks=studio.settings.max_open_tasks_per_actor,
        )
        if created and studio.worker is not None:
            studio.worker.wake.set()
        return moved_to(request, f"/leases/{receipt['lease_id']}", receipt,
                        201 if created else 200)

    # A resubmission of the same bytes by the same session, with nothing committed since,
    # is answered as it was last time, before the bytes are even parsed again; only a JSON
    # replay (200) is remembered.
    cookie = request.cookies.get(SESSION_COOKIE)
    if not studio.sessions.confirmed(cookie):
        return await submit()
    key = replay_key(kind, cookie, raw)

    def replayed(reply: Response) -> bool:
        return kind == "json" and reply.status_code == 200

    return await studio.memo.answer(key, submit, keep=replayed)


async def lease_list(request: Request) -> Response:
    """A page of the person's requests, newest first; an ended one offers to ask again.
    `Link` names the next page."""
    actor = await current_actor(request)
    query = request.query_params
    shown = paging.DEFAULT_LIMIT if answer_kind(request) == "json" else paging.PAGE_LIMIT
    limit, after = paging.limit_of(query, shown), paging.cursor_of(query)
    page = await leases.requests_page(studio_of(request).db, actor, limit, after)
    onwards = paging.next_url(request.scope["path"], query, page.after)
    context = {"requests": page.items, "onwards": onwards, "first_page": after is None}
    response = answer(request, page.items, template="leases.html", context=context)
    response.headers.update(paging.link_header(onwards))
    return response


async def _lease_answer(request: Request, actor: Actor, lease_id: str) -> Response:
    lease = await leases.read_lease(studio_of(request).db, actor, lease_id)
    final = lease["status"] in leases.FINAL
    return answer(
        request, lease, template="lease.html", context={"lease": lease, "final": final},
        fragment="_lease.html", fragment_status=HTMX_STOP_POLLING if final else 200,
    )


async def lease_status(request: Request) -> Response:
    """Polled about once a second by every open tab: answers are remembered per database
    version, so an unchanged lease costs one version check (see studio/store/memo.py)."""
    lease_id = path_id(request, "lease_id", "lease_not_found")
    kind = answer_kind(request)

    async def read() -> Response:
        return await _lease_answer(request, await current_actor(request), lease_id)

    cookie = request.cookies.get(SESSION_COOKIE)
    # Remembered answers stand in only for a session this process saw current lately.
    if kind == "page" or not studio_of(request).sessions.confirmed(cookie):
        return await read()
    key = poll_key(kind, cookie, lease_id, request.scope)
    return await studio_of(request).memo.answer(key, read)


def poll_key(kind: str, cookie: str, lease_id: str, scope: Scope) -> Hashable:
    """A poll's answer is remembered per browser language (the edge reads it; a chosen one is
    saved, and a commit forgets every answer), so none is given again in another language."""
    return ("lease", kind, cookie, lease_id, scope.get("studio.browser_language"))


def replay_key(kind: str, cookie: str, raw: bytes) -> Hashable:
    return ("replay", kind, cookie, hashlib.sha256(raw).digest())


POLLED = re.compile(rf"/leases/{CANONICAL_ID.pattern}")
POLL_ROUTE, SUBMIT_ROUTE = "/leases/{lease_id}", "/leases"


class Remembered:
    """The studio's two hottest requests, a lease's poll and a replayed submission, answered
    at the edge (studio/web/edge.py) before the router runs, from what `lease_status` and
    `submit_lease` remembered, under the same keys and on the same conditions: a session this
    process saw current lately, and nothing committed since. Anything else goes on to them."""

    def route(self, scope: Scope) -> str | None:
        """The route template of a request that may be answered so, else None."""
        if scope["method"] == "GET" and POLLED.fullmatch(scope["path"]):
            return POLL_ROUTE
        if scope["method"] == "POST" and scope["path"] == SUBMIT_ROUTE:
            return SUBMIT_ROUTE
        return None

    async def recall(self, scope: Scope, body: bytes) -> Kept | None:
        """The remembered answer to this request (`body`: the whole of a POST's), or None."""
        headers = _asked_with(scope["headers"])
        cookie = _session_cookie(headers.get("cookie", ""))
        studio: Studio = scope["app"].state.studio
        if cookie is None or not studio.sessions.confirmed(cookie):
            return None
        kind = kind_of(headers)
        if scope["method"] == "GET":
            key = poll_key(kind, cookie, scope["path"].rpartition("/")[2], scope)
        else:
            key = replay_key(kind, cookie, body)
        return await studio.memo.recall(key)


# The headers the edge reads to find a remembered answer, each as Starlette's `Headers.get`
# reads it: the first of its name.
RECALL_HEADERS = frozenset({b"cookie", b"accept", b"hx-request", b"content-type"})


def _asked_with(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in raw:
        if key in RECALL_HEADERS:
            headers.setdefault(key.decode("latin-1"), value.decode("latin-1"))
    return headers


@functools.lru_cache(maxsize=4096)
def _session_cookie(header: str) -> str | None:
    """The session cookie in a Cookie header, read as Starlette reads it; a tab sends the same
    header with every poll, so each is parsed once."""
    return cookie_parser(header).get(SESSION_COOKIE)


async def apply_lease(request: Request) -> Response:
    lease_id = path_id(request, "lease_id", "lease_not_found")
    body = await read_body(request)
    actor = await current_actor(request)
    result = await leases.apply_lease(studio_of(request).db, actor, lease_id, parse_choices(body))
    return await _decided(request, actor, lease_id, result)


async def cancel_lease(request: Request) -> Response:
    lease_id = path_id(request, "lease_id", "lease_not_found")
    await read_body(request)
    actor = await current_actor(request)
    result = await leases.cancel_lease(studio_of(request).db, actor, lease_id)
    return await _decided(request, actor, lease_id, result)


async def _decided(request: Request, actor: Actor, lease_id: str, result: dict) -> Response:
    kind = answer_kind(request)
    if kind == "json":
        return JSONResponse(result, headers=PRIVATE)
    if kind == "fragment":
        return await _lease_answer(request, actor, lease_id)
    return RedirectResponse(f"/leases/{lease_id}", status_code=303)

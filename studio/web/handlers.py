"""Thin handlers: parse, call one domain function, answer as the client asked.

One set of paths serves browsers and API clients: `HX-Request` gets an HTML fragment; an
`Accept` naming JSON, or a JSON body, gets JSON; anything else gets a full page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from studio.accounts.auth import SESSION_COOKIE, Actor, Sessions
from studio.billing import invoices
from studio.config import Settings
from studio.errors import Refusal, storage_full
from studio.leasing import intents, leases
from studio.leasing.providers import Providers
from studio.leasing.purposes import PURPOSES
from studio.ops import accounts
from studio.runtime.worker import Worker
from studio.store import paging
from studio.store.db import Database
from studio.store.memo import Memo
from studio.store.transactions import DatabaseUnavailable

HTMX_STOP_POLLING = 286
MAX_BODY_BYTES = 64 * 1024
# A draft holds up to 200 lines of 500 characters and notes of 2,000: spelt the longest way a
# client may (each character escaped in JSON, or four bytes of UTF-8 percent-encoded in a
# form: 12 bytes each) that is about 1.25 MB, so every draft the line rules allow fits.
MAX_DRAFT_BYTES = 2 * 1024 * 1024
MAX_PATH_ID = 64
REPEATED_FIELDS = ("invoice_id", "invoice_ids", "provider", "providers",
                   "description", "quantity", "unit_price", "discount_percent", "tax_rate")
VARY = "HX-Request, Accept"
# Every answer is one person's: no shared cache keeps it, and Back after sign-out re-asks.
PRIVATE = {"Vary": VARY, "Cache-Control": "no-store"}


@dataclass
class Studio:
    settings: Settings
    db: Database
    sessions: Sessions
    providers: Providers
    worker: Worker | None
    templates: Jinja2Templates
    memo: Memo


def studio_of(request: Request) -> Studio:
    return request.app.state.studio


# --- negotiation -----------------------------------------------------------------------------


def answer_kind(request: Request) -> str:
    """`fragment`, `json` or `page`, decided once per request from its headers and body."""
    if request.headers.get("hx-request") == "true":
        return "fragment"
    if "application/json" in request.headers.get("accept", ""):
        return "json"
    if "json" in request.headers.get("content-type", "") or request.scope.get("studio.json_body"):
        return "json"
    return "page"


def render(request: Request, template: str, context: dict[str, Any], status: int = 200,
           headers: dict[str, str] | None = None) -> Response:
    studio = studio_of(request)
    page_context = {"demo": studio.settings.demo, "actor": request.scope.get("studio.actor")}
    response = studio.templates.TemplateResponse(
        request, template, {**page_context, **context}, status_code=status, headers=headers
    )
    response.headers.update(PRIVATE)
    return response


def answer(request: Request, data: Any, *, template: str, context: dict[str, Any],
           status: int = 200, fragment: str | None = None, fragment_status: int | None = None
           ) -> Response:
    """The same answer as JSON, as a page, or as the page's fragment."""
    kind = answer_kind(request)
    if kind == "json":
        return JSONResponse(data, status_code=status, headers=PRIVATE)
    if kind == "fragment" and fragment:
        return render(request, fragment, context, fragment_status or status)
    return render(request, template, context, status)


def moved_to(request: Request, target: str, data: Any, status: int = 200) -> Response:
    """After a write: JSON gets the data; htmx and plain forms go to the page to see next."""
    kind = answer_kind(request)
    if kind == "json":
        return JSONResponse(data, status_code=status, headers=PRIVATE)
    if kind == "fragment":
        return Response(status_code=200, headers={"HX-Redirect": target, **PRIVATE})
    return RedirectResponse(target, status_code=303, headers=PRIVATE)


def refusal_response(request: Request, refusal: Refusal) -> Response:
    response = _refusal_answer(request, refusal)
    response.headers.update(refusal.headers)
    return response


def _refusal_answer(request: Request, refusal: Refusal) -> Response:
    kind = answer_kind(request)
    if kind == "json":
        return JSONResponse(refusal.as_json(), status_code=refusal.status, headers=PRIVATE)
    if refusal.status == 401:
        target = f"/login?next={quote(page_to_return_to(request, kind), safe='')}"
        if kind == "fragment":
            return Response(status_code=401, headers={"HX-Redirect": target, **PRIVATE})
        return RedirectResponse(target, status_code=303, headers=PRIVATE)
    context = {"refusal": refusal}
    if kind == "fragment":
        # The message goes to the page's message area, not into whatever the form targeted.
        retarget = {"HX-Retarget": "#messages", "HX-Reswap": "innerHTML"}
        return render(request, "_message.html", context, refusal.status, retarget)
    return render(request, "error.html", context, refusal.status)


def page_to_return_to(request: Request, kind: str) -> str:
    """Where to go back after signing in: the page itself, query too, never a POST address."""
    if kind == "fragment":
        try:
            current = urlsplit(request.headers.get("hx-current-url", ""))
        except ValueError:  # an unreadable current URL is as good as none
            return "/invoices"
        if current.netloc == request.headers.get("host"):
            return safe_next(current.path + (f"?{current.query}" if current.query else ""))
        return "/invoices"
    if request.method != "GET":
        return "/invoices"
    # From the scope, not request.url: that re-parses the Host header, which may be garbage.
    query = request.scope.get("query_string", b"").decode("latin-1")
    return request.scope["path"] + (f"?{query}" if query else "")


async def on_refusal(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refusal)
    return refusal_response(request, exc)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_body")
    response = refusal_response(request, Refusal(code))
    response.headers.update(exc.headers or {})  # 405 names what is allowed
    return response


async def on_database_error(request: Request, exc: Exception) -> Response:
    """A lock held past the busy timeout is a busy answer, a full disk or database 507 (the
    transaction rolled back), never a 500."""
    if storage_full(exc):
        return refusal_response(request, Refusal("insufficient_storage"))
    if "locked" in str(exc) or "busy" in str(exc):
        response = refusal_response(request, Refusal("database_busy"))
        response.headers["Retry-After"] = "1"
        return response
    raise exc


async def on_file_error(request: Request, exc: Exception) -> Response:
    """A file that cannot grow (a full disk, a quota) is 507, never a 500."""
    if storage_full(exc):
        return refusal_response(request, Refusal("insufficient_storage"))
    raise exc


# --- input -----------------------------------------------------------------------------------


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The body as a dict, from JSON or a url-encoded form, at most `limit` bytes (64 KiB
    unless said)."""
    return parse_body(request, await read_raw(request, limit))


async def read_raw(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body's bytes, at most `limit` (64 KiB unless said)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise Refusal("body_too_large", too_large(limit))
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise Refusal("body_too_large", too_large(limit))
    return bytes(raw)


def too_large(limit: int) -> str:
    """The 413's sentence, naming the limit as a person reads sizes: 64 KB, 2 MB."""
    size = f"{limit // 2**20} MB" if limit % 2**20 == 0 else f"{limit // 2**10} KB"
    return (f"That is more than the studio accepts at once: at most {size} ({limit:,} bytes)"
            " can be sent in one go. Send less.")


def parse_body(request: Request, raw: bytes) -> dict[str, Any]:
    """JSON or a url-encoded form, as a dict; anything else is refused."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise Refusal("invalid_body", "The body is not valid UTF-8 text.") from None
    if not text:
        return {}
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if "json" in content_type or text.startswith(("{", "[")):
        request.scope["studio.json_body"] = True
        try:
            # Numbers with a fraction are read exactly, as decimals, never as binary floats.
            body = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
        except ValueError:
            raise Refusal("invalid_body", "The body is not valid JSON.") from None
        except RecursionError:
            raise Refusal("invalid_body", "The body nests too deeply.") from None
        if not isinstance(body, dict):
            raise Refusal("invalid_body", "The body must be a JSON object.")
        try:
            json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape cannot be stored as text
            raise Refusal("invalid_body", "The body holds text that is not valid Unicode.") \
                from None
        _refuse_nul(body)
        return body
    if content_type in ("", "application/x-www-form-urlencoded"):
        fields = parse_qs(text, keep_blank_values=True)
        _refuse_nul(fields)
        return {
            key: values if key in REPEATED_FIELDS else values[-1] for key, values in fields.items()
        }
    raise Refusal("invalid_body", "Send JSON or a url-encoded form.")


def _refuse_nul(value: object, field: str = "") -> None:
    """No text the studio keeps may hold NUL: PostgreSQL cannot store it, and no person types
    it. Keys and values, however deep; the refusal names the field it is in."""
    if isinstance(value, str):
        if "\x00" in value:
            named = f"The {field.replace('_', ' ')} holds" if field else "This holds"
            raise Refusal("invalid_body", f"{named} the NUL character (code 0), which text may"
                                          " not hold; remove it and send again.")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_nul(key, field)
            _refuse_nul(item, field or str(key))
    elif isinstance(value, list):
        for item in value:
            _refuse_nul(item, field)


def _no_constant(name: str) -> object:
    """NaN and Infinity are not JSON, though Python's reader takes them."""
    raise ValueError(name)


def path_id(request: Request, name: str, missing: str) -> str:
    """A UUID from the path, canonical; anything malformed is simply not found."""
    return id_of(request.path_params[name], missing)


def id_of(raw: str, missing: str) -> str:
    """A UUID from the path or the query, canonical; anything malformed is refused as
    `missing`, as not found."""
    try:
        if len(raw) > MAX_PATH_ID:
            raise ValueError(raw)
        return str(uuid.UUID(raw))
    except ValueError:
        raise Refusal(missing) from None


async def current_actor(request: Request) -> Actor:
    actor = await studio_of(request).sessions.actor(request.cookies.get(SESSION_COOKIE))
    request.scope["studio.actor"] = actor
    return actor


def parse_choices(body: dict[str, Any]) -> dict[str, str]:
    """Apply choices from JSON `{"choices": {invoice: proposal}}` or form `choice:<invoice>`."""
    raw = body.get("choices")
    if raw is None:
        raw = {key.removeprefix("choice:"): value for key, value in body.items()
               if key.startswith("choice:")}
    if not isinstance(raw, dict):
        raise Refusal("invalid_body", "Choose one suggestion for each invoice.")
    choices: dict[str, str] = {}
    for invoice_id, proposal_id in raw.items():
        try:
            choices[str(uuid.UUID(invoice_id))] = str(uuid.UUID(str(proposal_id)[:MAX_PATH_ID]))
        except ValueError:
            raise Refusal("invalid_choice") from None
    return choices


def safe_next(target: object) -> str:
    """Only a path on this site, so sign-in cannot be used to send someone elsewhere."""
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//") \
            and "\\" not in target:
        return target
    return "/invoices"


# --- handlers --------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    return RedirectResponse("/invoices", status_code=303)


async def login_page(request: Request) -> Response:
    studio = studio_of(request)
    context: dict[str, Any] = {"next": safe_next(request.query_params.get("next"))}
    if not await accounts.any_account(studio.db):
        context["first_account_command"] = accounts.first_account_command(studio.settings)
    return render(request, "login.html", context)


async def login(request: Request) -> Response:
    body = await read_body(request)
    studio = studio_of(request)
    address = request.client.host if request.client else ""
    try:
        actor, cookie = await studio.sessions.sign_in(
            body.get("email"), body.get("password"), address,
            presented=request.cookies.get(SESSION_COOKIE))
    except Refusal as refusal:
        if answer_kind(request) == "json":
            raise
        context = {"next": safe_next(body.get("next")), "refusal": refusal,
                   "email": body.get("email") if isinstance(body.get("email"), str) else ""}
        return render(request, "login.html", context, refusal.status, refusal.headers)
    if answer_kind(request) == "json":
        response: Response = JSONResponse({"actor_id": actor.id, "email": actor.email})
    else:
        response = RedirectResponse(safe_next(body.get("next")), status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=int(studio.settings.session_max_seconds),
        httponly=True, samesite="lax", path="/",
        secure=studio.settings.proxy_headers or request.scope.get("scheme") == "https",
    )
    return response


async def logout(request: Request) -> Response:
    """Sign out this session; `everywhere` (a form field, or POST /logout/everywhere) ends
    every session of the actor."""
    body = await read_body(request)
    actor = await current_actor(request)
    db = studio_of(request).db
    everywhere = request.scope["path"].endswith("/everywhere") \
        or body.get("everywhere") in (True, "1", "true", "on")
    if everywhere:
        sessions, expired = await leases.sign_out_everywhere(db, actor)
        result = {"status": "signed_out", "sessions_ended": sessions, "expired_leases": expired}
    else:
        expired = await leases.expire_session(db, actor.session_id)
        result = {"status": "signed_out", "expired_leases": expired}
    if answer_kind(request) == "json":
        response: Response = JSONResponse(result)
    else:
        response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


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
    intent = intents.parse_intent(asked, studio.providers, studio.settings.max_batch_tasks)
    await studio.db.read(intents.check_targets, actor.id, intent)
    chosen = await invoices.get_invoices(studio.db, actor, list(intent.invoice_ids))
    chosen.sort(key=lambda invoice: invoice["number"] or "")
    frozen = intent.normalised()
    # What will be made: `auto` names the writer it resolves to now, as it will at submit.
    writers = await studio.providers.resolve(list(intent.providers))
    tasks = len(intents.plan_tasks(intent, writers))
    data = {"request": frozen, "tasks": tasks}
    context = {
        "intent": intent, "frozen_json": json.dumps(frozen), "invoices": chosen,
        "purpose": PURPOSES[intent.purpose], "provider_names": studio.providers.names(),
        "max_candidates": intents.MAX_CANDIDATES, "tasks": tasks, "writers": writers,
        "lease_seconds": studio.settings.lease_seconds,
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
    key = ("replay", kind, cookie, hashlib.sha256(raw).digest())
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
    version, so an unchanged lease costs one version check (see studio/memo.py)."""
    lease_id = path_id(request, "lease_id", "lease_not_found")
    kind = answer_kind(request)

    async def read() -> Response:
        return await _lease_answer(request, await current_actor(request), lease_id)

    cookie = request.cookies.get(SESSION_COOKIE)
    # Remembered answers stand in only for a session this process saw current lately.
    if kind == "page" or not studio_of(request).sessions.confirmed(cookie):
        return await read()
    key = ("lease", kind, cookie, lease_id)
    return await studio_of(request).memo.answer(key, read)


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


async def on_integrity_error(request: Request, exc: Exception) -> Response:
    """A constraint the domain's own checks did not foresee: nothing was written (the
    transaction rolled back), so a clear 409, never a 500; logged whole to be looked into."""
    logging.getLogger(__name__).error("a database constraint refused %s %s: %s",
                                      request.method, request.scope["path"], exc, exc_info=exc)
    return refusal_response(request, Refusal("conflict"))


async def on_database_unavailable(request: Request, exc: Exception) -> Response:
    """The database is away (restarted, the network down): 503 until it is back, which the
    pool notices by itself; nothing was acknowledged, so nothing is lost."""
    logging.getLogger(__name__).warning("the database is unavailable: %s", exc)
    response = refusal_response(request, Refusal("database_unavailable"))
    response.headers["Retry-After"] = "1"
    return response


EXCEPTION_HANDLERS = {
    Refusal: on_refusal,
    DatabaseUnavailable: on_database_unavailable,
    HTTPException: on_http_error,
    sqlite3.OperationalError: on_database_error,
    OSError: on_file_error,
    sqlite3.IntegrityError: on_integrity_error,
}


"""How the web floor reads a request and answers it: the body parsed (JSON or a form, within
its limit), ids from the path, the signed-in actor, and the answer in the form asked for.

One set of paths serves browsers and API clients: `HX-Request` gets an HTML fragment; an
`Accept` naming JSON, or a JSON body, gets JSON; anything else gets a full page.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from studio import i18n
from studio.accounts.auth import SESSION_COOKIE, Actor, Sessions
from studio.config import Settings
from studio.errors import Refusal
from studio.leasing.providers import Providers
from studio.runtime.worker import Worker
from studio.store.db import Database
from studio.store.memo import Memo
from studio.web import numbers

HTMX_STOP_POLLING = 286
MAX_BODY_BYTES = 64 * 1024
# A draft holds up to 200 lines of 500 characters and notes of 2,000: spelt the longest way a
# client may (each character escaped in JSON, or four bytes of UTF-8 percent-encoded in a
# form: 12 bytes each) that is about 1.25 MB, so every draft the line rules allow fits.
MAX_DRAFT_BYTES = 2 * 1024 * 1024
MAX_PATH_ID = 64
CANONICAL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
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
    kind = kind_of(request.headers)
    return "json" if kind == "page" and request.scope.get("studio.json_body") else kind


def kind_of(headers: Mapping[str, str]) -> str:
    """The kind of answer the headers alone ask for (a JSON body, once read, asks for JSON)."""
    if headers.get("hx-request") == "true":
        return "fragment"
    if "application/json" in headers.get("accept", "") \
            or "json" in headers.get("content-type", ""):
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
    response = _refusal_answer(request, _with_form_numbers(request, refusal))
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


def _with_form_numbers(request: Request, refusal: Refusal) -> Refusal:
    """The refusal of a form, each field under the form's own row, and a number the person's
    language does not write said so (rather than how the machine format is written)."""
    rows = request.scope.get("studio.form_rows")
    if rows is None or refusal.status != 422 \
            or not (refusal.fields or request.scope["studio.form_numbers"]):
        return refusal
    fields = numbers.at_form_rows(refusal.fields, rows)
    written = request.scope["studio.form_numbers"]
    first = next(iter(fields), None)
    if first is not None and first not in written:
        message = refusal.message
    else:
        message = next(iter(written.values()))
    return Refusal(refusal.code, message, refusal.headers, {**fields, **written})


# --- input -----------------------------------------------------------------------------------


def read_numbers(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """A form's amounts, quantities and percents read as the person's language writes them
    (`1.200,50` in German), into the machine format the rules check; JSON is that format
    already. Called once the person, and so their language, is known."""
    if request.scope.get("studio.json_body"):
        return body
    read, refused = numbers.form_numbers(body, i18n.current())
    request.scope["studio.form_numbers"] = refused
    request.scope["studio.form_rows"] = numbers.form_rows(body)
    return read


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
    return i18n.gettext("That is more than the studio accepts at once: at most %(size)s"
                        " (%(bytes)s bytes) can be sent in one go. Send less.") % {
        "size": size, "bytes": i18n.number(limit)}


def parse_body(request: Request, raw: bytes) -> dict[str, Any]:
    """JSON or a url-encoded form, as a dict; anything else is refused."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise Refusal("invalid_body", i18n.gettext("The body is not valid UTF-8 text.")) from None
    if not text:
        return {}
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if "json" in content_type or text.startswith(("{", "[")):
        request.scope["studio.json_body"] = True
        try:
            # Numbers with a fraction are read exactly, as decimals, never as binary floats.
            body = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
        except ValueError:
            raise Refusal("invalid_body", i18n.gettext("The body is not valid JSON.")) from None
        except RecursionError:
            raise Refusal("invalid_body", i18n.gettext("The body nests too deeply.")) from None
        if not isinstance(body, dict):
            raise Refusal("invalid_body", i18n.gettext("The body must be a JSON object."))
        try:
            json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape cannot be stored as text
            raise Refusal("invalid_body", i18n.gettext(
                "The body holds text that is not valid Unicode.")) from None
        _refuse_nul(body)
        return body
    if content_type in ("", "application/x-www-form-urlencoded"):
        fields = parse_qs(text, keep_blank_values=True)
        _refuse_nul(fields)
        return {
            key: values if key in REPEATED_FIELDS else values[-1] for key, values in fields.items()
        }
    raise Refusal("invalid_body", i18n.gettext("Send JSON or a url-encoded form."))


def _refuse_nul(value: object, field: str = "") -> None:
    """No text the studio keeps may hold NUL: PostgreSQL cannot store it, and no person types
    it. Keys and values, however deep; the refusal names the field it is in."""
    if isinstance(value, str):
        if "\x00" in value:
            if field:
                message = i18n.gettext(
                    "The %(field)s holds the NUL character (code 0), which text may not hold;"
                    " remove it and send again.") % {"field": field.replace("_", " ")}
            else:
                message = i18n.gettext("This holds the NUL character (code 0), which text may"
                                       " not hold; remove it and send again.")
            raise Refusal("invalid_body", message)
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
    if CANONICAL_ID.fullmatch(raw):  # as the studio writes them: nothing to parse
        return raw
    try:
        if len(raw) > MAX_PATH_ID:
            raise ValueError(raw)
        return str(uuid.UUID(raw))
    except ValueError:
        raise Refusal(missing) from None


async def current_actor(request: Request) -> Actor:
    actor = await studio_of(request).sessions.actor(request.cookies.get(SESSION_COOKIE))
    request.scope["studio.actor"] = actor
    i18n.speak(actor.language)  # the person's choice wins over the browser's (the edge's)
    return actor


def safe_next(target: object) -> str:
    """Only a path on this site, so sign-in cannot be used to send someone elsewhere."""
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//") \
            and "\\" not in target:
        return target
    return "/invoices"

"""Signing in and out: the sign-in page and form, the session cookie, and sign-out, which
ends this session's requests (or every session's, `everywhere`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from studio.accounts.auth import SESSION_COOKIE
from studio.errors import Refusal
from studio.leasing import leases
from studio.ops import accounts
from studio.web.negotiation import (
    answer_kind,
    current_actor,
    read_body,
    render,
    safe_next,
    studio_of,
)


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

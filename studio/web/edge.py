"""The edge of the web floor: the one ASGI layer every request passes, and what an exception
that reaches the edge is answered with (always a clear 4xx or 503/507, never a 500).

The layer, pure ASGI (no task per request, no streaming wrapper), does three things at once:
an unsafe cross-origin request is refused before any handler runs; a request body that goes
silent for the client timeout is cut off (408, its connection closed), so a stalled client
cannot hold a handler; and every answer is counted and logged by its route template, status,
time and actor.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from studio import logs
from studio.accounts.auth import UNSAFE_METHODS, is_cross_origin
from studio.counters import requests_total
from studio.errors import Refusal, storage_full
from studio.store.transactions import DatabaseUnavailable
from studio.web.negotiation import refusal_response

log = logging.getLogger("studio.web")
ORIGIN_HEADERS = frozenset({b"sec-fetch-site", b"origin", b"host"})


class Edge:
    def __init__(self, app: ASGIApp, client_timeout_seconds: float) -> None:
        self.app = app
        self.seconds = client_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if scope["method"] not in UNSAFE_METHODS:
                # No body to wait for, and no cross-origin rule to apply: a poll goes straight
                # through.
                await self.app(scope, receive, send_and_note)
            elif _cross_origin(scope):
                refused = refusal_response(Request(scope, receive),
                                           Refusal("cross_origin_request"))
                await refused(scope, receive, send_and_note)
            else:
                await self.app(scope, _in_time(receive, self.seconds), send_and_note)
        finally:
            route = _route_template(scope)
            actor = scope.get("studio.actor")
            _counter(scope["method"], route, status).inc()
            logs.request_line(scope["method"], route, status,
                              (time.monotonic() - started) * 1000,
                              getattr(actor, "id", None))


def _in_time(receive: Receive, seconds: float) -> Receive:
    """`receive`, with the body's arrival timed: a body silent for `seconds` is refused."""
    body_read = False

    async def receive_in_time() -> Message:
        # Only the body is timed. Once it has all arrived, a receive() waits for the client
        # to go away (a streamed download listens so), however long that takes.
        nonlocal body_read
        if body_read:
            return await receive()
        try:
            async with asyncio.timeout(seconds):
                message = await receive()
        except TimeoutError:
            # Raised inside the handler's read, so it answers through the usual refusal.
            raise Refusal("request_timeout", headers={"Connection": "close"}) from None
        body_read = not message.get("more_body", False)
        return message

    return receive_in_time


# The counter of each (method, route, status) met so far: looked up once, not per request.
_counters: dict[tuple[str, str, int], Any] = {}


def _counter(method: str, route: str, status: int) -> Any:
    found = _counters.get((method, route, status))
    if found is None:
        found = requests_total.labels(method, route, str(status))
        if len(_counters) < 4096:  # a client's made-up methods cannot grow it without end
            _counters[(method, route, status)] = found
    return found


def _cross_origin(scope: Scope) -> bool:
    headers = {key.decode("latin-1"): value.decode("latin-1")
               for key, value in scope["headers"] if key in ORIGIN_HEADERS}
    return is_cross_origin(scope["method"], headers)


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not path:
        return "unmatched"  # unknown paths share one label: a scanner cannot grow the series
    return path + "/{path}" if route.__class__.__name__ == "Mount" else path


# --- exceptions that reach the edge ----------------------------------------------------------


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


async def on_integrity_error(request: Request, exc: Exception) -> Response:
    """A constraint the domain's own checks did not foresee: nothing was written (the
    transaction rolled back), so a clear 409, never a 500; logged whole to be looked into."""
    log.error("a database constraint refused %s %s: %s",
                                      request.method, request.scope["path"], exc, exc_info=exc)
    return refusal_response(request, Refusal("conflict"))


async def on_database_unavailable(request: Request, exc: Exception) -> Response:
    """The database is away (restarted, the network down): 503 until it is back, which the
    pool notices by itself; nothing was acknowledged, so nothing is lost."""
    log.warning("the database is unavailable: %s", exc)
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

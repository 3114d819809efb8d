"""The edge of the web floor: the one ASGI layer every request passes, and what an exception
that reaches the edge is answered with (always a clear 4xx or 503/507, never a 500).

The layer, pure ASGI (no task per request, no streaming wrapper), does four things at once:
an unsafe cross-origin request is refused before any handler runs; a request body that goes
silent for the client timeout is cut off (408, its connection closed), so a stalled client
cannot hold a handler; the hottest requests (a lease's poll, a replayed submission) are
answered from remembered answers when they may be, without the router and Starlette's layers
(studio/web/views/leases.py `Remembered` says which and when); and every answer is counted and
logged by its route template, status, time and actor. It also sets the language the
request is answered in: the browser's, until the signed-in person's own choice is known.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from typing import Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from studio import i18n, logs
from studio.accounts.auth import UNSAFE_METHODS, is_cross_origin
from studio.counters import requests_total
from studio.errors import Refusal, storage_full
from studio.store.memo import Kept
from studio.store.transactions import DatabaseUnavailable
from studio.web.negotiation import MAX_BODY_BYTES, refusal_response

log = logging.getLogger("studio.web")
ORIGIN_HEADERS = frozenset({b"sec-fetch-site", b"origin", b"host"})


class Remembered(Protocol):
    """Requests that may be answered at the edge from remembered answers
    (studio/web/views/leases.py `Remembered`)."""

    def route(self, scope: Scope) -> str | None: ...

    async def recall(self, scope: Scope, body: bytes) -> Kept | None: ...


class Edge:
    def __init__(self, app: ASGIApp, client_timeout_seconds: float,
                 remembered: Remembered | None = None) -> None:
        self.app = app
        self.seconds = client_timeout_seconds
        self.remembered = remembered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The whole request speaks the browser's language, until its person's choice is known
        # (`current_actor`): pages, fragments and refusals alike.
        scope["studio.browser_language"] = browser = _accepted_language(scope)
        with i18n.use(browser):
            await self._answer(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        unsafe = scope["method"] in UNSAFE_METHODS
        timed = False  # whether `receive` is already timed
        # The route template of a request the edge may answer from memory.
        route = self.remembered.route(scope) if self.remembered is not None else None
        if route is not None:
            kept = None
            if not unsafe:
                # A poll: no body to wait for, and no cross-origin rule to apply.
                kept = await self._recall(scope, b"")
            elif _declared_small(scope) and not _cross_origin(scope):
                # A submission: its whole body read first, in time, and handed on unchanged.
                body, receive = await _read_ahead(_in_time(receive, self.seconds))
                timed = True
                kept = None if body is None else await self._recall(scope, body)
            if kept is not None:
                # Answered from memory, with nothing wrapped around `send`.
                try:
                    await _send_kept(kept, send)
                finally:
                    _noted(scope, route, kept[0], started)
                return
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if not unsafe:
                await self.app(scope, receive, send_and_note)
            elif _cross_origin(scope):
                refused = refusal_response(Request(scope, receive),
                                           Refusal("cross_origin_request"))
                await refused(scope, receive, send_and_note)
            else:
                await self.app(scope, receive if timed else _in_time(receive, self.seconds),
                               send_and_note)
        finally:
            _noted(scope, _route_template(scope), status, started)

    async def _recall(self, scope: Scope, body: bytes) -> Kept | None:
        assert self.remembered is not None
        return await self.remembered.recall(scope, body)


async def _send_kept(kept: Kept, send: Send) -> None:
    """A remembered answer, sent as it was kept."""
    status, headers, content = kept
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": content})


def _noted(scope: Scope, route: str, status: int, started: float) -> None:
    """The answer counted and logged by its route template, status, time and actor."""
    actor = scope.get("studio.actor")
    _counter(scope["method"], route, status).inc()
    logs.request_line(scope["method"], route, status, (time.monotonic() - started) * 1000,
                      getattr(actor, "id", None))


def _accepted_language(scope: Scope) -> str | None:
    """The first language of the request's `Accept-Language` the studio speaks."""
    for key, value in scope["headers"]:
        if key == b"accept-language":
            return i18n.from_accept_language(value.decode("latin-1"))
    return None


def _declared_small(scope: Scope) -> bool:
    """A body that says it is small enough to be read ahead of the handler."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            return value.isdigit() and int(value) <= MAX_BODY_BYTES
    return False


async def _read_ahead(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole body, read before the app runs (None if it did not arrive whole: the client
    went away, or was too slow), and a `receive` that gives the app the same messages, in
    order, and then the same refusal, if reading ended with one."""
    messages: list[Message] = []
    failure: Refusal | None = None
    body: bytes | None = None
    try:
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            if not message.get("more_body", False):
                body = b"".join(part.get("body", b"") for part in messages)
                break
    except Refusal as refusal:
        failure = refusal
    read = iter(messages)

    async def receive_again() -> Message:
        message = next(read, None)
        if message is not None:
            return message
        if failure is not None:
            raise failure
        return await receive()

    return body, receive_again


def _in_time(receive: Receive, seconds: float) -> Receive:
    """`receive`, with the body's arrival timed: a body silent for `seconds` is refused."""
    body_read = False

    async def receive_in_time() -> Message:
        # Only the body is timed. Once it has all arrived, a receive() waits for the client
        # to go away (a streamed download listens so), however long that takes.
        nonlocal body_read
        if body_read:
            return await receive()
        # asyncio.timeout's rule, with one timer and no context manager: a receive() is on
        # every submission's path.
        task = asyncio.current_task()
        assert task is not None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        timer = asyncio.get_running_loop().call_later(seconds, expire)
        try:
            message = await receive()
        except asyncio.CancelledError:
            if expired and task.uncancel() == 0:  # the timer's cancel, and no one else's
                # Raised inside the handler's read, so it answers through the usual refusal.
                raise Refusal("request_timeout", headers={"Connection": "close"}) from None
            raise
        finally:
            timer.cancel()
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

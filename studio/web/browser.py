"""Guards at the edge: unsafe cross-origin requests are refused before any handler runs, and a
request body that stalls is cut off."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from studio.accounts.auth import UNSAFE_METHODS, is_cross_origin
from studio.errors import Refusal
from studio.web.handlers import refusal_response

ORIGIN_HEADERS = frozenset({b"sec-fetch-site", b"origin", b"host"})


class CrossOriginGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in UNSAFE_METHODS:
            headers = {key.decode("latin-1"): value.decode("latin-1")
                       for key, value in scope["headers"] if key in ORIGIN_HEADERS}
            if is_cross_origin(scope["method"], headers):
                request = Request(scope, receive)
                await refusal_response(request, Refusal("cross_origin_request"))(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


class ClientTimeout:
    """A request whose body goes silent for `seconds` is answered 408 and its connection
    closed, so a stalled client cannot hold a handler (and its connection) forever."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        body_read = False

        async def receive_in_time() -> Message:
            # Only the body is timed. Once it has all arrived, a receive() waits for the
            # client to go away (a streamed download listens so), however long that takes.
            nonlocal body_read
            if body_read:
                return await receive()
            try:
                async with asyncio.timeout(self.seconds):
                    message = await receive()
            except TimeoutError:
                # Raised inside the handler's read, so it answers through the usual refusal.
                raise Refusal("request_timeout", headers={"Connection": "close"}) from None
            body_read = not message.get("more_body", False)
            return message

        await self.app(scope, receive_in_time, send)

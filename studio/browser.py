"""Browser-facing guard: unsafe cross-origin requests are refused before any handler runs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from studio.auth import is_cross_origin
from studio.errors import Refusal
from studio.web import refusal_response


class CrossOriginGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {key.decode("latin-1"): value.decode("latin-1")
                       for key, value in scope["headers"]}
            if is_cross_origin(scope["method"], headers):
                request = Request(scope, receive)
                await refusal_response(request, Refusal("cross_origin_request"))(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)

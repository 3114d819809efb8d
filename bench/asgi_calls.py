"""`python -m bench.asgi_calls [N] [--profile]`: CPU microseconds per request of the studio's
hottest requests (a remembered poll, JSON and fragment, and a replayed `POST /leases`), the
whole ASGI app called directly, against bare Starlette routes called the same way. No server,
no socket, no load generator: what is left is the app's own work, so two versions of the code
can be compared on a busy machine. Logging is configured as `studio serve` does (standard
error: send it to /dev/null). `--profile` prints cProfile's view of N polls and N replays."""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from studio import logs

HOST = "127.0.0.1:8000"


async def call(app: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 8000), "state": {},
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def bare_app() -> Starlette:
    async def poll(request: Request) -> JSONResponse:
        return JSONResponse({"status": "open"})

    async def submit(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"status": "open"})

    return Starlette(routes=[Route("/bare", poll, methods=["GET"]),
                             Route("/bare", submit, methods=["POST"])])


async def main(n: int, profile: bool) -> None:
    from app import create_app
    from studio.config import Settings
    from studio.ops.demo import DEMO_PASSWORD

    folder = Path(tempfile.mkdtemp())
    app = create_app(Settings(db_path=folder / "studio.db", secret_key="bench", demo=True))
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                   base_url=f"http://{HOST}",
                                   headers={"Accept": "application/json"})
        signed = await client.post("/login", json={"email": "ada@example.com",
                                                   "password": DEMO_PASSWORD})
        cookie = signed.headers["set-cookie"].split(";")[0]
        issued = [i["id"] for i in (await client.get("/invoices")).json()
                  if i["status"] == "issued"][:1]
        body = {"request_id": "bench-replay", "purpose": "summarize_invoice",
                "invoice_ids": issued, "providers": ["local"], "candidates": 1}
        lease = (await client.post("/leases", json=body)).json()["lease_id"]
        deadline = time.monotonic() + 30
        while (await client.get(f"/leases/{lease}")).json()["status"] != "proposed":
            if time.monotonic() > deadline:
                raise SystemExit("the lease to poll was never proposed")
            await asyncio.sleep(0.05)
        raw = json.dumps(body).encode()
        asked = {"Accept": "application/json", "Cookie": cookie, "Host": HOST}
        posted = {**asked, "Content-Type": "application/json", "Content-Length": str(len(raw))}
        bare = bare_app()
        cases = {
            "bare_get": (bare, "GET", "/bare", asked, b""),
            "poll_json": (app, "GET", f"/leases/{lease}", asked, b""),
            "poll_fragment": (app, "GET", f"/leases/{lease}", {**asked, "HX-Request": "true"},
                              b""),
            "bare_post": (bare, "POST", "/bare", posted, raw),
            "replay": (app, "POST", "/leases", posted, raw),
        }
        for name, case in cases.items():  # warm, and each answers as it should
            for _ in range(200):
                assert await call(*case) in (200, 286), name
        best: dict[str, float] = {}
        for _ in range(9):  # interleaved, so drift on a shared machine hits every case
            for name, case in cases.items():
                started = time.process_time()
                for _ in range(n):
                    await call(*case)
                spent = (time.process_time() - started) / n * 1e6
                best[name] = min(best.get(name, spent), spent)
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for name in ("poll_json", "replay"):
                for _ in range(n):
                    await call(*cases[name])
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    for name, spent in best.items():
        print(f"{name:14s} {spent:7.1f} us/request")


if __name__ == "__main__":
    logs.configure("text")
    count = next((int(arg) for arg in sys.argv[1:] if arg.isdigit()), 3000)
    asyncio.run(main(count, "--profile" in sys.argv))

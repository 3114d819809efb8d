"""The baseline server: bare Starlette routes served by uvicorn with the studio's settings."""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def poll(request: Request) -> JSONResponse:
    return JSONResponse({"status": "open"})


async def submit(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"status": "open"})


async def upload(request: Request) -> JSONResponse:
    """The least an upload can be: stream the body to a file, hash it, fsync it."""
    digest, size = hashlib.sha256(), 0
    fd, name = tempfile.mkstemp(dir=os.environ.get("BENCH_UPLOAD_DIR"))
    with os.fdopen(fd, "wb") as out:
        async for chunk in request.stream():
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    os.unlink(name)
    return JSONResponse({"size": size, "sha256": digest.hexdigest()}, status_code=201)


app = Starlette(routes=[
    Route("/bare", poll, methods=["GET"]),
    Route("/bare", submit, methods=["POST"]),
    Route("/bare-upload", upload, methods=["POST"]),
])


def main() -> None:
    import uvicorn

    from studio.config import from_environment
    from studio.ops.cli import server_settings

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # The same settings as `studio serve` (studio/ops/cli.py), so only the handler differs.
    uvicorn.run(app, host=args.host, port=args.port, **server_settings(from_environment()))


if __name__ == "__main__":
    main()

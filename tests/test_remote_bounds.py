"""A remote model server is bounded: each call in time and bytes, a provider check never holds
a request more than a second, and a studio stops without waiting for the server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from studio.leasing.providers import Providers
from studio.leasing.providers.openai import (
    MOST_COMPLETION_BYTES,
    MOST_REQUEST_BYTES,
    OpenAIProvider,
)
from studio.leasing.providers.seam import ProviderError
from studio.leasing.purposes import PURPOSES
from tests.conftest import (
    ADA,
    lease_body,
    rows,
    running,
    scalar,
    sign_in,
    start_server,
    wait_for_status,
    wait_until,
)
from tests.test_attachments import png
from tests.test_providers import INVOICE, FakeModelServer

pytestmark = pytest.mark.anyio

TRICKLE_S = 0.25


class TricklingServer:
    """A real HTTP server on loopback that answers every request a byte at a time, four a
    second (each read well within any per-read timeout), for as long as the client stays; it
    counts what it was asked and the connections still open."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.open = 0
        self.stopping = threading.Event()
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.trickle()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.trickle()

            def trickle(self) -> None:
                with lock:
                    outer.hits.append(self.path)
                    outer.open += 1
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    while not outer.stopping.wait(TRICKLE_S):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:
                    pass  # the client went away
                finally:
                    with lock:
                        outer.open -= 1
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                """Quiet: the trickle's requests are not the test's output."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> TricklingServer:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def trickling() -> Iterator[TricklingServer]:
    with TricklingServer() as server:
        yield server


@pytest.mark.alone  # asserts a bound of seconds
async def test_a_lease_asked_of_auto_answers_within_a_second_while_the_server_trickles(
        settings, trickling):
    async with running(settings.with_changes(openai_base_url=trickling.url)) as studio:
        client = await studio.signed_in()
        started = time.monotonic()
        async with asyncio.timeout(10):
            made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1],
                                                                providers=["auto"]))
        took = time.monotonic() - started
        assert made.status_code == 201, made.text
        assert took < 1.5, f"POST /leases took {took:.1f} s"
        # Not answered in time: this request's writer is the built-in one.
        assert [row[0] for row in rows(studio.settings.db_path, "SELECT provider FROM tasks"
                                       " WHERE lease_id = ?", made.json()["lease_id"])] \
            == ["local"]
        started = time.monotonic()
        review = await client.get(f"/review?invoice_id={studio.invoice_ids()[0]}",
                                  headers={"Accept": "text/html"})
        assert review.status_code == 200 and time.monotonic() - started < 1.5
        assert trickling.hits == ["/v1/models"]  # the review shared the probe in flight


@pytest.mark.alone  # asserts a bound of seconds
async def test_requests_at_once_share_one_probe_of_the_model_server(settings, trickling):
    async with running(settings.with_changes(openai_base_url=trickling.url)) as studio:
        client = await studio.signed_in()
        invoice_ids = studio.invoice_ids()
        started = time.monotonic()
        async with asyncio.timeout(10):
            made = await asyncio.gather(*[
                client.post("/leases", json=lease_body(invoice_ids[n:n + 1], f"req-{n}",
                                                       providers=["auto"]))
                for n in range(3)])
        assert [reply.status_code for reply in made] == [201] * 3, [r.text for r in made]
        assert time.monotonic() - started < 2.5
        assert trickling.hits == ["/v1/models"]
        assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases"
                                               " WHERE id IN (?, ?, ?)",
                      *[reply.json()["lease_id"] for reply in made]) == 3


class LateModels(FakeModelServer):
    """Lists its models after a second and a half."""

    async def models(self, request: Request) -> JSONResponse:
        await asyncio.sleep(1.5)
        return await super().models(request)


class StreamedChat(FakeModelServer):
    """Streams an answer longer than the cap, without saying its length beforehand."""

    async def chat(self, request: Request) -> Response:  # type: ignore[override]
        padding = b"x" * 65536

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"choices": [{"message": {"content": "'
            for _ in range(MOST_COMPLETION_BYTES // len(padding) + 1):
                yield padding
            yield b'"}}]}'
        return StreamingResponse(chunks(), media_type="application/json")


async def test_a_probe_answered_late_tells_the_requests_after_it(settings):
    """The probe goes on in the background: once it is answered, `auto` is the remote."""
    with LateModels() as slow:
        providers = Providers(settings.with_changes(openai_base_url=slow.url))
        try:
            assert await providers.resolve(["auto"]) == ["local"]
            await asyncio.sleep(1.0)
            assert await providers.resolve(["auto"]) == ["openai"]
        finally:
            await providers.close()


@pytest.mark.alone  # asserts a bound of seconds
async def test_a_completion_trickled_past_its_time_fails_within_it(trickling):
    provider = OpenAIProvider(trickling.url, "tiny", "")
    started = time.monotonic()
    with pytest.raises(ProviderError, match="within the lease's time"):
        async with asyncio.timeout(10):
            await provider.complete(PURPOSES["summarize_invoice"], INVOICE, "a", candidate=1,
                                    timeout=1.0)
    assert time.monotonic() - started < 2.0


async def test_a_completion_larger_than_the_cap_fails_the_task_not_the_server(settings):
    with FakeModelServer() as big:
        big.answer = lambda body: "x" * (MOST_COMPLETION_BYTES + 1)
        async with running(settings.with_changes(openai_base_url=big.url)) as studio:
            client = await studio.signed_in()
            made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1],
                                                                providers=["openai"]))
            assert made.status_code == 201, made.text
            lease = await wait_for_status(client, made.json()["lease_id"], "failed")
            assert lease["invoices"][0]["candidates"] == []
            errors = rows(studio.settings.db_path, "SELECT error FROM tasks WHERE lease_id = ?",
                          lease["lease_id"])
            assert errors and all(f"more than {MOST_COMPLETION_BYTES} bytes" in row[0]
                                  for row in errors), errors
            assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM proposals"
                                                   " WHERE lease_id = ?", lease["lease_id"]) == 0
            assert (await client.get("/healthz")).status_code == 200


async def test_an_answer_streamed_past_the_cap_is_cut_off(settings):
    """No length said beforehand: the studio stops reading once it holds more than the cap."""
    with StreamedChat() as big:
        provider = OpenAIProvider(big.url, "tiny", "")
        with pytest.raises(ProviderError, match=f"ran past {MOST_COMPLETION_BYTES} bytes"):
            await provider.complete(PURPOSES["summarize_invoice"], INVOICE, "a", candidate=1,
                                    timeout=10.0)


@pytest.mark.alone  # asserts a bound of seconds
async def test_shutdown_does_not_wait_for_a_probe_in_flight(settings, trickling):
    async with running(settings.with_changes(openai_base_url=trickling.url)) as studio:
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1],
                                                            providers=["auto"]))
        assert made.status_code == 201, made.text
        assert trickling.open == 1  # the probe goes on in the background
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3.0
    # Nothing of the studio's holds the model server's connection any longer.
    deadline = time.monotonic() + 3.0
    while trickling.open and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert trickling.open == 0
    assert trickling.hits == ["/v1/models"]


@pytest.mark.alone  # asserts a bound of seconds
async def test_a_model_servers_probe_is_bounded_in_all_not_per_read(trickling):
    """httpx's own timeout is per read; a byte every quarter second would pass it for ever."""
    provider = OpenAIProvider(trickling.url, "tiny", "")
    started = time.monotonic()
    async with asyncio.timeout(10):
        assert await provider.answers(1.0) is False
    assert time.monotonic() - started < 2.0


@pytest.mark.alone  # asserts a bound of seconds
def test_a_stopped_studio_serve_ends_in_seconds_while_the_model_server_trickles(
        tmp_path, trickling):
    """SIGTERM while a request waits on a provider check: uvicorn lets the request finish
    (within a second) and the lifespan stops the probe, instead of waiting on the server."""
    server = start_server(tmp_path / "studio.db", "--demo", STUDIO_OPENAI_BASE_URL=trickling.url)
    client = None
    try:
        client = sign_in(server.url)
        invoice_id = rows(tmp_path / "studio.db", "SELECT invoices.id FROM invoices JOIN actors"
                          " ON actors.id = owner_id WHERE email = ? LIMIT 1", ADA)[0][0]
        replies: list[int] = []
        asking = threading.Thread(target=lambda: replies.append(client.post(
            "/leases", json=lease_body([invoice_id], providers=["auto"])).status_code))
        asking.start()
        wait_until(lambda: trickling.hits, 10, "the provider check to start")
        stopping = time.monotonic()
        server.process.terminate()
        server.process.wait(15)
        assert time.monotonic() - stopping < 5.0, server.log()
        asking.join(10)
        assert replies == [201], server.log()
        wait_until(lambda: trickling.open == 0, 3, "the probe's connection to close")
    finally:
        if client is not None:
            client.close()  # its socket is closed now, not left to a later test's collection
        server.stop(kill=True)


async def test_a_receipt_past_what_one_request_may_carry_is_never_sent():
    with FakeModelServer() as server:
        provider = OpenAIProvider(server.url, "tiny", "")
        receipt = {"content_type": "image/png", "filename": "huge.png",
                   "data": png(1) + b"\0" * (MOST_REQUEST_BYTES * 3 // 4)}
        with pytest.raises(ProviderError, match="more than one request to the model may carry"):
            await provider.complete(PURPOSES["read_receipt"], {**INVOICE, "receipts": [receipt]},
                                    "a", candidate=1, timeout=10.0)
        assert server.requests == []

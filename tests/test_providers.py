"""The model seam: local is deterministic, openai speaks chat completions, auto probes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from studio.leasing.providers import Providers
from studio.leasing.providers.local import LocalProvider
from studio.leasing.providers.openai import OpenAIProvider
from studio.leasing.providers.seam import ProviderError
from studio.leasing.purposes import PURPOSES
from tests.conftest import free_port, lease_body, running, wait_for_status

KEY = "sk-test-do-not-leak"
INVOICE = {
    "id": "6f1c2a40-0b0e-4a7d-9c2e-1b6d0a9e4c11", "number": "INV-7", "customer": "Acme",
    "currency": "EUR", "total": "10.00", "due_date": "2027-01-01", "summary": "",
    "line_items": [{"description": "Widget", "quantity": 2, "unit_price": "5.00"}],
}


class FakeModelServer:
    """A real OpenAI-compatible HTTP server on loopback that records what it was sent."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delay_s = delay_s
        # What it answers, from the request's body; by default a plain summary.
        self.answer = lambda body: f"Model summary at temperature {body['temperature']}"
        app = Starlette(routes=[
            Route("/v1/models", self.models),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ])
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, port=self.port, log_level="error",
                                                    lifespan="off"))
        self.url = f"http://127.0.0.1:{self.port}/v1"

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"data": [{"id": "tiny"}]})

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append({"headers": dict(request.headers), "body": body})
        await asyncio.sleep(self.delay_s)
        text = self.answer(body)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": text}}]})

    def __enter__(self) -> FakeModelServer:
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.mark.anyio
async def test_local_candidates_differ_and_repeat_exactly():
    local = LocalProvider()
    purpose = PURPOSES["summarize_invoice"]
    texts = [await local.complete(purpose, INVOICE, "a", candidate=n, timeout=5)
             for n in range(1, 6)]
    assert len(set(texts)) == 5
    assert texts[0] == await local.complete(purpose, INVOICE, "a", candidate=1, timeout=5)
    assert all("Acme" in text for text in texts)


@pytest.mark.anyio
async def test_openai_sends_the_invoice_and_keeps_the_key_in_the_header(model_server):
    provider = OpenAIProvider(model_server.url, "tiny", KEY)
    text = await provider.complete(PURPOSES["summarize_invoice"], INVOICE, "actor-1",
                                   candidate=2, timeout=5)
    assert text == "Model summary at temperature 0.6"
    sent = model_server.requests[0]
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    prompt = str(sent["body"]["messages"])
    assert "INV-7" in prompt and "Widget" in prompt
    assert KEY not in str(sent["body"])


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@pytest.mark.anyio
async def test_openai_timeout_is_the_time_left_not_more():
    with FakeModelServer(delay_s=2.0) as slow:
        provider = OpenAIProvider(slow.url, "tiny", "")
        started = time.monotonic()
        with pytest.raises(ProviderError):
            await provider.complete(PURPOSES["summarize_invoice"], INVOICE, "a",
                                    candidate=1, timeout=0.3)
        assert time.monotonic() - started < 1.5


@pytest.mark.anyio
async def test_auto_resolves_to_a_remote_that_answers_else_local(settings, model_server):
    answering = Providers(settings.with_changes(openai_base_url=model_server.url))
    silent = Providers(settings.with_changes(openai_base_url=f"http://127.0.0.1:{free_port()}"))
    unset = Providers(settings)
    assert await answering.resolve(["auto"]) == ["openai"]
    assert await silent.resolve(["auto"]) == ["local"]
    assert await unset.resolve(["auto", "local"]) == ["local"]
    assert unset.names() == ["auto", "local"]


@pytest.mark.anyio
async def test_a_lease_through_openai_never_puts_the_key_or_cookie_in_a_page_or_prompt(
        settings, model_server):
    configured = settings.with_changes(openai_base_url=model_server.url,
                                       openai_api_key=KEY)
    async with running(configured) as studio:
        client = await studio.signed_in()
        cookie = client.cookies.get("studio_session")
        made = await client.post("/leases", json=lease_body(studio.invoice_ids()[:1],
                                                            providers=["openai"], candidates=2))
        lease = await wait_for_status(client, made.json()["lease_id"], "proposed")
        assert [c["provider"] for c in lease["invoices"][0]["candidates"]] == ["openai"] * 2
        page = await client.get(f"/leases/{lease['lease_id']}", headers={"Accept": "text/html"})
        review = await client.get(f"/review?invoice_id={studio.invoice_ids()[0]}"
                                  "&provider=openai", headers={"Accept": "text/html"})
        for text in (page.text, review.text, str(lease)):
            assert KEY not in text and cookie not in text
        for sent in model_server.requests:
            assert KEY not in str(sent["body"]) and cookie not in str(sent["body"])


@pytest.mark.anyio
async def test_a_malformed_remote_setting_makes_auto_fall_back_to_local(settings):
    for base_url, key in [("http://[::1", ""), ("http://127.0.0.1:9/v1", "caf\u00e9\u2019")]:
        providers = Providers(settings.with_changes(openai_base_url=base_url,
                                                    openai_api_key=key))
        assert await providers.resolve(["auto"]) == ["local"]

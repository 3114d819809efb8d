"""Any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp."""

from __future__ import annotations

from typing import Any

import httpx

from studio.providers.seam import ProviderError
from studio.purposes import Purpose

# Candidates differ by temperature, so asking for three gives three readings.
TEMPERATURES = [0.2, 0.6, 0.9, 1.1, 1.3]


class OpenAIProvider:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str) -> None:
        self.base_url = base_url
        self.model = model
        # The key lives only in this header, in the server's memory: never in a page or prompt.
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def answers(self, timeout: float) -> bool:
        """A short probe: does the server list its models?"""
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                reply = await client.get(f"{self.base_url}/models", headers=self._headers)
            return reply.status_code == 200
        except Exception:  # a bad URL or key is "does not answer", not a failed submission
            return False

    async def complete(
        self, purpose: Purpose, invoice: dict[str, Any], actor_id: str, *,
        candidate: int, timeout: float,
    ) -> str:
        if timeout <= 0:
            raise ProviderError("no time left on the lease")
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": "You write short, factual invoice summaries."},
                {"role": "user", "content": purpose.prompt(invoice)},
            ],
            "temperature": TEMPERATURES[(candidate - 1) % len(TEMPERATURES)],
        }
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                reply = await client.post(
                    f"{self.base_url}/chat/completions", json=body, headers=self._headers
                )
            reply.raise_for_status()
            text = reply.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            raise ProviderError(f"openai: {type(error).__name__}") from error
        if not isinstance(text, str) or not text.strip():
            raise ProviderError("openai: empty completion")
        return text.strip()

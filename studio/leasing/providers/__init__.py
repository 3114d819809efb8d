"""The model seam: `complete(purpose, invoice, actor_id) -> proposal text`.

Handlers and the worker only see `Provider`; no vendor SDK is imported anywhere else.
"""

from __future__ import annotations

import time

from studio.config import Settings
from studio.leasing.providers.local import LocalProvider
from studio.leasing.providers.openai import OpenAIProvider
from studio.leasing.providers.seam import Provider, ProviderError

AUTO = "auto"
PROBE_SECONDS = 2.0
PROBE_MEMORY_SECONDS = 30.0


class Providers:
    """The providers this studio knows, and how `auto` resolves among them."""

    def __init__(self, settings: Settings, extra: dict[str, Provider] | None = None) -> None:
        self.known: dict[str, Provider] = {"local": LocalProvider(settings.provider_delay_s)}
        if settings.openai_base_url:
            self.known["openai"] = OpenAIProvider(
                settings.openai_base_url, settings.openai_model, settings.openai_api_key
            )
        self.known.update(extra or {})
        self._probe: tuple[float, str] | None = None

    def names(self) -> list[str]:
        """Every name a request may ask for, `auto` included."""
        return [AUTO, *sorted(self.known)]

    def get(self, name: str) -> Provider:
        return self.known[name]

    async def resolve(self, asked: list[str]) -> list[str]:
        """Replace `auto` by a concrete provider; network work, so never inside a transaction."""
        resolved: list[str] = []
        for name in asked:
            name = await self._auto() if name == AUTO else name
            if name not in resolved:
                resolved.append(name)
        return sorted(resolved)

    async def _auto(self) -> str:
        remote = self.known.get("openai")
        if not isinstance(remote, OpenAIProvider):
            return "local"
        now = time.monotonic()
        if self._probe and now - self._probe[0] < PROBE_MEMORY_SECONDS:
            return self._probe[1]
        answer = "openai" if await remote.answers(PROBE_SECONDS) else "local"
        self._probe = (now, answer)
        return answer


__all__ = ["AUTO", "Provider", "ProviderError", "Providers"]

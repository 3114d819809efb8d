"""The model seam: `complete(purpose, invoice, actor_id) -> proposal text`.

Handlers and the worker only see `Provider`; no vendor SDK is imported anywhere else.
"""

from __future__ import annotations

import asyncio
import time

from studio.config import Settings
from studio.leasing.providers.local import LocalProvider
from studio.leasing.providers.openai import OpenAIProvider
from studio.leasing.providers.seam import Provider, ProviderError

AUTO = "auto"
# The probe's whole time, in the background; a request waits for it at most PROBE_WAIT_S.
PROBE_SECONDS = 5.0
PROBE_WAIT_S = 1.0
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
        self._probing: asyncio.Task[str] | None = None  # the one probe in flight, if any

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
        """The remote provider if it answered its probe lately, else `local`. No request waits
        for a probe more than PROBE_WAIT_S: one probe runs at a time, shared by every request
        that asks meanwhile; one not answered in time is `local` for them, and the probe goes
        on in the background to tell the requests after."""
        remote = self.known.get("openai")
        if not isinstance(remote, OpenAIProvider):
            return "local"
        if self._probe and time.monotonic() - self._probe[0] < PROBE_MEMORY_SECONDS:
            return self._probe[1]
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(self._probed(remote))
        try:
            async with asyncio.timeout(PROBE_WAIT_S):
                return await asyncio.shield(self._probing)
        except TimeoutError:
            return "local"

    async def _probed(self, remote: OpenAIProvider) -> str:
        answer = "openai" if await remote.answers(PROBE_SECONDS) else "local"
        self._probe = (time.monotonic(), answer)
        return answer

    async def close(self) -> None:
        """At shutdown: a probe in flight is stopped, never waited for."""
        if self._probing is not None and not self._probing.done():
            self._probing.cancel()
            await asyncio.gather(self._probing, return_exceptions=True)


__all__ = ["AUTO", "Provider", "ProviderError", "Providers"]

"""What every provider is: one call that turns an invoice into proposal text."""

from __future__ import annotations

from typing import Any, Protocol

from studio.purposes import Purpose


class Provider(Protocol):
    name: str

    async def complete(
        self, purpose: Purpose, invoice: dict[str, Any], actor_id: str, *,
        candidate: int, timeout: float,
    ) -> str: ...


class ProviderError(Exception):
    """A provider failed to produce a proposal; the worker may retry within the deadline."""

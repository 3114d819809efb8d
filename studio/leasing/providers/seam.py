"""What every provider is: one call that turns an invoice into a proposal (the purpose's
schema; a plain summary may come as text)."""

from __future__ import annotations

from typing import Any, Protocol

from studio.leasing.purpose import Purpose


class Provider(Protocol):
    name: str

    async def complete(
        self, purpose: Purpose, invoice: dict[str, Any], actor_id: str, *,
        candidate: int, timeout: float,
    ) -> str | dict[str, Any]: ...


class ProviderError(Exception):
    """A provider failed to produce a proposal; the worker may retry within the deadline."""


class Unreadable(ProviderError):
    """What the provider was given cannot be read and never will be (a PDF locked with a
    password, an image larger than any receipt): the task fails at once, not retried, its
    message a sentence the request's page shows."""

"""Failed sign-ins, counted per client address, per email, and per (email, address) pair.

Held in this process's memory: each `studio serve` process counts on its own, and a restart
forgets. That is enough to make guessing slow; it is not a ledger.

How the three limits combine, so a flood cannot lock an account's owner out:
- the pair limit is the strict one: one address guessing one email is stopped first;
- the address limit stops one address trying many emails;
- the email limit stops many addresses trying one email, but only for addresses that have
  themselves failed recently and have never signed in to that email before: the owner,
  from a clean address or one they signed in from, still gets through.
A correct password clears its pair and marks the pair as known.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from studio.errors import Refusal

# Keys are counted in a bounded table: a flood of made-up emails cannot grow it without end.
MAX_KEYS = 50_000


@dataclass(frozen=True)
class Limits:
    window_seconds: float = 900.0
    per_pair: int = 5
    per_address: int = 30
    per_email: int = 30


class FailureLog:
    """Recent failure times per key, forgetting keys least recently failed past MAX_KEYS."""

    def __init__(self, window: float, max_keys: int = MAX_KEYS) -> None:
        self.window = window
        self.max_keys = max_keys
        self._times: OrderedDict[object, deque[float]] = OrderedDict()

    def recent(self, key: object, now: float) -> deque[float]:
        times = self._times.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._times[key]
        return times

    def add(self, key: object, now: float, most: int) -> None:
        times = self._times.setdefault(key, deque(maxlen=most))
        times.append(now)
        self._times.move_to_end(key)
        while len(self._times) > self.max_keys:
            self._times.popitem(last=False)

    def forget(self, key: object) -> None:
        self._times.pop(key, None)

    def wait(self, key: object, now: float, limit: int) -> float:
        """Seconds until `key` is under `limit` again; 0 when it already is."""
        times = self.recent(key, now)
        if len(times) < limit:
            return 0.0
        return times[len(times) - limit] + self.window - now


class SignInThrottle:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.failures = FailureLog(limits.window_seconds)
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()

    def check(self, email: str, address: str, now: float | None = None) -> None:
        """Refuse with 429 `too_many_attempts` and a Retry-After while a limit is reached."""
        now = time.time() if now is None else now
        limits = self.limits
        waits = [
            self.failures.wait(("pair", email, address), now, limits.per_pair),
            self.failures.wait(("address", address), now, limits.per_address),
        ]
        if (email, address) not in self._known and self.failures.recent(("address", address), now):
            waits.append(self.failures.wait(("email", email), now, limits.per_email))
        wait = max(waits)
        if wait > 0:
            raise Refusal("too_many_attempts", headers={"Retry-After": str(math.ceil(wait))})

    def failed(self, email: str, address: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        limits = self.limits
        self.failures.add(("pair", email, address), now, limits.per_pair)
        self.failures.add(("address", address), now, limits.per_address)
        self.failures.add(("email", email), now, limits.per_email)

    def succeeded(self, email: str, address: str) -> None:
        self.failures.forget(("pair", email, address))
        self._known[(email, address)] = None
        self._known.move_to_end((email, address))
        while len(self._known) > MAX_KEYS:
            self._known.popitem(last=False)

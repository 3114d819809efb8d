"""An address's sign-in count is shared by every account behind it (one proxy, one NAT), so
its lock is waited for only briefly (a host paused inside a sign-in must not hold up every
account from its address: tests/test_host_fails_alone.py); under an ordinary flood the wait is
long enough that the address's limit still holds exactly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from studio.accounts import auth
from tests.conftest import rows, running
from tests.test_signin import CountedCheck, attempt

pytestmark = pytest.mark.anyio


async def test_one_address_trying_many_emails_at_once_is_checked_at_most_its_limit(
        settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    check = CountedCheck()
    monkeypatch.setattr(auth, "_verify_password", check)
    per_address = 8
    async with running(settings.with_changes(signin_failures_per_address=per_address)) as studio:
        answers: list[int] = []

        async def one(n: int) -> None:
            answers.append((await attempt(studio, "10.9.0.1", f"guess{n}@example.com",
                                          "x")).status_code)

        async with anyio.create_task_group() as group:
            for n in range(40):
                group.start_soon(one, n)
        assert check.checks == per_address
        assert sorted(answers) == [401] * per_address + [429] * (40 - per_address)
        assert [tuple(row) for row in rows(
            studio.settings.db_path, "SELECT outcome, COUNT(*) FROM sign_in_attempts"
            " WHERE address = '10.9.0.1' GROUP BY outcome")] == [("failed", per_address)]

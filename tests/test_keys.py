"""Key rotation: STUDIO_SECRET_KEY lists keys newest first; an old key's cookies live until
the key is removed from the list."""

from __future__ import annotations

import pytest

from studio.accounts.auth import SESSION_COOKIE
from tests.conftest import ADA, running, scalar

pytestmark = pytest.mark.anyio


async def test_a_cookie_signed_with_an_old_key_works_while_the_key_is_listed(settings):
    async with running(settings.with_changes(secret_key="old-key")) as studio:
        client = await studio.signed_in(ADA)
        old_cookie = client.cookies[SESSION_COOKIE]
        await client.aclose()

    async with running(settings.with_changes(secret_key="new-key, old-key")) as studio:
        async with studio.client() as client:
            client.cookies.set(SESSION_COOKIE, old_cookie)
            assert (await client.get("/invoices")).status_code == 200
        fresh = await studio.signed_in(ADA)
        new_cookie = fresh.cookies[SESSION_COOKIE]
        await fresh.aclose()
    assert new_cookie != old_cookie

    async with running(settings.with_changes(secret_key="new-key")) as studio:
        async with studio.client() as client:
            client.cookies.set(SESSION_COOKIE, old_cookie)
            refused = await client.get("/invoices")
            assert refused.status_code == 401
            assert refused.json()["detail"] == "not_signed_in"
            client.cookies.set(SESSION_COOKIE, new_cookie)
            assert (await client.get("/invoices")).status_code == 200
    # The old session row is still there: only its key was withdrawn.
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM sessions") == 2

"""The settings page: the seller profile that issuing freezes into each invoice."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from studio import profiles
from studio.web import PRIVATE, answer, answer_kind, current_actor, read_body, studio_of


async def settings_page(request: Request) -> Response:
    actor = await current_actor(request)
    profile = await profiles.get_profile(studio_of(request).db, actor)
    return answer(request, profile, template="settings.html",
                  context={"profile": profile, "saved": False})


async def save_settings(request: Request) -> Response:
    body = await read_body(request)
    actor = await current_actor(request)
    profile = await profiles.save_profile(studio_of(request).db, actor,
                                          profiles.parse_profile(body))
    if answer_kind(request) == "json":
        return JSONResponse(profile, headers=PRIVATE)
    return answer(request, profile, template="settings.html",
                  context={"profile": profile, "saved": True})

"""The settings page: the seller profile that issuing freezes into each invoice, and its logo."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from studio import i18n
from studio.accounts import languages
from studio.billing import identifiers, profiles
from studio.errors import Refusal
from studio.web.negotiation import (
    MAX_BODY_BYTES,
    PRIVATE,
    answer,
    answer_kind,
    current_actor,
    read_body,
    studio_of,
)
from studio.web.views.attachments import SERVED

# What a settings form may hold besides its logo: the text fields and the boundaries.
MAX_FORM_BYTES = profiles.MAX_LOGO_BYTES + MAX_BODY_BYTES


def too_large() -> str:
    return i18n.gettext("A logo may be at most %(kb)s KB; save a smaller image and choose it"
                        " again.") % {"kb": profiles.MAX_LOGO_BYTES // 1024}


def _page(request: Request, profile: dict[str, Any], saved: bool) -> Response:
    return answer(request, profile, template="settings.html",
                  context={"profile": profile, "saved": saved,
                           "countries": identifiers.countries(),
                           "languages": {code: i18n.NAMES[code] for code in i18n.PAGE_LANGUAGES},
                           "max_logo_kb": profiles.MAX_LOGO_BYTES // 1024})


async def settings_page(request: Request) -> Response:
    actor = await current_actor(request)
    profile = await profiles.get_profile(studio_of(request).db, actor)
    return _page(request, {**profile, "language": actor.language}, saved=False)


async def _multipart(request: Request) -> tuple[dict[str, Any], bytes]:
    """A multipart settings form, read whole but never past its limit: its fields, and the
    logo's bytes (empty when none was chosen)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise Refusal("upload_too_large", too_large())
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM_BYTES:
            raise Refusal("upload_too_large", too_large())

    async def once() -> AsyncIterator[bytes]:
        yield raw

    parser = MultiPartParser(request.headers, once(), max_files=1, max_fields=32,
                             max_part_size=MAX_BODY_BYTES)
    try:
        form = await parser.parse()
    except MultiPartException:
        raise Refusal("invalid_body", i18n.gettext(
            "The settings form could not be read; reload the page and try again.")) from None
    fields: dict[str, Any] = {}
    content = b""
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            if name == "logo":
                content = await value.read()
            await value.close()
        else:
            fields[name] = value
    return fields, content


async def save_settings(request: Request) -> Response:
    """JSON or a form of fields; a multipart form may carry a new logo. `remove_logo` takes
    the logo off the invoices issued from now on."""
    if request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        body, content = await _multipart(request)
    else:
        body, content = await read_body(request), b""
    actor = await current_actor(request)
    profile = profiles.parse_profile(body)
    # Left out, the language stays as chosen; null or empty follows the browser again.
    language = languages.parse_language(body["language"]) if "language" in body \
        else actor.language
    logo = await asyncio.to_thread(profiles.parse_logo, content) if content else None
    remove = body.get("remove_logo") in (True, "1", "true", "on")
    saved = await profiles.save_profile(studio_of(request).db, actor, profile, logo=logo,
                                        remove_logo=remove and logo is None, language=language)
    if language != actor.language:
        # The answer already speaks the new choice (or the browser's, when it follows it).
        i18n.speak(language or i18n.from_accept_language(
            request.headers.get("accept-language")) or i18n.DEFAULT)
    saved = {**saved, "language": language}
    if answer_kind(request) == "json":
        return JSONResponse(saved, headers=PRIVATE)
    return _page(request, saved, saved=True)


async def logo(request: Request) -> Response:
    """The seller's current logo, for the settings page to show."""
    actor = await current_actor(request)
    found = await profiles.current_logo(studio_of(request).db, actor)
    if found is None:
        raise Refusal("not_found")
    content_type, content = found
    return Response(content, media_type=content_type, headers=SERVED)

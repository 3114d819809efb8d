"""Attachment handlers: upload by client key, download to the owner only, delete."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from urllib.parse import quote

from PIL import Image, ImageOps
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from studio import counters
from studio.billing import attachments, invoices
from studio.errors import Refusal
from studio.store import bindings
from studio.store.db import Database
from studio.store.stores import Store
from studio.store.uploads import ENVELOPE_BYTES, read_upload
from studio.web.negotiation import (
    PRIVATE,
    answer_kind,
    current_actor,
    path_id,
    read_body,
    render,
    studio_of,
)

log = logging.getLogger("studio.attachments")

# Served bytes never run: no sniffing, no scripts, no framing, not kept by any cache.
SERVED = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store",
          "Content-Security-Policy": "default-src 'none'; sandbox", "Vary": "Cookie"}

THUMB_PX = 128  # twice the 64 px the list shows, for sharp screens
THUMBS_KEPT = 256  # about 1 MB of thumbnails remembered per process
# Past this many pixels an image is no receipt a thumbnail can be drawn of in good time.
THUMB_MAX_PIXELS = 60_000_000
# What a photo that cannot be drawn (damaged, cut off, too large) shows in its place.
NO_THUMBNAIL = (b'<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" '
                b'viewBox="0 0 64 64"><rect x="6" y="10" width="52" height="44" rx="4" '
                b'fill="#eee" stroke="#999" stroke-width="2"/><path d="M12 48l14-16 10 11 6-6 '
                b'10 11z" fill="#bbb"/><circle cx="44" cy="22" r="5" fill="#bbb"/></svg>',
                "image/svg+xml")
_thumbnails: dict[str, tuple[bytes, str]] = {}
# One thumbnail drawn at a time: a large PNG decodes whole (up to THUMB_MAX_PIXELS, ~240 MB),
# so several tabs opening new ones never hold several at once.
_drawing = threading.Lock()


def store_of(request: Request) -> Store:
    """The store the app chose once, at start, from its settings."""
    return request.app.state.attachment_store


def disposition(kind: str, filename: str) -> str:
    """RFC 6266: a plain ASCII fallback and the exact name percent-encoded in `filename*`,
    so no quote, newline or non-ASCII character can break the header."""
    fallback = "".join(ch if ch.isascii() and ch.isprintable() and ch not in '"\\;' else "_"
                       for ch in filename) or "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


async def upload(request: Request) -> Response:
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    actor = await current_actor(request)
    studio = studio_of(request)
    settings = studio.settings
    quota = attachments.Quota(settings.max_storage_per_actor,
                              settings.max_attachments_per_invoice)
    # An issued invoice still answers a resent upload that attached before the issue: the
    # same request twice is one request. Only a new one is refused (below, and in `bind`).
    invoice = await studio.db.read(invoices.owned, actor.id, invoice_id)
    declared = request.headers.get("content-length", "")
    at_least = max(0, int(declared) - ENVELOPE_BYTES) \
        if declared.isascii() and declared.isdigit() else 0

    async def room_before_file(fields: dict[str, str]) -> None:
        # Only with its key known can a replay be told apart; otherwise `bind` judges alone.
        if "client_key" in fields:
            await studio.db.read(attachments.room_for, actor.id, invoice_id,
                                 fields["client_key"], quota, at_least)

    store = store_of(request).ensure()  # owner-only before the first file lands in it
    received = await read_upload(request, lambda: store.begin(studio.db, actor.id),
                                 settings.max_upload_bytes, room_before_file)
    try:
        client_key = bindings.parse_request_id(received.fields, "client_key",
                                               "invalid_client_key")
        listed = await studio.db.read(attachments.look_up, actor.id, invoice_id, client_key,
                                      received.sha256)
        created = False
        if listed is None:
            attachments.refuse_if_issued(invoice)  # `bind` checks again under the lock
            content_type = attachments.sniff(received.head)
            try:
                await asyncio.to_thread(store.place, received, actor.id)
                listed, created = await studio.db.write(
                    attachments.bind, actor.id, invoice_id, client_key, received,
                    content_type, store, quota)
            except Exception:  # refused, issued meanwhile, a full disk: leave no file behind
                await _leave_no_file(studio.db, store, actor.id, received.sha256)
                raise
    finally:
        await received.discard()
    if created:
        counters.uploads_total.inc()
    if answer_kind(request) == "fragment":
        return await attachment_list(request)
    return JSONResponse(listed, status_code=201 if created else 200, headers=PRIVATE)


async def _leave_no_file(db: Database, store: Store, actor_id: str, sha256: str) -> None:
    try:
        await db.write(attachments.unnamed, store, [(actor_id, sha256)])
    except Exception:  # the sweep removes it later; the first failure is the answer
        log.warning("an unbound upload's file stays until the sweep", exc_info=True)


async def attachment_list(request: Request) -> Response:
    """The attachments of one invoice, as the invoice page lists them."""
    return await _list_of(request, path_id(request, "invoice_id", "invoice_not_found"))


async def _list_of(request: Request, invoice_id: str) -> Response:
    actor = await current_actor(request)
    invoice = await invoices.get_invoice(studio_of(request).db, actor, invoice_id)
    return render(request, "_attachments.html", {"invoice": invoice, "oob": True})


async def _owned(request: Request) -> dict:
    attachment_id = path_id(request, "attachment_id", "attachment_not_found")
    actor = await current_actor(request)
    found = await studio_of(request).db.read(attachments.owned, actor.id, attachment_id)
    if found is None:
        raise Refusal("attachment_not_found")
    return found


async def _served(request: Request, found: dict, kind: str) -> Response:
    return await store_of(request).response(
        studio_of(request).db, found["owner_id"], found["sha256"], found["content_type"],
        {**SERVED, "Content-Disposition": disposition(kind, found["filename"])})


async def download(request: Request) -> Response:
    return await _served(request, await _owned(request), "attachment")


async def preview(request: Request) -> Response:
    """A raster image shown small on the invoice page: a thumbnail of at most THUMB_PX a
    side, made once per stored file, or a plain icon for one that cannot be drawn."""
    found = await _owned(request)
    if found["content_type"] not in attachments.PREVIEWABLE:
        raise Refusal("attachment_not_found")
    # The bytes under a SHA-256 never change, so neither does their thumbnail.
    etag = f'"thumb{THUMB_PX}-{found["sha256"]}"'
    headers = {**SERVED, "Cache-Control": "private, max-age=86400", "ETag": etag,
               "Content-Disposition": disposition("inline", found["filename"])}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    made = _thumbnails.get(found["sha256"])
    if made is None:
        data = await store_of(request).read(studio_of(request).db, found["owner_id"],
                                            found["sha256"])
        made = await asyncio.to_thread(drawn_alone, data)
        _thumbnails[found["sha256"]] = made
        while len(_thumbnails) > THUMBS_KEPT:
            _thumbnails.pop(next(iter(_thumbnails)))
    return Response(made[0], media_type=made[1], headers=headers)


def drawn_alone(data: bytes) -> tuple[bytes, str]:
    with _drawing:
        return thumbnail(data)


def thumbnail(data: bytes) -> tuple[bytes, str]:
    """A WebP of at most THUMB_PX a side, the photo turned as the camera held it; the icon
    when the bytes cannot be drawn."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft("RGB", (THUMB_PX, THUMB_PX))  # a JPEG decodes at 1/2..1/8 scale
            if image.width * image.height > THUMB_MAX_PIXELS:
                return NO_THUMBNAIL
            small = ImageOps.exif_transpose(image)
            small.thumbnail((THUMB_PX, THUMB_PX))
            if small.mode not in ("RGB", "RGBA"):
                small = small.convert("RGBA")
            out = io.BytesIO()
            small.save(out, "WEBP", quality=80)
            return out.getvalue(), "image/webp"
    except Exception:  # any decoder's failure on any bytes: the icon, never a 500
        return NO_THUMBNAIL


async def delete(request: Request) -> Response:
    await read_body(request)
    found = await _owned(request)
    await studio_of(request).db.write(attachments.remove, found["owner_id"],
                                      found["attachment_id"], store_of(request))
    if answer_kind(request) == "fragment":
        invoice_id = found["invoice_id"]
        return await _list_of(request, invoice_id)
    return JSONResponse({"status": "deleted", "attachment_id": found["attachment_id"]},
                        headers=PRIVATE)

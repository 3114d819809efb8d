"""Share-link handlers: the owner makes and revokes links; anyone holding one sees that issued
invoice and its PDF, without an account, and nothing else."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from studio import i18n
from studio.billing import documents, shares
from studio.web.negotiation import (
    PRIVATE,
    answer_kind,
    current_actor,
    path_id,
    read_body,
    render,
    studio_of,
)

# A shared page belongs to whoever holds the link: no search engine lists it, no page it links
# to learns its address, no cache keeps it.
SHARED = {"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer",
          "Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff"}


def public_base(request: Request) -> str:
    """The address people outside reach the studio at: STUDIO_PUBLIC_URL when set (behind a
    proxy, or a send queued through the API on localhost), else the one this request came to."""
    configured = studio_of(request).settings.public_url
    if configured:
        return configured
    try:
        return str(request.base_url)
    except ValueError:  # an unreadable Host header: the link is relative, still readable
        return "/"


async def _card(request: Request, invoice_id: str, actor_id: str, status: int = 200,
                made: dict[str, Any] | None = None) -> Response:
    links = await shares.links_of(studio_of(request).db, actor_id, invoice_id)
    context = {"invoice": {"id": invoice_id, "status": "issued"}, "share_links": links,
               "new_share": made, "whole_page": answer_kind(request) == "page"}
    return render(request, "_share.html", context, status)


async def create_share(request: Request) -> Response:
    """201 `{url, expires_at}`: the link is shown this once; only its hash is kept."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    await read_body(request)
    actor = await current_actor(request)
    studio = studio_of(request)
    made = await studio.db.write(shares.create, actor.id, invoice_id,
                                 studio.settings.share_link_days)
    answered = {"url": shares.link_url(public_base(request), made["token"]),
                "expires_at": made["expires_at"]}
    if answer_kind(request) == "json":
        return JSONResponse(answered, status_code=201, headers=PRIVATE)
    return await _card(request, invoice_id, actor.id, 201, answered)


async def revoke_shares(request: Request) -> Response:
    """Every live link of the invoice stops opening at once."""
    invoice_id = path_id(request, "invoice_id", "invoice_not_found")
    await read_body(request)
    actor = await current_actor(request)
    revoked = await studio_of(request).db.write(shares.revoke, actor.id, invoice_id)
    kind = answer_kind(request)
    if kind == "json":
        return JSONResponse({"revoked": revoked}, headers=PRIVATE)
    if kind == "fragment":
        return await _card(request, invoice_id, actor.id)
    return RedirectResponse(f"/invoices/{invoice_id}", status_code=303, headers=PRIVATE)


# --- what a link opens, for anyone holding it ------------------------------------------------


def _shared(response: Response) -> Response:
    response.headers.update(SHARED)
    return response


async def _opened(request: Request) -> shares.Opened | None:
    """The invoice the path's link opens, its view counted; None when it opens nothing. A
    person's GET is a view; a HEAD (a link checker, a preview) shows nothing to anyone."""
    db = studio_of(request).db
    opened = await shares.open_link(db, request.path_params["token"])
    if opened is not None and request.method == "GET":
        await shares.record_view(db, opened.link_id)
    return opened


def _not_found(request: Request) -> Response:
    """One answer for every link that opens nothing: revoked, expired, malformed or made up;
    in the language the holder's browser asks for, as no invoice says whose it is."""
    with i18n.use(i18n.from_accept_language(request.headers.get("accept-language"))):
        return _shared(render(request, "shared_missing.html", {}, 404))


async def shared_invoice(request: Request) -> Response:
    opened = await _opened(request)
    if opened is None:
        return _not_found(request)
    token = request.path_params["token"]
    # The printable view itself (templates/document.html), with the link's own PDF.
    context = {**documents.page_of(documents.with_prices_shown(opened.invoice)), "token": token}
    with i18n.use(context["language"]):  # the customer's document, in the customer's language
        return _shared(render(request, "shared_invoice.html", context))


async def shared_pdf(request: Request) -> Response:
    opened = await _opened(request)
    if opened is None:
        return _not_found(request)
    invoice = opened.invoice
    pdf = await documents.document_pdf(studio_of(request).db, invoice)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", invoice["number"]) + ".pdf"
    return _shared(Response(pdf, media_type="application/pdf",
                            headers={"Content-Disposition": f'inline; filename="{name}"'}))

"""Export handlers: the accountant's CSV files, streamed as they are read."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from studio.billing import exports
from studio.web.negotiation import PRIVATE, current_actor, studio_of


async def _streamed(body: AsyncIterator[bytes], filename: str) -> Response:
    """The first chunk is read before the answer starts, so a database that cannot be reached
    is a 503 like any other, not a file cut short."""
    first = await anext(body)

    async def chunks() -> AsyncIterator[bytes]:
        yield first
        async for chunk in body:
            yield chunk

    return StreamingResponse(chunks(), media_type="text/csv; charset=utf-8", headers={
        **PRIVATE, "Content-Disposition": f'attachment; filename="{filename}"',
        "X-Content-Type-Options": "nosniff"})


async def invoices_csv(request: Request) -> Response:
    """Issued invoices and credit notes whose issue date is in `?from=&to=`."""
    actor = await current_actor(request)
    dates = exports.parse_range(request.query_params)
    db = studio_of(request).db
    plan = await exports.plan_invoices(db, actor, dates)
    return await _streamed(exports.invoice_csv(db, actor, dates, plan),
                           dates.filename("invoices"))


async def payments_csv(request: Request) -> Response:
    """Payments, voided ones marked, whose date is in `?from=&to=`."""
    actor = await current_actor(request)
    dates = exports.parse_range(request.query_params)
    return await _streamed(exports.payment_csv(studio_of(request).db, actor, dates),
                           dates.filename("payments"))

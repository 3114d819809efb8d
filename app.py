"""Builds the studio's Starlette app: routes, middleware, lifespan. Nothing else."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from studio import assets, i18n
from studio.accounts.auth import Sessions
from studio.accounts.throttle import Limits
from studio.billing import attachments, documents
from studio.config import Settings, from_environment
from studio.leasing import leases
from studio.leasing.providers import Provider, Providers, local
from studio.ops.demo import ensure_demo
from studio.runtime.worker import Worker, sweep
from studio.store.db import Database, open_database
from studio.store.keys import signing_keys
from studio.store.memo import Memo
from studio.store.stores import store_for
from studio.web import metrics
from studio.web.edge import EXCEPTION_HANDLERS, Edge
from studio.web.negotiation import Studio
from studio.web.views import attachments as attachment_views
from studio.web.views import customers as customer_views
from studio.web.views import einvoices as einvoice_views
from studio.web.views import exports as export_views
from studio.web.views import invoices as invoice_views
from studio.web.views import leases as lease_views
from studio.web.views import payments as payment_views
from studio.web.views import profile as profile_views
from studio.web.views import recurring as recurring_views
from studio.web.views import reminders as reminder_views
from studio.web.views import sending as sending_views
from studio.web.views import shares as share_views
from studio.web.views import signin as signin_views

Endpoint = Callable[[Request], Awaitable[Response]]


def resource(path: str, **handlers: Endpoint) -> Route:
    """One route per path, its handlers by method, so a 405 names every method it allows."""

    async def by_method(request: Request) -> Response:
        return await handlers["GET" if request.method == "HEAD" else request.method](request)

    return Route(path, by_method, methods=list(handlers), name=path)


async def favicon(request: Request) -> Response:
    """Browsers ask every site for /favicon.ico, whatever a page's <link rel=icon> says."""
    return FileResponse(assets.folder("static") / "favicon.ico", media_type="image/x-icon",
                        headers={"Cache-Control": "public, max-age=86400"})


def page_templates() -> Jinja2Templates:
    """The pages, speaking the language of whoever they are rendered for (`studio.i18n`)."""
    templates = Jinja2Templates(directory=assets.folder("templates"))
    i18n.install(templates.env)
    return templates


def sessions_for(db: Database, settings: Settings) -> Sessions:
    limits = Limits(settings.signin_window_seconds, settings.signin_failures_per_pair,
                    settings.signin_failures_per_address, settings.signin_failures_per_email)
    return Sessions(db, signing_keys(settings), idle_seconds=settings.session_idle_seconds,
                    max_seconds=settings.session_max_seconds, limits=limits,
                    handover=leases.hand_over)


def create_app(settings: Settings | None = None, providers: dict[str, Provider] | None = None
               ) -> Starlette:
    settings = settings or from_environment()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = await open_database(settings).open()
        background: list[asyncio.Task[None]] = []
        known: Providers | None = None
        # Whatever fails or is stopped once the database is open closes it again, and stops
        # what was started: nothing is left open behind a studio that did not start.
        try:
            if settings.demo:
                await ensure_demo(db, settings)
            known = Providers(settings, providers)
            worker = Worker(db, known, settings, beside_pages=True)
            app.state.studio = Studio(
                settings=settings, db=db, sessions=sessions_for(db, settings),
                providers=known, worker=worker if settings.embedded_worker else None,
                templates=page_templates(),
                memo=Memo(db),
            )
            app.state.attachment_store = store = store_for(settings)
            folder = store.ensure() if settings.sweeper else None
            if settings.embedded_worker:
                background.append(asyncio.create_task(worker.run()))
            if folder is not None:
                background.append(asyncio.create_task(sweep(db, settings)))
                background.append(asyncio.create_task(attachments.sweep_forever(db, folder)))
            yield
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            try:
                if known is not None:
                    await known.close()  # a model server's probe in flight is not waited for
                await asyncio.to_thread(documents.stop_renderers)
                await asyncio.to_thread(local.stop_readers)
            finally:
                await db.close()

    app = Starlette(
        routes=[
            # The hottest paths first: every open tab polls its lease once a second, and the
            # router tries routes in order.
            resource("/leases/{lease_id}", GET=lease_views.lease_status),
            resource("/leases", GET=lease_views.lease_list, POST=lease_views.submit_lease),
            # Share links come early: anyone may ask for them, without an account.
            resource("/i/{token}.pdf", GET=share_views.shared_pdf),
            resource("/i/{token}", GET=share_views.shared_invoice),
            Route("/", signin_views.home),
            resource("/login", GET=signin_views.login_page, POST=signin_views.login),
            resource("/logout", POST=signin_views.logout),
            resource("/logout/everywhere", POST=signin_views.logout),
            resource("/invoices", GET=invoice_views.invoice_list,
                     POST=invoice_views.create_invoice),
            resource("/invoices/new", GET=invoice_views.new_invoice_page),
            resource("/invoices/totals", GET=invoice_views.totals_preview),
            resource("/invoices/line", GET=invoice_views.blank_line),
            # Before `.pdf`, which would take `{id}.facturx` for an id.
            resource("/invoices/{invoice_id}.facturx.pdf", GET=einvoice_views.facturx_pdf),
            resource("/invoices/{invoice_id}.xml", GET=einvoice_views.facturx_xml),
            resource("/invoices/{invoice_id}.pdf", GET=invoice_views.invoice_pdf),
            resource("/invoices/{invoice_id}", GET=invoice_views.invoice_page,
                     PATCH=invoice_views.edit_invoice, DELETE=invoice_views.delete_invoice),
            resource("/invoices/{invoice_id}/edit", POST=invoice_views.edit_invoice),
            resource("/invoices/{invoice_id}/delete", POST=invoice_views.delete_invoice),
            resource("/invoices/{invoice_id}/issue", GET=invoice_views.issue_review,
                     POST=invoice_views.issue_invoice),
            resource("/invoices/{invoice_id}/credit-note", POST=invoice_views.credit_note),
            resource("/invoices/{invoice_id}/send", POST=sending_views.send_invoice),
            resource("/invoices/{invoice_id}/remind", POST=sending_views.remind),
            resource("/invoices/{invoice_id}/sends", GET=sending_views.send_list),
            resource("/invoices/{invoice_id}/payments", GET=payment_views.payment_list,
                     POST=payment_views.record),
            resource("/payments/{payment_id}/void", POST=payment_views.void),
            resource("/invoices/{invoice_id}/document", GET=invoice_views.printable),
            resource("/invoices/{invoice_id}/share", POST=share_views.create_share,
                     DELETE=share_views.revoke_shares),
            resource("/invoices/{invoice_id}/share/revoke", POST=share_views.revoke_shares),
            resource("/invoices/{invoice_id}/attachments", GET=attachment_views.attachment_list,
                     POST=attachment_views.upload),
            resource("/attachments/{attachment_id}", GET=attachment_views.download,
                     DELETE=attachment_views.delete),
            resource("/attachments/{attachment_id}/preview", GET=attachment_views.preview),
            resource("/exports/invoices.csv", GET=export_views.invoices_csv),
            resource("/exports/payments.csv", GET=export_views.payments_csv),
            resource("/customers", GET=customer_views.customer_list,
                     POST=customer_views.create_customer),
            # Before `{customer_id}`, which would take `picker` for an id.
            resource("/customers/picker", GET=customer_views.picker,
                     POST=customer_views.picker_create),
            resource("/customers/{customer_id}", GET=customer_views.customer_page,
                     PATCH=customer_views.edit_customer, DELETE=customer_views.delete_customer),
            resource("/customers/{customer_id}/edit", POST=customer_views.edit_customer),
            resource("/customers/{customer_id}/delete", POST=customer_views.delete_customer),
            resource("/recurring", GET=recurring_views.schedule_list,
                     POST=recurring_views.create_schedule),
            # Before `{recurring_id}`, which would take `new` for an id.
            resource("/recurring/new", GET=recurring_views.new_schedule_page),
            resource("/recurring/{recurring_id}", GET=recurring_views.schedule_page,
                     PATCH=recurring_views.edit_schedule),
            resource("/recurring/{recurring_id}/edit", POST=recurring_views.edit_schedule),
            resource("/recurring/{recurring_id}/pause", POST=recurring_views.pause),
            resource("/recurring/{recurring_id}/resume", POST=recurring_views.resume),
            resource("/recurring/{recurring_id}/end", POST=recurring_views.end),
            resource("/settings", GET=profile_views.settings_page,
                     POST=profile_views.save_settings),
            resource("/settings/logo", GET=profile_views.logo),
            resource("/settings/reminders", GET=reminder_views.reminder_settings,
                     PUT=reminder_views.save_reminder_settings,
                     POST=reminder_views.save_reminder_settings),
            resource("/review", GET=lease_views.review),
            resource("/leases/{lease_id}/apply", POST=lease_views.apply_lease),
            resource("/leases/{lease_id}/cancel", POST=lease_views.cancel_lease),
            resource("/favicon.ico", GET=favicon),
            resource("/healthz", GET=metrics.healthz),
            resource("/metrics", GET=metrics.metrics),
            Mount("/static", StaticFiles(directory=assets.folder("static")), name="static"),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    # The edge outside Starlette's own layers: a request it answers from memory passes nothing
    # else, and it sees every answer, a 500 of the error layer's included.
    app.middleware_stack = Edge(app.build_middleware_stack(),
                                client_timeout_seconds=settings.client_timeout_seconds,
                                remembered=lease_views.Remembered())
    return app

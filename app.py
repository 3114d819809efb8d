"""Builds the studio's Starlette app: routes, middleware, lifespan. Nothing else."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from studio import assets, attachments, metrics, web
from studio.auth import Sessions
from studio.browser import ClientTimeout, CrossOriginGuard
from studio.config import Settings, from_environment, signing_keys
from studio.db import Database
from studio.demo import ensure_demo
from studio.memo import Memo
from studio.providers import Provider, Providers
from studio.throttle import Limits
from studio.views import attachments as attachment_views
from studio.views import invoices as invoice_views
from studio.views import profile as profile_views
from studio.worker import Worker, sweep


def sessions_for(db: Database, settings: Settings) -> Sessions:
    limits = Limits(settings.signin_window_seconds, settings.signin_failures_per_pair,
                    settings.signin_failures_per_address, settings.signin_failures_per_email)
    return Sessions(db, signing_keys(settings), idle_seconds=settings.session_idle_seconds,
                    max_seconds=settings.session_max_seconds, limits=limits)


def create_app(settings: Settings | None = None, providers: dict[str, Provider] | None = None
               ) -> Starlette:
    settings = settings or from_environment()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = await Database(settings.db_path).open()
        if settings.demo:
            await ensure_demo(db)
        known = Providers(settings, providers)
        worker = Worker(db, known, settings)
        app.state.studio = web.Studio(
            settings=settings, db=db, sessions=sessions_for(db, settings),
            providers=known, worker=worker if settings.embedded_worker else None,
            templates=Jinja2Templates(directory=assets.folder("templates")), memo=Memo(db),
        )
        background = []
        if settings.embedded_worker:
            background.append(asyncio.create_task(worker.run()))
        if settings.sweeper:
            background.append(asyncio.create_task(sweep(db, settings)))
            background.append(asyncio.create_task(
                attachments.sweep_forever(db, attachments.FileStore(settings.files))))
        try:
            yield
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await db.close()

    return Starlette(
        routes=[
            Route("/", web.home),
            Route("/login", web.login_page, methods=["GET"]),
            Route("/login", web.login, methods=["POST"]),
            Route("/logout", web.logout, methods=["POST"]),
            Route("/logout/everywhere", web.logout, methods=["POST"]),
            Route("/invoices", invoice_views.invoice_list, methods=["GET"]),
            Route("/invoices", invoice_views.create_invoice, methods=["POST"]),
            Route("/invoices/new", invoice_views.new_invoice_page, methods=["GET"]),
            Route("/invoices/totals", invoice_views.totals_preview, methods=["GET"]),
            Route("/invoices/line", invoice_views.blank_line, methods=["GET"]),
            Route("/invoices/{invoice_id}.pdf", invoice_views.invoice_pdf, methods=["GET"]),
            Route("/invoices/{invoice_id}", invoice_views.invoice_page, methods=["GET"]),
            Route("/invoices/{invoice_id}", invoice_views.edit_invoice, methods=["PATCH"]),
            Route("/invoices/{invoice_id}", invoice_views.delete_invoice, methods=["DELETE"]),
            Route("/invoices/{invoice_id}/edit", invoice_views.edit_invoice, methods=["POST"]),
            Route("/invoices/{invoice_id}/delete", invoice_views.delete_invoice,
                  methods=["POST"]),
            Route("/invoices/{invoice_id}/issue", invoice_views.issue_review, methods=["GET"]),
            Route("/invoices/{invoice_id}/issue", invoice_views.issue_invoice, methods=["POST"]),
            Route("/invoices/{invoice_id}/credit-note", invoice_views.credit_note,
                  methods=["POST"]),
            Route("/invoices/{invoice_id}/document", invoice_views.printable, methods=["GET"]),
            Route("/invoices/{invoice_id}/attachments", attachment_views.upload,
                  methods=["POST"]),
            Route("/invoices/{invoice_id}/attachments", attachment_views.attachment_list,
                  methods=["GET"]),
            Route("/attachments/{attachment_id}", attachment_views.download, methods=["GET"]),
            Route("/attachments/{attachment_id}", attachment_views.delete, methods=["DELETE"]),
            Route("/attachments/{attachment_id}/preview", attachment_views.preview,
                  methods=["GET"]),
            Route("/settings", profile_views.settings_page, methods=["GET"]),
            Route("/settings", profile_views.save_settings, methods=["POST"]),
            Route("/review", web.review, methods=["GET"]),
            Route("/leases", web.lease_list, methods=["GET"]),
            Route("/leases", web.submit_lease, methods=["POST"]),
            Route("/leases/{lease_id}", web.lease_status, methods=["GET"]),
            Route("/leases/{lease_id}/apply", web.apply_lease, methods=["POST"]),
            Route("/leases/{lease_id}/cancel", web.cancel_lease, methods=["POST"]),
            Route("/healthz", metrics.healthz, methods=["GET"]),
            Route("/metrics", metrics.metrics, methods=["GET"]),
            Mount("/static", StaticFiles(directory=assets.folder("static")), name="static"),
        ],
        middleware=[Middleware(metrics.RequestRecorder),
                    Middleware(ClientTimeout, seconds=settings.client_timeout_seconds),
                    Middleware(CrossOriginGuard)],
        exception_handlers=web.EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )

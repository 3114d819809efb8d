"""Builds the studio's Starlette app: routes, middleware, lifespan. Nothing else."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from studio import metrics, web
from studio.auth import Sessions
from studio.browser import CrossOriginGuard
from studio.config import Settings, from_environment, signing_keys
from studio.db import Database
from studio.demo import ensure_demo
from studio.memo import Memo
from studio.providers import Provider, Providers
from studio.worker import Worker, sweep

HERE = Path(__file__).resolve().parent


def _assets(name: str) -> Path:
    """templates/ or static/: beside app.py in a checkout, inside the studio package once
    installed from a wheel (pyproject maps them there)."""
    checkout = HERE / name
    if checkout.is_dir():
        return checkout
    import studio

    return Path(studio.__file__).resolve().parent / name


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
            settings=settings, db=db, sessions=Sessions(db, signing_keys(settings)),
            providers=known, worker=worker if settings.embedded_worker else None,
            templates=Jinja2Templates(directory=_assets("templates")), memo=Memo(db),
        )
        background = []
        if settings.embedded_worker:
            background.append(asyncio.create_task(worker.run()))
        if settings.sweeper:
            background.append(asyncio.create_task(sweep(db)))
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
            Route("/invoices", web.invoice_list, methods=["GET"]),
            Route("/invoices/{invoice_id}", web.invoice_page, methods=["GET"]),
            Route("/review", web.review, methods=["GET"]),
            Route("/leases", web.submit_lease, methods=["POST"]),
            Route("/leases/{lease_id}", web.lease_status, methods=["GET"]),
            Route("/leases/{lease_id}/apply", web.apply_lease, methods=["POST"]),
            Route("/leases/{lease_id}/cancel", web.cancel_lease, methods=["POST"]),
            Route("/healthz", metrics.healthz, methods=["GET"]),
            Route("/metrics", metrics.metrics, methods=["GET"]),
            Mount("/static", StaticFiles(directory=_assets("static")), name="static"),
        ],
        middleware=[Middleware(metrics.RequestRecorder), Middleware(CrossOriginGuard)],
        exception_handlers=web.EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )

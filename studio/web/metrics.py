"""Health and metrics: `GET /healthz` for probes, `GET /metrics` for Prometheus.

Counters (requests, provider calls, late completions, issues, uploads) live in this process.
With `studio serve --workers N` they are kept in prometheus_client's multiprocess mode
(files under `PROMETHEUS_MULTIPROC_DIR`, which `studio serve` makes), so any process's scrape
sums all of them. Gauges of leases and tasks are read from the database at scrape time, so
they are the same whichever process answers.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import sqlite3
import time
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from studio.counters import MULTIPROCESS_ENV, REGISTRY
from studio.errors import Refusal
from studio.store.db import schema_of
from studio.store.transactions import DatabaseUnavailable, clock

HEALTH_TIMEOUT_S = 5.0
LEASE_STATES = ("open", "proposed", "applied", "rejected", "expired", "failed")


# --- figures read from the database -----------------------------------------------------------


def database_figures(db: sqlite3.Connection) -> dict[str, float]:
    """Leases by state, tasks waiting and running, and the oldest waiting task's age."""
    figures: dict[str, float] = {f"leases:{state}": 0 for state in LEASE_STATES}
    for row in db.execute("SELECT status, COUNT(*) FROM leases GROUP BY status"):
        figures[f"leases:{row[0]}"] = row[1]
    figures["tasks:waiting"] = figures["tasks:running"] = 0
    for row in db.execute(
        "SELECT status, COUNT(*) FROM tasks WHERE status IN ('pending', 'running')"
        " GROUP BY status"
    ):
        figures["tasks:waiting" if row[0] == "pending" else "tasks:running"] = row[1]
    oldest = db.execute(
        "SELECT MIN(leases.created_at) FROM tasks JOIN leases ON leases.id = tasks.lease_id"
        " WHERE tasks.status = 'pending' AND leases.status = 'open'"
    ).fetchone()[0]
    figures["oldest_waiting"] = max(0.0, clock(None) - oldest) if oldest is not None else 0.0
    return figures


class _Figures:
    """The database figures as metric families, for one scrape."""

    def __init__(self, figures: dict[str, float]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        leases = GaugeMetricFamily("studio_leases", "Leases by state.", labels=["state"])
        for state in LEASE_STATES:
            leases.add_metric([state], self.figures[f"leases:{state}"])
        yield leases
        tasks = GaugeMetricFamily("studio_tasks", "Tasks of open leases waiting for a worker "
                                  "or running.", labels=["state"])
        for state in ("waiting", "running"):
            tasks.add_metric([state], self.figures[f"tasks:{state}"])
        yield tasks
        yield GaugeMetricFamily(
            "studio_oldest_waiting_task_seconds",
            "Age of the oldest task still waiting for a worker (0 when none waits).",
            value=self.figures["oldest_waiting"])


def counters_text() -> bytes:
    directory = os.environ.get(MULTIPROCESS_ENV)
    if directory:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


# --- handlers ---------------------------------------------------------------------------------


def may_see_metrics(request: Request, token: str) -> bool:
    """Loopback clients, or anyone presenting STUDIO_METRICS_TOKEN as a bearer token."""
    offered = request.headers.get("authorization", "")
    if token and hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
        return True
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def metrics(request: Request) -> Response:
    studio = request.app.state.studio
    if not may_see_metrics(request, studio.settings.metrics_token):
        raise Refusal("not_found")  # the same answer as an address that does not exist
    figures = await studio.db.read(database_figures)
    body = counters_text() + generate_latest(_Figures(figures))  # type: ignore[arg-type]
    return Response(body, headers={"Content-Type": CONTENT_TYPE_LATEST,
                                   "Cache-Control": "no-store"})


def _beat(db: sqlite3.Connection) -> tuple[int, int]:
    db.execute(
        "INSERT INTO health (id, checked_at) VALUES (1, ?)"
        " ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
        (clock(None),),
    )
    return schema_of(db)


async def healthz(request: Request) -> Response:
    """200 when the database answers and takes a write; 503 otherwise. No sign-in."""
    studio = request.app.state.studio
    started = time.monotonic()
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            version, known = await studio.db.write(_beat)
    except (sqlite3.Error, TimeoutError, DatabaseUnavailable) as error:
        return JSONResponse(
            {"status": "unavailable", "detail": "database_unavailable",
             "message": f"The database did not take a write: {type(error).__name__}.",
             "pid": os.getpid()},
            status_code=503, headers={"Cache-Control": "no-store", "Retry-After": "5"})
    return JSONResponse(
        {"status": "ok", "schema_version": version, "schema_known": known,
         "write_ms": round((time.monotonic() - started) * 1000, 1), "pid": os.getpid()},
        headers={"Cache-Control": "no-store"})


# --- one log line and one count per request ---------------------------------------------------

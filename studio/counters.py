"""The counters every floor adds to (requests, provider calls, late completions, issues,
uploads), in one registry. They live in this process; with `studio serve --workers N` they
are kept in prometheus_client's multiprocess mode (files under `PROMETHEUS_MULTIPROC_DIR`,
which `studio serve` makes), and `GET /metrics` (studio/web/metrics.py) sums them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

REGISTRY = CollectorRegistry()
requests_total = Counter(
    "studio_requests", "Answered HTTP requests by route template and status.",
    ["method", "route", "status"], registry=REGISTRY)
provider_seconds = Histogram(
    "studio_provider_seconds", "Time one provider call took, successful or not.",
    ["provider"], registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 90))
provider_errors_total = Counter(
    "studio_provider_errors", "Provider calls that failed (timeouts included).",
    ["provider"], registry=REGISTRY)
late_completions_total = Counter(
    "studio_late_completions", "Completions that arrived after their lease ended: logged, "
    "written nowhere.", registry=REGISTRY)
# Incremented by the invoices and attachments code.
issues_total = Counter("studio_issues", "Invoices and credit notes issued.", registry=REGISTRY)
uploads_total = Counter("studio_uploads", "Attachments stored.", registry=REGISTRY)

"""Poll latency while something heavy runs beside it, over the same latency with nothing beside
it, on the same server in the same run: 40 clients downloading PDFs of freshly issued
200-line invoices (`poll_under_pdf_load_ratio`), and a 20,000-draft `studio import` on the same
database (`poll_under_import_ratio`)."""

from __future__ import annotations

import csv
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.setup import signed_in

LINES = 200
PDF_CLIENTS = 40
PDF_PAUSE_MS = 500  # each client waits this long before each download: a person, not a loop


class Poller:
    """One client polling a lease like a browser tab (every 50 ms), on a thread of its own, so
    the polls run while the caller drives the load; each reply's latency kept in ms."""

    def __init__(self, client: httpx.Client, path: str) -> None:
        self.client, self.path = client, path
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            self.client.get(self.path).raise_for_status()
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.stop.wait(0.05)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def idle_polls(client: httpx.Client, path: str, seconds: float) -> list[float]:
    with Poller(client, path) as poller:
        time.sleep(seconds)
    return poller.latencies


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, most_s: float = 60.0) -> float:
    """Wait until the server has finished what the load left behind (requests whose clients
    have gone still run to their end): until it uses under a tenth of a core for 0.5 s.
    Returns the seconds waited."""
    started = time.monotonic()
    last = cpu_seconds(pid)
    while time.monotonic() - started < most_s:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < 0.05:
            break
        last = now
    return time.monotonic() - started


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least `share` of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def poll_path(client: httpx.Client, tag: str) -> str:
    """A proposed lease to poll: its answer no longer changes, as in the other poll figures."""
    invoice = client.get("/invoices").json()[0]["id"]
    made = client.post("/leases", json={"request_id": f"poll-{tag}", "purpose":
                                        "summarize_invoice", "invoice_ids": [invoice],
                                        "providers": ["local"]})
    made.raise_for_status()
    path = f"/leases/{made.json()['lease_id']}"
    deadline = time.monotonic() + 30
    while client.get(path).json()["status"] == "open":
        if time.monotonic() > deadline:
            raise SystemExit("the lease to poll was never proposed")
        time.sleep(0.05)
    return path


def ratio_of(prefix: str, before: list[float], loaded: list[float], after: list[float]
             ) -> dict[str, Any]:
    median = statistics.median
    idle = before + after
    return {f"{prefix}_idle_before_p50_ms": median(before),
            f"{prefix}_idle_after_p50_ms": median(after),
            f"{prefix}_ratio": median(loaded) / median(idle),
            f"{prefix}_p50_ms": median(loaded), f"{prefix}_p95_ms": percentile(loaded, 0.95),
            f"{prefix}_max_ms": max(loaded), f"{prefix}_idle_p50_ms": median(idle),
            f"{prefix}_idle_p95_ms": percentile(idle, 0.95), f"{prefix}_polls": len(loaded)}


# --- 40 clients downloading PDFs -------------------------------------------------------------


def long_draft(n: int) -> dict[str, Any]:
    return {"customer": f"Long Invoice Ltd {n}", "currency": "EUR", "due_date": "2030-01-01",
            "line_items": [{"description": f"Consulting, week {w + 1}: analysis and report",
                            "quantity": "3", "unit_price": f"{100 + w}.50", "tax_rate": "19"}
                           for w in range(LINES)]}


def issue(client: httpx.Client, draft: str) -> None:
    reply = client.post(f"/invoices/{draft}/issue", json={"request_id": f"issue-{draft}",
                                                          "revision": 1})
    if reply.status_code != 201:
        raise SystemExit(f"issuing a {LINES}-line draft answered {reply.status_code}: "
                         f"{reply.text[:300]}")


def bench_pdf_load(server: Any, wrk: Callable[..., dict[str, Any]], seconds: float,
                   waves: int = 4, per_wave: int = 2) -> dict[str, Any]:
    """`server` is a running `studio serve --demo`. The window is split into `waves`; before
    each, `per_wave` new drafts of 200 lines are issued and 40 wrk connections then download
    their PDFs round robin, each pausing a second between downloads. First renders (all 40
    clients ask at once for invoices nobody has downloaded yet) and repeat downloads both fall
    inside the window, as people see them after issuing. Without the pause wrk would be a
    closed loop as fast as the server answers, and any route at all, however cheap, would
    queue a poll behind 40 requests: the figure would measure the event loop's queue, not
    what a PDF costs."""
    client = signed_in(server.url)
    try:
        path = poll_path(client, "pdf")
        drafts = []
        for n in range(waves * per_wave + 1):
            made = client.post("/invoices", json=long_draft(n))
            made.raise_for_status()
            drafts.append(made.json()["id"])
        # One checked outside the window: the route answers a PDF of the whole invoice.
        issue(client, drafts[-1])
        check = client.get(f"/invoices/{drafts[-1]}.pdf")
        if check.status_code != 200 or not check.content.startswith(b"%PDF"):
            raise SystemExit(f"the PDF route answered {check.status_code}: {check.text[:300]}")
        cookie = f"studio_session={client.cookies['studio_session']}"

        # The idle figure is taken half before the load and half after it (once the server has
        # settled), so a machine whose other load drifts weighs on both sides alike.
        before = idle_polls(client, path, seconds / 2)
        wave_seconds = max(1, round(seconds / waves))
        runs = []
        with Poller(client, path) as poller:
            for wave in range(waves):
                fresh = drafts[wave * per_wave:(wave + 1) * per_wave]
                for draft in fresh:
                    issue(client, draft)
                runs.append(wrk(server.url + "/", wave_seconds, PDF_CLIENTS,
                                BENCH_COOKIE=cookie, BENCH_DELAY_MS=str(PDF_PAUSE_MS),
                                BENCH_PATHS=",".join(f"/invoices/{d}.pdf" for d in fresh)))
        settled = settle(server.process.pid)
        after = idle_polls(client, path, seconds / 2)
        errors = sum(run["errors"] for run in runs)
        if errors:
            raise SystemExit(f"PDF downloads: {errors} failed requests during the run")
    finally:
        client.close()
    downloads = sum(run["requests"] for run in runs)
    out = ratio_of("poll_under_pdf_load", before, poller.latencies, after)
    out.update({
        "pdf_load_downloads": downloads,
        "pdf_load_downloads_per_s": downloads / sum(r["duration_us"] / 1e6 for r in runs),
        "pdf_load_download_p50_ms": statistics.median(
            r["p50_us"] for r in runs if r["requests"]) / 1000 if downloads else 0.0,
        "pdf_load_download_p99_ms": max(r["p99_us"] for r in runs) / 1000,
        "pdf_load_invoices": waves * per_wave,
        "pdf_bytes": len(check.content),
        "pdf_load_settle_s": settled,
    })
    return out


# --- a 20,000-draft import on the same database ---------------------------------------------


class Writer:
    """Another writer on the same file, beside the server: an empty write transaction every
    100 ms, each wait for the write lock kept in ms. The polls are reads, which WAL never
    blocks; this shows how long the import holds the lock that every write of the server
    (a new draft, saving settings, a sign-in) waits for."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.waits: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        db = sqlite3.connect(self.db_path, isolation_level=None, timeout=600)
        try:
            while not self.stop.is_set():
                started = time.perf_counter()
                db.execute("BEGIN IMMEDIATE")
                self.waits.append((time.perf_counter() - started) * 1000)
                db.execute("COMMIT")
                self.stop.wait(0.1)
        finally:
            db.close()

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def import_csv(path: Path, drafts: int) -> None:
    """`drafts` drafts of two lines each, in the README's CSV form."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["external_id", "customer", "currency", "due_date", "description",
                         "quantity", "unit_price", "tax_rate"])
        for n in range(drafts):
            for line in range(2):
                writer.writerow([f"bench-{n}", f"Imported Customer {n % 500}", "EUR",
                                 "2030-01-01", f"Service {line + 1}", "2", f"{n % 90 + 10}.25",
                                 "19"])


def bench_import_load(work: Path, server: Any, env: dict[str, str], db_path: Path,
                      seconds: float, drafts: int = 20_000) -> dict[str, Any]:
    """`server` is a running `studio serve --demo` on `db_path`; `studio import` runs as its
    own process on the same file, as an operator would run it, while one client polls."""
    source = work / "import.csv"
    import_csv(source, drafts)
    client = signed_in(server.url)
    try:
        path = poll_path(client, f"import-{uuid.uuid4().hex[:6]}")

        def drafts_now() -> int:
            db = sqlite3.connect(db_path)
            try:
                return db.execute("SELECT COUNT(*) FROM invoices WHERE status = 'draft'"
                                  ).fetchone()[0]
            finally:
                db.close()

        drafts_before = drafts_now()
        before = idle_polls(client, path, seconds / 2)
        with Poller(client, path) as poller, Writer(db_path) as writer:
            started = time.perf_counter()
            finished = subprocess.run(
                [sys.executable, "-m", "studio.ops.cli", "import", str(source), "--owner",
                 "ada@example.com"], env=env, capture_output=True, text=True, timeout=600)
            took = time.perf_counter() - started
        settle(server.process.pid)
        after = idle_polls(client, path, seconds / 2)
    finally:
        client.close()
    if finished.returncode != 0:
        raise SystemExit(f"studio import failed:\n{finished.stdout}{finished.stderr[-2000:]}")
    made = drafts_now() - drafts_before
    if made != drafts:
        raise SystemExit(f"studio import made {made} drafts, not {drafts}")
    out = ratio_of("poll_under_import", before, poller.latencies, after)
    out.update({"import_20k_s": took, "import_drafts": drafts,
                "import_longest_write_wait_ms": max(writer.waits)})
    return out

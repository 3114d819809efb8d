"""A real studio process per module and Debian's Chromium, driven by Playwright's sync API."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from studio.ops.demo import DEMO_PASSWORD
from tests.conftest import ADA, Server, rows, scalar, start_server

# Ada's demo invoices, issued when the server seeds them (this year's series, in order).
DEMO_NUMBERS = {"NORTHWIND": 1, "BLUE_HARBOR": 2, "KESTREL": 3, "ORCHARD": 4}
YEAR = dt.datetime.now(dt.UTC).year
NORTHWIND, BLUE_HARBOR, KESTREL, ORCHARD = (f"INV-{YEAR}-{n:04d}" for n in DEMO_NUMBERS.values())

CHROMIUM = Path(os.environ.get("STUDIO_CHROMIUM", "/usr/bin/chromium"))
# Quiet, sandbox-free Chromium: no updates, no sync, no network of its own.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-dev-shm-usage",
]


def launch_options(*extra_args: str) -> dict[str, Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set STUDIO_CHROMIUM)")
    return {"executable_path": str(CHROMIUM), "args": [*CHROMIUM_ARGS, *extra_args]}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Chromium for one module. Playwright stops with it: its event loop must not outlive the
    browser tests, or the anyio tests that run after them find a loop already running."""
    options = launch_options()
    with sync_playwright() as driver:
        browser = driver.chromium.launch(**options)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(autouse=True)
def _short_expect_timeout() -> None:
    expect.set_options(timeout=10_000)


FAILED_CALL = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[FAILED_CALL] = report.failed
    return report


@pytest.fixture
def page(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context per test; any script error or 5xx fails the test, so nothing
    fails silently. When a test fails, what the page asked and was told, its messages and the
    end of the server's log are printed with it."""
    context = chromium.new_context()
    page = context.new_page()
    problems: list[str] = []
    seen: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("response", lambda reply: problems.append(f"{reply.status} {reply.url}")
            if reply.status >= 500 else None)
    page.on("request", lambda asked: seen.append(f"{time.monotonic():.3f} asked"
                                                 f" {asked.method} {asked.url}"))
    page.on("requestfinished", lambda asked: seen.append(
        f"{time.monotonic():.3f} answered {asked.method} {asked.url}"))
    page.on("requestfailed", lambda asked: seen.append(
        f"{time.monotonic():.3f} failed {asked.method} {asked.url}: {asked.failure}"))
    page.on("console", lambda said: seen.append(f"console {said.type}: {said.text}"))
    try:
        yield page
        if request.node.stash.get(FAILED_CALL, False):
            print_what_the_page_saw(page, seen, request)
    finally:
        context.close()
    assert not problems, problems


def print_what_the_page_saw(page: Page, seen: list[str], request: pytest.FixtureRequest
                            ) -> None:
    print("--- what the page asked and was told ---", *seen[-60:], sep="\n")
    with contextlib.suppress(Exception):
        print("--- #messages:", page.locator("#messages").inner_text(timeout=1000))
    if "studio" in request.fixturenames:
        log = request.getfixturevalue("studio").server.log().splitlines()
        print("--- the end of the server's log ---", *log[-60:], sep="\n")


@dataclass
class Studio:
    """A running `studio serve --demo` and the database file it writes."""

    server: Server
    db_path: Path

    @property
    def url(self) -> str:
        return self.server.url

    def invoice_id(self, number: str, email: str = ADA) -> str:
        """The id of the invoice of that number in one person's series (Ben's run alike)."""
        return scalar(self.db_path, "SELECT invoices.id FROM invoices JOIN actors"
                      " ON actors.id = owner_id WHERE number = ? AND email = ?", number, email)

    def summary(self, number: str) -> str:
        return scalar(self.db_path, "SELECT summary FROM invoices WHERE id = ?",
                      self.invoice_id(number))

    def lease(self, lease_id: str) -> Any:
        return rows(self.db_path, "SELECT * FROM leases WHERE id = ?", lease_id)[0]

    def lease_count(self) -> int:
        return scalar(self.db_path, "SELECT COUNT(*) FROM leases")

    def wait_for_lease(self, lease_id: str, status: str, seconds: float = 30.0) -> Any:
        deadline = time.monotonic() + seconds
        while True:
            lease = self.lease(lease_id)
            if lease["status"] == status:
                return lease
            assert time.monotonic() < deadline, f"lease stayed {lease['status']}, not {status}"
            time.sleep(0.05)


def numbers_as_seeded(studio: Studio, module: ModuleType) -> None:
    """NORTHWIND and the others are numbered in the year the run began; a run that crosses
    a new year meets a server that seeded the new year's series: the module's names then
    read the numbers that server gave."""
    year = scalar(studio.db_path, "SELECT MIN(series_year) FROM invoices JOIN actors"
                  " ON actors.id = owner_id WHERE email = ? AND kind = 'invoice'", ADA)
    for name, n in DEMO_NUMBERS.items():
        if hasattr(module, name):
            setattr(module, name, f"INV-{year}-{n:04d}")


def serve(tmp_path_factory: pytest.TempPathFactory, module: ModuleType | None = None,
          **settings: str) -> Iterator[Studio]:
    db_path = tmp_path_factory.mktemp("studio") / "studio.db"
    server = start_server(db_path, "--demo", **settings)
    try:
        studio = Studio(server, db_path)
        if module is not None:
            numbers_as_seeded(studio, module)
        yield studio
    finally:
        server.stop()
        # Nothing the browser did may have crashed a handler.
        assert "Traceback" not in server.log(), server.log()


@pytest.fixture(scope="module")
def studio(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Studio]:
    """One server per module, configured by the module's `STUDIO_SETTINGS`."""
    yield from serve(tmp_path_factory, request.module,
                     **getattr(request.module, "STUDIO_SETTINGS", {}))


def sign_in(page: Page, url: str, email: str = ADA) -> None:
    page.goto(url + "/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(url + "/invoices")


def type_customer(page: Page, name: str) -> None:
    """Type a draft's customer and wait for the picker's answer to land: the matches it shows
    above the lines push the buttons below down, and a click aimed before they moved lands on
    whatever moved under it."""
    page.get_by_label("Customer").fill(name)
    expect(page.locator("#customer-matches > *")).not_to_have_count(0)


def review_url(studio: Studio, *numbers: str, candidates: int = 1, provider: str = "local"
               ) -> str:
    query = "&".join(f"invoice_id={studio.invoice_id(number)}" for number in numbers)
    return f"{studio.url}/review?purpose=summarize_invoice&{query}" \
           f"&provider={provider}&candidates={candidates}"


def open_review(page: Page, studio: Studio, *numbers: str, **options: Any) -> str:
    """Open a review step and return the request id the page minted for it."""
    page.goto(review_url(studio, *numbers, **options))
    expect(page.locator("#submit")).to_be_enabled()
    return page.locator("#request-id").text_content()


def submit_and_open_lease(page: Page) -> str:
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/leases/*")
    return page.url.rsplit("/", 1)[1]


def lease_posts(page: Page) -> list[dict[str, Any]]:
    """Start recording the bodies the page posts to /leases."""
    seen: list[dict[str, Any]] = []

    def record(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/leases"):
            seen.append(request.post_data_json)

    page.on("request", record)
    return seen


def lose_first_reply(page: Page, url: str | re.Pattern[str]) -> list[int]:
    """The first POST to `url` reaches the server and does its work, then its reply is lost
    (the connection reset). Returns the statuses the server answered and the page never saw;
    every later request goes through."""
    lost: list[int] = []

    def drop(route: Route) -> None:
        if route.request.method != "POST" or lost:
            route.continue_()
            return
        lost.append(route.fetch().status)
        route.abort("connectionreset")

    page.route(url, drop)
    return lost


def lease_polls(page: Page, lease_id: str) -> Callable[[], int]:
    """Count the status polls the page sends for one lease."""
    count = [0]

    def record(request: Any) -> None:
        if request.method == "GET" and request.url.endswith(f"/leases/{lease_id}") \
                and request.headers.get("hx-request") == "true":
            count[0] += 1

    page.on("request", record)
    return lambda: count[0]


def wait_until(page: Page, check: Callable[[], bool], seconds: float = 30.0) -> None:
    """Let the page run (its events are delivered only while Playwright waits) until check()."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"gave up after {seconds} s"
        page.wait_for_timeout(100)

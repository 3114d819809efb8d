"""A fuzz run over the JSON API: over 10,000 generated requests, no 500, and a refused
request changes nothing.

Hypothesis generates the requests (derandomized, so every run sends the same ones); they are
sent in one loop to one in-process studio, and a second connection shows whether anything
committed while each request ran (`backends.ChangeWatch`).

A reading or refused request writes nothing, with one exception the run knows by name: a
signed-in request records its session's use when the last record is `touch_every` old
(studio/accounts/auth.py `_touch_session`, once a minute), so an idle session ends on time.
Left to the
clock, that write would fall on whichever request came a minute later. So the run sets the
interval itself: never, for every request but one in TOUCH_PROBE, where the strict rule holds
(nothing commits at all); always, for the probes, which compare every row of every table
before and after and allow exactly that one write: the requester's session, its
`last_seen_at` and nothing else.
"""

from __future__ import annotations

import json
import math
import sqlite3
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio.errors import Refusal
from studio.ops.demo import DEMO_PASSWORD
from tests import backends
from tests.conftest import ADA, BEN, days_ahead, lease_body, running

pytestmark = pytest.mark.anyio

BATCH = 50
# Tables a refused or reading request may still write: sign-in counts and kept documents.
BOOKKEEPING = ("sign_in_attempts", "sign_in_known", "issued_documents")
BATCHES = 210  # 10,500 requests
# One request in this many is sent with its session's use due to be recorded.
TOUCH_PROBE = 100


@dataclass(frozen=True)
class Case:
    who: str  # ada, anonymous, forged
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: Any  # a dict sent as JSON, a dict sent as a form, or raw bytes
    body_kind: str


def ids(kind: str) -> st.SearchStrategy[str]:
    """Placeholders resolved when sent, so generated cases name real rows."""
    return st.one_of(
        st.sampled_from([f"@{kind}-own@", f"@{kind}-ben@", f"@{kind}-own@".upper(),
                         f"@{kind}-draft@"]),
        st.uuids().map(str),
        st.text(max_size=40),
        st.sampled_from(["", "0", "null", "..", "%00", "x" * 100, "00000000-0000-0000-0000"]),
    )


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
)
invoice_values = st.one_of(ids("invoice"), scalars)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)

lease_bodies = st.fixed_dictionaries(
    {},
    optional={
        "request_id": st.one_of(st.text(max_size=110), scalars, st.just("fuzz-fixed")),
        "purpose": st.one_of(st.sampled_from(["summarize_invoice", "delete_everything", ""]),
                             scalars),
        "invoice_ids": st.one_of(st.lists(invoice_values, max_size=4), invoice_values),
        "invoice_id": invoice_values,
        "providers": st.one_of(st.lists(st.sampled_from(["local", "auto", "openai", "x"])
                                        | scalars, max_size=3), scalars),
        "candidates": st.one_of(st.integers(-2, 8), st.sampled_from(["1", "5", "6", "1.0"]),
                                scalars),
        "actor_id": st.one_of(st.just("@actor-ben@"), scalars),
        "choices": st.one_of(st.dictionaries(ids("invoice"), ids("proposal"), max_size=2),
                             values),
    },
)
# Valid requests with at most one field made hostile, so the run also reaches past refusals.
near_valid_bodies = st.builds(
    lambda request_id, invoices, candidates, providers, hostile: {
        "request_id": request_id, "purpose": "summarize_invoice", "invoice_ids": invoices,
        "candidates": candidates, "providers": providers, **hostile},
    st.text(min_size=1, max_size=12),
    st.lists(st.sampled_from(["@invoice-own@", "@invoice-own2@"]), min_size=1, max_size=3),
    st.integers(1, 5), st.sampled_from([["local"], ["auto"], ["local", "auto"]]),
    st.dictionaries(st.sampled_from(["actor_id", "candidates", "invoice_ids", "purpose"]),
                    values, max_size=1),
)
amount_texts = st.one_of(st.sampled_from(["1", "19.99", "0", "-1", "1e999999", "NaN", "1,5",
                                         "9" * 20, "0.0000001", " 2 "]), scalars)
line_items = st.fixed_dictionaries({}, optional={
    "description": st.one_of(st.text(max_size=20), scalars), "quantity": amount_texts,
    "unit_price": amount_texts, "tax_rate": st.one_of(st.sampled_from(["19", "101"]), scalars),
})
draft_bodies = st.fixed_dictionaries({}, optional={
    "request_id": st.one_of(st.text(max_size=110), scalars),
    "customer": st.one_of(st.text(max_size=30), scalars),
    "currency": st.one_of(st.sampled_from(["EUR", "jpy", "KWD", "EUX", ""]), scalars),
    "due_date": st.one_of(st.sampled_from([days_ahead(61), "2027-02-30", "tomorrow"]), scalars),
    "line_items": st.one_of(st.lists(line_items | scalars, max_size=3), scalars),
    "revision": st.one_of(st.integers(-1, 3), scalars),
    "name": st.one_of(st.text(max_size=30), scalars),
})
login_bodies = st.fixed_dictionaries({}, optional={
    "email": st.one_of(st.sampled_from([ADA, BEN, "", "nobody@example.com"]), scalars),
    "password": st.one_of(st.sampled_from([DEMO_PASSWORD, "wrong"]), scalars),
})
raw_bodies = st.one_of(
    st.binary(max_size=64), st.sampled_from([b"{", b"[]", b"null", b"[" * 5000 + b"]" * 5000,
                                             b'{"request_id": 1e999}', b"\xff\xfe{}",
                                             b"x" * (65 * 1024), b"a=1&a=2&invoice_id="]),
)

routes = st.one_of(
    st.tuples(st.just("POST"), st.just("/leases")),
    st.tuples(st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
              ids("lease").map(lambda i: f"/leases/{i}")),
    st.tuples(st.sampled_from(["POST", "GET"]), ids("lease").map(lambda i: f"/leases/{i}/apply")),
    st.tuples(st.sampled_from(["POST", "GET"]),
              ids("lease").map(lambda i: f"/leases/{i}/cancel")),
    st.tuples(st.sampled_from(["GET", "POST"]), st.just("/invoices")),
    st.tuples(st.just("GET"), ids("invoice").map(lambda i: f"/invoices/{i}")),
    st.tuples(st.just("GET"), st.lists(ids("invoice"), max_size=3).map(
        lambda xs: "/review?" + "&".join(f"invoice_id={x}" for x in xs))),
    st.tuples(st.just("GET"), st.text(max_size=20).map(lambda q: f"/review?candidates={q}")),
    st.tuples(st.sampled_from(["GET", "POST"]), st.text(max_size=30).map(lambda p: "/" + p)),
    st.tuples(st.sampled_from(["PATCH", "DELETE", "PUT"]),
              ids("invoice").map(lambda i: f"/invoices/{i}")),
    st.tuples(st.sampled_from(["GET", "POST"]), st.tuples(
        ids("invoice"), st.sampled_from(["edit", "delete", "issue", "credit-note", "document"])
    ).map(lambda t: f"/invoices/{t[0]}/{t[1]}")),
    st.tuples(st.just("GET"), ids("invoice").map(lambda i: f"/invoices/{i}.pdf")),
    st.tuples(st.just("GET"), st.text(max_size=20).map(lambda q: f"/invoices/totals?currency={q}"
                                                         f"&quantity={q}&unit_price=1")),
    st.tuples(st.sampled_from(["GET", "POST"]), st.just("/settings")),
)

header_sets = st.sampled_from([
    (("accept", "application/json"),),
    (("accept", "application/json"), ("hx-request", "true")),
    (("accept", "text/html"),),
    (("accept", "application/json"), ("origin", "https://evil.example")),
    (("accept", "application/json"), ("sec-fetch-site", "cross-site")),
    (("accept", "application/json"), ("content-length", "99999999")),
])


@st.composite
def cases(draw: st.DrawFn) -> Case:
    method, path = draw(routes)
    if path == "/login" or draw(st.integers(0, 99)) == 0:
        method, path, body, kind = "POST", "/login", draw(login_bodies), "json"
    elif method == "GET":
        body, kind = None, "none"
    else:
        kind = draw(st.sampled_from(["json", "json", "form", "raw"]))
        shaped = draft_bodies if path.startswith(("/invoices", "/settings")) else \
            lease_bodies | near_valid_bodies
        body = draw(raw_bodies) if kind == "raw" else draw(shaped)
    if path == "/logout":  # signing out Ada would turn the rest of the run into 401s
        path = "/logouts"
    headers = draw(header_sets)
    if kind == "raw" and any(name == "content-length" for name, _ in headers):
        headers = headers[:1]
    who = draw(st.sampled_from(["ada", "ada", "ada", "anonymous", "forged"]))
    return Case(who, method, path, headers, body, kind)


def generate() -> list[Case]:
    generated: list[Case] = []

    @settings(max_examples=BATCHES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(cases(), min_size=BATCH, max_size=BATCH))
    def collect(batch: list[Case]) -> None:
        generated.extend(batch)

    collect()
    return generated


def as_form(body: dict[str, Any]) -> dict[str, Any]:
    form: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, list):
            form[key] = [json.dumps(v) if not isinstance(v, str) else v for v in value]
        elif not isinstance(value, str):
            form[key] = json.dumps(value)
        else:
            form[key] = value
    return form


async def test_ten_thousand_generated_requests_never_500_and_refusals_change_nothing(
        tmp_path):
    settings_ = backends.settings(tmp_path / "studio.db", secret_key="test-secret", demo=True,
                                  embedded_worker=False, sweeper=False, lease_seconds=3600)
    generated = generate()
    assert len(generated) >= 10_000
    async with running(settings_) as studio:
        ada = await studio.signed_in()
        ben = await studio.signed_in(BEN)
        ben_invoice = studio.invoice_ids(BEN)[0]
        ben_lease = (await ben.post("/leases", json=lease_body([ben_invoice], "bens"))
                     ).json()["lease_id"]
        own_invoice, own_second = studio.invoice_ids()[:2]
        own_draft = (await ada.get("/invoices")).json()[0]["id"]
        own_lease = (await ada.post("/leases", json=lease_body([own_invoice], "adas"))
                     ).json()["lease_id"]
        ben_id = (await ben.post("/login", json={"email": BEN, "password": DEMO_PASSWORD})
                  ).json()["actor_id"]
        names = {
            "@invoice-own2@": own_second, "@invoice-own@": own_invoice,
            "@invoice-draft@": own_draft,
            "@invoice-ben@": ben_invoice,
            "@lease-own@": own_lease, "@lease-ben@": ben_lease,
            "@proposal-own@": str(uuid.uuid4()), "@proposal-ben@": str(uuid.uuid4()),
            "@actor-ben@": ben_id,
        }
        names.update({key.upper(): value.upper() for key, value in list(names.items())})

        def resolve(text: str) -> str:
            for placeholder, real in names.items():
                text = text.replace(placeholder, real)
            return text

        clients = {"ada": ada, "anonymous": studio.client(),
                   "forged": studio.client()}
        clients["forged"].cookies.set("studio_session", "forged.cookie.value")
        watcher = backends.ChangeWatch(settings_.db_path)
        sessions = studio.studio.sessions
        counts: dict[int, int] = {}
        touched = 0
        try:
            for number, case in enumerate(generated):
                client = clients[case.who]
                kwargs: dict[str, Any] = {"headers": dict(case.headers)}
                if case.body_kind == "json":
                    kwargs["content"] = resolve(json.dumps(case.body)).encode()
                    kwargs["headers"]["content-type"] = "application/json"
                elif case.body_kind == "form":
                    kwargs["data"] = json.loads(resolve(json.dumps(as_form(case.body))))
                elif case.body_kind == "raw":
                    kwargs["content"] = case.body
                path = quote(resolve(case.path), safe="/?=&")
                # A refused sign-in is counted, and a first PDF download keeps its bytes:
                # those two may write their own table, and nothing else.
                kept = path.startswith("/login") or ".pdf" in path
                probe = not kept and number % TOUCH_PROBE == 0
                due_touch(sessions, probe)
                before = watcher.version()
                rest_before = digest_outside(watcher.db, BOOKKEEPING) if kept else None
                every_before = rows_outside(watcher.db, ()) if probe else None
                reply = await client.request(case.method, path, **kwargs)
                changed = watcher.version() != before
                counts[reply.status_code] = counts.get(reply.status_code, 0) + 1
                assert reply.status_code < 500, (case, reply.text)
                if reply.status_code < 400 and case.method != "GET":
                    continue  # an accepted write
                if kept:
                    assert digest_outside(watcher.db, BOOKKEEPING) == rest_before, case
                elif probe:
                    session = session_of(sessions, client)
                    touch = only_touch(every_before, rows_outside(watcher.db, ()), session)
                    assert touch is not None, (case, reply.status_code, reply.text)
                    touched += touch
                else:
                    assert not changed, (case, reply.status_code, reply.text)
        finally:
            watcher.close()
        assert sum(counts.values()) >= 10_000
        # The probes did meet the one write they allow, so they are not vacuous.
        assert touched > 0
        # The run reached past the refusals: some requests were accepted and made leases.
        assert counts.get(201, 0) > 0 and counts.get(404, 0) > 0 and counts.get(422, 0) > 0
        # Ben's lease is untouched by everything Ada and strangers sent.
        lease = (await ben.get(f"/leases/{ben_lease}")).json()
        assert lease["status"] == "open"


def rows_outside(db: Any, skipped: tuple[str, ...]) -> list[Any]:
    """Every row of every table but the skipped ones."""
    tables = [name for name in backends.tables(db) if name not in skipped]
    return [(table, sorted(map(tuple, db.execute(f"SELECT * FROM {table}").fetchall()),
                           key=repr))
            for table in tables]


def digest_outside(db: Any, skipped: tuple[str, ...]) -> Any:
    """What `rows_outside` reads, for telling whether it changed: on PostgreSQL, each table's
    rows hashed in the server (md5 of every row's text, in order), one query for all of them
    instead of every row fetched and sorted here before and after a thousand requests."""
    if isinstance(db, sqlite3.Connection):
        return rows_outside(db, skipped)
    return dict(db.execute(" UNION ALL ".join(
        f"SELECT '{name}', md5(string_agg(t::text, E'\\n' ORDER BY t::text COLLATE \"C\"))"
        f" FROM {name} AS t" for name in backends.tables(db) if name not in skipped)).fetchall())


def due_touch(sessions: Any, due: bool) -> None:
    """Make a session's use due to be recorded on the next request (`due`) or on none. Before
    a probe, what this process remembers of a session's currency is forgotten, so the probe
    reads its session and judges it afresh."""
    sessions.touch_every = 0.0 if due else math.inf
    if due:
        sessions._current_until.clear()


def session_of(sessions: Any, client: Any) -> str | None:
    """The stored id of the session the client's cookie names, if it names one."""
    cookie = client.cookies.get("studio_session")
    try:
        return sessions._session_key(cookie) if cookie else None
    except Refusal:  # a forged cookie names no session
        return None


def only_touch(before: list[Any], after: list[Any], session: str | None) -> int | None:
    """1 when the one change between the two readings (`rows_outside(db, ())`) is the named
    session's `last_seen_at` moving on, 0 when nothing changed, None for any other change."""
    if before == after:
        return 0
    if session is None:
        return None
    rest_before = [(name, found) for name, found in before if name != "sessions"]
    rest_after = [(name, found) for name, found in after if name != "sessions"]
    old = [row for row in dict(before)["sessions"] if row[0] != session]
    new = [row for row in dict(after)["sessions"] if row[0] != session]
    was = [row for row in dict(before)["sessions"] if row[0] == session]
    now = [row for row in dict(after)["sessions"] if row[0] == session]
    if rest_before != rest_after or old != new or len(was) != 1 or len(now) != 1:
        return None
    moved = [(a, b) for a, b in zip(was[0], now[0], strict=True) if a != b]
    # Only one field moved, forward in time: (id, actor_id, created_at, last_seen_at).
    return 1 if len(moved) == 1 and moved[0][0] < moved[0][1] == now[0][3] else None

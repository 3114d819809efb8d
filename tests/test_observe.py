"""What an operator sees: log lines, /metrics, /healthz, and the cookie behind a TLS proxy."""

from __future__ import annotations

import json
import sys
import threading
from contextlib import closing

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from studio.accounts.auth import SESSION_COOKIE
from studio.ops.demo import DEMO_PASSWORD
from studio.store.postgres import display
from tests import backends
from tests.conftest import (
    ADA,
    days_ahead,
    free_port,
    lease_body,
    running,
    scalar,
    sign_in,
    start_server,
    wait_for_status,
)

PROVIDER_KEY = "sk-provider-key-never-logged-4f9a"
SIGNING_KEY = "signing-key-never-logged-7c21"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text answer, parsed by prometheus_client's own parser."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_a_submit_apply_and_issue_log_their_lines_and_no_secret_reaches_the_log(tmp_path):
    db_path = tmp_path / "studio.db"
    closed = f"http://127.0.0.1:{free_port()}/v1"  # a provider that never answers
    server = start_server(
        db_path, "--demo", STUDIO_LOG_FORMAT="json", STUDIO_SECRET_KEY=SIGNING_KEY,
        STUDIO_OPENAI_BASE_URL=closed, STUDIO_OPENAI_API_KEY=PROVIDER_KEY,
    )
    try:
        client = sign_in(server.url)
        cookie = client.cookies[SESSION_COOKIE]
        with closing(client):
            invoice = scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                                      " actors.id = owner_id WHERE email = ? ORDER BY number",
                             ADA)
            submitted = client.post("/leases", json=lease_body([invoice]))
            assert submitted.status_code == 201
            lease_id = submitted.json()["lease_id"]

            async def proposed() -> None:
                async with httpx.AsyncClient(base_url=server.url, cookies={SESSION_COOKIE: cookie},
                                             headers={"Accept": "application/json"}) as poll:
                    await wait_for_status(poll, lease_id, "proposed")

            anyio.run(proposed)
            assert client.post(f"/leases/{lease_id}/apply").status_code == 200
            assert client.post("/leases", json=lease_body([invoice], "auto-req",
                                                          providers=["auto"])).status_code == 201
            draft = client.post("/invoices", json={
                "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
                "line_items": [{"description": "Widgets", "quantity": "3",
                                "unit_price": "19.99", "tax_rate": "19"}]}).json()
            issued = client.post(f"/invoices/{draft['id']}/issue", json={
                "request_id": "issue-1", "revision": draft["revision"]})
            assert issued.status_code == 201, issued.text
            assert client.post("/logout").status_code == 200
        actor_id = scalar(db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    finally:
        server.stop()

    text = server.log()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # all of it JSON
    requests = [line for line in lines if line["logger"] == "studio.request"]
    assert {"method": "POST", "route": "/leases", "status": 201, "actor_id": actor_id} \
        .items() <= requests[[r["route"] for r in requests].index("/leases")].items()
    apply_line = next(r for r in requests if r["route"] == "/leases/{lease_id}/apply")
    assert (apply_line["method"], apply_line["status"], apply_line["actor_id"]) == \
        ("POST", 200, actor_id)
    assert isinstance(apply_line["ms"], float)
    changes = [(line["from"], line["to"], line["reason"]) for line in lines
               if line.get("event") == "state_change" and line["id"] == lease_id]
    assert changes == [(None, "open", "submitted"), ("open", "proposed", "tasks_finished"),
                       ("proposed", "applied", "applied")]
    assert all(line["actor_id"] == actor_id for line in lines
               if line.get("event") == "state_change" and line["kind"] == "lease")
    issue_line = next(r for r in requests if r["route"] == "/invoices/{invoice_id}/issue")
    assert (issue_line["status"], issue_line["actor_id"]) == (201, actor_id)
    issued_change = [line for line in lines if line.get("event") == "state_change"
                     and line["kind"] == "invoice" and line["id"] == draft["id"]]
    assert [(c["from"], c["to"], c["actor_id"]) for c in issued_change] == [
        ("draft", "issued", actor_id)]
    assert issued_change[0]["number"] == issued.json()["number"]
    start = next(line for line in lines if line["logger"] == "studio.cli")
    url = backends.database_url(db_path)
    assert (start["db"], start["workers"]) == (str(db_path) if url is None else display(url), 1)
    assert start["address"] == server.url

    for secret in (cookie, DEMO_PASSWORD, PROVIDER_KEY, SIGNING_KEY):
        assert secret not in text
    assert lease_id in text and "Northwind" not in text  # ids, never invoice content


@pytest.mark.anyio
async def test_metrics_parse_and_move_with_the_work(settings):
    async with running(settings) as studio:
        async with studio.client() as local:
            before = samples((await local.get("/metrics")).text)
            client = await studio.signed_in()
            invoice = studio.invoice_ids()[0]
            lease = (await client.post("/leases", json=lease_body([invoice]))).json()
            await wait_for_status(client, lease["lease_id"], "proposed")
            assert (await client.post(f"/leases/{lease['lease_id']}/apply")).status_code == 200
            drafts = [(await client.get(f"/invoices/{i['id']}")).json()
                      for i in (await client.get("/invoices")).json() if i["status"] == "draft"]
            stale = await client.post(f"/invoices/{drafts[0]['id']}/issue", json={
                "request_id": "metrics-stale", "revision": drafts[0]["revision"] + 1})
            assert stale.status_code == 409  # refused: counts as no issue
            for _ in range(2):  # and a replay is not a second one
                issued = await client.post(f"/invoices/{drafts[0]['id']}/issue", json={
                    "request_id": "metrics-issue", "revision": drafts[0]["revision"]})
                assert issued.status_code in (200, 201)
            fresh = await client.post("/invoices", json={
                "customer": "Metrics Ltd", "currency": "EUR", "due_date": days_ahead(61),
                "line_items": [{"description": "Work", "quantity": "1", "unit_price": "10",
                                "tax_rate": "0"}]})
            for _ in range(2):
                uploaded = await client.post(
                    f"/invoices/{fresh.json()['id']}/attachments", data={"client_key": "metrics"},
                    files={"file": ("r.pdf", b"%PDF-1.4\n%%EOF\n", "application/pdf")})
                assert uploaded.status_code in (200, 201)
            await client.aclose()
            reply = await local.get("/metrics")
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/plain")
        after = samples(reply.text)

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert moved("studio_requests_total", method="POST", route="/leases", status="201") == 1
    assert moved("studio_requests_total", method="POST", route="/leases/{lease_id}/apply",
                 status="200") == 1
    assert moved("studio_leases", state="applied") == 1
    assert after[("studio_leases", (("state", "applied"),))] == \
        scalar(settings.db_path, "SELECT COUNT(*) FROM leases WHERE status = 'applied'")
    assert moved("studio_provider_seconds_count", provider="local") == 1
    assert moved("studio_issues_total") == 1
    assert moved("studio_uploads_total") == 1
    for name in ("studio_oldest_waiting_task_seconds", "studio_late_completions_total"):
        assert (name, ()) in after
    assert ("studio_tasks", (("state", "waiting"),)) in after


@pytest.mark.anyio
async def test_metrics_are_404_to_a_remote_client_without_the_token(settings):
    token = "metrics-token-123"
    async with running(settings.with_changes(metrics_token=token)) as studio:
        remote = httpx.ASGITransport(app=studio.app, client=("203.0.113.9", 40000))
        async with httpx.AsyncClient(transport=remote, base_url="http://studio.test") as client:
            refused = await client.get("/metrics", headers={"Accept": "application/json"})
            assert refused.status_code == 404
            assert refused.json()["detail"] == "not_found"
            wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 404
            allowed = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert allowed.status_code == 200
            assert "studio_leases" in allowed.text
            # Health needs no sign-in and proves a write.
            health = await client.get("/healthz")
            assert health.status_code == 200
            assert health.json()["status"] == "ok"
    assert scalar(settings.db_path, "SELECT COUNT(*) FROM health") == 1


@pytest.mark.anyio
async def test_behind_a_proxy_the_session_cookie_is_secure(settings):
    async with running(settings.with_changes(proxy_headers=True)) as studio:
        async with studio.client() as client:
            reply = await client.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
            assert "secure" in reply.headers["set-cookie"].lower()
    async with running(settings) as studio:
        async with studio.client() as client:
            reply = await client.post("/login", json={"email": ADA, "password": DEMO_PASSWORD})
            assert "secure" not in reply.headers["set-cookie"].lower()


def test_a_text_line_carries_its_fields_then_its_traceback_and_stack() -> None:
    import logging

    from studio.logs import FIELDS, TextFormatter

    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("studio.test", logging.ERROR, __file__, 1, "failed %s",
                                   ("here",), sys.exc_info(), sinfo="Stack (most recent call)")
    record.__dict__[FIELDS] = {"lease_id": "l-1"}
    head, *rest = TextFormatter().format(record).split("\n")
    assert head.endswith(" ERROR studio.test failed here lease_id=l-1"), head
    assert rest[0] == "Traceback (most recent call last):" and "ValueError: boom" in rest
    assert rest[-1] == "Stack (most recent call)"
    assert logging.Formatter("%(message)s").format(record).split("\n")[1:] == rest


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_request_lines_are_written_once_per_turn_in_order_and_as_logging_writes_them(
        log_format: str) -> None:
    """`studio serve`'s handler (studio.logs.Lines) writes the lines of one turn of the event
    loop in one write, in the order given (a thread's too), and a request line handed to it
    whole reads exactly as the same line logged through a record; outside a loop a line is
    written at once."""
    import io
    import logging
    import logging.config

    from studio import logs

    saved_handlers, saved_level = logging.root.handlers[:], logging.root.level
    writes: list[str] = []

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    stream = Stream()
    config = logs.dict_config(log_format)
    config["handlers"]["stderr"]["stream"] = stream
    try:
        logging.config.dictConfig(config)
        lines = logs.Lines.configured
        assert lines is not None and logging.root.handlers == [lines]

        async def one_turn() -> list[str]:
            logs.request_line("GET", "/leases/{lease_id}", 200, 1.25, None)
            logging.getLogger("studio.change").info("a change")
            logs.request_line("POST", "/leases", 201, 14.2, "actor-1")
            # A thread's line while the loop's write is due joins that write.
            thread = threading.Thread(
                target=logging.getLogger("studio.change").info, args=("from a thread",))
            thread.start()
            thread.join()
            before = list(writes)  # nothing written within the turn
            await anyio.sleep(0)
            await anyio.sleep(0)
            return before

        assert anyio.run(one_turn) == []
        assert len(writes) == 1, writes
        text = writes[0].splitlines()
        assert [line.split(" ", 3)[-1] if log_format == "text" else json.loads(line)["message"]
                for line in text] == [
            "studio.request GET /leases/{lease_id} 200 1.2ms actor_id=-" if log_format == "text"
            else "GET /leases/{lease_id} 200 1.2ms",
            "studio.change a change" if log_format == "text" else "a change",
            "studio.request POST /leases 201 14.2ms actor_id=actor-1" if log_format == "text"
            else "POST /leases 201 14.2ms",
            "studio.change from a thread" if log_format == "text" else "from a thread"]

        # The same line through a record, as logging writes it when another handler listens.
        writes.clear()
        listening = logging.NullHandler()
        logging.getLogger("studio.request").addHandler(listening)
        try:
            logs.request_line("POST", "/leases", 201, 14.2, "actor-1")
        finally:
            logging.getLogger("studio.request").removeHandler(listening)
        logs.request_line("POST", "/leases", 201, 14.2, "actor-1")  # handed over whole
        assert len(writes) == 2  # outside a loop: each at once
        through_record, whole = (line.rstrip("\n") for line in writes)
        if log_format == "json":
            through_record, whole = json.loads(through_record), json.loads(whole)
            assert through_record.pop("ts")[:19] == whole.pop("ts")[:19]
        else:
            assert through_record[:19] == whole[:19]
            through_record, whole = through_record[24:], whole[24:]
        assert through_record == whole
    finally:
        logging.root.handlers[:] = saved_handlers
        logging.root.setLevel(saved_level)
        logs.Lines.configured = None

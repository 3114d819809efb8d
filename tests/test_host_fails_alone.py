"""A host fails alone: no write waits for the whole cluster, a paused host holds nothing for
long, and one request is one email whatever the database or the mail server does meanwhile.

The paused host is a real `studio serve` process stopped with SIGSTOP while one of its
connections is inside a transaction (found in pg_stat_activity); the slow mail server is a
real SMTP server that answers the end of DATA late.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import threading
import time
import uuid
from contextlib import closing
from typing import Any

import anyio
import httpx
import pytest

from studio.config import Settings
from studio.mail import outbox
from studio.runtime.worker import Delivery, Worker
from studio.store import presence
from studio.store.dialect import account_lock, lock_key
from tests import backends
from tests.conftest import (
    ADA,
    BEN,
    Running,
    days_ahead,
    execute,
    lease_body,
    rows,
    running,
    scalar,
    sign_in,
    start_server,
    studio_command,
)
from tests.mailserver import Inbox, MailServer
from tests.paused_host import APPLICATION_NAME, paused_host
from tests.test_sending import send_body, send_row, wait_for, with_mail

DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "20"}]}
TODAY = dt.datetime.now(dt.UTC).date().isoformat()


# --- a paused host -----------------------------------------------------------------------------


def _frozen_in_a_transaction(db_path: Any, host: Any, account: str) -> int | None:
    """Stop `host` (SIGSTOP); the pid of its database session left idle inside a transaction
    that holds `account`'s lock, else None (and the host is running again)."""
    key = lock_key(account)
    high, low = (key >> 32) & 0xFFFF_FFFF, key & 0xFFFF_FFFF
    os.killpg(host.process.pid, signal.SIGSTOP)
    time.sleep(0.05)  # a statement under way finishes; its session then waits, idle
    found = rows(db_path, "SELECT activity.pid FROM pg_stat_activity activity"
                          " JOIN pg_locks locks ON locks.pid = activity.pid"
                          " WHERE activity.application_name = 'host-a'"
                          " AND activity.state = 'idle in transaction'"
                          " AND locks.locktype = 'advisory' AND locks.granted"
                          " AND locks.classid::bigint = ? AND locks.objid::bigint = ?",
                 high, low)
    if found:
        return found[0][0]
    os.killpg(host.process.pid, signal.SIGCONT)
    return None


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@backends.postgres_only
def test_a_host_paused_inside_a_transaction_holds_up_no_other_account_and_its_own_briefly(
        tmp_path: Any) -> None:
    db_path = tmp_path / "studio.db"
    backends.use_seeded(db_path)
    with contextlib.ExitStack() as stack:
        host_a = start_server(db_path, PGAPPNAME="host-a")
        stack.callback(host_a.stop)
        host_b = start_server(db_path, PGAPPNAME="host-b")
        stack.callback(host_b.stop)
        _pause_host_a(db_path, host_a, host_b, stack)


def _pause_host_a(db_path: Any, host_a: Any, host_b: Any, stack: contextlib.ExitStack) -> None:
    ada_id = scalar(db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    made: list[str] = []  # every draft a host acknowledged
    stop = threading.Event()

    def ada_writes_through_a() -> None:
        client = sign_in(host_a.url)
        client.timeout = httpx.Timeout(120)
        try:
            while not stop.is_set():
                try:
                    reply = client.post("/invoices", json=DRAFT)
                except httpx.HTTPError:
                    continue
                if reply.status_code == 201:
                    made.append(reply.json()["id"])
        finally:
            client.close()

    writer = threading.Thread(target=ada_writes_through_a, daemon=True)
    writer.start()
    stack.callback(writer.join, 130)
    stack.callback(stop.set)
    try:
        frozen = None
        for _ in range(400):
            frozen = _frozen_in_a_transaction(db_path, host_a, account_lock(ada_id))
            if frozen is not None:
                break
            time.sleep(0.003 * (_ % 7))
        assert frozen is not None, "host A was never caught inside a transaction"

        # Another account's write through host B goes on at once.
        with closing(sign_in(host_b.url, BEN)) as ben:
            started = time.monotonic()
            reply = ben.post("/invoices", json=DRAFT)
            ben_took = time.monotonic() - started
            assert reply.status_code == 201, reply.text
            assert ben_took < 2.0, f"Ben's draft waited {ben_took:.1f} s for a paused host"
            assert httpx.get(host_b.url + "/healthz", timeout=10).status_code == 200
        # The same account's write through B gets in once A's transaction is ended.
        with closing(sign_in(host_b.url, ADA)) as ada:
            ada.timeout = httpx.Timeout(70)
            started = time.monotonic()
            reply = ada.post("/invoices", json=DRAFT)
            ada_took = time.monotonic() - started
            assert reply.status_code in (201, 503), reply.text
            while reply.status_code == 503:  # busy: Retry-After, never a hang
                assert reply.headers["Retry-After"]
                assert time.monotonic() - started < 60, "Ada's draft did not get in in a minute"
                time.sleep(1)
                reply = ada.post("/invoices", json=DRAFT)
            ada_took = time.monotonic() - started
            assert reply.status_code == 201, reply.text
            assert ada_took < 60
            assert scalar(db_path, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ?",
                          frozen) == 0, "the paused host's session was not ended"
    finally:
        os.killpg(host_a.process.pid, signal.SIGCONT)
    try:
        # Host A, back, reconnects by itself and serves.
        deadline = time.monotonic() + 30
        count_before = len(made)
        while len(made) == count_before:
            assert time.monotonic() < deadline, "host A did not serve again after its pause"
            time.sleep(0.1)
    finally:
        stop.set()
        writer.join(130)
    # Nothing acknowledged was lost, and every series still adds up.
    kept = {row[0] for row in rows(db_path, "SELECT id FROM invoices WHERE owner_id = ?",
                                   ada_id)}
    assert set(made) <= kept
    audit = studio_command(db_path, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr


# --- one email per request ----------------------------------------------------------------


@pytest.fixture
async def quiet(settings: Settings, smtp: MailServer) -> Any:
    """A studio with a mail server whose own worker does not run: the deliveries are the
    test's."""
    async with running(with_mail(settings, smtp, embedded_worker=False)) as started:
        yield started


async def delivery_of(studio: Running, name: str) -> tuple[Delivery, presence.Presence]:
    """A worker's delivery as another process would run it, its presence held."""
    settings = studio.settings
    here = presence.Presence(name, str(settings.db_path.resolve()),
                             settings.database_url or None)
    return Delivery(studio.studio.db, settings, name), await here.start()


async def queue_send(studio: Running, request_id: str) -> str:
    client = await studio.signed_in()
    reply = await client.post(f"/invoices/{studio.invoice_ids()[0]}/send",
                              json=send_body(request_id))
    assert reply.status_code == 202, reply.text
    return reply.json()["send_id"]


async def handed_over(studio: Running, send: dict[str, Any]) -> None:
    """The send's worker was let end the message (`outbox.still_held`): the server may have it."""
    assert await studio.studio.db.write(outbox.still_held, send["id"], send["claim"], 600.0)


@pytest.mark.anyio
async def test_a_living_workers_timed_out_claim_is_not_taken_over_until_it_dies(
        quiet: Running, inbox: Inbox) -> None:
    """The claim timed out (the database could not take its renewal, the server was slow),
    but its worker lives and was let end the message, so it may have sent the email: nobody
    else sends it. Once that worker is gone, another takes the send over, under the same
    Message-ID."""
    a, a_here = await delivery_of(quiet, "worker-a")
    b, b_here = await delivery_of(quiet, "worker-b")
    try:
        send_id = await queue_send(quiet, "kept-1")
        held = await a.claim()
        assert held is not None and held["id"] == send_id
        await handed_over(quiet, held)
        execute(quiet.settings.db_path, "UPDATE sends SET claim_expires_at = 1 WHERE id = ?",
                send_id)
        assert await b.claim() is None
        assert send_row(quiet, send_id)["claim"] == held["claim"]
        # A records at last: the send is its, and sent once.
        await a.deliver(held)
        assert send_row(quiet, send_id)["status"] == "sent"
        assert len(inbox.messages) == 1

        other = await queue_send(quiet, "kept-2")
        held = await a.claim()
        assert held is not None and held["id"] == other
        await handed_over(quiet, held)
        execute(quiet.settings.db_path, "UPDATE sends SET claim_expires_at = 1 WHERE id = ?",
                other)
        await a_here.close()  # worker A dies before recording anything
        taken = None
        with anyio.fail_after(30):  # its session ends a moment after its connection closes
            while taken is None:
                taken = await b.claim()
                await anyio.sleep(0.05)
        assert taken["id"] == other and taken["attempts"] == 2
        assert taken["message_id"] == send_row(quiet, other)["message_id"]
    finally:
        await a_here.close()
        await b_here.close()


@pytest.mark.anyio
async def test_an_outcome_the_database_cannot_take_is_recorded_once_it_can(
        quiet: Running, inbox: Inbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """The email left; the database refuses the outcome for longer than a claim lasts. The
    worker keeps trying, nobody else sends it, and it is recorded sent once the database is
    back."""
    from studio.store.transactions import DatabaseUnavailable

    a, a_here = await delivery_of(quiet, "worker-a")
    b, b_here = await delivery_of(quiet, "worker-b")
    refusals = 0
    real_write = quiet.studio.db.write

    async def write_while_down(unit: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal refusals
        if unit is outbox.record and refusals < 3:
            refusals += 1
            raise DatabaseUnavailable("connection refused")
        return await real_write(unit, *args, **kwargs)

    try:
        send_id = await queue_send(quiet, "down-1")
        held = await a.claim()
        assert held is not None
        monkeypatch.setattr(quiet.studio.db, "write", write_while_down)
        delivering = anyio.Event()

        async def deliver() -> None:
            await a.deliver(held)
            delivering.set()

        async with anyio.create_task_group() as group:
            group.start_soon(deliver)
            await wait_for(lambda: len(inbox.messages) == 1, what="the email")
            # Meanwhile its claim timed out; another worker finds nothing to take.
            execute(quiet.settings.db_path,
                    "UPDATE sends SET claim_expires_at = 1 WHERE id = ?", send_id)
            assert await b.claim() is None
            with anyio.fail_after(30):
                await delivering.wait()
        assert refusals == 3
        row = send_row(quiet, send_id)
        assert row["status"] == "sent" and row["attempts"] == 1
        assert len(inbox.messages) == 1
    finally:
        await a_here.close()
        await b_here.close()


@pytest.mark.anyio
async def test_a_slow_mail_server_that_answers_after_22_seconds_gets_the_email_once(
        settings: Settings, inbox: Inbox, smtp: MailServer) -> None:
    """RFC 5321 4.5.3.2.6: the reply to the end of DATA is awaited up to 10 minutes."""
    inbox.on_data = lambda message: time.sleep(22)
    async with running(with_mail(settings, smtp, claim_seconds=3.0)) as studio:
        send_id = await queue_send(studio, "slow-1")
        await wait_for(lambda: send_row(studio, send_id)["status"] == "sent", seconds=90,
                       what="the slow server's answer")
        row = send_row(studio, send_id)
        assert row["attempts"] == 1, row["reply"]
    assert len(inbox.messages) == 1


@pytest.mark.anyio
async def test_a_reminder_whose_invoice_was_paid_before_delivery_is_not_delivered(
        quiet: Running, inbox: Inbox) -> None:
    client = await quiet.signed_in()
    invoice_id = quiet.invoice_ids()[0]
    reply = await client.post(f"/invoices/{invoice_id}/remind", json=send_body("late-remind"))
    assert reply.status_code == 202, reply.text
    send_id = reply.json()["send_id"]
    due = (await client.get(f"/invoices/{invoice_id}")).json()["amount_due"]
    paid = await client.post(f"/invoices/{invoice_id}/payments", json={
        "request_id": str(uuid.uuid4()), "amount": due, "date": TODAY,
        "method": "bank_transfer"})
    assert paid.status_code == 201, paid.text
    worker, here = await delivery_of(quiet, "worker-r")
    try:
        held = await worker.claim()
        assert held is not None and held["id"] == send_id
        await worker.deliver(held)
    finally:
        await here.close()
    row = send_row(quiet, send_id)
    number = scalar(quiet.settings.db_path, "SELECT number FROM invoices WHERE id = ?",
                    invoice_id)
    assert row["status"] == "failed" and row["sent_at"] is None
    assert row["reply"] == (f"Not sent: invoice {number} was paid in full after this reminder"
                            " was queued, so nothing is left to pay and the customer was not"
                            " reminded.")
    assert inbox.messages == []



@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@backends.postgres_only
@pytest.mark.anyio
async def test_a_sign_in_held_inside_its_transaction_holds_up_no_other_emails_sign_in(
        settings: Settings) -> None:
    """Each sign-in clears only the counts it holds (its email's, its address's); the old
    counts of everyone else are the sweeper's, a batch at a time, passing over held rows."""
    from studio.accounts import throttle

    async with running(settings.with_changes(sweeper=False)) as studio:
        path = studio.settings.db_path
        old = time.time() - 3600
        execute(path, "INSERT INTO sign_in_attempts (id, email, address, started_at)"
                      " VALUES ('old', ?, '10.0.0.1', ?)", ADA, old)
        paused = backends.connect(path)  # Ada's sign-in on a host stopped mid-transaction
        paused.execute("SET idle_in_transaction_session_timeout = 0")
        paused.execute("BEGIN")
        paused.execute("SELECT 1 FROM sign_in_attempts WHERE id = 'old' FOR UPDATE")
        try:
            started = time.monotonic()
            with anyio.fail_after(30):
                await studio.signed_in(BEN)
            assert time.monotonic() - started < 2.0
            await studio.studio.db.write(throttle.purge, 900.0)  # passes over the held row
            assert scalar(path, "SELECT COUNT(*) FROM sign_in_attempts WHERE id = 'old'") == 1
        finally:
            paused.execute("ROLLBACK")
            paused.close()
        assert await studio.studio.db.read(throttle.stale, 900.0)
        await studio.studio.db.write(throttle.purge, 900.0)
        assert scalar(path, "SELECT COUNT(*) FROM sign_in_attempts WHERE id = 'old'") == 0


@pytest.mark.anyio
async def test_a_send_taken_over_while_its_worker_talks_is_not_ended_by_that_worker(
        quiet: Running, inbox: Inbox) -> None:
    """Just before the final "." the worker asks whether the send is still its own: taken
    over meanwhile (its presence lost while it lived), it drops the connection, and the
    server discards the message, so the worker that took it over sends the one email."""
    a, a_here = await delivery_of(quiet, "worker-a")
    try:
        send_id = await queue_send(quiet, "withheld-1")
        held = await a.claim()
        assert held is not None
        execute(quiet.settings.db_path, "UPDATE sends SET claim = 'worker-b:send:1'"
                " WHERE id = ?", send_id)
        await a.deliver(held)
        assert inbox.messages == []
        row = send_row(quiet, send_id)
        assert (row["status"], row["claim"]) == ("queued", "worker-b:send:1")
    finally:
        await a_here.close()


@backends.postgres_only
def test_a_sign_out_while_a_request_is_being_made_in_its_session_expires_that_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The request reads its session (so a sign-out before it leaves no lease); a sign-out
    that comes after that read waits for the request to commit, then finds and expires its
    lease: no lease stays open on an ended session (invariant 6)."""
    from studio.accounts.auth import Actor, _open_session, add_actor
    from studio.billing import invoices
    from studio.leasing import intents, leases
    from studio.store.postgres import connect, prepare
    from studio.store.transactions import in_transaction

    url = backends.create_database()
    prepare(url)
    making, signing_out = connect(url), connect(url)

    def ground(db: Any) -> tuple[str, str, str]:
        actor_id = add_actor(db, "ada@example.com", "x", password_hash="x")
        session_id = f"s-{uuid.uuid4().hex}"
        _open_session(db, session_id, actor_id, time.time())
        draft, _ = invoices.create_draft(db, actor_id, invoices.parse_draft(DRAFT), None)
        return actor_id, session_id, draft["id"]

    try:
        actor_id, session_id, invoice_id = in_transaction(making, ground)
        intent = intents.Intent("summarize_invoice", (invoice_id,), ("local",), 1)
        checked, go_on = threading.Event(), threading.Event()
        fences = intents._fences

        def paused(*args: Any, **kwargs: Any) -> Any:  # right after the session is read
            checked.set()
            go_on.wait(30)
            return fences(*args, **kwargs)

        monkeypatch.setattr(intents, "_fences", paused)
        made: list[Any] = []
        submit = threading.Thread(target=lambda: made.append(in_transaction(
            making, intents.create_lease, Actor(actor_id, "ada@example.com", session_id),
            intents.LeaseRequest("r1", intent), intents.plan_tasks(intent, ["local"]), 90.0)))
        submit.start()
        assert checked.wait(30)
        ended: list[int] = []
        sign_out = threading.Thread(target=lambda: ended.append(in_transaction(
            signing_out, leases.end_session, session_id)))
        sign_out.start()
        time.sleep(0.5)
        assert sign_out.is_alive()  # waits for the request being made in that session
        go_on.set()
        submit.join(30)
        sign_out.join(30)
        assert made and made[0][1] is True and ended == [1]
        assert [tuple(row) for row in signing_out.execute(
            "SELECT status, ended_reason FROM leases").fetchall()] == [("expired", "signed_out")]
    finally:
        go_on.set()
        making.close()
        signing_out.close()


# --- locks that stay per account: a host paused inside a claim or a sign-in -------------------

# Another account's claim or sign-in, while a host is paused holding one account's.
ANOTHER_ACCOUNT_S = 1.0


def _held_by_the_paused_host(db_path: Any) -> None:
    assert rows(db_path, "SELECT state FROM pg_stat_activity WHERE application_name = ?",
                APPLICATION_NAME) == [("idle in transaction",)]


def _actor(db_path: Any, email: str) -> str:
    return scalar(db_path, "SELECT id FROM actors WHERE email = ?", email)


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@backends.postgres_only
@pytest.mark.anyio
async def test_a_host_paused_inside_a_task_claim_holds_up_no_other_accounts_claim(
        settings: Settings) -> None:
    """The paused claim holds one of Ada's tasks and her turn's row: another worker passes
    over that task and her turn instead of waiting for them, and claims her next and Ben's."""
    async with running(settings.with_changes(embedded_worker=False, sweeper=False)) as studio:
        path = studio.settings.db_path
        for email, count in ((ADA, 2), (BEN, 1)):
            client = await studio.signed_in(email)
            made = await client.post("/leases",
                                     json=lease_body(studio.invoice_ids(email)[:count]))
            assert made.status_code == 201, made.text
        ada, ben = _actor(path, ADA), _actor(path, BEN)
        # Ada's turn comes first: a claim looks at her tasks before Ben's.
        execute(path, "INSERT INTO actor_turns (actor_id, turn) VALUES (?, 1), (?, 2)", ada, ben)
        with paused_host("claim_task", studio.settings) as (_, holding):
            assert holding["actor_id"] == ada
            _held_by_the_paused_host(path)
            worker = Worker(studio.studio.db, studio.studio.providers, studio.settings)
            started = time.monotonic()
            with anyio.fail_after(30):
                claimed = [await worker.claim(), await worker.claim()]
            took = time.monotonic() - started
            assert [task and task.actor_id for task in claimed] == [ada, ben]
            assert took < ANOTHER_ACCOUNT_S, f"the claims waited {took:.1f} s for a paused host"
        assert {task.task_id: task.claim for task in claimed if task} == dict(rows(
            path, "SELECT id, claim FROM tasks WHERE status = 'running'"))
        # Ben went to the back of the queue; Ada's turn was the paused claim's to write.
        assert dict(rows(path, "SELECT actor_id, turn FROM actor_turns")) == {ada: 1, ben: 3}


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@backends.postgres_only
@pytest.mark.anyio
async def test_a_host_paused_inside_a_send_claim_holds_up_no_other_accounts_send(
        quiet: Running) -> None:
    """The paused claim holds one of Ada's sends and her turn's row: another worker claims
    her next send and Ben's without waiting for either."""
    path = quiet.settings.db_path
    ada_sends = [await queue_send(quiet, "ada-1"), await queue_send(quiet, "ada-2")]
    ben = await quiet.signed_in(BEN)
    reply = await ben.post(f"/invoices/{quiet.invoice_ids(BEN)[0]}/send",
                           json=send_body("ben-1"))
    assert reply.status_code == 202, reply.text
    ben_send = reply.json()["send_id"]
    execute(path, "INSERT INTO send_turns (actor_id, turn) VALUES (?, 1), (?, 2)",
            _actor(path, ADA), _actor(path, BEN))
    with paused_host("claim_send", quiet.settings) as (_, holding):
        assert holding["send_id"] == ada_sends[0]
        _held_by_the_paused_host(path)
        b, b_here = await delivery_of(quiet, "worker-b")
        try:
            started = time.monotonic()
            with anyio.fail_after(30):
                claimed = [await b.claim(), await b.claim()]
            took = time.monotonic() - started
        finally:
            await b_here.close()
        assert [send and send["id"] for send in claimed] == [ada_sends[1], ben_send]
        assert took < ANOTHER_ACCOUNT_S, f"the claims waited {took:.1f} s for a paused host"
    assert {send["id"]: send_row(quiet, send["id"])["claim"] for send in claimed if send} == {
        send["id"]: send["claim"] for send in claimed if send}


@pytest.mark.alone  # asserts a bound of seconds: run with the machine to itself
@backends.postgres_only
@pytest.mark.anyio
async def test_a_host_paused_inside_a_sign_in_holds_up_no_sign_in_from_its_address(
        settings: Settings) -> None:
    """Behind one proxy or NAT every sign-in comes from one address: a host paused inside
    Ada's sign-in holds her email's count, and Ben's sign-in from that address goes on."""
    async with running(settings.with_changes(sweeper=False)) as studio:
        path = studio.settings.db_path
        with paused_host("sign_in", studio.settings, email=ADA, address="127.0.0.1"):
            _held_by_the_paused_host(path)
            started = time.monotonic()
            with anyio.fail_after(30):
                await studio.signed_in(BEN)
            took = time.monotonic() - started
            assert took < ANOTHER_ACCOUNT_S, f"Ben's sign-in waited {took:.1f} s"
        assert rows(path, "SELECT email, address FROM sign_in_known") == [(BEN, "127.0.0.1")]
        assert scalar(path, "SELECT COUNT(*) FROM sign_in_attempts") == 0


# --- a paused host's emails --------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_send_claimed_by_a_paused_host_goes_out_once_through_another_worker(
        settings: Settings, smtp: MailServer, inbox: Inbox) -> None:
    """The host claimed the send and stopped before talking to the mail server: once its claim
    times out another worker sends it, although the paused one lives; back, the paused one
    finds the send is no longer its own and sends nothing."""
    async with running(with_mail(settings, smtp, embedded_worker=False,
                                 claim_seconds=1.0)) as studio:
        send_id = await queue_send(studio, "paused-1")
        with paused_host("deliver", studio.settings) as (host, holding):
            assert holding["send_id"] == send_id
            b, b_here = await delivery_of(studio, "worker-b")
            try:
                taken = None
                with anyio.fail_after(10):  # once the paused host's claim timed out
                    while taken is None:
                        taken = await b.claim()
                        await anyio.sleep(0.05)
                assert taken["id"] == send_id and taken["attempts"] == 2
                await b.deliver(taken)
            finally:
                await b_here.close()
            assert send_row(studio, send_id)["status"] == "sent"
            assert len(inbox.messages) == 1
            os.kill(host.pid, signal.SIGCONT)
            assert host.stdout is not None
            with anyio.fail_after(60):
                back = await anyio.to_thread.run_sync(host.stdout.readline)
            assert json.loads(back) == {"delivered": True}, host.stderr and host.stderr.read()
        row = send_row(studio, send_id)
        assert (row["status"], row["attempts"], row["claim"]) == ("sent", 2, None)
        assert len(inbox.messages) == 1
        assert inbox.message_ids() == [row["message_id"]]

"""One request is one email when things break: the studio killed with SIGKILL before the email
left and after the mail server took it, and the mail server away for a long while."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from studio.config import Settings
from tests.conftest import (
    ADA,
    Server,
    execute,
    rows,
    running,
    scalar,
    sign_in,
    start_server,
    wait_until,
)
from tests.mailserver import Inbox, MailServer
from tests.test_sending import SENDER, send_body, wait_for, with_mail


def mail_env(smtp: MailServer) -> dict[str, str]:
    # Claims time out in 2 s, and the reply to a message's end is awaited 3 s, so a killed
    # studio's send is taken over quickly.
    return {"STUDIO_SMTP_URL": smtp.url, "STUDIO_MAIL_FROM": SENDER,
            "STUDIO_CLAIM_SECONDS": "2", "STUDIO_SEND_RETRY_CAP_SECONDS": "2",
            "STUDIO_SMTP_DATA_TIMEOUT_SECONDS": "3"}


def the_send(db_path: Path) -> Any:
    found = rows(db_path, "SELECT * FROM sends")
    assert len(found) == 1, found
    return found[0]


def first_invoice(db_path: Path) -> str:
    return scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                           " owner_id WHERE email = ? AND status = 'issued' ORDER BY number",
                  ADA)


def queue_one(server: Server, db_path: Path) -> str:
    client = sign_in(server.url)
    try:
        reply = client.post(f"/invoices/{first_invoice(db_path)}/send", json=send_body())
    finally:
        client.close()
    assert reply.status_code == 202, reply.text
    return reply.json()["send_id"]


def test_killed_between_queueing_and_delivery_the_send_leaves_exactly_once(
        tmp_path: Path) -> None:
    db_path = tmp_path / "studio.db"
    inbox = Inbox()
    smtp = MailServer(inbox)  # not started: the mail server is down
    server = start_server(db_path, "--demo", **mail_env(smtp))
    try:
        send_id = queue_one(server, db_path)
    finally:
        server.crash()  # kill -9, right after the 202
    assert the_send(db_path)["status"] == "queued" and inbox.messages == []

    smtp.start()
    server = start_server(db_path, **mail_env(smtp))
    try:
        wait_until(lambda: the_send(db_path)["status"] == "sent", 30, "the delivery")
        time.sleep(2.0)  # a second copy would have had time to arrive
    finally:
        server.stop()
        smtp.stop()
    assert inbox.message_ids() == [f"<send-{send_id}@studio.test>"]
    assert "Traceback" not in server.log(), server.log()


def test_killed_after_the_server_took_the_email_the_retry_carries_the_same_message_id(
        tmp_path: Path) -> None:
    """The mail server has the message, the studio dies before it can record that: nothing
    can tell it apart from a message lost on the way, so it is sent again. Exactly two copies
    arrive, with one Message-ID, which is how mail clients and servers recognise the second
    as the same message."""
    db_path = tmp_path / "studio.db"
    inbox = Inbox()
    smtp = MailServer(inbox)
    smtp.start()
    server = start_server(db_path, "--demo", **mail_env(smtp))
    killed: list[int] = []

    def kill_the_studio(message: Any) -> None:
        if not killed:  # only the first try: the server took it, the studio never hears
            killed.append(server.process.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, signal.SIGKILL)

    inbox.on_data = kill_the_studio
    try:
        send_id = queue_one(server, db_path)
        wait_until(lambda: server.process.poll() is not None, 30, "the studio to be killed")
        stranded = the_send(db_path)
        assert stranded["status"] == "queued" and stranded["claim"] is not None
        assert len(inbox.messages) == 1

        server = start_server(db_path, **mail_env(smtp))
        wait_until(lambda: the_send(db_path)["status"] == "sent", 30, "the second try")
        time.sleep(2.0)
    finally:
        server.stop()
        smtp.stop()
    assert inbox.message_ids() == [f"<send-{send_id}@studio.test>"] * 2
    assert the_send(db_path)["attempts"] == 2


def test_a_send_whose_studio_died_on_its_try_days_ago_is_given_up_not_sent_again(
        tmp_path: Path) -> None:
    """The studio is killed as the mail server takes the email, and the send is not looked
    at again until more than three days after it was queued: the next studio fails it in
    plain words instead of trying it for ever, and no second copy leaves."""
    db_path = tmp_path / "studio.db"
    inbox = Inbox()
    smtp = MailServer(inbox)
    smtp.start()
    server = start_server(db_path, "--demo", **mail_env(smtp))

    def kill_the_studio(message: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGKILL)

    inbox.on_data = kill_the_studio
    try:
        send_id = queue_one(server, db_path)
        wait_until(lambda: server.process.poll() is not None, 30, "the studio to be killed")
        stranded = the_send(db_path)
        assert stranded["status"] == "queued" and stranded["claim"] is not None
        assert stranded["attempts"] == 1 and len(inbox.messages) == 1
        # As if it had waited four days for a studio to come back.
        execute(db_path, "UPDATE sends SET created_at = created_at - ? WHERE id = ?",
                4 * 86400, send_id)

        server = start_server(db_path, **mail_env(smtp))
        wait_until(lambda: the_send(db_path)["status"] != "queued", 30, "the send to end")
        given_up = the_send(db_path)
    finally:
        server.stop()
        smtp.stop()
    assert given_up["status"] == "failed" and given_up["sent_at"] is None, dict(given_up)
    assert given_up["attempts"] == 1
    assert given_up["reply"].startswith(
        "No answer was recorded from the mail server; tried once over 3 days"), given_up["reply"]
    assert inbox.message_ids() == [f"<send-{send_id}@studio.test>"]
    assert "Traceback" not in server.log(), server.log()


@pytest.mark.anyio
async def test_a_send_queued_while_the_server_was_long_down_leaves_within_a_minute_of_its_return(
        settings: Settings) -> None:
    inbox = Inbox()
    smtp = MailServer(inbox)  # down
    async with running(with_mail(settings, smtp)) as studio:
        assert studio.settings.send_retry_cap_seconds == 30.0  # the default cap
        client = await studio.signed_in()
        invoice_id = studio.invoice_ids()[0]
        send_id = (await client.post(f"/invoices/{invoice_id}/send", json=send_body())
                   ).json()["send_id"]
        path = studio.settings.db_path

        def tried_at_the_cap() -> bool:
            row = rows(path, "SELECT * FROM sends WHERE id = ?", send_id)[0]
            return row["attempts"] >= 21 and row["claim"] is None

        await wait_for(lambda: scalar(path, "SELECT reply FROM sends WHERE id = ?", send_id),
                       what="a first try's outcome")
        # As if the server had been down for an hour: many tries made, the wait at its cap.
        asked = time.time()
        # A second try may hold the send already: either way the next outcome is the 21st try's.
        execute(path, "UPDATE sends SET attempts = attempts + 19, next_attempt_at = 0"
                " WHERE id = ?", send_id)
        await wait_for(tried_at_the_cap, what="a try at the cap")
        row = rows(path, "SELECT * FROM sends WHERE id = ?", send_id)[0]
        assert row["status"] == "queued" and "Connection" in row["reply"]
        assert asked + 29.5 <= row["next_attempt_at"] <= time.time() + 30.5  # the cap
        smtp.start()
        back = time.monotonic()
        try:
            await wait_for(lambda: len(inbox.messages) == 1, seconds=60, what="delivery")
            took = time.monotonic() - back
            assert took <= 60, took  # within a minute of the server's return
            await wait_for(lambda: scalar(path, "SELECT status FROM sends WHERE id = ?",
                                          send_id) == "sent", what="the record")
        finally:
            smtp.stop()
        await anyio.sleep(0)


@pytest.mark.parametrize("refusal", [b"454 4.7.0 TLS not available now", b"501 5.5.4 Syntax"])
def test_a_server_that_refuses_starttls_gets_its_connection_closed(refusal: bytes) -> None:
    """A server that offers STARTTLS and then refuses it: the studio gives up on that try and
    closes the connection, rather than leaving the socket open for the garbage collector."""
    import smtplib
    import socket
    import threading

    from studio.addresses import mail_server
    from studio.mail import smtp

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    heard: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            conn.sendall(b"220 mail.test ready\r\n")
            reader = conn.makefile("rb")
            reader.readline()  # EHLO
            conn.sendall(b"250-mail.test\r\n250 STARTTLS\r\n")
            heard.append(reader.readline())  # STARTTLS
            conn.sendall(refusal + b"\r\n")
            heard.append(reader.read())  # what follows until the studio hangs up

    server = threading.Thread(target=serve)
    server.start()
    try:
        with pytest.raises(smtplib.SMTPResponseException):
            smtp._connect(mail_server(f"smtp://127.0.0.1:{port}"), timeout=10)
        server.join(10)
        assert not server.is_alive(), "the studio kept the connection open"
    finally:
        listener.close()
    assert heard[0].upper().startswith(b"STARTTLS")
    assert heard[1] == b""  # closed at once, nothing more said

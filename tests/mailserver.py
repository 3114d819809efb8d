"""A real SMTP server (aiosmtpd) on loopback for the tests that send email, and its
fixtures (registered in tests/conftest.py)."""

from __future__ import annotations

import email
import email.policy
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller


class Inbox:
    """What an SMTP server on loopback received; it may refuse, or run a hook on DATA."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        # Each message's envelope as the server was told it: (MAIL FROM, RCPT TOs, options).
        self.envelopes: list[tuple[str, list[str], list[str]]] = []
        self.refuse_rcpt = ""  # e.g. "550 5.1.1 No such mailbox"
        self.on_data: Any = None
        self.lock = threading.Lock()

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          options: list[str]) -> str:
        if self.refuse_rcpt:
            return self.refuse_rcpt
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.lock:
            self.messages.append(message)  # type: ignore[arg-type]
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos),
                                   list(envelope.mail_options)))
        if self.on_data is not None:
            self.on_data(message)
        return "250 2.0.0 Ok: queued"

    def message_ids(self) -> list[str]:
        with self.lock:
            return [message["Message-ID"] for message in self.messages]


class MailServer:
    """aiosmtpd on 127.0.0.1 at a port that stays the same while it is stopped and started;
    with `smtputf8` it offers SMTPUTF8 (addresses beyond ASCII before the @)."""

    def __init__(self, inbox: Inbox, port: int | None = None, smtputf8: bool = False) -> None:
        from tests.conftest import free_port  # conftest imports this module for its fixtures

        self.inbox = inbox
        self.port = port or free_port()
        self.smtputf8 = smtputf8
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port,
                                     enable_SMTPUTF8=self.smtputf8)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"


@pytest.fixture
def inbox() -> Inbox:
    return Inbox()


@pytest.fixture
def smtp(inbox: Inbox) -> Iterator[MailServer]:
    server = MailServer(inbox)
    server.start()
    try:
        yield server
    finally:
        server.stop()

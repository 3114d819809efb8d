"""Email: the mail server the settings name, an invoice's message built from its send, and
one SMTP conversation that says how it ended.

The conversation runs on a thread (smtplib blocks) and never inside a transaction; its outcome
is one of three: sent, try again later (a 4xx reply or the server unreachable), or failed for
good (a 5xx reply), always with the server's own words.

Addresses are kept as the person wrote them, letters of any script included. The mail server
is told a domain in its IDNA form (`xn--...`, which every server reads); a local part (before
the @) beyond ASCII can only go with SMTPUTF8, and only to a server that offers it.
"""

from __future__ import annotations

import email.utils
import re
import smtplib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8

from studio.addresses import MailServer, header_address, is_address, needs_smtputf8, wire_address

# How long each step of a conversation waits, as RFC 5321 4.5.3.2 says: a mail server that
# keeps a message and answers late must not be given it again. A connection that does not open
# is a server away, tried again soon.
CONNECT_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 300.0  # the greeting, MAIL, RCPT and every other command: 5 minutes
DATA_INITIATION_TIMEOUT_S = 120.0  # DATA's 354: 2 minutes
DATA_BLOCK_TIMEOUT_S = 180.0  # sending the message: 3 minutes each block
DATA_TERMINATION_TIMEOUT_S = 600.0  # the reply to the final ".": 10 minutes
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
MAX_LINE = 998  # RFC 5322's longest line of a message, its CR LF left out


def build(send: dict[str, str], mail_from: str, attachment: tuple[str, bytes],
          created_at: float, reply_to: str = "") -> EmailMessage:
    """The email of a send: its words as stored, the document attached."""
    message = EmailMessage(policy=SMTP)
    message["From"] = mail_from
    message["To"] = header_address(send["recipient"])
    if send["cc"]:
        message["Cc"] = ", ".join(header_address(a) for a in send["cc"].split(", ") if a)
    # Only in ASCII: a reply address alone must not make the email need SMTPUTF8.
    if reply_to and is_address(reply_to) and not needs_smtputf8(reply_to):
        message["Reply-To"] = wire_address(reply_to)
    message["Subject"] = send["subject"]
    message["Date"] = email.utils.formatdate(created_at)
    message["Message-ID"] = send["message_id"]
    # Quoted-printable: words beyond ASCII, and a paragraph typed as one line longer than
    # the 998 characters a line of mail may hold, reach servers that take only 7-bit intact.
    words = send["message"]
    plain = words.isascii() and all(len(line) <= MAX_LINE for line in words.splitlines())
    message.set_content(words, cte="7bit" if plain else "quoted-printable")
    filename, content = attachment
    message.add_attachment(content, maintype="application", subtype="pdf", filename=filename)
    return message


@dataclass(frozen=True)
class Outcome:
    """How one try ended: `sent`, `retry` (try again later) or `failed` (for good)."""

    status: str
    reply: str


def judged(code: int, text: bytes | str) -> Outcome:
    """A reply's meaning by its first digit: 2 sent, 4 later, 5 never."""
    words = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    reply = f"{code} {' '.join(words.split())}".strip()
    if 200 <= code < 300:
        return Outcome("sent", reply)
    return Outcome("failed" if 500 <= code < 600 else "retry", reply)


class Withheld(Exception):
    """The message was not ended: `still_ours` said the send is no longer this worker's."""


def deliver(server: MailServer, message: EmailMessage, timeout: float = REPLY_TIMEOUT_S,
            still_ours: Callable[[], bool] | None = None,
            data_timeout: float = DATA_TERMINATION_TIMEOUT_S) -> Outcome:
    """One SMTP conversation, blocking: the message to every recipient, or the reason not.
    Some recipients refused while others took it is `sent`, the refusals in the reply.
    `still_ours`, asked just before the final "." that makes the server take the message,
    may withhold it: the connection is dropped and the server discards what it was sent."""
    recipients = [address for _, address in email.utils.getaddresses(
        [str(message["To"] or ""), str(message["Cc"] or "")]) if address]
    sender = email.utils.parseaddr(message["From"])[1]
    try:
        client = _connect(server, timeout)
        try:
            return _conversation(client, server, sender, recipients, message, still_ours,
                                 data_timeout)
        except Withheld:
            client.close()
            return Outcome("retry", "Not sent: this try was stopped before the message was"
                                    " complete, since the send was no longer this worker's")
        finally:
            try:
                client.quit()
            except (smtplib.SMTPException, OSError):
                client.close()
    except smtplib.SMTPResponseException as error:
        return judged(error.smtp_code, error.smtp_error)
    except (UnicodeError, ValueError) as error:
        # An address or header the mail server cannot be given: no later try would differ.
        return Outcome("failed", "Not sent: this email holds an address or words that email"
                                 f" cannot carry ({type(error).__name__}: {error})")
    except (smtplib.SMTPException, OSError) as error:
        # Refused, reset, timed out, a name that does not resolve yet: the server may be back.
        return Outcome("retry", f"{type(error).__name__}: {error}".strip())


class _Client(smtplib.SMTP):
    """smtplib's client, whose connection opens within CONNECT_TIMEOUT_S and then waits for
    each reply as long as its `timeout`."""

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, min(timeout, CONNECT_TIMEOUT_S))
        sock.settimeout(timeout)
        return sock


class _TlsClient(smtplib.SMTP_SSL):
    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, min(timeout, CONNECT_TIMEOUT_S))
        sock.settimeout(timeout)
        return sock


def _data(client: smtplib.SMTP, payload: bytes, still_ours: Callable[[], bool] | None = None,
          data_timeout: float = DATA_TERMINATION_TIMEOUT_S) -> tuple[int, bytes]:
    """DATA as smtplib sends it, each of its three waits as long as RFC 5321 says: the reply
    to the final "." may take 10 minutes, and a server that took the message answers then."""
    assert client.sock is not None
    waited = client.sock.gettimeout()
    try:
        client.sock.settimeout(DATA_INITIATION_TIMEOUT_S)
        client.putcmd("data")
        code, reply = client.getreply()
        if code != 354:
            raise smtplib.SMTPDataError(code, reply)
        lines = re.sub(rb"\r\n|\n|\r(?!\n)", b"\r\n", payload)
        lines = re.sub(rb"(?m)^\.", b"..", lines)  # a line's leading dot doubled
        if not lines.endswith(b"\r\n"):
            lines += b"\r\n"
        client.sock.settimeout(DATA_BLOCK_TIMEOUT_S)
        client.send(lines)
        if still_ours is not None and not still_ours():
            raise Withheld
        client.send(b".\r\n")
        client.sock.settimeout(data_timeout)
        return client.getreply()
    finally:
        if client.sock is not None:
            client.sock.settimeout(waited)


def _connect(server: MailServer, timeout: float) -> smtplib.SMTP:
    tls = ssl.create_default_context()
    if server.scheme == "smtps":
        return _TlsClient(server.host, server.port, timeout=timeout, context=tls)
    client = _Client(server.host, server.port, timeout=timeout)
    try:
        client.ehlo_or_helo_if_needed()
        if client.has_extn("starttls"):
            client.starttls(context=tls)
            client.ehlo()
    except BaseException:
        client.close()  # a greeting or STARTTLS refused: the socket is not left open
        raise
    return client


def _conversation(client: smtplib.SMTP, server: MailServer, sender: str,
                  recipients: list[str], message: EmailMessage,
                  still_ours: Callable[[], bool] | None = None,
                  data_timeout: float = DATA_TERMINATION_TIMEOUT_S) -> Outcome:
    client.ehlo_or_helo_if_needed()
    if server.user:
        if client.sock is not None and not isinstance(client.sock, ssl.SSLSocket) \
                and server.host not in LOOPBACK:
            return Outcome("retry", "the mail server offers no TLS, so the password was not"
                                    " sent; use smtps:// or a server that offers STARTTLS")
        client.login(server.user, server.password)
    beyond_ascii = [address for address in [sender, *recipients] if needs_smtputf8(address)]
    if beyond_ascii and not client.has_extn("smtputf8"):
        return Outcome("failed", "Not sent: the mail server cannot take this address: "
                       + ", ".join(beyond_ascii) + " (letters beyond plain ASCII before the @"
                       " need a server that offers SMTPUTF8, and this one does not). Ask for"
                       " another address, or send through a mail server that takes it.")
    code, text = client.mail(sender, ["SMTPUTF8"] if beyond_ascii else [])
    if code != 250:
        client.rset()
        return judged(code, text)
    refused = []
    for address in recipients:
        code, text = client.rcpt(wire_address(address))
        if code not in (250, 251):
            refused.append((address, judged(code, text)))
    if len(refused) == len(recipients):
        client.rset()
        # Any recipient refused for good fails the send; all only for now, it waits.
        final = [outcome for _, outcome in refused if outcome.status == "failed"]
        worst = (final or [outcome for _, outcome in refused])[0]
        return Outcome(worst.status, "; ".join(f"{a}: {o.reply}" for a, o in refused))
    code, text = _data(client, message.as_bytes(policy=SMTPUTF8) if beyond_ascii
                       else message.as_bytes(), still_ours, data_timeout)
    outcome = judged(code, text)
    if outcome.status == "sent" and refused:
        return Outcome("sent", outcome.reply + "; not delivered to "
                       + "; ".join(f"{a}: {o.reply}" for a, o in refused))
    return outcome


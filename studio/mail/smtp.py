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
import functools
import re
import smtplib
import socket
import ssl
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8
from urllib.parse import unquote, urlsplit

import idna

# How long each step of a conversation waits, as RFC 5321 4.5.3.2 says: a mail server that
# keeps a message and answers late must not be given it again. A connection that does not open
# is a server away, tried again soon.
CONNECT_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 300.0  # the greeting, MAIL, RCPT and every other command: 5 minutes
DATA_INITIATION_TIMEOUT_S = 120.0  # DATA's 354: 2 minutes
DATA_BLOCK_TIMEOUT_S = 180.0  # sending the message: 3 minutes each block
DATA_TERMINATION_TIMEOUT_S = 600.0  # the reply to the final ".": 10 minutes
DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
LOOPBACK = {"localhost", "127.0.0.1", "::1"}
MAX_ADDRESS = 254  # RFC 5321's longest path, less its angle brackets
MAX_LOCAL = 64  # RFC 5321's longest local part
MAX_LINE = 998  # RFC 5322's longest line of a message, its CR LF left out
# What may stand between the dots before the @ (RFC 5322's atext); any letter beyond ASCII is
# taken as well (RFC 6531), checked one by one in `address_fault`.
ATEXT = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]")
# What IDNA (UTS 46) maps to a full stop: mail reads each as the dot between two labels.
FULL_STOPS = str.maketrans(dict.fromkeys("\u3002\uff0e\uff61", "."))
# A last label a resolver reads as a number (`1`, `0x7f`): the domain is then an IP address.
NUMBER_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


class MailSettingError(ValueError):
    """STUDIO_SMTP_URL or STUDIO_MAIL_FROM cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class MailServer:
    """Where mail goes: `smtp://` talks STARTTLS when the server offers it, `smtps://` TLS
    from the first byte."""

    scheme: str
    host: str
    port: int
    user: str = ""
    password: str = field(default="", repr=False)

    def __str__(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{self.scheme}://{who}{self.host}:{self.port}"  # never the password


def mail_server(url: str) -> MailServer:
    """STUDIO_SMTP_URL read: `smtp://user:pass@host:port` or `smtps://...`."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise MailSettingError("STUDIO_SMTP_URL is not a URL; write it as"
                               " smtp://user:password@host:587 or smtps://...:465") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise MailSettingError("STUDIO_SMTP_URL must start smtp:// (STARTTLS when the server"
                               " offers it) or smtps:// (TLS) and name a host")
    return MailServer(parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme],
                      unquote(parts.username or ""), unquote(parts.password or ""))


@functools.lru_cache(maxsize=1024)
def ascii_domain(domain: str) -> str | None:
    """The domain as mail servers are told it: IDNA (`exämple.de` is `xn--exmple-cua.de`),
    or None when it is no name the internet could hold (an empty label, a hyphen first or
    last, a character no script has). ASCII is left as written."""
    try:
        encoded = idna.encode(domain, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None
    return domain if domain.isascii() else encoded


class NotAnAddress(ValueError):
    """Why a text is no address the studio keeps or sends to, in a person's words."""


def address(value: str) -> str:
    """`value` trimmed, if it is an address by `address_fault`'s rule; else NotAnAddress.
    The domain's other full stops (`。`, `．`, `｡`) are written as `.`: mail reads them so, and
    the address kept and shown must be the one mailed (`a@evil.com。example.com` is kept as
    `a@evil.com.example.com`, which is where it would go)."""
    local, at, domain = value.strip().rpartition("@")
    trimmed = f"{local}{at}{domain.translate(FULL_STOPS)}"
    fault = address_fault(trimmed)
    if fault is not None:
        raise NotAnAddress(fault)
    return trimmed


@functools.lru_cache(maxsize=1024)  # a rule of the text alone, asked again at every send
def address_fault(value: str) -> str | None:
    """The one rule for every address the studio keeps (a customer's, the seller's) or sends
    to: why `value` is not one, or None when it is. An address is what mail can carry, as a
    person writes it:

    - one `local@domain`, nothing around it: no name, no `<>`, no quotes, no spaces, no
      commas (a list of copies is split on them);
    - the local part is dot-separated words (no dot first, last or twice in a row) of
      letters and digits of any script and ``!#$%&'*+/=?^_`{|}~-``; letters beyond ASCII go
      only with SMTPUTF8, which most servers offer;
    - the domain is a name the internet could hold, in any script (sent as IDNA, `xn--...`),
      judged as mail reads it, after IDNA (UTS 46) mapping: two or more labels, none empty,
      none starting or ending with a hyphen, the last not a number (`1`, `１`, `0x1`: no IP
      address, however written); its dots written `.`, since `。`, `．` and `｡` are read as
      dots (`address` writes them so) and an address shown with them would be mailed to
      another domain than it seems to name;
    - no `=?` before the @: mail programs read it as the start of an encoded word;
    - no invisible character anywhere (control, format such as a zero-width space, or an
      unassigned one): one could make the address read as another, or break a header;
    - at most 254 characters, 64 before the @, as the mail server is told it (the domain
      in IDNA, a letter beyond ASCII counted in its UTF-8 bytes)."""
    like = "must be one address like name@example.com, without a name, spaces or <>"
    if len(value) > MAX_ADDRESS:
        return f"is longer than an address can be ({MAX_ADDRESS} characters at most)"
    for char in value:
        if unicodedata.category(char)[0] == "C":
            return (f"holds an invisible character (U+{ord(char):04X}), which no address"
                    " holds; type the address again")
    if value.count("@") != 1:
        return like
    local, domain = value.split("@")
    if not local or not domain:
        return like
    for char in local:
        if char.isascii() and char != "." and not ATEXT.fullmatch(char) \
                or not char.isascii() and unicodedata.category(char)[0] == "Z":
            return like
    if "" in local.split("."):
        return "cannot have a dot first or last before the @, or two dots in a row"
    if "=?" in local:
        # An encoded word (RFC 2047): mail programs read it as other text, another address
        # even, in the header the recipient sees.
        return "cannot hold =? before the @: mail programs would read it as other words"
    if domain.translate(FULL_STOPS) != domain:
        return (f"cannot be sent to as written: {domain[:100]}, after the @, holds a dot"
                " other than “.”, which mail reads as “.”; type the address again with “.”")
    wire = ascii_domain(domain)
    labels = domain.split(".")
    if wire is None or len(labels) < 2 or "" in labels \
            or NUMBER_LABEL.fullmatch(wire.rsplit(".", 1)[-1]):
        return (f"cannot be sent to: {domain[:100]}, after the @, is not a name a mail server"
                " can be found by. Check it for a typo, or ask for another address")
    if len(local.encode()) > MAX_LOCAL or len(f"{local}@{wire}".encode()) > MAX_ADDRESS:
        return (f"is longer than an address can be ({MAX_ADDRESS} characters at most,"
                f" {MAX_LOCAL} before the @)")
    return None


def is_address(value: str) -> bool:
    """Whether `value`, as it is, is an address by `address_fault`'s rule."""
    return address_fault(value) is None


def wire_address(address: str) -> str:
    """The address as the mail server is told it: the domain in its IDNA form."""
    local, domain = address.rsplit("@", 1)
    return f"{local}@{ascii_domain(domain) or domain}"


def needs_smtputf8(address: str) -> bool:
    """Letters beyond ASCII before the @, which only SMTPUTF8 can carry."""
    return not wire_address(address).isascii()


def header_address(address: str) -> str:
    """The address in the email's own headers: in ASCII when it can be (the domain as IDNA),
    else as written (the email then goes with SMTPUTF8, which carries it as it is)."""
    return address if needs_smtputf8(address) else wire_address(address)


@functools.lru_cache(maxsize=8)  # one setting, read at every send
def sender_address(mail_from: str) -> str:
    """The address of STUDIO_MAIL_FROM, which may carry a name: `Studio <billing@x.com>`."""
    if "\r" in mail_from or "\n" in mail_from:
        raise MailSettingError("STUDIO_MAIL_FROM must be one line")
    address = email.utils.parseaddr(mail_from)[1]
    # ASCII, so every mail server takes it and the Message-ID can be made of its domain.
    if not is_address(address) or not address.isascii():
        raise MailSettingError("STUDIO_MAIL_FROM must be an email address in plain ASCII, such"
                               " as billing@example.com or 'Studio <billing@example.com>'")
    return address


def message_id(send_id: str, mail_from: str) -> str:
    """The send's Message-ID: the same for every try, so a copy delivered twice after a crash
    is recognisably the same message."""
    return f"<send-{send_id}@{sender_address(mail_from).rsplit('@', 1)[1]}>"


def header_text_fault(value: str) -> str | None:
    """Why `value` cannot be a header's text (a subject), or None: it must stay one line
    when read as mail programs read it, encoded words (`=?utf-8?b?...?=`) decoded, since a
    line break inside one would start a header of its own."""
    # Only an encoded word decodes into other text: without `=?` the text is as it reads.
    read = str(SMTP.header_factory("Subject", value)) if "=?" in value else value
    for char in read:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return (f"holds, in encoded form, an invisible control character"
                    f" (U+{ord(char):04X}); write it as plain words")
    return None


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
    client.ehlo_or_helo_if_needed()
    if client.has_extn("starttls"):
        client.starttls(context=tls)
        client.ehlo()
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


"""Email addresses and the mail settings, judged as text: the one rule every address the
studio keeps or sends to meets (after IDNA mapping, as mail reads it), the forms a mail server
is told, and STUDIO_SMTP_URL and STUDIO_MAIL_FROM read. Nothing here sends; the mail floor
(`studio.mail`) does, and the billing floor keeps addresses by this rule."""

from __future__ import annotations

import email.utils
import functools
import re
import unicodedata
from dataclasses import dataclass, field
from email.policy import SMTP
from urllib.parse import unquote, urlsplit

import idna

from studio import i18n
from studio.errors import N_

DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
MAX_ADDRESS = 254  # RFC 5321's longest path, less its angle brackets
MAX_LOCAL = 64  # RFC 5321's longest local part
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


def address_fault(value: str) -> str | None:
    """Why `value` is not an address the studio keeps or sends to (`_fault`'s rule), in the
    words of the language being spoken, or None when it is one."""
    found = _fault(value)
    if found is None:
        return None
    message, values = found
    return i18n.gettext(message) % values


Fault = tuple[str, dict[str, object]]


@functools.lru_cache(maxsize=1024)  # a rule of the text alone, asked again at every send
def _fault(value: str) -> Fault | None:
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
    like: Fault = (N_("must be one address like name@example.com, without a name, spaces or <>"),
                   {})
    if len(value) > MAX_ADDRESS:
        return (N_("is longer than an address can be (%(most)s characters at most)"),
                {"most": MAX_ADDRESS})
    for char in value:
        if unicodedata.category(char)[0] == "C":
            return (N_("holds an invisible character (%(char)s), which no address holds; type"
                       " the address again"), {"char": f"U+{ord(char):04X}"})
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
        return (N_("cannot have a dot first or last before the @, or two dots in a row"), {})
    if "=?" in local:
        # An encoded word (RFC 2047): mail programs read it as other text, another address
        # even, in the header the recipient sees.
        return (N_("cannot hold =? before the @: mail programs would read it as other words"),
                {})
    if domain.translate(FULL_STOPS) != domain:
        return (N_("cannot be sent to as written: %(domain)s, after the @, holds a dot other"
                   " than “.”, which mail reads as “.”; type the address again with “.”"),
                {"domain": domain[:100]})
    wire = ascii_domain(domain)
    labels = domain.split(".")
    if wire is None or len(labels) < 2 or "" in labels \
            or NUMBER_LABEL.fullmatch(wire.rsplit(".", 1)[-1]):
        return (N_("cannot be sent to: %(domain)s, after the @, is not a name a mail server can"
                   " be found by. Check it for a typo, or ask for another address"),
                {"domain": domain[:100]})
    if len(local.encode()) > MAX_LOCAL or len(f"{local}@{wire}".encode()) > MAX_ADDRESS:
        return (N_("is longer than an address can be (%(most)s characters at most, %(local)s"
                   " before the @)"), {"most": MAX_ADDRESS, "local": MAX_LOCAL})
    return None


def is_address(value: str) -> bool:
    """Whether `value`, as it is, is an address by `address_fault`'s rule."""
    return _fault(value) is None


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

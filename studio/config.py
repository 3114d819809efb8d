"""Settings, read once from the environment."""

from __future__ import annotations

import email.utils
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from studio.addresses import MailSettingError, mail_server, sender_address


def _number(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a number, not {raw!r}") from None
    if value < 0:
        raise SystemExit(f"{name} must not be negative, not {raw!r}")
    return value


@dataclass(frozen=True)
class Settings:
    db_path: Path = Path("studio.db")
    # postgresql://user:pass@host:5432/name: PostgreSQL instead of the SQLite file.
    database_url: str = field(default="", repr=False)
    db_pool_size: int = 10
    secret_key: str = ""
    lease_seconds: float = 90.0
    provider_delay_s: float = 0.0
    max_batch_tasks: int = 600
    claim_seconds: float = 30.0
    worker_slots: int = 4
    openai_base_url: str = ""
    openai_model: str = "gpt-4o-mini"
    openai_api_key: str = field(default="", repr=False)
    demo: bool = False
    # A web-only process (STUDIO_EMBEDDED_WORKER=0) leaves the tasks to `studio worker`s.
    embedded_worker: bool = True
    # Off only in tests that drive the deadline by hand.
    sweeper: bool = True
    session_idle_seconds: float = 43200.0
    session_max_seconds: float = 604800.0
    client_timeout_seconds: float = 30.0
    max_connections: int = 1000
    max_open_tasks_per_actor: int = 2000
    # Failed sign-ins counted over this window; see studio/accounts/throttle.py for how they
    # combine.
    signin_window_seconds: float = 900.0
    signin_failures_per_pair: int = 5
    signin_failures_per_address: int = 30
    signin_failures_per_email: int = 30
    log_format: str = "text"
    metrics_token: str = field(default="", repr=False)
    # Behind a TLS proxy: trust X-Forwarded-* from it and always mark the cookie Secure.
    proxy_headers: bool = False
    files_dir: Path | None = None  # attachments; None: `<db>.files/` beside the database
    max_upload_bytes: int = 10 * 1024 * 1024
    # Distinct stored bytes per actor: the same file attached twice counts once.
    max_storage_per_actor: int = 1024 ** 3
    max_attachments_per_invoice: int = 50
    # How long a share link opens its invoice, in days.
    share_link_days: float = 90.0
    # smtp://user:pass@host:587 (STARTTLS when offered) or smtps://...; unset: no sending.
    smtp_url: str = field(default="", repr=False)
    mail_from: str = ""
    # A send the mail server could not take yet is tried again after 1, 2, 4 ... s, at most this.
    send_retry_cap_seconds: float = 30.0
    # How long the mail server's reply to the end of a message is awaited (RFC 5321 4.5.3.2.6:
    # 10 minutes); a send is nobody else's for this long once its message is ended.
    smtp_data_timeout_seconds: float = 600.0
    # https://billing.example.com: the address links for people outside (an email's share link)
    # are written with; unset, the address the request reached the studio at.
    public_url: str = ""

    @property
    def files(self) -> Path:
        return self.files_dir or self.db_path.with_name(self.db_path.name + ".files")

    def with_changes(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def from_environment(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    db_path = Path(env.get("STUDIO_DB") or "studio.db")
    return Settings(
        db_path=db_path,
        database_url=env.get("STUDIO_DATABASE_URL", "").strip(),
        db_pool_size=max(1, int(_number(env, "STUDIO_DB_POOL_SIZE", 10))),
        secret_key=env.get("STUDIO_SECRET_KEY", ""),
        lease_seconds=_number(env, "STUDIO_LEASE_SECONDS", 90.0) or 90.0,
        provider_delay_s=_number(env, "STUDIO_PROVIDER_DELAY_S", 0.0),
        max_batch_tasks=int(_number(env, "STUDIO_MAX_BATCH_TASKS", 600)) or 600,
        claim_seconds=_number(env, "STUDIO_CLAIM_SECONDS", 30.0) or 30.0,
        worker_slots=max(1, int(_number(env, "STUDIO_WORKER_SLOTS", 4))),
        openai_base_url=env.get("STUDIO_OPENAI_BASE_URL", "").rstrip("/"),
        openai_model=env.get("STUDIO_OPENAI_MODEL") or "gpt-4o-mini",
        openai_api_key=env.get("STUDIO_OPENAI_API_KEY", ""),
        embedded_worker=env.get("STUDIO_EMBEDDED_WORKER", "1") != "0",
        session_idle_seconds=_number(env, "STUDIO_SESSION_IDLE_SECONDS", 43200.0) or 43200.0,
        session_max_seconds=_number(env, "STUDIO_SESSION_MAX_SECONDS", 604800.0) or 604800.0,
        client_timeout_seconds=_number(env, "STUDIO_CLIENT_TIMEOUT_SECONDS", 30.0) or 30.0,
        max_connections=int(_number(env, "STUDIO_MAX_CONNECTIONS", 1000)) or 1000,
        max_open_tasks_per_actor=int(_number(env, "STUDIO_MAX_OPEN_TASKS_PER_ACTOR", 2000))
        or 2000,
        signin_window_seconds=_number(env, "STUDIO_SIGNIN_WINDOW_SECONDS", 900.0) or 900.0,
        signin_failures_per_pair=int(_number(env, "STUDIO_SIGNIN_FAILURES_PER_PAIR", 5)) or 5,
        signin_failures_per_address=int(
            _number(env, "STUDIO_SIGNIN_FAILURES_PER_ADDRESS", 30)) or 30,
        signin_failures_per_email=int(
            _number(env, "STUDIO_SIGNIN_FAILURES_PER_EMAIL", 30)) or 30,
        demo=env.get("STUDIO_DEMO", "0") == "1",
        log_format=_choice(env, "STUDIO_LOG_FORMAT", ("text", "json")),
        metrics_token=env.get("STUDIO_METRICS_TOKEN", "").strip(),
        proxy_headers=env.get("STUDIO_PROXY_HEADERS", "0") == "1",
        files_dir=Path(env["STUDIO_FILES"]) if env.get("STUDIO_FILES") else None,
        max_upload_bytes=int(_number(env, "STUDIO_MAX_UPLOAD_BYTES", 10 * 1024 * 1024))
        or 10 * 1024 * 1024,
        max_storage_per_actor=int(_number(env, "STUDIO_MAX_STORAGE_PER_ACTOR", 1024 ** 3))
        or 1024 ** 3,
        max_attachments_per_invoice=int(
            _number(env, "STUDIO_MAX_ATTACHMENTS_PER_INVOICE", 50)) or 50,
        share_link_days=_number(env, "STUDIO_SHARE_LINK_DAYS", 90.0) or 90.0,
        public_url=_public_url(env),
        **_mail(env),
    )


def _mail(env: dict[str, str]) -> dict[str, object]:
    """The mail server and sender, checked now: a studio that cannot send says so at start."""
    url, mail_from = env.get("STUDIO_SMTP_URL", "").strip(), env.get("STUDIO_MAIL_FROM", "").strip()
    cap = _number(env, "STUDIO_SEND_RETRY_CAP_SECONDS", 30.0) or 30.0
    data = _number(env, "STUDIO_SMTP_DATA_TIMEOUT_SECONDS", 600.0) or 600.0
    if not url:
        return {"send_retry_cap_seconds": cap, "smtp_data_timeout_seconds": data}
    if not mail_from:
        raise SystemExit("STUDIO_SMTP_URL is set, so STUDIO_MAIL_FROM must name the address"
                         " emails come from, such as billing@example.com")
    try:
        mail_server(url)
    except MailSettingError as error:
        raise SystemExit(str(error)) from None
    try:
        sender_address(mail_from)
    except MailSettingError as error:
        raise SystemExit(_one_label(mail_from) or str(error)) from None
    return {"smtp_url": url, "mail_from": mail_from, "send_retry_cap_seconds": cap,
            "smtp_data_timeout_seconds": data}


def _one_label(mail_from: str) -> str:
    """Why a sender on a one-label domain (`studio@localhost`) is refused, and what works."""
    _, at, domain = email.utils.parseaddr(mail_from)[1].rpartition("@")
    if not at or not domain or "." in domain:
        return ""
    return (f"STUDIO_MAIL_FROM={mail_from} cannot be used: the studio sends from a domain of"
            f" two labels or more, and '{domain}' is one. Use an address such as"
            " studio@example.com (fine for a local test server too) or"
            " 'Ada Lovelace Design <billing@example.com>'.")


def _public_url(env: dict[str, str]) -> str:
    """STUDIO_PUBLIC_URL: an absolute http(s) address, perhaps with a path (a studio under
    /billing/ of its site), without a query or fragment a link could not be added to."""
    raw = env.get("STUDIO_PUBLIC_URL", "").strip()
    if not raw:
        return ""
    how = ("STUDIO_PUBLIC_URL must be the address people reach the studio at, such as"
           " https://billing.example.com (a path is fine; no user name, ? or #),"
           f" not {raw!r}")
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 -- a port that is not a number raises here
    except ValueError:
        raise SystemExit(how) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "?" in raw \
            or "#" in raw or parts.username is not None \
            or any(c.isspace() or not c.isprintable() for c in raw):
        raise SystemExit(how)
    return raw.rstrip("/")


def _choice(env: dict[str, str], name: str, allowed: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip().lower() or allowed[0]
    if raw not in allowed:
        raise SystemExit(f"{name} must be one of {', '.join(allowed)}, not {raw!r}")
    return raw

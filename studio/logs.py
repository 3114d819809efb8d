"""Log lines an operator can read or parse: one per request, one per state change.

`STUDIO_LOG_FORMAT=text` (the default) writes `time logger message key=value...`; `json` writes
one JSON object per line. Only ids, codes and numbers are ever passed here: never a cookie,
a password, a key, a request body or a model prompt.

A state change named inside a database transaction is held until that transaction commits
(see `studio.store.transactions.in_transaction`), so a rolled-back change never reaches the log.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import logging.config
import time
from typing import Any

from studio.store.transactions import after_commit

FIELDS = "studio_fields"
# Already said by the text line's message; JSON lines carry every field.
IN_MESSAGE = frozenset({"event", "kind", "id", "from", "to", "method", "route", "status", "ms",
                        "version", "db", "address", "workers", "proxy_headers"})
requests_log = logging.getLogger("studio.request")
_studio_log = logging.getLogger("studio")
changes_log = logging.getLogger("studio.change")


class TextFormatter(logging.Formatter):
    """`time level logger message key=value...`, the time as logging's default prints it."""

    def format(self, record: logging.LogRecord) -> str:
        line = self.line(record.created, record.levelname, record.name, record.getMessage(),
                         getattr(record, FIELDS, None) or {})
        # A traceback and a stack follow on their own lines, as logging's own format has them.
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line

    @staticmethod
    def line(created: float, level: str, name: str, message: str, fields: dict[str, Any]) -> str:
        line = f"{_now(created)} {level} {name} {message}"
        return " ".join([line, *(f"{key}={_text(value)}" for key, value in fields.items()
                                 if key not in IN_MESSAGE)])


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, FIELDS, None) or {}
        if record.exc_info:
            fields = {**fields, "exception": self.formatException(record.exc_info)}
        return self.line(record.created, record.levelname, record.name, record.getMessage(),
                         fields)

    @staticmethod
    def line(created: float, level: str, name: str, message: str, fields: dict[str, Any]) -> str:
        whole = int(created)
        return json.dumps({
            "ts": f"{_second(whole, utc=True)}.{int((created - whole) * 1000):03d}Z",
            "level": level.lower(), "logger": name, "message": message, **fields,
        }, default=str)


class Lines(logging.StreamHandler):  # type: ignore[type-arg]
    """Standard error, written once per turn of the event loop.

    A line per request is on the studio's hottest path, where a write of its own per line
    cost about as much as answering a remembered poll. Lines given during one turn of the event
    loop are written together, in order, as the next turn starts, a fraction of a millisecond
    later; lines from a thread without a running loop are written with them when such a write
    is due, else at once, with any still waiting before them. At exit logging's shutdown
    writes what is left; only a kill -9 can lose the lines of the turn it interrupts (or of
    a loop closed with its write still due, which waits for the next line or the exit)."""

    # The handler `dict_config` made last: `request_line` hands it whole lines.
    configured: Lines | None = None

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._waiting: list[str] = []
        self._flush_on: asyncio.AbstractEventLoop | None = None
        Lines.configured = self

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.add(line)

    def add(self, line: str) -> None:
        with self.lock:
            self._waiting.append(line)
        pending = self._flush_on
        if pending is not None and pending.is_running():
            return  # written by the write already due on that loop's next turn
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._flush_on is not loop:  # once per turn (a closed loop's turn never comes)
            self._flush_on = loop
            loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._flush_on = None
        self.flush()

    def flush(self) -> None:
        with self.lock:
            if self._waiting:
                text = "\n".join(self._waiting) + "\n"
                self._waiting.clear()
                try:
                    self.stream.write(text)
                except Exception:
                    self.handleError(logging.makeLogRecord({"msg": text.rstrip("\n")}))
            super().flush()


def _now(created: float | None = None) -> str:
    """A record's time as the text format prints it: to the millisecond, local time."""
    created = time.time() if created is None else created
    whole = int(created)
    return f"{_second(whole)},{int((created - whole) * 1000):03d}"


@functools.lru_cache(maxsize=4)
def _second(created: int, utc: bool = False) -> str:
    """The whole second a record was made in, as text: formatted once per second, not once
    per line (a line per request is on the hottest path)."""
    if utc:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))


def _text(value: object) -> str:
    text = "-" if value is None else str(value)
    return json.dumps(text) if (" " in text or not text) else text


# A line per request is on the hottest path: the record need not look up its caller's
# source line, thread or process name, none of which the studio's formats print.
logging._srcfile = None  # type: ignore[attr-defined]
logging.logThreads = False
logging.logProcesses = False
logging.logMultiprocessing = False


def dict_config(log_format: str) -> dict[str, Any]:
    """A logging.dictConfig for `studio serve`; uvicorn applies it in every worker process."""
    formatter = "studio.logs.JsonFormatter" if log_format == "json" else \
        "studio.logs.TextFormatter"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"studio": {"()": formatter}},
        "handlers": {"stderr": {"class": "studio.logs.Lines", "formatter": "studio",
                                "stream": "ext://sys.stderr"}},
        # Libraries speak only at WARNING: a PDF's font subsetting alone says ~75 INFO lines.
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        # The studio's own lines, and uvicorn's (through the same handler, in the same format).
        "loggers": {name: {"handlers": [], "propagate": True, "level": "INFO"}
                    for name in ("studio", "uvicorn", "uvicorn.error", "uvicorn.access")},
    }


def configure(log_format: str) -> None:
    logging.config.dictConfig(dict_config(log_format))


def request_line(method: str, route: str, status: int, ms: float, actor_id: str | None) -> None:
    """One line per answered request: the route template, never the path's ids or query."""
    message = f"{method} {route} {status} {ms:.1f}ms"
    lines = Lines.configured
    # As logging would write it, without a record, when only `lines` hears it: the hottest
    # path's one line (the text format's in one step: its fields but the actor are in the
    # message).
    direct = lines is not None and _only_to(lines)
    if direct and type(lines.formatter) is TextFormatter:
        lines.add(f"{_now()} INFO {requests_log.name} {message} actor_id={_text(actor_id)}")
        return
    fields = {"method": method, "route": route, "status": status, "ms": round(ms, 1),
              "actor_id": actor_id}
    if direct and isinstance(lines.formatter, (TextFormatter, JsonFormatter)):
        lines.add(lines.formatter.line(time.time(), "INFO", requests_log.name, message, fields))
        return
    requests_log.info("%s", message, extra={FIELDS: fields})


def _only_to(lines: Lines) -> bool:
    """Whether a request line reaches `lines` alone, as `dict_config` sets up (a test or an
    operator adding a handler gets records again)."""
    return requests_log.isEnabledFor(logging.INFO) and not requests_log.handlers \
        and not _studio_log.handlers and logging.root.handlers == [lines] \
        and not requests_log.filters and not lines.filters


def state_change(kind: str, id: str, actor: str | None, from_: str | None, to: str,
                 reason: str | None = None, **ids: str) -> None:
    """One line per state change of a lease, an invoice's issue or an attachment.

    Called inside a transaction it waits for the commit; outside one it is written at once.
    `ids` names related records (an invoice id, a task id); only ids, never content.
    """
    fields: dict[str, Any] = {"event": "state_change", "kind": kind, "id": id, "actor_id": actor,
                              "from": from_, "to": to, "reason": reason, **ids}
    after_commit(functools.partial(_write_change, fields))


def _write_change(fields: dict[str, Any]) -> None:
    changes_log.info("%s %s %s -> %s", fields["kind"], fields["id"], fields["from"] or "new",
                     fields["to"], extra={FIELDS: fields})




"""Log lines an operator can read or parse: one per request, one per state change.

`STUDIO_LOG_FORMAT=text` (the default) writes `time logger message key=value...`; `json` writes
one JSON object per line. Only ids, codes and numbers are ever passed here: never a cookie,
a password, a key, a request body or a model prompt.

A state change named inside a database transaction is held until that transaction commits
(see `studio.store.transactions.in_transaction`), so a rolled-back change never reaches the log.
"""

from __future__ import annotations

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
changes_log = logging.getLogger("studio.change")


class TextFormatter(logging.Formatter):
    """`time level logger message key=value...`, the time as logging's default prints it."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_second(int(record.created))},{int(record.msecs):03d} {record.levelname} " \
               f"{record.name} {record.getMessage()}"
        fields = getattr(record, FIELDS, None) or {}
        line = " ".join([line, *(f"{key}={_text(value)}" for key, value in fields.items()
                                 if key not in IN_MESSAGE)])
        # A traceback and a stack follow on their own lines, as logging's own format has them.
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": f"{_second(int(record.created), utc=True)}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


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
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "studio",
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
    fields = {"method": method, "route": route, "status": status, "ms": round(ms, 1),
              "actor_id": actor_id}
    requests_log.info("%s %s %s %.1fms", method, route, status, ms, extra={FIELDS: fields})


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




"""What a download writes to the server's log: its request line, and nothing from the
libraries that made it (third-party loggers speak only at WARNING and above)."""

from __future__ import annotations

import json
import logging
import logging.config
from contextlib import closing
from pathlib import Path

from studio import logs
from tests.conftest import ADA, Server, scalar, sign_in, start_server, wait_until


def answered(server: Server) -> list[tuple[str, str, int]]:
    """The request lines the server's log holds so far, each written whole."""
    text = server.log()
    whole = text[:text.rfind("\n") + 1].splitlines()
    lines = [json.loads(line) for line in whole if line.startswith("{")]
    return [(line["method"], line["route"], line["status"]) for line in lines
            if line["logger"] == "studio.request"]


def test_a_pdf_download_writes_one_request_line_and_no_library_chatter(tmp_path: Path) -> None:
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo", STUDIO_LOG_FORMAT="json")
    try:
        client = sign_in(server.url)
        with closing(client):
            invoice = scalar(db_path, "SELECT invoices.id FROM invoices JOIN actors ON"
                             " actors.id = owner_id WHERE email = ? AND status = 'issued'"
                             " ORDER BY number", ADA)
            # A request line is written as its answer ends, a moment after the client has it.
            wait_until(lambda: ("POST", "/login", 200) in answered(server), 30,
                       "the sign-in's request line")
            before = len(server.log().splitlines())
            pdf = client.get(f"/invoices/{invoice}.pdf")
            assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
            wait_until(lambda: ("GET", "/invoices/{invoice_id}.pdf", 200) in answered(server), 30,
                       "the download's request line")
            written = server.log().splitlines()[before:]
    finally:
        server.stop()

    lines = [json.loads(line) for line in written if line.strip()]
    assert [line["logger"] for line in lines if not line["logger"].startswith("studio")] == []
    requests = [line for line in lines if line["logger"] == "studio.request"]
    assert [(r["route"], r["status"]) for r in requests] == [("/invoices/{invoice_id}.pdf", 200)]
    assert "fontTools" not in server.log()


def test_library_loggers_speak_at_warning_and_the_studio_and_uvicorn_at_info() -> None:
    logging.config.dictConfig(logs.dict_config("text"))
    try:
        for name in ("fontTools.subset", "fpdf.output", "PIL.PngImagePlugin", "httpx",
                     "aiosqlite", "multipart.multipart"):
            assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
            assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
        for name in ("studio.request", "studio.change", "studio.cli", "uvicorn.error"):
            assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False,
                                   "root": {"handlers": [], "level": "WARNING"},
                                   "loggers": {"studio": {"level": "NOTSET"}}})

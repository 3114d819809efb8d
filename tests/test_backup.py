"""Back up while 8 clients write, restore into a new folder, serve it: the same data answers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from studio.accounts.auth import SESSION_COOKIE
from tests import backends
from tests.conftest import (
    ADA,
    BEN,
    days_ahead,
    lease_body,
    rows,
    scalar,
    sign_in,
    start_server,
    studio_command,
    wait_until,
)
from tests.test_attachments import DEMO_SHA256, png

CLIENTS = 8


@dataclass
class UnderLoad:
    """What the clients were told before the backup began, and what the backup answered."""

    copied: subprocess.CompletedProcess[str]
    cookies: dict[str, str]
    receipt: dict[str, Any]
    before: list[tuple[str, str]]  # (email, lease id) acknowledged before the backup began
    numbered: list[tuple[str, str]]  # (invoice id, number) acknowledged before it
    acknowledged: int  # leases acknowledged in all, before, during and after it
    statuses: set[int]


def back_up_under_load(live: Path, take_backup: Callable[[], subprocess.CompletedProcess[str]]
                       ) -> UnderLoad:
    """`studio serve` on `live` (no STUDIO_SECRET_KEY: the key is generated) while 8 clients
    submit requests and issue invoices; `take_backup` runs while they do."""
    server = start_server(live, "--demo", STUDIO_SECRET_KEY="")
    stop = threading.Event()
    acknowledged: list[tuple[float, str, str]] = []  # (when, email, lease id)
    issued: list[tuple[float, str, str]] = []  # (when, invoice id, number)
    statuses: list[int] = []
    try:
        clients = [sign_in(server.url, ADA if n % 2 == 0 else BEN) for n in range(CLIENTS)]
        cookies = {ADA: clients[0].cookies[SESSION_COOKIE], BEN: clients[1].cookies[SESSION_COOKIE]}
        invoices = {email: [r[0] for r in rows(live, "SELECT invoices.id FROM invoices JOIN"
                                                     " actors ON actors.id = owner_id"
                                                     " WHERE email = ?", email)]
                    for email in (ADA, BEN)}

        draft = next(i for i in clients[0].get("/invoices").json() if i["status"] == "draft")
        receipt = clients[0].post(f"/invoices/{draft['id']}/attachments",
                                  data={"client_key": "backup-receipt"},
                                  files={"file": ("r.png", png(3), "image/png")})
        assert receipt.status_code == 201

        def issue_one(n: int, i: int) -> None:
            """Ben's half of the load issues invoices: a draft, then its issue, by id."""
            made = clients[n].post("/invoices", json={
                "request_id": f"draft-{n}-{i}", "customer": "Load Ltd", "currency": "GBP",
                "due_date": days_ahead(61), "line_items": [
                    {"description": "Work", "quantity": "1", "unit_price": "10.00"}]})
            statuses.append(made.status_code)
            reply = clients[n].post(f"/invoices/{made.json()['id']}/issue",
                                    json={"request_id": f"issue-{n}-{i}", "revision": 1})
            statuses.append(reply.status_code)
            if reply.status_code == 201:
                issued.append((time.monotonic(), reply.json()["invoice_id"],
                               reply.json()["number"]))

        def submit_until_stopped(n: int) -> None:
            email = ADA if n % 2 == 0 else BEN
            i = 0
            while not stop.is_set():
                if email == BEN:
                    issue_one(n, i)
                    i += 1
                    continue
                body = lease_body([invoices[email][i % len(invoices[email])]], f"load-{n}-{i}")
                reply = clients[n].post("/leases", json=body)
                statuses.append(reply.status_code)
                if reply.status_code == 201:
                    acknowledged.append((time.monotonic(), email, reply.json()["lease_id"]))
                i += 1

        with ThreadPoolExecutor(CLIENTS) as pool:
            running = [pool.submit(submit_until_stopped, n) for n in range(CLIENTS)]
            wait_until(lambda: len(acknowledged) >= 40, 60, "the load to get going")
            began = time.monotonic()
            before = [(email, lease_id) for when, email, lease_id in list(acknowledged)
                      if when < began]
            numbered = [(invoice, number) for when, invoice, number in list(issued)
                        if when < began]
            previous = os.umask(0o022)  # a typical host: new files world-readable unless asked
            try:
                copied = take_backup()
            finally:
                os.umask(previous)
            count_at_end = len(acknowledged)
            wait_until(lambda: len(acknowledged) > count_at_end + 10, 60,
                       "writes to go on after the backup")
            stop.set()
            for future in running:
                future.result()
        for client in clients:
            client.close()
    finally:
        stop.set()
        server.stop()
    return UnderLoad(copied, cookies, receipt.json(), before, numbered, len(acknowledged),
                     set(statuses))


@backends.sqlite_only
def test_a_backup_under_load_restores_every_write_acknowledged_before_it(tmp_path):
    live = tmp_path / "live" / "studio.db"
    live.parent.mkdir()
    load = back_up_under_load(live, lambda: studio_command(
        live, "backup", str(tmp_path / "backup"), timeout=120, STUDIO_SECRET_KEY=""))
    copied, statuses, numbered, before = load.copied, load.statuses, load.numbered, load.before
    cookies, receipt = load.cookies, load.receipt

    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert "integrity: ok" in copied.stdout and "files: ok" in copied.stdout
    assert "key file:" in copied.stdout
    assert statuses == {201}, sorted(statuses)
    assert numbered, "invoices were issued before the backup began"
    backup = tmp_path / "backup"
    assert sorted(p.name for p in backup.iterdir()) == [
        "studio.db", "studio.db.files", "studio.db.secret"]
    # The copy holds the password hashes and every invoice: its owner's only.
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (
        backup, backup / "studio.db", backup / "studio.db.secret")} == {
        "backup": 0o700, "studio.db": 0o600, "studio.db.secret": 0o600}
    checked = studio_command(backup / "studio.db", "check", STUDIO_SECRET_KEY="")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[0].startswith("integrity: ok")
    named = 1 + len(DEMO_SHA256)  # the upload and the demo's receipts
    assert "audit: ok" in checked.stdout
    assert f"files: ok ({named} files named by rows" in checked.stdout

    # Restore as the README says: copy the backup folder's files into a new folder, serve it.
    restored = tmp_path / "restored"
    shutil.copytree(backup, restored)
    restored_db = restored / "studio.db"
    kept = {r[0] for r in rows(restored_db, "SELECT id FROM leases")}
    assert {lease_id for _, lease_id in before} <= kept
    for invoice, number in numbered:  # every acknowledged number, as it was answered
        assert rows(restored_db, "SELECT number FROM invoices WHERE id = ?",
                    invoice)[0][0] == number
    assert len(kept) < load.acknowledged  # the copy is one moment, not the end of the load
    server = start_server(restored_db, STUDIO_SECRET_KEY="")
    try:
        # The old cookies still sign in: the sessions and the key file came along.
        for email in (ADA, BEN):
            with closing(httpx.Client(base_url=server.url, timeout=30,
                                      cookies={SESSION_COOKIE: cookies[email]},
                                      headers={"Accept": "application/json"})) as client:
                assert client.get("/invoices").status_code == 200
                if email == ADA:  # the receipt's bytes came along with its row
                    served = client.get(f"/attachments/{receipt['attachment_id']}")
                    assert served.status_code == 200 and served.content == png(3)
                for owner, lease_id in before:
                    if owner == email:
                        reply = client.get(f"/leases/{lease_id}")
                        assert reply.status_code == 200, reply.text
                        assert reply.json()["lease_id"] == lease_id
    finally:
        server.stop()
    assert scalar(restored_db, "SELECT COUNT(*) FROM leases") >= len(before)

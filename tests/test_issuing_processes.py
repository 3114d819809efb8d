"""Issuing across real processes: racing servers and kill -9 never make a gap or a repeat."""

from __future__ import annotations

import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from studio.accounts.auth import add_actor
from studio.billing import profiles
from studio.store.db import connect_to
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import days_ahead, rows, start_server, studio_command

CAROL = "carol@example.com"
PASSWORD = "carol-password"
DRAFT = {"customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
         "line_items": [{"description": "Work", "quantity": "1", "unit_price": "100.00",
                         "tax_rate": "20"}]}


def with_carol(db_path: Path) -> None:
    """A fresh actor with a seller profile and no invoices: her series starts at 1."""
    db = connect_to(backends.settings(db_path))
    try:
        def add(db: Any) -> None:
            profiles.save(db, add_actor(db, CAROL, PASSWORD), {
                "name": "Carol Co", "address": "1 Road", "vat_id": ""})
        in_transaction(db, add)
    finally:
        db.close()


def carol(url: str) -> httpx.Client:
    client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=60)
    assert client.post("/login", json={"email": CAROL, "password": PASSWORD}).status_code == 200
    return client


def sequences(db_path: Path) -> list[int]:
    return [r[0] for r in rows(db_path, "SELECT sequence FROM invoices JOIN actors ON"
                                        " actors.id = owner_id WHERE email = ? AND sequence"
                                        " IS NOT NULL ORDER BY sequence", CAROL)]


def audit(db_path: Path) -> subprocess.CompletedProcess[str]:
    return studio_command(db_path, "audit")


def test_30_drafts_issued_twice_each_from_two_processes_get_exactly_1_to_30(tmp_path):
    db_path = tmp_path / "studio.db"
    with_carol(db_path)
    first, second = start_server(db_path), start_server(db_path)
    clients = [carol(first.url), carol(second.url)]
    try:
        drafts = [clients[0].post("/invoices", json=DRAFT).json() for _ in range(30)]
        sends = [(draft, f"issue-{draft['id']}", n % 2) for draft in drafts for n in range(2)]

        def send(job: tuple[dict, str, int]) -> httpx.Response:
            draft, request_id, server = job
            return clients[server].post(f"/invoices/{draft['id']}/issue",
                                        json={"request_id": request_id, "revision": 1})

        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(send, sends))

        assert sorted(r.status_code for r in replies) == [200] * 30 + [201] * 30
        by_draft: dict[str, set[str]] = {}
        for reply in replies:
            by_draft.setdefault(reply.json()["invoice_id"], set()).add(reply.json()["number"])
        assert all(len(numbers) == 1 for numbers in by_draft.values())
        numbers = sorted(int(next(iter(n)).rsplit("-", 1)[1]) for n in by_draft.values())
        assert numbers == list(range(1, 31))
        assert sequences(db_path) == list(range(1, 31))
        assert audit(db_path).returncode == 0
    finally:
        for client in clients:
            client.close()
        first.stop()
        second.stop()


def issue_until_killed(url: str, cookie: str, acknowledged: dict[str, tuple[str, str]],
                       sent: dict[str, str], stop: threading.Event,
                       progress: threading.Condition) -> None:
    """Make and issue drafts one after another, each with its own ids, until the server dies.
    `sent` records every issue request id sent, `acknowledged` those that were answered."""
    client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=10,
                          cookies={"studio_session": cookie})
    try:
        while not stop.is_set():
            draft_request = str(uuid.uuid4())
            draft = client.post("/invoices", json={**DRAFT, "request_id": draft_request})
            draft_id = draft.json()["id"]
            issue_request = f"issue-{draft_id}"
            sent[issue_request] = draft_id
            reply = client.post(f"/invoices/{draft_id}/issue",
                                json={"request_id": issue_request, "revision": 1})
            assert reply.status_code == 201, reply.text
            with progress:
                acknowledged[issue_request] = (draft_id, reply.json()["number"])
                progress.notify_all()
    except httpx.HTTPError:
        pass  # the server was killed under this request
    finally:
        client.close()


def test_kill_9_while_issuing_loses_no_number_and_resubmitting_finishes_the_rest(tmp_path):
    db_path = tmp_path / "studio.db"
    with_carol(db_path)
    server = start_server(db_path)
    login = carol(server.url)
    cookie = login.cookies["studio_session"]
    login.close()
    acknowledged: dict[str, tuple[str, str]] = {}
    sent: dict[str, str] = {}
    for cycle in range(3):
        stop, progress = threading.Event(), threading.Condition()
        threads = [threading.Thread(target=issue_until_killed, args=(
            server.url, cookie, acknowledged, sent, stop, progress)) for _ in range(4)]
        for thread in threads:
            thread.start()
        with progress:
            wanted = len(acknowledged) + 3 + cycle * 2
            assert progress.wait_for(lambda w=wanted: len(acknowledged) >= w, timeout=60)
        server.process.kill()
        server.process.wait(10)
        stop.set()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive()
        server = start_server(db_path)

        # Every acknowledged number is still where it was answered.
        for draft_id, number in acknowledged.values():
            assert rows(db_path, "SELECT number FROM invoices WHERE id = ?",
                        draft_id)[0][0] == number
        # Resubmitting every id sent finishes what the crash interrupted, and changes nothing
        # that was answered.
        client = httpx.Client(base_url=server.url, headers={"Accept": "application/json"},
                              timeout=30, cookies={"studio_session": cookie})
        with client:
            for request_id, draft_id in sent.items():
                reply = client.post(f"/invoices/{draft_id}/issue",
                                    json={"request_id": request_id, "revision": 1})
                assert reply.status_code in (200, 201), reply.text
                if request_id in acknowledged:
                    assert reply.status_code == 200
                    assert reply.json()["number"] == acknowledged[request_id][1]
                acknowledged[request_id] = (draft_id, reply.json()["number"])
        issued = sequences(db_path)
        assert issued == list(range(1, len(issued) + 1)) and len(issued) == len(sent)
    server.stop()
    result = audit(db_path)
    assert result.returncode == 0, result.stdout
    assert len(sent) >= 12

"""A host that stops (SIGSTOP) at a chosen point of a studio unit, for the tests of a host that
fails alone: run as `python -m tests.paused_host <what> <settings as JSON>` by `paused_host`.

- `claim_task`, `claim_send`, `sign_in`: the unit runs inside its write transaction, which the
  host leaves open when it stops, holding whatever the unit locked (as a host paused between
  two statements does); back, it rolls it back if its session still lives.
- `deliver`: a delivery worker, its presence held, claims a send and stops before talking to
  the mail server; back, it goes on with its delivery as a worker would.

Each prints one JSON line saying what it holds, then stops itself; `deliver` prints a second
line once back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from studio.config import Settings

ROOT = Path(__file__).resolve().parents[1]
APPLICATION_NAME = "paused-host"


def _stop(holding: dict[str, Any]) -> None:
    print(json.dumps(holding), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)


def _inside_a_transaction(what: str, settings: Settings, args: dict[str, Any]) -> None:
    from studio.accounts import throttle
    from studio.mail import outbox
    from studio.runtime.worker import claim_task
    from studio.store.postgres import connect

    db = connect(settings.database_url)
    db.execute("BEGIN IMMEDIATE")
    if what == "claim_task":
        task = claim_task(db, "paused-host:claim", 60.0, take_over=False)
        holding = {"task_id": task and task.task_id, "actor_id": task and task.actor_id}
    elif what == "claim_send":
        send = outbox.claim(db, outbox.new_claim("paused-host"), 60.0)
        holding = {"send_id": send and send["id"]}
    else:
        holding = {"attempt": throttle.begin(db, args["email"], args["address"], False,
                                             throttle.Limits())}
    _stop(holding)
    with contextlib.suppress(Exception):  # its session was ended meanwhile, as it should be
        db.execute("ROLLBACK")


async def _deliver(settings: Settings) -> None:
    from studio.runtime.worker import Delivery
    from studio.store import presence
    from studio.store.db import open_database

    db = await open_database(settings).open()
    here = await presence.Presence("paused-host", str(settings.db_path.resolve()),
                                   settings.database_url or None).start()
    try:
        delivery = Delivery(db, settings, "paused-host")
        send = await delivery.claim()
        _stop({"send_id": send and send["id"], "claim": send and send["claim"]})
        if send is not None:
            await delivery.deliver(send)
        print(json.dumps({"delivered": send is not None}), flush=True)
    finally:
        await here.close()
        await db.close()


def main() -> None:
    what, given = sys.argv[1], json.loads(sys.argv[2])
    settings = Settings(db_path=Path(given.pop("db_path")), **given.pop("settings"))
    if what == "deliver":
        asyncio.run(_deliver(settings))
    else:
        _inside_a_transaction(what, settings, given)


@contextlib.contextmanager
def paused_host(what: str, settings: Settings, **args: Any) -> Iterator[
        tuple[subprocess.Popen[str], dict[str, Any]]]:
    """A host process stopped at `what` (see above), with what it holds; let go (SIGCONT) and
    waited for at the end."""
    given = {"db_path": str(settings.db_path), **args, "settings": {
        "database_url": settings.database_url, "smtp_url": settings.smtp_url,
        "mail_from": settings.mail_from, "claim_seconds": settings.claim_seconds}}
    with subprocess.Popen(
            [sys.executable, "-m", "tests.paused_host", what, json.dumps(given)], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PGAPPNAME": APPLICATION_NAME}) as host:
        try:
            assert host.stdout is not None and host.stderr is not None
            line = host.stdout.readline()
            if not line:
                host.wait(30)
                raise AssertionError(f"the host exited before it stopped:\n{host.stderr.read()}")
            deadline = time.monotonic() + 10
            while _state(host.pid) != "T":
                assert time.monotonic() < deadline, "the host never stopped"
                time.sleep(0.01)
            yield host, json.loads(line)
        finally:
            os.kill(host.pid, signal.SIGCONT)
            try:
                host.communicate(timeout=60)
            finally:
                if host.poll() is None:
                    host.kill()


def _state(pid: int) -> str:
    """A process's state letter: T when stopped."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


if __name__ == "__main__":
    main()

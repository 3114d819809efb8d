"""The studio's own clock across real processes: two `studio worker`s catching up the periods
of a recurring invoice, one killed with SIGKILL in the middle, make each period once."""

from __future__ import annotations

import datetime as dt
import os
import signal
from contextlib import closing

from tests.conftest import (
    rows,
    scalar,
    sign_in,
    start_server,
    start_worker,
    studio_command,
    wait_until,
)

PERIODS = 40


def test_two_workers_and_a_kill_9_in_a_catch_up_make_each_period_once(tmp_path):
    db_path = tmp_path / "studio.db"
    # The web process runs no worker: only the two worker processes keep the clock.
    server = start_server(db_path, "--demo", STUDIO_EMBEDDED_WORKER="0")
    doomed = start_worker(db_path, "doomed")
    survivor = None
    try:
        today = dt.datetime.now(dt.UTC).date()
        starts = today - dt.timedelta(weeks=PERIODS - 1)
        with closing(sign_in(server.url)) as client:
            customer = client.post("/customers", json={"name": "Northwind",
                                                       "email": "ap@northwind.test"})
            made = client.post("/recurring", json={
                "request_id": "rec-1", "customer_id": customer.json()["id"],
                "currency": "EUR", "every": "week", "starts": starts.isoformat(),
                "backfill": True, "action": "issue", "line_items": [
                    {"description": "Weekly support", "quantity": "1",
                     "unit_price": "250.00", "tax_rate": "19"}]})
            assert made.status_code == 201, made.text
        survivor = start_worker(db_path, "survivor")
        count = "SELECT COUNT(*) FROM invoices WHERE recurring_id IS NOT NULL"
        wait_until(lambda: scalar(db_path, count) >= 3, 60, "the catch-up to begin")
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
        wait_until(lambda: scalar(db_path, count) >= PERIODS, 60, "the catch-up to finish")
        made_rows = rows(db_path, "SELECT period_start, sequence, issue_date FROM invoices"
                                  " WHERE recurring_id IS NOT NULL ORDER BY period_start")
        assert [row["period_start"] for row in made_rows] == [
            (starts + dt.timedelta(weeks=n)).isoformat() for n in range(PERIODS)]
        sequences = sorted(row["sequence"] for row in made_rows)
        assert sequences == list(range(sequences[0], sequences[0] + PERIODS))
        assert {row["issue_date"] for row in made_rows} == {today.isoformat()}
        assert scalar(db_path, "SELECT COUNT(*) FROM recurring_periods") == PERIODS
        audit = studio_command(db_path, "audit")
        assert audit.returncode == 0, audit.stdout + audit.stderr
    finally:
        server.stop()
        for worker in (doomed, survivor):
            if worker is not None and worker.poll() is None:
                worker.terminate()
                worker.wait(10)

"""The lease state machine under random interleavings of workers, people and the clock.

The units of `studio.leases` and `studio.worker` run on one SQLite connection with a clock
the test moves, so hypothesis can order completions, cancel, apply, sign-out and the deadline
in every way and shrink any counterexample to the few steps that matter.
"""

from __future__ import annotations

import json
import sqlite3
import uuid

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from studio import leases
from studio.db import MIGRATIONS, in_transaction
from studio.leases import FINAL
from studio.worker import claim_task

LEASE_SECONDS = 60.0
CLAIM_SECONDS = 10.0
INVOICES = 1
CANDIDATES = 2


def fresh_database() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys = ON")
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    return db


class LeaseMachine(RuleBasedStateMachine):
    """One lease of 2 invoices x 2 candidates, owned by Ada; Ben is the other actor."""

    def __init__(self) -> None:
        super().__init__()
        self.db = fresh_database()
        self.now = 1_000.0
        self.ada, self.ben = str(uuid.uuid4()), str(uuid.uuid4())
        self.session = "session-ada"
        for actor in (self.ada, self.ben):
            self.db.execute("INSERT INTO actors VALUES (?, ?, 'x', 0)", (actor, f"{actor}@x"))
        self.db.execute("INSERT INTO sessions VALUES (?, ?, 0)", (self.session, self.ada))
        self.invoices = [str(uuid.uuid4()) for _ in range(INVOICES)]
        for n, invoice in enumerate(self.invoices):
            self.db.execute(
                "INSERT INTO invoices (id, owner_id, number, customer, currency, total, due_date,"
                " line_items) VALUES (?, ?, ?, 'C', 'EUR', '1.00', '2030-01-01', '[]')",
                (invoice, self.ada, f"N-{n}"),
            )
        self.lease = str(uuid.uuid4())
        self.deadline = self.now + LEASE_SECONDS
        self.db.execute(
            "INSERT INTO leases (id, actor_id, session_id, purpose, options, status, deadline_at,"
            " created_at, task_count) VALUES (?, ?, ?, 'summarize_invoice', ?, 'open', ?, ?, ?)",
            (self.lease, self.ada, self.session, json.dumps({}), self.deadline, self.now,
             INVOICES * CANDIDATES),
        )
        position = 0
        for invoice in self.invoices:
            self.db.execute("INSERT INTO lease_invoices VALUES (?, ?, ?)",
                            (self.lease, invoice, position))
            for candidate in range(1, CANDIDATES + 1):
                self.db.execute(
                    "INSERT INTO tasks (id, lease_id, invoice_id, provider, candidate, position)"
                    " VALUES (?, ?, ?, 'local', ?, ?)",
                    (str(uuid.uuid4()), self.lease, invoice, candidate, position),
                )
                position += 1
        self.claims: list[tuple[str, str]] = []  # (claim, task_id) ever taken, live or stale
        self.texts = 0
        self.seen_final: str | None = None
        self.applied_with: dict[str, str] | None = None  # invoice -> summary a valid apply wrote

    def teardown(self) -> None:
        self.db.close()

    def _write(self, unit, *args):
        return in_transaction(self.db, unit, *args)

    def _status(self) -> str:
        row = self.db.execute("SELECT status FROM leases WHERE id = ?", (self.lease,)).fetchone()
        return row[0]

    # --- what workers do ------------------------------------------------------------------

    @rule()
    def claim(self) -> None:
        claim = uuid.uuid4().hex
        task = self._write(claim_task, claim, CLAIM_SECONDS, self.now)
        if task is not None:
            assert self._status() == "open" and self.now < self.deadline
            self.claims.append((claim, task.task_id))

    @rule()
    def claim_and_complete(self) -> None:
        self.claim()
        if self.claims:
            self.complete(0)

    @precondition(lambda self: self.claims)
    @rule(pick=st.integers(min_value=0, max_value=3))
    def complete(self, pick: int) -> None:
        # Mostly the newest claim; sometimes an older, possibly stale one.
        claim, task_id = self.claims[-1 - pick % len(self.claims)]
        self.texts += 1
        status_before = self._status()
        counted = self._write(leases.record_proposal, task_id, claim, self.ada,
                              f"proposal {self.texts}", self.now)
        if counted:
            assert status_before == "open" and self.now < self.deadline

    @precondition(lambda self: self.claims)
    @rule(pick=st.integers(min_value=0, max_value=3), retry=st.booleans())
    def fail(self, pick: int, retry: bool) -> None:
        claim, task_id = self.claims[-1 - pick % len(self.claims)]
        self._write(leases.fail_task, task_id, claim, "provider error", retry, self.now)

    # --- what people and the clock do -----------------------------------------------------

    @rule()
    def cancel(self) -> None:
        self._write(leases.cancel, self.lease, self.ada, self.now)

    @rule(by_ben=st.booleans(), choose_last=st.booleans())
    def apply(self, by_ben: bool, choose_last: bool) -> None:
        status_before = self._status()
        candidates = self.db.execute(
            "SELECT proposals.id, proposals.invoice_id, proposals.summary FROM proposals"
            " JOIN tasks ON tasks.id = proposals.task_id WHERE proposals.lease_id = ?"
            " ORDER BY tasks.position", (self.lease,)).fetchall()
        per_invoice: dict[str, list[sqlite3.Row]] = {}
        for row in candidates:
            per_invoice.setdefault(row["invoice_id"], []).append(row)
        choices = {invoice: rows[-1]["id"] for invoice, rows in per_invoice.items()} \
            if choose_last else {}
        actor = self.ben if by_ben else self.ada
        outcome = self._write(leases.apply, self.lease, actor, choices, self.now)
        if by_ben:
            assert outcome == "lease_not_found"
        if outcome == "applied":
            assert not by_ben and status_before == "proposed" and self.now < self.deadline
            pick = -1 if choose_last else 0
            event(f"applied by a valid apply, choose_last={choose_last}")
            self.applied_with = {inv: rows[pick]["summary"] for inv, rows in per_invoice.items()}

    @rule()
    def sign_out(self) -> None:
        self._write(leases.end_session, self.session, self.now)

    @rule(seconds=st.sampled_from([1.0, 5.0, CLAIM_SECONDS + 1, LEASE_SECONDS / 2]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def sweep(self) -> None:
        self._write(leases.expire_due, self.now)

    # --- the promises ---------------------------------------------------------------------

    @invariant()
    def a_final_state_is_never_left(self) -> None:
        status = self._status()
        event(f"reached {status}")
        if self.seen_final is not None:
            assert status == self.seen_final
        elif status in FINAL:
            self.seen_final = status

    @invariant()
    def the_deadline_is_never_extended(self) -> None:
        deadline = self.db.execute("SELECT deadline_at FROM leases").fetchone()[0]
        assert deadline == self.deadline

    @invariant()
    def invoices_change_only_through_a_valid_apply(self) -> None:
        summaries = dict(self.db.execute("SELECT id, summary FROM invoices").fetchall())
        if self.applied_with is None:
            assert set(summaries.values()) == {""}
            assert self._status() != "applied"
        else:
            assert self._status() == "applied"
            for invoice, summary in summaries.items():
                assert summary == self.applied_with.get(invoice, "")

    @invariant()
    def a_task_never_has_two_proposals(self) -> None:
        worst = self.db.execute(
            "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM proposals"
            " GROUP BY task_id)").fetchone()[0]
        assert worst <= 1
        late = self.db.execute(
            "SELECT COUNT(*) FROM proposals WHERE created_at >= ?", (self.deadline,)
        ).fetchone()[0]
        assert late == 0

    @invariant()
    def a_done_task_has_its_proposal(self) -> None:
        orphans = self.db.execute(
            "SELECT COUNT(*) FROM tasks WHERE status = 'done' AND NOT EXISTS"
            " (SELECT 1 FROM proposals WHERE proposals.task_id = tasks.id)").fetchone()[0]
        assert orphans == 0

    @invariant()
    def proposed_means_every_task_finished_with_a_proposal(self) -> None:
        if self._status() == "proposed":
            waiting = self.db.execute(
                "SELECT COUNT(*) FROM tasks WHERE status IN ('pending', 'running')").fetchone()[0]
            proposals = self.db.execute("SELECT COUNT(*) FROM proposals").fetchone()[0]
            assert waiting == 0 and proposals >= 1


LeaseMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_lease_state_machine_under_random_interleavings = LeaseMachine.TestCase

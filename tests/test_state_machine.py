"""The lease state machine under random interleavings of workers, people and the clock.

The real SQL units (`studio.intents.create_lease`, `studio.worker.claim_task`, and
`record_proposal`, `fail_task`, `cancel`, `apply`, `end_session`, `expire_due` of
`studio.leases`) run on one connection (SQLite, or PostgreSQL on that pass) with a clock the
test moves, so hypothesis
can order completions, cancel, apply, sign-out and the deadline in every way and shrink any
counterexample to the few steps that matter.

Beside the SQL the machine keeps its own small model of every lease, task, proposal, session
and invoice summary, and after every step the database must equal the model. On top of that
it checks the promises directly on the database (a final state is never left, the deadline
never moves, `proposed` means every task finished with a proposal, `failed` means none, an
applied lease wrote exactly the chosen proposals, no proposal is written at or after the
deadline, every refused completion leaves a `late_completion` event).

Hypothesis runs each example with a random subset of the rules switched off (swarm
testing), so the rules are shaped to reach `proposed` and `applied` often in spite of that:
the first leases exist from the start, `workers_catch_up` answers every claimable task at
once, three rules can apply (the owner, the polling review page, odd attempts), a proposed
lease is preferred when one exists, and time mostly moves in small steps against the lease
length. Cancel, sign-out, the deadline (exactly at it, and past it before any sweep), timed
out and stale claims, late completions and wrong actors still interleave. The test counts
how many examples reach each state and outcome and fails if one drops below its floor, so
this coverage cannot silently rot (run with `-s` to see the shares).
"""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from studio.accounts.auth import Actor, _open_session
from studio.errors import Refusal
from studio.leasing import leases
from studio.leasing.intents import Intent, LeaseRequest, create_lease, plan_tasks
from studio.leasing.leases import FINAL, LIVE
from studio.runtime.worker import claim_task
from studio.store.migrations.sqlite import MIGRATIONS
from studio.store.sqlite import apply_migration
from studio.store.transactions import in_transaction
from tests import backends

LEASE_SECONDS = 60.0
CLAIM_SECONDS = 10.0
MAX_LEASES = 6
PURPOSE = "summarize_invoice"

# How often each state and each interesting outcome was reached: examples, not steps.
REACHED: Counter[str] = Counter()


# On PostgreSQL every example runs on one database of this test's, emptied between them and
# read on one connection: a database copied and dropped per example, each met by a new
# connection with cold caches, made the run 2.5 times as long (226 s against 90 s alone).
SHARED = Path(tempfile.gettempdir()) / f"lease-machine-{uuid.uuid4().hex}"
_shared: list[Any] = []  # its one connection, once made


def fresh_database() -> Any:
    """An empty database of the studio's schema: in memory on SQLite, on PostgreSQL the
    test's one database emptied (made the first time as a copy of a migrated template)."""
    if backends.ON_POSTGRES:
        if not _shared:
            backends.use_migrated(SHARED)
            _shared.append(backends.connect(SHARED))
        backends.emptied(_shared[0])
        return _shared[0]
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys = ON")
    for migration in MIGRATIONS:
        apply_migration(db, migration)
    return db


def drop_shared_database() -> None:
    if _shared:
        _shared.pop().close()
        backends.drop(SHARED)


@dataclass
class TaskModel:
    id: str
    lease_id: str
    invoice: str
    provider: str
    position: int
    status: str = "pending"
    claim: str | None = None
    expires: float | None = None
    proposal: tuple[str, str] | None = None  # (proposal id, text)
    applied: bool = False


@dataclass
class LeaseModel:
    id: str
    actor: str
    session: str
    deadline: float
    invoices: list[str]
    tasks: list[TaskModel]
    status: str = "open"
    late_events: int = 0

    def candidates(self) -> dict[str, list[TaskModel]]:
        """Per invoice, the tasks with a proposal in task order, as apply offers them."""
        per_invoice: dict[str, list[TaskModel]] = {}
        for task in sorted(self.tasks, key=lambda t: t.position):
            if task.proposal is not None:
                per_invoice.setdefault(task.invoice, []).append(task)
        return per_invoice


class LeaseMachine(RuleBasedStateMachine):
    """Ada owns two invoices, Ben one; each may open up to a few leases over their own."""

    def __init__(self) -> None:
        super().__init__()
        self.db = fresh_database()
        self.now = 1_000.0
        self.ada, self.ben = str(uuid.uuid4()), str(uuid.uuid4())
        self.turns: dict[str, int] = {}  # actor -> when a task of theirs was last claimed
        self.owned: dict[str, list[str]] = {self.ada: [], self.ben: []}
        self.summaries: dict[str, str] = {}  # the model of every invoice's summary
        for actor, count in ((self.ada, 2), (self.ben, 1)):
            self.db.execute("INSERT INTO actors (id, email, password_hash, created_at)"
                            " VALUES (?, ?, 'x', 0)", (actor, f"{actor}@x"))
            for n in range(count):
                invoice = str(uuid.uuid4())
                self.db.execute(
                    "INSERT INTO invoices (id, owner_id, status, number, customer, currency, net,"
                    " tax, total, due_date, line_items) VALUES (?, ?, 'issued', ?, 'C', 'EUR',"
                    " '1.00', '0.00', '1.00', '2030-01-01', '[]')",
                    (invoice, actor, f"N-{actor[:4]}-{n}"),
                )
                self.owned[actor].append(invoice)
                self.summaries[invoice] = ""
        self.sessions: dict[str, str | None] = {}  # actor -> live session (None: signed out)
        self.last_session: dict[str, str] = {}
        for actor in (self.ada, self.ben):
            self._sign_in(actor)
        self.leases: list[LeaseModel] = []
        self.tasks: dict[str, TaskModel] = {}
        self.requests: dict[str, tuple[str, Intent, str]] = {}  # actor -> (id, intent, lease)
        self.claims: list[tuple[str, str]] = []  # (claim, task_id) ever taken, live or stale
        self.texts = 0
        self.requests_made = 0
        self.reached: set[str] = set()
        self.seen_final: dict[str, str | None] = {}  # lease -> the final status first seen

    def teardown(self) -> None:
        for lease in self.leases:
            self.reached.add(lease.status)
        for name in sorted(self.reached):
            event(name)
        REACHED["examples"] += 1
        REACHED.update(self.reached)
        if not backends.ON_POSTGRES:
            self.db.close()  # PostgreSQL's is the test's, emptied for the next example

    # --- helpers ----------------------------------------------------------------------------

    def _write(self, unit, *args):
        return in_transaction(self.db, unit, *args)

    def _note(self, what: str) -> None:
        self.reached.add(what)

    def _lease(self, lease_id: str) -> LeaseModel:
        return next(lease for lease in self.leases if lease.id == lease_id)

    def _set_status(self, lease: LeaseModel, status: str) -> None:
        assert lease.status not in FINAL, f"the model would leave {lease.status}"
        lease.status = status
        self._note(status)

    def _settle(self, lease: LeaseModel) -> None:
        """The model of `leases.settle`."""
        if any(task.status in ("pending", "running") for task in lease.tasks):
            return
        if lease.status != "open" or lease.deadline <= self.now:
            return
        if any(task.proposal is not None for task in lease.tasks):
            self._set_status(lease, "proposed")
        else:
            self._set_status(lease, "failed")

    def _expire_if_due(self, lease: LeaseModel) -> bool:
        if lease.status in LIVE and lease.deadline <= self.now:
            self._set_status(lease, "expired")
            return True
        return False

    def _late_events(self, lease_id: str) -> list[str]:
        return [row[0] for row in self.db.execute(
            "SELECT detail FROM lease_events WHERE lease_id = ? AND kind = 'late_completion'"
            " ORDER BY id", (lease_id,))]

    def _pick_lease(self, pick: int, prefer: str | None) -> LeaseModel | None:
        pool = [lease for lease in self.leases if lease.status == prefer] if prefer else []
        pool = pool or self.leases
        return pool[pick % len(pool)] if pool else None

    def _other(self, actor: str) -> str:
        return self.ben if actor == self.ada else self.ada

    def _sign_in(self, actor: str) -> None:
        session = f"session-{uuid.uuid4().hex[:8]}"
        self._write(_open_session, session, actor, self.now)
        self.sessions[actor] = session
        self.last_session[actor] = session

    # --- what people do: ask, sign in and out, cancel, apply --------------------------------

    def _open_lease(self, actor: str, mask: int, candidates: int, providers: tuple[str, ...],
                    foreign: bool, replay: bool) -> None:
        session = self.sessions[actor] or self.last_session[actor]
        who = Actor(actor, f"{actor}@x", session)
        if replay and actor in self.requests:
            request_id, intent, lease_id = self.requests[actor]
            receipt, created = self._write(create_lease, who, LeaseRequest(request_id, intent),
                                           plan_tasks(intent, list(intent.providers)),
                                           LEASE_SECONDS, self.now)
            assert not created and receipt["lease_id"] == lease_id
            self._note("replayed a request")
            return
        if len(self.leases) >= MAX_LEASES:
            return
        own = self.owned[actor]
        invoices = [inv for n, inv in enumerate(own) if mask >> n & 1] or own[:1]
        if foreign:
            invoices = invoices + self.owned[self._other(actor)][:1]
        intent = Intent(PURPOSE, tuple(sorted(invoices)), tuple(sorted(providers)), candidates)
        self.requests_made += 1
        request = LeaseRequest(f"request-{self.requests_made}", intent)
        plan = plan_tasks(intent, list(intent.providers))
        try:
            receipt, created = self._write(create_lease, who, request, plan, LEASE_SECONDS,
                                           self.now)
        except Refusal as refusal:
            expected = "not_signed_in" if self.sessions[actor] is None else "invoice_not_found"
            assert refusal.code == expected, (refusal.code, expected)
            assert foreign or self.sessions[actor] is None
            self._note(f"create refused: {refusal.code}")
            return
        assert created and self.sessions[actor] is not None and not foreign
        lease_id = receipt["lease_id"]
        tasks = [
            TaskModel(row["id"], lease_id, row["invoice_id"], row["provider"], row["position"])
            for row in self.db.execute(
                "SELECT id, invoice_id, provider, position FROM tasks WHERE lease_id = ?"
                " ORDER BY position", (lease_id,))
        ]
        assert [(t.invoice, t.provider) for t in tasks] == [(i, p) for i, p, _ in plan]
        lease = LeaseModel(lease_id, actor, session, self.now + LEASE_SECONDS,
                           list(intent.invoice_ids), tasks)
        self.leases.append(lease)
        self.tasks.update((task.id, task) for task in tasks)
        self.requests[actor] = (request.request_id, intent, lease_id)
        self._note("open")

    @initialize(candidates=st.integers(1, 3), ben_too=st.booleans())
    def first_requests(self, candidates: int, ben_too: bool) -> None:
        """Ada asks about both her invoices; Ben, perhaps, about his one."""
        self._open_lease(self.ada, 0b11, candidates, ("local",), False, False)
        if ben_too:
            self.now += 1.0
            self._open_lease(self.ben, 0b1, candidates, ("local", "openai"), False, False)

    @rule(by_ben=st.booleans(), mask=st.integers(1, 3), candidates=st.integers(1, 3),
          two_providers=st.booleans(), sign_in_first=st.sampled_from([True, True, True, False]),
          kind=st.sampled_from(["new", "new", "new", "new", "foreign", "replay"]))
    def ask(self, by_ben: bool, mask: int, candidates: int, two_providers: bool,
            sign_in_first: bool, kind: str) -> None:
        """A person (signed in again first, mostly) asks for proposals; sometimes for an
        invoice that is not theirs, sometimes by resending the last request."""
        actor = self.ben if by_ben else self.ada
        if sign_in_first and self.sessions[actor] is None:
            self._sign_in(actor)
        providers = ("local", "openai") if two_providers else ("local",)
        self._open_lease(actor, mask, candidates, providers, kind == "foreign", kind == "replay")

    def _sign_out(self, actor: str) -> None:
        session = self.sessions[actor] or self.last_session[actor]
        ended = self._write(leases.end_session, session, self.now)
        expected = [lease for lease in self.leases
                    if lease.session == session and lease.status in LIVE]
        assert ended == len(expected)
        for lease in expected:
            self._set_status(lease, "expired")
        self.sessions[actor] = None
        if expected:
            self._note("expired by sign-out")

    def _cancel(self, lease: LeaseModel, by_owner: bool) -> None:
        actor = lease.actor if by_owner else self._other(lease.actor)
        outcome = self._write(leases.cancel, lease.id, actor, self.now)
        if not by_owner:
            expected = "lease_not_found"
        elif self._expire_if_due(lease):
            expected = "lease_not_cancelable"
        elif lease.status in LIVE:
            expected = "rejected"
            self._set_status(lease, "rejected")
        else:
            expected = "lease_not_cancelable"
        assert outcome == expected, (outcome, expected)
        self._note(f"cancel: {outcome}")

    @rule(pick=st.integers(0, 3),
          what=st.sampled_from(["cancel", "cancel", "cancel by the other actor",
                                "ada signs out", "ben signs out"]))
    def interrupt(self, pick: int, what: str) -> None:
        """A person cancels a lease (or tries to cancel someone else's), or signs out."""
        if what.endswith("signs out"):
            self._sign_out(self.ada if what.startswith("ada") else self.ben)
            return
        lease = self._pick_lease(pick, None)
        if lease is not None:
            self._cancel(lease, what == "cancel")

    def _apply(self, lease: LeaseModel, by_owner: bool, choice: str) -> None:
        actor = lease.actor if by_owner else self._other(lease.actor)
        per_invoice = lease.candidates()
        chosen = {inv: tasks[0] for inv, tasks in per_invoice.items()}
        others = [task for other in self.leases if other is not lease
                  for task in other.tasks if task.proposal is not None]
        choices: dict[str, str] = {}
        label = "default"
        if (choice == "last" and per_invoice) or (choice == "mixed" and len(per_invoice) >= 2):
            # "mixed": the first invoice by default, the others by their last candidate.
            for n, (inv, tasks) in enumerate(per_invoice.items()):
                if choice == "last" or n % 2 == 1:
                    chosen[inv] = tasks[-1]
                    choices[inv] = tasks[-1].proposal[0]
            label = choice
        elif choice == "first" and per_invoice:
            choices = {inv: task.proposal[0] for inv, task in chosen.items()}
            label = choice
        elif choice == "other_invoice" and len(per_invoice) >= 2:
            # Real proposals of this lease, each named for the other invoice.
            (one, first), (two, second) = list(per_invoice.items())[:2]
            choices = {one: second[0].proposal[0], two: first[0].proposal[0]}
            label = choice
        elif choice == "other_lease" and others and per_invoice:
            choices = {next(iter(per_invoice)): others[0].proposal[0]}
            label = choice
        elif choice == "made_up" and per_invoice:
            choices = {next(iter(per_invoice)): str(uuid.uuid4())}
            label = choice
        elif choice == "not_in_lease":
            # A key for an invoice with no candidate here (maybe another actor's).
            outsider = next(inv for inv in self.summaries if inv not in per_invoice)
            choices = {outsider: others[0].proposal[0] if others else str(uuid.uuid4())}
            label = choice
        valid = label in ("default", "first", "last", "mixed")
        before = dict(self.summaries)
        try:
            outcome = self._write(leases.apply, lease.id, actor, choices, self.now)
        except Refusal as refusal:
            outcome = refusal.code
        if not by_owner:
            expected = "lease_not_found"
        elif self._expire_if_due(lease):
            expected = "lease_expired"
        elif lease.status != "proposed":
            expected = f"lease_{lease.status}"
        elif not valid:
            expected = "invalid_choice"
        else:
            expected = "applied"
        assert outcome == expected, (outcome, expected, label)
        self._note(f"apply: {outcome}" + ("" if by_owner else " (by the other actor)"))
        if outcome != "applied":
            return
        self._set_status(lease, "applied")
        self._note(f"applied, choosing {label}")
        if len(chosen) > 1:
            self._note("applied to two invoices at once")
        for inv, task in chosen.items():
            self.summaries[inv] = task.proposal[1]
            task.applied = True
        # Exactly the chosen text on each invoice of this lease with a candidate; nothing else.
        now = dict(self.db.execute("SELECT id, summary FROM invoices").fetchall())
        for inv in now:
            if inv in chosen:
                assert now[inv] == chosen[inv].proposal[1]
                assert inv in self.owned[actor]
            else:
                assert now[inv] == before[inv], "apply wrote an invoice it did not choose"

    @rule(pick=st.integers(0, 3), choice=st.sampled_from(["default", "first", "last", "mixed"]))
    def owner_applies(self, pick: int, choice: str) -> None:
        """The owner presses apply on a proposed lease (any lease when none is proposed)."""
        lease = self._pick_lease(pick, "proposed")
        if lease is not None:
            self._apply(lease, True, choice)

    @rule(pick=st.integers(0, 3), select=st.sampled_from(["default", "first", "last"]))
    def page_polls_then_applies(self, pick: int, select: str) -> None:
        """The review page polls the lease as its owner sees it (the other actor sees
        nothing), shows the candidates, and the person applies the ones selected there."""
        lease = self._pick_lease(pick, "proposed")
        if lease is None:
            return
        page = leases.view(self.db, lease.id, lease.actor)
        assert leases.view(self.db, lease.id, self._other(lease.actor)) is None
        done = sum(task.status == "done" for task in lease.tasks)
        failed = sum(task.status == "failed" for task in lease.tasks)
        assert (page["status"], page["progress"]) == (
            lease.status, {"total": len(lease.tasks), "done": done, "failed": failed})
        shown = {entry["invoice_id"]: [(c["proposal_id"], c["summary"], c["applied"])
                                       for c in entry["candidates"]]
                 for entry in page["invoices"]}
        assert shown == {inv: [(*task.proposal, task.applied)
                               for task in lease.candidates().get(inv, [])]
                         for inv in lease.invoices}
        self._apply(lease, True, select)

    @rule(pick=st.integers(0, 3), by_owner=st.sampled_from([True, True, False]),
          proposed=st.sampled_from([True, True, True, False]),
          choice=st.sampled_from(["other_invoice", "other_lease", "made_up", "not_in_lease",
                                  "default"]))
    def apply_attempt(self, pick: int, by_owner: bool, proposed: bool, choice: str) -> None:
        """Apply by the wrong actor, on any lease, or with a choice that is not a candidate."""
        lease = self._pick_lease(pick, "proposed" if proposed else None)
        if lease is not None:
            self._apply(lease, by_owner, choice)

    # --- what workers do --------------------------------------------------------------------

    def _claim(self, only_local: bool = False) -> TaskModel | None:
        claim = uuid.uuid4().hex
        got = self._write(claim_task, claim, CLAIM_SECONDS, self.now,
                          ["local"] if only_local else None)
        waiting = [
            ((lease.deadline, task.position), task, lease.actor)
            for lease in self.leases if lease.status == "open" and lease.deadline > self.now
            for task in lease.tasks
            if (task.status == "pending"
                or (task.status == "running" and task.expires <= self.now))
            and (not only_local or task.provider == "local")
        ]
        if got is None:
            assert not waiting, "a claimable task was left waiting"
            return None
        # Actors take turns (the least recently served first, ties by the most urgent lease);
        # within the chosen actor, deadline then position.
        rank = {actor: (self.turns.get(actor, 0), min(k[0] for k, _, a in waiting if a == actor))
                for _, _, actor in waiting}
        best = min(rank.values())
        allowed = set()
        for actor in (a for a, r in rank.items() if r == best):
            first = min(key for key, _, a in waiting if a == actor)
            allowed |= {task.id for key, task, a in waiting if a == actor and key == first}
        assert got.task_id in allowed
        self.turns[got.actor_id] = max(self.turns.values(), default=0) + 1
        task = self.tasks[got.task_id]
        lease = self._lease(task.lease_id)
        assert (got.lease_id, got.actor_id, got.deadline_at) == (lease.id, lease.actor,
                                                               lease.deadline)
        assert not got.has_proposal
        if task.status == "running":
            self._note("took over a timed-out claim")
        task.status, task.claim, task.expires = "running", claim, self.now + CLAIM_SECONDS
        self.claims.append((claim, task.id))
        return task

    def _complete(self, claim: str, task: TaskModel, actor: str) -> bool:
        lease = self._lease(task.lease_id)
        self.texts += 1
        text = f"proposal {self.texts}"
        events_before = self._late_events(lease.id)
        counted = self._write(leases.record_proposal, task.id, claim, actor, text, self.now)
        expected = (task.status == "running" and task.claim == claim and lease.status == "open"
                    and lease.actor == actor and lease.deadline > self.now)
        assert counted == expected, (counted, expected)
        events_after = self._late_events(lease.id)
        if counted:
            assert events_after == events_before
            row = self.db.execute("SELECT id, summary, created_at FROM proposals"
                                  " WHERE task_id = ?", (task.id,)).fetchone()
            assert row["summary"] == text and row["created_at"] < lease.deadline
            task.proposal = (row["id"], text)
            task.status, task.claim, task.expires = "done", None, None
            self._settle(lease)
            return True
        # Refused: written nowhere, and a late_completion event says why.
        if lease.status == "open" and lease.deadline <= self.now:
            why = "deadline passed"
        elif lease.status == "open":
            why = "claim no longer held"
        else:
            why = f"lease {lease.status}"
        assert events_after == events_before + [f"task {task.id}: {why}"]
        lease.late_events += 1
        self._note(f"late completion: {why}")
        if lease.status != "open":
            self._note("late completion: lease no longer open")
        return False

    def _fail(self, claim: str, task: TaskModel, retry: bool) -> None:
        self._write(leases.fail_task, task.id, claim, "provider error", retry, self.now)
        if task.status == "running" and task.claim == claim:
            task.status = "pending" if retry else "failed"
            task.claim = task.expires = None
            if not retry:
                self._settle(self._lease(task.lease_id))

    @rule(act=st.sampled_from(["claim", "complete", "complete as the other actor", "fail",
                               "fail and retry", "claim a local task"]),
          pick=st.integers(0, 3))
    def worker(self, act: str, pick: int) -> None:
        """One worker action: take a task and hold it, or answer for a claim taken earlier
        (mostly the newest; sometimes an older, possibly stale one)."""
        if act.startswith("claim"):
            self._claim(only_local=act.endswith("local task"))
            return
        if not self.claims:
            return
        claim, task_id = self.claims[-1 - pick % len(self.claims)]
        task = self.tasks[task_id]
        if act.startswith("fail"):
            self._fail(claim, task, act.endswith("retry"))
            return
        actor = self._lease(task.lease_id).actor
        if act.endswith("other actor"):
            actor = self._other(actor)
        self._complete(claim, task, actor)

    @rule()
    def workers_catch_up(self) -> None:
        """Workers answer every claimable task, most urgent first: the common case, which
        takes a lease to `proposed`."""
        self.work_through("complete", 100)

    @rule(mode=st.sampled_from(["complete", "fail_first", "retry_first", "fail_all",
                                "fail_all"]),
          limit=st.sampled_from([1, 100, 100]))
    def work_through(self, mode: str, limit: int) -> None:
        """A worker goes through the queue, most urgent first; some providers fail."""
        for n in range(limit):
            task = self._claim()
            if task is None:
                break
            if mode == "fail_all" or (mode == "fail_first" and n == 0):
                self._fail(task.claim, task, False)
            elif mode == "retry_first" and n == 0:
                self._fail(task.claim, task, True)
            else:
                self._complete(task.claim, task, self._lease(task.lease_id).actor)

    @rule(duration=st.sampled_from([1.0, 2.0, 5.0, "deadline", "past deadline"]),
          ends=st.sampled_from(["complete", "complete", "fail", "fail and retry"]))
    def slow_call(self, duration: float | str, ends: str) -> None:
        """One model call that takes a while; the deadline may pass (exactly at it, or past
        it, before any sweep) before it answers."""
        task = self._claim()
        if task is None:
            return
        self._later(self._lease(task.lease_id), duration)
        self._end(task.claim, task, ends)

    @rule(other_worker=st.sampled_from(["answers after", "is still calling", "answers first"]),
          ends=st.sampled_from(["complete", "complete", "fail", "fail and retry"]))
    def claim_times_out(self, other_worker: str, ends: str) -> None:
        """A worker goes silent past its claim; another takes the task over and answers
        after it, not yet, or before it; then the first one answers with its stale claim."""
        task = self._claim()
        if task is None:
            return
        claim = task.claim
        self.now += CLAIM_SECONDS + 1
        other = self._claim()
        if other is not None and other_worker == "answers first":
            self._end(other.claim, other, "complete")
        if other is task and task.status == "running":
            self._note("a stale claim answers while the task is running again")
        self._end(claim, task, ends)
        if other is not None and other_worker == "answers after":
            self._end(other.claim, other, "complete")

    @rule(duration=st.sampled_from(["deadline", "past deadline", "deadline", 1.0]),
          others=st.sampled_from(["complete", "complete", "fail"]),
          ends=st.sampled_from(["fail", "fail", "complete", "fail and retry"]))
    def last_task_straggles(self, duration: float | str, others: str, ends: str) -> None:
        """Workers take every claimable task and answer (or fail) all but the last, which
        comes back late: mostly exactly at its lease's deadline or past it (before any sweep).
        Whether that lease becomes proposed, failed or is left for the sweeper hangs on it."""
        taken = []
        while (task := self._claim()) is not None:
            taken.append(task)
        if not taken:
            return
        *answered, last = taken
        for task in answered:
            self._end(task.claim, task, others)
        lease = self._lease(last.lease_id)
        self._later(lease, duration)
        self._end(last.claim, last, ends)
        if lease.status == "open" and lease.deadline <= self.now and not any(
                task.status in ("pending", "running") for task in lease.tasks):
            self._note("every task finished, but only at or past the deadline")
            if not lease.candidates():
                self._note("every task failed, but only at or past the deadline")

    def _later(self, lease: LeaseModel, duration: float | str) -> None:
        if isinstance(duration, float):
            self.now += duration
        else:
            self.now = max(self.now, lease.deadline + (0.0 if duration == "deadline" else 0.5))

    def _end(self, claim: str, task: TaskModel, ends: str) -> None:
        if ends == "complete":
            self._complete(claim, task, self._lease(task.lease_id).actor)
        else:
            self._fail(claim, task, ends.endswith("retry"))

    # --- what the clock does ----------------------------------------------------------------

    @rule(step=st.sampled_from([1.0, 0.5, 2.0, 5.0, 1.0, 2.0, CLAIM_SECONDS + 1, 0.0,
                                "deadline", "past deadline"]),
          then_sweep=st.booleans())
    def time_passes(self, step: float | str, then_sweep: bool) -> None:
        """The clock moves, mostly by little against the lease length; sometimes exactly to
        the nearest deadline (where `deadline_at > now` is already false) or just past it.
        The sweeper may or may not run right after."""
        if isinstance(step, float):
            self.now += step
        else:
            ahead = [lease.deadline for lease in self.leases
                     if lease.status in LIVE and lease.deadline > self.now]
            if ahead:
                self.now = min(ahead) + (0.0 if step == "deadline" else 0.5)
        if not then_sweep:
            return
        count = self._write(leases.expire_due, self.now)
        due = [lease for lease in self.leases
               if lease.status in LIVE and lease.deadline <= self.now]
        assert count == len(due)
        for lease in due:
            self._set_status(lease, "expired")
        if due:
            self._note("expired by the sweeper")

    # --- the promises -----------------------------------------------------------------------

    @invariant()
    def the_database_is_the_model(self) -> None:
        rows = self.db.execute("SELECT id, status, deadline_at FROM leases").fetchall()
        assert {r["id"]: (r["status"], r["deadline_at"]) for r in rows} == {
            lease.id: (lease.status, lease.deadline) for lease in self.leases}
        rows = self.db.execute("SELECT id, status, claim FROM tasks").fetchall()
        assert {r["id"]: (r["status"], r["claim"]) for r in rows} == {
            task.id: (task.status, task.claim) for task in self.tasks.values()}
        rows = self.db.execute(
            "SELECT task_id, id, summary, applied_at IS NOT NULL AS applied FROM proposals"
        ).fetchall()
        assert {r["task_id"]: (r["id"], r["summary"], bool(r["applied"])) for r in rows} == {
            task.id: (*task.proposal, task.applied)
            for task in self.tasks.values() if task.proposal is not None}
        assert dict(self.db.execute("SELECT id, summary FROM invoices").fetchall()) \
            == self.summaries, "an invoice changed outside a valid apply"
        late = Counter(row[0] for row in self.db.execute(
            "SELECT lease_id FROM lease_events WHERE kind = 'late_completion'"))
        assert late == Counter({lease.id: lease.late_events for lease in self.leases
                                if lease.late_events})
        live_sessions = {row[0] for row in self.db.execute("SELECT id FROM sessions")}
        assert live_sessions == {s for s in self.sessions.values() if s is not None}

    @invariant()
    def a_final_state_is_never_left(self) -> None:
        # Read from the database alone, beside the model (which refuses to leave one too).
        for row in self.db.execute("SELECT id, status, ended_at, ended_reason FROM leases"):
            final = self.seen_final.setdefault(row["id"], None)
            if final is not None:
                assert row["status"] == final, f"a lease left {final} for {row['status']}"
            elif row["status"] in FINAL:
                self.seen_final[row["id"]] = row["status"]
            if row["status"] in FINAL:
                assert row["ended_at"] is not None and row["ended_reason"]

    @invariant()
    def the_deadline_is_never_extended(self) -> None:
        for row in self.db.execute("SELECT deadline_at, created_at FROM leases"):
            assert row["deadline_at"] == row["created_at"] + LEASE_SECONDS

    @invariant()
    def no_task_has_two_proposals_and_none_is_late(self) -> None:
        worst = self.db.execute(
            "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM proposals"
            " GROUP BY task_id) AS counts").fetchone()[0]
        assert worst <= 1
        late = self.db.execute(
            "SELECT COUNT(*) FROM proposals JOIN leases ON leases.id = proposals.lease_id"
            " WHERE proposals.created_at >= leases.deadline_at").fetchone()[0]
        assert late == 0, "a proposal was written at or after its lease's deadline"

    @invariant()
    def a_task_is_done_exactly_when_it_has_its_proposal(self) -> None:
        mismatched = self.db.execute(
            "SELECT COUNT(*) FROM tasks WHERE (status = 'done') != EXISTS"
            " (SELECT 1 FROM proposals WHERE proposals.task_id = tasks.id)").fetchone()[0]
        assert mismatched == 0

    @invariant()
    def proposed_means_finished_with_a_proposal_and_failed_means_none(self) -> None:
        for row in self.db.execute(
            "SELECT leases.id, leases.status,"
            " (SELECT COUNT(*) FROM tasks WHERE tasks.lease_id = leases.id"
            "   AND tasks.status IN ('pending', 'running')) AS waiting,"
            " (SELECT COUNT(*) FROM proposals WHERE proposals.lease_id = leases.id) AS made"
            " FROM leases"
        ):
            if row["status"] == "proposed":
                assert row["waiting"] == 0 and row["made"] >= 1
            if row["status"] == "failed":
                assert row["waiting"] == 0 and row["made"] == 0

    @invariant()
    def an_applied_lease_wrote_exactly_its_chosen_proposals(self) -> None:
        # Every applied proposal in one query (not one per lease: a round trip each, a tenth
        # of the run on PostgreSQL), the invoices it names grouped by lease.
        applied: dict[str, list[str]] = {}
        for row in self.db.execute(
                "SELECT lease_id, invoice_id FROM proposals WHERE applied_at IS NOT NULL"):
            applied.setdefault(row["lease_id"], []).append(row["invoice_id"])
        assert set(applied) <= {lease.id for lease in self.leases}
        for lease in self.leases:
            invoices = applied.get(lease.id, [])
            if lease.status != "applied":
                assert not invoices
                continue
            # One chosen proposal per invoice that had candidates, none for the others, each
            # on an invoice of the lease's own actor.
            assert sorted(invoices) == sorted(lease.candidates())
            assert all(invoice in self.owned[lease.actor] for invoice in invoices)


SETTINGS = settings(
    max_examples=300, stateful_step_count=50, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# The least share of examples (counting the few that hypothesis discards) that must reach each
# state or outcome. Over six random seeds the lowest shares seen were roughly twice these
# floors (applied 26%, proposed 56%, failed 7%, invalid choice 2%); this derandomized run,
# drawing nothing from the code's own constants, reaches applied 40%, proposed 73%, failed
# 12%, rejected 3.9%, and every task failed at the deadline 3.3%. A change that starves one
# (a rule that can no longer fire, a lost bias) fails here instead of leaving that part
# untested.
FLOORS = {
    "proposed": 0.30,
    "applied": 0.15,
    "applied to two invoices at once": 0.07,
    "applied, choosing last": 0.03,
    "failed": 0.04,
    "rejected": 0.03,
    "expired": 0.18,
    "expired by sign-out": 0.06,
    "expired by the sweeper": 0.03,
    "took over a timed-out claim": 0.08,
    "a stale claim answers while the task is running again": 0.06,
    "every task finished, but only at or past the deadline": 0.04,
    "every task failed, but only at or past the deadline": 0.01,
    "late completion: claim no longer held": 0.07,
    "late completion: deadline passed": 0.03,
    "late completion: lease no longer open": 0.10,
    "apply: invalid_choice": 0.01,
    "apply: lease_expired": 0.15,
    "apply: lease_not_found (by the other actor)": 0.12,
    "create refused: invoice_not_found": 0.08,
    "replayed a request": 0.10,
}


@pytest.fixture
def no_constants_from_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis mixes in literals from whichever of the project's own modules are loaded,
    so the examples of a derandomized run would change with what else the session imported
    (alone or in the whole suite) and with any constant edited anywhere in studio/; the
    floors below must judge this machine, not that. Without that hook, it draws as it would."""
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants"):
        empty = providers.Constants()
        monkeypatch.setattr(providers, "_get_local_constants", lambda: empty)
        monkeypatch.setattr(providers, "CONSTANTS_CACHE", {})


# 300 examples on PostgreSQL take 1.5 minutes alone, and may take three times that with the
# machine shared: more than the suite's 300 s guard, which stays for every other test.
@pytest.mark.timeout(900)
def test_lease_state_machine_under_random_interleavings(no_constants_from_the_code: None
                                                        ) -> None:
    REACHED.clear()
    try:
        run_state_machine_as_test(LeaseMachine, settings=SETTINGS)
    finally:
        drop_shared_database()
    examples = REACHED["examples"]
    assert examples >= SETTINGS.max_examples
    share = {name: REACHED[name] / examples for name in set(REACHED) | set(FLOORS)}
    print(f"\nshare of {examples} examples reaching each state or outcome:")
    for name in sorted(share):
        print(f"  {share[name]:6.1%}  {name}")
    starved = {name: f"{share[name]:.1%} < {floor:.0%}"
               for name, floor in FLOORS.items() if share[name] < floor}
    assert not starved, f"the state machine no longer reaches these often enough: {starved}"

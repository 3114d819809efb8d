"""The worker: claim a task, call the model outside any transaction, finish; and the
deadline sweeper that ends leases nobody is watching."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from studio import addresses, counters, i18n
from studio.accounts import throttle
from studio.accounts.auth import expired_sessions
from studio.billing import documents, facturx
from studio.config import Settings
from studio.errors import Refusal
from studio.leasing import leases
from studio.leasing.providers import Providers
from studio.leasing.providers.seam import Unreadable
from studio.leasing.purposes import PURPOSES, checked, work_fields
from studio.mail import outbox, smtp
from studio.runtime import schedules
from studio.store import presence
from studio.store.db import Database
from studio.store.dialect import dialect_of, hold_free
from studio.store.stores import Store, store_for
from studio.store.transactions import DatabaseUnavailable, clock

T = TypeVar("T")

log = logging.getLogger("studio.worker")

MAX_ATTEMPTS = 3
# Actors a claim tries in turn order, passing over those whose waiting tasks are all held.
ACTORS_TRIED = 8
IDLE_WAIT_S = 0.5
# How often a running task looks whether its lease is still open (Stop ends a reading).
LEASE_LOOK_S = 1.0
SWEEP_EVERY_S = 0.5
SESSION_SWEEP_ROUNDS = 10  # sessions last hours: a look every five seconds is plenty
DELIVERY_SLOTS = 4  # emails in flight at once per worker
# How long the SMTP thread waits for the database to say a send is still its worker's.
STILL_OURS_WAIT_S = 20.0
# How long a stopping worker lets the deliveries under way finish and record their outcome.
STOPPING_WAIT_S = 10.0
# An outcome the database cannot take yet is written again, after 1 s, 2 s, ... at most 5 s.
RECORD_FIRST_WAIT_S = 1.0
RECORD_MOST_WAIT_S = 5.0


class LeaseEnded(Exception):
    """The lease a task ran for ended while it ran (Stop, sign-out): its work is stopped."""


class NotDue(Exception):
    """A reminder whose invoice has nothing left to pay, with why in plain words."""


@dataclass(frozen=True)
class Claimed:
    task_id: str
    claim: str
    lease_id: str
    actor_id: str
    purpose: str
    provider: str
    candidate: int
    attempts: int
    deadline_at: float
    invoice: dict[str, Any]
    has_proposal: bool
    # Why the invoice cannot be read, if it cannot: the task is then failed, not run.
    unreadable: str = ""
    language: str = "en"  # the language of the person who asked: summaries are said in it


def claim_task(
    db: sqlite3.Connection, claim: str, claim_seconds: float, now: float | None = None,
    providers: list[str] | None = None, take_over: bool = True,
    passing_over: list[str] | None = None,
) -> Claimed | None:
    """Take a waiting task of an open lease, or (with `take_over`) one whose claim timed out
    (invariant 5). The lease must be open with its deadline ahead: the generation-time check.

    Actors take turns: the actor whose last claim is oldest goes next, with their most urgent
    task (deadline, then position), so one actor's big batch cannot hold back another's task.
    A worker only takes tasks for `providers` it has, so it never robs one that can run them.
    It passes over the actors in `passing_over` (when it fills its last free slot:
    `Worker._passing_over`).

    The claim is right on row locks alone: a pending task is changed by nothing but claims,
    and the row lock and the status checked again keep two claims apart. A timed-out claim is
    taken over only once its first holder is not saving the task's proposal: saving locks the
    task's row (`leases.record_proposal`), which the claim passes over, and a task saved
    meanwhile is no longer running. This unit writes nothing else: an unreadable invoice is
    returned marked, for the caller to fail (`leases.fail_task` settles the lease)."""
    now = clock(now)
    sql = dialect_of(db)
    known = None if providers is None else json.dumps(providers)
    waiting = _waiting("'pending' OR tasks.claim_expires_at <= :now" if take_over
                       else "'pending'")
    still_waiting = ("status = 'pending' OR (status = 'running' AND claim_expires_at <= :now)"
                     if take_over else "status = 'pending'")
    args = {"claim": claim, "expires": now + claim_seconds, "now": now, "known": known,
            "passing": None if not passing_over else json.dumps(passing_over)}
    # Turns are read without a lock; an actor whose every waiting task another claim holds
    # (a host paused inside it, say) is passed over for the next, never waited for.
    turns = db.execute(
        f"""
        SELECT leases.actor_id FROM leases LEFT JOIN actor_turns
            ON actor_turns.actor_id = leases.actor_id
         WHERE leases.status = 'open' AND leases.deadline_at > :now
           AND (CAST(:passing AS TEXT) IS NULL
                OR leases.actor_id NOT IN (SELECT value FROM json_each(:passing)))
           AND EXISTS (SELECT 1 FROM tasks {sql.tasks_waiting}
                        WHERE tasks.lease_id = leases.id AND {waiting})
         GROUP BY leases.actor_id, actor_turns.turn
         ORDER BY COALESCE(actor_turns.turn, 0), MIN(leases.deadline_at) LIMIT {ACTORS_TRIED}
        """,
        args,
    ).fetchall()
    row = None
    for turn in turns:
        row = db.execute(
            f"""
            UPDATE tasks SET status = 'running', claim = :claim, claim_expires_at = :expires,
                             attempts = attempts + 1
             WHERE id = (
                SELECT tasks.id FROM leases {sql.join_in_order} tasks {sql.tasks_waiting}
                    ON tasks.lease_id = leases.id
                 WHERE leases.actor_id = :actor
                   AND leases.status = 'open' AND leases.deadline_at > :now AND {waiting}
                 ORDER BY leases.deadline_at, tasks.position LIMIT 1 {sql.skip_locked})
               AND ({still_waiting})
            RETURNING id, lease_id, invoice_id, provider, candidate, attempts
            """,
            {**args, "actor": turn["actor_id"]},
        ).fetchone()
        if row is not None:
            break
    if row is None:
        return None
    # The actor goes to the back. Their turn is written by one claim at a time and never
    # waited for: while another claim of theirs writes it (a host paused inside one, say),
    # that one moves them back, and no claim queues behind its row.
    if hold_free(db, f"turn:{turn['actor_id']}"):
        db.execute(
            "INSERT INTO actor_turns (actor_id, turn)"
            " VALUES (?, (SELECT COALESCE(MAX(turn), 0) + 1 FROM actor_turns))"
            " ON CONFLICT (actor_id) DO UPDATE SET turn = excluded.turn",
            (turn["actor_id"],),
        )
    lease = db.execute(
        "SELECT actor_id, purpose, deadline_at, options FROM leases WHERE id = ?",
        (row["lease_id"],)
    ).fetchone()
    invoice = db.execute("SELECT * FROM invoices WHERE id = ?", (row["invoice_id"],)).fetchone()
    has_proposal = db.execute(
        "SELECT 1 FROM proposals WHERE task_id = ?", (row["id"],)
    ).fetchone() is not None
    fields: dict[str, Any] = {}
    unreadable = ""
    options = json.loads(lease["options"])
    try:
        fields = work_fields(db, invoice)
        if "days" in options:
            # A step's words go to every customer: written in the language of the person who
            # keeps them (as they asked), not of the example invoice's customer.
            fields["reminder_days"] = options["days"]
            fields["language"] = options.get("language") or fields["language"]
        if PURPOSES[lease["purpose"]].reads_receipts:
            # One receipt a reading: the one the person picked, else the draft's newest.
            picked = options.get("attachment_id")
            fields["receipts"] = [dict(found) for found in db.execute(
                "SELECT owner_id, sha256, content_type, filename, size FROM attachments"
                " WHERE invoice_id = ? AND (CAST(? AS TEXT) IS NULL OR id = ?)"
                " ORDER BY created_at DESC, id DESC LIMIT 1", (invoice["id"], picked, picked))]
            if not fields["receipts"]:
                unreadable = "the receipt chosen for this reading is no longer on the draft"
    except (ValueError, TypeError, KeyError) as error:
        unreadable = f"unreadable invoice: {error}"
    return Claimed(
        task_id=row["id"], claim=claim, lease_id=row["lease_id"], actor_id=lease["actor_id"],
        purpose=lease["purpose"], provider=row["provider"], candidate=row["candidate"],
        attempts=row["attempts"], deadline_at=lease["deadline_at"],
        invoice=fields, has_proposal=has_proposal, unreadable=unreadable,
        language=options.get("language") or "en",
    )


def _waiting(status: str) -> str:
    """The tasks a claim may take: `tasks.status = <status>`, of a provider the worker has.
    The first line is the partial index's own condition, which SQLite needs written out."""
    return f"""
        tasks.status IN ('pending', 'running')
        AND (tasks.status = {status})
        AND (CAST(:known AS TEXT) IS NULL
             OR tasks.provider IN (SELECT value FROM json_each(:known)))"""


def what_to_claim(db: sqlite3.Connection, providers: list[str] | None = None,
                  now: float | None = None) -> tuple[bool, bool]:
    """(a task waits, a claim timed out), each of an open lease with its deadline ahead: a
    read, so an idle worker looks without writing (`Worker.claim`)."""
    sql = dialect_of(db)
    args = {"now": clock(now), "known": None if providers is None else json.dumps(providers)}

    def any_task(status: str) -> str:
        return f"""EXISTS (SELECT 1 FROM leases {sql.join_in_order} tasks {sql.tasks_waiting}
                               ON tasks.lease_id = leases.id
                            WHERE leases.status = 'open' AND leases.deadline_at > :now
                              AND {_waiting(status)})"""

    waiting = any_task("'pending'")
    timed_out = any_task("'running' AND tasks.claim_expires_at <= :now")
    row = db.execute(f"SELECT {waiting} AS waiting, {timed_out} AS timed_out", args).fetchone()
    return bool(row["waiting"]), bool(row["timed_out"])


def any_timed_out(db: sqlite3.Connection) -> bool:
    """Whether a task's claim timed out, of any lease (`keep_claims` hands them back)."""
    return db.execute("SELECT 1 FROM tasks WHERE status = 'running' AND claim_expires_at <= ?"
                      " LIMIT 1", (clock(None),)).fetchone() is not None


def keep_claims(db: sqlite3.Connection, claims: list[str], claim_seconds: float) -> int:
    """A working worker keeps its claims alive. Claims that timed out anyway (their worker
    stopped, or lost the database too long) go back to waiting, so that a busy queue, whose
    claims never look past its waiting tasks, still takes them over soon. Returns how many
    went back."""
    now = clock(None)
    if claims:
        db.executemany(
            "UPDATE tasks SET claim_expires_at = ? WHERE claim = ? AND status = 'running'",
            [(now + claim_seconds, claim) for claim in claims],
        )
    return db.execute(
        "UPDATE tasks SET status = 'pending', claim = NULL, claim_expires_at = NULL"
        " WHERE status = 'running' AND claim_expires_at <= ?", (now,)).rowcount


def release_claims(db: sqlite3.Connection, claims: list[str]) -> None:
    """A worker shutting down hands its unfinished tasks straight back, without a timeout;
    an attempt it never finished does not count against the task."""
    db.executemany(
        "UPDATE tasks SET status = 'pending', claim = NULL, claim_expires_at = NULL,"
        " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
        " WHERE claim = ? AND status = 'running'",
        [(claim,) for claim in claims],
    )


async def claim_and_run(claim: Callable[[], Awaitable[T | None]],
                        run: Callable[[T, asyncio.Semaphore], Awaitable[None]],
                        slots: asyncio.Semaphore, running: set[asyncio.Task[None]],
                        wake: asyncio.Event, what: str) -> None:
    """Claim while a slot is free and run each claim in a job of its own, which releases the
    slot; with nothing to claim, or the database away, wait for a wake-up or a moment."""
    while True:
        await slots.acquire()
        try:
            claimed = await claim()
        except DatabaseUnavailable as error:
            log.warning("the database is unavailable; claiming %s again shortly: %s", what,
                        error)
            claimed = None
        except Exception:
            log.exception("claiming %s failed; trying again shortly", what)
            claimed = None
        if claimed is None:
            slots.release()
            await _idle(wake)
            continue
        job = asyncio.create_task(run(claimed, slots))
        running.add(job)
        job.add_done_callback(running.discard)


async def _idle(wake: asyncio.Event) -> None:
    # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancel that lands
    # as its timeout fires, and a stopping worker would then idle forever.
    try:
        async with asyncio.timeout(IDLE_WAIT_S):
            await wake.wait()
    except TimeoutError:
        pass
    wake.clear()


class Worker:
    """Runs tasks a few at a time; any number of workers may share one database."""

    def __init__(self, db: Database, providers: Providers, settings: Settings,
                 beside_pages: bool = False) -> None:
        self.db = db
        self.beside_pages = beside_pages  # in `studio serve`: the pages' answers come first
        self.providers = providers
        self.settings = settings
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.wake = asyncio.Event()
        self._can_run = sorted(providers.known)  # the providers this worker claims tasks for
        self._held: set[str] = set()
        self._busy = False  # the last claim found a task: the next claims without a look first
        self._store: Store | None = None  # where receipts' bytes are, once a task needs them
        self._running: set[asyncio.Task[None]] = set()
        self._actors: dict[str, int] = {}  # the tasks running here, by actor
        # Sends are delivered beside the tasks when the studio has a mail server.
        self.delivery = Delivery(db, settings, self.name) if settings.smtp_url else None
        # Due periods of recurring invoices are made beside the tasks, by every worker.
        self.clock_wake = asyncio.Event()

    def _sends_queued(self) -> None:
        if self.delivery is not None:
            self.delivery.wake.set()

    async def run(self) -> None:
        beside = [asyncio.create_task(schedules.keep_the_clock(
            self.db, self.settings, self.clock_wake, self._sends_queued, self.beside_pages))]
        if self.delivery is not None:
            beside.append(asyncio.create_task(self.delivery.run()))
        try:
            await self.run_tasks()
        finally:
            for job in beside:
                job.cancel()
            await asyncio.gather(*beside, return_exceptions=True)

    async def run_tasks(self) -> None:
        keeper = asyncio.create_task(self._keep_claims_alive())
        slots = asyncio.Semaphore(self.settings.worker_slots)
        try:
            await claim_and_run(self._claim_for_a_slot, self._run_and_release, slots,
                                self._running, self.wake, "a task")
        finally:
            held = list(self._held)
            keeper.cancel()
            for job in list(self._running):
                job.cancel()
            await asyncio.gather(keeper, *self._running, return_exceptions=True)
            if held:
                await self.db.write(release_claims, held)

    async def claim(self, passing_over: list[str] | None = None) -> Claimed | None:
        claim = f"{self.name}:{uuid.uuid4().hex}"
        # Held before the write: if this worker stops while the claim commits, it is released.
        self._held.add(claim)
        seconds = self.settings.claim_seconds
        try:
            # A look first, so an idle worker's poll writes nothing at all (a busy one, whose
            # last claim found a task, claims at once). Then a waiting task; only when none
            # was taken, a timed-out claim (see claim_task).
            waiting, timed_out = (True, False) if self._busy else await self.db.read(
                what_to_claim, self._can_run)
            task = None
            if waiting:
                task = await self.db.write(
                    claim_task, claim, seconds, providers=self._can_run, take_over=False,
                    passing_over=passing_over)
            if task is None and self._busy:
                self._busy = False
                waiting, timed_out = await self.db.read(what_to_claim, self._can_run)
            if task is None and timed_out:
                task = await self.db.write(claim_task, claim, seconds, providers=self._can_run,
                                           passing_over=passing_over)
            self._busy = task is not None
        except Exception:
            # The transaction rolled back: no task carries this claim, so nothing to keep alive.
            self._held.discard(claim)
            raise
        if task is None:
            self._held.discard(claim)
            return None
        if task.unreadable:
            # An unreadable invoice fails its own task instead of blocking the queue forever.
            try:
                await self.db.write(leases.fail_task, task.task_id, claim, task.unreadable,
                                    False)
            finally:
                self._held.discard(claim)  # failed, or left to time out and go back
            return None
        return task

    async def _claim_for_a_slot(self) -> Claimed | None:
        task = await self.claim(self._passing_over())
        if task is not None:
            self._actors[task.actor_id] = self._actors.get(task.actor_id, 0) + 1
        return task

    def _passing_over(self) -> list[str] | None:
        """The actors this worker already runs a task of, when the slot being filled is its
        last free one: that slot goes to another actor or stays free. One actor's tasks then
        never fill every slot, so a host paused inside one of that actor's writes (holding
        their lease's row, which each of those tasks waits for to save) cannot stop another
        account's task from running here."""
        running = sum(self._actors.values())
        if self.settings.worker_slots < 2 or running < self.settings.worker_slots - 1:
            return None
        return sorted(self._actors) or None

    async def _run_and_release(self, task: Claimed, slots: asyncio.Semaphore) -> None:
        try:
            await self.execute(task)
        except Exception:
            log.exception("task %s stopped unexpectedly; its claim will time out", task.task_id)
        finally:
            self._held.discard(task.claim)
            left = self._actors.get(task.actor_id, 0) - 1
            if left > 0:
                self._actors[task.actor_id] = left
            else:
                self._actors.pop(task.actor_id, None)
            slots.release()

    async def execute(self, task: Claimed) -> None:
        """Call the provider outside any transaction, then write only through the lease."""
        if task.has_proposal:
            # An earlier attempt saved this task's proposal: finish with it, no second call.
            await self.db.write(
                leases.record_proposal, task.task_id, task.claim, task.actor_id, ""
            )
            return
        time_left = task.deadline_at - time.time()
        started = time.monotonic()
        purpose = PURPOSES[task.purpose]
        try:
            provider = self.providers.get(task.provider)
            async with asyncio.timeout(max(time_left, 0.001)):
                invoice = await self._with_receipts(task.invoice)
                answer = await self._while_open(task.lease_id, provider.complete(
                    purpose, invoice, task.actor_id, candidate=task.candidate,
                    timeout=time_left - (time.monotonic() - started),
                ))
            if isinstance(answer, str) and purpose.name == "summarize_invoice":
                answer = {"summary": answer.strip()}  # a writer of plain summaries
            proposal = checked(purpose, answer)
        except Refusal as refused:
            # An answer that does not fit the purpose's schema is never written; asking the
            # same writer again would not make it fit.
            counters.provider_errors_total.labels(task.provider).inc()
            await self.db.write(leases.fail_task, task.task_id, task.claim,
                                f"invalid_proposal: {refused.message}", False)
            return
        except (Exception, asyncio.CancelledError) as error:
            current = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and current and current.cancelling():
                raise  # this worker is stopping; its claims are released on the way out
            counters.provider_seconds.labels(task.provider).observe(time.monotonic() - started)
            counters.provider_errors_total.labels(task.provider).inc()
            # Any provider failure is the task's, not the worker's.
            # What cannot be read fails at once, saying why in the person's words.
            final = isinstance(error, (Unreadable, LeaseEnded))
            retry = not final and task.attempts < MAX_ATTEMPTS and task.deadline_at > time.time()
            reason = str(error) if final else f"{type(error).__name__}: {error}".strip()
            await self.db.write(leases.fail_task, task.task_id, task.claim, reason, retry)
            return
        counters.provider_seconds.labels(task.provider).observe(time.monotonic() - started)
        with i18n.use(task.language):
            summary = purpose.summary(proposal, task.invoice)
        await self.db.write(
            leases.record_proposal, task.task_id, task.claim, task.actor_id,
            summary, proposal=proposal,
        )

    async def _while_open(self, lease_id: str, work: Awaitable[T]) -> T:
        """The provider's answer, unless the lease ends first: then what runs for it (a
        reader process, a model's connection) is cancelled, not left to run on. The lease is
        looked at once a second, and only while the work runs longer than that."""
        job = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({job}, timeout=LEASE_LOOK_S)
                if done:
                    return job.result()
                try:
                    still_open = await self.db.read(leases.still_open, lease_id)
                except DatabaseUnavailable:
                    continue  # the deadline still ends it
                if not still_open:
                    raise LeaseEnded("The request ended before its suggestion was written.")
        finally:
            if not job.done():
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)

    async def _with_receipts(self, invoice: dict[str, Any]) -> dict[str, Any]:
        """The invoice with its receipts' bytes, read from the store outside any transaction:
        the writer never reaches the store itself. A task holds at most one upload's worth
        of a receipt (`max_upload_bytes`), whatever was attached under an older limit."""
        if "receipts" not in invoice:
            return invoice
        most = self.settings.max_upload_bytes
        for found in invoice["receipts"]:
            if found["size"] > most:
                raise Unreadable(f"The receipt {found['filename']} is {found['size']} bytes,"
                                 f" more than a reading may hold ({most}); attach a smaller"
                                 " photo or scan of it.")
        if self._store is None:
            self._store = store_for(self.settings)
        receipts = [{"content_type": found["content_type"], "filename": found["filename"],
                     "data": await self._store.read(self.db, found["owner_id"], found["sha256"])}
                    for found in invoice["receipts"]]
        return {**invoice, "receipts": receipts}

    async def _keep_claims_alive(self) -> None:
        every = self.settings.claim_seconds / 3
        while True:
            await asyncio.sleep(every)
            try:
                # Nothing held and nothing timed out: nothing to write.
                if not self._held and not await self.db.read(any_timed_out):
                    continue
                handed_back = await self.db.write(keep_claims, list(self._held),
                                                  self.settings.claim_seconds)
                if handed_back:
                    log.info("%d timed-out claim(s) went back to waiting", handed_back)
            except DatabaseUnavailable as error:
                log.warning("the database is unavailable; claims kept alive later: %s", error)
            except Exception:
                log.exception("could not keep claims alive")


class Delivery:
    """Delivers queued sends a few at a time: claim, talk SMTP outside any transaction, then
    record the outcome only while the claim holds. Any number may share one database."""

    def __init__(self, db: Database, settings: Settings, name: str) -> None:
        self.db = db
        self.settings = settings
        self.server = addresses.mail_server(settings.smtp_url)
        self.name = name
        self.wake = asyncio.Event()
        self._held: set[str] = set()

    async def run(self) -> None:
        log.info("delivering email through %s", self.server)
        # Held while this process lives: a claim of ours that timed out meanwhile is still
        # ours (`outbox.claim`), so no email is sent twice while we live.
        here = presence.Presence(self.name, str(self.settings.db_path.resolve()),
                                 self.settings.database_url or None)
        await here.start()
        keeper = asyncio.create_task(self._keep_claims_alive())
        slots = asyncio.Semaphore(DELIVERY_SLOTS)
        running: set[asyncio.Task[None]] = set()
        try:
            await claim_and_run(lambda: self.claim(), self._deliver_and_release, slots, running,
                                self.wake, "a send")
        finally:
            # Deliveries under way may finish and record their outcome, the claims kept alive
            # meanwhile; one still talking after that is not handed back: the server may have
            # the message, so it is tried again, under the same Message-ID, once this worker
            # is gone.
            try:
                if running:
                    await asyncio.wait(list(running), timeout=STOPPING_WAIT_S)
            finally:
                keeper.cancel()
                for job in list(running):
                    job.cancel()
                try:
                    await asyncio.gather(keeper, *running, return_exceptions=True)
                finally:
                    await here.close()  # even when stopped a second time meanwhile

    async def claim(self) -> dict[str, Any] | None:
        if not await self.db.read(outbox.any_due):
            return None
        token = outbox.new_claim(self.name)
        self._held.add(token)
        try:
            send = await self.db.write(outbox.claim, token,
                                                    self.settings.claim_seconds)
        except Exception:
            self._held.discard(token)
            raise
        if send is None:
            self._held.discard(token)
            return None
        return {**send, "claim": token}

    async def _deliver_and_release(self, send: dict[str, Any], slots: asyncio.Semaphore
                                   ) -> None:
        try:
            await self.deliver(send)
        except Exception:
            log.exception("send %s stopped unexpectedly; its claim will time out", send["id"])
        finally:
            self._held.discard(send["claim"])
            slots.release()

    async def deliver(self, send: dict[str, Any]) -> None:
        """One try: the email built from the send as stored, the document attached."""
        try:
            not_due = await self.db.read(outbox.reminder_not_due, send)
            if not_due:
                raise NotDue(not_due)
            filename, pdf, reply_to = await self.attachment_of(send)
            message = smtp.build(send, self.settings.mail_from, (filename, pdf),
                                 send["created_at"], reply_to)
        except NotDue as error:
            outcome = smtp.Outcome("failed", str(error))
        except (Exception, asyncio.CancelledError) as error:
            current = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and current and current.cancelling():
                raise
            log.exception("the email of send %s could not be built", send["id"])
            # A database away for now is tried again; anything else would fail at every try,
            # so the send ends failed, saying why, instead of waiting for ever.
            outcome = smtp.Outcome(
                "retry" if isinstance(error, DatabaseUnavailable) else "failed",
                "Not sent: the email with the invoice attached could not be made, so nothing"
                f" left the studio ({type(error).__name__}: {error})".strip())
        else:
            outcome = await asyncio.to_thread(
                smtp.deliver, self.server, message, still_ours=self._still_ours(send),
                data_timeout=self.settings.smtp_data_timeout_seconds)
        # Written however long the database takes: while this worker lives its claim is its
        # own (`outbox.claim`), and only it knows whether the email left.
        wait = RECORD_FIRST_WAIT_S
        while True:
            try:
                recorded = await self.db.write(outbox.record, send["id"], send["claim"],
                                               outcome, self.settings.send_retry_cap_seconds)
                break
            except (DatabaseUnavailable, sqlite3.OperationalError) as error:
                log.warning("the outcome of send %s waits for the database: %s",
                            send["id"], error)
                await asyncio.sleep(wait)
                wait = min(wait * 2, RECORD_MOST_WAIT_S)
        if not recorded:
            log.warning("send %s: %s came after its claim was taken over; not recorded"
                        " (the other try carries the same Message-ID)", send["id"],
                        outcome.status)

    def _still_ours(self, send: dict[str, Any]) -> Callable[[], bool]:
        """Asked on the SMTP thread just before the message is ended: the claim is checked
        and made to last through the wait for the server's reply, so no other worker can take
        the send over while the server may be taking it. Unanswered, it is not ours."""
        loop = asyncio.get_running_loop()
        lasts = self.settings.smtp_data_timeout_seconds + self.settings.claim_seconds

        def ask() -> bool:
            held = asyncio.run_coroutine_threadsafe(
                self.db.write(outbox.still_held, send["id"], send["claim"], lasts), loop)
            try:
                return held.result(STILL_OURS_WAIT_S)
            except Exception:  # the database away, or slow: withheld, tried again later
                held.cancel()
                return False

        return ask

    async def attachment_of(self, send: dict[str, Any]) -> tuple[str, bytes, str]:
        """(file name, the invoice's Factur-X PDF, the seller's email to reply to). An
        invoice that lacks what an e-invoice must carry (`facturx.missing`) is attached as
        its PDF alone: a complete invoice, never an e-invoice that breaks the rules."""
        invoice = await facturx.issued_document(self.db, send["owner_id"], send["invoice_id"])
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in invoice["number"])
        reply_to = (invoice.get("seller") or {}).get("email") or ""
        if facturx.missing(invoice):
            return f"{name}.pdf", await documents.document_pdf(self.db, invoice), reply_to
        return f"{name}.pdf", await facturx.pdf_of(self.db, invoice), reply_to

    async def _keep_claims_alive(self) -> None:
        every = self.settings.claim_seconds / 3
        while True:
            await asyncio.sleep(every)
            try:
                if self._held:
                    await self.db.write(outbox.keep_claims, list(self._held),
                                        self.settings.claim_seconds)
            except DatabaseUnavailable as error:
                log.warning("the database is unavailable; claims kept alive later: %s", error)
            except Exception:
                log.exception("could not keep send claims alive")


async def sweep(db: Database, settings: Settings | None = None) -> None:
    """Expire leases whose deadline passed, about every half second; end expired sessions
    (and their leases) and purge old sign-in counts every few seconds."""
    settings = settings or Settings()
    rounds = 0
    while True:
        try:
            if await db.read(leases.any_due):
                count = await db.write(leases.expire_due)
                if count:
                    log.info("expired %d lease(s) at their deadline", count)
            if rounds % SESSION_SWEEP_ROUNDS == 0 and await db.read(
                    expired_sessions, None, settings.session_idle_seconds,
                    settings.session_max_seconds):
                ended = await db.write(leases.end_expired_sessions, settings.session_idle_seconds,
                                       settings.session_max_seconds)
                if ended:
                    log.info("ended %d expired session(s)", ended)
            if rounds % SESSION_SWEEP_ROUNDS == 0 and await db.read(
                    throttle.stale, settings.signin_window_seconds):
                await db.write(throttle.purge, settings.signin_window_seconds)
        except DatabaseUnavailable as error:
            log.warning("the database is unavailable; sweeping again shortly: %s", error)
        except Exception:
            log.exception("the sweep failed; trying again")
        rounds += 1
        await asyncio.sleep(SWEEP_EVERY_S)

"""Where readings run: a few reader processes per server that this module owns, taking turns
between actors, each reading with a time limit that kills it.

    readers().run(actor, seconds, function, *args)   -> its result, awaited
    readers().call(actor, seconds, function, *args)  -> the same, from a thread

- A reading runs in a process of its own, at a lower priority (nice 10, which its OCR
  inherits), so pages and polls answer first. A reading past its `seconds`, or whose caller
  stops waiting (Stop, the lease's deadline, shutdown), has its process killed with everything
  it started (its own process group), and the process is replaced: nothing runs on after.
- A reader process that dies of itself (the kernel's out-of-memory killer, a native crash) is
  replaced; the reading it held is tried once more on a fresh one, then refused. One file
  never stops reading for anyone else.
- Actors take turns: a free reader goes to the actor whose last reading began longest ago,
  as task claims do, and the last free reader never to an actor already reading, so one
  account's heavy files cannot hold every reader while another's ordinary photo waits.
- A reading asked for again while it runs (the same `key`: several candidates of one task)
  is waited for once, not run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from studio.leasing.readers.ocr import UnreadableReceipt

READER_NICENESS = 10
# Serving processes of this server, as `studio serve --workers` tells them (uvicorn's name).
SERVING_ENV = "WEB_CONCURRENCY"


def reader_count(cores: int | None = None, serving: int | None = None) -> int:
    """Readers per serving process: the machine's cores shared among the processes serving
    (nice 10 keeps pages first), at least one each; so a machine's cores are never asked
    for more readings at once than they have, unless there are more serving processes."""
    cores = cores or os.cpu_count() or 1
    if serving is None:
        serving = int(os.environ.get(SERVING_ENV, "1") or 1)
    return max(1, cores // max(1, serving))


class ReadingStopped(Exception):
    """The reading was stopped before it ended: its caller no longer waits for it."""


def _serve(connection: multiprocessing.connection.Connection) -> None:
    """A reader process: run each (function, args) sent, send back ("ok", result) or
    ("error", exception), until the server goes away."""
    os.setpgid(0, 0)  # a group of its own, so that a kill ends the OCR it started too
    os.nice(READER_NICENESS)
    while True:
        try:
            function, args = connection.recv()
        except (EOFError, OSError):
            return
        try:
            outcome: tuple[str, Any] = ("ok", function(*args))
        except Exception as error:
            outcome = ("error", error)
        try:
            connection.send(outcome)
        except Exception:
            # An answer that cannot be pickled still says what happened.
            connection.send(("error", RuntimeError(f"{type(outcome[1]).__name__}:"
                                                   f" {outcome[1]}")))


class Reader:
    """One reader process and the pipe to it."""

    def __init__(self, context: Any) -> None:
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs,), daemon=True,
                                       name="studio-reader")
        self.process.start()
        theirs.close()

    def kill(self) -> None:
        """End the process and whatever it started (an OCR outlives a reader killed by the
        kernel otherwise), at once; safe to call twice."""
        pid = self.process.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # not yet in a group of its own, or the group is gone
        if self.process.exitcode is None:
            try:
                self.process.kill()
            except (ProcessLookupError, ValueError):
                pass

    def close(self) -> None:
        self.kill()
        self.process.join(5)
        self.connection.close()


class Job:
    """One reading: waiting in its actor's queue, then running on a reader."""

    def __init__(self, actor: str, seconds: float, function: Callable[..., Any],
                 args: tuple[Any, ...], key: Hashable | None, order: int) -> None:
        self.actor, self.seconds, self.key, self.order = actor, seconds, key, order
        self.call = (function, args)
        self.done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.waiters = 1
        self.reader: Reader | None = None
        self.stopped = False

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        try:
            if error is None:
                self.done.set_result(result)
            else:
                self.done.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass  # its caller stopped waiting meanwhile


class Readers:
    """A few reader processes, each run by a thread of its own that takes the next job."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Condition()
        self._waiting: dict[str, deque[Job]] = {}
        self._running: set[Job] = set()
        self._keyed: dict[Hashable, Job] = {}
        self._began: dict[str, int] = {}  # the turn at which each actor's last reading began
        self._turns = itertools.count(1)
        self._orders = itertools.count()
        self._threads: list[threading.Thread] = []
        self._readers: set[Reader] = set()
        self._stopping = False

    # --- asking -------------------------------------------------------------------------

    async def run(self, actor: str, seconds: float, function: Callable[..., Any], *args: Any,
                  key: Hashable | None = None) -> Any:
        """`function(*args)` in a reader process, in `actor`'s turn, killed after `seconds`
        (UnreadableReceipt) or when the awaiting task is cancelled."""
        job = self._submit(actor, seconds, function, args, key)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()

        def arrived(done: concurrent.futures.Future[Any]) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_pass_on, done, waiter)

        job.done.add_done_callback(arrived)
        try:
            return await waiter
        except asyncio.CancelledError:
            self._leave(job)
            raise

    def call(self, actor: str, seconds: float, function: Callable[..., Any], *args: Any) -> Any:
        """The same as `run`, waited for by a thread."""
        return self._submit(actor, seconds, function, args, None).done.result()

    def _submit(self, actor: str, seconds: float, function: Callable[..., Any],
                args: tuple[Any, ...], key: Hashable | None) -> Job:
        with self._lock:
            if self._stopping:
                raise ReadingStopped("the readers are stopping")
            same = self._keyed.get(key) if key is not None else None
            if same is not None:
                same.waiters += 1
                return same
            job = Job(actor, seconds, function, args, key, next(self._orders))
            if key is not None:
                self._keyed[key] = job
            self._waiting.setdefault(actor, deque()).append(job)
            while len(self._threads) < self.count:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"studio-reader-{len(self._threads) + 1}")
                self._threads.append(thread)
                thread.start()
            self._lock.notify_all()
            return job

    def _leave(self, job: Job) -> None:
        """A caller stopped waiting: once none waits, the job is dropped or killed."""
        with self._lock:
            job.waiters -= 1
            if job.waiters > 0:
                return
            job.stopped = True
            self._forget(job)
            queue = self._waiting.get(job.actor)
            if queue is not None and job in queue:
                queue.remove(job)
                if not queue:
                    del self._waiting[job.actor]
            elif job.reader is not None:
                job.reader.kill()
        job.settle(error=ReadingStopped("its caller stopped waiting"))

    def _forget(self, job: Job) -> None:
        if job.key is not None and self._keyed.get(job.key) is job:
            del self._keyed[job.key]

    # --- reading ------------------------------------------------------------------------

    def _next(self) -> Job | None:
        """The next job, of the actor whose last reading began longest ago (lock held)."""
        while not self._stopping:
            ready = self._ready()
            if ready:
                break
            self._lock.wait()
        else:
            return None
        actor = min(ready, key=lambda a: (self._began.get(a, 0), self._waiting[a][0].order))
        queue = self._waiting[actor]
        job = queue.popleft()
        if not queue:
            del self._waiting[actor]
        self._began[actor] = next(self._turns)
        self._running.add(job)
        return job

    def _ready(self) -> list[str]:
        """The actors whose job may take a free reader (lock held). The last free reader never
        goes to an actor already reading: one account's heavy files then never hold every
        reader, and another account's photo starts at once instead of waiting for one of
        them to end (up to a reading's whole time)."""
        if self.count >= 2 and len(self._running) >= self.count - 1:
            reading = {job.actor for job in self._running}
            return [actor for actor in self._waiting if actor not in reading]
        return list(self._waiting)

    def _work(self) -> None:
        reader: Reader | None = None
        try:
            while True:
                with self._lock:
                    job = self._next()
                if job is None:
                    return
                try:
                    reader = self._read(job, reader)
                finally:
                    with self._lock:
                        self._running.discard(job)
                        self._forget(job)
                        if job.actor not in self._waiting and not any(
                                other.actor == job.actor for other in self._running):
                            self._began.pop(job.actor, None)
                        self._lock.notify_all()  # a job kept for a freer reader may start
        finally:
            if reader is not None:
                self._drop(reader)

    def _read(self, job: Job, reader: Reader | None) -> Reader | None:
        """Run the job on `reader` (or a fresh one); the reader to use next, if it lives."""
        for attempt in (1, 2):
            if reader is None:
                reader = Reader(self._context)
                with self._lock:
                    self._readers.add(reader)
            with self._lock:
                if job.stopped or self._stopping:
                    job.settle(error=ReadingStopped("stopped before it began"))
                    return reader
                job.reader = reader
            outcome = self._ask(reader, job)
            with self._lock:
                job.reader = None
            if outcome is not None and outcome[0] in ("ok", "error"):
                job.settle(*((outcome[1], None) if outcome[0] == "ok" else (None, outcome[1])))
                return reader
            self._drop(reader)
            reader = None
            if job.stopped or self._stopping:
                job.settle(error=ReadingStopped("stopped while it ran"))
                return None
            if outcome is not None:  # ("timeout", seconds)
                job.settle(error=UnreadableReceipt(
                    f"reading it took longer than {job.seconds:g} s"))
                return None
            if attempt == 2:
                job.settle(error=UnreadableReceipt(
                    "the reader stopped while reading it twice (it may be too large or"
                    " damaged)"))
        return None

    def _ask(self, reader: Reader, job: Job) -> tuple[str, Any] | None:
        """The reader's answer; ("timeout", s) when it took too long (killed); None when the
        process died (of itself, or killed because the job stopped)."""
        try:
            reader.connection.send(job.call)
            if not reader.connection.poll(job.seconds):
                reader.kill()
                return ("timeout", job.seconds)
            answer: tuple[str, Any] = reader.connection.recv()
            return answer
        except (EOFError, OSError):
            return None

    def _drop(self, reader: Reader) -> None:
        reader.close()
        with self._lock:
            self._readers.discard(reader)

    # --- the end --------------------------------------------------------------------------

    def stop(self) -> None:
        """Kill every reader at once, running readings included, and refuse what waits."""
        with self._lock:
            self._stopping = True
            waiting = [job for queue in self._waiting.values() for job in queue]
            self._waiting.clear()
            running = list(self._running)
            for job in running:
                job.stopped = True
            readers = list(self._readers)
            self._lock.notify_all()
        for reader in readers:
            reader.kill()
        for job in waiting + running:
            job.settle(error=ReadingStopped("the readers stopped"))
        for thread in self._threads:
            thread.join(5)

    def pids(self) -> list[int]:
        """The reader processes alive now."""
        with self._lock:
            return [reader.process.pid for reader in self._readers
                    if reader.process.pid is not None and reader.process.is_alive()]


def _pass_on(done: concurrent.futures.Future[Any], waiter: asyncio.Future[Any]) -> None:
    if waiter.cancelled():
        return
    error = done.exception()
    if error is None:
        waiter.set_result(done.result())
    else:
        waiter.set_exception(error)


_readers: Readers | None = None
_made = threading.Lock()


def readers() -> Readers:
    """This process's readers, made at the first reading."""
    global _readers
    with _made:
        if _readers is None:
            _readers = Readers(reader_count())
        return _readers


def stop_readers() -> None:
    """End the reader processes, if any were started, without waiting for a reading."""
    global _readers
    with _made:
        stopping, _readers = _readers, None
    if stopping is not None:
        stopping.stop()

"""Executors: where the independent runs of a scenario grid execute — in this process, in local
processes (the default), or on a Ray cluster (:class:`app.economics.run.ray_executor.RayCluster`, an
optional extra).

An executor runs ``fn(context, job, cache)`` for every job and yields ``(job, result)`` as each run
completes, in completion order; the caller assembles the results in its own order, so the backend
never changes a prediction. ``fn`` is a module-level function (pickled by reference); ``context`` is
what every run reads (the fitted analysis), shipped once per worker process, or once per cluster;
``cache`` is a dict private to one worker process and one call, for what consecutive runs can share
(synthesized requests); ``affinity(job)`` names what a job shares with others (its synthesized
request set), so that local processes give a worker the jobs whose share it holds.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from contextlib import contextmanager
from typing import Any, Protocol

RunFn = Callable[[Any, Any, dict[Any, Any]], Any]  # fn(context, job, cache) -> result
Affinity = Callable[[Any], Hashable]  # affinity(job) -> what the job shares with others (its cache key)


class ExecutorError(RuntimeError):
    """An executor cannot run: its optional dependency is missing, or its cluster cannot be reached."""


class Executor(Protocol):
    """Runs independent jobs and yields ``(job, result)`` pairs as the runs complete."""

    def describe(self) -> str:
        """What runs the jobs, for progress messages (e.g. ``2 local processes``)."""
        ...

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None, affinity: Affinity | None = None) -> Iterator[tuple[Any, Any]]:
        """``fn(context, job, cache)`` for every job, yielded as each completes; ``say`` gets the
        executor's own messages (a connection, the cluster's size); ``affinity``, where the executor
        can place jobs, keeps the jobs of one share on the worker that holds it."""
        ...


def default_workers() -> int:
    """Processes for the replays: ``$HEADROOM_WORKERS``, else every core."""
    return max(1, int(os.environ.get("HEADROOM_WORKERS") or os.cpu_count() or 1))


_WORKER_CONTEXT: Any = None
_WORKER_CACHE: dict[Any, Any] = {}


def _init_worker(context: Any) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = context
    _WORKER_CACHE.clear()


def _run_in_worker(fn: RunFn, job: Any) -> Any:
    return fn(_WORKER_CONTEXT, job, _WORKER_CACHE)


def _ready() -> None:
    """Nothing: a started worker's first task (its initializer has run)."""


class LocalProcesses:
    """``workers`` lanes of this machine (default :func:`default_workers`), for one call: this process,
    which starts on the jobs at once, and ``workers - 1`` processes started beside it, each given the
    context once, which take jobs as soon as each has started (:class:`Lanes`). One worker (or one
    job): this process alone."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def describe(self) -> str:
        n = self.workers or default_workers()
        return "this process" if n <= 1 else f"this process and {n - 1} local process{'es' if n > 2 else ''}"

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None, affinity: Affinity | None = None) -> Iterator[tuple[Any, Any]]:
        workers = min(self.workers or default_workers(), len(jobs))
        if workers <= 1:
            cache: dict[Any, Any] = {}
            for job in jobs:
                yield job, fn(context, job, cache)
            return
        with Lanes(context, workers, {}) as lanes:
            yield from lanes.run(fn, jobs, affinity or _itself)


def _itself(job: Hashable) -> Hashable:
    """Each job a share of its own (no affinity)."""
    return job


class Placement:
    """Which job a free worker takes next, a share's jobs kept on the worker that took the share first
    (it holds the share in its cache: a month's request set is seconds to make and hundreds of MB).
    A free worker takes, in turn: the next job of its own share; the first job of a share no worker
    has taken (in the jobs' order); the last job of the share with the most left (making the share
    again costs less than idling: a month's set takes a quarter of one of its runs, a day's a third)."""

    def __init__(self, jobs: Sequence[Hashable], affinity: Affinity, workers: int,
                 held: Sequence[Hashable | None] | None = None) -> None:
        self.shares: dict[Hashable, deque[Any]] = {}
        for job in jobs:
            self.shares.setdefault(affinity(job), deque()).append(job)
        # ``held``: the share each worker holds from an earlier call (a ``LocalSession``'s): its own
        self.mine: list[Hashable | None] = [None] * workers
        for w, key in enumerate(held or ()):
            if w < workers and key in self.shares and key not in self.mine:
                self.mine[w] = key
        self.untaken = deque(k for k in self.shares if k not in self.mine)

    def next_job(self, w: int) -> Any | None:
        """Worker ``w``'s next job, or None when nothing is left for it."""
        own = self.mine[w]
        if own is not None and self.shares[own]:
            return self.shares[own].popleft()
        while self.untaken:
            key = self.untaken.popleft()
            if self.shares[key]:
                self.mine[w] = key
                return self.shares[key].popleft()
        key = max(self.shares, key=lambda k: len(self.shares[k]))
        if self.shares[key]:
            self.mine[w] = key
            return self.shares[key].pop()
        return None


class Lanes:
    """Where local runs execute: lane 0 is this process (a thread of its own, with ``cache``: the
    compiled engine releases the GIL), lanes 1.. are processes of their own, each given ``context``
    once. Lane 0 starts on the jobs at once; a process lane takes jobs as soon as it has started
    (its imports, the context, numba's cached engine: two seconds or more), so no lane waits for
    another's start, and the starts cost the jobs no time on a machine with a core for each lane.
    The lanes last until :meth:`close`: a second call finds each process started and its cache as
    the first call left it."""

    def __init__(self, context: Any, workers: int, cache: dict[Any, Any]) -> None:
        self.context, self.cache = context, cache
        self.here = ThreadPoolExecutor(1, thread_name_prefix="headroom-lane")
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB threads
        self.pools = [ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker, initargs=(context,))
                      for _ in range(workers - 1)]
        # a pool's first submit starts its process and blocks until the child has read the context,
        # which it unpickles after importing the economics stack: on threads, side by side
        self.starter = ThreadPoolExecutor(max(len(self.pools), 1), thread_name_prefix="headroom-start")
        self.starting: dict[Future[Any], int] = {
            self.starter.submit(lambda pool: pool.submit(_ready).result(), pool): w + 1
            for w, pool in enumerate(self.pools)}
        self.held: list[Hashable | None] = []

    def __enter__(self) -> Lanes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.here.shutdown(wait=True, cancel_futures=True)
        self.starter.shutdown(wait=True)
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=True)

    @property
    def workers(self) -> int:
        return 1 + len(self.pools)

    def started(self) -> None:
        """Wait until every process lane has started (an error of one that could not, raised)."""
        for future in list(self.starting):
            future.result()

    def _submit(self, fn: RunFn, w: int, job: Any) -> Future[Any]:
        if w == 0:
            return self.here.submit(fn, self.context, job, self.cache)
        return self.pools[w - 1].submit(_run_in_worker, fn, job)

    def run(self, fn: RunFn, jobs: Sequence[Hashable], affinity: Affinity) -> Iterator[tuple[Any, Any]]:
        """``fn(context, job, cache)`` for every job, on the lanes started so far and on each as it
        starts, placed by :class:`Placement` (a lane keeps the share it held in the last call),
        yielded as each completes."""
        for future in [f for f in self.starting if f.done()]:  # started since the last call
            del self.starting[future]
            future.result()
        placement = Placement(jobs, affinity, self.workers, self.held)
        running: dict[Future[Any], tuple[int, Any]] = {}

        def fill(free: list[int]) -> None:
            for w in free:
                job = placement.next_job(w)
                if job is not None:
                    running[self._submit(fn, w, job)] = (w, job)

        fill([w for w in range(self.workers) if w not in self.starting.values()])
        while running:
            done, _ = wait([*running, *self.starting], return_when=FIRST_COMPLETED)
            free = []
            for future in done:
                if future in self.starting:
                    free.append(self.starting.pop(future))
                    future.result()  # a process that could not start: its error
                    continue
                w, job = running.pop(future)
                free.append(w)
                yield job, future.result()
            fill(free)
        # a lane given no share of its own this time still holds the one it had
        self.held = [m if m is not None else (self.held[w] if w < len(self.held) else None)
                     for w, m in enumerate(placement.mine)]


class LocalSession:
    """Local lanes kept for several calls of one context (``with LocalSession(context, n) as s``):
    each process reads the context once, and each lane's cache lives from one call to the next, a
    share's jobs going back to the lane that held the share. For a sequence of calls that depend on
    each other's results, each replaying the same synthesized requests (the analysis' residual and
    the closing sweeps: a month's request set is seconds to make and hundreds of MB). One worker: this
    process, with one cache for every call; more: this process and ``workers - 1`` processes
    (:class:`Lanes`). A call's results are those of a fresh ``LocalProcesses`` call: ``fn`` must give
    the same result whatever its cache holds."""

    def __init__(self, context: Any, workers: int | None = None) -> None:
        self.context = context
        self.workers = max(1, workers or default_workers())
        self.cache: dict[Any, Any] = {}
        self.lanes: Lanes | None = None

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.lanes is not None:
            self.lanes.close()
        self.lanes, self.cache = None, {}

    def _lanes(self) -> Lanes:
        if self.lanes is None:
            self.lanes = Lanes(self.context, self.workers, self.cache)
        return self.lanes

    def start(self) -> None:
        """Start the lanes now and wait until each process has started (the first call otherwise
        starts them and begins in this process at once, the others joining as they start)."""
        if self.workers > 1:
            self._lanes().started()

    def run(self, fn: RunFn, jobs: Sequence[Hashable], affinity: Affinity | None = None
            ) -> Iterator[tuple[Any, Any]]:
        """``fn(context, job, cache)`` for every job, yielded as each completes; ``affinity`` as in
        :meth:`Executor.run` (None: every job a share of its own)."""
        if self.workers <= 1:
            for job in jobs:
                yield job, fn(self.context, job, self.cache)
            return
        yield from self._lanes().run(fn, jobs, affinity or _itself)


Pass = Callable[..., Iterator[tuple[Any, Any]]]  # run_pass(fn, jobs, say=None, affinity=None)


@contextmanager
def passes(executor: Executor, context: Any, jobs: int) -> Iterator[Pass]:
    """``run_pass(fn, jobs, say, affinity)``: ``executor.run`` of one context, for a call that runs its
    jobs in several passes (a grid's second pass, for the envelope of the scenarios the first found
    backlogged). Local processes (more than one for the first pass's ``jobs``) are kept from one pass to
    the next as a :class:`LocalSession`: the second pass starts no process (two seconds or more each)
    and a worker finds the requests it synthesized. Any other executor runs each pass on its own."""
    workers = min(executor.workers or default_workers(), jobs) if isinstance(executor, LocalProcesses) else 1
    if workers > 1:
        with LocalSession(context, workers) as session:
            yield lambda fn, batch, say=None, affinity=None: session.run(fn, batch, affinity)
    else:
        yield lambda fn, batch, say=None, affinity=None: executor.run(fn, context, batch, say, affinity)

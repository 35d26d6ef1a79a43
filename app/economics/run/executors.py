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
    as_completed,
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
    """``workers`` processes of this machine (default :func:`default_workers`), started for one call
    and given the context once each; one worker (or one job) runs in this process."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def describe(self) -> str:
        n = self.workers or default_workers()
        return "this process" if n <= 1 else f"{n} local processes"

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None, affinity: Affinity | None = None) -> Iterator[tuple[Any, Any]]:
        workers = min(self.workers or default_workers(), len(jobs))
        if workers <= 1:
            cache: dict[Any, Any] = {}
            for job in jobs:
                yield job, fn(context, job, cache)
            return
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB threads
        if affinity is not None:
            yield from _by_affinity(fn, context, jobs, affinity, workers, ctx)
            return
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(context,)) as pool:
            futures = {pool.submit(_run_in_worker, fn, job): job for job in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()


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


def _by_affinity(fn: RunFn, context: Any, jobs: Sequence[Hashable], affinity: Affinity, workers: int,
                 ctx: Any) -> Iterator[tuple[Any, Any]]:
    """The jobs on ``workers`` processes of their own, placed by :class:`Placement`."""
    pools = [ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker, initargs=(context,))
             for _ in range(workers)]
    try:
        _start(pools)
        yield from _placed(fn, pools, Placement(jobs, affinity, workers))
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def _start(pools: Sequence[ProcessPoolExecutor]) -> None:
    """Start the pools' processes side by side: a pool's first submit starts its process and blocks
    until the child has read the context, which it unpickles after importing the economics stack
    (seconds); one after the other, the last would take its share seconds after the first."""
    with ThreadPoolExecutor(len(pools)) as starter:
        list(starter.map(lambda pool: pool.submit(_ready).result(), pools))


def _placed(fn: RunFn, pools: Sequence[ProcessPoolExecutor], placement: Placement) -> Iterator[tuple[Any, Any]]:
    """The placement's jobs on the pools (one process each), yielded as each completes."""
    running: dict[Future[Any], tuple[int, Any]] = {}

    def fill(free: list[int]) -> None:
        for w in free:
            job = placement.next_job(w)
            if job is not None:
                running[pools[w].submit(_run_in_worker, fn, job)] = (w, job)

    fill(list(range(len(pools))))
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        free = []
        for future in done:
            w, job = running.pop(future)
            free.append(w)
            yield job, future.result()
        fill(free)


class LocalSession:
    """Local processes kept for several calls of one context (``with LocalSession(context, n) as s``):
    each worker reads the context once, and its cache lives from one call to the next, a share's jobs
    going back to the worker that held the share. For a sequence of calls that depend on each other's
    results, each replaying the same synthesized requests (the analysis' residual and the closing
    sweeps: a month's request set is seconds to make and hundreds of MB). One worker: this process,
    with one cache for every call. A call's results are those of a fresh ``LocalProcesses`` call:
    ``fn`` must give the same result whatever its cache holds."""

    def __init__(self, context: Any, workers: int | None = None) -> None:
        self.context = context
        self.workers = max(1, workers or default_workers())
        self.cache: dict[Any, Any] = {}
        self.pools: list[ProcessPoolExecutor] = []
        self.held: list[Hashable | None] = []

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self.pools, self.cache = [], {}

    def run(self, fn: RunFn, jobs: Sequence[Hashable], affinity: Affinity | None = None
            ) -> Iterator[tuple[Any, Any]]:
        """``fn(context, job, cache)`` for every job, yielded as each completes; ``affinity`` as in
        :meth:`Executor.run` (None: every job a share of its own)."""
        if self.workers <= 1:
            for job in jobs:
                yield job, fn(self.context, job, self.cache)
            return
        if not self.pools:
            ctx = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB threads
            self.pools = [ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker,
                                              initargs=(self.context,)) for _ in range(self.workers)]
            _start(self.pools)
        placement = Placement(jobs, affinity or (lambda job: job), self.workers, self.held)
        yield from _placed(fn, self.pools, placement)
        # a worker given no share of its own this time still holds the one it had
        self.held = [m if m is not None else (self.held[w] if w < len(self.held) else None)
                     for w, m in enumerate(placement.mine)]


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

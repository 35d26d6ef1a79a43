"""Executors: where the independent runs of a scenario grid execute — in this process, in local
processes (the default), or on a Ray cluster (:class:`app.economics.ray_executor.RayCluster`, an
optional extra).

An executor runs ``fn(context, job, cache)`` for every job and yields ``(job, result)`` as each run
completes, in completion order; the caller assembles the results in its own order, so the backend
never changes a prediction. ``fn`` is a module-level function (pickled by reference); ``context`` is
what every run reads (the fitted analysis), shipped once per worker process, or once per cluster;
``cache`` is a dict private to one worker process and one call, for what consecutive runs can share
(synthesized requests).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol

RunFn = Callable[[Any, Any, dict[Any, Any]], Any]  # fn(context, job, cache) -> result


class ExecutorError(RuntimeError):
    """An executor cannot run: its optional dependency is missing, or its cluster cannot be reached."""


class Executor(Protocol):
    """Runs independent jobs and yields ``(job, result)`` pairs as the runs complete."""

    def describe(self) -> str:
        """What runs the jobs, for progress messages (e.g. ``2 local processes``)."""
        ...

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None) -> Iterator[tuple[Any, Any]]:
        """``fn(context, job, cache)`` for every job, yielded as each completes; ``say`` gets the
        executor's own messages (a connection, the cluster's size)."""
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


class LocalProcesses:
    """``workers`` processes of this machine (default :func:`default_workers`), started for one call
    and given the context once each; one worker (or one job) runs in this process."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def describe(self) -> str:
        n = self.workers or default_workers()
        return "this process" if n <= 1 else f"{n} local processes"

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None) -> Iterator[tuple[Any, Any]]:
        workers = min(self.workers or default_workers(), len(jobs))
        if workers <= 1:
            cache: dict[Any, Any] = {}
            for job in jobs:
                yield job, fn(context, job, cache)
            return
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB threads
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(context,)) as pool:
            futures = {pool.submit(_run_in_worker, fn, job): job for job in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()

"""Local processes with affinity: every job runs once, where the share it needs is held."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from app.economics.predict.scenarios import PARALLEL_GRID_REQUESTS, local_executor
from app.economics.run.executors import LocalProcesses, LocalSession, Placement, passes


def _share(job: tuple[str, int]) -> str:
    return job[0]


def _made(context: int, job: tuple[str, int], cache: dict[Any, Any]) -> tuple[int, bool, int]:
    """The job's value, whether this call made its share (nothing cached for it yet) and its process."""
    made = job[0] not in cache
    cache.setdefault(job[0], context)
    return job[1] * context, made, os.getpid()


def _drain(placement: Placement, order: list[int]) -> list[tuple[int, Any]]:
    """Free workers in ``order`` (a worker listed again has finished its job), their jobs taken."""
    return [(w, placement.next_job(w)) for w in order]


def test_a_worker_keeps_the_share_it_took_then_takes_an_untaken_one() -> None:
    jobs = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]
    p = Placement(jobs, _share, 2)
    assert _drain(p, [0, 1, 0, 0, 0, 1, 1, 0]) == [
        (0, ("a", 1)), (1, ("b", 1)), (0, ("a", 2)), (0, ("a", 3)),
        (0, ("c", 1)),  # a is done: the untaken share, not b's last job (one left: b's worker takes it)
        (1, ("b", 2)), (1, None), (0, None)]


def test_a_free_worker_takes_the_last_job_of_the_share_with_the_most_left() -> None:
    jobs = [("day", n) for n in (2, 3, 4, 5)]  # the dashboard's grid: one seed, one request set
    p = Placement(jobs, _share, 2)
    assert _drain(p, [0, 1, 1, 0, 1]) == [
        (0, ("day", 2)), (1, ("day", 5)),  # three left: worker 1 makes the set too, from the short end
        (1, ("day", 3)), (0, ("day", 4)), (1, None)]


def test_local_processes_with_affinity_give_every_job_once_and_make_each_share_where_it_runs() -> None:
    jobs = [(share, n) for share in "abc" for n in range(4)]
    got = list(LocalProcesses(2).run(_made, 10, jobs, affinity=_share))
    assert sorted(job for job, _ in got) == sorted(jobs)
    assert all(value == job[1] * 10 for job, (value, _, _) in got)
    # a share is made once per process that runs its jobs (its first job there), and never twice in one
    made = {(job[0], pid) for job, (_, m, pid) in got if m}
    ran = {(job[0], pid) for job, (_, _, pid) in got}
    assert made == ran
    assert sum(m for _, (_, m, _) in got) == len(ran)
    # this process starts on the jobs at once, before the other lane's process has started
    pids = [pid for _, (_, _, pid) in got]
    assert pids[0] == os.getpid() and len(set(pids)) <= 2


def test_a_lane_that_starts_late_takes_jobs_once_it_has_started(tmp_path: Path) -> None:
    """This process's first job waits until a job has run in the other lane's process: that lane,
    once started, takes the share no lane has taken; every job runs once."""
    jobs = [("a", n) for n in range(3)] + [("b", n) for n in range(3)]
    got = list(LocalProcesses(2).run(_meet, (os.getpid(), str(tmp_path / "met")), jobs, affinity=_share))
    assert sorted(job for job, _ in got) == sorted(jobs)
    where = dict(got)
    assert where[("a", 0)] == os.getpid() and where[("b", 0)] != os.getpid()


def _meet(context: tuple[int, str], job: tuple[str, int], cache: dict[Any, Any]) -> int:
    """In the calling process, job ("a", 0) waits (a minute at most) for a job of another process."""
    parent, marker = context
    if os.getpid() != parent:
        Path(marker).touch()
    elif job == ("a", 0):
        deadline = time.monotonic() + 60
        while not Path(marker).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return os.getpid()


def test_an_error_in_a_lane_reaches_the_caller() -> None:
    with pytest.raises(ValueError, match="job 3"):
        list(LocalProcesses(2).run(_fails_at_3, 10, [("a", n) for n in range(5)], affinity=_share))


def _fails_at_3(context: int, job: tuple[str, int], cache: dict[Any, Any]) -> int:
    if job[1] == 3:
        raise ValueError("job 3")
    return job[1]


def test_a_worker_with_nothing_of_its_own_takes_another_shares_last_job() -> None:
    p = Placement([("a", 1), ("a", 2), ("a", 3), ("b", 1)], _share, 2)
    assert _drain(p, [0, 1, 1, 1, 0]) == [
        (0, ("a", 1)), (1, ("b", 1)),
        (1, ("a", 3)),  # b is done and nothing is untaken: a's last, a made on worker 1 too
        (1, ("a", 2)),  # now worker 1's own share
        (0, None)]


def test_a_held_share_goes_back_to_the_worker_that_holds_it() -> None:
    """A session's worker keeps its share from one call to the next: the next call gives it that
    share's jobs, even when another share comes first in the jobs' order."""
    p = Placement([("b", 1), ("a", 1), ("b", 2)], _share, 2, held=["a", "b"])
    assert _drain(p, [0, 1, 1, 0]) == [(0, ("a", 1)), (1, ("b", 1)), (1, ("b", 2)), (0, None)]
    q = Placement([("c", 1), ("a", 1)], _share, 2, held=["a", "b"])  # b is not in this call: worker 1 takes c
    assert _drain(q, [1, 0, 0]) == [(1, ("c", 1)), (0, ("a", 1)), (0, None)]


def test_a_session_keeps_each_workers_shares_from_one_call_to_the_next() -> None:
    """The shares are made once per worker over the session's calls, and each call's values are a
    fresh call's. One job per share and call, on lanes started before the first call: each lane
    takes a share and finds it again in the second call."""
    jobs = [("a", 0), ("b", 0)]
    for workers in (1, 2):
        with LocalSession(10, workers) as session:
            session.start()
            first = list(session.run(_made, jobs, affinity=_share))
            second = list(session.run(_made, [("b", 3), ("a", 3)], affinity=_share))
        fresh = list(LocalProcesses(workers).run(_made, 10, [*jobs, ("b", 3), ("a", 3)]))
        assert sorted((job, value) for job, (value, _, _) in first + second) == sorted(
            (job, value) for job, (value, _, _) in fresh)
        made = [(job[0], pid) for job, (_, m, pid) in first + second if m]
        assert len(made) == len(set(made))  # never twice in one process
        assert not any(m for _, (_, m, _) in second)  # the second call found each share where it ran
        pids = {pid for _, (_, _, pid) in first + second}
        assert os.getpid() in pids and len(pids) == workers


class _Recording:
    """An executor that is not local processes: it runs each call here and records it."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def describe(self) -> str:
        return "recording"

    def run(self, fn, context, jobs, say=None, affinity=None):  # type: ignore[no-untyped-def]
        self.calls.append(list(jobs))
        cache: dict[Any, Any] = {}
        for job in jobs:
            yield job, fn(context, job, cache)


def test_a_grids_passes_share_its_local_processes() -> None:
    """A grid's second pass (the envelope of backlogged scenarios) runs on the lanes of its first: no
    new process, each share found where it was made; the values are a fresh call's. Another
    executor is called once per pass."""
    first, second = [("a", 0), ("b", 0)], [("b", 3), ("a", 3)]
    fresh = {job: value for job, (value, _, _) in LocalProcesses(1).run(_made, 10, first + second)}
    with passes(LocalProcesses(2), 10, len(first)) as run_pass:
        one = list(run_pass(_made, first, affinity=_share))
        two = list(run_pass(_made, second, affinity=_share))
    assert {job: value for job, (value, _, _) in one + two} == fresh
    assert len({pid for _, (_, _, pid) in one + two}) <= 2 and one[0][1][2] == os.getpid()
    # a share the first pass made in a process is found there by the second
    made_first = {(job[0], pid) for job, (_, m, pid) in one if m}
    assert all(m == ((job[0], pid) not in made_first) for job, (_, m, pid) in two)
    recording = _Recording()
    with passes(recording, 10, len(first)) as run_pass:
        got = list(run_pass(_made, first, affinity=_share)) + list(run_pass(_made, second, affinity=_share))
    assert recording.calls == [first, second] and {job: v for job, (v, _, _) in got} == fresh
    with passes(LocalProcesses(2), 10, 1) as run_pass:  # one job: this process, as LocalProcesses runs it
        assert [pid for _, (_, _, pid) in run_pass(_made, first[:1])] == [os.getpid()]


def test_a_grid_too_small_to_pay_for_workers_runs_in_this_process() -> None:
    """Local processes cost their start (imports, the compiled engine): a grid replaying fewer than
    ``PARALLEL_GRID_REQUESTS`` requests in all runs here; a larger one on every core; ``workers``
    when given, whatever the size."""
    day = SimpleNamespace(demand=SimpleNamespace(paths=[SimpleNamespace(requests=np.full(1440, 250.0)),
                                                        SimpleNamespace(requests=np.full(1440, 83.0))]))
    observed = 1440 * 333.0  # requests replayed by one run at traffic x1
    small = [1.0] * 7  # the Economics page's default grid: N' 2..8, one seed
    assert observed * sum(small) < PARALLEL_GRID_REQUESTS
    assert local_executor(day, small, None).workers == 1
    large = [1.0, 1.5] * 20
    assert observed * sum(large) >= PARALLEL_GRID_REQUESTS
    assert local_executor(day, large, None).workers is None  # every core
    assert local_executor(day, small, 2).workers == 2
    assert local_executor(day, large, 1).workers == 1

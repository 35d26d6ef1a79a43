"""Follow-ups sent in closed loop (app/engine/closed.py): a turn waits for the answer to the turn before
it. A case by hand, the invariant on a busy trace, the Python reference against the compiled twin bit
for bit (every router, a counted ring that grows), and the fields a trace must get right."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.engine.closed import closed_loop
from app.engine.config import ALL_ROUTERS, EngineConfig, FleetConfig
from app.engine.fleet import run_fleet
from app.engine.outcomes import run_arrays
from app.engine.trace import Trace
from app.engine.twin_fleet import run_fleet_compiled
from tests.engine.test_prefix_cache import (
    DETERMINISTIC,
    FIELDS,
    HAND_ENGINE,
    HAND_STEP,
    _hand_trace,
    counted_and_full,
)
from tests.support.prefix_trace import shared_trace


def _previous_turns(trace: Trace) -> np.ndarray:
    """Each request's previous turn in its conversation (-1: a first turn, or no conversation)."""
    n = len(trace)
    conv = np.asarray(trace.conversation)
    order = np.lexsort((np.arange(n), conv))
    previous = np.full(n, -1, dtype=np.int64)
    same = (conv[order[1:]] == conv[order[:-1]]) & (conv[order[1:]] >= 0)
    previous[order[1:][same]] = order[:-1][same]
    return previous


def closed(trace: Trace, think_s: float, seed: int = 3) -> Trace:
    """``trace`` with each turn sent ``think_s`` / 3 + Exp(2/3 ``think_s``) after the previous turn's answer."""
    previous = _previous_turns(trace)
    rng = np.random.default_rng(seed)
    gap = np.where(previous >= 0, think_s / 3 + rng.exponential(2 * think_s / 3, len(trace)), 0.0)
    return dataclasses.replace(trace, follows=previous, gap_s=gap)


def test_a_follow_up_is_sent_its_gap_after_the_answer_by_hand() -> None:
    """The prefix-cache hand case (tests/engine/test_prefix_cache.py), C now sent 1 s after A's
    answer: A finishes at 0.41, so C arrives at 1.41, not 2.0. Nothing else moved: B finished at 0.81,
    so the cache C meets is the one it met at 2.0 (g0, g1, c2: 12 tokens hit, 4 prefilled in 0.14 s),
    and its release leaves the free queue as before for D (3.0) and E (4.0)."""
    trace = dataclasses.replace(_hand_trace(), follows=np.array([-1, -1, 0, -1, -1]),
                                gap_s=np.array([0.0, 0.0, 1.0, 0.0, 0.0]))
    config = FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35)
    d = run_arrays(run_fleet(trace, config, drain=True))
    assert (d["arrival_us"] / 1e6).tolist() == pytest.approx([0.0, 0.05, 1.41, 3.0, 4.0], abs=1e-6)
    assert d["cached_tokens"].tolist() == [0, 8, 12, 0, 8]
    assert d["ttft_s"] == pytest.approx([0.2, 0.26, 0.14, 0.44, 0.11], abs=1e-6)
    assert d["e2e_s"] == pytest.approx([0.41, 0.76, 0.24, 0.44, 0.11], abs=1e-6)
    fast = run_arrays(run_fleet_compiled(trace, config))
    for f in FIELDS:
        assert np.array_equal(d[f], fast[f], equal_nan=True), f


@pytest.fixture(scope="module")
def busy_closed() -> Trace:
    """Half an hour on two replicas, conversations of 3 to 8 turns behind a system prompt, with singles
    and batch requests: queues and preemptions, and follow-ups sent 2 to 30 s after their answers."""
    trace = shared_trace(8, 1800.0, conversations=1200, singles=4000, batch=1200, chat_system=600, turns=(3, 8),
                         think_s=15.0, min_think_s=5.0)
    return closed(trace, 6.0)


def _config(router: str, replicas: int = 2) -> FleetConfig:
    return FleetConfig(replicas=replicas, router=router, engine=EngineConfig(prefix_caching=True, num_gpu_blocks=2100),
                       step=DETERMINISTIC, scrape_interval_s=60.0, affinity_margin=4)


def test_no_turn_is_sent_before_the_answer_it_waits_for(busy_closed: Trace) -> None:
    run = run_fleet(busy_closed, _config("least_outstanding"), seed=5, drain=True, metrics=False)
    d = run_arrays(run)
    follows = busy_closed.follows
    on = follows >= 0
    assert on.sum() > 2000 and d["finished"].all()
    sent = d["arrival_us"][on]
    answer = d["finish_us"][follows[on]]
    gap_us = np.rint(busy_closed.gap_s[on] * 1e6)
    # sent at the answer + the gap (to the microsecond each is rounded to), never before the answer
    assert np.abs(sent - (answer + gap_us)).max() <= 1
    assert (sent > answer).all()
    # the first turns and the requests of no conversation are sent at their trace times
    assert np.array_equal(d["arrival_us"][~on], np.rint(busy_closed.arrival_s[~on] * 1e6).astype(np.int64))
    # the run is busy: requests wait and are preempted, so a turn's answer moves its follow-up
    assert (d["queue_s"] > 1.0).sum() > 50 and d["preemptions"].sum() > 20


@pytest.mark.parametrize("router", list(ALL_ROUTERS))
def test_the_compiled_closed_loop_equals_the_python_one(busy_closed: Trace, router: str) -> None:
    config = _config(router)
    ref = run_fleet(busy_closed, config, seed=5, drain=True, metrics=False)
    fast = run_fleet_compiled(busy_closed, config, seed=5)
    a, b = run_arrays(ref), run_arrays(fast)
    for f in FIELDS:
        assert np.array_equal(a[f], b[f], equal_nan=True), f"{router}: {f} differs"
    for r in range(2):
        assert np.array_equal(ref.counters[r].gauges, fast.counters[r].gauges), f"{router}: gauges of replica {r}"


def test_a_counted_closed_run_counts_the_full_runs_rows(busy_closed: Trace) -> None:
    """A counted run whose ring (4 rows at first) meets follow-ups sent out of trace order: the breaches
    counted are those of the run that keeps every row."""
    full, got, totals, windows = counted_and_full(busy_closed, _config("prefix_aware"))
    assert got.enlarged > 3
    assert np.array_equal(got.counts.totals, totals) and np.array_equal(got.counts.windows, windows)
    assert np.array_equal(got.gauges, full.gauges)
    assert totals[:, 1].sum() > 0


def test_closed_loop_holds_an_overloaded_fleets_users_back() -> None:
    """One replica, the same requests: open loop, the turns keep coming while the answers are late; closed
    loop, a late answer delays the next turn. The queue and the TTFT are smaller closed."""
    trace = shared_trace(8, 1800.0, conversations=1500, singles=500, batch=100, chat_system=600, turns=(3, 8),
                         think_s=15.0, min_think_s=5.0)
    config = _config("least_outstanding", replicas=1)
    open_loop = run_arrays(run_fleet_compiled(trace, config, seed=1))
    closed_loop_ = run_arrays(run_fleet_compiled(closed(trace, 20.0), config, seed=1))
    assert np.nanmean(open_loop["queue_s"]) > 1.0
    assert np.nanmean(closed_loop_["ttft_s"]) < 0.8 * np.nanmean(open_loop["ttft_s"])


@pytest.mark.parametrize(("follows", "gap", "message"), [
    ([-1, -1, 3, -1, -1], [0, 0, 1, 0, 0], r"trace request 2 \(id 2\): follows request 3, not an earlier one"),
    ([-1, 0, 0, -1, -1], [0, 1, 1, 0, 0], r"trace request 2 \(id 2\): follows request 0, which another"),
    ([-1, -1, 0, -1, -1], [0, 0, -1, 0, 0], r"trace request 2 \(id 2\): its gap -1.0 is not a finite"),
    ([-1, -1, 0, -1, -2], [0, 0, 1, 0, 0], r"trace request 4 \(id 4\): follows request -2"),
    ([-1, -1, 0], [0, 0, 1], r"trace.follows: \(3,\) values for 5 requests"),
])
def test_inconsistent_follow_ups_are_refused(follows: list[int], gap: list[float], message: str) -> None:
    trace = dataclasses.replace(_hand_trace(), follows=np.array(follows), gap_s=np.array(gap, dtype=float))
    with pytest.raises(ValueError, match=message):
        closed_loop(trace)


def test_a_trace_whose_requests_follow_none_runs_open_loop() -> None:
    trace = dataclasses.replace(_hand_trace(), follows=np.full(5, -1), gap_s=None)
    assert closed_loop(trace) is None
    with pytest.raises(ValueError, match="without trace.gap_s"):
        closed_loop(dataclasses.replace(trace, follows=np.array([-1, -1, 0, -1, -1])))

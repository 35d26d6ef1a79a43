"""Policies replayed (issue 15, parts 3-5): the compiled policy loop against the Python one, bit for
bit; the retry arithmetic of docs/methods.md#retries; the autoscaler's decisions on a hand-made load."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.bench import accuracy
from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.policy import (
    REASON_REJECTED,
    Admission,
    Autoscaler,
    Policy,
    Retry,
    Timeline,
    backoff,
    client_throttle,
    expected_attempts,
    layered_attempts,
    saturated_queue_wait,
    uniform_floats,
    user_outcomes,
)
from app.engine.policy_fleet import run_policy_fleet
from app.engine.twin_policy import simulate_policy
from app.simulator.traffic import generate_trace, scale_traffic

DETERMINISTIC = StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)

AUTOSCALER = Autoscaler(min_replicas=1, max_replicas=6, start_replicas=2, scale_out_at=2, out_for_s=60,
                        cold_start_s=120, cooldown_s=120, in_for_s=300)
POLICIES = {
    "autoscaler, least outstanding": ("least_outstanding", Policy(autoscaler=AUTOSCALER)),
    "autoscaler on the running batch, round robin": (
        "round_robin", Policy(autoscaler=Autoscaler(signal="running", scale_out_at=9, scale_in_at=6, min_replicas=2,
                                                    max_replicas=5, out_for_s=30, in_for_s=120, cold_start_s=5,
                                                    cooldown_s=60, out_step=2))),
    "admission and budgeted retries, random": (
        "random", Policy(admission=Admission(0.5), retry=Retry(attempts=3, budget_per_minute=30, ratio=0.01))),
    "everything, power of two": (
        "power_of_two", Policy(autoscaler=Autoscaler(min_replicas=1, max_replicas=5, scale_out_at=3, out_for_s=30,
                                                     cold_start_s=10, cooldown_s=60, in_for_s=120),
                               admission=Admission(1.0), retry=Retry())),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_the_compiled_policy_loop_equals_the_python_one(name: str) -> None:
    router, policy = POLICIES[name]
    trace = scale_traffic(generate_trace(seed=11, hours=1.0, warmup_s=600.0), 1.3)
    config = FleetConfig(replicas=3, router=router, engine=EngineConfig(), step=DETERMINISTIC, scrape_interval_s=60.0)
    ref = run_policy_fleet(trace, config, policy, seed=5)
    fast = simulate_policy(trace, config, policy, seed=5)
    rows = fast.rows
    assert len(rows) == ref.reqs.n
    for mine, theirs in (("sched", "sched_t"), ("first", "first_t"), ("finish", "finish_t"), ("arrival", "eng_arrival")):
        assert np.array_equal(rows[mine], np.array(getattr(ref.reqs, theirs)), equal_nan=True), f"{name}: {mine}"
    for mine, theirs in (("replica", "replica"), ("reason", "reason"), ("gen", "gen"), ("npre", "npre"),
                         ("prompt", "prompt")):
        assert np.array_equal(rows[mine], np.array(getattr(ref.reqs, theirs))), f"{name}: {mine}"
    assert np.array_equal(fast.origin, ref.origin) and np.array_equal(fast.attempt, ref.attempt)
    assert fast.retries_refused == ref.retries_refused
    for r in range(len(ref.counters)):
        assert np.array_equal(ref.counters[r].gauges, fast.gauges[r]), f"{name}: gauges of replica {r}"
    if policy.autoscaler:
        for f in ("t", "provisioned", "ready", "signal"):
            assert np.array_equal(getattr(ref.timeline, f), getattr(fast.timeline, f)), f"{name}: timeline {f}"
        # the policy acted: replicas came and went
        assert fast.timeline.provisioned.max() > policy.autoscaler.start
        assert fast.timeline.provisioned.min() <= fast.timeline.provisioned.max() - 1
    if policy.admission:
        assert (rows["reason"] == REASON_REJECTED).sum() > 0
    if policy.retry:
        assert fast.attempt.max() >= 2
    # every request finished or was rejected
    assert (rows["reason"] >= 0).all()


def test_retry_arithmetic_methods_8_2() -> None:
    # attempts per request when each is rejected with probability p, at most m attempts
    for p, m, want in ((0.1, 3, 1.11), (0.5, 3, 1.75), (0.9, 3, 2.71), (0.99, 3, 2.9701), (0.9, 4, 3.439)):
        assert expected_attempts(p, m) == pytest.approx(want, abs=1e-12)
    assert expected_attempts(0.999999, 3) == pytest.approx(3.0, abs=1e-5)  # "just below 3X"
    # exponential backoff: 1, 2, 4 s ... times the jitter factor
    r = Retry(backoff_s=1.0, multiplier=2.0, jitter=1.0)
    assert [backoff(r, a, 0.5) for a in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert backoff(Retry(backoff_s=0.25, jitter=0.0), 3, 0.9) == 1.0
    # layers multiply; client-side throttling (K = 2); Little's law at saturation
    assert layered_attempts(4, 3) == 64 and layered_attempts(3, 5) == 243
    assert client_throttle(1000, 300) == 0.3996003996003996
    assert client_throttle(1000, 500) == 0 and client_throttle(1000, 600) == 0
    assert client_throttle(100, 0) == 0.9900990099009901
    assert saturated_queue_wait(10 * 8, 0.1, 8) == pytest.approx(1.0)  # L_q = 10c, S = 0.1 s: 1 s (1.1 s with service)


def test_the_twins_uniform_floats_are_pythons() -> None:
    rng = random.Random(1234)
    assert list(uniform_floats(1234, 50)) == [rng.random() for _ in range(50)]


def test_retries_amplify_as_8_2_says_when_every_attempt_is_rejected() -> None:
    """k = 0 with a replica whose queue is never empty rejects everything: attempts per request is the
    cap (p -> 1: 3 attempts); with a budget of 60 retries a minute, at most 60 more a minute."""
    trace = generate_trace(seed=3, hours=0.25, warmup_s=0.0)
    # one replica, a KV cache that holds one long request: the queue never drains
    config = FleetConfig(replicas=1, engine=EngineConfig(num_gpu_blocks=2048, max_num_seqs=1), step=DETERMINISTIC,
                         scrape_interval_s=60.0)
    for budget, ratio in ((None, None), (60.0, None), (None, 0.1)):
        retry = Retry(attempts=3, budget_per_minute=budget, ratio=ratio)
        sim = simulate_policy(trace, config, Policy(admission=Admission(0.0), retry=retry), seed=1)
        rows = sim.rows
        n = len(trace.arrival_s)
        out = user_outcomes(sim.origin, sim.attempt, rows["arrival"], rows["first"], rows["finish"], rows["gen"],
                            rows["reason"], rows["path"])
        rejected_share = float(out["rejected"].mean())
        assert rejected_share > 0.9
        if ratio is not None:
            # the SRE book's per-client 10 % retry ratio: attempts <= 1.1 x requests
            assert 1.05 < len(rows) / n <= 1.1 + 1 / n
        elif budget is None:
            # each rejected user request made 3 attempts: attempts per request close to 1 + 2 x rejected
            assert sim.attempt.max() == 3
            assert len(rows) / n > 2.5
        else:
            minutes = int(trace.duration_s // 60) + 2
            assert len(rows) - n <= 60 * minutes
            assert sim.retries_refused > 0


def test_an_autoscaler_pays_for_what_it_starts() -> None:
    tl = Timeline(t=np.array([15.0, 30.0, 45.0]), provisioned=np.array([3, 3, 2]), ready=np.array([2, 3, 2]),
                  signal=np.array([5.0, 1.0, 0.0]), start=2)
    # [0, 15): 2, [15, 45): 3, [45, 60): 2
    assert tl.replica_seconds(0.0, 60.0) == 2 * 15 + 3 * 30 + 2 * 15
    assert tl.replica_seconds(20.0, 50.0) == 3 * 25 + 2 * 5


def test_policy_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="signal"):
        Autoscaler(signal="gpu_util")
    with pytest.raises(ValueError, match="min_replicas"):
        Autoscaler(min_replicas=4, max_replicas=2)
    with pytest.raises(ValueError, match="admission"):
        Policy(retry=Retry())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(accuracy.AUTOSCALER_CASES))
def test_the_twin_predicts_the_true_breach_share_under_an_autoscaler(name: str) -> None:
    """Issue 15, Must show: the simulator runs the fleet with the policy (per-request records: the
    truth); the twin, fitted from the fleet's minimal export alone, replays the policy over the
    observed demand; its breach share is within +-25 % of the truth on every path."""
    rows = accuracy.autoscaler_rows([name], seeds=3)
    assert {r["path"] for r in rows} == set(accuracy.case(name).promises)
    for r in rows:
        assert r["truth"] > 0.01, "a policy whose breaches can be compared"
        assert abs(r["twin"] - r["truth"]) <= 0.25 * r["truth"], r
        assert r["low"] <= r["truth"] <= r["high"]
        # the autoscaler acted (the mean is not the minimum), and the twin paid for about as many replicas
        assert r["true_mean_replicas"] > accuracy.AUTOSCALER_CASES[name].min_replicas + 0.2
        assert r["twin_mean_replicas"] == pytest.approx(r["true_mean_replicas"], rel=0.1)

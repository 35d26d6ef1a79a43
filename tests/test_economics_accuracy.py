"""Accuracy against simulated truth (issue "Headroom economics", Must show).

The simulator runs the bundled day (seed 7, four replicas: the N0 export). The economics are fitted
on that export alone; each scenario's truth is the SAME arrival trace replayed by the simulator at the
scenario's replica count, traffic and context. Goal on the TTFT share at a bucket-bound threshold
(0.5 s interactive, 5 s batch) and on the joint share: within +-25 % relative or +-0.5 percentage
point of the truth on every scenario that is not flagged; every flagged scenario's interval contains
the truth. The full grid (`python -m app.economics.accuracy`) and its error table are in README.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.economics import accuracy

N0 = accuracy.N0
# under-provisioned, over-provisioned, busier, longer contexts (flagged)
GRID = [(N0 - 1, 1.0, 1.0), (N0 + 2, 1.0, 1.0), (N0 + 1, 1.5, 1.0), (N0 + 2, 1.0, 1.5)]


@pytest.fixture(scope="module")
def fitted() -> tuple:
    analysis, trace = accuracy.fit_on_export()
    assert analysis.observed.replicas == N0
    return analysis, trace


def test_goal_arithmetic() -> None:
    assert accuracy.within_goal(0.124, 0.1) and not accuracy.within_goal(0.126, 0.1)
    assert accuracy.within_goal(0.009, 0.004) and not accuracy.within_goal(0.0095, 0.004)


@pytest.mark.slow
@pytest.mark.parametrize(("replicas", "traffic", "context"), GRID)
def test_predictions_meet_the_goal(fitted: tuple, replicas: int, traffic: float, context: float) -> None:
    analysis, trace = fitted
    rows = accuracy.evaluate(analysis, trace, replicas, traffic, context, seeds=3)
    assert {r["path"] for r in rows} == {"interactive", "batch"}
    for r in rows:
        assert r["joint_low"] <= r["joint_predicted"] <= r["joint_high"]
        assert r["extrapolated"] == (context != 1.0), r
        if r["extrapolated"]:
            assert r["joint_low"] <= r["joint_true"] <= r["joint_high"], r
        else:
            assert accuracy.within_goal(r["ttft_predicted"], r["ttft_true"]), r
            assert accuracy.within_goal(r["joint_predicted"], r["joint_true"]), r
        assert r["meets_goal"], r


@pytest.mark.slow
def test_a_grid_row_replays_the_same_requests_unchanged(fitted: tuple) -> None:
    """The runs of a grid row share one synthesized request set (scenarios._run's cache): a run must
    not change it, so the second N' gives exactly what a replay with its own requests gives."""
    from app.economics import scenarios
    from app.economics.replay import demand_requests, replay

    analysis, _ = fitted
    cache: dict = {}
    first = scenarios._run(analysis, scenarios._Job(N0, 1.0, 1.0, 2000, "fit"), cache)
    second = scenarios._run(analysis, scenarios._Job(N0 + 1, 1.0, 1.0, 2000, "fit"), cache)
    assert len(cache) == 1
    alone = replay(analysis.model, analysis.demand, N0 + 1, analysis.thresholds, 1.0, 1.0, seed=2000)
    assert (second.joint, second.ttft, second.requests) == (alone.joint, alone.ttft, alone.requests)
    fresh = demand_requests(analysis.demand, 1.0, 1.0, 2000)
    kept = cache[(1.0, 1.0, 2000)]
    assert all(np.array_equal(kept[k], fresh[k]) for k in fresh)
    assert first.sim_seconds > 0

"""Accuracy against simulated truth (issue "Headroom economics", Must show).

The simulator runs the bundled day (seed 7, four replicas: the N0 export). The economics are fitted
on that export alone; each scenario's truth is the SAME arrival trace replayed by the simulator at the
scenario's replica count, traffic and context. Goal on the TTFT share at a bucket-bound threshold
(0.5 s interactive, 5 s batch) and on the joint share: within +-25 % relative or +-0.5 percentage
point of the truth on every scenario that is not flagged; every flagged scenario's interval contains
the truth. The full grid (`python -m app.economics.accuracy`) and its error table are in README.
"""

from __future__ import annotations

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

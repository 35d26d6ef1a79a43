"""Accuracy against simulated truth (issue "Headroom economics", Must show).

The simulator runs the bundled day (seed 7, four replicas: the N0 export). The economics are fitted
on that export alone; each scenario's truth is the SAME arrival trace replayed by the simulator at the
scenario's replica count, traffic and context. Goal on the TTFT share at a bucket-bound threshold
(0.5 s interactive, 5 s batch) and on the joint share: within +-25 % relative or +-0.5 percentage
point of the truth on every scenario that is not flagged; every flagged scenario's interval contains
the truth. The full grid and its error table are in README ("Accuracy against simulated truth").
"""

from __future__ import annotations

import pandas as pd
import pytest

from app.economics import scenarios as sc
from app.promise import Promise
from app.simulator import FleetConfig, generate_trace, run_scenario, scenario_trace, simulate_day, true_shares
from app.simulator.sample import PROMISES
from app.store import Workspace

SEED, N0, HOURS = 7, 4, 24.0
SERVED = {"interactive": "llama-3.1-8b-interactive", "batch": "llama-3.1-8b-batch"}
# (replicas, traffic, context): under-provisioned, over-provisioned, busier, longer contexts (flagged)
GRID = [(N0 - 1, 1.0, 1.0), (N0 + 2, 1.0, 1.0), (N0 + 1, 1.5, 1.0), (N0 + 2, 1.0, 1.5)]


def within_goal(predicted: float, truth: float) -> bool:
    return abs(predicted - truth) <= max(0.25 * truth, 0.005)


@pytest.fixture(scope="module")
def fitted() -> tuple[sc.Analysis, object]:
    export = simulate_day(seed=SEED, replicas=N0, hours=HOURS, scrape_interval_s=15.0)
    ws = Workspace(":memory:")
    report = ws.load_frame(export.metrics_frame, "n0-export")
    assert report.status == "loaded"
    promises = [Promise(path=SERVED[p], ttft_s=t, tpot_s=y) for p, (t, y) in PROMISES.items()]
    analysis = sc.analyse(ws, [report.dataset_id], promises, ["model_name"])
    trace = generate_trace(SEED, hours=HOURS)
    return analysis, trace


@pytest.mark.slow
@pytest.mark.parametrize(("replicas", "traffic", "context"), GRID)
def test_predictions_meet_the_goal(fitted: tuple[sc.Analysis, object], replicas: int, traffic: float,
                                   context: float) -> None:
    analysis, trace = fitted
    assert analysis.observed.replicas == N0
    start = pd.Timestamp(trace.origin + trace.warmup_s, unit="s", tz="UTC")
    truth_records = run_scenario(scenario_trace(trace, traffic, context), replicas,
                                 config=FleetConfig(scrape_interval_s=15.0), seed=SEED)
    truth = true_shares(truth_records, None, PROMISES, start=start,
                        end=start + pd.Timedelta(hours=HOURS)).set_index("path")
    predictions = sc.predict(analysis, replicas, traffic, context, seeds=3)
    assert {p.path for p in predictions} == set(SERVED.values())
    for p in predictions:
        name = next(k for k, v in SERVED.items() if v == p.path)
        true_ttft, true_joint = truth.loc[name, "ttft_share"], truth.loc[name, "joint_share"]
        assert p.breach_share_low <= p.breach_share <= p.breach_share_high
        if p.extrapolated:
            assert context != 1.0 or traffic != 1.0
            assert p.breach_share_low <= true_joint <= p.breach_share_high, (name, p, true_joint)
        else:
            assert within_goal(p.ttft_share, true_ttft), (name, p.ttft_share, true_ttft)
            assert within_goal(p.breach_share, true_joint), (name, p.breach_share, true_joint)

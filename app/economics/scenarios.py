"""Scenarios: fit the replica model and the demand once, calibrate the twin at the observed fleet size,
then predict per path the breach shares at N' replicas, traffic x g and context x m, with an interval.

Model error: the twin is replayed at the observed replica count and its per-path breach shares are
compared with the observed ones (from the histograms); the relative error is shown and widens every
interval. Calibration is optional (off by default, stated in the output when on): two scale factors
are then set so that the twin's mean TPOT and mean TTFT equal the observed means (``_sum``/``_count``):
``tpot_scale`` on the step time, ``prefill_scale`` on the prefill work. On the simulated test fleet
the uncalibrated twin fitted on 5-minute windows was the more accurate, so calibration is a choice
the operator makes, not a default.

Interval: the spread over seeds, widened by the model error at the observed N. A scenario is flagged
``extrapolated`` when it leaves what the data supports: a peak per-replica load above the highest
observed (when the data never showed the fleet saturated), a context multiplier (the length
distribution was never observed at that size), or fewer replicas than observed without observed
saturation. A flagged scenario's interval also spans the twin run with the KV capacity and step
time each 15 % less favourable and more favourable (a sensitivity envelope).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.cube import ensure_cube
from app.economics.capacity import Assumptions, ReplicaModel, fit_replica
from app.economics.demand import Demand, observed_demand
from app.economics.replay import RunShares, Thresholds, demand_requests, replay
from app.promise import Promise, shares, time_range
from app.store import Workspace

CALIBRATION_ROUNDS = 2
FIT_WINDOWS_S = (300,)
SENSITIVITY = 0.15
MIN_REL_ERROR = 0.25  # the interval is never narrower than +-25 % of the point (the accuracy measured on simulated truth)
MIN_ABS_ERROR = 0.002  # nor than +-0.2 percentage point


@dataclass
class Observed:
    """What the histograms say at the observed fleet size, per path over the whole range."""

    replicas: int
    requests: dict[str, float]
    ttft: dict[str, float]
    tpot: dict[str, float]
    joint_low: dict[str, float]
    joint_high: dict[str, float]
    ttft_mean_s: dict[str, float]
    tpot_mean_s: dict[str, float]


@dataclass
class Analysis:
    model: ReplicaModel
    demand: Demand
    observed: Observed
    thresholds: dict[str, Thresholds]
    calibration: dict[str, Any] = field(default_factory=dict)
    model_error: dict[str, dict[str, float]] = field(default_factory=dict)  # path -> metric -> relative error
    peak_load_observed: float = 0.0  # requests/s per replica, highest 5-minute window


@dataclass
class Prediction:
    replicas: int
    traffic: float
    context: float
    path: str
    requests: float
    ttft_share: float
    tpot_share: float
    breach_share: float
    breach_share_low: float
    breach_share_high: float
    extrapolated: bool
    reasons: list[str]
    seeds: list[dict[str, float]]


def _observed(ws: Workspace, dataset_ids: list[int], promises: list[Promise], path_labels: list[str],
              replicas: int | None) -> tuple[Observed, dict[str, Thresholds]]:
    cube_id = ensure_cube(ws, dataset_ids, 300, path_labels)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, promises, start, end, include_failed=False)
    if frame.empty:
        raise ValueError("no path with a TTFT/TPOT histogram and a promise: nothing to predict")
    means = ws.cursor().execute(
        "select path, signal, sum(value) filter (where stat = 'sum') / sum(value) filter (where stat = 'count') "
        "from cube_rows where cube_id = $id and signal in ('ttft', 'tpot') group by all", {"id": cube_id}).fetchall()
    mean = {(p, s): v for p, s, v in means}
    if replicas is None:
        per_window = ws.cursor().execute(
            "select window_start, max(value) from cube_rows where cube_id = $id and stat = 'replicas' "
            "group by 1", {"id": cube_id}).fetchall()
        replicas = int(round(float(np.median([v for _, v in per_window]))))
    th = {r.path: Thresholds(ttft_s=_f(r.ttft_threshold_s), tpot_s=_f(r.tpot_threshold_s)) for r in frame.itertuples()}
    obs = Observed(
        replicas=replicas,
        requests={r.path: float(r.requests) for r in frame.itertuples()},
        ttft={r.path: _f(r.ttft_share) for r in frame.itertuples()},
        tpot={r.path: _f(r.tpot_share) for r in frame.itertuples()},
        joint_low={r.path: _f(r.joint_low) for r in frame.itertuples()},
        joint_high={r.path: _f(r.joint_high) for r in frame.itertuples()},
        ttft_mean_s={p: mean.get((p, "ttft")) for p in th},
        tpot_mean_s={p: mean.get((p, "tpot")) for p in th},
    )
    return obs, th


def _f(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _mean_latencies(model: ReplicaModel, demand: Demand, replicas: int, seed: int) -> tuple[dict, dict]:
    from app.economics.demand import synthesize
    from app.economics.replay import WARMUP_S, _trace, _with_warmup, outcomes, twin_config
    from app.simulator.fleet import run_fleet

    reqs = _with_warmup(demand, synthesize(demand, 1.0, 1.0, seed), seed)
    trace = _trace(demand, reqs, seed, 32768)
    d = outcomes(run_fleet(trace, twin_config(model, replicas), seed=seed, drain=True))
    ttft, tpot = {}, {}
    for k, name in enumerate(trace.path_names):
        sel = (d["path"] == k) & (d["first_token"] >= WARMUP_S)
        done = sel & d["finished"]
        ttft[name] = float(np.nanmean(d["ttft_s"][sel]))
        tpot[name] = float(np.nanmean(d["tpot_s"][done]))
    return ttft, tpot


def analyse(ws: Workspace, dataset_ids: list[int], promises: list[Promise], path_labels: list[str],
            assumptions: Assumptions | None = None, observed_replicas: int | None = None,
            calibrate: bool = False, seeds: int = 2) -> Analysis:
    """Fit, reconstruct demand, choose the fit that best reproduces the observed shares at the
    observed N, optionally calibrate, and measure the model error there."""
    demand = observed_demand(ws, dataset_ids, path_labels)
    observed, thresholds = _observed(ws, dataset_ids, promises, path_labels, observed_replicas)
    demand.paths = [p for p in demand.paths if p.name in thresholds]
    # the step time is fitted on 5-minute and on 1-minute replica windows (the first averages the
    # sampled gauges better, the second has more busy windows); the one whose replay at the observed
    # fleet size is closer to the observed shares is kept
    candidates = []
    for window_s in FIT_WINDOWS_S:
        try:
            candidate = fit_replica(ws, dataset_ids, assumptions, window_s=window_s)
        except ValueError:
            continue
        run = replay(candidate, demand, observed.replicas, thresholds, seed=900)
        candidates.append((_selection_error(run, observed), window_s, candidate))
    if not candidates:
        fit_replica(ws, dataset_ids, assumptions)  # raises the fit's own error
    _, window_s, model = min(candidates, key=lambda c: c[0])
    analysis = Analysis(model=model, demand=demand, observed=observed, thresholds=thresholds)
    analysis.calibration = {"fit_window_s": window_s,
                            "fit_candidates": [{"window_s": w, "replay_error": e} for e, w, _ in candidates]}
    if calibrate:
        tpot_scale, prefill_scale = 1.0, 1.0
        weights = observed.requests
        for _ in range(CALIBRATION_ROUNDS):
            m = replace(model, assumptions=replace(model.assumptions, tpot_scale=tpot_scale,
                                                   prefill_scale=prefill_scale))
            ttft_pred, tpot_pred = _mean_latencies(m, demand, observed.replicas, seed=101)
            tpot_scale *= _weighted_ratio(observed.tpot_mean_s, tpot_pred, weights)
            prefill_scale *= _weighted_ratio(observed.ttft_mean_s, ttft_pred, weights)
        analysis.model = replace(model, assumptions=replace(model.assumptions, tpot_scale=tpot_scale,
                                                            prefill_scale=prefill_scale))
        analysis.calibration.update({"tpot_scale": tpot_scale, "prefill_scale": prefill_scale,
                                     "matched": "mean TPOT and mean TTFT at the observed replica count"})
    runs = [replay(analysis.model, demand, observed.replicas, thresholds, seed=1000 + s) for s in range(seeds)]
    for path in thresholds:
        err = {}
        for metric, obs in (("ttft", observed.ttft), ("tpot", observed.tpot)):
            pred = float(np.mean([getattr(r, metric)[path] for r in runs]))
            err[metric] = _rel_error(pred, obs.get(path))
        pred_joint = float(np.mean([r.joint[path] for r in runs]))
        lo, hi = observed.joint_low[path], observed.joint_high[path]
        inside = lo is not None and hi is not None and lo - 1e-12 <= pred_joint <= hi + 1e-12
        err["joint"] = 0.0 if inside else _rel_error(pred_joint, lo if pred_joint < (lo or 0) else hi)
        err["joint_predicted"] = pred_joint
        analysis.model_error[path] = err
    window_requests = sum(p.requests for p in demand.paths)
    per5 = np.convolve(window_requests, np.ones(5), mode="valid") / (5 * demand.window_s)
    analysis.peak_load_observed = float(np.max(per5 / observed.replicas))
    return analysis


def _selection_error(run: RunShares, observed: Observed) -> float:
    """Request-weighted distance of a replay's joint shares from the observed joint interval."""
    total, weight = 0.0, 0.0
    for path, pred in run.joint.items():
        lo, hi = observed.joint_low.get(path), observed.joint_high.get(path)
        if lo is None or hi is None or math.isnan(pred):
            continue
        gap = lo - pred if pred < lo else (pred - hi if pred > hi else 0.0)
        w = observed.requests.get(path, 0.0)
        total += w * gap / max(hi, 1e-3)
        weight += w
    return total / weight if weight else math.inf


def _weighted_ratio(observed: dict[str, float | None], predicted: dict[str, float], weights: dict[str, float]) -> float:
    num = sum(weights[p] * observed[p] for p in predicted if observed.get(p) and predicted[p] > 0)
    den = sum(weights[p] * predicted[p] for p in predicted if observed.get(p) and predicted[p] > 0)
    return num / den if den > 0 else 1.0


def _rel_error(pred: float, obs: float | None) -> float:
    if obs is None or math.isnan(pred):
        return math.nan
    return abs(pred - obs) / max(obs, 1e-3)


def _flags(analysis: Analysis, replicas: int, traffic: float, context: float) -> list[str]:
    reasons = []
    obs = analysis.observed
    peak = analysis.peak_load_observed * obs.replicas * traffic / replicas
    saturated = analysis.model.saturation_observed
    if context != 1.0:
        reasons.append(f"context x{context:g}: prompt lengths never observed at that size")
    if not saturated and (peak > analysis.peak_load_observed * 1.05):
        reasons.append("per-replica peak load above the observed peak, and the data never showed saturation "
                       "(capacity is a lower bound)")
    if peak > 2.0 * analysis.peak_load_observed:
        reasons.append(f"per-replica peak load {peak / analysis.peak_load_observed:.1f}x the observed peak")
    return reasons


@dataclass(frozen=True)
class _Job:
    """One twin run of a scenario: a seed of the fitted model, or a sensitivity variant."""

    replicas: int
    traffic: float
    context: float
    seed: int
    variant: str  # "fit" | "worse" | "better"


def _jobs(analysis: Analysis, replicas: int, traffic: float, context: float, seeds: int) -> list[_Job]:
    jobs = [_Job(replicas, traffic, context, 2000 + s, "fit") for s in range(seeds)]
    if _flags(analysis, replicas, traffic, context):
        jobs += [_Job(replicas, traffic, context, 2000, v) for v in ("worse", "better")]
    return jobs


def _variant(model: ReplicaModel, variant: str) -> ReplicaModel:
    """The fitted model, or one with KV capacity and step/prefill time SENSITIVITY less/more favourable."""
    if variant == "fit":
        return model
    sign = 1 if variant == "worse" else -1
    a = model.assumptions
    return replace(model, kv_tokens=model.kv_tokens * (1 - sign * SENSITIVITY), assumptions=replace(
        a, tpot_scale=a.tpot_scale * (1 + sign * SENSITIVITY), prefill_scale=a.prefill_scale * (1 + sign * SENSITIVITY)))


_REQUESTS_KEPT = 4  # synthesized request sets a process keeps (about 30-50 MB each for a day)


def _run(analysis: Analysis, job: _Job, cache: dict[tuple[float, float, int], Any]) -> RunShares:
    """One twin run. ``cache`` keeps the last synthesized requests: the runs of a grid row (same
    traffic, context and seed at several N') replay the same requests, one row after another."""
    key = (job.traffic, job.context, job.seed)
    if key not in cache:
        while len(cache) >= _REQUESTS_KEPT:
            del cache[next(iter(cache))]  # the oldest
        cache[key] = demand_requests(analysis.demand, job.traffic, job.context, job.seed)
    return replay(_variant(analysis.model, job.variant), analysis.demand, job.replicas, analysis.thresholds,
                  job.traffic, job.context, seed=job.seed, requests=cache[key])


_WORKER_ANALYSIS: Analysis | None = None
_WORKER_REQUESTS: dict[tuple[float, float, int], Any] = {}


def _init_worker(analysis: Analysis) -> None:
    global _WORKER_ANALYSIS
    _WORKER_ANALYSIS = analysis


def _run_in_worker(job: _Job) -> RunShares:
    assert _WORKER_ANALYSIS is not None
    return _run(_WORKER_ANALYSIS, job, _WORKER_REQUESTS)


def default_workers() -> int:
    """Processes for the replays: ``$HEADROOM_WORKERS``, else every core."""
    return max(1, int(os.environ.get("HEADROOM_WORKERS") or os.cpu_count() or 1))


def _assemble(analysis: Analysis, replicas: int, traffic: float, context: float, runs: list[RunShares],
              envelope: list[RunShares]) -> list[Prediction]:
    reasons = _flags(analysis, replicas, traffic, context)
    out = []
    for path in analysis.thresholds:
        joint = [r.joint[path] for r in runs]
        point = float(np.mean(joint))
        err = analysis.model_error.get(path, {}).get("joint", 0.0)
        err = max(err if not math.isnan(err) else 0.0, MIN_REL_ERROR)
        lo = min(joint + [r.joint[path] for r in envelope])
        hi = max(joint + [r.joint[path] for r in envelope])
        low = max(0.0, min(lo * (1 - err), point - MIN_ABS_ERROR))
        high = min(1.0, max(hi * (1 + err), point + MIN_ABS_ERROR))
        out.append(Prediction(
            replicas=replicas, traffic=traffic, context=context, path=path,
            requests=float(np.mean([r.requests[path] for r in runs])),
            ttft_share=float(np.mean([r.ttft[path] for r in runs])),
            tpot_share=float(np.mean([r.tpot[path] for r in runs])),
            breach_share=point, breach_share_low=low, breach_share_high=high,
            extrapolated=bool(reasons), reasons=reasons,
            seeds=[{"ttft": r.ttft[path], "tpot": r.tpot[path], "joint": r.joint[path]} for r in runs],
        ))
    return out


def predict(analysis: Analysis, replicas: int, traffic: float = 1.0, context: float = 1.0, seeds: int = 3,
            progress: Callable[[str], None] | None = None, workers: int | None = None) -> list[Prediction]:
    """Per path predictions of one scenario."""
    return grid(analysis, [replicas], [traffic], [context], seeds, progress, workers)


def grid(analysis: Analysis, replicas: Sequence[int], traffic: Sequence[float] = (1.0,),
         context: Sequence[float] = (1.0,), seeds: int = 3,
         progress: Callable[[str], None] | None = None, workers: int | None = None) -> list[Prediction]:
    """Every scenario of the grid. The twin runs (seeds and sensitivity variants of every scenario)
    are independent, so they run in ``workers`` processes (default: every core)."""
    scenarios_ = [(n, g, m) for g in traffic for m in context for n in replicas]
    jobs = [j for n, g, m in scenarios_ for j in _jobs(analysis, n, g, m, seeds)]
    workers = min(workers or default_workers(), len(jobs))
    results: dict[_Job, RunShares] = {}
    started = time.perf_counter()

    def done(job: _Job, run: RunShares) -> None:
        results[job] = run
        if progress:
            progress(f"{len(results)}/{len(jobs)} runs: N'={job.replicas} g={job.traffic:g} m={job.context:g} "
                     f"seed {job.seed} {job.variant} ({run.sim_seconds:.1f} s; {time.perf_counter() - started:.0f} s "
                     f"so far)")

    if workers <= 1:
        cache: dict[tuple[float, float, int], Any] = {}
        for job in jobs:
            done(job, _run(analysis, job, cache))
    else:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding DuckDB threads
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(analysis,)) as pool:
            # longest first (more demand, then fewer replicas: longer queues), so that the last
            # runs to finish are short ones and no process idles while one long run remains
            by_cost = sorted(jobs, key=lambda j: (-j.traffic * j.context, j.replicas))
            futures = {pool.submit(_run_in_worker, job): job for job in by_cost}
            for future in as_completed(futures):
                done(futures[future], future.result())
    out = []
    for n, g, m in scenarios_:
        mine = [j for j in jobs if (j.replicas, j.traffic, j.context) == (n, g, m)]
        out.extend(_assemble(analysis, n, g, m, [results[j] for j in mine if j.variant == "fit"],
                             [results[j] for j in mine if j.variant != "fit"]))
    return out

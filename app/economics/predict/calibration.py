"""Fit by simulation and calibration: the twin at the observed fleet size, replaying the observed
demand, must show what the observed fleet showed.

The step-time regression (:mod:`app.economics.model.capacity`) gives the shape of the step law; what it
cannot pin down, the twin run at the observed replica count can:

- **KV capacity** (when neither given nor in ``cache_config_info``): the tokens the twin's running
  requests hold, window by window, against ``kv_cache_usage_perc`` in the same windows (both below
  90 %, where the capacity does not yet shape what is held): capacity = twin tokens / observed usage.
  Long requests stay longer, so they fill more of the running set than the mean finished prompt says;
  the twin counts them as they are.
- **step-time level** (``tpot_scale``): the twin's token-weighted mean inter-token latency against the
  ITL histogram's ``_sum`` / ``_count``.
- **prefill level** (``prefill_scale``): the twin's mean TTFT minus mean queue time against the
  histograms' (what a request waits after it is scheduled: its prefill chunks).
- **router** (when not given): how unevenly first tokens and outstanding requests spread over the
  replicas (``dispersion``), against the twin's under each routing policy (``fit_router``).

The first three are solved together by a few rounds of a damped fixed point (each round one twin run
at the observed N); the router is chosen on the calibrated twin, which is calibrated again if it changes. The residual that remains on what was not fitted — the per-path TTFT and TPOT shares at
the promise's thresholds, the mean queue time, the mean running batch — is reported; the analysis
flags a path whose shares are off by more than ``RESIDUAL_FLAG`` and widens its intervals by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from app.economics.model.capacity import ReplicaModel, Source, set_kv_tokens, steady_intervals
from app.economics.model.demand import Demand
from app.economics.run.replay import (
    WARMUP_S,
    Requests,
    Thresholds,
    shares_of_counts,
    simulate_twin,
    twin_config,
)
from app.engine.config import ROUTERS
from app.engine.outcomes import US

ROUNDS = 8
TOLERANCE = 0.01  # stop when every fitted quantity moved by less than 1 %
KV_UNSATURATED = 0.9  # windows with KV usage below this (observed and twin) size the cache
SCALE_BOUNDS = (0.2, 5.0)
ELASTICITY_STEP = 0.03  # a scale must have moved by 3 % for the response to measure its elasticity
ELASTICITY_BOUNDS = (0.5, 4.0)
CALIBRATION_SEED = 101
MAX_CALIBRATION_SEEDS = 4
CALIBRATION_REQUESTS = 200_000  # a round replays about this many requests in all (or one seed's)
PEAK_PERCENTILE = 99  # the busiest batches: what TPOT and KV pressure under more load depend on


@dataclass
class Targets:
    """What the observed fleet shows, in the quantities the twin is fitted and judged on."""

    itl_mean_s: float | None  # token-weighted mean inter-token latency (all replicas)
    prefill_mean_s: float | None  # mean prefill time (the histogram's; else mean TTFT - mean queue time)
    kv_by_window: np.ndarray  # fleet-mean KV usage per demand window (NaN: no scrape)
    running_mean: float | None  # mean running requests per replica
    running_peak: float | None  # the 99th percentile of running requests per replica and scrape
    waiting_mean: float | None
    queue_mean_s: dict[str, float | None]  # per path
    dispersion: float | None = None  # of first tokens across replicas per window (see ``dispersion``)
    outstanding_dispersion: float | None = None  # of running + waiting across replicas per scrape
    prefill_from: str = "the prefill-time histogram"  # or "TTFT minus queue time"


def dispersion(counts: np.ndarray) -> float | None:
    """How unevenly requests spread over the replicas: per demand window the variance of the replicas'
    first tokens over their mean, pooled over windows (``counts`` [window, replica]; windows with a replica
    missing are left out). About 1 for a random router (Poisson-like), near 0 for round robin; a
    least-outstanding or power-of-two router lies between. The metrics show it, so the router is fitted
    on it by simulation."""
    ok = np.isfinite(counts).all(axis=1) & (counts.sum(axis=1) > 0)
    if ok.sum() < 10 or counts.shape[1] < 2:
        return None
    c = counts[ok]
    return float(c.var(axis=1).sum() / c.mean(axis=1).sum())


def _window(ts_unix: np.ndarray, demand: Demand) -> np.ndarray:
    """Demand window of each time (windows are (start, start + window])."""
    return np.ceil((ts_unix - demand.origin) / demand.window_s - 1e-9).astype(int) - 1


def _unix(ts: pd.Series) -> np.ndarray:
    """Naive UTC timestamps as Unix seconds."""
    return ts.astype("datetime64[us]").astype("int64").to_numpy() / 1e6


def _windows(demand: Demand) -> int:
    return int(round(demand.duration_s / demand.window_s))


def _observed_dispersion(intervals: pd.DataFrame, demand: Demand) -> float | None:
    ok = steady_intervals(intervals)
    if ok.empty:
        return None
    typical = float(intervals["dt_s"].median())
    n_win = _windows(demand)
    replicas = sorted(ok["replica"].unique())
    counts = np.full((n_win, len(replicas)), np.nan)
    window = _window(_unix(ok["ts"]), demand)
    col = ok["replica"].map({r: i for i, r in enumerate(replicas)}).to_numpy()
    keep = (window >= 0) & (window < n_win)
    frame = pd.DataFrame({"m": window[keep], "r": col[keep], "n": ok["ttft_count"].to_numpy(float)[keep]})
    # a window counts only when every scrape of it is there for that replica
    per = frame.groupby(["m", "r"]).agg(n=("n", "sum"), k=("n", "size")).reset_index()
    full = per["k"] >= int(round(demand.window_s / typical))
    counts[per["m"][full], per["r"][full]] = per["n"][full]
    return dispersion(counts)


def _observed_outstanding_dispersion(intervals: pd.DataFrame) -> float | None:
    if intervals.empty or intervals["running"].isna().all():
        return None
    table = intervals.assign(out=intervals["running"] + intervals["waiting"].fillna(0)).pivot_table(
        index="ts", columns="replica", values="out", aggfunc="sum")
    return dispersion(table.to_numpy(float))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 and math.isfinite(num) else None


def observed_targets(intervals: pd.DataFrame, demand: Demand, path_means: pd.DataFrame) -> Targets:
    """``intervals``: rows of ``capacity__scrape_intervals``; ``path_means``: per path and signal the
    histograms' ``_sum`` and ``_count`` over the range (columns path, signal, sum, count)."""
    ok = intervals[intervals["resets"] == 0] if len(intervals) else intervals
    itl = _ratio(float(ok["itl_sum"].sum()), float(ok["itl_count"].sum())) if len(ok) else None
    ttft = _ratio(float(ok["ttft_sum"].sum()), float(ok["ttft_count"].sum())) if len(ok) else None
    queue = _ratio(float(ok["queue_sum"].sum()), float(ok["queue_count"].sum())) if len(ok) else None
    # the prefill time as the engine measures it (vLLM 0.6.4+: scheduled to first token), else TTFT
    # minus queue time, which also holds the wait for the step under way and the hops between the API
    # server and the engine core (vLLM counts a request queued only once the engine core takes it in,
    # between steps; the twin's queue time holds that wait already)
    prefill = (_ratio(float(ok["prefill_sum"].sum()), float(ok["prefill_count"].sum()))
               if len(ok) and "prefill_count" in ok and ok["prefill_count"].fillna(0).sum() > 0 else None)
    prefill_from = "the prefill-time histogram"
    if prefill is None:
        prefill = ttft - queue if ttft is not None and queue is not None and ttft > queue else None
        prefill_from = "TTFT minus queue time"
    n_win = _windows(demand)
    kv = np.full(n_win, np.nan)
    if len(intervals) and intervals["kv_usage"].notna().any():
        window = _window(_unix(intervals["ts"]), demand)
        keep = (window >= 0) & (window < n_win) & intervals["kv_usage"].notna().to_numpy()
        sums = np.bincount(window[keep], weights=intervals["kv_usage"].to_numpy(float)[keep], minlength=n_win)
        counts = np.bincount(window[keep], minlength=n_win)
        kv = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    means = {(r.path, r.signal): _ratio(r.sum, r.count) for r in path_means.itertuples()}
    return Targets(
        itl_mean_s=itl, prefill_mean_s=prefill, kv_by_window=kv,
        running_mean=float(intervals["running"].mean()) if len(intervals) and intervals["running"].notna().any()
        else None,
        running_peak=float(np.nanpercentile(intervals["running"].to_numpy(float), PEAK_PERCENTILE))
        if len(intervals) and intervals["running"].notna().any() else None,
        waiting_mean=float(intervals["waiting"].mean()) if len(intervals) and intervals["waiting"].notna().any()
        else None,
        queue_mean_s={p.name: means.get((p.name, "queue")) for p in demand.paths},
        dispersion=_observed_dispersion(intervals, demand),
        outstanding_dispersion=_observed_outstanding_dispersion(intervals), prefill_from=prefill_from)


@dataclass
class TwinView:
    """One twin run at the observed fleet size, reduced to the targets' quantities."""

    itl_mean_s: float
    prefill_mean_s: float
    kv_by_window: np.ndarray  # fleet-mean KV usage per demand window
    kv_tokens_by_window: np.ndarray  # fleet-mean tokens held per replica per demand window
    running_mean: float
    running_peak: float  # the 99th percentile over replicas and windows
    waiting_mean: float
    queue_mean_s: dict[str, float]
    ttft_share: dict[str, float]
    tpot_share: dict[str, float]
    joint_share: dict[str, float]
    dispersion: float | None
    outstanding_dispersion: float | None = None
    cached_share: dict[str, float] = field(default_factory=dict)  # of prompt tokens, per path (prefix cache)


def twin_view(model: ReplicaModel, demand: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
              seed: int, requests: Requests | None = None) -> TwinView:
    """One twin run, counted by the engine as it runs (``view_counts``, ``breach_counts`` of each
    request as it finishes): a month's run never holds a row per request. Counts and sums are of whole microseconds, as the arrays hold
    them, so the means equal theirs up to the order of a float sum. ``requests``: ``demand_requests``
    of the run (traffic and context x1, ``seed``, the model's longest sequence) when the caller holds
    them, or a ``RequestSet`` of them."""
    trace, sim = simulate_twin(model, demand, replicas, thresholds, seed=seed, requests=requests)
    assert sim.counts is not None
    names = trace.path_names
    n_win = _windows(demand)
    per_path, decode, counts = sim.counts.per_path, sim.counts.decode, sim.counts.counts
    # the twin's gauges on the demand's window grid; point g is the end of demand window g - WARMUP_S / window - 1
    offset = int(round(WARMUP_S / demand.window_s))
    n_grid = sim.gauges.shape[1] - 1
    gauges = sim.gauges[:, offset + 1: min(offset + 1 + n_win, n_grid)]
    per_window = np.full((n_win, 3), np.nan)  # [window, (running, waiting, kv)], fleet mean
    per_window[: gauges.shape[1]] = gauges.mean(axis=0)
    engine = twin_config(model, replicas, demand.window_s).engine
    blocks_tokens = engine.num_gpu_blocks * engine.block_size
    shares = shares_of_counts(sim, names, thresholds)
    first_n, done_n = int(per_path[:, 0].sum()), int(per_path[:, 2].sum())
    ttft_mean = per_path[:, 1].sum() / US / first_n if first_n else math.nan
    queue_mean = per_path[:, 3].sum() / US / done_n if done_n else math.nan
    return TwinView(
        itl_mean_s=float(decode[0] / US / max(int(decode[1]), 1)),
        prefill_mean_s=float(ttft_mean - queue_mean),
        kv_by_window=per_window[:, 2], kv_tokens_by_window=per_window[:, 2] * blocks_tokens,
        running_mean=float(np.nanmean(per_window[:, 0])), waiting_mean=float(np.nanmean(per_window[:, 1])),
        running_peak=float(np.percentile(gauges[:, :, 0], PEAK_PERCENTILE)) if gauges.size else math.nan,
        queue_mean_s={name: float(per_path[k, 3] / US / per_path[k, 2]) if per_path[k, 2] else math.nan
                      for k, name in enumerate(names)},
        ttft_share=shares.ttft, tpot_share=shares.tpot, joint_share=shares.joint,
        dispersion=dispersion(counts.astype(float)),
        outstanding_dispersion=dispersion((gauges[:, :, 0] + gauges[:, :, 1]).T), cached_share=shares.cached)


def _kv_from(view: TwinView, targets: Targets) -> tuple[float | None, int]:
    """Capacity = the twin's tokens held / the observed usage, over the windows where neither is near
    full; (capacity, windows used)."""
    obs = targets.kv_by_window
    ok = (np.isfinite(obs) & np.isfinite(view.kv_by_window) & (obs > 0.01) & (obs < KV_UNSATURATED)
          & (view.kv_by_window < KV_UNSATURATED))
    if ok.sum() < 5:
        return None, int(ok.sum())
    return float(view.kv_tokens_by_window[ok].sum() / obs[ok].sum()), int(ok.sum())


def calibration_seeds(demand: Demand) -> int:
    """Seeds a calibration round averages: a short export's twin runs are cheap and its few requests
    make one run's means noisy (near saturation a draw of long prompts in a burst moves them by
    10 %), so it takes up to ``MAX_CALIBRATION_SEEDS``; a long one's single run holds enough requests."""
    requests = sum(float(p.requests.sum()) for p in demand.paths)
    return int(min(MAX_CALIBRATION_SEEDS, max(1, CALIBRATION_REQUESTS // max(requests, 1.0))))


def _mean_view(views: list[TwinView]) -> TwinView:
    """The quantities a calibration round fits on, averaged over runs of several seeds (the rest are
    the first run's)."""
    if len(views) == 1:
        return views[0]
    return replace(views[0], itl_mean_s=float(np.mean([v.itl_mean_s for v in views])),
                   prefill_mean_s=float(np.mean([v.prefill_mean_s for v in views])),
                   kv_by_window=np.mean([v.kv_by_window for v in views], axis=0),
                   kv_tokens_by_window=np.mean([v.kv_tokens_by_window for v in views], axis=0))


def next_scale(tried: list[tuple[float, float]], target: float) -> float:
    """The next scale to try so that the twin's value meets ``target``, from the (scale, value) pairs
    tried so far (the value grows with the scale). Near saturation the twin's value answers a scale
    more than in proportion (a slower step holds a larger batch, whose steps are slower still), so a
    proportional step overshoots back and forth: once two tries bracket the target, interpolate
    between the closest pair in log-log (it converges whatever the slope); before, step by the
    elasticity the last two tries measured (at least ``ELASTICITY_BOUNDS[0]``; 1 at the first)."""
    scale, value = tried[-1]
    below = [(s, v) for s, v in tried if v < target]
    above = [(s, v) for s, v in tried if v >= target]
    if below and above:
        s0, v0 = max(below, key=lambda p: p[1])
        s1, v1 = min(above, key=lambda p: p[1])
        if v1 > v0 and s0 != s1:
            w = math.log(target / v0) / math.log(v1 / v0)
            return math.exp(math.log(s0) + w * (math.log(s1) - math.log(s0)))
    elasticity = 1.0
    if len(tried) > 1:
        s0, v0 = tried[-2]
        if abs(math.log(scale / s0)) > ELASTICITY_STEP and v0 > 0 and value > 0:
            elasticity = min(max(math.log(value / v0) / math.log(scale / s0), ELASTICITY_BOUNDS[0]),
                             ELASTICITY_BOUNDS[1])
    return scale * (target / value) ** (1 / elasticity)


def _clamp(x: float) -> float:
    return min(max(x, SCALE_BOUNDS[0]), SCALE_BOUNDS[1])


@dataclass
class Calibration:
    model: ReplicaModel
    rounds: list[dict[str, Any]]
    kv_windows: int = 0
    converged: bool = False

    def summary(self) -> dict[str, Any]:
        a = self.model.assumptions
        return {"tpot_scale": a.tpot_scale, "prefill_scale": a.prefill_scale, "kv_tokens": self.model.kv_tokens,
                "rounds": self.rounds, "converged": self.converged, "kv_windows": self.kv_windows,
                "matched": "mean inter-token latency, mean prefill time, and (when fitted) KV usage "
                           "window by window, at the observed replica count"}


def calibrate(model: ReplicaModel, demand: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
              targets: Targets, fit_kv: bool, scales: bool = True, rounds: int = ROUNDS) -> Calibration:
    """Solve the KV capacity (when ``fit_kv``) and, when ``scales``, the two time scales so that the
    twin at ``replicas`` shows the observed mean ITL, prefill latency and KV usage. Each round: one
    twin run, then each scale moves to where its quantity should meet the observed (``next_scale``)
    and the KV capacity by the ratio of held tokens to the observed usage."""
    if not (fit_kv or scales):
        return Calibration(model=model, rounds=[], converged=True)
    history: list[dict[str, Any]] = []
    peak_held = 0.0
    tried: dict[str, list[tuple[float, float]]] = {"tpot": [], "prefill": []}
    kv_windows, converged = 0, False
    for r in range(rounds):
        # the same seeds every round: a round's change is then the parameters', not the draw's
        view = _mean_view([twin_view(model, demand, replicas, thresholds, CALIBRATION_SEED + k)
                           for k in range(calibration_seeds(demand))])
        a = model.assumptions
        step: dict[str, float] = {}
        record: dict[str, Any] = {"round": r, "tpot_scale": a.tpot_scale, "prefill_scale": a.prefill_scale,
                                  "kv_tokens": model.kv_tokens, "twin_itl_s": view.itl_mean_s,
                                  "twin_prefill_s": view.prefill_mean_s}
        peak_held = max(peak_held, float(np.nanmax(view.kv_tokens_by_window, initial=0.0)))
        for name, scale, twin, obs in (("tpot", a.tpot_scale, view.itl_mean_s, targets.itl_mean_s),
                                       ("prefill", a.prefill_scale, view.prefill_mean_s, targets.prefill_mean_s)):
            if not scales or obs is None or not twin > 0:
                continue
            tried[name].append((scale, twin))
            step[name] = _clamp(next_scale(tried[name], obs)) / scale
        new_kv = None
        if fit_kv:
            new_kv, kv_windows = _kv_from(view, targets)
            record["kv_windows"] = kv_windows
        history.append(record)
        moves = [abs(math.log(v)) for v in step.values()]
        if new_kv is not None and math.isfinite(model.kv_tokens):
            moves.append(abs(math.log(new_kv / model.kv_tokens)))
        a = replace(a, tpot_scale=a.tpot_scale * step.get("tpot", 1.0),
                    prefill_scale=a.prefill_scale * step.get("prefill", 1.0))
        model = replace(model, assumptions=a, sources=dict(model.sources), observed=dict(model.observed))
        if new_kv is not None:
            set_kv_tokens(model, new_kv)
        if r > 0 and moves and max(moves) < TOLERANCE:
            converged = True
            break
    a = model.assumptions
    if scales:
        model.sources["tpot_scale"] = Source("calibrated", f"x{a.tpot_scale:.3f}: the twin's mean inter-token "
                                             "latency at the observed N equals the ITL histogram's")
        model.sources["prefill_scale"] = Source("calibrated", f"x{a.prefill_scale:.3f}: the twin's mean prefill "
                                                f"time at the observed N equals {targets.prefill_from}'s")
    if fit_kv and not math.isfinite(model.kv_tokens):
        # no gauge to fit it on: at least what the twin's replicas held at the observed N, at 90 % full
        set_kv_tokens(model, max(peak_held / KV_UNSATURATED, 1.0))
        model.sources["kv_tokens"] = Source("assumed", "no kv_cache_usage_perc to fit it on: the most the twin's "
                                            f"replicas held at the observed N, taken as {KV_UNSATURATED:.0%} full")
    elif fit_kv:
        if kv_windows >= 5:
            model.sources["kv_tokens"] = Source("fitted", f"by simulation: the twin's KV occupancy at the observed "
                                                f"N matches kv_cache_usage_perc over {kv_windows} windows below "
                                                f"{KV_UNSATURATED:.0%}")
        else:
            model.sources["kv_tokens"] = Source("assumed", "too few windows of kv_cache_usage_perc below "
                                                f"{KV_UNSATURATED:.0%} to fit it")
    return Calibration(model=model, rounds=history, kv_windows=kv_windows, converged=converged)


def _router_distance(view: TwinView, targets: Targets, eps: float = 0.05) -> float:
    """How far a twin's spread of work over the replicas is from the observed: log ratios of the two
    dispersions (first tokens per window: round robin spreads them evenly; outstanding requests per
    scrape: a least-outstanding router keeps them even, power-of-two less so, random not at all)."""
    out = 0.0
    for twin, obs in ((view.dispersion, targets.dispersion),
                      (view.outstanding_dispersion, targets.outstanding_dispersion)):
        if twin is not None and obs is not None:
            out += abs(math.log((twin + eps) / (obs + eps)))
    return out


def fit_router(model: ReplicaModel, demand: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
               targets: Targets) -> tuple[str, dict[str, tuple[float | None, float | None]]] | None:
    """The router whose twin spreads first tokens and outstanding requests over the replicas as the
    observed fleet did (``dispersion``), and each router's two dispersions; None when the data cannot
    tell (one replica, too few complete windows)."""
    if replicas < 2 or (targets.dispersion is None and targets.outstanding_dispersion is None):
        return None
    views = {router: twin_view(replace(model, router=router), demand, replicas, thresholds, CALIBRATION_SEED)
             for router in ROUTERS}
    best = min(views, key=lambda r: _router_distance(views[r], targets))
    return best, {r: (v.dispersion, v.outstanding_dispersion) for r, v in views.items()}

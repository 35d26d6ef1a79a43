"""Scenarios: fit the replica model and the demand once, fit and calibrate the twin at the observed
fleet size, then predict per path the breach shares at N' replicas, traffic x g and context x m, with
an interval.

The observed fleet must come out right: by default the twin is calibrated at the observed replica
count (:mod:`app.economics.predict.calibration`: KV capacity when the export has no engine config, the step
and prefill time levels), then replayed there with several seeds; its per-path TTFT and TPOT shares
are set against the histograms'. What remains is the *residual*: shown per path, it widens every
interval of that path, and above ``RESIDUAL_FLAG`` it flags every scenario of the path.

Interval: the spread over seeds, widened by the larger of the residual at the observed N and
``MIN_REL_ERROR``. A scenario is flagged when the model cannot stand behind it: it leaves what the
data supports (a per-replica peak load above the highest observed when the data never showed the
fleet saturated, a context multiplier: that length distribution was never observed, or a peak far
above the observed), the path's residual is above ``RESIDUAL_FLAG``, or a model parameter could not
be identified (each flag names the series or setting that would fix it). A flagged scenario's
interval also spans the twin run with the KV capacity and step time each 15 % less and more
favourable (a sensitivity envelope), and is widened by each flag's own width.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from app import sql
from app.cube import ensure_cube, pulled_by_store
from app.economics.model import capacity
from app.economics.model.capacity import VLLM_KV_HINT, Assumptions, ReplicaModel, Source
from app.economics.model.demand import Demand, observed_demand
from app.economics.predict import calibration, conversations
from app.economics.run import compiled
from app.economics.run.executors import Executor, LocalProcesses, LocalSession, Pass, passes
from app.economics.run.replay import (
    PREFIX_BYTES,
    RequestSet,
    RunShares,
    Thresholds,
    demand_requests,
    prefix_caching,
    prefix_inputs,
    replay,
    twin_max_model_len,
)
from app.promise.shares import Promise, shares, time_range
from app.store import Workspace

SENSITIVITY = 0.15
MIN_REL_ERROR = 0.25  # the interval is never narrower than +-25 % of the point (the accuracy measured on simulated truth)
MIN_ABS_ERROR = 0.002  # nor than +-0.2 percentage point
FLAGGED_MIN_ABS_ERROR = 0.005  # a flagged row's, never than +-0.5 pp (the goal's absolute tolerance)
CALIBRATION_HOURS = 6.0  # the calibration replays the busiest this many hours of the export
# a pushdown's demand (PromQL increase() at 1-minute windows) was 7 % below the exact one on the 2-hour
# test fleet of tests/live/test_pushdown_live.py: its intervals widen by 10 %
PUSHDOWN_WIDTH = 0.10
PEAK_FLAG = 0.15  # the twin's 99th-percentile running batch more than 15 % off the fleet's flags
RESIDUAL_FLAG = 0.10  # a path whose shares at the observed N stay off by more than this is flagged
CACHED_SHARE_FLAG = 0.10  # nor does a path whose twin serves a cached share this far (relative) from the observed
SHARE_CLOSE_MAX = 0.05  # how far a time scale may move from its means' calibration to meet the observed shares
CLOSING = (("prefill_scale", "ttft", "the prefill time"), ("tpot_scale", "tpot", "the decode step time"))
RESIDUAL_FLOOR = 0.01  # shares below 1 % are compared in absolute terms (0.1 pp = 10 % of 1 %)
PEAK_SPAN_S = 300  # the observed peak load is that of the busiest 5 minutes
BACKLOG_S = 60.0  # a twin run whose fleet queues a backlog this long is flagged and spans the envelope
UNIDENTIFIED_WIDTH = 1.0  # a flag for a parameter the data cannot identify widens by +-100 %


@dataclass
class Observed:
    """What the histograms say at the observed fleet size, per path over the whole range."""

    replicas: int
    requests: dict[str, float]
    ttft: dict[str, float]
    tpot: dict[str, float]
    joint_low: dict[str, float]
    joint_high: dict[str, float]


@dataclass
class Flag:
    """Why the model cannot stand behind some scenarios: ``path`` None applies to every path; ``width``
    the relative widening of the interval it adds; ``envelope``: the interval also spans the
    sensitivity envelope (a parameter the data could not pin down), not only the widening."""

    message: str
    path: str | None = None
    width: float = 0.0
    envelope: bool = True
    gap: float = 0.0  # the absolute share the twin was off by at the observed N (it widens by that too)
    when_loaded: bool = False  # only scenarios that load a replica more than observed


@dataclass
class Residual:
    """One path's twin at the observed N against the histograms: the shares (0..1, the twin's a mean
    over seeds), the residuals (relative above ``RESIDUAL_FLOOR``, in units of it below: :func:`residual`),
    the draw's noise (absolute, :func:`sampling_noise`) and the mean queue time in seconds. NaN where the
    export has no observed value."""

    ttft: float  # residual
    ttft_predicted: float
    ttft_observed: float
    ttft_noise: float
    tpot: float  # residual
    tpot_predicted: float
    tpot_observed: float
    tpot_noise: float
    joint: float  # residual: 0 inside the observed Fréchet bounds, else against the nearest
    joint_predicted: float
    queue_mean_s_observed: float
    queue_mean_s_predicted: float

    def of(self, metric: str) -> float:
        """The residual of ``metric`` (``ttft``, ``tpot`` or ``joint``)."""
        return float(getattr(self, metric))

    def within_noise(self, metric: str) -> bool:
        """Whether the draw alone explains the gap of ``metric`` (``ttft`` or ``tpot``; never ``joint``):
        the observed share is a count of the export's requests, the twin's a mean of a few seeds."""
        if metric == "joint":
            return False
        observed, predicted = getattr(self, f"{metric}_observed"), getattr(self, f"{metric}_predicted")
        return not math.isnan(observed) and abs(predicted - observed) <= getattr(self, f"{metric}_noise")

    def as_json(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class Analysis:
    model: ReplicaModel
    demand: Demand
    observed: Observed
    thresholds: dict[str, Thresholds]
    calibration: dict[str, Any] = field(default_factory=dict)
    residuals: dict[str, Residual] = field(default_factory=dict)  # per path, the twin at the observed N
    peak_load_observed: float = 0.0  # requests/s per replica, highest 5-minute window
    flags: list[Flag] = field(default_factory=list)
    fleet_residual: dict[str, float] = field(default_factory=dict)  # running, waiting: observed and twin


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
    flagged: bool = False
    flags: list[str] = field(default_factory=list)  # every reason: extrapolation, identification, residual
    # the TTFT and TPOT shares' intervals, built as the joint share's
    ttft_share_low: float = math.nan
    ttft_share_high: float = math.nan
    tpot_share_low: float = math.nan
    tpot_share_high: float = math.nan
    # the share of prompt tokens the twin's prefix cache served (mean over seeds; NaN: not counted)
    cached_share: float = math.nan


def _observed(ws: Workspace, dataset_ids: list[int], promises: list[Promise], path_labels: list[str],
              replicas: int | None) -> tuple[Observed, dict[str, Thresholds], Any]:
    cube_id = ensure_cube(ws, dataset_ids, 300, path_labels)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, promises, start, end, include_failed=False)
    if frame.empty:
        raise ValueError("no path with a TTFT/TPOT histogram and a promise: nothing to predict")
    means = sql.df(ws.cursor(), "capacity__path_latency_means", cube_id=cube_id)
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
    )
    return obs, th, means


def _f(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def residual(pred: float | None, obs: float | None) -> float:
    """How far a twin share is from the observed: relative above ``RESIDUAL_FLOOR``, in units of the
    floor below it (so 0.1 pp off a 0.5 % share counts like 10 % off a 1 % share: the few breaches of
    a small share are too noisy to be compared relatively)."""
    if obs is None or pred is None or math.isnan(pred) or math.isnan(obs):
        return math.nan
    return abs(pred - obs) / max(obs, RESIDUAL_FLOOR)


def sampling_noise(observed: float | None, requests: float, per_seed: Sequence[float], z: float = 2.0) -> float:
    """How far (absolute) a twin share may sit from the observed one by the draw alone: ``z`` standard
    deviations of the difference between a binomial share of ``requests`` and the mean of the twin's
    seeds (their spread over their count)."""
    if observed is None or not math.isfinite(observed):
        return 0.0
    var = observed * (1 - observed) / requests if requests > 0 else 0.0
    seeds = [x for x in per_seed if math.isfinite(x)]
    if len(seeds) > 1:
        var += float(np.var(seeds, ddof=1)) / len(seeds)
    return z * math.sqrt(var)


def _two(pair: tuple[float | None, float | None]) -> str:
    return "/".join("n/a" if x is None else f"{x:.2f}" for x in pair)


def _ratio_off(pred: float, obs: float | None, eps: float = 0.001) -> float:
    """By how much (a factor - 1) a twin share is off the observed one, either way (0.1 pp cushion)."""
    if obs is None or pred is None or math.isnan(pred) or math.isnan(obs):
        return 0.0
    return (max(pred, obs) + eps) / (min(pred, obs) + eps) - 1.0


def _identification_flags(model: ReplicaModel, demand: Demand) -> list[Flag]:
    flags = [Flag(f"model not identified: {m}", None, UNIDENTIFIED_WIDTH) for m in model.flags]
    flags += [Flag(f"demand not identified: {m}", path, UNIDENTIFIED_WIDTH) for path, m in demand.flags]
    longest = max((float(np.concatenate([[0.0], p.prompt.bounds])[np.flatnonzero(p.prompt.shares > 0)].max())
                   for p in demand.paths if (p.prompt.shares > 0).any()), default=0.0)
    if longest > model.kv_tokens:
        flags.append(Flag(f"the KV capacity ({model.kv_tokens:,.0f} tokens) is below prompts the export saw (over "
                          f"{longest:,.0f} tokens): the fit cannot be right; {VLLM_KV_HINT}", None, UNIDENTIFIED_WIDTH))
    src = model.sources.get("kv_tokens")
    if src is not None and src.kind == "assumed":
        flags.append(Flag(f"KV capacity assumed ({model.kv_tokens:,.0f} tokens): {src.detail}; {VLLM_KV_HINT}",
                          None, UNIDENTIFIED_WIDTH))
    if model.sources.get("max_model_len", Source("assumed")).kind != "given" and model.kv_tokens < model.max_model_len:
        flags.append(Flag(f"the KV capacity ({model.kv_tokens:,.0f} tokens) is below max_model_len "
                          f"{model.max_model_len} (vLLM would refuse to start): pass --max-model-len, or "
                          f"--kv-cache-tokens; the twin caps sequences at the KV capacity", None, 0.0))
    elif model.kv_tokens < model.max_model_len:
        flags.append(Flag(f"the KV capacity ({model.kv_tokens:,.0f} tokens) is below the given max_model_len "
                          f"{model.max_model_len} (vLLM would refuse to start): check --kv-cache-tokens; the twin "
                          "caps sequences at the KV capacity", None, UNIDENTIFIED_WIDTH))
    return flags


@dataclass
class _Fit:
    """The first step's results: the model and the demand as fitted, and what the export shows."""

    model: ReplicaModel
    demand: Demand
    observed: Observed
    thresholds: dict[str, Thresholds]
    targets: calibration.Targets
    span: Demand  # the busiest CALIBRATION_HOURS, the calibration's replay
    span_targets: calibration.Targets


def analyse(ws: Workspace, dataset_ids: list[int], promises: list[Promise], path_labels: list[str],
            assumptions: Assumptions | None = None, observed_replicas: int | None = None,
            calibrate: bool = True, seeds: int = 2, progress: Callable[[str], None] | None = None) -> Analysis:
    """Fit the replica model and the demand, fit the KV capacity by simulation when no engine config
    gives it, calibrate the time scales at the observed N (``calibrate``), and measure the residual
    there. Raises only when there is nothing to predict (no request-latency histogram).

    The steps: :func:`fit` (model, demand, observed shares), the split of each path's cached share into
    a shared prefix and conversations (:mod:`app.economics.predict.conversations`: ``split``, then
    ``refine`` on the twin, again after the calibration when it changed the KV capacity or the router),
    :func:`calibrate_twin` (KV capacity and time scales), :func:`fit_router` (the router and the
    calibration again if it changed), then the twin
    replayed at the observed N (:func:`residual_views`), its time scales closed on the observed shares
    (:func:`close_on_shares`), for :func:`residuals` and :func:`flags`."""
    assumptions = assumptions or Assumptions()
    say = progress or (lambda _msg: None)
    # the prefix cache a scenario asks for applies to its predictions; the fit, the calibration and
    # the residual replay the fleet as it was observed (its cache as the export shows it)
    scenario_prefix = assumptions.prefix_cache
    assumptions = replace(assumptions, prefix_cache="shared" if scenario_prefix == "shared" else None)
    say("fitting the replica model, the demand and the observed shares on the export")
    fitted = fit(ws, dataset_ids, promises, path_labels, assumptions, observed_replicas)
    # what each path's cached share is made of (a shared prefix, conversations): arithmetic now, the
    # twin's own served share once it is calibrated
    conversations.split(fitted.model, fitted.demand, fitted.span, fitted.observed.replicas, fitted.targets.itl_mean_s)
    conversations.refine(fitted.model, fitted.demand, fitted.span, fitted.observed.replicas, fitted.thresholds, say)
    fit_kv = fitted.model.sources["kv_tokens"].kind == "fitted"
    t0 = pd.Timestamp(fitted.span.origin, unit="s")
    say(("calibrating the twin" if calibrate else "fitting the KV capacity by simulation")
        + f" at the observed fleet size on {fitted.span.duration_s / 3600:.1f} h from {t0:%Y-%m-%d %H:%M} UTC")
    cal = calibrate_twin(fitted, fitted.model, fit_kv, calibrate)
    if assumptions.router is None and calibrate:
        say("fitting the router: how first tokens spread over the replicas")
        cal = fit_router(fitted, cal, fit_kv)
    model, demand, observed, thresholds = cal.model, fitted.demand, fitted.observed, fitted.thresholds
    if fit_kv or model.router != fitted.model.router:
        # the conversations were fitted on a twin whose KV capacity (what evicts history) or router
        # (where a turn lands) was not yet the calibrated one
        conversations.refine(model, demand, fitted.span, observed.replicas, thresholds, say)
    analysis = Analysis(model=model, demand=demand, observed=observed, thresholds=thresholds,
                        calibration=cal.summary() if (calibrate or fit_kv) else {"off": True})
    analysis.flags = _identification_flags(model, demand)
    if pulled_by_store(ws, ensure_cube(ws, dataset_ids, 300, path_labels)):
        analysis.flags.append(Flag(
            "the demand is the store's PromQL increase() (--pushdown): requests per window are extrapolated, not "
            "exact (docs: Live stores, Pushdown and extrapolation); read raw samples for the exact demand", None, PUSHDOWN_WIDTH))
    say(f"replaying the observed fleet ({observed.replicas} replicas) with {seeds} seeds: the residual")
    ws.release_memory()  # the residual holds a month's per-request outcomes: DuckDB's cached blocks go first
    # the residual, the closing sweeps and the remedies replay the same seeds' requests a dozen times:
    # one set of processes for them all, each keeping its seed's requests
    with residual_pool(demand, observed.replicas, thresholds) as pool:
        views = residual_views(model, demand, observed.replicas, thresholds, seeds, pool)
        if calibrate:
            model, views, closed = close_on_shares(model, demand, observed, thresholds, seeds, views, say, pool)
            if closed:
                analysis.model = model
                analysis.calibration["closed_on_shares"] = closed
        analysis.residuals = residuals(observed, fitted.targets, views)
        conversations.check(demand, [v.cached_share for v in views])  # before the flags, which read it
        analysis.flags += flags(analysis, views, fitted.targets, seeds, say, pool)
    analysis.fleet_residual = fleet_residual(fitted.targets, views)
    analysis.peak_load_observed = peak_load(demand, observed.replicas)
    if scenario_prefix is not None:
        analysis.model = replace(analysis.model, assumptions=replace(analysis.model.assumptions,
                                                                     prefix_cache=scenario_prefix))
    return analysis


def fit(ws: Workspace, dataset_ids: list[int], promises: list[Promise], path_labels: list[str],
        assumptions: Assumptions, observed_replicas: int | None) -> _Fit:
    """Step 1: the replica model and the demand fitted on the export, the observed shares per path with
    a promise, and what the calibration replays (the busiest ``CALIBRATION_HOURS``) and aims at."""
    intervals = capacity.scrape_intervals(ws, dataset_ids)
    model = capacity.fit_model(intervals, capacity.replica_windows(ws, dataset_ids),
                               capacity.engine_evidence(ws, dataset_ids), assumptions)
    demand = observed_demand(ws, dataset_ids, path_labels, max_model_len=model.max_model_len)
    observed, thresholds, means = _observed(ws, dataset_ids, promises, path_labels, observed_replicas)
    demand.paths = [p for p in demand.paths if p.name in thresholds]
    if not demand.paths:
        raise ValueError("no path with both a promise and the request histograms the demand is read from")
    targets = calibration.observed_targets(intervals, demand, means)
    first, stop = demand.busiest_span(CALIBRATION_HOURS)
    span = demand.span(first, stop)
    t0 = pd.Timestamp(span.origin, unit="s")
    in_span = (intervals["ts"] > t0) & (intervals["ts"] <= t0 + pd.Timedelta(seconds=span.duration_s))
    span_targets = calibration.observed_targets(intervals[in_span], span, means)
    return _Fit(model, demand, observed, thresholds, targets, span, span_targets)


def calibrate_twin(fitted: _Fit, model: ReplicaModel, fit_kv: bool, scales: bool) -> calibration.Calibration:
    """Step 2: the KV capacity (``fit_kv``) and, when ``scales``, the time scales of ``model`` solved so
    that the twin replaying the busiest span at the observed N shows the observed gauges and means."""
    return calibration.calibrate(model, fitted.span, fitted.observed.replicas, fitted.thresholds,
                                 fitted.span_targets, fit_kv=fit_kv, scales=scales)


def fit_router(fitted: _Fit, cal: calibration.Calibration, fit_kv: bool) -> calibration.Calibration:
    """Step 3: the router whose twin spreads the work over the replicas as the fleet did, stated as the
    model's ``router`` source; the calibration is solved again under it when it is not the one it ran."""
    model, targets = cal.model, fitted.span_targets
    found = calibration.fit_router(model, fitted.span, fitted.observed.replicas, fitted.thresholds, targets)
    if found is None:
        return cal
    router, table = found
    if router != model.router:
        cal = calibrate_twin(fitted, replace(model, router=router), fit_kv, True)
    shown = "; ".join(f"{r} {_two(v)}" for r, v in table.items())
    cal.model.sources["router"] = Source(
        "fitted", f"work spreads over the replicas as a {router} router spreads it: dispersion of first "
        f"tokens per minute and of outstanding requests {_two((targets.dispersion, targets.outstanding_dispersion))} "
        f"observed; the twin's {shown}")
    return cal


def residuals(observed: Observed, targets: calibration.Targets,
              views: Sequence[calibration.TwinView]) -> dict[str, Residual]:
    """Step 4: per path, the twin replayed at the observed N (``views``, one per seed) against the
    histograms."""
    out = {}
    for path in observed.ttft:
        shares = {}
        for metric, obs in (("ttft", observed.ttft), ("tpot", observed.tpot)):
            per_seed = [getattr(v, f"{metric}_share")[path] for v in views]
            pred = float(np.mean(per_seed))
            shares[metric] = residual(pred, obs.get(path))
            shares[f"{metric}_predicted"] = pred
            shares[f"{metric}_observed"] = obs[path] if obs.get(path) is not None else math.nan
            shares[f"{metric}_noise"] = sampling_noise(obs.get(path), observed.requests.get(path, 0.0), per_seed)
        pred_joint = float(np.mean([v.joint_share[path] for v in views]))
        lo, hi = observed.joint_low[path], observed.joint_high[path]
        inside = lo is not None and hi is not None and lo - 1e-12 <= pred_joint <= hi + 1e-12
        q_obs = targets.queue_mean_s.get(path)
        out[path] = Residual(
            **shares, joint=0.0 if inside else residual(pred_joint, lo if pred_joint < (lo or 0) else hi),
            joint_predicted=pred_joint, queue_mean_s_observed=q_obs if q_obs is not None else math.nan,
            queue_mean_s_predicted=float(np.mean([v.queue_mean_s.get(path, math.nan) for v in views])))
    return out


def flags(analysis: Analysis, views: Sequence[calibration.TwinView], targets: calibration.Targets, seeds: int,
          say: Callable[[str], None], pool: LocalSession | None = None) -> list[Flag]:
    """Step 5: the flags the residual raises, in words: a path the twin does not reproduce beyond the
    draw's noise (with the parameter that would close it: :func:`residual_remedy`), and busiest batches
    that differ from the fleet's."""
    out = []
    observed, model = analysis.observed, analysis.model
    for path, err in analysis.residuals.items():
        worst = np.nanmax([err.ttft, err.tpot, err.joint, 0.0])
        beyond = [k for k in ("ttft", "tpot", "joint") if err.of(k) > RESIDUAL_FLAG and not err.within_noise(k)]
        if not beyond:
            continue
        # the interval widens by the factor the twin is off by at the observed N, whichever way
        lo, hi = observed.joint_low[path], observed.joint_high[path]
        nearest = lo if lo is not None and err.joint_predicted < lo else hi
        off = {"ttft": (err.ttft_predicted, observed.ttft.get(path)),
               "tpot": (err.tpot_predicted, observed.tpot.get(path)), "joint": (err.joint_predicted, nearest)}
        factor = max(_ratio_off(*off[k]) for k in beyond)
        gap = max(abs(off[k][0] - (off[k][1] or 0.0)) for k in beyond)
        metric = max(beyond, key=err.of)
        say(f"looking for what would close the residual on {path}")
        remedy = residual_remedy(model, analysis.demand, observed.replicas, analysis.thresholds, path, metric,
                                 off[metric][1], off[metric][0], seeds, pool)
        out.append(Flag(
            f"the twin does not reproduce the observed fleet on {path}: TTFT {100 * err.ttft_predicted:.2f} % "
            f"against {100 * (observed.ttft.get(path) or 0):.2f} % observed, TPOT "
            f"{100 * err.tpot_predicted:.2f} % against {100 * (observed.tpot.get(path) or 0):.2f} % "
            f"(residual {worst:.0%}; its intervals widen by {factor:.0%} and by {100 * gap:.2f} pp); {remedy}",
            path, float(max(factor, worst)), envelope=False, gap=gap))
    peak_obs, peak_twin = targets.running_peak, float(np.mean([v.running_peak for v in views]))
    if peak_obs and peak_twin > 0 and abs(peak_twin - peak_obs) / peak_obs > PEAK_FLAG:
        out.append(Flag(
            f"the twin's busiest batches differ from the fleet's (99th percentile of running requests per replica "
            f"{peak_twin:.0f} against {peak_obs:.0f} observed): scenarios that load a replica more than observed "
            f"are less reliable (their intervals widen by {max(peak_obs, peak_twin) / min(peak_obs, peak_twin) - 1:.0%})",
            None, max(peak_obs, peak_twin) / min(peak_obs, peak_twin) - 1, envelope=False, when_loaded=True))
    for p in analysis.demand.paths:
        split = p.prefix
        if split is None or not math.isfinite(split.twin_cached_share):
            continue
        off = abs(split.twin_cached_share - split.cached_share)
        if off > max(CACHED_SHARE_FLAG * split.cached_share, conversations.TOLERANCE_ABS):
            out.append(Flag(
                f"the twin's prefix cache serves {100 * split.twin_cached_share:.1f} % of {p.name}'s prompt tokens at "
                f"the observed N against {100 * split.cached_share:.1f} % observed (conversation share "
                f"{split.conversation_share:.0%}, follow-ups {split.followup_share:.0%}, think time "
                f"{split.think_s:g} s): its prefill work is off by as much; set --conversation-share or --think-time",
                p.name, off / max(split.cached_share, 1e-9), envelope=False))
    return out


def _nan_if_none(x: float | None) -> float:
    return x if x is not None else math.nan


def fleet_residual(targets: calibration.Targets, views: Sequence[calibration.TwinView]) -> dict[str, float]:
    """The fleet's gauges at the observed N, observed and twin (NaN where the export has none)."""
    return {
        "running_mean_observed": _nan_if_none(targets.running_mean),
        "running_mean_predicted": float(np.mean([v.running_mean for v in views])),
        "running_peak_observed": _nan_if_none(targets.running_peak),
        "running_peak_predicted": float(np.mean([v.running_peak for v in views])),
        "waiting_mean_observed": _nan_if_none(targets.waiting_mean),
        "waiting_mean_predicted": float(np.mean([v.waiting_mean for v in views])),
        "itl_mean_s_observed": _nan_if_none(targets.itl_mean_s),
        "itl_mean_s_predicted": float(np.mean([v.itl_mean_s for v in views])),
    }


def peak_load(demand: Demand, replicas: int) -> float:
    """Requests per second per replica in the busiest ``PEAK_SPAN_S`` of the demand."""
    window_requests = sum(p.requests for p in demand.paths)
    span = max(1, PEAK_SPAN_S // demand.window_s)
    per5 = np.convolve(window_requests, np.ones(span), mode="valid") / (span * demand.window_s)
    return float(np.max(per5 / replicas)) if len(per5) else 0.0


def _pooled(views: Sequence[calibration.TwinView], observed: Observed, metric: str) -> tuple[float, float, float]:
    """The share of ``metric`` over every path with an observed one, weighted by requests: (observed,
    the twin's mean over ``views``, the draw's noise between them)."""
    obs_by_path = getattr(observed, metric)
    paths = [p for p, v in obs_by_path.items() if v is not None and math.isfinite(v)
             and all(p in getattr(w, f"{metric}_share") for w in views)]
    weight = np.array([observed.requests.get(p, 0.0) for p in paths], dtype=float)
    if not paths or weight.sum() <= 0:
        return math.nan, math.nan, 0.0
    obs = float(np.dot(weight, [obs_by_path[p] for p in paths]) / weight.sum())
    per_seed = [float(np.dot(weight, [getattr(v, f"{metric}_share")[p] for p in paths]) / weight.sum())
                for v in views]
    return obs, float(np.mean(per_seed)), sampling_noise(obs, float(weight.sum()), per_seed)


def close_on_shares(model: ReplicaModel, demand: Demand, observed: Observed, thresholds: dict[str, Thresholds],
                    seeds: int, views: list[calibration.TwinView], say: Callable[[str], None] = lambda _m: None,
                    pool: LocalSession | None = None) -> tuple[ReplicaModel, list[calibration.TwinView], list[str]]:
    """The time scales moved, each within ``SHARE_CLOSE_MAX``, to where the twin's breach shares at the
    observed N meet the histograms'. The means the calibration matched pin each scale to within a few
    per cent, and near a threshold a share answers a few per cent of prefill or step time by tens of
    per cent: inside that range the observed shares choose (the prefill scale on TTFT, the decode
    scale on TPOT, pooled over the paths; only where the gap is beyond the draw's noise). (model,
    its residual views, what was moved, in words.) ``pool``: a :func:`residual_pool` of the same
    demand, replicas and thresholds (default: one of its own for each replay)."""
    closed = []
    moved = {"prefill_scale": 1.0, "tpot_scale": 1.0}
    tried_at: dict[str, tuple[float, ...]] = {}  # per scale, the moves made when it was last tried
    # each level moves the other's share too (a slower decode step queues prefills longer): two sweeps
    for name, metric, what in CLOSING * 2:
        obs, pred, noise = _pooled(views, observed, metric)
        if not (math.isfinite(obs) and math.isfinite(pred)) or abs(pred - obs) <= noise:
            continue
        # a scale tried again on the model it was last tried on (nothing moved since) would replay the
        # same runs to the same answer: on a month, two whole-month replays per seed for nothing
        at = tuple(moved.values())
        if tried_at.get(name) == at:
            continue
        tried_at[name] = at
        say(f"moving {what} within {SHARE_CLOSE_MAX:.0%} to meet the observed {metric.upper()} share")
        factors = (1 - SHARE_CLOSE_MAX, 1 + SHARE_CLOSE_MAX)  # both replayed at once, on every worker
        tried = many_views([_varied(model, name, f) for f in factors], demand, observed.replicas, thresholds,
                           seeds, pool)
        points = [(1.0, pred)] + [(f, _pooled(v, observed, metric)[1]) for f, v in zip(factors, tried, strict=True)]
        points.sort()
        factor = _crossing(points, obs)
        if factor is None:  # the share does not answer this scale: leave it where the means put it
            continue
        # the total move stays within SHARE_CLOSE_MAX of the means' calibration
        factor = min(max(factor * moved[name], 1 - SHARE_CLOSE_MAX), 1 + SHARE_CLOSE_MAX) / moved[name]
        if abs(factor - 1) < 1e-3:
            continue
        moved[name] *= factor
        model = _varied(model, name, factor)
        # a move the clamp stopped at a factor just tried is that model, whose views were replayed with
        # the same seeds on the same pool: they are its residual views, run for run (a month's replays
        # are minutes each)
        views = next((v for f, v in zip(factors, tried, strict=True) if f == factor), None) or residual_views(
            model, demand, observed.replicas, thresholds, seeds, pool)
        closed.append(f"{what} x{factor:.3f} of the means' calibration: the {metric.upper()} share at the observed "
                      f"N {100 * pred:.2f} % against {100 * obs:.2f} % observed, now "
                      f"{100 * _pooled(views, observed, metric)[1]:.2f} %")
    return model, views, closed


# what each parameter is, in the words of a remedy, and what would pin it down
REMEDIES = {
    "tpot_scale": ("the decode step time", "the step law is fitted on the ITL histogram's mean; a batch that slows "
                   "other than linearly would show in its buckets"),
    "prefill_scale": ("the prefill time", "calibrated on the mean prefill time (vllm:request_prefill_time_seconds "
                      "where exported); its spread follows the prompt lengths inside their histogram's buckets"),
    "kv_tokens": ("the KV capacity", "pass --kv-cache-tokens (vLLM logs its KV cache size at start-up)"),
    "max_num_batched_tokens": ("the chunked-prefill token budget", "pass --max-num-batched-tokens"),
    "max_num_seqs": ("the batch cap", "pass --max-num-seqs"),
}
# how far each parameter is moved to see what it does, and how far it may move to be named: the
# engine limits are often assumed at vLLM's defaults, which operators change by whole factors
REMEDY_FACTORS = {"tpot_scale": (0.85, 1.15), "prefill_scale": (0.85, 1.15), "kv_tokens": (0.85, 1.15),
                  "max_num_batched_tokens": (0.25, 4.0), "max_num_seqs": (0.25, 2.0)}
REMEDY_RANGE = {"tpot_scale": (0.5, 2.0), "prefill_scale": (0.5, 2.0), "kv_tokens": (0.5, 2.0),
                "max_num_batched_tokens": (1 / 16, 4.0), "max_num_seqs": (1 / 8, 4.0)}


def _varied(model: ReplicaModel, name: str, factor: float) -> ReplicaModel:
    a = model.assumptions
    if name == "tpot_scale":
        return replace(model, assumptions=replace(a, tpot_scale=a.tpot_scale * factor))
    if name == "prefill_scale":
        return replace(model, assumptions=replace(a, prefill_scale=a.prefill_scale * factor))
    if name == "kv_tokens":
        varied = replace(model)
        varied.kv_tokens = model.kv_tokens * factor
        return varied
    if name == "max_num_seqs":
        return replace(model, max_num_seqs=max(int(round(model.max_num_seqs * factor)), 1))
    return replace(model, max_num_batched_tokens=max(int(model.max_num_batched_tokens * factor), 1))


def residual_remedy(model: ReplicaModel, demand: Demand, replicas: int, thresholds: dict[str, Thresholds], path: str,
                    metric: str, observed: float | None, predicted: float, seeds: int,
                    pool: LocalSession | None = None) -> str:
    """Which one parameter, moved how far, brings the twin's ``metric`` share of ``path`` at the
    observed N to the observed one: each parameter the data did not fix (a given one is left alone) is
    moved by its ``REMEDY_FACTORS`` and the factor that meets the observed share is read off in
    log-log; those within their ``REMEDY_RANGE`` are named, the one that moves least first, with what
    would pin each down. Words for the residual's flag."""
    if observed is None or not math.isfinite(predicted):
        return "no parameter was tried (no observed share)"
    found: list[tuple[float, str]] = []
    names = [name for name in REMEDIES if model.sources.get(name) is None
             or model.sources[name].kind not in ("given", "engine config")]
    tries = [(name, f) for name in names for f in REMEDY_FACTORS[name]]  # every one replayed at once
    tried = dict(zip(tries, many_views([_varied(model, name, f) for name, f in tries], demand, replicas,
                                       thresholds, seeds, pool), strict=True))
    for name in names:
        what, hint = REMEDIES[name]
        points = [(1.0, predicted)]
        for f in REMEDY_FACTORS[name]:
            points.append((f, float(np.mean([getattr(v, f"{metric}_share")[path] for v in tried[name, f]]))))
        points.sort()
        factor = _crossing(points, observed)
        lo, hi = REMEDY_RANGE[name]
        if factor is not None and lo <= factor <= hi:
            found.append((abs(math.log(factor)), f"{what} x{factor:.2f} of the fit's ({hint})"))
    if not found:
        return ("no single parameter the data left open closes it within the range it could be off by (a "
                "mechanism the twin lacks, or an engine limit given wrong)")
    return "it closes with " + "; or with ".join(text for _, text in sorted(found)[:2])


def _crossing(points: list[tuple[float, float]], target: float) -> float | None:
    """The factor at which a share, known at ``points`` (factor, share), meets ``target``: interpolated
    in log factor between the two points around it, extrapolated from the nearest two (at most 3x the
    tried span) when none is."""
    eps = 1e-4
    xs = [math.log(f) for f, _ in points]
    ys = [math.log(v + eps) for _, v in points]
    y = math.log(target + eps)
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if (y0 - y) * (y1 - y) <= 0 and y1 != y0:
            return math.exp(x0 + (y - y0) * (x1 - x0) / (y1 - y0))
    slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0]) if xs[-1] != xs[0] else 0.0
    if slope == 0:
        return None
    x = xs[1] + (y - ys[1]) / slope  # from the middle (the fit itself)
    return math.exp(x) if abs(x) <= 3 * (xs[-1] - xs[0]) else None


PARALLEL_RESIDUAL_REQUESTS = 2_000_000  # below this a replay takes seconds: a spawned process costs more
# Below this many requests replayed by a grid's planned runs in all, the grid runs in this process
# alone. On more lanes this process starts at once and the others join when their process has started
# (its imports, the analysis, numba's cached engine: a second or two, once for both passes), so the
# lanes cost little, but below about 4 M requests (a run replays about a million requests a second)
# they finished no sooner on 2 cores, and each process costs a core for its start. The envelope runs of
# scenarios foreseen backlogged (``_foreseen_backlog``) count; those of a backlog not foreseen come in
# a second pass, after the choice.
PARALLEL_GRID_REQUESTS = 6_000_000


def grid_executor(analysis: Analysis, scenarios_: Sequence[Scenario], seeds: int,
                  workers: int | None = None) -> LocalProcesses:
    """The local processes ``run_scenarios`` runs these scenarios on when given no executor: chosen on
    the runs it plans (the seeds', and the envelope's where it is flagged or foreseen)."""
    return local_executor(analysis, [j.traffic for n, g, m in scenarios_ for j in _jobs(analysis, n, g, m, seeds)],
                          workers)


def local_executor(analysis: Analysis, traffics: Sequence[float], workers: int | None) -> LocalProcesses:
    """Local processes for runs at these traffic multipliers (one per run): ``workers`` when given,
    else this process alone for a grid too small to pay for starting workers, else every core."""
    if workers is None:
        observed = sum(float(p.requests.sum()) for p in analysis.demand.paths)
        if observed * sum(traffics) < PARALLEL_GRID_REQUESTS:
            workers = 1
    return LocalProcesses(workers)


def residual_pool(demand: Demand, replicas: int, thresholds: dict[str, Thresholds]) -> LocalSession:
    """Where the twin runs at the observed N (``residual_views``) replay: a month's in local
    processes, one per core, kept for every call of the session (each keeps the requests of the
    seeds it replayed and their prefix arrays: the residual, the closing sweeps and the remedies
    replay the same seeds' requests, each set seconds to make); a day's in this process, which keeps
    them too. The workers read ``demand`` once: what its prefix arrays are drawn from
    (``prefix_inputs``: the cached shares, the conversations' split) must not change while the
    session lasts (``many_views`` refuses a demand that did)."""
    requests = sum(float(p.requests.sum()) for p in demand.paths)
    return LocalSession((demand, replicas, thresholds, prefix_inputs(demand)),
                        1 if requests < PARALLEL_RESIDUAL_REQUESTS else None)


def residual_views(model: ReplicaModel, demand: Demand, replicas: int, thresholds: dict[str, Thresholds],
                   seeds: int, pool: LocalSession | None = None) -> list[calibration.TwinView]:
    """The twin at the observed N with ``seeds`` seeds (1000, 1001, ...), in seed order, on ``pool``
    (a :func:`residual_pool` of the same demand, replicas and thresholds; default: one of its own)."""
    return many_views([model], demand, replicas, thresholds, seeds, pool)[0]


def many_views(models: Sequence[ReplicaModel], demand: Demand, replicas: int, thresholds: dict[str, Thresholds],
               seeds: int, pool: LocalSession | None = None) -> list[list[calibration.TwinView]]:
    """``residual_views`` of each model, every run in one call of ``pool`` (runs of one seed on the
    worker that holds its requests); the views of each model in seed order, each as it would be
    alone."""
    if pool is None:
        with residual_pool(demand, replicas, thresholds) as own:
            return many_views(models, demand, replicas, thresholds, seeds, own)
    held, at, kept, inputs = pool.context
    if held is not demand or at != replicas or kept != thresholds:
        raise ValueError("a residual pool replays the demand, replicas and thresholds it was opened with")
    if prefix_inputs(demand) != inputs:
        # its workers would draw the conversations of the demand as it was
        raise ValueError("the demand's cached shares or conversations changed while its residual pool was open")
    jobs = [[_View(m, 1000 + s) for s in range(seeds)] for m in models]
    done = dict(pool.run(_residual_view, [j for mine in jobs for j in mine], affinity=_view_seed))
    return [[done[j] for j in mine] for mine in jobs]


@dataclass(frozen=True, eq=False)
class _View:
    """One twin run at the observed N: ``model`` with ``seed`` (a job of one call, told apart by its
    identity: a model is no dict key)."""

    model: ReplicaModel
    seed: int


def _view_seed(job: _View) -> int:
    """What runs of a residual share: the seed's requests (the scales and the router leave them as
    they are; the longest sequence, which a KV capacity can shorten, is in ``_residual_view``'s key)."""
    return job.seed


_VIEW_SETS_KEPT = 2  # request sets a residual worker keeps (a month's are ~360 MB each)


def _residual_view(context: tuple[Demand, int, dict[str, Thresholds], Any], job: _View,
                   cache: dict[Any, Any]) -> calibration.TwinView:
    """``calibration.twin_view`` of the job, on the requests ``demand_requests`` makes for its seed,
    made once per worker (``cache``) and replayed as made, with the prefix arrays drawn for them
    under the job's ``prefix_key`` (a ``RequestSet``): the view is the same."""
    demand, replicas, thresholds, _ = context
    longest = twin_max_model_len(job.model)
    key = ("residual", job.seed, longest)
    if key not in cache:
        while len(cache) >= _VIEW_SETS_KEPT:
            del cache[next(iter(cache))]  # the oldest
        cache[key] = RequestSet(demand_requests(demand, 1.0, 1.0, job.seed, longest), job.seed)
    return calibration.twin_view(job.model, demand, replicas, thresholds, seed=job.seed, requests=cache[key])


def _extrapolation(analysis: Analysis, replicas: int, traffic: float, context: float) -> list[str]:
    reasons = []
    obs = analysis.observed
    peak = analysis.peak_load_observed * obs.replicas * traffic / replicas
    saturated = analysis.model.saturation_observed
    if context != 1.0:
        reasons.append(f"context x{context:g}: prompt lengths never observed at that size")
    if analysis.peak_load_observed > 0:
        if not saturated and (peak > analysis.peak_load_observed * 1.05):
            reasons.append("per-replica peak load above the observed peak, and the data never showed saturation "
                           "(capacity is a lower bound)")
        if peak > 2.0 * analysis.peak_load_observed:
            reasons.append(f"per-replica peak load {peak / analysis.peak_load_observed:.1f}x the observed peak")
    return reasons


def _applicable(analysis: Analysis, replicas: int, traffic: float, context: float,
                path: str | None = None) -> list[Flag]:
    """The analysis' flags that bear on a scenario of ``path`` (of any path when None)."""
    loaded = traffic * context / replicas > 1.0 / analysis.observed.replicas + 1e-12
    return [f for f in analysis.flags if (f.path is None or path is None or f.path == path)
            and (loaded or not f.when_loaded)]


def _needs_envelope(analysis: Analysis, replicas: int, traffic: float, context: float, path: str | None = None) -> bool:
    """Whether a scenario's interval (of ``path``, or of any path when None) spans the sensitivity
    envelope: it leaves what the data supports, or a parameter it stands on was not identified."""
    return bool(_extrapolation(analysis, replicas, traffic, context)) or any(
        f.envelope for f in _applicable(analysis, replicas, traffic, context, path))


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
    if _needs_envelope(analysis, replicas, traffic, context) or _foreseen_backlog(analysis, replicas, traffic, context):
        jobs += [_Job(replicas, traffic, context, 2000, v) for v in ("worse", "better")]
    return jobs


def _foreseen_backlog(analysis: Analysis, replicas: int, traffic: float, context: float) -> bool:
    """Whether a scenario's twin fleet will queue a backlog (``BACKLOG_S``), so that its envelope's runs
    are planned with its seeds instead of in a second pass: the observed fleet saturated and the
    scenario loads a replica at least as much. Planning only places runs: a scenario's interval spans
    the envelope when its own runs show the backlog (``_assemble``), so a wrong guess costs two runs
    and changes no value. Planned, the runs count towards the grid's size (``grid_executor``) and
    share the first pass's queue, longest first."""
    loaded = traffic * context / replicas >= 1.0 / max(analysis.observed.replicas, 1) - 1e-12
    return analysis.model.saturation_observed and loaded


def _variant(model: ReplicaModel, variant: str) -> ReplicaModel:
    """The fitted model, or one with KV capacity and step/prefill time SENSITIVITY less/more favourable."""
    if variant == "fit":
        return model
    sign = 1 if variant == "worse" else -1
    a = model.assumptions
    varied = replace(model, assumptions=replace(
        a, tpot_scale=a.tpot_scale * (1 + sign * SENSITIVITY), prefill_scale=a.prefill_scale * (1 + sign * SENSITIVITY)))
    varied.kv_tokens = model.kv_tokens * (1 - sign * SENSITIVITY)
    # the context cost per step at a given occupancy is a property of the engine, not of its size
    varied.step_per_context_token_s = model.step_per_context_token_s
    return varied


_REQUESTS_KEPT = 4  # synthesized request sets a process keeps (about 30-50 MB each for a day)
_REQUESTS_KEPT_BYTES = 1 << 30  # and at most this much of them (a month at traffic x1.5 is ~0.6 GB a set)
_REQUEST_BYTES = 27  # arrival (float64), path (int8), prompt and output tokens (int64), stream (int16)


def _held_bytes(cache: dict[tuple[float, float, int], RequestSet]) -> int:
    return sum(held.nbytes for held in cache.values())


def _share(job: _Job) -> tuple[float, float, int]:
    """What a run shares with others: its synthesized requests (``_run``'s cache key)."""
    return job.traffic, job.context, job.seed


def _run(analysis: Analysis, job: _Job, cache: dict[tuple[float, float, int], RequestSet]) -> RunShares:
    """One twin run. ``cache`` keeps the last synthesized requests, with their prefix arrays (a
    ``RequestSet``: the conversations drawn from them, which neither N', the router nor a sensitivity
    variant changes): the runs of a grid row (same traffic, context and seed at several N') replay
    the same requests, one row after another. It holds at most ``_REQUESTS_KEPT`` sets and
    ``_REQUESTS_KEPT_BYTES`` with the new one (a month's sets are hundreds of MB each); the oldest go
    first."""
    key = _share(job)
    if key not in cache:
        per_request = _REQUEST_BYTES + (PREFIX_BYTES if prefix_caching(analysis.model) else 0)
        expected = sum(float(p.requests.sum()) for p in analysis.demand.paths) * job.traffic * per_request
        while cache and (len(cache) >= _REQUESTS_KEPT or _held_bytes(cache) + expected > _REQUESTS_KEPT_BYTES):
            del cache[next(iter(cache))]  # the oldest
        cache[key] = RequestSet(demand_requests(analysis.demand, job.traffic, job.context, job.seed,
                                                twin_max_model_len(analysis.model)), job.seed)
    return replay(_variant(analysis.model, job.variant), analysis.demand, job.replicas, analysis.thresholds,
                  job.traffic, job.context, seed=job.seed, requests=cache[key])


def _bounds(values: list[float], spans: list[float], err: float, gap: float, floor: float) -> tuple[float, float]:
    """An interval around the seeds' mean: the seeds and the envelope's runs, widened by the relative
    ``err`` and the absolute ``gap``, never narrower than +-``floor``, clipped to [0, 1]."""
    point = float(np.mean(values))
    lo, hi = min(values + spans), max(values + spans)
    return (max(0.0, min(lo * (1 - err), lo - gap, point - floor)),
            min(1.0, max(hi * (1 + err), hi + gap, point + floor)))


def backlog(runs: Sequence[RunShares]) -> float:
    """The backlog (s) the twin's fleet queued in a scenario's runs: their mean longest stretch."""
    return float(np.mean([r.backlog_s for r in runs])) if runs else 0.0


def _backlog_reason(seconds: float) -> str:
    return (f"the twin's fleet queues a backlog for {seconds:.0f} s (a request waiting per replica or more, "
            "without a break: demand above what the replicas admit); there the share answers the capacity "
            f"steeply, so the interval spans the capacity {SENSITIVITY:.0%} either way")


def _assemble(analysis: Analysis, replicas: int, traffic: float, context: float, runs: list[RunShares],
              envelope: list[RunShares]) -> list[Prediction]:
    reasons = _extrapolation(analysis, replicas, traffic, context)
    backlogged = backlog(runs) >= BACKLOG_S
    steep = [_backlog_reason(backlog(runs))] if backlogged else []
    out = []
    for path in analysis.thresholds:
        mine = _applicable(analysis, replicas, traffic, context, path)
        widen = sum(f.width for f in mine)
        gap = sum(f.gap for f in mine)
        spans = envelope if backlogged or _needs_envelope(analysis, replicas, traffic, context, path) else []
        flags = reasons + steep + [f.message for f in mine]
        # a flagged row is not held to the goal's tolerance, so its interval is never narrower than it
        floor = FLAGGED_MIN_ABS_ERROR if flags else MIN_ABS_ERROR
        bounds = {}
        for metric in ("joint", "ttft", "tpot"):
            err = analysis.residuals[path].of(metric) if path in analysis.residuals else 0.0
            err = max(err if not math.isnan(err) else 0.0, MIN_REL_ERROR) + widen
            bounds[metric] = _bounds([getattr(r, metric)[path] for r in runs],
                                     [getattr(r, metric)[path] for r in spans], err, gap, floor)
        out.append(Prediction(
            replicas=replicas, traffic=traffic, context=context, path=path,
            requests=float(np.mean([r.requests[path] for r in runs])),
            ttft_share=float(np.mean([r.ttft[path] for r in runs])),
            tpot_share=float(np.mean([r.tpot[path] for r in runs])),
            breach_share=float(np.mean([r.joint[path] for r in runs])),
            breach_share_low=bounds["joint"][0], breach_share_high=bounds["joint"][1],
            extrapolated=bool(reasons), reasons=reasons,
            seeds=[{"ttft": r.ttft[path], "tpot": r.tpot[path], "joint": r.joint[path]} for r in runs],
            flagged=bool(flags), flags=flags,
            ttft_share_low=bounds["ttft"][0], ttft_share_high=bounds["ttft"][1],
            tpot_share_low=bounds["tpot"][0], tpot_share_high=bounds["tpot"][1],
            cached_share=_mean_finite([r.cached.get(path, math.nan) for r in runs]),
        ))
    return out


def _mean_finite(values: Sequence[float]) -> float:
    kept = [v for v in values if math.isfinite(v)]
    return float(np.mean(kept)) if kept else math.nan


# the policy rows (app.economics.decide.policies) are assembled, flagged and varied as the static ones
assemble, needs_envelope, variant = _assemble, _needs_envelope, _variant


Scenario = tuple[int, float, float]  # (N', traffic multiplier, context multiplier)


def grid(analysis: Analysis, replicas: Sequence[int], traffic: Sequence[float] = (1.0,),
         context: Sequence[float] = (1.0,), seeds: int = 3,
         progress: Callable[[str], None] | None = None, workers: int | None = None,
         executor: Executor | None = None, on_run: Callable[[int, int, str], None] | None = None,
         ) -> list[Prediction]:
    """Every scenario of the grid (``run_scenarios``), in the grid's order: traffic, context, N'."""
    scenarios_ = [(n, g, m) for g in traffic for m in context for n in replicas]
    done = run_scenarios(analysis, scenarios_, seeds, progress, workers, executor, on_run)
    return [p for s in scenarios_ for p in done[s]]


def run_scenarios(analysis: Analysis, scenarios_: Sequence[Scenario], seeds: int = 3,
                  progress: Callable[[str], None] | None = None, workers: int | None = None,
                  executor: Executor | None = None, on_run: Callable[[int, int, str], None] | None = None,
                  on_scenario: Callable[[Scenario, list[Prediction]], None] | None = None,
                  ) -> dict[Scenario, list[Prediction]]:
    """The predictions of each scenario, all of their twin runs (seeds and sensitivity variants) on
    one executor at once. The runs are independent, so ``executor`` runs them where it runs them: by
    default ``workers`` local processes (default: every core, or this process for a small grid:
    ``grid_executor``; 1: this process), or a Ray cluster
    (:class:`app.economics.run.ray_executor.RayCluster`). The predictions do not depend on it, nor on
    which other scenarios share the call: each run is set by its job alone. ``on_run(done, total,
    message)`` follows each finished run (the dashboard's progress bar), ``on_scenario(scenario,
    predictions)`` each scenario as soon as its last run is in (the dashboard keeps it then: a run
    stopped part-way keeps the scenarios it finished)."""
    planned = {(n, g, m): _jobs(analysis, n, g, m, seeds) for n, g, m in scenarios_}  # a repeat once
    jobs = [j for mine in planned.values() for j in mine]
    executor = executor or grid_executor(analysis, list(planned), seeds, workers)
    results: dict[_Job, RunShares] = {}
    started = time.perf_counter()
    if progress and compiled.compiling(compiled.FLEET):
        progress("the replay engine is being compiled (the first run on this machine: about half a minute on 2 cores)")
    out: dict[Scenario, list[Prediction]] = {}
    total = len(jobs)

    def run_jobs(run_pass: Pass, batch: list[_Job]) -> None:
        nonlocal total
        # longest first (more demand, then fewer replicas: longer queues), so that the last runs to
        # finish are short ones and no worker idles while one long run remains; the runs of one
        # (g, m, seed) stay together and, in local processes, on the worker that synthesized their
        # requests (``_share``; a month's set is hundreds of MB and seconds to make: seeds taken in
        # turn made every run synthesize its set again, 18 syntheses instead of 6 in a 6-scenario x
        # 3-seed grid)
        by_cost = sorted(batch, key=lambda j: (-j.traffic * j.context, j.traffic, j.context, j.seed, j.replicas))
        for job, run in run_pass(_run, by_cost, say=progress, affinity=_share):
            results[job] = run
            sc = (job.replicas, job.traffic, job.context)
            mine = planned[sc]
            if all(j in results for j in mine):
                fits = [results[j] for j in mine if j.variant == "fit"]
                if backlog(fits) >= BACKLOG_S and all(j.variant == "fit" for j in mine):
                    # a backlog the plan did not foresee: its envelope runs in a second pass
                    planned[sc] = mine + [_Job(*sc, 2000, v) for v in ("worse", "better")]
                    total += 2
                else:
                    out[sc] = _assemble(analysis, *sc, fits, [results[j] for j in mine if j.variant != "fit"])
                    if on_scenario:
                        on_scenario(sc, out[sc])
            message = (f"{len(results)}/{total} runs: N'={job.replicas} g={job.traffic:g} m={job.context:g} "
                       f"seed {job.seed} {job.variant} ({run.sim_seconds:.1f} s; {time.perf_counter() - started:.0f} "
                       "s so far)")
            if progress:
                progress(message)
            if on_run:
                on_run(len(results), total, message)

    with passes(executor, analysis, len(jobs)) as run_pass:
        run_jobs(run_pass, jobs)
        second = [j for mine in planned.values() for j in mine if j not in results]
        if second:
            run_jobs(run_pass, second)
    return {sc: out[sc] for sc in planned}

"""Policies replayed through the fitted twin: autoscaler, admission control, retries, and the
degradation ladder (answers capped at M tokens, a share of a path on a smaller model, a batch lane
deferred off-peak), each a row beside the static N' scenarios, on the same axis (breach share and
cost).

A row replays the observed demand (the same synthesized requests as the static rows) through the
twin under its policy (:mod:`app.engine.twin_policy`: the same decisions as the simulator's
Python loop, bit for bit). Shares are per **user request** arriving in the export's range: a request
breaches when it was rejected in the end (rejections count as breaches, as the promise is broken),
when its TTFT as the user saw it (from its first attempt, backoff included) is above the promise, or
its TPOT is. Replica-hours are what the fleet paid for: a started replica from the autoscaler's
decision (its cold start included) to the end of its drain. The interval widens the seed spread as the
static rows' does (the path's residual at the observed N, at least +-25 %), with the same flags, and a
row they flag also spans the sensitivity envelope (KV capacity and step time 15 % worse and better).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.economics.decide import money
from app.economics.predict import scenarios
from app.economics.predict.scenarios import Analysis
from app.economics.run import compiled
from app.economics.run.executors import Executor
from app.economics.run.replay import (
    WARMUP_S,
    RunShares,
    demand_requests,
    trace_of,
    twin_config,
    twin_max_model_len,
)
from app.engine.policy import Policy, user_outcomes
from app.engine.twin_policy import simulate_policy

KINDS = ("autoscaler", "admission", "retry", "degradation")


@dataclass(frozen=True)
class CapTokens:
    """Answers of ``path`` (None: every path) stop at ``tokens`` output tokens."""

    tokens: int
    path: str | None = None


@dataclass(frozen=True)
class SmallerModel:
    """``share`` of ``path``'s requests go to a smaller model on its own ``replicas`` (its step and
    prefill time ``step_factor`` x the fitted model's)."""

    path: str
    share: float
    step_factor: float
    replicas: int = 1


@dataclass(frozen=True)
class Defer:
    """``path``'s requests that arrive in the ``hours`` busiest hours of the day are moved to the
    ``hours`` quietest (the k-th busiest to the k-th quietest, same minute), and held to a relaxed
    TTFT promise of ``ttft_s`` from when they run."""

    path: str
    hours: int = 4
    ttft_s: float = 3600.0


@dataclass(frozen=True)
class PolicyScenario:
    """One row of the policy table: a policy at a fleet size (``replicas``: the static size when there
    is no autoscaler), optionally a degradation step, at traffic x``traffic``."""

    name: str
    kind: str
    policy: Policy = field(default_factory=Policy)
    replicas: int = 1
    traffic: float = 1.0
    cap: CapTokens | None = None
    smaller: SmallerModel | None = None
    defer: Defer | None = None

    @property
    def fleet_size(self) -> int:
        """The replica count the flags and intervals are judged at (an autoscaler's minimum)."""
        return self.policy.autoscaler.min_replicas if self.policy.autoscaler else self.replicas


@dataclass
class PolicyRunShares:
    """One seed of a policy row, per path: the shares (``shares.joint`` etc.), rejected share,
    attempts per user request, degraded answers and output tokens saved; for the fleet: replica-hours
    over the export and the autoscaler's timeline (t from the export start, replicas paid, ready)."""

    shares: RunShares
    rejected: dict[str, float]
    attempts: dict[str, float]
    degraded: dict[str, int]
    tokens_saved: dict[str, int]
    replica_hours: float
    small_replica_hours: float
    timeline: dict[str, list[float]] | None
    retries_refused: int


def _busy_hours(demand: Any, hours: int) -> tuple[list[int], list[int]]:
    """Hours of the day (0-23, UTC) from busiest to quietest by total observed requests: the first and
    last ``hours`` of them."""
    total = sum(p.requests for p in demand.paths)
    t = demand.origin + (np.arange(len(total)) + 0.5) * demand.window_s
    hour = ((t // 3600) % 24).astype(int)
    per_hour = np.bincount(hour, weights=total, minlength=24)
    seen = np.bincount(hour, minlength=24) > 0
    order = [h for h in np.argsort(-per_hour, kind="stable") if seen[h]]
    hours = min(hours, len(order) // 2)
    return order[:hours], order[::-1][:hours]


def degrade_requests(analysis: Analysis, row: PolicyScenario, reqs: dict[str, np.ndarray], seed: int
                     ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int], dict[str, np.ndarray]]:
    """The row's degradation applied to a scenario's requests: (the main fleet's requests, the smaller
    model's, tokens saved per path, per main request: degraded flag and its TTFT limit in seconds)."""
    names = [p.name for p in analysis.demand.paths]
    n = len(reqs["arrival_s"])
    reqs = {k: v.copy() for k, v in reqs.items()}
    ttft = np.array([analysis.thresholds[p].ttft_s if analysis.thresholds[p].ttft_s is not None else math.inf
                     for p in names])
    limit = ttft[reqs["path"].astype(np.int64)]
    degraded = np.zeros(n, dtype=bool)
    saved = dict.fromkeys(names, 0)
    if row.cap is not None:
        on = np.ones(n, bool) if row.cap.path is None else reqs["path"] == names.index(row.cap.path)
        cut = on & (reqs["output_tokens"] > row.cap.tokens)
        for k, p in enumerate(names):
            mine = cut & (reqs["path"] == k)
            saved[p] = int((reqs["output_tokens"][mine] - row.cap.tokens).sum())
        reqs["output_tokens"] = np.where(cut, row.cap.tokens, reqs["output_tokens"])
        degraded |= cut
    if row.defer is not None:
        k = names.index(row.defer.path)
        busy, quiet = _busy_hours(analysis.demand, row.defer.hours)
        t_abs = analysis.demand.origin + reqs["arrival_s"]
        hour = ((t_abs // 3600) % 24).astype(int)
        shift = np.zeros(n)
        for b, q in zip(busy, quiet, strict=True):
            # to the same minute of the quiet hour, later the same day or the next (inside the export)
            delta = ((q - b) % 24) * 3600.0
            shift = np.where((reqs["path"] == k) & (hour == b), delta, shift)
        moved = shift > 0
        arrival = reqs["arrival_s"] + shift
        # a request moved past the export's end comes back a day earlier (the export is the day replayed)
        arrival = np.where(moved & (arrival >= analysis.demand.duration_s), arrival - 86400.0, arrival)
        moved &= arrival >= 0
        reqs["arrival_s"] = np.where(moved, arrival, reqs["arrival_s"])
        limit = np.where(moved, row.defer.ttft_s, limit)
        degraded |= moved
    small = {key: v[:0] for key, v in reqs.items()}
    if row.smaller is not None:
        k = names.index(row.smaller.path)
        rng = np.random.default_rng([seed, 23])
        to_small = (reqs["path"] == k) & (rng.random(n) < row.smaller.share)
        small = {key: v[to_small] for key, v in reqs.items()}
        reqs = {key: v[~to_small] for key, v in reqs.items()}
        limit, degraded = limit[~to_small], degraded[~to_small]
    order = np.argsort(reqs["arrival_s"], kind="stable")
    reqs = {key: v[order] for key, v in reqs.items()}
    meta = {"degraded": degraded[order], "ttft_limit": limit[order]}
    return reqs, small, saved, meta


def _outcome_rows(sim: Any, meta: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    rows = sim.rows
    out = user_outcomes(sim.origin, sim.attempt, rows["arrival"], rows["first"], rows["finish"],
                        rows["gen"].astype(np.int64), rows["reason"].astype(np.int64), rows["path"].astype(np.int64))
    out["degraded"] = meta["degraded"][keep]
    out["ttft_limit"] = meta["ttft_limit"][keep]
    return out


def _replay_fleet(analysis: Analysis, model: Any, reqs: dict[str, np.ndarray], meta: dict[str, np.ndarray],
                  policy: Policy, replicas: int, seed: int) -> tuple[dict[str, np.ndarray], Any]:
    max_len = twin_max_model_len(model)
    keep = reqs["arrival_s"] + WARMUP_S >= 0
    trace = trace_of(analysis.demand, reqs, seed, max_len, model)
    compiled.ready(compiled.POLICY)
    sim = simulate_policy(trace, twin_config(model, replicas), policy, seed=seed)
    return _outcome_rows(sim, meta, keep), sim


def replay_row(analysis: Analysis, row: PolicyScenario, seed: int = 0,
               requests: dict[str, np.ndarray] | None = None, variant: str = "fit") -> PolicyRunShares:
    """One seed of a policy row through the twin (``variant``: the fitted model, or the sensitivity
    envelope's "worse" and "better" ones, as the static rows')."""
    model, demand = scenarios.variant(analysis.model, variant), analysis.demand
    base = requests if requests is not None else demand_requests(demand, row.traffic, 1.0, seed,
                                                                 twin_max_model_len(model))
    reqs, small, saved, meta = degrade_requests(analysis, row, base, seed)
    out, sim = _replay_fleet(analysis, model, reqs, meta, row.policy, row.replicas, seed)
    parts = [out]
    small_hours = 0.0
    if row.smaller is not None and len(small["arrival_s"]):
        a = model.assumptions
        f = row.smaller.step_factor
        small_model = replace(model, assumptions=replace(a, tpot_scale=a.tpot_scale * f,
                                                         prefill_scale=a.prefill_scale * f))
        n_small = len(small["arrival_s"])
        ttft = np.array([analysis.thresholds[p.name].ttft_s or math.inf for p in demand.paths])
        small_meta = {"degraded": np.ones(n_small, bool), "ttft_limit": ttft[small["path"].astype(np.int64)]}
        small_out, _ = _replay_fleet(analysis, small_model, small, small_meta, Policy(), row.smaller.replicas, seed)
        parts.append(small_out)
        small_hours = row.smaller.replicas * demand.duration_s / 3600
    u = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    names = [p.name for p in demand.paths]
    lo, hi = WARMUP_S, WARMUP_S + demand.duration_s
    inside = (u["arrival_s"] >= lo) & (u["arrival_s"] < hi)
    shares = RunShares(requests={}, ttft={}, tpot={}, joint={}, windows={}, sim_seconds=sim.sim_seconds)
    rejected, attempts, degraded = {}, {}, {}
    tpot_th = {p: analysis.thresholds[p].tpot_s for p in names}
    for k, name in enumerate(names):
        if name not in analysis.thresholds:
            continue
        m = inside & (u["path"] == k)
        n = int(m.sum())
        rej = u["rejected"][m]
        ttft_b = rej | (u["ttft_s"][m] > u["ttft_limit"][m])
        th = tpot_th[name]
        tpot_b = ~rej & (u["tpot_s"][m] > th) if th is not None else np.zeros(n, bool)
        served = ~rej
        shares.requests[name] = n
        shares.ttft[name] = float(ttft_b.mean()) if n else math.nan
        shares.tpot[name] = float(tpot_b[served].mean()) if served.any() else math.nan
        shares.joint[name] = float((ttft_b | tpot_b).mean()) if n else math.nan
        rejected[name] = float(rej.mean()) if n else math.nan
        attempts[name] = float(u["attempts"][m].mean()) if n else math.nan
        degraded[name] = int(u["degraded"][m].sum())
    if sim.timeline is not None:
        hours = sim.timeline.replica_seconds(lo, hi) / 3600
        t = sim.timeline.t
        sel = (t >= lo) & (t < hi)
        timeline = {"t_s": (t[sel] - lo).tolist(), "replicas": sim.timeline.provisioned[sel].tolist(),
                    "ready": sim.timeline.ready[sel].tolist(), "signal": sim.timeline.signal[sel].tolist()}
    else:
        hours = row.replicas * demand.duration_s / 3600
        timeline = None
    return PolicyRunShares(shares=shares, rejected=rejected, attempts=attempts, degraded=degraded,
                           tokens_saved=saved, replica_hours=hours, small_replica_hours=small_hours,
                           timeline=timeline, retries_refused=sim.retries_refused)


@dataclass(frozen=True)
class _Job:
    row: int
    seed: int
    variant: str = "fit"


def _run(context: tuple[Analysis, tuple[PolicyScenario, ...]], job: _Job, cache: dict[Any, Any]) -> PolicyRunShares:
    analysis, rows = context
    row = rows[job.row]
    key = (row.traffic, job.seed)
    if key not in cache:
        cache.clear()  # one request set at a time: a month's is hundreds of MB
        cache[key] = demand_requests(analysis.demand, row.traffic, 1.0, job.seed, twin_max_model_len(analysis.model))
    return replay_row(analysis, row, job.seed, cache[key], job.variant)


@dataclass
class PolicyPrediction:
    """A policy row per path: the static rows' prediction fields (interval, flags) and the policy's own."""

    row: PolicyScenario
    prediction: scenarios.Prediction
    rejected_share: float
    attempts_per_request: float
    degraded: float  # degraded answers over the export (mean over seeds)
    tokens_saved: float
    replica_hours: float  # the fleet's over the export (the smaller model's pool included)
    timeline: dict[str, list[float]] | None
    retries_refused: float


def predict(analysis: Analysis, rows: Sequence[PolicyScenario], seeds: int = 3,
            progress: Callable[[str], None] | None = None, executor: Executor | None = None) -> list[PolicyPrediction]:
    """Every policy row, ``seeds`` replays each (the static rows' seeds: the same requests)."""
    rows = tuple(rows)
    jobs = [_Job(i, 2000 + s) for i in range(len(rows)) for s in range(seeds)]
    # a row the model cannot stand behind also spans the sensitivity envelope, as a static row does
    envelope = {i for i, row in enumerate(rows) if scenarios.needs_envelope(analysis, row.fleet_size, row.traffic, 1.0)}
    jobs += [_Job(i, 2000, v) for i in sorted(envelope) for v in ("worse", "better")]
    jobs.sort(key=lambda j: (rows[j.row].traffic, j.seed, j.row))
    results: dict[_Job, PolicyRunShares] = {}
    def share(j: _Job) -> tuple[float, int]:  # _run's cache key
        return rows[j.row].traffic, j.seed

    executor = executor or scenarios.local_executor(analysis, [rows[j.row].traffic for j in jobs], None)
    for job, res in executor.run(_run, (analysis, rows), jobs, say=progress, affinity=share):
        results[job] = res
        if progress:
            progress(f"{len(results)}/{len(jobs)} policy runs: {rows[job.row].name} seed {job.seed}")
    out = []
    for i, row in enumerate(rows):
        runs = [results[_Job(i, 2000 + s)] for s in range(seeds)]
        spans = [results[_Job(i, 2000, v)].shares for v in ("worse", "better")] if i in envelope else []
        preds = scenarios.assemble(analysis, row.fleet_size, row.traffic, 1.0, [r.shares for r in runs], spans)
        for p in preds:
            out.append(PolicyPrediction(
                row=row, prediction=p,
                rejected_share=float(np.mean([r.rejected[p.path] for r in runs])),
                attempts_per_request=float(np.mean([r.attempts[p.path] for r in runs])),
                degraded=float(np.mean([r.degraded[p.path] for r in runs])),
                tokens_saved=float(np.mean([r.tokens_saved.get(p.path, 0) for r in runs])),
                replica_hours=float(np.mean([r.replica_hours + r.small_replica_hours for r in runs])),
                timeline=runs[0].timeline, retries_refused=float(np.mean([r.retries_refused for r in runs]))))
    return out


def price_rows(analysis: Analysis, predictions: Sequence[PolicyPrediction], prices: money.Prices,
               degraded_price: dict[str, float] | None = None, split: str = "requests") -> list[dict[str, Any]]:
    """One JSON row per (policy row, path), priced on the static rows' axis: headroom cost = the
    replica-hours the policy paid for, scaled from the export to the horizon, x the replica-hour price
    (split over the paths as the static rows'); breach cost as theirs; degraded cost = degraded answers
    x the path's price of a degraded answer; total = the three."""
    degraded_price = degraded_price or {}
    hours_observed = analysis.demand.duration_s / 3600
    rate = {p: n / hours_observed for p, n in analysis.observed.requests.items()}
    by_row: dict[str, list[PolicyPrediction]] = {}
    for pp in predictions:
        by_row.setdefault(pp.row.name, []).append(pp)
    out = []
    scale = prices.horizon_hours / hours_observed
    for name, pps in by_row.items():
        row = pps[0].row
        requests = {pp.prediction.path: rate[pp.prediction.path] * row.traffic * prices.horizon_hours for pp in pps}
        fleet = pps[0].replica_hours * scale * prices.replica_hour
        share_of = money.split_by_requests(fleet, requests) if split == "requests" else {
            p: fleet / len(requests) for p in requests}
        for pp in pps:
            p = pp.prediction
            price = prices.breach.get(p.path, 0.0)
            n_req = requests[p.path]
            per_request = pp.degraded / p.requests if p.requests else 0.0
            degraded_n = n_req * per_request
            cost = money.path_cost(n_req, p.breach_share, price, share_of[p.path])
            degraded_cost = degraded_n * degraded_price.get(p.path, degraded_price.get("*", 0.0))
            out.append({
                "policy": name, "kind": row.kind, "replicas": row.replicas if not row.policy.autoscaler else None,
                "min_replicas": row.policy.autoscaler.min_replicas if row.policy.autoscaler else None,
                "max_replicas": row.policy.autoscaler.max_replicas if row.policy.autoscaler else None,
                "traffic": row.traffic, "path": p.path,
                "breach_share": p.breach_share, "breach_share_low": p.breach_share_low,
                "breach_share_high": p.breach_share_high, "ttft_share": p.ttft_share, "tpot_share": p.tpot_share,
                "rejected_share": pp.rejected_share, "attempts_per_request": pp.attempts_per_request,
                "degraded_answers": degraded_n, "degraded_share": per_request,
                "tokens_saved_share": (pp.tokens_saved / max(p.requests, 1)) if row.cap else 0.0,
                "cut_share_histogram": (histogram_cut_share(analysis, p.path, row.cap.tokens)
                                        if row.cap and row.cap.path in (None, p.path) else None),
                "mean_replicas": pp.replica_hours / hours_observed,
                "replica_hours": pp.replica_hours * scale, "requests": n_req,
                "flagged": p.flagged, "flags": p.flags, "extrapolated": p.extrapolated,
                **cost, "degraded_cost": degraded_cost, "total_cost": cost["total_cost"] + degraded_cost,
                "breach_cost_low": n_req * p.breach_share_low * price,
                "breach_cost_high": n_req * p.breach_share_high * price,
                "timeline": pp.timeline if p.path == pps[0].prediction.path else None,
            })
    return out


def histogram_cut_share(analysis: Analysis, path: str, tokens: int) -> tuple[float, float] | None:
    """The share of a path's observed answers longer than ``tokens``, read off the generation-length
    histogram's buckets: (low, high), equal when ``tokens`` is a bucket bound (exact), else the buckets
    wholly above it and those that may hold longer answers (None without the histogram)."""
    p = next((d for d in analysis.demand.paths if d.name == path), None)
    if p is None or not len(p.output.shares):
        return None
    upper = np.concatenate([p.output.bounds, [math.inf]])
    lower = np.concatenate([[0.0], p.output.bounds])
    low = float(p.output.shares[lower >= tokens].sum())
    high = float(p.output.shares[upper > tokens].sum())
    return low, high


def policy_fleet_totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per policy row: the fleet's headroom, breach, degraded and total cost, its mean replicas."""
    acc: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = acc.setdefault(r["policy"], {"policy": r["policy"], "kind": r["kind"], "mean_replicas": r["mean_replicas"],
                                         "headroom_cost": 0.0, "breach_cost": 0.0, "breach_cost_low": 0.0,
                                         "breach_cost_high": 0.0, "degraded_cost": 0.0, "degraded_answers": 0.0,
                                         "rejected": 0.0, "requests": 0.0, "flagged": False})
        for k in ("headroom_cost", "breach_cost", "breach_cost_low", "breach_cost_high", "degraded_cost",
                  "degraded_answers", "requests"):
            t[k] += r[k]
        t["rejected"] += r["rejected_share"] * r["requests"]
        t["flagged"] = t["flagged"] or r["flagged"]
    out = []
    for t in acc.values():
        extra = t["headroom_cost"] + t["degraded_cost"]
        out.append({**t, "rejected_share": t.pop("rejected") / t["requests"] if t["requests"] else None,
                    "total_cost": extra + t["breach_cost"], "total_cost_low": extra + t["breach_cost_low"],
                    "total_cost_high": extra + t["breach_cost_high"]})
    return out


def section(analysis: Analysis, predictions: Sequence[PolicyPrediction], prices: money.Prices,
            degraded_price: dict[str, float] | None = None, split: str = "requests",
            spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``policies`` part of the scenarios document: per (policy row, path) and per row."""
    rows = price_rows(analysis, predictions, prices, degraded_price, split)
    return {"spec": spec or {}, "degraded_price": dict(degraded_price or {}), "rows": rows,
            "fleet": policy_fleet_totals(rows),
            "note": "shares per user request arriving in the export's range; a rejected request is a breach; "
                    "TTFT from the first attempt (backoff included); replica-hours from each start decision "
                    "(cold start paid) to the end of its drain, scaled to the horizon"}

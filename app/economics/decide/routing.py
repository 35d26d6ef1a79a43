"""The routing row: what prefix-aware routing is worth at a fleet size N', priced, from a team's own
metrics (issue 41).

For one traffic multiplier, the observed demand is replayed through the fitted twin under two routers,
on the same requests and seeds (the same conversations, :mod:`app.economics.model.conversations`):

- **load-based**: the fleet's router as fitted or given (the static rows' own; least outstanding when
  that router is the prefix-aware one). A follow-up turn lands where the load is least, so on another
  replica than its history with probability (N'-1)/N';
- **prefix-aware**: a turn goes to the replica of its conversation's previous turn unless that replica
  holds more than ``affinity_margin`` outstanding requests above the least loaded one
  (:mod:`app.engine.router`), so the history's hits hold as N' grows.

Each is replayed at every size of the grid (and the observed N and the row's own N'): per path the
breach shares with intervals (built as the static rows', :func:`app.economics.predict.scenarios.assemble`)
and the cached share the twin's prefix cache served; per router the replicas the promise needs (the
smallest size at which every path's joint breach share is within 1 - its target, at the point and at
the interval's high end); and at the row's N' the dollars of the static rows' money model. The row's
N' is the one given, else the smallest size meeting the promise under load-based routing (the
cheapest in headroom), else the observed N.

The row stands on the split of each path's cached share into a shared prefix and conversations: an
assumption the metrics cannot check (stated with it). Where the export has no prefix-cache counter,
the cache is off, or the split leaves no conversation, the row says so and what it would need; it
never invents a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.economics.decide import money
from app.economics.predict import scenarios
from app.economics.predict.scenarios import Analysis, Prediction, Scenario
from app.economics.run.executors import Executor
from app.engine.config import DEFAULT_AFFINITY_MARGIN
from app.promise.shares import ALL_PATHS, Promise

DEFAULT_TARGET = Promise().target

LOAD_BASED, PREFIX_AWARE = "load-based", "prefix-aware"
ROUTINGS = (LOAD_BASED, PREFIX_AWARE)
COUNTER_HINT = ("export vllm:prefix_cache_hits_total with vllm:prefix_cache_queries_total (vLLM V1 exports both "
                "by default; 0.7.3-0.11 named them vllm:gpu_prefix_cache_hits/_queries) or "
                "vllm:prompt_tokens_cached_total, per path, beside vllm:prompt_tokens_total")


@dataclass(frozen=True)
class RoutingSpec:
    """Where the row is priced: ``replicas`` N' (None: the smallest grid size meeting the promise under
    load-based routing, else the observed N) at traffic x``traffic`` (None: x1 when the grid has it,
    else its first multiplier)."""

    replicas: int | None = None
    traffic: float | None = None

    def __post_init__(self) -> None:
        if self.replicas is not None and self.replicas < 1:
            raise ValueError(f"routing row: replicas {self.replicas} must be >= 1")
        if self.traffic is not None and not self.traffic > 0:
            raise ValueError(f"routing row: traffic x{self.traffic} must be > 0")


@dataclass
class RoutingPlan:
    """The row's scenario and the sizes each router is replayed at."""

    replicas: int | None  # None: chosen once the load-based rows are in (``chosen``)
    traffic: float
    context: float
    sizes: tuple[int, ...]
    routers: dict[str, str]  # routing -> the twin's router

    def scenarios(self) -> list[Scenario]:
        return [(n, self.traffic, self.context) for n in self.sizes]


@dataclass
class RoutingPredictions:
    """The replays of the row: per routing and size, the predictions per path (or why there are none)."""

    plan: RoutingPlan | None
    by_size: dict[str, dict[int, list[Prediction]]] = field(default_factory=dict)
    reason: str | None = None


def unavailable(analysis: Analysis) -> str | None:
    """Why the export cannot price the row (None: it can), in words with what it would need."""
    m = analysis.model
    if m.assumptions.prefix_cache == "off":
        return ("the scenarios' prefix cache is off (--prefix-cache off): with every prompt token computed, "
                "routing has no hit to keep")
    if not math.isfinite(m.prefix_cached_share):
        return ("no prefix-cache counter in the export, so the share of prompt tokens the cache served is not "
                f"known and neither is what routing could keep of it: {COUNTER_HINT}")
    if not m.prefix_cached_share > 0:
        return "the export's prefix cache served no prompt token: there is no hit for routing to keep"
    if m.assumptions.prefix_cache == "shared":
        return ("--prefix-cache shared takes every cached token for a prefix every request starts with, whose hit "
                "rate no router changes: use --prefix-cache conversation (the default) to split it")
    splits = [p.prefix for p in analysis.demand.paths if p.prefix is not None]
    if not any(s.conversations for s in splits):
        return ("the prompt lengths let a prefix every request starts with serve every cached token, and no "
                "conversation share was given: every hit is one no router changes, so prefix-aware routing is "
                "worth nothing under this assumption; give the share of the cached tokens that are conversation "
                "history (--conversation-share PATH=SHARE) to price it")
    return None


def routers(analysis: Analysis) -> dict[str, str]:
    """The twin's router of each routing: the fitted one for load-based (least outstanding when the fleet's
    is prefix-aware), and prefix_aware."""
    fitted = analysis.model.router
    return {LOAD_BASED: "least_outstanding" if fitted == "prefix_aware" else fitted, PREFIX_AWARE: "prefix_aware"}


def routed(analysis: Analysis, router: str) -> Analysis:
    """The analysis with the twin's router set (the same fit, calibration, residuals and flags)."""
    if analysis.model.router == router:
        return analysis
    return replace(analysis, model=replace(analysis.model, router=router))


def plan(analysis: Analysis, spec: RoutingSpec, replicas: Sequence[int], traffic: Sequence[float],
         context: Sequence[float]) -> RoutingPlan:
    """The row's scenario: every grid size, the observed N and the given N', at the row's traffic and
    context x1 (else the grid's first)."""
    g = spec.traffic if spec.traffic is not None else (1.0 if 1.0 in traffic else float(traffic[0]))
    m = 1.0 if 1.0 in context else float(context[0])
    sizes = {int(n) for n in replicas} | {int(analysis.observed.replicas)}
    if spec.replicas is not None:
        sizes.add(int(spec.replicas))
    return RoutingPlan(replicas=spec.replicas, traffic=float(g), context=float(m), sizes=tuple(sorted(sizes)),
                       routers=routers(analysis))


def predict(analysis: Analysis, spec: RoutingSpec, replicas: Sequence[int], traffic: Sequence[float],
            context: Sequence[float], static: Mapping[Scenario, list[Prediction]] | None = None,
            run: Callable[[Analysis, list[Scenario]], Mapping[Scenario, list[Prediction]]] | None = None,
            seeds: int = 3, executor: Executor | None = None,
            progress: Callable[[str], None] | None = None) -> RoutingPredictions:
    """The row's replays: each router at every size of the plan (``static``: the grid's predictions,
    reused for the router the static rows ran). ``run(analysis, scenarios)``: how scenarios are
    replayed (default: ``scenarios.run_scenarios`` with ``seeds`` on ``executor``; the dashboard
    passes its cache)."""
    reason = unavailable(analysis)
    if reason is not None:
        return RoutingPredictions(plan=None, reason=reason)
    p = plan(analysis, spec, replicas, traffic, context)
    static = static or {}

    def default_run(a: Analysis, wanted: list[Scenario]) -> Mapping[Scenario, list[Prediction]]:
        return scenarios.run_scenarios(a, wanted, seeds, progress=progress, executor=executor)

    run = run or default_run
    out = RoutingPredictions(plan=p)
    for routing, router in p.routers.items():
        a = routed(analysis, router)
        have = static if router == analysis.model.router else {}
        missing = [s for s in p.scenarios() if s not in have]
        if progress and missing:
            progress(f"routing row: {routing} ({router}) at {len(missing)} sizes")
        done = dict(run(a, missing)) if missing else {}
        out.by_size[routing] = {s[0]: list(have.get(s) or done[s]) for s in p.scenarios()}
    return out


def meets(predictions: Sequence[Prediction], targets: Mapping[str, float], high: bool = False) -> bool:
    """Whether every path's joint breach share (its interval's high end with ``high``) is within 1 - its
    target (:func:`target_of`)."""
    for p in predictions:
        share = p.breach_share_high if high else p.breach_share
        if not math.isfinite(share) or share > 1.0 - target_of(targets, p.path) + 1e-12:
            return False
    return True


def target_of(targets: Mapping[str, float], path: str) -> float:
    """A path's target: its own promise's, else the promise for every path (``*``), else 0.99."""
    return float(targets.get(path, targets.get(ALL_PATHS, DEFAULT_TARGET)))


def needed(by_size: Mapping[int, list[Prediction]], targets: Mapping[str, float], high: bool = False) -> int | None:
    """The smallest size at which the promise holds (None: none of those replayed)."""
    return next((n for n in sorted(by_size) if meets(by_size[n], targets, high)), None)


def chosen(rp: RoutingPredictions, targets: Mapping[str, float], observed: int) -> tuple[int, str]:
    """The row's N' and how it was chosen."""
    assert rp.plan is not None
    if rp.plan.replicas is not None:
        return rp.plan.replicas, "given"
    need = needed(rp.by_size[LOAD_BASED], targets)
    if need is not None:
        return need, "the smallest size meeting every path's promise under load-based routing"
    return observed, "the observed fleet size: no size replayed meets the promise under load-based routing"


def _requests(analysis: Analysis, traffic: float, horizon_hours: float) -> dict[str, float]:
    hours_observed = analysis.demand.duration_s / 3600
    return {p: n / hours_observed * traffic * horizon_hours for p, n in analysis.observed.requests.items()}


def section(analysis: Analysis, rp: RoutingPredictions, prices: money.Prices, split: str = "requests",
            targets: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The ``routing`` part of the scenarios document (docs/cli/scenarios.md): per routing and path at
    the row's N', per routing for the fleet, the curve over sizes, what prefix-aware routing saves, and
    the split it stands on."""
    splits = {p.name: p.prefix.as_json() for p in analysis.demand.paths if p.prefix is not None}
    observed_share = {p.name: p.cached_share for p in analysis.demand.paths}
    if rp.reason is not None or rp.plan is None:
        return {"available": False, "reason": rp.reason, "observed_cached_share": observed_share, "split": splits,
                "rows": [], "fleet": [], "curve": [], "worth": None}
    targets = dict(targets or {})
    plan = rp.plan
    n, how = chosen(rp, targets, analysis.observed.replicas)
    requests = _requests(analysis, plan.traffic, prices.horizon_hours)
    fleet_cost = money.headroom_cost(n, prices)
    share_of = money.split_by_requests(fleet_cost, requests) if split == "requests" else {
        p: fleet_cost / len(requests) for p in requests}
    rows, fleet, curve = [], [], []
    for routing in ROUTINGS:
        by_size = rp.by_size[routing]
        need, need_high = needed(by_size, targets), needed(by_size, targets, high=True)
        totals = {"routing": routing, "router": plan.routers[routing], "replicas": n, "traffic": plan.traffic,
                  "context": plan.context, "headroom_cost": 0.0, "breach_cost": 0.0, "breach_cost_low": 0.0,
                  "breach_cost_high": 0.0, "flagged": False, "replicas_needed": need,
                  "replicas_needed_if_high": need_high,
                  "headroom_cost_needed": None if need is None else money.headroom_cost(need, prices)}
        for p in by_size[n]:
            price = prices.breach.get(p.path, 0.0)
            cost = money.path_cost(requests[p.path], p.breach_share, price, share_of[p.path])
            row = {"routing": routing, "router": plan.routers[routing], "replicas": n, "traffic": plan.traffic,
                   "context": plan.context, "path": p.path,
                   "breach_share": p.breach_share, "breach_share_low": p.breach_share_low,
                   "breach_share_high": p.breach_share_high, "ttft_share": p.ttft_share,
                   "ttft_share_low": p.ttft_share_low, "ttft_share_high": p.ttft_share_high,
                   "tpot_share": p.tpot_share, "tpot_share_low": p.tpot_share_low,
                   "tpot_share_high": p.tpot_share_high, "cached_share": p.cached_share,
                   "observed_cached_share": observed_share.get(p.path), "requests": requests[p.path],
                   "flagged": p.flagged, "flags": p.flags, "extrapolated": p.extrapolated, **cost,
                   "breach_cost_low": requests[p.path] * p.breach_share_low * price,
                   "breach_cost_high": requests[p.path] * p.breach_share_high * price}
            rows.append(row)
            for k in ("headroom_cost", "breach_cost", "breach_cost_low", "breach_cost_high"):
                totals[k] += row[k]
            totals["flagged"] = totals["flagged"] or p.flagged
        totals["total_cost"] = totals["headroom_cost"] + totals["breach_cost"]
        totals["total_cost_low"] = totals["headroom_cost"] + totals["breach_cost_low"]
        totals["total_cost_high"] = totals["headroom_cost"] + totals["breach_cost_high"]
        fleet.append(totals)
        for size, preds in sorted(by_size.items()):
            for p in preds:
                curve.append({"routing": routing, "replicas": size, "path": p.path, "breach_share": p.breach_share,
                              "breach_share_low": p.breach_share_low, "breach_share_high": p.breach_share_high,
                              "cached_share": p.cached_share, "meets_promise": meets([p], targets),
                              "flagged": p.flagged})
    lb, pa = fleet
    margin = analysis.model.assumptions.affinity_margin
    saved = (lb["replicas_needed"] - pa["replicas_needed"]
             if lb["replicas_needed"] is not None and pa["replicas_needed"] is not None else None)
    worth = {
        "replicas": n,
        "total_cost_saved": lb["total_cost"] - pa["total_cost"],
        # the saving when the load-based row sits at its low end and the prefix-aware at its high end,
        # and the other way round: how far the intervals let it move
        "total_cost_saved_low": lb["total_cost_low"] - pa["total_cost_high"],
        "total_cost_saved_high": lb["total_cost_high"] - pa["total_cost_low"],
        "replicas_saved": saved,
        "headroom_cost_saved": None if saved is None else money.headroom_cost(saved, prices),
    }
    return {"available": True, "reason": None, "replicas": n, "replicas_chosen": how, "traffic": plan.traffic,
            "context": plan.context, "routers": dict(plan.routers),
            "affinity_margin": margin if margin is not None else DEFAULT_AFFINITY_MARGIN, "targets": targets,
            "observed_cached_share": observed_share, "split": splits, "rows": rows, "fleet": fleet,
            "curve": curve, "worth": worth,
            "note": ("both routers replay the same requests and conversations; a path's cached share is of its prompt "
                     "tokens, as vllm:prefix_cache_hits_total over vllm:prefix_cache_queries_total counts it; the "
                     "row stands on the split of the observed cached share into a shared prefix and conversations "
                     "('split': measured share, assumed or given conversation share, fitted follow-up share)")}

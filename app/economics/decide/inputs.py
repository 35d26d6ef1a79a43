"""The inputs of a scenario run and the run itself, one way for the CLI and the dashboard: the grid
and prices as people type them, parsed; ``ScenarioInputs`` with its replay key, saved form and
``run()`` (analyse → grid → cross-check → decision document)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.cube import ensure_cube
from app.economics.check import crosscheck
from app.economics.decide import decision, policies, routing
from app.economics.decide.money import Prices
from app.economics.decide.policy_file import PolicySet, check_paths
from app.economics.decide.routing import RoutingSpec
from app.economics.model.capacity import PREFIX_CASES, Assumptions
from app.economics.predict import scenarios
from app.economics.predict.scenarios import Analysis, Prediction
from app.economics.run.executors import Executor
from app.jsonable import jsonable
from app.promise.shares import Promise
from app.store import Workspace

Progress = Callable[[str], None]


def parse_replicas(text: str) -> list[int]:
    """``2:12`` (inclusive), ``2:12:2`` or ``3,4,6``."""
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            start, stop, step = (parts + [1])[:3]
            out = list(range(start, stop + 1, step))
        else:
            out = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"replicas {text!r}: expected FROM:TO[:STEP] or a comma-separated list") from None
    if not out or min(out) < 1:
        raise ValueError(f"replicas {text!r}: replica counts must be >= 1")
    return out


def parse_multipliers(text: str, what: str) -> list[float]:
    """``0.5,1.0,1.5``: positive numbers."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected comma-separated numbers") from None
    if not out or min(out) <= 0:
        raise ValueError(f"{what} {text!r}: multipliers must be > 0")
    return out


def parse_breach_prices(items: Sequence[str]) -> dict[str, float]:
    """``PATH=USD`` (or ``USD``: every path without its own) → {path or "*": USD}."""
    out: dict[str, float] = {}
    for item in items:
        path, sep, usd = item.rpartition("=")
        try:
            out[path if sep else ANY_PATH] = float(usd)
        except ValueError:
            raise ValueError(f"breach price {item!r}: expected PATH=USD") from None
    return out


ANY_PATH = "*"  # a breach price for every path that has none of its own


@dataclass(frozen=True)
class ScenarioRun:
    """What a run of the scenarios produced: the fitted analysis, the predictions of every scenario,
    and the priced decision document (``headroom scenarios --format json``)."""

    analysis: Analysis
    predictions: list[Prediction]
    document: dict[str, Any]


@dataclass(frozen=True)
class ScenarioInputs:
    """Everything a run of the scenarios depends on, as the CLI and the dashboard take it.

    The twin replays TTFT and TPOT only, so a promise here is a path's two thresholds (its target and
    E2E/queue thresholds do not reach the replay or its observed comparison). Prices are not part of
    :meth:`replay_key`: a price change re-prices cached predictions without a replay.
    """

    datasets: tuple[int, ...]
    promises: tuple[Promise, ...]
    path_labels: tuple[str, ...]
    rules: tuple[tuple[str, str], ...] = ()
    replicas: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)
    traffic: tuple[float, ...] = (1.0,)
    context: tuple[float, ...] = (1.0,)
    seeds: int = 1
    assumptions: Assumptions = field(default_factory=Assumptions)
    observed_replicas: int | None = None
    calibrate: bool = True
    prices: Prices = field(default_factory=lambda: Prices(replica_hour=0.0, breach={}))
    split: str = "requests"
    # the routing row (app.economics.decide.routing): priced where the export shows cache hits
    routing: bool = True
    routing_replicas: int | None = None
    routing_traffic: float | None = None

    def __post_init__(self) -> None:
        if not self.datasets:
            raise ValueError("choose at least one dataset to replay")
        if self.seeds < 1:
            raise ValueError("seeds: at least 1")
        if not self.promises:
            raise ValueError("no promise: the scenarios need a TTFT/TPOT promise per path")
        if not self.replicas or min(self.replicas) < 1:
            raise ValueError("replicas: replica counts must be >= 1")
        if min((*self.traffic, *self.context), default=0.0) <= 0 or not self.traffic or not self.context:
            raise ValueError("traffic and context multipliers must be > 0")
        if self.split not in ("requests", "equal"):
            raise ValueError(f"cost split {self.split!r}: requests or equal")
        a = self.assumptions
        if a.prefix_cache is not None and a.prefix_cache not in PREFIX_CASES:
            raise ValueError(f"prefix cache {a.prefix_cache!r}: expected one of {', '.join(PREFIX_CASES)}")
        if a.think_s is not None and not (a.think_s >= 0 and math.isfinite(a.think_s)):
            raise ValueError(f"think time {a.think_s}: a number of seconds >= 0")
        if a.affinity_margin is not None and a.affinity_margin < 0:
            raise ValueError(f"affinity margin {a.affinity_margin}: a number of outstanding requests >= 0")
        for path, share in (a.conversation_share or {}).items():
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"conversation share of {path}: {share} is not a share in [0, 1]")
        RoutingSpec(self.routing_replicas, self.routing_traffic)  # its checks
        # a promise here is what the twin replays: a path's TTFT and TPOT thresholds, and the target the
        # routing row's "replicas needed" holds them to
        object.__setattr__(self, "promises", tuple(
            Promise(path=p.path, ttft_s=p.ttft_s, tpot_s=p.tpot_s, target=p.target) for p in self.promises))
        object.__setattr__(self, "datasets", tuple(sorted(int(i) for i in self.datasets)))

    # -- what it is ------------------------------------------------------------------------------
    def replay_key(self) -> str:
        """The canonical JSON of what the replays depend on (the cache key of analyses and scenarios)."""
        return json.dumps({
            "datasets": list(self.datasets), "path_labels": list(self.path_labels),
            "rules": [list(r) for r in self.rules],
            "promises": sorted([p.path, p.ttft_s, p.tpot_s] for p in self.promises),
            "assumptions": self.assumptions.given(), "observed_replicas": self.observed_replicas,
            "calibrate": self.calibrate, "seeds": self.seeds,
        }, sort_keys=True)

    @classmethod
    def from_replay_key(cls, key: str) -> ScenarioInputs:
        """The inputs of a replay key (prices and grid left at their defaults: the key holds neither)."""
        spec = json.loads(key)
        return cls(datasets=tuple(spec["datasets"]), path_labels=tuple(spec["path_labels"]),
                   rules=tuple(tuple(r) for r in spec["rules"]),
                   promises=tuple(Promise(path=p, ttft_s=t, tpot_s=u) for p, t, u in spec["promises"]),
                   assumptions=Assumptions(**spec["assumptions"]), observed_replicas=spec["observed_replicas"],
                   calibrate=spec["calibrate"], seeds=spec["seeds"])

    def scenarios(self) -> list[tuple[int, float, float]]:
        """(replicas, traffic, context) of every scenario, in the order :func:`scenarios.grid` runs them."""
        return [(n, g, m) for g in self.traffic for m in self.context for n in self.replicas]

    def targets(self) -> dict[str, float]:
        """Each path's target: the share of its requests the promise must keep."""
        return {p.path: p.target for p in self.promises}

    def routing_spec(self) -> RoutingSpec:
        return RoutingSpec(self.routing_replicas, self.routing_traffic)

    def prices_for(self, paths: Iterable[str]) -> Prices:
        """The prices with one breach price per path (a ``*`` price fills the paths without their own)."""
        star = self.prices.breach.get(ANY_PATH)
        breach = {p: v for p, v in self.prices.breach.items() if p != ANY_PATH}
        if star is not None:
            breach = {p: breach.get(p, star) for p in paths} | breach
        return Prices(self.prices.replica_hour, breach, self.prices.horizon_hours)

    def saved(self, **extra: Any) -> dict[str, Any]:
        """The inputs as a saved scenario set keeps them (``headroom saved``; ``extra``: e.g. the
        dashboard's own form)."""
        paths = [p.path for p in self.promises]
        prices = self.prices_for(paths)
        return jsonable({
            "datasets": list(self.datasets), "path_labels": list(self.path_labels),
            "promises": [p.as_param() for p in self.promises], "replicas": list(self.replicas),
            "traffic": list(self.traffic), "context": list(self.context), "seeds": self.seeds,
            "prices": {"replica_hour": prices.replica_hour, "breach": dict(prices.breach),
                       "horizon_hours": prices.horizon_hours, "cost_split": self.split},
            "assumptions": self.assumptions.as_dict(),
            "routing": {"on": self.routing, "replicas": self.routing_replicas, "traffic": self.routing_traffic},
            **extra,
        })

    # -- the run, step by step (the dashboard caches each step) ------------------------------------
    def analyse(self, ws: Workspace, progress: Progress | None = None) -> Analysis:
        """Fit the replica model and the demand, calibrate and replay at the observed fleet size."""
        return scenarios.analyse(ws, list(self.datasets), list(self.promises), list(self.path_labels),
                                 self.assumptions, observed_replicas=self.observed_replicas,
                                 calibrate=self.calibrate, seeds=self.seeds, progress=progress)

    def predict(self, analysis: Analysis, wanted: Sequence[scenarios.Scenario], executor: Executor | None = None,
                on_run: Callable[[int, int, str], None] | None = None,
                on_scenario: Callable[[scenarios.Scenario, list[Prediction]], None] | None = None,
                ) -> dict[scenarios.Scenario, list[Prediction]]:
        """The predictions of these scenarios (N', traffic, context) of the grid, their runs on one
        executor at once (``scenarios.run_scenarios``)."""
        return scenarios.run_scenarios(analysis, wanted, self.seeds, executor=executor, on_run=on_run,
                                       on_scenario=on_scenario)

    def grid(self, analysis: Analysis, executor: Executor | None = None,
             progress: Progress | None = None) -> list[Prediction]:
        """The predictions of every scenario (on ``executor``: local processes by default, or Ray)."""
        return scenarios.grid(analysis, list(self.replicas), list(self.traffic), list(self.context),
                              seeds=self.seeds, progress=progress, executor=executor)

    def cross_check(self, ws: Workspace, curve_cube: int | None = None) -> dict[str, Any]:
        """The empirical load–response curve per path at every (N', traffic): queries, no replay
        (on the datasets' 5-minute cube, or ``curve_cube`` when the caller holds it)."""
        cube_id = curve_cube if curve_cube is not None else ensure_cube(
            ws, list(self.datasets), crosscheck.CURVE_WINDOW_S, list(self.path_labels))
        return crosscheck.load_response(ws, cube_id, list(self.promises), list(self.replicas), list(self.traffic))

    def queueing(self, analysis: Analysis) -> dict[str, Any]:
        """Kingman's terms and an Erlang-C curve beside the twin (no replay)."""
        return crosscheck.queueing_view(analysis, list(self.replicas))

    def document(self, analysis: Analysis, predictions: list[Prediction], cross_check: dict[str, Any] | None = None,
                 queueing: dict[str, Any] | None = None,
                 policy_predictions: list[policies.PolicyPrediction] | None = None,
                 policy_set: PolicySet | None = None,
                 routing_predictions: routing.RoutingPredictions | None = None) -> dict[str, Any]:
        """The priced decision document: arithmetic on the predictions, milliseconds (with the policy
        rows' and the routing row's sections when they were replayed)."""
        prices = self.prices_for(analysis.thresholds)
        doc = decision.document(analysis, predictions, prices, split=self.split, cross_check=cross_check,
                                queueing=queueing)
        if policy_predictions is not None and policy_set is not None:
            doc["policies"] = policies.section(analysis, policy_predictions, prices, policy_set.degraded_price,
                                               self.split, policy_set.spec)
        if routing_predictions is not None:
            doc["routing"] = routing.section(analysis, routing_predictions, prices, self.split, self.targets())
        return jsonable(doc)

    def routing_rows(self, analysis: Analysis, predictions: Sequence[Prediction], executor: Executor | None = None,
                     progress: Progress | None = None,
                     run: Callable[[Analysis, list[scenarios.Scenario]], Any] | None = None,
                     ) -> routing.RoutingPredictions:
        """The routing row's replays (load-based against prefix-aware at every grid size), reusing the
        grid's ``predictions`` for the router they ran; or why the export cannot price it."""
        static: dict[scenarios.Scenario, list[Prediction]] = {}
        for p in predictions:
            static.setdefault((p.replicas, p.traffic, p.context), []).append(p)
        return routing.predict(analysis, self.routing_spec(), self.replicas, self.traffic, self.context, static,
                               run=run, seeds=self.seeds, executor=executor, progress=progress)

    def policy_rows(self, analysis: Analysis, policy_set: PolicySet, executor: Executor | None = None,
                    progress: Progress | None = None) -> list[policies.PolicyPrediction]:
        """The policy rows (autoscaler, admission, retry, degradation) replayed through the twin."""
        return policies.predict(analysis, policy_set.rows, seeds=self.seeds, progress=progress, executor=executor)

    def run(self, ws: Workspace, executor: Executor | None = None, progress: Progress | None = None,
            policy_set: PolicySet | None = None) -> ScenarioRun:
        """Analyse → grid → (policy rows) → cross-check → decision document (what ``headroom
        scenarios`` runs)."""
        say = progress or (lambda _msg: None)
        say("fitting the replica model and the demand, replaying at the observed fleet size")
        analysis = self.analyse(ws, progress)
        predictions = self.grid(analysis, executor, progress)
        if policy_set is not None:
            policy_set = policy_set.for_fleet(analysis.observed.replicas)
            check_paths(policy_set, list(analysis.thresholds), policy_set.source)
        rows = self.policy_rows(analysis, policy_set, executor, progress) if policy_set is not None else None
        routed = self.routing_rows(analysis, predictions, executor, progress) if self.routing else None
        doc = self.document(analysis, predictions, self.cross_check(ws), self.queueing(analysis), rows, policy_set,
                            routed)
        return ScenarioRun(analysis, predictions, doc)

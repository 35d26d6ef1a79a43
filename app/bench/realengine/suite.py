"""The real-engine accuracy suite: its scenarios, their runs, and the evaluation of the fit on them.

The observed fleet is one replica at traffic x1 (run twice: the truth's own noise). Headroom is fitted
on the first observed run's export alone and predicts every scenario; each scenario's truth is a real
run of the engine at it: traffic x0.6 ... x1.5 on one replica, two replicas at x1 ... x2, context x1.5.

The prefix-cache family (:func:`evaluate_prefix`) is fitted on its own observed run (one replica, the
cache on) and predicts each of its cases once; two of them are the routing row of
:mod:`app.economics.decide.routing` (load-based and prefix-aware routing at two replicas and twice the
traffic), set against the engine runs at that scenario, with the split of the cached share the row
stands on beside the trace's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from app import provenance
from app.bench.realengine import compare as cp
from app.bench.realengine import fleet as fl
from app.bench.realengine import truth as tr
from app.bench.realengine.run import RunSpec, run
from app.bench.realengine.trace import Conversations, TraceSpec
from app.economics.decide import routing
from app.economics.predict import scenarios as sc

OBSERVED = (1, 1.0, 1.0)
COMMAND = "python -m app.bench.realengine suite --workdir DIR --out docs/data/real-engine.json"
# name -> (replicas, traffic, context, repeat)
SCENARIOS: dict[str, tuple[int, float, float, int]] = {
    "n1-x1.0": (1, 1.0, 1.0, 0), "n1-x1.0-r2": (1, 1.0, 1.0, 1),
    "n1-x0.6": (1, 0.6, 1.0, 0), "n1-x1.25": (1, 1.25, 1.0, 0), "n1-x1.5": (1, 1.5, 1.0, 0),
    "n1-ctx1.5": (1, 1.0, 1.5, 0), "n1-x0.8": (1, 0.8, 1.0, 0),
    # two replicas hold both cores: they wait for a machine with nothing else running
    "n2-x1.0": (2, 1.0, 1.0, 0), "n2-x2.0": (2, 2.0, 1.0, 0), "n2-x1.5": (2, 1.5, 1.0, 0),
}
# what the operator knows and passes (the launch flags); the KV size is in cache_config_info
GIVEN = {"max_num_seqs": 32, "max_num_batched_tokens": 512, "max_model_len": 2048}


# The prefix-cache family (its own work directory): every request starts with its path's system prompt
# (two KV blocks of the CPU build's 128 tokens) and a conversation's later turns resend the earlier
# ones with the engine's answers, so that vLLM's prefix cache serves tens of per cent of the prompt
# tokens. Observed: one replica with the cache on (vLLM's default); truths: the cache off, and two
# replicas at twice the traffic under load-based and under prefix-aware (sticky) routing.
PREFIX_TRACE = TraceSpec(rate=1.0, conversations=Conversations(system_tokens=256, turns_mean=2.5))
# name -> (replicas, traffic, prefix caching, the driver's router)
PREFIX_SCENARIOS: dict[str, tuple[int, float, bool, str]] = {
    "p-n1-x1.0": (1, 1.0, True, "least_outstanding"), "p-n1-x1.0-off": (1, 1.0, False, "least_outstanding"),
    "p-n2-x2.0": (2, 2.0, True, "least_outstanding"), "p-n2-x2.0-sticky": (2, 2.0, True, "sticky"),
}


PREFIX_OBSERVED = "p-n1-x1.0"
PREFIX_COMMAND = ("python -m app.bench.realengine prefix --workdir DIR --out docs/data/real-engine-prefix.json")


def _as_run(analysis: sc.Analysis) -> sc.Analysis:
    return analysis


def _cache_off(analysis: sc.Analysis) -> sc.Analysis:
    m = analysis.model
    return replace(analysis, model=replace(m, assumptions=replace(m.assumptions, prefix_cache="off")))


def _routed(name: str) -> Callable[[sc.Analysis], sc.Analysis]:
    """The twin of the routing row's ``name`` routing (:func:`app.economics.decide.routing.routers`)."""
    return lambda analysis: routing.routed(analysis, routing.routers(analysis)[name])


# what each truth run changed, and the same change made to the twin fitted on the observed run:
# (label, run name, the routing row's routing or None, the scenario's twin)
PREFIX_CASES: tuple[tuple[str, str, str | None, Callable[[sc.Analysis], sc.Analysis]], ...] = (
    ("cache on, as observed", "p-n1-x1.0", None, _as_run),
    ("cache off (--no-enable-prefix-caching)", "p-n1-x1.0-off", None, _cache_off),
    ("load-based routing", "p-n2-x2.0", routing.LOAD_BASED, _routed(routing.LOAD_BASED)),
    ("prefix-aware routing (a conversation stays on its replica)", "p-n2-x2.0-sticky", routing.PREFIX_AWARE,
     _routed(routing.PREFIX_AWARE)),
)


def spec_of(name: str, trace: TraceSpec | None = None, flags: fl.EngineFlags | None = None) -> RunSpec:
    if name in PREFIX_SCENARIOS:
        n, g, caching, router = PREFIX_SCENARIOS[name]
        return RunSpec(name=name, replicas=n, traffic=g, context=1.0, trace=trace or PREFIX_TRACE,
                       flags=flags or fl.EngineFlags(prefix_caching=caching), router=router)
    n, g, m, repeat = SCENARIOS[name]
    return RunSpec(name=name, replicas=n, traffic=g, context=m, repeat=repeat, trace=trace or TraceSpec(),
                   flags=flags or fl.EngineFlags())


def run_all(workdir: Path, names: Sequence[str], model_dir: Path, say: Callable[[str], None]) -> list[Path]:
    """Every named run not yet in ``workdir`` (a finished run has its ``run.json``)."""
    out = []
    for name in names:
        target = workdir / "runs" / name
        if (target / "run.json").exists():
            say(f"{name}: already run")
        else:
            run(spec_of(name), model_dir, target, say=say)
        out.append(target)
    return out


def runs_by_scenario(run_dirs: Sequence[Path]) -> dict[tuple[int, float, float], list[Path]]:
    out: dict[tuple[int, float, float], list[Path]] = {}
    for d in sorted(run_dirs):
        if (d / "run.json").exists():
            out.setdefault(cp.scenario_of(d), []).append(d)
    return out


def evaluate(run_dirs: Sequence[Path], thresholds: Sequence[cp.Threshold] = cp.THRESHOLDS, seeds: int = 3,
             exports: Sequence[str] = ("query_range", "dump"), say: Callable[[str], None] = lambda _m: None
             ) -> dict[str, Any]:
    """Fit on the observed run, predict every scenario that has runs, compare; the JSON the page is
    rendered from."""
    t0 = time.perf_counter()
    by = runs_by_scenario(run_dirs)
    if OBSERVED not in by:
        raise ValueError("no run of the observed scenario (one replica at traffic x1)")
    observed = by[OBSERVED][0]
    scenarios = sorted(by)
    out: dict[str, Any] = {"observed_run": observed.name, "rows": [], "fits": [], "runs": [],
                           "given": GIVEN, "goal": {"relative": cp.REL_GOAL, "absolute": cp.ABS_GOAL}}
    law = cp.step_truth(observed)
    speed = {d.name: cp.engine_speed(d, law) for dirs in by.values() for d in dirs}
    for s, dirs in by.items():
        for d in dirs:
            meta = cp.run_meta(d)
            out["runs"].append({"name": d.name, "replicas": s[0], "traffic": s[1], "context": s[2],
                                "requests": meta["driver"]["requests"], "errors": meta["driver"]["errors"],
                                "sent_late": meta["driver"]["sent_late"], "finished": meta["finished"],
                                "cores": meta["cores"], "machine_load": meta.get("machine_load", {}),
                                "step_truth": cp.step_truth(d), "engine_speed": speed[d.name],
                                "truth_disturbed": cp.disturbed(speed[d.name])})
    for export in exports:
        for th in (thresholds if export == exports[0] else thresholds[:1]):
            say(f"fitting on {observed.name}'s {export} export, {th.label}")
            analysis = cp.fit(observed, th, "chat", GIVEN, export=export, seeds=2)
            truths = {s: cp.truth_of(by[s], th) for s in scenarios}
            noise = _relative_noise(truths[OBSERVED])
            preds = sc.run_scenarios(analysis, scenarios, seeds=seeds)
            rows = cp.rows(analysis, [p for s in scenarios for p in preds[s]], truths, th, noise)
            for r in rows:
                r["export"] = export
                r["truth_disturbed"] = any(cp.disturbed(speed[d.name]) for d in by[(r["replicas"], r["traffic"],
                                                                                     r["context"])])
            out["rows"] += rows
            out["fits"].append({"export": export, "threshold": th.label, "model": cp.model_of(analysis),
                                "residual": cp.residual_of(analysis), "fleet_residual": analysis.fleet_residual,
                                "observed_truth": truths[OBSERVED], "noise": noise,
                                "calibration": {k: v for k, v in analysis.calibration.items() if k != "rounds"}})
    out["evaluate_s"] = time.perf_counter() - t0
    out["provenance"] = provenance.record(COMMAND)
    return out


def _relative_noise(t: dict[str, Any]) -> dict[str, float]:
    """Per metric, the truth's spread over the observed scenario's runs relative to its mean."""
    return {m: (t[f"{m}_spread"] / t[m] if t.get(f"{m}_spread") is not None and t[m] > 0 else 0.0)
            for m in cp.METRICS}


def trace_split(run_dir: Path, block: int = 128) -> dict[str, float]:
    """A prefix run's own split of its cached tokens: every request's system prompt (the trace's, in
    whole blocks of the CPU build's 128 tokens and short of the prompt's last token) against the hits
    the engine counted; the rest is history. Empty where the run has no counters of its own."""
    meta = cp.run_meta(run_dir)
    system = int(meta["spec"]["trace"]["conversations"]["system_tokens"])
    req = tr.read(cp.requests_file(run_dir))
    prompt = np.asarray(req.prompt_tokens, dtype=np.int64)[np.argsort(req.sent_unix, kind="stable")]
    total = float(prompt.sum())
    # every request but the first finds the system prompt cached
    shared = float(np.minimum(system, (prompt[1:] - 1) // block * block).sum())
    cached = cp.cached_share(run_dir)
    if cached is None or total <= 0:
        return {}
    return {"cached_share": cached, "system_share": shared / total,
            "conversation_share": max(0.0, 1.0 - shared / (cached * total))}


def prefix_command(assumptions: dict[str, Any] | None = None, out: str | None = None) -> str:
    """The command that wrote the prefix family's JSON, with the assumptions it passed and where it wrote
    (``out``; None: the docs' file)."""
    flags = {"think_s": "--think-time", "conversation_share": "--conversation-share"}
    extra = "".join(f" {flags[k]} {v:g}" for k, v in (assumptions or {}).items())
    command = PREFIX_COMMAND.replace(" --out", extra + " --out")
    return command if out is None else command.replace("docs/data/real-engine-prefix.json", out)


def evaluate_prefix(run_dirs: Sequence[Path], thresholds: Sequence[cp.Threshold] = cp.THRESHOLDS, seeds: int = 3,
                    say: Callable[[str], None] = lambda _m: None, assumptions: dict[str, Any] | None = None,
                    out_path: str | None = None) -> dict[str, Any]:
    """The prefix-cache family: fit on the observed run (cache on, one replica) and predict each case
    (:data:`PREFIX_CASES`) whose run exists, once, against what the engines measured, with the cached
    share the export showed and the share each run's engines served. The routing cases' rows carry
    their ``routing`` and the twin's ``router``: together the routing row at their scenario. Each fit
    carries the split of the cached share it replayed (``split``), the document the observed run's own
    (``trace_split``). ``assumptions``: the economics' ``think_s`` or ``conversation_share`` (one
    share for every path), beside the launch flags :data:`GIVEN`."""
    t0 = time.perf_counter()
    runs = {d.name: d for d in run_dirs if (d / "run.json").exists()}
    if PREFIX_OBSERVED not in runs:
        raise ValueError(f"no run {PREFIX_OBSERVED}: the prefix family's observed run (one replica, cache on); "
                         f"run `python -m app.bench.realengine run --workdir DIR {PREFIX_OBSERVED}`")
    observed = runs[PREFIX_OBSERVED]
    given: dict[str, Any] = {**GIVEN, **(assumptions or {})}
    if "conversation_share" in given and not isinstance(given["conversation_share"], dict):
        given["conversation_share"] = {"*": float(given["conversation_share"])}
    out: dict[str, Any] = {"observed_run": observed.name, "rows": [], "fits": [], "cases": [], "given": given,
                           "goal": {"relative": cp.REL_GOAL, "absolute": cp.ABS_GOAL},
                           "trace": cp.run_meta(observed)["spec"]["trace"], "trace_split": trace_split(observed)}
    law = cp.step_truth(observed)
    for label, name, routing_name, _ in PREFIX_CASES:
        if name in runs:
            d, meta = runs[name], cp.run_meta(runs[name])
            speed = cp.engine_speed(d, law)
            s = cp.scenario_of(d)
            out["cases"].append({"case": label, "run": name, "routing": routing_name, "replicas": s[0],
                                 "traffic": s[1], "context": s[2],
                                 "router": meta["spec"].get("router"), "prefix_caching":
                                 meta["spec"]["flags"].get("prefix_caching", True),
                                 "requests": meta["driver"]["requests"], "errors": meta["driver"]["errors"],
                                 "sent_late": meta["driver"]["sent_late"],
                                 "measured_cached_share": cp.cached_share(d),
                                 "machine_load": meta.get("machine_load", {}), "step_truth": cp.step_truth(d),
                                 "engine_speed": speed, "truth_disturbed": cp.disturbed(speed)})
    for th in thresholds:
        say(f"fitting on {observed.name}'s query_range export, {th.label}")
        analysis = cp.fit(observed, th, "chat", given, export="query_range", seeds=2)
        truth_observed = cp.truth_of([observed], th)
        for label, name, routing_name, twin in PREFIX_CASES:
            if name not in runs:
                continue
            s = cp.scenario_of(runs[name])
            scenario_twin = twin(analysis)
            say(f"  {label}: predicting {s} ({scenario_twin.model.router})")
            preds = sc.run_scenarios(scenario_twin, [s], seeds=seeds)[s]
            case = next(c for c in out["cases"] if c["run"] == name)
            case.setdefault("predicted_cached_share", {})[th.label] = preds[0].cached_share
            truth = cp.truth_of([runs[name]], th)
            for r in cp.rows(analysis, preds, {s: truth}, th, {}):
                r["case"], r["run"], r["truth_disturbed"] = label, name, case["truth_disturbed"]
                if routing_name is not None:
                    r["routing"], r["router"] = routing_name, scenario_twin.model.router
                out["rows"].append(r)
        split = analysis.demand.paths[0].prefix
        out["fits"].append({"threshold": th.label, "model": cp.model_of(analysis), "residual": cp.residual_of(analysis),
                            "cached_share_read": analysis.model.prefix_cached_share,
                            "split": split.as_json() if split is not None else None,
                            "observed_truth": truth_observed,
                            "calibration": {k: v for k, v in analysis.calibration.items() if k != "rounds"}})
    out["evaluate_s"] = time.perf_counter() - t0
    out["provenance"] = provenance.record(prefix_command(assumptions, out_path))
    return out

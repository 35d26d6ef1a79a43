"""The routing row against the real engine: Headroom fitted on the one-replica prefix run's export alone
predicts two replicas at twice the traffic under load-based and under prefix-aware routing, set against
the engine's runs at that scenario (``p-n2-x2.0``: least outstanding; ``p-n2-x2.0-sticky``: every turn
of a conversation on its first turn's replica).

Per threshold and routing: the TTFT, TPOT and joint breach shares predicted (with their intervals)
against the driver's per-request records, and the share of prompt tokens the cache served, predicted
against the engines' own counters (``vllm:prefix_cache_hits_total`` over
``vllm:prefix_cache_queries_total`` at the end of the run). The split the prediction stands on is set
beside the trace's own (its system prompt is known: the rest of the hits are history).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app import provenance
from app.bench.realengine import compare as cp
from app.bench.realengine import suite
from app.bench.realengine import truth as tr
from app.economics.decide import routing
from app.economics.predict import scenarios as sc

OBSERVED, LOAD_RUN, STICKY_RUN = "p-n1-x1.0", "p-n2-x2.0", "p-n2-x2.0-sticky"
COMMAND = "python -m app.bench.realengine routing --workdir DIR"


def trace_split(run_dir: Path, block: int = 128) -> dict[str, float]:
    """The run's own split of its cached tokens: every request's system prompt (the trace's, in whole
    blocks and short of its last token) against the hits the engine counted; the rest is history."""
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


def check(workdir: Path, thresholds: Sequence[cp.Threshold] = cp.THRESHOLDS, seeds: int = 3,
          assumptions: dict[str, Any] | None = None, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Fit on ``OBSERVED``'s export (the launch flags ``suite.GIVEN`` and ``assumptions``: e.g.
    ``think_s``, ``conversation_share``), predict the load-based and sticky runs' scenario under each
    routing, compare. Needs the three runs' directories under ``workdir/runs`` (their ``run.json``)."""
    runs = workdir / "runs"
    observed = runs / OBSERVED
    truths = {routing.LOAD_BASED: runs / LOAD_RUN, routing.PREFIX_AWARE: runs / STICKY_RUN}
    for d in (observed, *truths.values()):
        if not (d / "run.json").exists():
            raise ValueError(f"{d}: no run.json (run `python -m app.bench.realengine run --workdir {workdir} {d.name}`)")
    given = {**suite.GIVEN, **(assumptions or {})}
    if "conversation_share" in given and not isinstance(given["conversation_share"], dict):
        given["conversation_share"] = {"*": float(given["conversation_share"])}
    out: dict[str, Any] = {"observed_run": OBSERVED, "runs": {r: d.name for r, d in truths.items()}, "given": given,
                           "trace_split": trace_split(observed),
                           "measured_cached_share": {r: cp.cached_share(d) for r, d in truths.items()},
                           "rows": [], "fits": []}
    for th in thresholds:
        say(f"fitting on {OBSERVED}, {th.label}")
        analysis = cp.fit(observed, th, "chat", given, seeds=2)
        split = analysis.demand.paths[0].prefix
        out["fits"].append({"threshold": th.label, "split": split.as_json() if split else None,
                            "model": cp.model_of(analysis), "residual": cp.residual_of(analysis)})
        for name, run_dir in truths.items():
            scenario = cp.scenario_of(run_dir)
            router = routing.routers(analysis)[name]
            say(f"{name} ({router}) at N'={scenario[0]}, traffic x{scenario[1]:g}")
            (pred,) = sc.run_scenarios(routing.routed(analysis, router), [scenario], seeds)[scenario]
            truth = cp.truth_of([run_dir], th)
            for m in cp.METRICS:
                value = pred.breach_share if m == "joint" else getattr(pred, f"{m}_share")
                low, high = (pred.breach_share_low, pred.breach_share_high) if m == "joint" else (
                    getattr(pred, f"{m}_share_low"), getattr(pred, f"{m}_share_high"))
                measured = truth[m]
                out["rows"].append({
                    "threshold": th.label, "routing": name, "router": router, "run": run_dir.name,
                    "replicas": scenario[0], "traffic": scenario[1], "metric": m, "predicted": value,
                    "low": low, "high": high, "measured": measured, "flagged": pred.flagged,
                    "interval_holds": low - 1e-12 <= measured <= high + 1e-12,
                    "within_goal": cp.within(value, measured, 0.0),
                    "cached_predicted": pred.cached_share,
                    "cached_measured": out["measured_cached_share"][name]})
    out["provenance"] = provenance.record(COMMAND)
    return out


def text(result: dict[str, Any]) -> str:
    """The comparison as a few lines of text (the JSON holds everything)."""
    lines = [f"fitted on {result['observed_run']}; trace's own split: {json.dumps(result['trace_split'])}"]
    for fit in result["fits"]:
        s = fit["split"] or {}
        lines.append(f"{fit['threshold']}: split conversation {s.get('conversation_share', math.nan):.3f} "
                     f"({s.get('conversation_source')}), shared {s.get('shared_tokens')} tokens, follow-ups "
                     f"{s.get('followup_share', math.nan):.3f}, twin at N {s.get('twin_cached_share', math.nan):.3f} "
                     f"against {s.get('cached_share', math.nan):.3f}")
    for r in result["rows"]:
        lines.append(f"{r['threshold']} {r['routing']:12} {r['metric']:5} predicted {100 * r['predicted']:6.2f} % "
                     f"[{100 * r['low']:6.2f}, {100 * r['high']:6.2f}] measured {100 * r['measured']:6.2f} %  "
                     f"cached {100 * r['cached_predicted']:.1f} % against {100 * (r['cached_measured'] or math.nan):.1f} %"
                     f"{'  flagged' if r['flagged'] else ''}")
    return "\n".join(lines)

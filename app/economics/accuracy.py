"""Accuracy of the scenario predictions against simulated truth (the README's error table).

The simulator writes the N0 export of a day (the bundled sample's seed and fleet); the economics are
fitted on that export alone. Each scenario's truth is the SAME arrival trace replayed by the
simulator at the scenario's replica count, traffic multiplier and context multiplier.

    python -m app.economics.accuracy [--seeds 3] [--format markdown|json]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from app.economics import scenarios as sc
from app.promise import Promise
from app.simulator import FleetConfig, generate_trace, run_scenario, scenario_trace, simulate_day, true_shares
from app.simulator.sample import PROMISES
from app.store import Workspace

SEED, N0, HOURS = 7, 4, 24.0
SERVED = {"interactive": "llama-3.1-8b-interactive", "batch": "llama-3.1-8b-batch"}
FULL_GRID = [(n, 1.0, 1.0) for n in (N0 - 1, N0, N0 + 1, N0 + 2, 2 * N0)] + [
    (N0, 0.5, 1.0), (N0, 1.5, 1.0), (N0 + 2, 1.5, 1.0), (N0, 1.0, 1.5), (N0 + 2, 1.0, 1.5)]


def within_goal(predicted: float, truth: float) -> bool:
    """The issue's goal: within +-25 % relative or +-0.5 percentage point of the truth."""
    return abs(predicted - truth) <= max(0.25 * truth, 0.005)


def fit_on_export(seed: int = SEED, hours: float = HOURS) -> tuple[sc.Analysis, Any]:
    """Simulate the N0 export, fit the economics on it, and return the analysis and the base trace."""
    export = simulate_day(seed=seed, replicas=N0, hours=hours, scrape_interval_s=15.0)
    ws = Workspace(":memory:")
    report = ws.load_frame(export.metrics_frame, "n0-export")
    if report.status != "loaded":
        raise RuntimeError(f"the simulated export did not load: {report.errors}")
    promises = [Promise(path=SERVED[p], ttft_s=t, tpot_s=y) for p, (t, y) in PROMISES.items()]
    return sc.analyse(ws, [report.dataset_id], promises, ["model_name"]), generate_trace(seed, hours=hours)


def evaluate(analysis: sc.Analysis, trace: Any, replicas: int, traffic: float, context: float,
             seeds: int = 3, seed: int = SEED, hours: float = HOURS) -> list[dict[str, Any]]:
    """One scenario: the prediction and the simulated truth, per path."""
    start = pd.Timestamp(trace.origin + trace.warmup_s, unit="s", tz="UTC")
    records = run_scenario(scenario_trace(trace, traffic, context), replicas,
                           config=FleetConfig(scrape_interval_s=15.0), seed=seed)
    truth = true_shares(records, None, PROMISES, start=start, end=start + pd.Timedelta(hours=hours)).set_index("path")
    rows = []
    for p in sc.predict(analysis, replicas, traffic, context, seeds=seeds):
        name = next(k for k, v in SERVED.items() if v == p.path)
        t_ttft, t_joint = float(truth.loc[name, "ttft_share"]), float(truth.loc[name, "joint_share"])
        rows.append({
            "replicas": replicas, "traffic": traffic, "context": context, "path": name,
            "ttft_predicted": p.ttft_share, "ttft_true": t_ttft,
            "joint_predicted": p.breach_share, "joint_low": p.breach_share_low, "joint_high": p.breach_share_high,
            "joint_true": t_joint, "extrapolated": p.extrapolated,
            "meets_goal": (p.breach_share_low <= t_joint <= p.breach_share_high) if p.extrapolated
            else (within_goal(p.ttft_share, t_ttft) and within_goal(p.breach_share, t_joint)),
        })
    return rows


def run_grid(grid: Sequence[tuple[int, float, float]] = FULL_GRID, seeds: int = 3,
             progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    analysis, trace = fit_on_export()
    rows = []
    for n, g, m in grid:
        t = time.perf_counter()
        rows += evaluate(analysis, trace, n, g, m, seeds)
        if progress:
            progress(f"N'={n} g={g:g} m={m:g}: {time.perf_counter() - t:.0f} s")
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    out = ["| N' | traffic | context | path | TTFT predicted | TTFT true | joint predicted [interval] | joint true "
           "| flagged | goal met |", "|---:|---:|---:|---|---:|---:|---|---:|---|---|"]
    for r in frame.itertuples():
        out.append(f"| {r.replicas} | x{r.traffic:g} | x{r.context:g} | {r.path} | {100 * r.ttft_predicted:.2f} % | "
                   f"{100 * r.ttft_true:.2f} % | {100 * r.joint_predicted:.2f} % [{100 * r.joint_low:.2f}, "
                   f"{100 * r.joint_high:.2f}] | {100 * r.joint_true:.2f} % | {'yes' if r.extrapolated else ''} | "
                   f"{'yes' if r.meets_goal else 'NO'} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.economics.accuracy", description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    args = p.parse_args(argv)
    frame = run_grid(seeds=args.seeds, progress=lambda msg: sys.stderr.write(f"  {msg}\n"))
    text = frame.to_json(orient="records", indent=1) if args.format == "json" else markdown(frame)
    sys.stdout.write(text + "\n")
    return 0 if bool(frame["meets_goal"].all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

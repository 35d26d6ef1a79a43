"""Headroom fitted on the real engine's observed run, set against what the engine did in every run.

The fit sees only the observed run's export (as a user loads it) and the launch flags an operator
knows (``--given``); the truth of every scenario is the driver's per-request record of a real run at
that scenario. A row per scenario, promise and metric (TTFT, TPOT, joint): the prediction with its
interval and flag, the measured share, and whether it meets the goal — unflagged within max(25 %
relative, 0.5 pp, the truth's own run-to-run spread), flagged with an interval that holds the truth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from app import load
from app.bench.realengine import truth as tr
from app.economics.model.capacity import Assumptions
from app.economics.predict import scenarios as sc
from app.promise.shares import Promise
from app.store import Workspace

REL_GOAL, ABS_GOAL = 0.25, 0.005
METRICS = ("ttft", "tpot", "joint")
EXPORTS = {"query_range": "export.json", "dump": "export.dump"}


@dataclass(frozen=True)
class Threshold:
    ttft_s: float
    tpot_s: float

    @property
    def label(self) -> str:
        return f"TTFT {self.ttft_s:g} s / TPOT {1e3 * self.tpot_s:g} ms"


# bucket bounds of vLLM's TTFT and per-request TPOT histograms: the observed shares there are exact
THRESHOLDS = (Threshold(1.0, 0.05), Threshold(2.5, 0.075), Threshold(5.0, 0.1))


def export_file(run_dir: Path, export: str) -> Path:
    """A run's export of this kind: as the run wrote it, or gzip-compressed as a fixture keeps it."""
    path = run_dir / EXPORTS[export]
    return path if path.exists() else path.with_name(path.name + ".gz")


def requests_file(run_dir: Path) -> Path:
    path = run_dir / "requests.jsonl"
    return path if path.exists() else run_dir / "requests.csv.gz"


def run_meta(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def scenario_of(run_dir: Path) -> tuple[int, float, float]:
    s = run_meta(run_dir)["spec"]
    return int(s["replicas"]), float(s["traffic"]), float(s["context"])


def fit(run_dir: Path, threshold: Threshold, path: str, given: dict[str, Any], export: str = "query_range",
        seeds: int = 3, progress: Callable[[str], None] | None = None) -> sc.Analysis:
    """The economics fitted on the observed run's export alone (and ``given`` launch flags)."""
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, export_file(run_dir, export))
        if report.status != "loaded":
            raise RuntimeError(f"{export_file(run_dir, export)} did not load: {report.errors}")
        promise = Promise(path=path, ttft_s=threshold.ttft_s, tpot_s=threshold.tpot_s)
        return sc.analyse(ws, [report.dataset_id], [promise], ["model_name"], Assumptions(**given),
                          observed_replicas=scenario_of(run_dir)[0], seeds=seeds, progress=progress)


def truth_of(runs: Sequence[Path], threshold: Threshold) -> dict[str, Any]:
    """The measured shares of a scenario: the mean over its runs, and their spread (max - min)."""
    per_run = [tr.shares(tr.read(requests_file(r)), threshold.ttft_s, threshold.tpot_s) for r in runs]
    out: dict[str, Any] = {"runs": len(per_run), "requests": float(np.mean([s["requests"] for s in per_run]))}
    for m in METRICS:
        values = [s[m] for s in per_run]
        out[m] = float(np.mean(values))
        out[f"{m}_runs"] = values
        out[f"{m}_spread"] = float(max(values) - min(values)) if len(values) > 1 else None
    return out


def within(predicted: float, measured: float, noise: float) -> bool:
    return abs(predicted - measured) <= max(REL_GOAL * measured, ABS_GOAL, noise)


def _interval(p: sc.Prediction, metric: str) -> tuple[float, float]:
    if metric == "joint":
        return p.breach_share_low, p.breach_share_high
    return getattr(p, f"{metric}_share_low"), getattr(p, f"{metric}_share_high")


def rows(analysis: sc.Analysis, predictions: Sequence[sc.Prediction], truths: dict[tuple, dict[str, Any]],
         threshold: Threshold, noise: dict[str, float]) -> list[dict[str, Any]]:
    """One row per scenario and metric; ``noise``: per metric, the relative spread of the truth over
    repeated runs of the observed scenario (applied to every scenario's measured share)."""
    out = []
    for p in predictions:
        t = truths[(p.replicas, p.traffic, p.context)]
        for m in METRICS:
            pred = p.breach_share if m == "joint" else getattr(p, f"{m}_share")
            low, high = _interval(p, m)
            measured = t[m]
            spread = t.get(f"{m}_spread")
            tol_noise = spread if spread is not None else noise.get(m, 0.0) * measured
            holds = low - 1e-12 <= measured <= high + 1e-12
            meets = holds if p.flagged else within(pred, measured, tol_noise)
            out.append({"threshold": threshold.label, "ttft_s": threshold.ttft_s, "tpot_s": threshold.tpot_s,
                        "replicas": p.replicas, "traffic": p.traffic, "context": p.context, "path": p.path,
                        "metric": m, "predicted": pred, "low": low, "high": high, "measured": measured,
                        "measured_runs": t[f"{m}_runs"], "noise": tol_noise, "flagged": p.flagged,
                        "flags": p.flags, "interval_holds": holds, "meets_goal": meets,
                        "requests_measured": t["requests"], "requests_predicted": p.requests})
    return out


def residual_of(analysis: sc.Analysis) -> dict[str, Any]:
    return {path: {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in err.as_json().items()}
            for path, err in analysis.residuals.items()}


def model_of(analysis: sc.Analysis) -> dict[str, Any]:
    m = analysis.model
    return {"step_base_ms": 1e3 * m.step_base_s, "step_per_seq_ms": 1e3 * m.step_per_seq_s,
            "step_per_seq_sq_us": 1e6 * m.step_per_seq_sq_s, "step_per_seq_sq_until": m.step_per_seq_sq_until,
            "step_per_prefill_token_ms": 1e3 * m.step_per_prefill_token_s,
            "step_per_prefill_pair_ns": 1e9 * m.step_per_prefill_pair_s,
            "tpot_scale": m.assumptions.tpot_scale, "prefill_scale": m.assumptions.prefill_scale,
            "kv_tokens": m.kv_tokens, "max_num_seqs": m.max_num_seqs,
            "max_num_batched_tokens": m.max_num_batched_tokens, "router": m.router,
            "sources": {k: f"{s.kind}: {s.detail}" for k, s in m.sources.items()},
            "flags": list(m.flags), "step_basis": m.step_basis,
            "analysis_flags": [f.message for f in analysis.flags]}


def _steps(run_dir: Path) -> pd.DataFrame | None:
    """Every replica's per-step log of a run, one frame (None: the run kept none)."""
    frames = [pd.read_csv(f) for f in sorted(run_dir.glob("steps-*.csv")) if f.stat().st_size]
    return pd.concat(frames) if frames else None


def step_truth(run_dir: Path) -> dict[str, float]:
    """The engine's own step law, least squares on its per-step log: ms = a + b x decoding requests +
    c x prefill tokens (steps of the run only)."""
    d = _steps(run_dir)
    if d is None:
        return {}
    x = np.column_stack([np.ones(len(d)), d["decode_requests"], d["prefill_tokens"]])
    coef, *_ = np.linalg.lstsq(x, d["elapsed_ms"].to_numpy(float), rcond=None)
    return {"base_ms": float(coef[0]), "per_seq_ms": float(coef[1]), "per_prefill_token_ms": float(coef[2]),
            "steps": int(len(d)), "max_prefill_tokens": int(d["prefill_tokens"].max())}


# a truth run whose engine stepped more than this much slower or faster than the observed run's, on the
# same kind of steps, measured the machine (another job, the host's neighbours), not the scenario
SPEED_TOL = 0.10


def engine_speed(run_dir: Path, law: dict[str, float]) -> float | None:
    """How long the run's engine took for its steps against what ``law`` (another run's
    :func:`step_truth`) gives for the same steps: the sum of the elapsed times over the sum of the law's
    (1: the same engine speed; 1.5: every step half as long again). None without a step log or a law."""
    d = _steps(run_dir)
    if d is None or not law:
        return None
    expected = (law["base_ms"] + law["per_seq_ms"] * d["decode_requests"].to_numpy(float)
                + law["per_prefill_token_ms"] * d["prefill_tokens"].to_numpy(float)).sum()
    return float(d["elapsed_ms"].sum() / expected) if expected > 0 else None


def disturbed(speed: float | None) -> bool:
    """A run's engine speed (:func:`engine_speed`) too far from the observed run's to be its truth."""
    return speed is not None and abs(speed - 1.0) > SPEED_TOL


def cached_share(run_dir: Path) -> float | None:
    """The share of prompt tokens the engines' prefix caches served over a run, from each replica's
    own counters scraped at its end (``vllm:prompt_tokens_cached_total`` over ``prompt_tokens_total``,
    summed over replicas; the warm-up's few requests included). None where no capture has them."""
    cached = prompt = 0.0
    for f in sorted(run_dir.glob("metrics*.prom")):
        for line in f.read_text().splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in ("vllm:prompt_tokens_cached_total", "vllm:prompt_tokens_total"):
                value = float(line.rsplit(" ", 1)[1])
                if name == "vllm:prompt_tokens_total":
                    prompt += value
                else:
                    cached += value
    return cached / prompt if prompt > 0 else None

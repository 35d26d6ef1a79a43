"""The Capacity model page's logic: the fitted replica model with each parameter's source, the
model's error at the observed fleet size, and the load axis of the empirical cross-check."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from app.economics.decide.inputs import ScenarioInputs
from app.economics.model.capacity import parameter_value
from app.ui import economics as economics_view
from app.ui.units import ms, pct

MODEL_ROWS = (
    ("step_base_s", "step time: base", 1e3, "ms per step"),
    ("step_per_seq_s", "step time: per decoding sequence", 1e6, "µs per sequence"),
    ("step_per_seq_sq_s", "step time: per decoding sequence squared", 1e9, "ns per sequence²"),
    ("step_per_prefill_token_s", "step time: per prefill token", 1e6, "µs per token"),
    ("step_per_context_token_s", "step time: per context token read", 1e9, "ns per token"),
    ("step_per_prefill_pair_s", "step time: per prefill attention pair", 1e9, "ns per pair"),
    ("tpot_scale", "calibration: decode step time ×", 1.0, "factor"),
    ("prefill_scale", "calibration: prefill time ×", 1.0, "factor"),
    ("frontend_s", "API server's part of TTFT", 1e3, "ms"),
    ("prefix_cache", "prompt tokens served from the prefix cache", 100.0, "%"),
    ("kv_tokens", "KV capacity", 1.0, "tokens"),
    ("max_num_seqs", "max_num_seqs", 1.0, "sequences"),
    ("max_num_batched_tokens", "max_num_batched_tokens", 1.0, "tokens per step"),
    ("max_model_len", "max_model_len", 1.0, "tokens"),
    ("block_size", "KV block size", 1.0, "tokens"),
)


def model_table(model: Any) -> pd.DataFrame:
    """The fitted replica model as (quantity, value, unit, source, how) rows: each parameter with where
    it came from (given, engine config, fitted, calibrated, assumed)."""

    rows = []
    for name, label, scale, unit in MODEL_ROWS:
        src = model.sources.get(name)
        rows.append((label, scale * float(parameter_value(model, name)), unit, src.kind if src else "",
                     src.detail if src else ""))
    rows.append(("router", math.nan, model.router, model.sources["router"].kind if "router" in model.sources
                 else "", model.sources["router"].detail if "router" in model.sources else ""))
    rows.append(("prefill throughput", model.prefill_tokens_per_s, "tokens per second", "fitted", "1 / (per prefill "
                 "token × prefill calibration)"))
    rows += [(f"step time at batch {b}", 1e3 * model.step_time(b, 0, 0), "ms", "fitted", "the calibrated law")
             for b in (1, 8, 32, 64, 128)]
    return pd.DataFrame(rows, columns=["quantity", "value", "unit", "source", "how"])


def model_error_table(analysis: Any) -> pd.DataFrame:
    """Per path at the observed N: observed shares (histograms) against the calibrated twin's, the
    residuals (relative above 1 %, in units of 0.1 pp below) and the mean queue time."""
    obs = analysis.observed
    rows = []
    for path, err in analysis.residuals.items():
        rows.append({
            "path": path, "requests": obs.requests.get(path),
            "observed TTFT %": pct(obs.ttft.get(path)), "twin TTFT %": pct(err.ttft_predicted),
            "observed TPOT %": pct(obs.tpot.get(path)), "twin TPOT %": pct(err.tpot_predicted),
            "observed joint low %": pct(obs.joint_low.get(path)),
            "observed joint high %": pct(obs.joint_high.get(path)),
            "twin joint %": pct(err.joint_predicted),
            "TTFT residual %": pct(err.ttft), "TPOT residual %": pct(err.tpot),
            # how far the draw alone may move the twin's share from the observed (2 standard deviations)
            "TTFT noise ± %": pct(err.ttft_noise), "TPOT noise ± %": pct(err.tpot_noise),
            "observed queue ms": ms(err.queue_mean_s_observed),
            "twin queue ms": ms(err.queue_mean_s_predicted),
            "flagged": any(f.path == path for f in analysis.flags),
        })
    return pd.DataFrame(rows)


def model_flags(analysis: Any) -> list[str]:
    """Every flag of the analysis in words (the same the CLI prints)."""
    return [f"{f.path or 'every path'}: {f.message}" for f in analysis.flags]


def path_load(requests: pd.DataFrame, window_s: int, path: str) -> pd.DataFrame:
    """Per window: the path's requests, the replicas reporting (any path) and the path's per-replica load
    (req/s) — the load axis of ``crosscheck.load_response``."""
    replicas = requests.groupby("window_start")["replicas"].max()
    own = requests[requests["path"] == path].set_index("window_start")["requests"]
    frame = pd.DataFrame({"requests": own, "replicas": replicas.reindex(own.index)})
    frame = frame[(frame["replicas"] > 0) & (frame["requests"] > 0)]
    frame["load"] = frame["requests"] / window_s / frame["replicas"]
    return frame.reset_index()


def scenario_load(load: pd.DataFrame, replicas: int, traffic: float = 1.0) -> float:
    """A scenario's place on the load axis: the request-weighted mean per-replica load with N' replicas
    and traffic x g (each window's load x · N_w · g / N')."""
    n = load["requests"].to_numpy(float)
    x = (load["load"] * load["replicas"] * traffic / replicas).to_numpy(float)
    return float((n * x).sum() / n.sum())


def load_axis(cross_check: Mapping[str, Any], path: str, predictions: Sequence[Any], load: pd.DataFrame,
              traffic: float = 1.0, context: float = 1.0) -> dict[str, pd.DataFrame]:
    """The curve of ``path`` (``crosscheck.load_response``: isotonic fits of the per-window joint share's
    low and high ends), its readings and the capacity model's predictions, on one load axis (``load``:
    ``path_load`` of the same path)."""
    entry = cross_check[path]
    readings = [r for r in entry["readings"] if r["traffic"] == traffic]
    model = [p for p in predictions if p.path == path and (p.traffic, p.context) == (traffic, context)]
    return {
        "curve": pd.DataFrame(entry["curve"], columns=["load", "share_low", "share_high"]),
        "range": tuple(entry["observed_load_range"]),
        "readings": pd.DataFrame([{**r, "load": scenario_load(load, r["replicas"], traffic)} for r in readings],
                                 columns=["replicas", "load", "share", "share_low", "share_high", "extrapolated"]),
        "model": pd.DataFrame([{"replicas": p.replicas, "load": scenario_load(load, p.replicas, traffic),
                                "share": p.breach_share, "share_low": p.breach_share_low,
                                "share_high": p.breach_share_high, "extrapolated": p.extrapolated} for p in model],
                              columns=["replicas", "load", "share", "share_low", "share_high", "extrapolated"]),
    }



def inputs_on_open(form: Mapping[str, Any], datasets: pd.DataFrame, cube_datasets: Sequence[int],
                   labels: Sequence[str], rules: Sequence[tuple[str, str]],
                   promises: Mapping[str, Mapping[str, Any]]) -> ScenarioInputs:
    """The Economics form's inputs (``economics_inputs``) as the page would run them: its datasets, or the
    default ones among the cube's (``default_datasets``); a bad stored form falls back to the defaults."""
    chosen = [int(i) for i in form.get("datasets") or [] if int(i) in set(datasets["dataset_id"].astype(int))]
    form = {**form, "datasets": chosen or economics_view.default_datasets(
        datasets[datasets["dataset_id"].isin(list(cube_datasets))])}
    try:
        return economics_view.scenario_inputs(form, labels, rules, promises)
    except ValueError:
        return economics_view.scenario_inputs({**economics_view.ECON_DEFAULTS, "datasets": form["datasets"]},
                                              labels, rules, promises)

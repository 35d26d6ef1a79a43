"""The Capacity model page's logic: the fitted replica model with each parameter's source, the
model's error at the observed fleet size, the prefix cache per path (the share read from the export and
the split the twin replays), and the load axis of the empirical cross-check."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from app.economics.decide import decision
from app.economics.decide.inputs import ScenarioInputs
from app.economics.model.capacity import parameter_value
from app.economics.model.demand import DEFAULT_THINK_S, DEMAND_WINDOW_S
from app.escape import md
from app.ui import economics as economics_view
from app.ui.units import ms, pct

MODEL_ROWS = (
    ("step_base_s", "step time: base", 1e3, "ms per step"),
    ("step_per_seq_s", "step time: per decoding sequence", 1e6, "µs per sequence"),
    ("step_per_seq_sq_s", "step time: per decoding sequence squared", 1e9, "ns per sequence²"),
    ("step_per_seq_sq_until", "step time: squared term up to a batch of (then linear)", 1.0, "sequences"),
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


CACHED_SHARE_WINDOW_S = DEMAND_WINDOW_S  # the chart's window: the demand's own at scrapes of 15 s and more
# where each prefix-cache assumption is set: the CLI flag (the Economics page's "Engine facts and
# assumptions" holds the same fields)
PREFIX_FLAGS = {"case": "--prefix-cache", "conversation": "--conversation-share", "think": "--think-time"}


def prefix_cache_paths(totals: pd.DataFrame, paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The analysed ``paths`` split by whether the export has a prefix-cache counter for them
    (``cached_share_totals``' rows): (read, without counter)."""
    read = set(totals.loc[totals["windows"] > 0, "path"]) if len(totals) else set()
    return [p for p in paths if p in read], [p for p in paths if p not in read]


def no_counter_statement(paths: Sequence[str], every_path: bool) -> str:
    """What the export lacks for ``paths`` and what the fit assumed instead (Markdown; names escaped)."""
    names = ", ".join(f"**{md(p)}**" for p in paths)
    text = (f"**No prefix-cache counter** for {names} in the export: neither `vllm:prefix_cache_queries_total` "
            "and `vllm:prefix_cache_hits_total` (vLLM V1 0.9.2+; `vllm:gpu_prefix_cache_*` before 0.12) nor "
            "`vllm:prompt_tokens_cached_total` (0.16+). The fit **assumed no prefix caching**: every prompt token "
            "counts as computed, so the hits a cache had, if any, are absorbed into the fitted prefill rate (a "
            "faster prefill per token than the engine's), and the twin caches nothing (no shared prefix, no "
            "conversations).")
    if every_path:
        text += " What prefix-aware routing is worth cannot be priced without these counters."
    return text


def prefix_cache_totals_table(totals: pd.DataFrame, paths: Sequence[str]) -> pd.DataFrame:
    """The share over the range per path of ``paths`` (``cached_share_totals``), as the page shows it."""
    t = totals.set_index("path").loc[list(paths)].reset_index()
    return pd.DataFrame({
        "path": t["path"], "prompt tokens": t["prompt_tokens"], "cached tokens": t["cached_tokens"],
        "cached %": 100 * t["cached_share"], "lookups": t["queries"], "hits": t["hits"],
        "hit rate %": 100 * t["hit_rate"], "windows read": t["windows"],
    })


def _cached_counter(totals: pd.DataFrame, path: str) -> str:
    """The counter a path's cached tokens were read from (the demand's: the local cache's hits first)."""
    row = totals[totals["path"] == path]
    hits = len(row) and pd.notna(row["hits"].iloc[0])
    return "vllm:prefix_cache_hits_total" if hits else "vllm:prompt_tokens_cached_total"


# how the twin sends the follow-ups (app.engine.closed), said beside the think time
CLOSED_LOOP = (f"; each later turn is sent that long after the twin's answer to the turn before it "
               f"{decision.CLOSED_LOOP}, so where the answers are late at N' so are the next turns")


def prefix_split_table(analysis: Any, totals: pd.DataFrame) -> pd.DataFrame:
    """Per path whose export shows the prefix cache: the share the fit read, and what the twin replays it
    as (``PathDemand.prefix``: the shared prefix and the conversation history, the follow-up probability
    and the think time), each with its source (read, given, assumed, fitted) and the CLI flag that sets
    it. Values in their unit (tokens, %, s)."""
    model = analysis.model
    case = model.assumptions.prefix_cache or "conversation"
    block = model.block_size
    rows: list[tuple[str, str, float, str, str, str, str]] = []
    for p in analysis.demand.paths:
        if not math.isfinite(p.cached_share):
            continue  # no counter: the page says so beside the chart
        name, s = p.name, p.prefix
        rows.append((name, "prompt tokens served from the cache at the observed N", 100 * p.cached_share,
                     "% of prompt tokens", "read", f"{_cached_counter(totals, name)} over vllm:prompt_tokens_total, "
                     "over the range the fit reads: the share the twin at the observed N is fitted to serve",
                     f"{PREFIX_FLAGS['case']} off"))
        if case == "off":
            rows.append((name, "the twin's prefix cache", math.nan, "off", "given", "every prompt token computed in "
                         "every scenario: what the cache is worth", PREFIX_FLAGS["case"]))
            continue
        if not p.cached_share > 0:
            rows.append((name, "shared prefix and conversation history", math.nan, "none", "read",
                         "the cache served no prompt token: nothing to split", ""))
            continue
        if s is None:
            how = ("the whole observed share is a prefix every request starts with, as long as it must be (whole KV "
                   "blocks) for the drawn prompts: the same hit rate at any N' and under any router; no conversations"
                   if case == "shared" else f"not replayed: {model.sources['prefix_cache'].detail}")
            rows.append((name, "shared prefix's part of the cached tokens", 100.0 if case == "shared" else math.nan,
                         "% of the cached tokens", "given" if case == "shared" else "", how, PREFIX_FLAGS["case"]))
            continue
        kind, flag = s.conversation_source, PREFIX_FLAGS["conversation"]
        how_size = ("the longest that the path's short prompts (1 % quantile) allow" if kind == "assumed"
                    else "what the given conversation share leaves")
        rows += [
            (name, "shared prefix (every request starts with it)", float(s.shared_tokens), "tokens", kind,
             f"{how_size}; each request holds it up to its prompt less one token, in whole KV blocks of {block}", flag),
            (name, "served by the shared prefix", 100 * s.shared_share, "% of prompt tokens", kind,
             "the same at any N' and under any router (each replica caches it once)", flag),
            (name, "conversation history", 100 * s.conversation_share, "% of the cached tokens", kind,
             s.conversation_detail, flag),
        ]
        if not s.conversations:
            rows.append((name, "follow-up probability", 0.0, "% of turns followed by another", kind,
                         "no conversation history: no follow-up turns", flag))
        else:
            f = s.followup_share
            think = {"fitted": "of the think times at which the twin at the observed N serves the observed share, "
                               "the one whose computed prompt tokens per minute follow the export's closest",
                     "bound": f"halved from {DEFAULT_THINK_S:g} s until the twin at the observed N held enough "
                              "history: the next turn comes at most this long after an answer, on average",
                     "given": "as given",
                     "assumed": f"{DEFAULT_THINK_S:g} s, a person reading an answer and writing the next (the metrics "
                                "do not show it); the twin at the observed N serves the observed share with it"}
            rows += [
                (name, "follow-up probability", 100 * f, "% of turns followed by another", "fitted",
                 s.followup_source, "none (fitted)"),
                (name, "turns per conversation", 1 / (1 - f) if f < 1 else math.nan, "turns (mean)", "fitted",
                 "1 / (1 − follow-up probability)" if f < 1 else "every request that can continue a conversation does",
                 ""),
                (name, "think time", s.think_s, "s (mean, exponential)", decision.THINK_SOURCES.get(s.think_source, s.think_source),
                 think.get(s.think_source, "") + CLOSED_LOOP, PREFIX_FLAGS["think"]),
            ]
        if math.isfinite(s.twin_cached_share):
            rows.append((name, "served by the twin at the observed N (the check)", 100 * s.twin_cached_share,
                         "% of prompt tokens", "twin replay", f"the twin replaying the observed demand at "
                         f"N = {analysis.observed.replicas} under {model.router}, against {100 * p.cached_share:.1f} % "
                         "read", ""))
    columns = ["path", "quantity", "value", "unit", "source", "how", "CLI flag"]
    # the flag before the long "how", so that it shows without scrolling the table
    return pd.DataFrame(rows, columns=columns)[["path", "quantity", "value", "unit", "source", "CLI flag", "how"]]


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

"""The fleet's Prometheus series, scraped on the grid: a long-format frame (metric, labels, ts, value).

Every replica is one vLLM V1 engine (``engine="0"``) scraped as ``instance="10.0.0.<k>:8000",
job="vllm"``. How paths appear: vLLM labels every series of an engine with its one served model
name, so a real engine shared by two paths could not tell them apart. The simulation splits
*request-level* series (request histograms, ``request_success``, prompt/generation token counters,
inter-token latency) by ``model_name`` = the path's served name (``llama-3.1-8b-interactive``,
``llama-3.1-8b-batch``) — as two served names of one deployment would — while *engine-level*
series (running, waiting, KV usage, preemptions, tokens per step) carry the base model
(``llama-3.1-8b``) because they describe the shared engine, and ``cache_config_info`` carries no
``model_name`` (as in vLLM).

A histogram is observed when vLLM observes it: TTFT at the first token, ITL at every decode step,
the others at finish. A scrape at grid time t holds everything observed in (process ready, t]:
cumulative buckets, ``+Inf`` = ``_count``, ``_sum``, and ``_created`` = when the engine became
ready. Per-request histograms are built from the records (so the two agree by construction); step
observations come from the replica's per-grid counters. Every replica is scraped on the same grid
(multiples of the scrape interval, no per-target offset or jitter): a simplification that makes a
window's histogram increase hold exactly the requests observed in it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd

from app.engine.fleet import FleetRun
from app.engine.metrics_catalog import (
    FINISH_HISTOGRAMS,
    FINISHED_REASONS,
    ITERATION_TOKEN_BUCKETS,
    ITERATION_TOKENS,
    ITL,
    ITL_BUCKETS,
    OPTIONAL_FAMILIES,
    PREEMPTION_BUCKETS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    PROMPT_TOKEN_SOURCES,
    PROMPT_TOKENS_BY_SOURCE,
    PROMPT_TOKENS_CACHED,
    REQUEST_LATENCY_BUCKETS,
    TTFT,
    TTFT_BUCKETS,
    go_float,
    request_token_buckets,
)
from app.engine.outcomes import run_arrays

COLUMNS = ["metric", "labels", "ts", "value"]


def instance_of(replica: int) -> str:
    return f"10.0.0.{replica + 1}:8000"


def _labels(d: dict[str, str]) -> str:
    return json.dumps(d, sort_keys=True)


class _Series:
    """Collects (metric, labels, values over the emitted scrapes) of one replica."""

    def __init__(self, emitted: np.ndarray, epoch_starts: list[int], created: np.ndarray):
        self.idx = emitted
        self.starts = epoch_starts
        self.created = created  # per emitted scrape, Unix seconds
        self.rows: list[tuple[str, str, np.ndarray]] = []

    def cumulate(self, per_grid: np.ndarray) -> np.ndarray:
        """Increments per grid index -> cumulative value per emitted scrape, restarting at 0 at each
        new process (observations of a dead process's last interval are lost with it)."""
        c = np.cumsum(per_grid, axis=0, dtype=float)
        for s in self.starts:
            c[s:] -= c[s - 1].copy()
        return c[self.idx]

    def add(self, metric: str, labels: dict[str, str], values: np.ndarray) -> None:
        self.rows.append((metric, _labels(labels), np.asarray(values, dtype=float)))

    def histogram(self, name: str, labels: dict[str, str], bounds: tuple[float, ...],
                  counts: np.ndarray, sums: np.ndarray) -> None:
        """``counts`` [grid, bucket] (last column: above the last bound), ``sums`` [grid]."""
        cum = np.cumsum(self.cumulate(counts), axis=1)
        for k, le in enumerate(bounds):
            self.add(f"{name}_bucket", {**labels, "le": go_float(le)}, cum[:, k])
        self.add(f"{name}_bucket", {**labels, "le": "+Inf"}, cum[:, -1])
        self.add(f"{name}_count", labels, cum[:, -1])
        self.add(f"{name}_sum", labels, self.cumulate(sums))
        self.add(f"{name}_created", labels, self.created)

    def counter(self, name: str, labels: dict[str, str], per_grid: np.ndarray) -> None:
        self.add(f"{name}_total", labels, self.cumulate(per_grid))
        self.add(f"{name}_created", labels, self.created)


def _observed(grid_index: np.ndarray, values: np.ndarray, bounds: tuple[float, ...], n_rows: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per-grid bucket counts and sums of observations."""
    nb = len(bounds) + 1
    b = np.searchsorted(np.asarray(bounds, dtype=float), values, side="left")  # v <= le
    counts = np.bincount(grid_index * nb + b, minlength=n_rows * nb).reshape(n_rows, nb)
    sums = np.bincount(grid_index, weights=values, minlength=n_rows)
    return counts, sums


def _prompt_sources(series: _Series, labels: dict[str, str], gi_first: np.ndarray, prompt: np.ndarray,
                    cached: np.ndarray, n_rows: int) -> None:
    """``prompt_tokens_cached`` and ``prompt_tokens_by_source`` of the requests whose first token came
    at ``gi_first``, as vLLM's ``PromptTokenStats`` counts them: computed = prompt - cached; a prompt hit
    whole but its last token (recomputed, since the engine needs one token to run) counts that token as
    a cache hit too, so local_compute + local_cache_hit is then the prompt + 1; no KV connector, so no
    external transfer."""
    cached = cached.astype(float)
    recomputed = (cached + 1 == prompt).astype(float)

    def per_grid(values: np.ndarray) -> np.ndarray:
        return np.bincount(gi_first, weights=values, minlength=n_rows)

    series.counter(PROMPT_TOKENS_CACHED, labels, per_grid(cached))
    by_source = {"local_compute": prompt - cached, "local_cache_hit": cached + recomputed,
                 "external_kv_transfer": np.zeros(len(prompt))}
    for source in PROMPT_TOKEN_SOURCES:
        series.counter(PROMPT_TOKENS_BY_SOURCE, {**labels, "source": source}, per_grid(by_source[source]))


def cache_config_labels(run: FleetRun) -> dict[str, str]:
    """``vllm:cache_config_info`` labels: the engine's CacheConfig fields as strings, plus ``engine``."""
    e = run.config.engine
    return {
        "block_size": str(e.block_size), "cache_dtype": "auto", "calculate_kv_scales": "False",
        "cpu_offload_gb": "0", "enable_prefix_caching": str(e.prefix_caching), "engine": "0",
        "gpu_memory_utilization": str(e.gpu_memory_utilization), "is_attention_free": "False",
        "num_cpu_blocks": "None", "num_gpu_blocks": str(e.num_gpu_blocks), "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256", "sliding_window": "None", "swap_space": "4",
    }


def build_metrics_frame(run: FleetRun, arrays: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """All scraped samples of the run: columns metric, labels (JSON object string, sorted keys), ts
    (UTC, ms), value. Rows are grouped by replica, then series, then time. ``arrays``: the run's
    :func:`~app.simulator.records.run_arrays`, when the caller has them already."""
    return next(metrics_frames(run, arrays, max_rows=None))


def metrics_frames(run: FleetRun, arrays: dict[str, np.ndarray] | None = None,
                   max_rows: int | None = None) -> Iterator[pd.DataFrame]:
    """The samples of :func:`build_metrics_frame` in consecutive pieces of whole replicas, each closed
    once it holds ``max_rows`` rows or more (None: one piece), so that a month of a fleet can be
    written without holding every sample at once. Each piece has its own categories; there is at
    least one (possibly empty) piece."""
    d = run_arrays(run) if arrays is None else arrays
    trace, cfg = run.trace, run.config
    dt = run.grid_dt
    n_rows = run.n_grid + 1  # + overflow row: observations after the last grid point
    latency = {"latency": REQUEST_LATENCY_BUCKETS, "itl": ITL_BUCKETS, "preemptions": PREEMPTION_BUCKETS,
               "tokens": request_token_buckets(cfg.engine.max_model_len)}

    dt_us = int(round(dt * 1_000_000))

    def grid_index(t_us: np.ndarray) -> np.ndarray:
        """Observation at t -> the first grid point at or after it (exact integer arithmetic)."""
        return np.clip(-(-t_us // dt_us), 0, run.n_grid).astype(np.int64)

    served = [p.served_name for p in trace.spec.paths]
    # the prefix cache's families, as an engine with it on exports them (with it off the simulator
    # writes none of them, so that the exports of a configuration without it stay as they were)
    caching = cfg.engine.prefix_caching
    metric_cat: dict[str, int] = {}
    label_cat: dict[str, int] = {}
    parts_m: list[np.ndarray] = []
    parts_l: list[np.ndarray] = []
    parts_ts: list[np.ndarray] = []
    parts_v: list[np.ndarray] = []
    rows = 0
    yielded = False
    for r in range(cfg.replicas):
        if max_rows is not None and rows >= max_rows:
            yield _frame(parts_m, parts_l, parts_ts, parts_v, metric_cat, label_cat)
            yielded = True
            metric_cat, label_cat = {}, {}
            parts_m, parts_l, parts_ts, parts_v = [], [], [], []
            rows = 0
        emitted = np.flatnonzero(run.scraped(r))
        if len(emitted) == 0:
            continue
        epochs = run.epochs[r]
        starts = [int(np.ceil(ep.created / dt - 1e-9)) for ep in epochs[1:]]
        which = np.searchsorted(np.asarray(starts, dtype=np.int64), emitted, side="right")
        created = np.array([trace.origin + ep.created for ep in epochs])[which]
        process_start = np.array([trace.origin + ep.process_start for ep in epochs])[which]
        series = _Series(emitted, starts, created)
        common = {"engine": "0", "instance": instance_of(r), "job": "vllm"}
        counters = run.counters[r]
        on_r = d["replica"] == r
        for p, name in enumerate(served):
            labels = {**common, "model_name": name}
            sel = on_r & (d["path"] == p)
            first = sel & d["has_first_token"]
            gi_first = grid_index(d["first_token_us"][first])
            series.histogram(TTFT, labels, TTFT_BUCKETS, *_observed(gi_first, d["ttft_s"][first], TTFT_BUCKETS,
                                                                     n_rows))
            series.histogram(ITL, labels, ITL_BUCKETS, counters.itl[:, p, :], counters.itl_sum[:, p])
            done = sel & d["finished"]
            gi_done = grid_index(d["finish_us"][done])
            for hist, family, column in FINISH_HISTOGRAMS:
                bounds = latency[family]
                series.histogram(hist, labels, bounds,
                                 *_observed(gi_done, d[column][done].astype(float), bounds, n_rows))
            reasons = d["reason"][done]
            for code, reason in enumerate(FINISHED_REASONS):
                per_grid = np.bincount(gi_done[reasons == code], minlength=n_rows)
                series.counter("vllm:request_success", {**labels, "finished_reason": reason}, per_grid)
            series.counter("vllm:prompt_tokens", labels,
                           np.bincount(gi_first, weights=d["prompt_tokens"][first].astype(float), minlength=n_rows))
            if caching:
                _prompt_sources(series, labels, gi_first, d["prompt_tokens"][first], d["cached_tokens"][first],
                                n_rows)
            series.counter("vllm:generation_tokens", labels, counters.gen_tokens[:, p])
        engine = {**common, "model_name": cfg.engine.model}
        series.add("vllm:num_requests_running", engine, counters.gauges[emitted, 0])
        series.add("vllm:num_requests_waiting", engine, counters.gauges[emitted, 1])
        series.add("vllm:kv_cache_usage_perc", engine, counters.gauges[emitted, 2])
        series.counter("vllm:num_preemptions", engine, counters.preemptions)
        if caching:
            series.counter(PREFIX_CACHE_QUERIES, engine, counters.prefix_queries)
            series.counter(PREFIX_CACHE_HITS, engine, counters.prefix_hits)
        series.histogram(ITERATION_TOKENS, engine, ITERATION_TOKEN_BUCKETS, counters.iter, counters.iter_sum)
        series.add("vllm:cache_config_info", {**cache_config_labels(run), "instance": instance_of(r), "job": "vllm"},
                   np.ones(len(emitted)))
        series.add("process_start_time_seconds", {"instance": instance_of(r), "job": "vllm"}, process_start)
        ts_ms = np.rint((trace.origin + emitted * dt) * 1000).astype(np.int64)
        for metric, labels_json, values in series.rows:
            parts_m.append(np.full(len(values), metric_cat.setdefault(metric, len(metric_cat)), dtype=np.int32))
            parts_l.append(np.full(len(values), label_cat.setdefault(labels_json, len(label_cat)), dtype=np.int32))
            parts_ts.append(ts_ms)
            parts_v.append(values)
            rows += len(values)
    if parts_v or not yielded:
        yield _frame(parts_m, parts_l, parts_ts, parts_v, metric_cat, label_cat)


def _frame(parts_m: list[np.ndarray], parts_l: list[np.ndarray], parts_ts: list[np.ndarray],
           parts_v: list[np.ndarray], metric_cat: dict[str, int], label_cat: dict[str, int]) -> pd.DataFrame:
    if not parts_v:
        return pd.DataFrame({c: [] for c in COLUMNS})
    return pd.DataFrame({
        "metric": pd.Categorical.from_codes(np.concatenate(parts_m), list(metric_cat)),
        "labels": pd.Categorical.from_codes(np.concatenate(parts_l), list(label_cat)),
        "ts": pd.to_datetime(np.concatenate(parts_ts), unit="ms", utc=True),
        "value": np.concatenate(parts_v),
    })


def minimal_export(frame: pd.DataFrame) -> pd.DataFrame:
    """The samples without ``OPTIONAL_FAMILIES`` (their ``_bucket``/``_count``/``_sum``/``_created``
    series included): what a user's minimal export of the same fleet holds."""
    names = frame["metric"].astype(str)
    family = names.str.replace(r"_(bucket|count|sum|created)$", "", regex=True)
    return frame[~(names.isin(OPTIONAL_FAMILIES) | family.isin(OPTIONAL_FAMILIES))].reset_index(drop=True)

"""Deterministic benchmark data: a vLLM V1 fleet's scraped series, written as long-format Parquet,
Prometheus text exposition or OpenMetrics, and a ready-made cube for the interaction benchmark.

The fleet is synthetic but has the shape of a real export (``data/sample`` has the same metric
names and labels): ``replicas`` engines, each serving every path (``model_name``), scraped every
``scrape_interval_s`` on a shared grid. Per replica and path: six histograms (TTFT, request TPOT,
E2E, queue time, prompt and generation length; each with buckets, ``_count``, ``_sum`` and
``_created``), the prompt/generation token counters and ``request_success_total`` by finished
reason (each with ``_created``); per replica the running/waiting/KV-usage gauges and the preemption
counter. What makes a cube build work for its money happens too:

- every replica restarts about once a day (all its counters restart from 0, ``_created`` moves,
  the replica is not scraped while it is down);
- Prometheus misses every target for a few scrapes about once a day (a scrape gap);
- a bucket reads one observation short at about one scrape in 20 000 (a momentarily non-monotone
  histogram, repaired by the cube's envelope);
- ``finished_reason="error"`` appears part-way through (a series that begins in the data: its first
  sample counts, from its ``_created``).

Every value is an integer or a multiple of 1/1024, so each sum the cube takes is exact in binary
floating point whatever order an engine adds in: two implementations of the cube can be compared
exactly. Rows are written series by series, each series in time order (as Prometheus exports are).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from app.engine.metrics_catalog import (
    FINISHED_REASONS,
    ITL_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    go_float,
    request_token_buckets,
)

START_S = 1_793_491_200  # 2026-11-01T00:00:00Z, an hour boundary
DAY_S = 86_400
TOKEN_BUCKETS = request_token_buckets(32768)
PATHS = ("llama-3.1-8b-interactive", "llama-3.1-8b-batch", "llama-3.1-70b-chat", "mistral-7b-rag",
         "qwen2.5-32b-code", "llama-3.1-8b-eval", "gemma-2-27b-summary", "llama-3.1-70b-agent",
         "phi-3.5-classify", "mixtral-8x7b-batch")

# (family, bounds, lognormal median and sigma of the observations, scale of the values)
HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", TTFT_BUCKETS, 0.35, 1.0),
    ("vllm:request_time_per_output_token_seconds", ITL_BUCKETS, 0.03, 0.5),
    ("vllm:e2e_request_latency_seconds", REQUEST_LATENCY_BUCKETS, 9.0, 0.8),
    ("vllm:request_queue_time_seconds", REQUEST_LATENCY_BUCKETS, 0.05, 1.6),
    ("vllm:request_prompt_tokens", TOKEN_BUCKETS, 900.0, 0.9),
    ("vllm:request_generation_tokens", TOKEN_BUCKETS, 280.0, 0.7),
)
REASON_SHARES = {"stop": 0.9, "length": 0.09, "abort": 0.008, "error": 0.002}
ERROR_APPEARS_AT = 0.3  # share of the span after which finished_reason="error" is first exported
RESTART_DOWN_SCRAPES = 8
GAP_SCRAPES = 12
REPAIR_RATE = 5e-5


@dataclass(frozen=True)
class FleetShape:
    """The fleet behind a generated export."""

    replicas: int = 8
    paths: tuple[str, ...] = PATHS[:2]
    scrape_interval_s: int = 15
    start_s: int = START_S
    requests_per_s: float = 3.0  # per replica and path, at the daily mean

    @property
    def series_per_path(self) -> int:
        hist = sum(len(bounds) + 1 + 3 for _, bounds, _, _ in HISTOGRAMS)
        return hist + 2 * 2 + 2 * len(FINISHED_REASONS)

    @property
    def series_per_replica(self) -> int:
        return len(self.paths) * self.series_per_path + 3 + 2

    @property
    def series(self) -> int:
        return self.replicas * self.series_per_replica

    def scrapes_for(self, samples: int) -> int:
        """Scrape-grid points so that the export holds about ``samples`` samples."""
        return max(8, round(samples / self.series))


@dataclass
class FleetInfo:
    """What was written: sizes and span (Unix seconds)."""

    paths: list[str]
    samples: int
    series: int
    scrapes: int
    start_s: int
    end_s: int
    restarts: int
    shape: FleetShape = field(repr=False, default_factory=FleetShape)

    @property
    def hours(self) -> float:
        return (self.end_s - self.start_s) / 3600


@dataclass
class _Events:
    """Per replica: restart scrape indices; for the fleet: scrape indices Prometheus missed."""

    restarts: list[list[int]]
    gaps: np.ndarray  # bool per grid index: not scraped by anyone
    error_from: int  # grid index from which finished_reason="error" exists


def _events(shape: FleetShape, n_grid: int, seed: int) -> _Events:
    rng = np.random.default_rng([seed, 1])
    per_day = DAY_S / shape.scrape_interval_s
    restarts = []
    for r in range(shape.replicas):
        n = rng.poisson(n_grid / per_day)
        if r == 0:
            n = max(n, 1)  # every export holds at least one restart
        lo, hi = 2, n_grid - RESTART_DOWN_SCRAPES - 2
        picks = sorted({int(x) for x in rng.integers(lo, max(lo + 1, hi), size=n)}) if hi > lo else []
        if r == 0 and picks == [] and hi > lo:
            picks = [int(0.4 * n_grid)]
        restarts.append(picks)
    gaps = np.zeros(n_grid, dtype=bool)
    for _ in range(int(rng.poisson(n_grid / per_day))):
        g0 = int(rng.integers(1, max(2, n_grid - GAP_SCRAPES)))
        gaps[g0:g0 + GAP_SCRAPES] = True
    gaps[0] = False
    return _Events(restarts=restarts, gaps=gaps, error_from=max(1, int(ERROR_APPEARS_AT * n_grid)))


def _diurnal(t_s: np.ndarray, peak_hour: float) -> np.ndarray:
    phase = 2 * math.pi * ((t_s % DAY_S) / 3600 - peak_hour) / 24
    return 1.0 + 0.45 * np.cos(phase)


def _dyadic(x: np.ndarray | float) -> np.ndarray:
    """Round to a multiple of 1/1024 (exact in binary floating point)."""
    return np.round(np.asarray(x, dtype=float) * 1024) / 1024


def _interval_probabilities(bounds: tuple[float, ...], median: float, sigma: float) -> np.ndarray:
    # scipy only here: the bench's worker processes measure their own peak RSS, and most never call this
    from scipy.stats import norm

    z = (np.log(np.asarray(bounds, dtype=float)) - math.log(median)) / sigma
    cdf = np.concatenate([norm.cdf(z), [1.0]])
    return np.diff(np.concatenate([[0.0], cdf]))


def _interval_values(bounds: tuple[float, ...]) -> np.ndarray:
    """A representative observation per bucket interval (its midpoint; 1.5 x the last bound above it)."""
    b = np.asarray(bounds, dtype=float)
    lower = np.concatenate([[0.0], b])
    upper = np.concatenate([b, [b[-1] * 2.0]])
    return _dyadic((lower + upper) / 2)


class _Replica:
    """Cumulative values of one replica on the grid: increments per grid index -> exported values."""

    def __init__(self, shape: FleetShape, n_grid: int, events: _Events, replica: int):
        self.shape = shape
        self.starts = events.restarts[replica]
        down = np.zeros(n_grid, dtype=bool)
        for s in self.starts:
            down[max(0, s - RESTART_DOWN_SCRAPES):s] = True
        self.emitted = np.flatnonzero(~down & ~events.gaps)
        grid_t = shape.start_s + np.arange(n_grid) * shape.scrape_interval_s
        # `_created` of each epoch: ready a few seconds before the first scrape that sees it
        epoch_created = [shape.start_s - 3 * 3600] + [int(grid_t[s]) - 7 for s in self.starts]
        which = np.searchsorted(np.asarray(self.starts, dtype=np.int64), self.emitted, side="right")
        self.created = np.asarray(epoch_created, dtype=float)[which]
        self.ts_ms = (grid_t[self.emitted] * 1000).astype(np.int64)
        self.grid_t = grid_t

    def cumulate(self, per_grid: np.ndarray) -> np.ndarray:
        """Increments per grid index (axis 0) -> cumulative values at the emitted scrapes; a restart
        loses what its dead process counted since the last scrape and starts again from 0."""
        c = np.cumsum(per_grid, axis=0, dtype=float)
        for s in self.starts:
            c[s:] -= c[s - 1].copy()
        return c[self.emitted]


def _replica_series(shape: FleetShape, n_grid: int, events: _Events, replica: int,
                    seed: int) -> Iterator[tuple[str, dict[str, str], np.ndarray, np.ndarray]]:
    """(metric, labels, ts_ms, values) of every series of one replica, in export order."""
    rng = np.random.default_rng([seed, 2, replica])
    rep = _Replica(shape, n_grid, events, replica)
    instance = f"10.0.0.{replica + 1}:8000"
    common = {"engine": "0", "instance": instance, "job": "vllm"}
    ts = rep.ts_ms
    for p, path in enumerate(shape.paths):
        labels = {**common, "model_name": path}
        rate = shape.requests_per_s * shape.scrape_interval_s * (1.0 if p % 2 == 0 else 0.4)
        lam = rate * _diurnal(rep.grid_t.astype(float), 15.0 if p % 2 == 0 else 11.0)
        requests = rng.poisson(lam)
        counts_by_family = {}
        for family, bounds, median, sigma in HISTOGRAMS:
            probs = _interval_probabilities(bounds, median * (1 + 0.1 * p), sigma)
            per_interval = rng.multinomial(requests, probs)  # [grid, interval]
            counts_by_family[family] = per_interval
            cum = np.cumsum(rep.cumulate(per_interval.astype(float)), axis=1)  # [emitted, bucket]
            n_rep = int(REPAIR_RATE * cum.size)
            if n_rep and cum.shape[0] > 2:
                # a bucket read one observation short: below its upper neighbour, not below its past
                rows = rng.integers(1, cum.shape[0], size=n_rep)
                cols = rng.integers(0, cum.shape[1] - 1, size=n_rep)
                ok = (cum[rows, cols] - 1 >= cum[rows - 1, cols]) & (cum[rows, cols] >= 1)
                cum[rows[ok], cols[ok]] -= 1
            sums = rep.cumulate(per_interval @ _interval_values(bounds))
            for j, bound in enumerate(bounds):
                yield f"{family}_bucket", {**labels, "le": go_float(bound)}, ts, cum[:, j]
            yield f"{family}_bucket", {**labels, "le": "+Inf"}, ts, cum[:, -1]
            yield f"{family}_count", labels, ts, cum[:, -1]
            yield f"{family}_sum", labels, ts, sums
            yield f"{family}_created", labels, ts, rep.created
        prompt = counts_by_family["vllm:request_prompt_tokens"] @ _interval_values(TOKEN_BUCKETS).round()
        generation = counts_by_family["vllm:request_generation_tokens"] @ _interval_values(TOKEN_BUCKETS).round()
        for name, per_grid in (("vllm:prompt_tokens", prompt), ("vllm:generation_tokens", generation)):
            yield f"{name}_total", labels, ts, rep.cumulate(per_grid)
            yield f"{name}_created", labels, ts, rep.created
        remaining = requests.copy()
        for k, reason in enumerate(FINISHED_REASONS):
            share = REASON_SHARES[reason] / sum(list(REASON_SHARES.values())[k:])
            part = remaining if k == len(FINISHED_REASONS) - 1 else rng.binomial(remaining, min(1.0, share))
            remaining = remaining - part
            values, created = rep.cumulate(part.astype(float)), rep.created
            keep = slice(None)
            if reason == "error":  # a label set that appears part-way: its first sample counts
                keep = rep.emitted >= events.error_from
                first_t = rep.grid_t[events.error_from] - 5
                values = rep.cumulate(np.where(np.arange(n_grid) >= events.error_from, part, 0).astype(float))
                created = np.maximum(created, first_t)
            rlabels = {**labels, "finished_reason": reason}
            yield "vllm:request_success_total", rlabels, ts[keep], values[keep]
            yield "vllm:request_success_created", rlabels, ts[keep], created[keep]
    engine = {**common, "model_name": shape.paths[0]}
    n = len(rep.emitted)
    yield "vllm:num_requests_running", engine, ts, rng.poisson(24, size=n).astype(float)
    yield "vllm:num_requests_waiting", engine, ts, np.maximum(rng.poisson(2, size=n) - 1, 0).astype(float)
    yield "vllm:kv_cache_usage_perc", engine, ts, _dyadic(rng.beta(4, 3, size=n))
    yield "vllm:num_preemptions_total", engine, ts, rep.cumulate(rng.poisson(0.2, size=n_grid).astype(float))
    yield "vllm:num_preemptions_created", engine, ts, rep.created


def fleet_series(samples: int, seed: int = 7, shape: FleetShape | None = None
                 ) -> Iterator[tuple[int, list[tuple[str, dict[str, str], np.ndarray, np.ndarray]]]]:
    """Per replica: (replica, [(metric, labels, ts_ms, values), ...])."""
    shape = shape or FleetShape()
    n_grid = shape.scrapes_for(samples)
    events = _events(shape, n_grid, seed)
    for r in range(shape.replicas):
        yield r, list(_replica_series(shape, n_grid, events, r, seed))


def _labels_json(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True)


def write_fleet_parquet(out_dir: str | Path, samples: int, files: int = 1, seed: int = 7,
                        shape: FleetShape | None = None, stem: str = "fleet") -> FleetInfo:
    """Write about ``samples`` samples of the fleet as long-format Parquet (timestamp, metric, labels
    JSON, value) into ``files`` consecutive exports (``<stem>-01.parquet``, ...: a week of samples as
    daily files, the way exports pile up); return what was written."""
    shape = shape or FleetShape()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_grid = shape.scrapes_for(samples)
    edges_ms = [(shape.start_s + (n_grid * k // files) * shape.scrape_interval_s) * 1000 for k in range(files)]
    edges_ms.append(2**62)
    paths = [out_dir / f"{stem}-{k + 1:02d}.parquet" for k in range(files)]
    schema = pa.schema([("timestamp", pa.timestamp("ms", tz="UTC")),
                        ("metric", pa.dictionary(pa.int32(), pa.string())),
                        ("labels", pa.dictionary(pa.int32(), pa.string())),
                        ("value", pa.float64())])
    writers = [pq.ParquetWriter(p, schema, compression="zstd", use_dictionary=["metric", "labels"]) for p in paths]
    total = n_series = 0
    t_min, t_max = math.inf, -math.inf
    try:
        for _, series in fleet_series(samples, seed, shape):
            n_series += len(series)
            for k, writer in enumerate(writers):
                part = []
                for metric, labels, ts, values in series:
                    lo, hi = np.searchsorted(ts, [edges_ms[k], edges_ms[k + 1]])
                    if hi > lo:
                        part.append((metric, _labels_json(labels), ts[lo:hi], values[lo:hi]))
                if not part:
                    continue
                metrics = sorted({m for m, _, _, _ in part})
                labelsets = sorted({lab for _, lab, _, _ in part})
                m_code = {m: i for i, m in enumerate(metrics)}
                l_code = {lab: i for i, lab in enumerate(labelsets)}
                sizes = [len(v) for _, _, _, v in part]
                table = pa.table({
                    "timestamp": pa.array(np.concatenate([t for _, _, t, _ in part]), type=pa.int64()).cast(
                        pa.timestamp("ms", tz="UTC")),
                    "metric": pa.DictionaryArray.from_arrays(
                        pa.array(np.repeat([m_code[m] for m, _, _, _ in part], sizes), type=pa.int32()), metrics),
                    "labels": pa.DictionaryArray.from_arrays(
                        pa.array(np.repeat([l_code[lab] for _, lab, _, _ in part], sizes), type=pa.int32()),
                        labelsets),
                    "value": pa.array(np.concatenate([v for _, _, _, v in part]), type=pa.float64()),
                }, schema=schema)
                writer.write_table(table, row_group_size=1 << 20)
                total += table.num_rows
                t_min = min(t_min, min(int(t[0]) for _, _, t, _ in part))
                t_max = max(t_max, max(int(t[-1]) for _, _, t, _ in part))
    finally:
        for writer in writers:
            writer.close()
    restarts = sum(len(r) for r in _events(shape, n_grid, seed).restarts)
    return FleetInfo(paths=[str(p) for p in paths], samples=total, series=n_series, scrapes=n_grid,
                     start_s=int(t_min // 1000), end_s=int(t_max // 1000), restarts=restarts, shape=shape)


# -- text formats ------------------------------------------------------------------------------------
def _family_of(metric: str) -> tuple[str, str]:
    """(family, type) of a generated sample name, as a vLLM /metrics page declares it."""
    for suffix in ("_bucket", "_count", "_sum"):
        if metric.endswith(suffix) and any(metric == f + suffix for f, _, _, _ in HISTOGRAMS):
            return metric[: -len(suffix)], "histogram"
    if metric.endswith("_total"):
        return metric[: -len("_total")], "counter"
    return metric, "gauge"


def _label_text(labels_json: str) -> str:
    labels = json.loads(labels_json)
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class TextInfo:
    """A written text exposition: its lines and the samples they hold."""

    path: str
    lines: int
    samples: int
    format: str


def write_exposition(parquet: str | Path, out: str | Path, openmetrics: bool = False) -> TextInfo:
    """Write the samples of a generated long-format Parquet as a text exposition with HELP/TYPE lines:
    Prometheus 0.0.4 (timestamps in ms, ``_created`` as its own gauge family, as prometheus_client
    exposes it) or OpenMetrics (timestamps in s, ``_created`` inside its counter/histogram family,
    ``# EOF``), each family's samples together, each series in time order. DuckDB writes the lines."""
    con = duckdb.connect()
    try:
        metrics = [r[0] for r in con.execute("select distinct metric from read_parquet($p)",
                                             {"p": str(parquet)}).fetchall()]
        labelsets = [r[0] for r in con.execute("select distinct labels from read_parquet($p)",
                                               {"p": str(parquet)}).fetchall()]
        fams = []
        for m in metrics:
            family, kind = _family_of(m)
            if m.endswith("_created"):
                base = m[: -len("_created")]
                hist = any(base == f for f, _, _, _ in HISTOGRAMS)
                family, kind = (base, "histogram" if hist else "counter") if openmetrics else (m, "gauge")
            fams.append((m, family, kind))
        con.execute("create temp table fams (metric varchar, family varchar, kind varchar)")
        con.executemany("insert into fams values (?, ?, ?)", fams)
        con.execute("create temp table labeltext (labels varchar, text varchar)")
        con.executemany("insert into labeltext values (?, ?)", [(s, _label_text(s)) for s in labelsets])
        stamp = "(epoch_ms(p.timestamp) / 1000)::varchar" if openmetrics else "epoch_ms(p.timestamp)::varchar"
        eof = "union all select '~', 9, null, null, '# EOF'" if openmetrics else ""
        con.execute(f"""
            copy (
                with families as (select distinct family, kind from fams)
                select line from (
                    select family, 0 as part, null::varchar as series, null::bigint as t,
                        '# HELP ' || family || ' generated by headroom bench' as line
                    from families
                    union all
                    select family, 1, null, null, '# TYPE ' || family || ' ' || kind from families
                    union all
                    select f.family, 2, p.metric || l.text, epoch_ms(p.timestamp),
                        p.metric || l.text || ' ' || p.value::varchar || ' ' || {stamp}
                    from read_parquet($p) as p
                    inner join fams as f using (metric)
                    inner join labeltext as l using (labels)
                    {eof}
                )
                order by family, part, series, t
            ) to '{_sql_path(out)}' (format csv, header false, quote '', escape '', delim '\\x01')
        """, {"p": str(parquet)})
        samples = con.execute("select count(*) from read_parquet($p)", {"p": str(parquet)}).fetchone()[0]
        n_fam = con.execute("select count(distinct family) from fams").fetchone()[0]
    finally:
        con.close()
    lines = samples + 2 * n_fam + (1 if openmetrics else 0)
    return TextInfo(path=str(out), lines=lines, samples=samples,
                    format="openmetrics" if openmetrics else "prometheus-text")


def _sql_path(path: str | Path) -> str:
    """A path for a COPY target (COPY takes no parameters): our own file names, quotes doubled."""
    return str(path).replace("'", "''")


# -- a cube for the interaction benchmark -----------------------------------------------------------
CUBE_HISTOGRAMS = (
    ("ttft", TTFT_BUCKETS, 0.35, 1.0),
    ("tpot", ITL_BUCKETS, 0.03, 0.5),
    ("itl", ITL_BUCKETS, 0.028, 0.45),
    ("e2e", REQUEST_LATENCY_BUCKETS, 9.0, 0.8),
    ("queue", REQUEST_LATENCY_BUCKETS, 0.05, 1.6),
    ("prefill", REQUEST_LATENCY_BUCKETS, 0.2, 0.9),
    ("decode", REQUEST_LATENCY_BUCKETS, 8.0, 0.8),
    ("prompt_tokens", TOKEN_BUCKETS, 900.0, 0.9),
    ("generation_tokens", TOKEN_BUCKETS, 280.0, 0.7),
)


def cube_rows(days: float, paths: int = 10, window_s: int = 300, seed: int = 7, replicas: int = 4) -> pa.Table:
    """The rows of a cube (the ``cube_rows`` columns after ``cube_id``) of ``paths`` paths over
    ``days``: what ``cube__build`` makes of a vLLM fleet's histograms, counters and gauges, generated
    per window directly (a 30-day export need not be simulated to time what happens after the cube)."""
    rng = np.random.default_rng([seed, 3])
    n_w = int(round(days * DAY_S / window_s))
    starts = (START_S + np.arange(n_w) * window_s).astype("datetime64[s]").astype("datetime64[us]")
    names: dict[str, dict[str | None, int]] = {"path": {}, "signal": {}, "stat": {}}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("window_start", "path", "signal", "le", "stat", "value")}

    def code(kind: str, text: str | None) -> int:
        return names[kind].setdefault(text, len(names[kind]))

    def add(path: str, signal: str | None, le: np.ndarray | float | None, stat: str, values: np.ndarray,
            window_idx: np.ndarray | None = None) -> None:
        idx = np.arange(n_w) if window_idx is None else window_idx
        n = len(values)
        cols["window_start"].append(starts[idx])
        for kind, text in (("path", path), ("signal", signal), ("stat", stat)):
            cols[kind].append(np.full(n, code(kind, text), dtype=np.int32))
        cols["le"].append(np.full(n, np.nan) if le is None else np.broadcast_to(le, n).astype(float))
        cols["value"].append(np.asarray(values, dtype=float))

    t = START_S + np.arange(n_w) * window_s
    for p in range(paths):
        name = PATHS[p % len(PATHS)] + ("" if p < len(PATHS) else f"-{p // len(PATHS)}")
        lam = (40 + 25 * (p % 3)) * window_s / 60 * _diurnal(t.astype(float), 9 + p)
        requests = rng.poisson(lam)
        for signal, bounds, median, sigma in CUBE_HISTOGRAMS:
            probs = _interval_probabilities(bounds, median * (1 + 0.05 * p), sigma)
            per = rng.multinomial(requests, probs)
            cum = np.cumsum(per, axis=1)
            les = np.concatenate([np.asarray(bounds, dtype=float), [np.inf]])
            w_idx = np.repeat(np.arange(n_w), len(les))
            add(name, signal, np.tile(les, n_w), "increase", cum.reshape(-1), w_idx)
            add(name, signal, None, "count", cum[:, -1])
            add(name, signal, None, "sum", per @ _interval_values(bounds))
        failed = rng.binomial(requests, 0.01)
        add(name, "requests", None, "increase", requests)
        add(name, "failed_requests", None, "increase", failed)
        add(name, "prompt_tokens_total", None, "increase", requests * 900.0)
        add(name, "generation_tokens_total", None, "increase", requests * 280.0)
        for gauge, centre in (("running", 24.0), ("waiting", 2.0), ("kv_usage", 0.55)):
            base = centre * _diurnal(t.astype(float), 9 + p)
            add(name, gauge, None, "min", base * 0.6)
            add(name, gauge, None, "mean", base)
            add(name, gauge, None, "max", base * 1.4)
        add(name, None, None, "replicas", np.full(n_w, float(replicas)))
    out = {}
    for k, v in cols.items():
        data = np.concatenate(v)
        if k in names:
            out[k] = pa.DictionaryArray.from_arrays(pa.array(data), pa.array(list(names[k]), type=pa.string()))
        elif k == "le":
            out[k] = pa.array(data, mask=np.isnan(data))
        else:
            out[k] = pa.array(data)
    return pa.table(out)

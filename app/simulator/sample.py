"""Top-level API: simulate a day, replay a trace at another fleet size, write the bundled sample."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from app.engine.config import NO_EVENTS, Events, FleetConfig, Restart, ScrapeGap
from app.engine.fleet import FleetRun, run_fleet
from app.engine.outcomes import run_arrays
from app.engine.trace import Burst, Trace, TrafficSpec
from app.simulator.metrics import build_metrics_frame, metrics_frames
from app.simulator.records import build_records, true_shares
from app.simulator.traffic import DEFAULT_DAY, generate_trace

PROMISES = {"interactive": (0.5, 0.05), "batch": (5.0, 0.1)}  # (TTFT s, TPOT s) per path
MAX_SAMPLE_BYTES = 20 * 1024 * 1024


@dataclass
class SimResult:
    """A simulated export: the scraped samples, the per-request records, and what produced them."""

    metrics_frame: pd.DataFrame  # metric, labels (JSON object string), ts (UTC), value
    records: pd.DataFrame
    config: dict[str, Any]
    run: FleetRun | None = field(default=None, repr=False)


def default_events(hours: float, replicas: int = 4) -> Events:
    """The bundled day's events: replica 2 (``10.0.0.3:8000``) crashes at 09:40 and is ready again
    4 min later; Prometheus stored nothing from 16:10 to 16:22. Shorter spans place them at 40 % and
    65 % of the span (down 4 min or 5 % of it, gap 12 min or 8 % of it, whichever is shorter). A
    one-replica fleet gets no restart (nothing would serve while it is down)."""
    span = hours * 3600.0
    replica = min(2, replicas - 1)
    if hours >= 24:
        restart = Restart(replica=replica, at_s=9 * 3600 + 40 * 60, down_s=240.0)
        gap = ScrapeGap(start_s=16 * 3600 + 10 * 60, duration_s=720.0)
    else:
        restart = Restart(replica=replica, at_s=0.4 * span, down_s=min(240.0, 0.05 * span))
        gap = ScrapeGap(start_s=0.65 * span, duration_s=min(720.0, 0.08 * span))
    return Events(restarts=(restart,) if replicas > 1 else (), scrape_gaps=(gap,))


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, tz=UTC).isoformat().replace("+00:00", "Z")


def describe(trace: Trace, config: FleetConfig, events: Events, seed: int, run: FleetRun | None) -> dict[str, Any]:
    """A JSON-able description of a simulation (written next to the sample)."""
    day0 = trace.origin + trace.warmup_s
    out: dict[str, Any] = {
        "seed": seed,
        "export_start": _iso(day0),
        "export_end": _iso(trace.origin + trace.duration_s),
        "warmup_s": trace.warmup_s,
        "requests": len(trace),
        "bursts": [{**asdict(b), "start": _iso(trace.origin + b.start_s)} for b in trace.bursts],
        "restarts": [{**asdict(r), "crash": _iso(day0 + r.at_s), "ready": _iso(day0 + r.at_s + r.down_s)}
                     for r in events.restarts],
        "scrape_gaps": [{**asdict(g), "start": _iso(day0 + g.start_s),
                         "end": _iso(day0 + g.start_s + g.duration_s)} for g in events.scrape_gaps],
        "fleet": config.as_dict(),
        "traffic": asdict(trace.spec),
    }
    if run is not None:
        out["sim_seconds"] = round(run.sim_seconds, 2)
    return out


def simulate_day(seed: int = 7, replicas: int = 4, hours: float = 24.0, scrape_interval_s: float = 15.0,
                 events: Events | None = None, router: str = "least_outstanding",
                 start: datetime | float = DEFAULT_DAY, warmup_s: float = 1800.0,
                 config: FleetConfig | None = None, traffic: TrafficSpec | None = None,
                 bursts: tuple[Burst, ...] | None = None, keep_run: bool = False) -> SimResult:
    """Simulate the fleet over ``hours`` from ``start`` (plus ``warmup_s`` before it, unscraped).

    ``events=None`` uses :func:`default_events`; pass ``Events()`` for a day without incidents.
    ``config`` overrides replicas/router/scrape interval when given. The run stops at the end of
    the export: requests still in flight have no finish.
    """
    run = simulate_run(seed, replicas, hours, scrape_interval_s, events, router, start, warmup_s, config, traffic,
                       bursts)
    return SimResult(metrics_frame=build_metrics_frame(run), records=build_records(run),
                     config=describe(run.trace, run.config, run.events, seed, run), run=run if keep_run else None)


def simulate_run(seed: int = 7, replicas: int = 4, hours: float = 24.0, scrape_interval_s: float = 15.0,
                 events: Events | None = None, router: str = "least_outstanding",
                 start: datetime | float = DEFAULT_DAY, warmup_s: float = 1800.0,
                 config: FleetConfig | None = None, traffic: TrafficSpec | None = None,
                 bursts: tuple[Burst, ...] | None = None) -> FleetRun:
    """The fleet run behind :func:`simulate_day` (same arguments), before any frame is built."""
    cfg = config or FleetConfig(replicas=replicas, router=router, scrape_interval_s=scrape_interval_s)
    ev = default_events(hours, cfg.replicas) if events is None else events
    trace = generate_trace(seed, hours=hours, start=start, warmup_s=warmup_s, spec=traffic, bursts=bursts)
    return run_fleet(trace, cfg, ev, seed=seed, drain=False)


def run_scenario(trace: Trace, replicas: int, config: FleetConfig | None = None, seed: int = 0,
                 events: Events = NO_EVENTS, drain: bool = True) -> pd.DataFrame:
    """Replay ``trace`` (e.g. ``scenario_trace(base, g, m)``) on ``replicas`` engines and return the
    per-request records: the ground truth for what the fleet would have done. ``config`` gives the
    engine, step-time model and router (its replica count is replaced)."""
    cfg = replace(config or FleetConfig(), replicas=replicas)
    return build_records(run_fleet(trace, cfg, events, seed=seed, drain=drain))


def metrics_table(frame: pd.DataFrame) -> pa.Table:
    """The long-format Parquet layout Headroom reads: timestamp (UTC, ms), metric, labels (JSON), value."""
    ts = frame["ts"]
    ms = pd.DatetimeIndex(ts).as_unit("ms").asi8 if len(ts) else []
    return pa.table({
        "timestamp": pa.array(ms, type=pa.timestamp("ms", tz="UTC")),
        "metric": pa.DictionaryArray.from_pandas(pd.Categorical(frame["metric"])).cast(
            pa.dictionary(pa.int32(), pa.string())),
        "labels": pa.DictionaryArray.from_pandas(pd.Categorical(frame["labels"])).cast(
            pa.dictionary(pa.int32(), pa.string())),
        "value": pa.array(frame["value"].to_numpy(dtype=float), type=pa.float64()),
    })


def _metrics_options() -> dict[str, Any]:
    """The metrics file's Parquet options (fresh each time: pyarrow fills in the dicts it is given)."""
    return {"compression": "zstd", "compression_level": 9, "use_byte_stream_split": ["value"],
            "column_encoding": {"timestamp": "DELTA_BINARY_PACKED"}, "use_dictionary": ["metric", "labels"],
            "write_statistics": True}


METRICS_PIECE_ROWS = 16_000_000  # samples written at once (whole replicas; a month at 60 s is 23 M a replica)
RECORDS_PIECE_ROWS = 2_000_000  # requests written at once
LONG_EXPORT_HOURS = 24.0  # longer exports default to a 60 s scrape interval and no size cap


def write_metrics_parquet(frame: pd.DataFrame | Iterable[pd.DataFrame], path: Path) -> int:
    """Write the samples as long-format Parquet (zstd); return the file size in bytes. ``frame``: one
    frame, or consecutive pieces of one export (:func:`~app.simulator.metrics.metrics_frames`),
    appended to the same file (one piece writes the bytes one frame does)."""
    pieces = [frame] if isinstance(frame, pd.DataFrame) else frame
    writer: pq.ParquetWriter | None = None
    try:
        for piece in pieces:
            table = metrics_table(piece)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, **_metrics_options())
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return path.stat().st_size


def _records_table(records: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(records, preserve_index=False)


def _records_options(schema: pa.Schema) -> dict[str, Any]:
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    deltas = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)]
    return {"compression": "zstd", "compression_level": 9, "use_byte_stream_split": floats,
            "use_dictionary": ["path", "finished_reason"],
            "column_encoding": dict.fromkeys(deltas, "DELTA_BINARY_PACKED")}


def write_records_parquet(records: pd.DataFrame | Iterable[pd.DataFrame], path: Path) -> int:
    """Write the per-request records (zstd; delta-coded integers and times); return the size in bytes.
    ``records``: one frame, or consecutive pieces appended to the same file."""
    pieces = [records] if isinstance(records, pd.DataFrame) else records
    writer: pq.ParquetWriter | None = None
    try:
        for piece in pieces:
            table = _records_table(piece)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, **_records_options(table.schema))
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return path.stat().st_size


def default_scrape_interval(hours: float) -> float:
    """15 s up to a day (the bundled sample); 60 s beyond: Prometheus' default ``scrape_interval``, and
    the step a month's ``query_range`` export commonly uses (a month at 15 s would be ~700 M samples
    for 8 replicas)."""
    return 15.0 if hours <= LONG_EXPORT_HOURS else 60.0


def default_max_bytes(hours: float) -> int | None:
    """The size cap of ``metrics.parquet``: ``MAX_SAMPLE_BYTES`` up to a day (the bundled sample is
    committed), none beyond (each doubling of the interval simulates the whole span again)."""
    return MAX_SAMPLE_BYTES if hours <= LONG_EXPORT_HOURS else None


def _pieces(n: int, size: int) -> list[slice]:
    return [slice(a, min(a + size, n)) for a in range(0, n, size)] or [slice(0, 0)]


def _whole_shares(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-path true shares (``window_s=None``) of pieces of the records, added up: the counts sum, the
    shares are the counts' ratios (as :func:`true_shares` computes them)."""
    counts = ["first_tokens", "ttft_breached", "finished", "tpot_breached", "joint_breached"]
    frame = pd.concat(parts, ignore_index=True)
    total = frame.groupby("path", sort=False, observed=True)[counts].sum().reset_index()
    total.insert(0, "window_start", frame["window_start"].iloc[0] if len(frame) else pd.NaT)
    with np.errstate(invalid="ignore", divide="ignore"):
        total["ttft_share"] = np.where(total["first_tokens"] > 0, total["ttft_breached"] / total["first_tokens"], np.nan)
        total["tpot_share"] = np.where(total["finished"] > 0, total["tpot_breached"] / total["finished"], np.nan)
        total["joint_share"] = np.where(total["finished"] > 0, total["joint_breached"] / total["finished"], np.nan)
    return total[list(parts[0].columns)]


def _distributions(d: dict[str, np.ndarray], names: tuple[str, ...]) -> list[dict[str, float | str]]:
    """Per path, TPOT and TTFT of the finished requests: median, 99th percentile, share above 25 ms."""
    out: list[dict[str, float | str]] = []
    for k, name in enumerate(names):
        done = d["finished"] & (d["path"] == k)
        if not done.any():
            continue
        tpot, ttft = d["tpot_s"][done], d["ttft_s"][done]
        out.append({"path": name, "tpot_median": float(np.median(tpot)), "tpot_p99": float(np.quantile(tpot, 0.99)),
                    "tpot_above_25ms": float((tpot > 0.025).mean()), "ttft_median": float(np.median(ttft)),
                    "ttft_p99": float(np.quantile(ttft, 0.99))})
    return out


def _write_run_metrics(run: FleetRun, d: dict[str, np.ndarray], path: Path) -> tuple[int, int, int]:
    """Write the run's samples piece by piece; (bytes, samples, series)."""
    samples = 0
    series: set[tuple[str, str]] = set()

    def pieces() -> Iterator[pd.DataFrame]:
        nonlocal samples
        for piece in metrics_frames(run, d, max_rows=METRICS_PIECE_ROWS):
            samples += len(piece)
            pairs = piece[["metric", "labels"]].drop_duplicates()
            series.update(zip(pairs["metric"].astype(str), pairs["labels"].astype(str), strict=True))
            yield piece

    size = write_metrics_parquet(pieces(), path)
    return size, samples, len(series)


def write_sample(out_dir: str | Path, seed: int = 7, hours: float = 24.0, replicas: int = 4,
                 scrape_interval_s: float | None = None, max_bytes: int | None | Literal["default"] = "default",
                 events: Events | None = None, records: bool = True,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write ``metrics.parquet``, ``requests.parquet`` (unless not ``records``), ``simulation.json`` and
    ``README.md`` into ``out_dir``. The scrape interval (default :func:`default_scrape_interval`)
    doubles until the metrics file fits in ``max_bytes`` (default :func:`default_max_bytes`; None: no
    cap). Both files are written piece by piece, so a month of a fleet (14.4 M requests, 185 M
    samples at 60 s for 8 replicas) never holds every sample or every record at once; the engine's
    per-request lists are the peak (released as soon as the run is over)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    cap = default_max_bytes(hours) if max_bytes == "default" else max_bytes
    wall = time.perf_counter()
    interval = default_scrape_interval(hours) if scrape_interval_s is None else scrape_interval_s
    while True:
        say(f"simulating {hours:g} h of {replicas} replicas, scraped every {interval:g} s")
        run = simulate_run(seed=seed, replicas=replicas, hours=hours, scrape_interval_s=interval, events=events)
        trace = run.trace
        d = run_arrays(run, release=True)
        say(f"  {len(trace):,} requests simulated in {run.sim_seconds:.0f} s; writing metrics.parquet")
        size, samples, series = _write_run_metrics(run, d, out / "metrics.parquet")
        if cap is None or size <= cap or interval >= 300:
            break
        interval *= 2
        say(f"  metrics.parquet is {size / 1e6:.1f} MB, above {cap / 1e6:.1f} MB: again at {interval:g} s")
        del run, d  # not held while the next run builds its own
    config = describe(trace, run.config, run.events, seed, run)
    start = pd.Timestamp(config["export_start"])
    pieces = _pieces(len(trace), RECORDS_PIECE_ROWS)
    share_parts = []

    def record_pieces() -> Iterator[pd.DataFrame]:
        for rows in pieces:
            frame = build_records(run, d, rows)
            share_parts.append(true_shares(frame, None, PROMISES, start=start))
            yield frame

    if records:
        say(f"writing requests.parquet ({len(trace):,} requests)")
        rec_size: int | None = write_records_parquet(record_pieces(), out / "requests.parquet")
    else:
        rec_size = None
        (out / "requests.parquet").unlink(missing_ok=True)  # not another run's records beside these metrics
        for _ in record_pieces():
            pass
    shares = _whole_shares(share_parts)
    summary = {**config, "scrape_interval_s": interval, "samples": samples,
               "series": series, "metrics_bytes": size, "requests_bytes": rec_size,
               "true_shares": shares.drop(columns=["window_start"]).to_dict(orient="records"),
               "promises": {k: {"ttft_s": v[0], "tpot_s": v[1]} for k, v in PROMISES.items()},
               "wall_seconds": round(time.perf_counter() - wall, 1)}
    (out / "simulation.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "README.md").write_text(sample_readme(summary, len(trace), _distributions(d, trace.path_names)))
    return summary


def sample_readme(s: dict[str, Any], n_records: int, distributions: list[dict[str, float | str]]) -> str:
    """The sample directory's README: what the files are and how they were made."""
    eng, step = s["fleet"]["engine"], s["fleet"]["step"]
    paths = s["traffic"]["paths"]
    rows = "\n".join(
        f"| {r['path']} | {r['first_tokens']:,} | {r['ttft_share']:.2%} | {r['finished']:,} | {r['tpot_share']:.2%} "
        f"| {r['joint_share']:.2%} |" for r in s["true_shares"])
    path_rows = "\n".join(
        f"| {p['name']} | `{p['served_name']}` | {p['mean_rate']} | {p['peak_to_trough']} | "
        f"{p['prompt_median']:g} (σ {p['prompt_sigma']}){', ' + format(p['long_share'], '.0%') + ' log-uniform ' + str(p['long_min']) + '–' + str(p['long_max']) if p['long_share'] else ''} | "
        f"{p['output_median']:g} (σ {p['output_sigma']}), max_tokens {p['max_tokens']} | "
        f"{'yes' if p['bursty'] else 'no'} |" for p in paths)
    bursts = "; ".join(f"{b['start'][11:16]} UTC ×{b['multiplier']:.2f} for {b['duration_s'] / 60:.1f} min"
                       for b in s["bursts"]) or "none"
    restarts = "; ".join(f"replica {r['replica']} (`10.0.0.{r['replica'] + 1}:8000`) crashes {r['crash'][11:19]} UTC, "
                         f"ready {r['ready'][11:19]} UTC" for r in s["restarts"]) or "none"
    gaps = "; ".join(f"{g['start'][11:19]}–{g['end'][11:19]} UTC" for g in s["scrape_gaps"]) or "none"
    tpot_lines = "\n".join(
        f"- {g['path']}: TPOT median {g['tpot_median'] * 1e3:.1f} ms, p99 {g['tpot_p99'] * 1e3:.1f} ms, "
        f"above 25 ms {g['tpot_above_25ms']:.2%}; TTFT median {g['ttft_median'] * 1e3:.0f} ms, "
        f"p99 {g['ttft_p99']:.2f} s" for g in distributions)
    hours = (pd.Timestamp(s["export_end"]) - pd.Timestamp(s["export_start"])).total_seconds() / 3600
    span = "one simulated day" if hours == 24 else (f"{hours / 24:g} simulated days" if hours % 24 == 0
                                                    else f"{hours:g} simulated hours")
    requests_file = (f"({s['requests_bytes'] / 1e6:.1f} MB)" if s["requests_bytes"] is not None
                     else "(not written: `--no-records`)")
    return f"""# Bundled sample: {span} of a {s['fleet']['replicas']}-replica vLLM fleet

Synthetic — produced by Headroom's fleet simulator (`app/simulator/`), not captured from a real
fleet. It is the export the dashboard opens on and the ground truth of the tests: the per-request
records behind every histogram are included, so breach shares can be checked exactly.

| file | what |
| --- | --- |
| `metrics.parquet` | the Prometheus export: long format, columns `timestamp` (UTC, ms), `metric`, `labels` (JSON object), `value`; {s['samples']:,} samples of {s['series']:,} series, scraped every {s['scrape_interval_s']:g} s from {s['export_start']} to {s['export_end']} ({s['metrics_bytes'] / 1e6:.1f} MB) |
| `requests.parquet` | one row per request ({n_records:,}): `id, path, model_name, replica, arrival, scheduled, first_token, finish` (UTC, µs), `prompt_tokens, output_tokens, ttft_s, tpot_s, e2e_s, queue_s, finished_reason, preemptions, lost` {requests_file}; see `app/simulator/records.py` for the definitions |
| `simulation.json` | every parameter of the run, the events, and the true shares below |

Regenerate (deterministic: same seed, same bytes):

    python -m app.simulator --seed {s['seed']} --out data/sample --hours {hours:g} --replicas {s['fleet']['replicas']}

## Fleet

{s['fleet']['replicas']} replicas of Llama-3.1-8B, one H100 and one vLLM V1 engine each (`engine="0"`), behind a
`{s['fleet']['router']}` router. Engine: max_num_seqs {eng['max_num_seqs']}, max_num_batched_tokens
{eng['max_num_batched_tokens']} (chunked prefill), {eng['num_gpu_blocks']:,} KV blocks × {eng['block_size']} tokens =
{eng['num_gpu_blocks'] * eng['block_size']:,} tokens (a GPU shared with other services:
gpu_memory_utilization {eng['gpu_memory_utilization']}), max_model_len {eng['max_model_len']}, FCFS admission of a
request only when its whole prompt fits (`scheduler_reserve_full_isl`), recompute preemption of the most
recently admitted request when the KV cache is full. Step time = {step['base_s'] * 1e3:g} ms
+ {step['per_decode_seq_s'] * 1e3:g} ms × decoding requests + {step['per_prefill_token_s'] * 1e6:g} µs × prefill
tokens + {step['per_context_token_s'] * 1e9:g} ns × context tokens read + {step['per_prefill_pair_s'] * 1e9:g} ns ×
prefill attention pairs, × lognormal noise (σ {step['noise_sigma']}).

## Traffic (seed {s['seed']}, {s['requests']:,} requests including a {s['warmup_s'] / 60:g}-minute unscraped warm-up)

| path | model_name of its request series | mean req/s | peak/trough | prompt tokens, median | output tokens, median | bursts |
| --- | --- | --- | --- | --- | --- | --- |
{path_rows}

Bursts: {bursts}.

## Events

- Restart: {restarts}. Its in-flight requests are lost (`finished_reason="abort"`, `lost=true` in the
  records; the metrics never count them); its counters restart from 0 with new `_created` and
  `process_start_time_seconds`; no samples while it is down.
- Scrape gap: {gaps} — no sample of any replica.

Every replica is scraped on the same grid (multiples of {s['scrape_interval_s']:g} s, no per-target offset), so
a histogram's increase over a window holds exactly the requests observed in it (first token for TTFT,
finish for the rest) — except in windows touching the restart or the gap.

## Labels

`instance="10.0.0.<k>:8000"`, `job="vllm"`, `engine="0"`. Request-level series (request histograms,
`request_success`, prompt/generation token counters, inter-token latency) carry `model_name` = the path's
served name; engine-level series (`num_requests_running`, `num_requests_waiting`, `kv_cache_usage_perc`,
`num_preemptions`, `iteration_tokens_total`) carry the base model `{eng['model']}`; `cache_config_info`
has no `model_name` (as in vLLM). Bucket bounds are vLLM 0.33's defaults.

## True shares (whole export, from the records)

Promise: interactive TTFT ≤ {s['promises']['interactive']['ttft_s']} s and TPOT ≤ {s['promises']['interactive']['tpot_s'] * 1e3:g} ms;
batch TTFT ≤ {s['promises']['batch']['ttft_s']} s and TPOT ≤ {s['promises']['batch']['tpot_s'] * 1e3:g} ms. TTFT counts requests by
first-token time, TPOT and joint (either breached) by finish time, as vLLM observes them.

| path | first tokens | TTFT breached | finished | TPOT breached | joint breached |
| --- | --- | --- | --- | --- | --- |
{rows}

Distributions (finished requests):

{tpot_lines}

With KV memory the binding resource, batches stay small enough that decode steps rarely pass ~20 ms:
TTFT (waiting for KV space, bursts, long prompts ahead in the queue) is what breaks; TPOT matters only for
a tighter promise.
"""

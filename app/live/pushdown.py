"""The cube pulled from a live Prometheus-compatible store by PromQL (pushdown): the store computes each
window, Headroom pulls windows instead of samples and keeps them as a dataset of kind ``live``.

Two granularities:

- ``path`` (the default): histogram buckets, ``_count``/``_sum`` and counters are summed in the store
  by the path labels, ``sum by (le, <path labels>) (increase(<bucket>[<window>]))`` at ``step`` =
  window; gauges come per replica (``min/sum/count/max_over_time`` by the path and replica labels), so
  that the cube's min, mean, max and replica count are the file cube's. What reaches Headroom grows
  with paths × buckets × windows, not with replicas or scrapes.
- ``series``: every series windowed in the store, nothing summed: any path mapping (and the replica
  cube) can be built from it, at the price of one row per series and window.

Windows are the file cube's, ``(start, start + window]`` on the same grid, evaluated at each window's
end. The rows go into ``live_windows`` in the shape ``cube__series_windows`` gives for a file, so the
cube is built by the same ``cube__build`` (path rules, priorities, the bucket envelope). Where PromQL
and the exact cube differ — ``increase()`` extrapolates to the window's edges, does not see the delta
from the last sample before the window, finds resets per series, and Prometheus 2.x ranges are closed
— is said in docs/live-stores.md#pushdown-and-extrapolation; ``tests/live/test_pushdown_live.py`` computes the
expected values with the PromQL oracle and checks them on a real Prometheus and VictoriaMetrics.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from app import sql
from app.cube import parse_window
from app.live.client import (
    Client,
    LiveError,
    Store,
    discover,
    parse_time,
    raw_chunks,
    selector_matchers,
    serving_metric_names,
)
from app.load import LoadReport, describe_dataset, insert_dataset, iso_utc, unique_name
from app.store import MODEL_LABEL, MODEL_LABELS, Workspace, signal_rows

BY = ("path", "series")
# the labels that name a replica (as ingest__staged_series joins them)
REPLICA_LABELS = ("instance", "pod", "WorkerId", "engine", "dp_rank")
ORIGIN_S = 946857600  # the cube's window origin, 2000-01-03 00:00 UTC (queries/macros/windows.sql)
MAX_POINTS = 10_000  # Prometheus refuses a range query of more than 11,000 points per series
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GAUGE_STATS = {"gauge_min": "min_over_time", "gauge_sum": "sum_over_time", "gauge_n": "count_over_time",
               "gauge_max": "max_over_time"}
# how each gauge statistic of several series is combined in the store (by the path and replica labels)
_GAUGE_AGG = {"gauge_min": "min", "gauge_sum": "sum", "gauge_n": "sum", "gauge_max": "max"}


@dataclass(frozen=True)
class PullQuery:
    metric: str  # the store's metric name the rows are kept under
    family: str  # its known family (data/signals.csv)
    kind: str  # histogram | counter | gauge
    stat: str  # increase | gauge_min | gauge_sum | gauge_n | gauge_max | present (a replica served the path)
    expr: str


@dataclass
class Pulled:
    """What a pull read: its rows (metric, labels, window_start, stat, value) and its notes."""

    rows: pd.DataFrame
    queries: int
    labels: list[str]  # the path labels summed by in the store (``__model__`` resolved); [] per series
    requested: list[str]  # the path labels as asked for (the dataset's summary cube uses them)
    store_labels: list[str] = field(default_factory=list)  # every label name on the store's serving series
    raw: pd.DataFrame | None = None  # raw samples (metric, labels, ts, value) kept beside the windows
    notes: list[str] = field(default_factory=list)


def _families() -> dict[str, dict[str, Any]]:
    """Known family -> its kind and the labels its signal rules match on (kept in every sum)."""
    out: dict[str, dict[str, Any]] = {}
    for r in signal_rows():
        entry = out.setdefault(r["family"], {"kind": r["kind"], "match": set()})
        if r["label_match"]:
            entry["match"].add(r["label_match"].split("=", 1)[0])
    return out


def resolve_labels(path_labels: Sequence[str], found: dict[str, list[str]]) -> list[str]:
    """The path labels as the store names them: ``__model__`` becomes the first model label the
    serving series carry (``found``: discovery's label -> values)."""
    out = []
    for label in path_labels:
        if label == MODEL_LABEL:
            present = [m for m in MODEL_LABELS if m in found]
            if not present:
                raise LiveError("no series carries a model label (" + ", ".join(MODEL_LABELS) + "): name the path "
                                "label with --path-label (candidates: " + (", ".join(found) or "none") + ")")
            label = present[0]
        if not _LABEL.fullmatch(label):
            raise LiveError(f"--path-label {label!r}: not a Prometheus label name")
        if label not in out:
            out.append(label)
    return out


def plan(names: Sequence[str], labels: Sequence[str], window_s: int, by: str = "path",
         match: str | None = None) -> list[PullQuery]:
    """The PromQL of a pull: one query per (store metric, statistic)."""
    if by not in BY:
        raise LiveError(f"--by {by!r}: expected one of {', '.join(BY)}")
    inner = selector_matchers(match)
    families = _families()
    w = f"[{int(window_s)}s]"
    out = []
    for name in names:
        family, suffix = _split(name, families)
        if family is None:
            continue
        kind, keep = families[family]["kind"], sorted(families[family]["match"])
        sel = f"{name}{{{inner}}}" if inner else name
        if kind == "histogram" and suffix in ("bucket", "count", "sum") or kind == "counter" and suffix in ("total", ""):
            expr = f"increase({sel}{w})"
            if by == "path":
                grouping = (["le"] if suffix == "bucket" else []) + list(labels) + keep
                expr = f"sum by ({', '.join(dict.fromkeys(grouping))}) ({expr})"
            out.append(PullQuery(name, family, kind, "increase", expr))
        elif kind == "gauge" and suffix == "":
            for stat, fn in GAUGE_STATS.items():
                expr = f"{fn}({sel}{w})"
                if by == "path":
                    grouping = dict.fromkeys([*labels, *REPLICA_LABELS, *keep])
                    expr = f"{_GAUGE_AGG[stat]} by ({', '.join(grouping)}) ({expr})"
                out.append(PullQuery(name, family, kind, stat, expr))
        # `_created` series and info series are not windowed: the store's increase() finds resets itself
    if by == "path":
        out += _presence(names, labels, w, inner, families)
    return out


# the request histograms whose `_count` says which replicas served a path in a window, best first
_PRESENCE_SIGNALS = ("ttft", "e2e", "tpot", "queue", "itl")


def _presence(names: Sequence[str], labels: Sequence[str], w: str, inner: str,
              families: dict[str, dict[str, Any]]) -> list[PullQuery]:
    """Summed series name no replica, so the replicas that served each path come from one more query: a
    request histogram's `_count` counted by the path and replica labels (rows with no value)."""
    signal_of = {r["family"]: r["signal"] for r in signal_rows()}
    counts = [n for n in names if n.endswith("_count") and n[:-6] in families
              and signal_of.get(n[:-6]) in _PRESENCE_SIGNALS]
    if not counts:
        return []
    name = min(counts, key=lambda n: _PRESENCE_SIGNALS.index(signal_of[n[:-6]]))
    sel = f"{name}{{{inner}}}" if inner else name
    grouping = ", ".join(dict.fromkeys([*labels, *REPLICA_LABELS]))
    return [PullQuery(name, name[:-6], "histogram", "present", f"count by ({grouping}) (count_over_time({sel}{w}))")]


def _split(name: str, families: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    if name in families:
        return name, ""
    base, _, suffix = name.rpartition("_")
    return (base, suffix) if base in families else (None, "")


def window_ends(start: datetime, end: datetime, window_s: int) -> list[float]:
    """The ends of the cube's windows that overlap (start, end]: the grid from the origin."""
    lo, hi = start.timestamp(), end.timestamp()
    first = ORIGIN_S + (math.floor((lo - ORIGIN_S) / window_s) + 1) * window_s
    last = ORIGIN_S + math.ceil((hi - ORIGIN_S) / window_s) * window_s
    return [float(t) for t in range(int(first), int(last) + 1, int(window_s))]


RAW_COLUMNS = ["metric", "labels", "ts", "value"]


def pull(client: Client, start: datetime, end: datetime, window_s: int, path_labels: Sequence[str],
         by: str = "path", match: str | None = None, chunk_s: int = 86400,
         progress: Callable[[str], Any] | None = None, raw_scalars: bool = False) -> Pulled:
    """Run the plan over (start, end], ``chunk_s`` of windows per range query, with progress. With
    ``raw_scalars`` every serving series but the histogram buckets is also read raw (the capacity
    model fits the engine's step time on each scrape interval, which no window can give)."""
    names = serving_metric_names(client)
    found = discover(client, start, end, match, names)
    labels = resolve_labels(path_labels, found["path_labels"]) if by == "path" else []
    queries = plan(names, labels, window_s, by, match)
    if not queries:
        raise LiveError(f"{client.store.url}: no metric of a known serving engine (vLLM, SGLang, TGI, TensorRT-LLM/"
                        "Triton, NIM, DCGM) in the store; check --match or the URL")
    ends = window_ends(start, end, window_s)
    per_chunk = max(1, min(MAX_POINTS, int(chunk_s // window_s)))
    chunks = [ends[i:i + per_chunk] for i in range(0, len(ends), per_chunk)]
    frames, dropped, done = [], 0, 0
    for q in queries:
        for times in chunks:
            result = client.query_range(q.expr, times[0], times[-1], window_s)
            rows = []
            for series in result:
                labels_of = {k: v for k, v in series["metric"].items() if k != "__name__"}
                text = json.dumps(labels_of, sort_keys=True)
                for t, v in series.get("values", []):
                    value = float(v)
                    if math.isfinite(value):
                        rows.append((q.metric, text, float(t) - window_s, q.stat, value))
                    else:
                        dropped += 1
            if rows:
                frames.append(pd.DataFrame(rows, columns=["metric", "labels", "window_start", "stat", "value"]))
            done += 1
            if progress:
                progress(f"{done}/{len(queries) * len(chunks)} queries: {q.metric} {q.stat} up to "
                         f"{datetime.fromtimestamp(times[-1], UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if not frames:
        raise LiveError(f"{client.store.url}: no window of the serving metrics between {start.isoformat()} and "
                        f"{end.isoformat()}")
    rows = pd.concat(frames, ignore_index=True)
    rows["window_start"] = pd.to_datetime(rows["window_start"], unit="s")
    notes = [f"pulled by PromQL ({len(queries)} queries x {len(chunks)} chunk(s), {len(rows):,} values at "
             f"{window_s} s windows, {'summed by ' + ', '.join(labels) if by == 'path' else 'per series'}): "
             "counts are PromQL's increase(), extrapolated to the window's edges, not the exact increases"]
    if dropped:
        notes.append(f"{dropped} NaN or infinite value(s) the store returned were dropped")
    raw = None
    if raw_scalars:
        scalars = [n for n in names if not n.endswith("_bucket")]
        parts = list(raw_chunks(client, start, end, scalars, match, chunk_s=3600, progress=progress))
        raw = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=RAW_COLUMNS)
        raw["ts"] = pd.to_datetime(raw["ts"], utc=True).dt.tz_localize(None)
        notes.append(f"{len(raw):,} raw samples of {len(scalars)} scalar series (counters, histogram counts and "
                     "sums, gauges; no bucket) read for the capacity model's per-scrape fit")
    return Pulled(rows=rows, queries=len(queries), labels=labels, requested=list(path_labels), notes=notes,
                  store_labels=list(found["labels"]), raw=raw)


def store_pulled(ws: Workspace, pulled: Pulled, store: Store, start: datetime, end: datetime, window_s: int,
                 by: str, match: str | None, name: str | None = None) -> LoadReport:
    """Keep a pull as one dataset of kind ``live`` (atomic), with its summary as a load gives one."""
    digest = "live:" + json.dumps([store.url, match, by, pulled.labels, window_s, start.isoformat(), end.isoformat(),
                                   len(pulled.rows), float(pulled.rows["value"].sum()),
                                   0 if pulled.raw is None else len(pulled.raw)])
    existing = ws.dataset_summary(digest)
    if existing:
        report = LoadReport(**existing)
        report.status = "unchanged"
        return report
    families = _families()
    kinds = pd.DataFrame({"family": list(families), "mtype": [f["kind"] for f in families.values()]})
    display = f"{store.url} (live, {by})"
    raw = pulled.raw if pulled.raw is not None else pd.DataFrame({
        "metric": pd.Series(dtype=str), "labels": pd.Series(dtype=str), "ts": pd.Series(dtype="datetime64[ns]"),
        "value": pd.Series(dtype=float)})
    with ws.transaction() as con:
        con.register("live_pulled", pulled.rows)
        con.register("live_raw", raw)
        con.register("live_families", kinds)
        try:
            sql.materialize(con, "live__stage_keys", "stage_keys")
            sql.materialize(con, "live__stage_families", "stage_families")
            sql.materialize(con, "ingest__staged_series", "stage_series")
            sql.execute(con, "ingest__insert_series")
            dataset_id = con.execute("select nextval('dataset_ids')").fetchone()[0]
            sql.execute(con, "live__insert_windows", dataset_id=dataset_id)
            sql.execute(con, "live__insert_samples", dataset_id=dataset_id)
        finally:
            for name in ("live_pulled", "live_raw", "live_families"):
                con.unregister(name)
        con.execute("insert into live_pulls values ($id, $url, $sel, $w, $by, $labels, $t0, $t1, $q)",
                    {"id": dataset_id, "url": store.url, "sel": match, "w": int(window_s), "by": by,
                     "labels": list(pulled.labels), "t0": start.astimezone(UTC).replace(tzinfo=None),
                     "t1": end.astimezone(UTC).replace(tzinfo=None), "q": pulled.queries})
        n_series, t_min, t_max = con.execute(
            "select count(distinct series_id), min(window_start), max(window_start) + to_seconds($w) "
            "from live_windows where dataset_id = $id", {"id": dataset_id, "w": int(window_s)}).fetchone()
        interval = None
        if len(raw):
            interval = sql.rows(con, "ingest__dataset_stats", dataset_id=dataset_id)[0][-1]
        report = LoadReport(file=display, status="loaded", dataset=unique_name(con, name or f"live {store.url}"),
                            dataset_id=dataset_id, format="live", series=int(n_series), samples=len(pulled.rows),
                            start=iso_utc(t_min), end=iso_utc(t_max), scrape_interval_s=interval, time_source="store",
                            notes=list(pulled.notes))
        describe_dataset(con, dataset_id, report, window_s=window_s,
                         path_labels=pulled.requested if by == "path" else None)
        if report.engine == "vllm-v0" and "engine" in pulled.store_labels:
            # vLLM's generation is told by the `engine` label, which a sum by the path labels drops
            report.engine = "vllm-v1"
            report.notes = [n for n in report.notes if n != "also recognised: vllm-v1"]
        insert_dataset(con, report, digest, engine=report.engine, n_series=int(n_series), n_samples=len(pulled.rows),
                       t_min=t_min, t_max=t_max, interval=interval)
    return report


def pulled_windows(ws: Workspace) -> dict[int, int]:
    """The live datasets of the workspace and the window each was pulled at (seconds)."""
    return dict(ws.cursor().execute("select dataset_id, window_s from live_pulls").fetchall())


def fetch_cube(ws: Workspace, store: Store, start: str, end: str, window: str = "5m",
               path_labels: Sequence[str] | None = None, by: str = "path", match: str | None = None,
               chunk: str = "1d", progress: Callable[[str], Any] | None = None, name: str | None = None,
               raw_scalars: bool = False) -> LoadReport:
    """``pull`` then ``store_pulled`` of the range and options as people type them (``headroom fetch
    --pushdown`` and the Data page's Connect), each checked before the first request."""
    t0, t1 = parse_time(start), parse_time(end)
    if t1 <= t0:
        raise LiveError(f"the end ({end}) is not after the start ({start})")
    window_s = parse_window(window)
    chunk_s = max(window_s, parse_window(chunk))
    selector_matchers(match)
    labels = list(path_labels) if path_labels else ws.path_labels()
    if progress:
        progress(f"pulling the cube from {store.describe()}, {t0.isoformat()} to {t1.isoformat()}")
    pulled = pull(Client(store), t0, t1, window_s, labels, by=by, match=match, chunk_s=chunk_s, progress=progress,
                  raw_scalars=raw_scalars)
    return store_pulled(ws, pulled, store, t0, t1, window_s, by, match, name=name)

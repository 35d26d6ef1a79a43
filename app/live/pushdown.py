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
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from app import sql
from app.cube import parse_window
from app.live.client import (
    Client,
    LiveError,
    Store,
    discover,
    parse_time,
    raw_answers,
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
    """What a pull read: its rows, staged in the TEMP tables of ``staged`` (see :class:`Staging`), and
    their counts and notes."""

    staged: duckdb.DuckDBPyConnection  # the cursor of the workspace whose TEMP tables hold the rows
    rows: int  # window values kept (NaN and infinities dropped)
    value_sum: float  # their sum, in the order they came (the dataset's digest holds it)
    queries: int
    labels: list[str]  # the path labels summed by in the store (``__model__`` resolved); [] per series
    requested: list[str]  # the path labels as asked for (the dataset's summary cube uses them)
    store_labels: list[str] = field(default_factory=list)  # every label name on the store's serving series
    raw: int = 0  # raw samples (metric, labels, ts, value) kept beside the windows
    notes: list[str] = field(default_factory=list)


# the statistics of a pull's rows, coded in ``live_pulled.stat_id`` by their place here
STATS = ("increase", *GAUGE_STATS, "present")


class Staging:
    """A pull's rows as each answer arrives, in TEMP tables of one cursor of the workspace: the cursor is
    the pull's own (no other pull or load sees its tables, and closing it drops them), and what Python
    holds is one answer at a time, whatever the range. A series is a number (``live_keys``: its store
    metric and labels' JSON, once); a row is that number, a statistic's number, a time and a value —
    a month of a fleet at a 15 s scrape is hundreds of millions of them, which DuckDB keeps within its
    memory limit (spilling to its temp directory) and Python could not."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.keys: dict[tuple[str, str], int] = {}
        self.rows = self.raw = self.dropped = 0
        self._sums: list[float] = []
        con.execute("create or replace temp table live_keys (key_id uinteger, metric varchar, labels varchar)")
        con.execute("create or replace temp table live_stats (stat_id utinyint, stat varchar)")
        con.execute("insert into live_stats select unnest($ids), unnest($stats)",
                    {"ids": list(range(len(STATS))), "stats": list(STATS)})
        con.execute("create or replace temp table live_pulled "
                    "(key_id uinteger, stat_id utinyint, window_start timestamp, value double)")
        con.execute("create or replace temp table live_raw (key_id uinteger, ts timestamp, value double)")

    @property
    def value_sum(self) -> float:
        return math.fsum(self._sums)

    def _key(self, metric: str, labels: dict[str, str], new: list[tuple[int, str, str]]) -> int:
        text = json.dumps(labels, sort_keys=True)
        key = self.keys.get((metric, text))
        if key is None:
            key = self.keys[(metric, text)] = len(self.keys)
            new.append((key, metric, text))
        return key

    def _append(self, table: str, new: list[tuple[int, str, str]], columns: dict[str, pa.Array]) -> None:
        if new:
            ids, metrics, texts = zip(*new, strict=True)
            self.con.execute("insert into live_keys select unnest($ids), unnest($metrics), unnest($labels)",
                             {"ids": list(ids), "metrics": list(metrics), "labels": list(texts)})
        chunk = pa.table(columns)  # noqa: F841 -- read by name by the statement below
        if table == "live_pulled":
            self.con.execute("insert into live_pulled select * from chunk")
        else:
            self.con.execute("insert into live_raw select * from chunk")

    def windows(self, q: PullQuery, result: Sequence[dict[str, Any]], window_s: int) -> None:
        """One range query's answer: its finite values at each window's end, kept at the window's start."""
        new: list[tuple[int, str, str]] = []
        keys, times, values = [], [], []
        for series in result:
            t, v = _pairs(series.get("values") or [])
            finite = np.isfinite(v)
            self.dropped += int(len(v) - finite.sum())
            if not finite.all():
                t, v = t[finite], v[finite]
            if not len(v):
                continue
            labels = {k: x for k, x in series["metric"].items() if k != "__name__"}
            keys.append(np.full(len(v), self._key(q.metric, labels, new), dtype=np.uint32))
            times.append(t - window_s)
            values.append(v)
        if not values:
            return
        v = np.concatenate(values)
        self._append("live_pulled", new, {
            "key_id": pa.array(np.concatenate(keys)),
            "stat_id": pa.array(np.full(len(v), STATS.index(q.stat), dtype=np.uint8)),
            "window_start": _timestamps(np.concatenate(times)),
            "value": pa.array(v)})
        self.rows += len(v)
        self._sums.append(math.fsum(v.tolist()))

    def raw_samples(self, result: Sequence[dict[str, Any]]) -> int:
        """One raw read's answer, every value kept (the load's checks see NaN as a file's); its size."""
        new: list[tuple[int, str, str]] = []
        keys, times, values = [], [], []
        for series in result:
            t, v = _pairs(series.get("values") or [])
            if not len(v):
                continue
            labels = dict(series["metric"])
            metric = labels.pop("__name__", "")
            keys.append(np.full(len(v), self._key(metric, labels, new), dtype=np.uint32))
            times.append(t)
            values.append(v)
        if not values:
            return 0
        v = np.concatenate(values)
        self._append("live_raw", new, {"key_id": pa.array(np.concatenate(keys)),
                                       "ts": _timestamps(np.concatenate(times)), "value": pa.array(v)})
        self.raw += len(v)
        return len(v)


def _pairs(values: Sequence[Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """A series' ``[[unix seconds, "value"], ...]`` as two float arrays ("NaN", "+Inf" parse)."""
    n = len(values)
    return (np.fromiter((p[0] for p in values), dtype=np.float64, count=n),
            np.array([p[1] for p in values], dtype=np.float64))


def _timestamps(seconds: np.ndarray) -> pa.Array:
    """Unix seconds as DuckDB's microsecond timestamps (a store's times are milliseconds: exact)."""
    return pa.array(np.rint(seconds * 1e6).astype(np.int64), type=pa.timestamp("us"))


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


def pull(client: Client, con: duckdb.DuckDBPyConnection, start: datetime, end: datetime, window_s: int,
         path_labels: Sequence[str], by: str = "path", match: str | None = None, chunk_s: int = 86400,
         progress: Callable[[str], Any] | None = None, raw_scalars: bool = False) -> Pulled:
    """Run the plan over (start, end], ``chunk_s`` of windows per range query, with progress, each answer
    staged on ``con`` (a cursor of the workspace kept for the pull: :class:`Staging`) before the next is
    asked for. With ``raw_scalars`` every serving series but the histogram buckets is also read raw (the
    capacity model fits the engine's step time on each scrape interval, which no window can give)."""
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
    staging = Staging(con)
    done = 0
    for q in queries:
        for times in chunks:
            staging.windows(q, client.query_range(q.expr, times[0], times[-1], window_s), window_s)
            done += 1
            if progress:
                progress(f"{done}/{len(queries) * len(chunks)} queries: {q.metric} {q.stat} up to "
                         f"{datetime.fromtimestamp(times[-1], UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if not staging.rows:
        raise LiveError(f"{client.store.url}: no window of the serving metrics between {start.isoformat()} and "
                        f"{end.isoformat()}")
    notes = [f"pulled by PromQL ({len(queries)} queries x {len(chunks)} chunk(s), {staging.rows:,} values at "
             f"{window_s} s windows, {'summed by ' + ', '.join(labels) if by == 'path' else 'per series'}): "
             "counts are PromQL's increase(), extrapolated to the window's edges, not the exact increases"]
    if staging.dropped:
        notes.append(f"{staging.dropped} NaN or infinite value(s) the store returned were dropped")
    if raw_scalars:
        scalars = [n for n in names if not n.endswith("_bucket")]
        for i, n_chunks, hi, result in raw_answers(client, start, end, scalars, match, chunk_s=3600):
            n = staging.raw_samples(result)
            if progress:
                progress(f"{i + 1}/{n_chunks}: {n:,} samples up to "
                         f"{datetime.fromtimestamp(hi, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
        notes.append(f"{staging.raw:,} raw samples of {len(scalars)} scalar series (counters, histogram counts and "
                     "sums, gauges; no bucket) read for the capacity model's per-scrape fit")
    return Pulled(staged=con, rows=staging.rows, value_sum=staging.value_sum, queries=len(queries), labels=labels,
                  requested=list(path_labels), notes=notes, store_labels=list(found["labels"]), raw=staging.raw)


def store_pulled(ws: Workspace, pulled: Pulled, store: Store, start: datetime, end: datetime, window_s: int,
                 by: str, match: str | None, name: str | None = None) -> LoadReport:
    """Keep a pull as one dataset of kind ``live`` (atomic), with its summary as a load gives one."""
    digest = "live:" + json.dumps([store.url, match, by, pulled.labels, window_s, start.isoformat(), end.isoformat(),
                                   pulled.rows, pulled.value_sum, pulled.raw])
    existing = ws.dataset_summary(digest)
    if existing:
        report = LoadReport(**existing)
        report.status = "unchanged"
        return report
    families = _families()
    kinds = pd.DataFrame({"family": list(families), "mtype": [f["kind"] for f in families.values()]})
    display = f"{store.url} (live, {by})"
    # on the pull's own cursor, whose TEMP tables hold the rows; the workspace's writer lock held
    with ws.transaction(pulled.staged) as con:
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
            con.unregister("live_families")
        con.execute("insert into live_pulls values ($id, $url, $sel, $w, $by, $labels, $t0, $t1, $q)",
                    {"id": dataset_id, "url": store.url, "sel": match, "w": int(window_s), "by": by,
                     "labels": list(pulled.labels), "t0": start.astimezone(UTC).replace(tzinfo=None),
                     "t1": end.astimezone(UTC).replace(tzinfo=None), "q": pulled.queries})
        n_series, t_min, t_max = con.execute(
            "select count(distinct series_id), min(window_start), max(window_start) + to_seconds($w) "
            "from live_windows where dataset_id = $id", {"id": dataset_id, "w": int(window_s)}).fetchone()
        interval = None
        if pulled.raw:
            interval = sql.rows(con, "ingest__dataset_stats", dataset_id=dataset_id)[0][-1]
        report = LoadReport(file=display, status="loaded", dataset=unique_name(con, name or f"live {store.url}"),
                            dataset_id=dataset_id, format="live", series=int(n_series), samples=pulled.rows,
                            start=iso_utc(t_min), end=iso_utc(t_max), scrape_interval_s=interval, time_source="store",
                            notes=list(pulled.notes))
        describe_dataset(con, dataset_id, report, window_s=window_s,
                         path_labels=pulled.requested if by == "path" else None)
        if report.engine == "vllm-v0" and "engine" in pulled.store_labels:
            # vLLM's generation is told by the `engine` label, which a sum by the path labels drops
            report.engine = "vllm-v1"
            report.notes = [n for n in report.notes if n != "also recognised: vllm-v1"]
        insert_dataset(con, report, digest, engine=report.engine, n_series=int(n_series), n_samples=pulled.rows,
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
    with closing(ws.cursor()) as con:  # the pull's staging tables go with it
        pulled = pull(Client(store), con, t0, t1, window_s, labels, by=by, match=match, chunk_s=chunk_s,
                      progress=progress, raw_scalars=raw_scalars)
        return store_pulled(ws, pulled, store, t0, t1, window_s, by, match, name=name)

"""What a user would otherwise write: the same cube in straightforward pandas, from a long-format Parquet.

It follows the cube's documented semantics step by step (``queries/ingest/ingest__staged_series.sql``,
``queries/cube/``: ``signals__series.sql``, ``cube__series_windows.sql``, ``cube__build.sql``) with idiomatic pandas:
``read_parquet``, ``sort_values``, ``groupby().shift()``, ``merge``, ``groupby().agg()``. It is the
reference the benchmark times Headroom against, and the cross-check: on the same file both must give
the identical cube (the generated values are exact in binary floating point, so no tolerance).

Scope: long-format files without ``# TYPE`` information (Parquet carries none), one dataset, no
path rules — what the benchmark generates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from app import sql
from app.store import data_dir

CUBE_COLUMNS = ["window_start", "path", "signal", "le", "stat", "value"]
ORIGIN = pd.Timestamp("2000-01-03")  # DuckDB's time_bucket origin for sub-month widths
_SUFFIX_RE = re.compile(r"^(.*)_(bucket|count|sum|created|total)$")
_REPLICA_LABELS = ("instance", "pod", "engine", "dp_rank")
# the benchmarks' own queries (references and former formulations), beside them, not among the product's
QUERIES_DIR = Path(__file__).resolve().with_name("queries")


def _classify(metric: str, labels: dict[str, str], bucketed: set[str]) -> tuple[str, str, str]:
    """(family, suffix, type) of a series without TYPE lines (ingest__staged_series)."""
    m = _SUFFIX_RE.match(metric)
    base, sfx = (m.group(1), m.group(2)) if m else ("", "")
    if sfx == "created":
        return base, "created", "counter"
    if sfx in ("bucket", "count", "sum") and base in bucketed:
        return base, sfx, "histogram"
    if sfx == "total":
        return base, "total", "counter"
    return metric, "", "untyped"


def _series_table(pairs: pd.DataFrame, path_labels: Sequence[str]) -> pd.DataFrame:
    """One row per (series, signal) with the signal map applied (signals__series)."""
    parsed = [json.loads(s) for s in pairs["labels"]]
    bases = [_SUFFIX_RE.match(m) for m in pairs["metric"]]
    bucketed = {b.group(1) for b, lab in zip(bases, parsed, strict=True)
                if b and b.group(2) == "bucket" and "le" in lab}
    rows = []
    for code, metric, labels in zip(pairs["code"], pairs["metric"], parsed, strict=True):
        family, suffix, _ = _classify(metric, labels, bucketed)
        le = None
        if suffix == "bucket":
            try:
                le = float(labels["le"]) if "le" in labels else None
            except ValueError:
                le = None
        rest = ",".join(f"{k}={labels[k]}" for k in sorted(labels) if k != "le")
        replica = "/".join(labels[k] for k in _REPLICA_LABELS if labels.get(k) is not None)
        identity = f"{family}|{suffix}{{" + ",".join(f"{k}={labels[k]}" for k in sorted(labels)) + "}"
        key = " / ".join(labels.get(lab, "") for lab in path_labels)
        path = "(none)" if key.replace(" / ", "") == "" else key
        rows.append((code, identity, family, suffix, le, f"{family}{{{rest}}}", replica, path, labels))
    series = pd.DataFrame(rows, columns=["code", "identity", "family", "suffix", "le", "group", "replica",
                                         "path", "labels"])
    # integer keys for the per-sample work (strings stay in this small table)
    for col in ("identity", "group", "replica"):
        series[col] = pd.factorize(series[col])[0]
    rules = pd.read_csv(data_dir() / "signals.csv")
    rules["match_label"] = rules["label_match"].fillna("").str.split("=").str[0].replace("", None)
    rules["match_values"] = rules["label_match"].fillna("").str.split("=").str[1]
    m = series.merge(rules[["family", "signal", "kind", "scale", "priority", "match_label", "match_values"]],
                     on="family")
    label_ok = [ml is None or (isinstance(ml, str) and re.fullmatch(mv, lab.get(ml, "")) is not None)
                for ml, mv, lab in zip(m["match_label"], m["match_values"], m["labels"], strict=True)]
    suffix_ok = (((m["kind"] == "histogram") & m["suffix"].isin(["bucket", "count", "sum", "created"]))
                 | ((m["kind"] == "counter") & m["suffix"].isin(["total", "created", ""]))
                 | (m["kind"].isin(["gauge", "info"]) & (m["suffix"] == "")))
    m = m[np.asarray(label_ok) & suffix_ok].copy()
    best = m.groupby(["replica", "signal"])["priority"].transform("min")
    m = m[m["priority"] == best].copy()
    m["le"] = m["le"] * m["scale"]
    return m[["code", "identity", "signal", "kind", "scale", "suffix", "le", "group", "replica", "path"]]


def _windows(ts: pd.Series, window_s: int) -> pd.Series:
    """Left-open, right-closed windows: the start of the window holding ``ts`` (time_bucket of ts - 1 µs)."""
    width = pd.Timedelta(seconds=window_s)
    return ORIGIN + ((ts - pd.Timedelta(microseconds=1) - ORIGIN) // width) * width


def pandas_cube(parquet: str | Path, window_s: int = 300, path_labels: Sequence[str] = ("model_name",)
                ) -> pd.DataFrame:
    """The cube of a long-format Parquet file, ordered as ``app.cube.cube_frame`` orders it."""
    df = pd.read_parquet(parquet, columns=["timestamp", "metric", "labels", "value"])
    df["ts"] = df["timestamp"].dt.tz_convert(None).astype("datetime64[us]")
    df["metric"] = df["metric"].astype("category")
    df["labels"] = df["labels"].astype("category")
    pair = df.groupby(["metric", "labels"], observed=True).ngroup()
    df["code"] = pair.to_numpy()
    pairs = df.drop_duplicates("code")[["code", "metric", "labels"]].astype({"metric": str, "labels": str})
    signals = _series_table(pairs, path_labels)

    # one series per identity (labels in another order are the same series); one value per (series, ts)
    ident = signals.drop_duplicates("code")[["code", "identity"]]
    df = df[["code", "ts", "value"]].merge(ident, on="code")
    points = df.groupby(["identity", "ts"], as_index=False)["value"].max()
    meta = signals.drop_duplicates(["identity", "kind", "suffix", "group", "replica"])[
        ["identity", "kind", "suffix", "group", "replica"]].copy()
    # what a sample of the series means, as a small number: 1 a counter/bucket/count (a decrease is a
    # reset), 2 `_created` (a change is a reset), 3 a histogram `_sum`, 4 a gauge
    is_counter = meta["kind"].isin(["histogram", "counter"])
    meta["rule"] = np.select(
        [is_counter & meta["suffix"].isin(["bucket", "count", "total", ""]), is_counter & (meta["suffix"] == "created"),
         is_counter, meta["kind"].isin(["gauge", "info"])], [1, 2, 3, 4], 0)
    points = points.merge(meta[["identity", "rule", "group", "replica"]], on="identity")

    scrapes = points.groupby("replica").agg(first_ts=("ts", "min"), scrapes=("ts", "nunique")).reset_index()

    counters = points[points["rule"].isin([1, 2, 3])].sort_values(["identity", "ts"])
    counters["prev"] = counters.groupby("identity")["value"].shift()
    has_prev = counters["prev"].notna()
    decreased = has_prev & (((counters["rule"] == 1) & (counters["value"] < counters["prev"]))
                            | ((counters["rule"] == 2) & (counters["value"] != counters["prev"])))
    counters["group_reset"] = decreased.groupby([counters["group"], counters["ts"]]).transform("any")
    created = (counters[counters["rule"] == 2].groupby(["group", "ts"])["value"].max()
               .rename("created_at").reset_index())
    counters = counters.merge(created, on=["group", "ts"], how="left").merge(scrapes, on="replica")
    counters = counters[counters["rule"] != 2].copy()
    created_after = counters["created_at"].notna() & (
        pd.to_datetime(counters["created_at"], unit="s") > counters["first_ts"])
    first = counters["prev"].isna()
    counts_first = first & ((counters["scrapes"] == 1) | created_after)
    counters["delta"] = np.where(first, np.where(counts_first, counters["value"], 0.0),
                                 np.where(counters["group_reset"], counters["value"],
                                          counters["value"] - counters["prev"]))
    counters["is_reset"] = ~first & counters["group_reset"]
    counters["window_start"] = _windows(counters["ts"], window_s)
    inc = counters.groupby(["identity", "window_start"], as_index=False).agg(
        increase=("delta", "sum"), resets=("is_reset", "sum"))

    gauges = points[points["rule"] == 4].copy()
    gauges["window_start"] = _windows(gauges["ts"], window_s)
    gstats = gauges.groupby(["identity", "window_start"], as_index=False).agg(
        gauge_min=("value", "min"), gauge_sum=("value", "sum"), gauge_n=("value", "count"),
        gauge_max=("value", "max"))

    sw_counters = inc.merge(signals.drop_duplicates(["identity", "signal"]), on="identity")
    sw_gauges = gstats.merge(signals.drop_duplicates(["identity", "signal"]), on="identity")
    return _build(sw_counters, sw_gauges)


def _build(counters: pd.DataFrame, gauges: pd.DataFrame) -> pd.DataFrame:
    """cube__build: bucket envelope and repairs, histogram totals, counters, gauges, replicas, resets."""
    keys = ["window_start", "path", "signal"]
    parts = []
    buckets = (counters[(counters["kind"] == "histogram") & (counters["suffix"] == "bucket")]
               .groupby(keys + ["le"], as_index=False)["increase"].sum()
               .sort_values(keys + ["le"]))
    buckets["value"] = buckets.groupby(keys)["increase"].cummax()
    parts.append(buckets.assign(stat="increase")[keys + ["le", "stat", "value"]])
    repaired = buckets[buckets["value"] > buckets["increase"]].groupby(keys, as_index=False).size()
    parts.append(repaired.rename(columns={"size": "value"}).assign(le=np.nan, stat="repairs"))
    totals = counters[(counters["kind"] == "histogram") & counters["suffix"].isin(["count", "sum"])].copy()
    totals["stat"] = np.where(totals["suffix"] == "count", "count", "sum")
    totals["weighted"] = totals["increase"] * np.where(totals["suffix"] == "sum", totals["scale"], 1.0)
    parts.append(totals.groupby(keys + ["stat"], as_index=False)["weighted"].sum()
                 .rename(columns={"weighted": "value"}).assign(le=np.nan))
    plain = counters[counters["kind"] == "counter"].groupby(keys, as_index=False)["increase"].sum()
    parts.append(plain.rename(columns={"increase": "value"}).assign(le=np.nan, stat="increase"))
    g = gauges[gauges["kind"] == "gauge"].copy()
    g["smin"], g["ssum"], g["smax"] = g["gauge_min"] * g["scale"], g["gauge_sum"] * g["scale"], g["gauge_max"] * g["scale"]
    gs = g.groupby(keys, as_index=False).agg(min=("smin", "min"), total=("ssum", "sum"), n=("gauge_n", "sum"),
                                             max=("smax", "max"))
    gs["mean"] = gs["total"] / gs["n"]
    for stat in ("min", "mean", "max"):
        parts.append(gs[keys + [stat]].rename(columns={stat: "value"}).assign(le=np.nan, stat=stat))
    both = pd.concat([counters[["window_start", "path", "replica"]], gauges[["window_start", "path", "replica"]]])
    replicas = both.groupby(["window_start", "path"], as_index=False)["replica"].nunique()
    parts.append(replicas.rename(columns={"replica": "value"}).assign(signal=None, le=np.nan, stat="replicas"))
    resets = (counters[counters["resets"] > 0].groupby(keys, as_index=False)["group"].nunique()
              .rename(columns={"group": "value"}).assign(le=np.nan, stat="resets"))
    parts.append(resets)
    cube = pd.concat([p[CUBE_COLUMNS] for p in parts if len(p)], ignore_index=True)
    cube["value"] = cube["value"].astype(float)
    cube["le"] = cube["le"].astype(float)
    return normalise(cube)


def normalise(cube: pd.DataFrame) -> pd.DataFrame:
    """Plain dtypes and the order of ``app.cube.cube_frame`` (window, path, signal nulls first, stat,
    le nulls first), so two cubes compare with ``assert_frame_equal``."""
    out = pd.DataFrame({
        "window_start": pd.to_datetime(cube["window_start"]).astype("datetime64[us]"),
        "path": cube["path"].astype(object),
        "signal": cube["signal"].astype(object).where(cube["signal"].notna(), None),
        "le": cube["le"].astype(float),
        "stat": cube["stat"].astype(object),
        "value": cube["value"].astype(float),
    })
    out["_sig"] = out["signal"].fillna("")
    out["_sn"] = out["signal"].notna()
    out["_ln"] = out["le"].notna()
    out = out.sort_values(["window_start", "path", "_sn", "_sig", "stat", "_ln", "le"], kind="stable")
    return out.drop(columns=["_sig", "_sn", "_ln"]).reset_index(drop=True)


def compare(headroom: pd.DataFrame, reference: pd.DataFrame) -> str | None:
    """None when the two cubes are identical; else a short description of the first difference."""
    a, b = normalise(headroom), normalise(reference)
    if len(a) != len(b):
        ka = set(map(tuple, a[["window_start", "path", "signal", "le", "stat"]].astype(str).to_numpy()))
        kb = set(map(tuple, b[["window_start", "path", "signal", "le", "stat"]].astype(str).to_numpy()))
        only_a, only_b = sorted(ka - kb)[:3], sorted(kb - ka)[:3]
        return f"{len(a)} rows against {len(b)}; only in Headroom: {only_a}; only in the reference: {only_b}"
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    except AssertionError as exc:
        return str(exc).splitlines()[0] + " " + " ".join(str(exc).splitlines()[1:4])
    return None


def series_windows_by_sorting(con: duckdb.DuckDBPyConnection, dataset_ids: Sequence[int], window_s: int
                              ) -> pd.DataFrame:
    """The cube's per-series windows by the query's former formulation
    (``app/bench/queries/bench__series_windows_by_sorting.sql``), by series and window: the oracle the cube's
    ``cube__series_windows`` is tested against. Run it on the connection of a cube build (it reads
    the TEMP ``cube_series`` that ``app.cube.build_into_temp`` leaves)."""
    frame = sql.df(con, sql.get("bench__series_windows_by_sorting", QUERIES_DIR), dataset_ids=[int(i) for i in dataset_ids],
                   window_s=int(window_s))
    return frame.sort_values(["series_id", "window_start"], ignore_index=True)


def counter_magnitudes(ws: Any, dataset_ids: Sequence[int], path_labels: Sequence[str]) -> pd.DataFrame:
    """Per cube cell key of increases (path, signal, le, stat), the sum over its series of the largest
    value each took (``app/bench/queries/bench__counter_magnitudes.sql``): what a store's precision
    is relative to. ``le`` is -1 where the cube has none (as the comparison keys it)."""
    ids = [int(i) for i in dataset_ids]
    with ws.transaction() as con:
        sql.materialize(con, "signals__series", "cube_series", dataset_ids=ids, path_labels=list(path_labels))
        frame = sql.df(con, sql.get("bench__counter_magnitudes", QUERIES_DIR), dataset_ids=ids)
        con.execute("drop table cube_series")
    frame["le"] = frame["le"].fillna(-1.0)
    return frame

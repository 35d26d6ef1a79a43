"""Stage samples held in a pandas DataFrame (simulator output, tests, other tools' frames).

Columns: ``metric`` (sample name), ``labels`` (dict, or a JSON object string), ``ts``
(datetime, UTC, or Unix seconds) and ``value``. The frame is scanned by DuckDB in place; only a
column of dicts is turned into JSON strings first.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd

from app.ingest.base import Staged, drop_temp


def _prepared(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[["metric", "labels", "ts", "value"]]
    first = out["labels"].iloc[0] if len(out) else None
    if isinstance(first, dict):
        out = out.assign(labels=out["labels"].map(lambda d: json.dumps(d, sort_keys=True)))
    ts = out["ts"]
    if not pd.api.types.is_datetime64_any_dtype(ts):
        out = out.assign(ts=pd.to_datetime(ts.astype(float), unit="s"))
    elif getattr(ts.dt, "tz", None) is not None:
        out = out.assign(ts=ts.dt.tz_convert("UTC").dt.tz_localize(None))
    return out


def digest_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> str:
    """An order-independent content digest of the frame's samples (vectorized, for idempotent loads)."""
    con.register("frame_digest_input", _prepared(frame))
    try:
        n, h = con.execute(
            "select count(*), sum(hash(metric::varchar, labels::varchar, ts::timestamp, value::double)::hugeint) "
            "from frame_digest_input").fetchall()[0]
    finally:
        con.unregister("frame_digest_input")
    return f"frame:{n}:{h}"


def stage_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> Staged:
    """Create ``stage_keys``/``stage_points``/``stage_families`` from ``frame``."""
    con.register("frame_input", _prepared(frame))
    drop_temp(con, "stage_points")  # a long file's reader leaves a view of that name until its load ends
    try:
        con.execute(
            "create or replace temp table stage_points as "
            # pandas' NaN reaches DuckDB as NULL (a missing value, to pandas): it is a NaN to the checks
            "select metric::varchar || labels::varchar as series_key, ts::timestamp as ts, "
            "coalesce(value::double, 'nan'::double) as value, "
            "row_number() over () as src_line from frame_input"
        )
        con.execute(
            "create or replace temp table stage_keys as "
            "select series_key, metric, cast(cast(labels as json) as map(varchar, varchar)) as labels from ("
            "select distinct metric::varchar || labels::varchar as series_key, metric::varchar as metric, "
            "labels::varchar as labels from frame_input)"
        )
    finally:
        con.unregister("frame_input")
    con.execute("create or replace temp table stage_families (family varchar, mtype varchar, help varchar)")
    return Staged(format="frame", time_source="samples")

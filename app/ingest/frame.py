"""Stage samples held in a pandas DataFrame (simulator output, tests, other tools' frames).

Columns: ``metric`` (sample name), ``labels`` (dict, or a JSON object string), ``ts``
(datetime, UTC, or Unix seconds) and ``value``.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd

from app.ingest.base import Staged


def stage_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> Staged:
    """Create ``stage_keys``/``stage_points``/``stage_families`` from ``frame``."""
    labels = frame["labels"].map(lambda d: d if isinstance(d, str) else json.dumps(d, sort_keys=True))
    ts = frame["ts"]
    if not pd.api.types.is_datetime64_any_dtype(ts):
        ts = pd.to_datetime(ts.astype(float), unit="s")
    elif getattr(ts.dt, "tz", None) is not None:
        ts = ts.dt.tz_convert("UTC").dt.tz_localize(None)
    staged = pd.DataFrame({
        "metric": frame["metric"].astype(str).to_numpy(),
        "labels_json": labels.to_numpy(),
        "ts": ts.to_numpy(),
        "value": frame["value"].astype(float).to_numpy(),
        "src_line": range(1, len(frame) + 1),
    })
    con.register("frame_input", staged)
    try:
        con.execute(
            "create or replace temp table stage_points as "
            "select metric || labels_json as series_key, ts::timestamp as ts, value, src_line from frame_input"
        )
        con.execute(
            "create or replace temp table stage_keys as "
            "select distinct metric || labels_json as series_key, metric, "
            "cast(cast(labels_json as json) as map(varchar, varchar)) as labels from frame_input"
        )
    finally:
        con.unregister("frame_input")
    con.execute("create or replace temp table stage_families "
                "(family varchar, mtype varchar, help varchar)")
    return Staged(format="frame", time_source="samples")

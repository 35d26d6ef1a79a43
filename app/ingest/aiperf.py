"""NVIDIA AIPerf ``server_metrics_export.jsonl``: the engine's ``/metrics`` as AIPerf scraped it.

One line per scrape of one endpoint: ``{"endpoint_url", "timestamp_ns", "metrics": {"<family>":
[entry, ...]}}``. A counter/gauge entry ``{"labels": {...}|null, "value": v}`` becomes one sample
named as its family (counters may be named with or without ``_total``: both are accepted, the
series classifier treats ``x_total`` and a bare counter ``x`` as the same signal). A histogram entry
``{"labels", "buckets"|"histogram": {"<le>": cumulative count}, "sum", "count"}`` becomes
``<family>_bucket{le}`` samples (``+Inf`` = count added when missing), ``_count`` and ``_sum``.
The ``host:port`` of ``endpoint_url`` becomes the ``instance`` label. Null values (AIPerf's JSON
writes NaN/Inf as null) are skipped with a note.
"""

from __future__ import annotations

import duckdb

from app import sql
from app.ingest.base import Source, Staged, empty_tables, fail, read_json


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage an AIPerf server-metrics JSON-lines export."""
    read_json(con, src, "ingest__aiperf_entries", "aiperf_entries", "an AIPerf server_metrics_export.jsonl")
    n_null, n_shapeless, shapeless_family, n_lines, first_untimed = sql.rows(con, "ingest__aiperf_summary")[0]
    if first_untimed is not None:
        raise fail(src, "the record has no timestamp_ns", line=first_untimed)
    notes = []
    if n_null:
        notes.append(f"skipped {n_null} entries with a null value (NaN or Inf in AIPerf's JSON)")
    if n_shapeless:
        notes.append(
            f"skipped {n_shapeless} entries with neither a value nor buckets (e.g. {shapeless_family})"
        )
    sql.materialize(con, "ingest__aiperf_samples", "aiperf_samples")
    sql.materialize(con, "ingest__aiperf_points", "stage_points")
    sql.materialize(con, "ingest__aiperf_keys", "stage_keys")
    sql.materialize(con, "ingest__aiperf_families", "stage_families")
    empty_tables(con, ("aiperf_entries", "aiperf_samples"))
    return Staged(format="aiperf-server-metrics", time_source="samples", notes=notes)


__all__ = ["read"]

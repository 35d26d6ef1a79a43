"""Prometheus HTTP API JSON: ``/api/v1/query_range`` (matrix) and ``/api/v1/query`` (vector) responses.

Accepted: one response, a JSON array of responses (e.g. one instant query per timestamp), or a bare
``result`` list as prometheus-api-client returns it. Values are strings (``"NaN"``, ``"+Inf"``),
timestamps float Unix seconds. ``status: "error"`` fails with the server's error text; native
histogram samples (``histograms``) are skipped with a note naming the series. Parsed by DuckDB's
JSON reader (``queries/ingest/ingest__promjson_*.sql``), never a Python loop over samples.

Prometheus itself only ever writes float seconds here (its API encodes every sample time as
seconds with millisecond decimals), so times in milliseconds come from a script that rewrote the
response. Their magnitude cannot be mistaken (1.7e12 s would be the year 55 000), so they are read as
milliseconds, with a note; the median time decides, so one stray sample cannot flip the unit.
"""

from __future__ import annotations

import duckdb

from app import sql
from app.ingest.base import IngestError, Source, Staged, empty_tables, fail, read_json, shorten

MAX_REPORTED = 4
# plausible sample times in seconds (the year 5138); at or above, the unit is milliseconds
SECONDS_MAX = 1e11


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a Prometheus API JSON file."""
    read_json(con, src, "ingest__promjson_responses", "promjson_responses", "a Prometheus API JSON file")
    sql.materialize(con, "ingest__promjson_series", "promjson_series")
    problems = sql.rows(con, "ingest__promjson_problems", max_rows=MAX_REPORTED)
    if problems:
        raise _problem_error(src, problems)
    notes = []
    n_hist, hist_series = sql.rows(con, "ingest__promjson_skipped")[0]
    if n_hist:
        names = ", ".join(shorten(s, 80) for s in hist_series)
        notes.append(f"skipped native histogram samples (not supported) of {n_hist} series: {names}")
    ts_median, _ = sql.rows(con, "ingest__promjson_time_stats")[0]
    unit_us = 1e6
    if ts_median is not None and abs(ts_median) >= SECONDS_MAX:
        unit_us = 1e3
        notes.append(f"Prometheus API timestamps are float seconds, but these look like milliseconds (median "
                     f"{ts_median:.0f}): read as ms")
    sql.materialize(con, "ingest__promjson_points", "stage_points", ts_unit_us=unit_us)
    sql.materialize(con, "ingest__promjson_keys", "stage_keys")
    con.execute("create or replace temp table stage_families (family varchar, mtype varchar, help varchar)")
    empty_tables(con, ("promjson_responses", "promjson_series"))
    return Staged(format="prometheus-api-json", time_source="samples", notes=notes)


def _problem_error(src: Source, problems: list[tuple]) -> IngestError:
    response_no, series_no, series, problem, n_bad = problems[0]
    more = f" ({n_bad - 1} more problem(s))" if n_bad > 1 else ""
    if series is not None:
        return fail(src, f"{problem}{more}", series=f"{series_no} {shorten(series, 100)}")
    where = f"response {response_no}: " if response_no > 1 or n_bad > 1 else ""
    return fail(src, f"{where}{problem}{more}")


__all__ = ["read"]

"""VictoriaMetrics ``/api/v1/export`` JSON lines: ``{"metric":{...},"values":[...],"timestamps":[ms...]}``.

One series per line; values are JSON numbers (strings such as ``"NaN"`` accepted), timestamps
integer Unix milliseconds; times whose median is below 1e11 are seconds a script wrote instead (as
milliseconds they would fall in 1973), read as seconds with a note. Parsed by DuckDB's JSON reader
(``queries/ingest/ingest__vm_*.sql``).
"""

from __future__ import annotations

import duckdb

from app import sql
from app.ingest.base import Source, Staged, also_bad, empty_tables, fail, read_json, shorten
from app.ingest.promjson import SECONDS_MAX

MAX_REPORTED = 4


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a VictoriaMetrics JSON-lines export."""
    read_json(con, src, "ingest__vm_series", "vm_series", "a VictoriaMetrics JSON-lines export")
    problems = sql.rows(con, "ingest__vm_problems", max_rows=MAX_REPORTED)
    if problems:
        line_no, display, problem, n_bad = problems[0]
        more = also_bad([p[0] for p in problems[1:]], n_bad)
        raise fail(src, f"series {shorten(display, 100)}: {problem}{more}", line=line_no)
    notes = []
    ts_median, _ = sql.rows(con, "ingest__vm_time_stats")[0]
    unit_us = 1e3
    if ts_median is not None and 0 < abs(ts_median) < SECONDS_MAX:
        unit_us = 1e6
        notes.append(f"victoriametrics-jsonl timestamps must be milliseconds but these look like seconds (median "
                     f"{ts_median:.0f}); read as s")
    sql.materialize(con, "ingest__vm_points", "stage_points", ts_unit_us=unit_us)
    sql.materialize(con, "ingest__vm_keys", "stage_keys")
    con.execute("create or replace temp table stage_families (family varchar, mtype varchar, help varchar)")
    empty_tables(con, ("vm_series",))
    return Staged(format="victoriametrics-jsonl", time_source="samples", notes=notes)


__all__ = ["read"]

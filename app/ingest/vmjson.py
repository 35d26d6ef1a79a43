"""VictoriaMetrics ``/api/v1/export`` JSON lines: ``{"metric":{...},"values":[...],"timestamps":[ms...]}``.

One series per line; values are JSON numbers (strings such as ``"NaN"`` accepted), timestamps
integer Unix milliseconds. Parsed by DuckDB's JSON reader (``queries/ingest__vm_*.sql``).
"""

from __future__ import annotations

import duckdb

from app import sql
from app.ingest.base import Source, Staged, fail, read_json
from app.ingest.text import also_bad, empty_tables, shorten

MAX_REPORTED = 4


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a VictoriaMetrics JSON-lines export."""
    read_json(con, src, "ingest__vm_series", "vm_series", "a VictoriaMetrics JSON-lines export")
    problems = sql.rows(con, "ingest__vm_problems", max_rows=MAX_REPORTED)
    if problems:
        line_no, display, problem, n_bad = problems[0]
        more = also_bad([p[0] for p in problems[1:]], n_bad)
        raise fail(src, f"series {shorten(display, 100)}: {problem}{more}", line=line_no)
    sql.materialize(con, "ingest__vm_points", "stage_points")
    sql.materialize(con, "ingest__vm_keys", "stage_keys")
    con.execute("create or replace temp table stage_families (family varchar, mtype varchar, help varchar)")
    empty_tables(con, ("vm_series",))
    return Staged(format="victoriametrics-jsonl", time_source="samples")


__all__ = ["read"]

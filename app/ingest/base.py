"""The contract every format reader meets, and the helpers the readers share (an error's wording, rows
numbered in file order, helper tables freed).

A reader turns one file into TEMP tables on the load's connection (created with
``create or replace temp table``, inside the load's transaction, so a failure leaves nothing behind):

- ``stage_keys``:   ``series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)``
  one row per distinct raw series key of the file. ``metric`` is the sample name as exposed
  (``vllm:time_to_first_token_seconds_bucket``, ``vllm:prompt_tokens_total``); ``labels``
  excludes ``__name__`` and includes ``le``/``quantile``, values unescaped.
- ``stage_points``: ``series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT``
  one row per sample; ``ts`` is UTC (never NULL once the reader returns: a snapshot without
  sample timestamps gets its time from the file name or modification time); ``src_line`` is
  the 1-based line (or record) of the file the sample came from. A table, or a TEMP view over
  the reader's own tables when copying the samples costs more than reading them again (long
  CSV/Parquet: the load's insert reads the file once); the reader then sets ``Staged.n_points``
  and ``Staged.release``, and a check that changes the samples first makes it a table
  (``points_as_table``).

and ``stage_families``: ``family VARCHAR, mtype VARCHAR, help VARCHAR`` from
``# TYPE``/``# HELP`` lines (``mtype`` one of counter, gauge, histogram, summary, info,
stateset, gaugehistogram, unknown); empty when the format carries no types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from app import sql

FORMATS = (
    "prometheus-text",  # text exposition 0.0.4
    "openmetrics",  # OpenMetrics 1.0 text
    "prometheus-api-json",  # /api/v1/query_range (matrix) or /api/v1/query (vector), or a JSON array of them
    "victoriametrics-jsonl",  # /api/v1/export JSON lines
    "promtool-dump",  # promtool tsdb dump (prom format)
    "csv",  # long-format CSV
    "parquet",  # long-format Parquet
    "aiperf-server-metrics",  # AIPerf server_metrics_export.jsonl
)

TIME_SOURCES = ("samples", "filename", "mtime", "comment")
_JSON_LINE_RE = re.compile(r"Malformed JSON in file .*, at byte \d+ in line (?P<line>\d+): (?P<why>.*)$")
# one JSON document (not lines): its byte offset is the place to name
_JSON_DOC_RE = re.compile(r"Malformed JSON in file .*, at byte (?P<byte>\d+) in record/value \d+: (?P<why>.*)$")

class IngestError(Exception):
    """A file could not be read. The message names the file, the line or series, and what is wrong."""

    def __init__(self, file: str, what: str, line: int | None = None, series: str | None = None):
        self.file, self.what, self.line, self.series = file, what, line, series
        where = f"line {line}" if line is not None else (f"series {series}" if series else "")
        super().__init__(f"{file}: {where + ': ' if where else ''}{what}")


@dataclass
class Staged:
    """What a reader produced: the names of its DuckDB tables and how it read the file."""

    format: str
    time_source: str = "samples"
    gzip: bool = False
    notes: list[str] = field(default_factory=list)
    series_staged: bool = False  # ``stage_series`` (ingest__staged_series) is made and current
    # how many samples ``stage_points`` holds, when the reader knows it without counting them (a
    # view's); None: count them
    n_points: int | None = None
    # families named by metadata lines (# HELP, # UNIT, # TYPE), whatever their samples: a file of
    # metadata alone is a valid exposition (a server that has served nothing yet)
    n_metadata_families: int = 0
    # frees what a view ``stage_points`` reads, once the load has stored the samples
    release: Callable[[duckdb.DuckDBPyConnection], None] | None = field(default=None, repr=False)


@dataclass
class Source:
    """A file to read: its path on disk (already decompressed if it was gzip) and the name to report."""

    path: Path  # readable, uncompressed
    display: str  # file name as the user gave it
    original: Path  # the path as given (its name and mtime may carry the snapshot time)
    gzip: bool = False
    notes: list[str] = field(default_factory=list)  # how the bytes were made readable (UTF-16 decoded)

    def head(self, n: int = 65536) -> bytes:
        with self.path.open("rb") as fh:
            return fh.read(n)


def json_object_limit(src: Source) -> int:
    """Largest JSON object a reader accepts: the file's size (a JSON object cannot be larger), at least
    1 MiB; DuckDB sizes its read buffer by this, so 2 GiB regardless would not fit a bounded memory."""
    return max(1 << 20, min(src.path.stat().st_size + 1024, (1 << 31) - 1))


def read_json(con: duckdb.DuckDBPyConnection, src: Source, query: str, table: str, what: str) -> None:
    """Materialize a JSON reader's ``query`` over ``src`` as ``table``; a file DuckDB cannot read as that
    JSON fails as ``not <what>: <DuckDB's first line>``."""
    try:
        sql.materialize(con, query, table, path=str(src.path), max_object_size=json_object_limit(src))
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        m = _JSON_LINE_RE.search(first)
        if m:  # DuckDB counts the lines of a JSON-lines file from 2 (2.0): name the line as an editor does
            end = " (the file ends mid-object: truncated?)" if "end of data" in m["why"] else ""
            raise fail(src, f"not {what}: malformed JSON: {m['why'].rstrip('. ')}{end}",
                       line=int(m["line"]) - 1) from None
        m = _JSON_DOC_RE.search(first)
        if m:  # DuckDB's message names the path it read (a temp file, for an upload or a gzip): not shown
            end = " (the file ends mid-object: truncated?)" if "end of data" in m["why"] else ""
            raise fail(src, f"not {what}: malformed JSON at byte {m['byte']}: {m['why'].rstrip('. ')}{end}") from None
        raise fail(src, f"not {what}: " + first.replace(str(src.path), src.display)) from None


def fail(src: Source, what: str, line: int | None = None, series: str | None = None) -> IngestError:
    return IngestError(src.display, what, line=line, series=series)


def _temp_kind(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """Whether the TEMP object ``name`` is a "view", a "table" or absent (None) on this connection."""
    row = con.execute("select table_type from information_schema.tables where table_catalog = 'temp' "
                      "and table_schema = 'main' and table_name = $name", {"name": name}).fetchone()
    return None if row is None else ("view" if row[0] == "VIEW" else "table")


def drop_temp(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop the TEMP table or view ``name`` (an identifier from our code) whichever it is, so that a
    reader may create it either way."""
    kind = _temp_kind(con, name)
    if kind is not None:
        con.execute(f"drop {kind} {name}")


def points_as_table(con: duckdb.DuckDBPyConnection, staged: Staged) -> None:
    """Make ``stage_points`` a table if a reader left it a view: a check is about to add or delete
    samples. Its count is then the table's."""
    if _temp_kind(con, "stage_points") == "view":
        con.execute("create or replace temp table stage_points_copy as select * from stage_points")
        con.execute("drop view stage_points")
        con.execute("alter table stage_points_copy rename to stage_points")
    staged.n_points = None


# -- helpers the readers, the load and the cube share ------------------------------------------
def shorten(text: str, limit: int = 120) -> str:
    """``text`` cut in the middle to at most ``limit`` characters, newlines shown as ``\\n``."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 25] + " … " + text[-20:]


def also_bad(others: list[int], n_bad: int, unit: str = "line") -> str:
    """`` (also bad: lines 4, 9 and 3 more)`` for an error message; empty when there is one bad item."""
    if n_bad <= 1:
        return ""
    more = f" and {n_bad - 1 - len(others)} more" if n_bad - 1 > len(others) else ""
    return f" (also bad: {unit}{'s' if n_bad > 2 else ''} {', '.join(map(str, others))}{more})"


def number_rows(con: duckdb.DuckDBPyConnection, table: str, view: str, column: str, first: int) -> None:
    """Register ``view``: the rows of ``table`` with ``column`` numbering them in table order from
    ``first``. A file copied into a table by one scan keeps the file's order (DuckDB's order
    preservation), so a row's position is its number; numbering during the copy with
    row_number() over () would make the copy run on one thread. Rowids count from a fixed offset
    inside a transaction, hence the minimum. ``table``/``view``/``column`` are our own identifiers."""
    con.register(view, con.sql(f"select rowid - (select min(rowid) from {table}) + $first as {column}, * "
                               f"from {table}", params={"first": first}))


def empty_tables(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...]) -> None:
    """Free a reader's helper tables but keep them, empty, so every query that reads them still binds
    on this connection (the SQL contract test binds each query on a connection that loaded a file of
    each format). ``tables`` are our own identifiers."""
    for table in tables:
        con.execute(f"create or replace temp table {table} as select * from {table} limit 0")


__all__ = ["FORMATS", "IngestError", "Source", "Staged", "also_bad", "drop_temp", "duckdb", "empty_tables", "fail",
           "json_object_limit", "number_rows", "points_as_table", "read_json", "shorten"]

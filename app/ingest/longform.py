"""Long-format CSV and Parquet: one sample per row.

Columns (names matched case-insensitively; the first listed spelling present wins):

- time: ``timestamp`` | ``ts`` | ``time`` (required);
- metric name: ``metric`` | ``__name__`` | ``name`` | ``metric_name`` (required unless the labels
  JSON holds ``__name__``);
- value: ``value`` (required), a number; ``NaN``, ``+Inf``, ``-Inf`` accepted;
- labels: ``labels``, a JSON object string (CSV or Parquet) or a MAP/STRUCT column (Parquet),
  and/or one column per label: every other column is a label named as the column. An empty value
  is an absent label; a label column wins over the same name in ``labels``; ``__name__`` is never a
  label.

Time values: ISO-8601 date-times (``2026-11-29T10:00:00Z``, ``2026-11-29 10:00:00.5+01:00``; UTC
unless an offset or ``Z`` is given), Parquet/CSV timestamps, or Unix numbers whose unit follows
their magnitude: below 1e11 seconds (~1e9 today), below 1e14 milliseconds (~1e12), below 1e17
microseconds (~1e15), else nanoseconds (~1e18).

CSV: the delimiter (``,``, ``;``, tab, ``|``) is detected; a Grafana "Download for Excel" first
line ``sep=,`` is honoured; in a ``;``-separated file (as Excel saves CSV in comma-decimal locales)
a value with a decimal comma (``1,5``, ``1.234,5``) is read as a number, with a note; ``src_line`` is the line of the row (header = line 1, assuming no
quoted field spans lines). Parquet: ``src_line`` is the row number.

The file's own column names never enter SQL text: Python only decides the role of each column and
passes names as ``$parameters`` (``row[$name]`` on the row struct); per-row work is in
``queries/ingest/ingest__long_*.sql``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from app import sql
from app.ingest.base import Source, Staged, also_bad, drop_temp, empty_tables, fail, number_rows, shorten
from app.ingest.detect import METRIC_COLUMNS, TS_COLUMNS, VALUE_COLUMNS

LABELS_COLUMN = "labels"
MAX_REPORTED = 4
_HELPERS = ("long_keys",)
ROW_NUMBER_COLUMN = "file_row_number"


@dataclass
class Roles:
    """Which column of the file plays which part."""

    ts: str
    value: str
    metric: str | None
    labels: str | None
    label_columns: list[str] = field(default_factory=list)


def assign_roles(src: Source, names: list[str]) -> Roles:
    """Map the file's column names to roles; raise ``IngestError`` if a required one is missing."""
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)

    def first(candidates: tuple[str, ...]) -> str | None:
        return next((by_lower[c] for c in candidates if c in by_lower), None)

    ts, value, metric = first(TS_COLUMNS), first(VALUE_COLUMNS), first(METRIC_COLUMNS)
    labels = by_lower.get(LABELS_COLUMN)
    if ts is None or value is None:
        missing = "time (timestamp, ts or time)" if ts is None else "value"
        raise fail(src, f"no {missing} column among {', '.join(names)}: expected long format with columns "
                        "timestamp, metric, labels and/or one column per label, value")
    if metric is None and labels is None:
        raise fail(src, f"no metric-name column (metric, __name__, name or metric_name) among {', '.join(names)}")
    taken = {ts, value, metric, labels}
    label_columns = [n for n in names if n not in taken and n.lower() != "__name__"]
    return Roles(ts=ts, value=value, metric=metric, labels=labels, label_columns=label_columns)


def read_csv(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a long-format CSV file."""
    first = src.head(4096).decode("utf-8", "replace").lstrip("\ufeff").split("\n", 1)[0].strip()
    options: dict[str, object] = {"path": str(src.path), "skip": 0}
    reader = "read_csv($path, header = true, all_varchar = true, skip = $skip)"
    first_line = 2  # the header is line 1
    if first.lower().startswith("sep=") and len(first) >= 5:  # Grafana's "Download for Excel"
        options.update(skip=1, delim=first[4])
        reader = "read_csv($path, header = true, all_varchar = true, skip = $skip, delim = $delim)"
        first_line = 3
    try:
        described = con.execute(f"describe select * from {reader}", options).fetchall()
    except duckdb.Error as exc:
        raise fail(src, "cannot read as CSV: " + str(exc).splitlines()[0]) from None
    roles = assign_roles(src, [row[0] for row in described])
    header = src.head(4096).decode("utf-8", "replace").lstrip("\ufeff").splitlines()[first_line - 2:first_line - 1]
    semicolons = options.get("delim") == ";" or bool(header and ";" in header[0] and "," not in header[0])
    return _stage(con, src, reader, options, roles, {}, first_line, "csv", decimal_comma=semicolons)


def read_parquet(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a long-format Parquet file."""
    options: dict[str, object] = {"path": str(src.path)}
    reader = "read_parquet($path)"
    try:
        described = con.execute(f"describe select * from {reader}", options).fetchall()
    except duckdb.Error as exc:
        raise fail(src, "cannot read as Parquet: " + str(exc).splitlines()[0]) from None
    roles = assign_roles(src, [row[0] for row in described])
    types = {row[0]: str(row[1]).upper() for row in described}
    if ROW_NUMBER_COLUMN in {name.lower() for name in types}:  # the file's own column of that name wins
        return _stage(con, src, reader, options, roles, types, 1, "parquet")
    numbered = "read_parquet($path, file_row_number = true)"
    return _stage(con, src, numbered, options, roles, types, 1, "parquet", row_number=ROW_NUMBER_COLUMN)


def _stage(con: duckdb.DuckDBPyConnection, src: Source, reader: str, options: dict[str, object],
           roles: Roles, types: dict[str, str], first_line: int, fmt: str, row_number: str | None = None,
           decimal_comma: bool = False) -> Staged:
    # plumbing: pick the columns by name through parameters (row struct `long_row[$p]`), so the
    # file's column names never become SQL text; the identifiers below are our own
    params = dict(options, ts_col=roles.ts, value_col=roles.value)
    metric_expr = "long_row[$metric_col]::varchar" if roles.metric else "null::varchar"
    if roles.metric:
        params["metric_col"] = roles.metric
    labels_expr = "null::varchar"
    if roles.labels:
        params["labels_col"] = roles.labels
        kind = types.get(roles.labels, "VARCHAR")
        nested = kind.startswith(("MAP", "STRUCT"))
        labels_expr = "to_json(long_row[$labels_col])::varchar" if nested else "long_row[$labels_col]::varchar"
    items = []
    for i, name in enumerate(roles.label_columns):
        params[f"label_{i}"] = name
        items.append(f"long_row[$label_{i}]::varchar")
    label_list = f"[{', '.join(items)}]" if items else "[]::varchar[]"
    # a Parquet/CSV timestamp column is taken as it is (UTC); only text and Unix numbers are parsed.
    # epoch_us, not timezone('UTC', ...): the same instant without a per-row time-zone lookup (4x faster)
    ts_type = types.get(roles.ts, "VARCHAR")
    ts_text, ts_native = "long_row[$ts_col]::varchar", "null::timestamp"
    if ts_type.startswith("TIMESTAMP WITH TIME ZONE"):
        ts_text, ts_native = "null::varchar", "make_timestamp(epoch_us(long_row[$ts_col]))"
    elif ts_type.startswith("TIMESTAMP"):
        ts_text, ts_native = "null::varchar", "long_row[$ts_col]::timestamp"
    columns = (
        f"{ts_text} as ts_text, {ts_native} as ts_native, "
        f"{metric_expr} as metric, "
        "long_row[$value_col] as value_raw, "
        f"{labels_expr} as labels_json, "
        f"{label_list} as label_values"
    )
    # `long_input` is a view either way, numbering the rows without row_number() over () (which runs
    # on one thread): over a Parquet file by its own row numbers, the series keys and then the samples
    # each reading the file (cheaper than one copy of every row's label text); over a CSV's one parsed
    # copy by row positions
    _drop_input(con)
    try:
        if row_number:
            numbered = f"select long_row.{row_number} + $first_line as src_line, {columns} from {reader} as long_row"
            con.register("long_input", con.sql(numbered, params=dict(params, first_line=first_line)))
        else:
            con.execute(f"create temp table long_copy as select {columns} from {reader} as long_row", params)
            number_rows(con, "long_copy", "long_input", "src_line", first_line)
        sql.materialize(con, "ingest__long_keys", "long_keys", label_names=list(roles.label_columns))
    except duckdb.Error as exc:
        raise fail(src, f"cannot read as {fmt.upper()}: " + str(exc).splitlines()[0]) from None
    con.execute("create or replace temp table long_options as select $decimal_comma as decimal_comma",
                {"decimal_comma": decimal_comma})
    # views, not copies: the load's insert reads the file once (ingest__long_points' header)
    sql.temp_view(con, "ingest__long_parsed", "long_parsed")
    sql.temp_view(con, "ingest__long_points", "stage_points")
    notes = []
    if decimal_comma:
        n_comma, comma_line, example = sql.rows(con, "ingest__long_decimal_commas")[0]
        if n_comma:
            notes.append(f"{n_comma} value(s) written with a decimal comma (a `;`-separated CSV as Excel saves it), "
                         f"read as decimal points: e.g. {example!r} on line {comma_line}")
    problems = sql.rows(con, "ingest__long_problems", max_rows=MAX_REPORTED,
                        parse_can_fail=sql.rows(con, "ingest__long_parse_can_fail")[0][0])
    if problems:
        line, problem, n_bad = problems[0]
        unit = "row" if fmt == "parquet" else "line"
        more = also_bad([p[0] for p in problems[1:]], n_bad, unit)
        if fmt == "parquet":
            raise fail(src, f"row {line}: {shorten(problem, 160)}{more}")
        raise fail(src, f"{shorten(problem, 160)}{more}", line=line)
    sql.materialize(con, "ingest__long_stage_keys", "stage_keys")
    con.execute("create or replace temp table stage_families (family varchar, mtype varchar, help varchar)")
    # every row of the file is a sample (a row whose key or value did not read failed above)
    n_points = con.execute("select count(*) from long_input").fetchone()[0]
    used = [f"time={roles.ts}", f"value={roles.value}"]
    if roles.metric:
        used.append(f"metric={roles.metric}")
    if roles.labels:
        used.append(f"labels={roles.labels}")
    if roles.label_columns:
        used.append("label columns: " + ", ".join(roles.label_columns))
    return Staged(format=fmt, time_source="samples", notes=["columns: " + "; ".join(used), *notes],
                  n_points=n_points, release=_release)


def _release(con: duckdb.DuckDBPyConnection) -> None:
    """Once the samples are stored: the views `stage_points` and `long_parsed`, `long_input` (and a
    CSV's parsed copy) and `long_keys` left behind as empty tables of their shapes, like the other
    readers' helpers."""
    for name in ("stage_points", "long_parsed", "long_input"):
        con.execute(f"create or replace temp table {name}_shape as select * from {name} limit 0")
    drop_temp(con, "stage_points")
    _drop_input(con)
    for name in ("stage_points", "long_parsed", "long_input"):
        con.execute(f"alter table {name}_shape rename to {name}")
    empty_tables(con, _HELPERS)


def _drop_input(con: duckdb.DuckDBPyConnection) -> None:
    """Remove `long_input`, whichever it is (the registered view, or the empty table left after a load),
    a CSV's parsed copy and `long_parsed` (the view over them, or its empty table)."""
    drop_temp(con, "long_parsed")
    con.unregister("long_input")  # a no-op unless it is the registered view
    con.execute("drop table if exists long_input")
    con.execute("drop table if exists long_copy")


__all__ = ["Roles", "assign_roles", "read_csv", "read_parquet"]

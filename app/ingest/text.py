"""Prometheus text exposition 0.0.4, OpenMetrics 1.0 text and ``promtool tsdb dump``, parsed by DuckDB.

The whole file is parsed by vectorized SQL (``queries/ingest/ingest__text_*.sql``), never a Python loop
per line:

1. ``read_csv`` reads every line as one VARCHAR, in parallel, numbered in file order (blank lines
   kept, so line numbers are exact; LF and CRLF endings both accepted);
2. cheap string functions split each sample line into its raw series key (name and ``{...}`` up to
   the last ``}``), value and optional timestamp;
3. labels are parsed into a MAP once per distinct raw key (thousands of keys, millions of lines);
4. the few lines that do not have the plain shape are re-read with regular expressions, which also
   say what is wrong with a bad line.

Dialects: OpenMetrics when a ``# EOF`` or ``# UNIT`` line or an OpenMetrics-only type appears
(timestamps in seconds), else 0.0.4 (timestamps in integer milliseconds); a promtool dump is 0.0.4
with keys ``{__name__="x", a="b"}``. Lines holding only ``...`` (an abbreviated paste) and native
histogram samples are skipped with a note; exemplars are dropped.

Samples without a timestamp take their snapshot's time (see ``app.ingest.snapshot_time``): a
timestamp comment before them, else (a single snapshot) the file name, else the file's mtime.
Several concatenated snapshots (a series repeats, or samples follow a ``# EOF``) need a timestamp
comment each.
"""

from __future__ import annotations

import mmap
import re
from datetime import datetime

import duckdb

from app import sql
from app.ingest.base import IngestError, Source, Staged, also_bad, empty_tables, fail, number_rows, shorten
from app.ingest.snapshot_time import file_mtime, iso, parse_time_text, time_from_name

MAX_REPORTED_LINES = 6
_HELPERS = (
    "text_line_text", "text_meta", "text_key_input", "text_keys", "text_slow", "text_keys_slow", "text_snapshots",
    "text_untimed",
)
_CSV_LINE_RE = re.compile(r"CSV Error on Line: (\d+)")
# plausible sample times in seconds; outside, the unit is almost certainly wrong
_SECONDS_MAX = 1e11


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a text exposition (0.0.4 or OpenMetrics)."""
    return read_exposition(con, src)


def read_exposition(con: duckdb.DuckDBPyConnection, src: Source, dump: bool = False) -> Staged:
    """Stage a text exposition, or a ``promtool tsdb dump`` when ``dump`` (timestamps in ms)."""
    _preflight(src)
    try:
        sql.materialize(con, "ingest__text_lines", "text_line_text", path=str(src.path))
    except duckdb.Error as exc:
        raise _read_error(src, exc) from None
    number_rows(con, "text_line_text", "text_lines", "line_no", 1)
    sql.materialize(con, "ingest__text_meta", "text_meta")
    if dump:
        fmt, unit_s = "promtool-dump", 1e-3
    else:
        n_eof, n_unit, n_om_types = sql.rows(con, "ingest__text_dialect")[0]
        is_om = bool(n_eof or n_unit or n_om_types)
        fmt, unit_s = ("openmetrics", 1.0) if is_om else ("prometheus-text", 1e-3)

    sql.materialize(con, "ingest__text_split", "text_split", ts_unit_us=unit_s * 1e6)
    for query, table in (
        ("ingest__text_fast_keys", "text_key_input"),
        ("ingest__text_parse_keys", "text_keys"),
        ("ingest__text_slow_lines", "text_slow"),
        ("ingest__text_slow_keys", "text_key_input"),
        ("ingest__text_parse_keys", "text_keys_slow"),
    ):
        sql.materialize(con, query, table)
    _raise_problems(con, src)
    notes = _skipped_notes(con)
    sql.execute(con, "ingest__text_drop_reread")
    sql.execute(con, "ingest__text_add_slow", ts_unit_us=unit_s * 1e6)
    if fmt == "openmetrics":
        before = con.execute("select count(*) from text_split").fetchone()[0]
        sql.execute(con, "ingest__text_repeated_times")
        n_repeats = before - con.execute("select count(*) from text_split").fetchone()[0]
        if n_repeats:
            notes.append(f"{n_repeats} sample(s) repeat a series at a timestamp it already had: the first kept "
                         "(OpenMetrics: the earliest MetricPoint is used)")

    n_timed, n_untimed, _, _, _, ts_median = sql.rows(con, "ingest__text_time_stats")[0]
    if n_timed:
        checked = _check_unit(fmt, unit_s, ts_median, notes)
        if checked != unit_s:
            sql.execute(con, "ingest__text_retime", ts_unit_us=checked * 1e6)
    con.execute("create or replace temp table text_snapshots (start_line bigint, snap_ts timestamp)")
    sql.materialize(con, "ingest__text_untimed", "text_untimed")
    time_source = "samples"
    if n_untimed:
        time_source = _snapshot_times(con, src, notes)
        sql.execute(con, "ingest__text_fill_snapshot_times")
        if n_timed:
            notes.append(f"{n_untimed} samples without a timestamp took their snapshot's time "
                         f"({n_timed} carried their own)")

    n_meta = con.execute("select count(distinct family) from text_meta where kind in ('help', 'type', 'unit') "
                         "and family is not null").fetchone()[0]
    sql.materialize(con, "ingest__text_stage_keys", "stage_keys")
    sql.materialize(con, "ingest__text_families", "stage_families")
    _split_becomes_stage_points(con, unit_s)
    empty_tables(con, _HELPERS)
    return Staged(format=fmt, time_source=time_source, notes=notes, n_metadata_families=n_meta)


def _split_becomes_stage_points(con: duckdb.DuckDBPyConnection, unit_s: float) -> None:
    """Turn the finished ``text_split`` into ``stage_points`` by renaming, not copying: a copy of a
    million rows costs ~12 % of the whole parse. An empty ``text_split`` of the same shape is made
    again (from the emptied line table) so its queries still bind on this connection."""
    con.execute("drop table if exists stage_points")
    con.execute("alter table text_split rename to stage_points")
    con.execute("alter table stage_points drop column ok")
    con.execute("alter table stage_points drop column ts_raw")
    con.execute("alter table stage_points rename column line_no to src_line")
    empty_tables(con, ("text_line_text",))
    sql.materialize(con, "ingest__text_split", "text_split", ts_unit_us=unit_s * 1e6)


def _preflight(src: Source) -> None:
    """Refuse what the line reader would silently mangle: a lone CR or a chr(1) inside a line.

    A C-speed scan of the mapped file; the regex runs only if a CR exists at all."""
    if src.path.stat().st_size == 0:
        raise fail(src, "the file is empty")
    with src.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        bad: tuple[int, str] | None = None
        if mm.find(b"\r") >= 0:
            m = re.search(rb"\r(?!\n)", mm)
            if m:
                bad = (m.start(), "a carriage return (\\r) inside a line; only LF or CRLF line endings "
                                  "are supported")
        pos = mm.find(b"\x01")
        if pos >= 0 and (bad is None or pos < bad[0]):
            bad = (pos, "a control character (\\x01) inside a line")
        if bad:
            line_no = mm[: bad[0]].count(b"\n") + 1
            raise fail(src, bad[1], line=line_no)


def _read_error(src: Source, exc: duckdb.Error) -> IngestError:
    text = str(exc)
    m = _CSV_LINE_RE.search(text)
    line = int(m.group(1)) if m else None
    if "unicode" in text.lower() or "utf-8" in text.lower():
        return fail(src, "not UTF-8 text (invalid byte sequence)", line=line)
    return fail(src, "cannot read the file as text: " + text.splitlines()[0], line=line)


def _raise_problems(con: duckdb.DuckDBPyConnection, src: Source) -> None:
    rows = sql.rows(con, "ingest__text_problems", max_rows=MAX_REPORTED_LINES)
    if not rows:
        return
    line_no, problem, line, n_bad = rows[0]
    what = f"{problem}: {shorten(line or '')!r}" + also_bad([r[0] for r in rows[1:]], n_bad)
    raise fail(src, what, line=line_no)


def _skipped_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    notes = []
    for cls, n_lines, first_lines, series in sql.rows(con, "ingest__text_skipped"):
        where = ", ".join(map(str, first_lines)) + (" …" if n_lines > len(first_lines) else "")
        if cls == "ellipsis":
            notes.append(f"skipped {n_lines} line(s) holding only `...` (an abbreviated paste): line(s) {where}")
        else:
            names = ", ".join(shorten(s, 80) for s in series)
            notes.append(f"skipped {n_lines} native histogram sample(s) (not supported): {names} (line(s) {where})")
    return notes


def _check_unit(fmt: str, unit_s: float, ts_median: float, notes: list[str]) -> float:
    """The timestamp unit in seconds, corrected where the values cannot be in the format's unit. The
    median decides, so one stray sample cannot flip a file's unit; a sample whose time then falls
    outside the years 1 to 9999 gets a NULL time and is dropped with a note (``app.ingest.checks``)."""
    typical = abs(ts_median)
    if unit_s == 1.0 and typical >= _SECONDS_MAX:
        notes.append("OpenMetrics timestamps must be seconds but these look like milliseconds; read as ms")
        unit_s = 1e-3
    elif unit_s == 1e-3 and 0 < typical < _SECONDS_MAX:
        notes.append(f"{fmt} timestamps must be milliseconds but these look like seconds; read as s")
        unit_s = 1.0
    return unit_s


def _snapshot_times(con: duckdb.DuckDBPyConnection, src: Source, notes: list[str]) -> str:
    """Fill ``text_snapshots`` for samples without timestamps and say where the times came from."""
    comments = [(ln, parse_time_text(tok)) for ln, tok in sql.rows(con, "ingest__text_time_comments")]
    comments = [(ln, t) for ln, t in comments if t is not None]
    if comments:
        _insert_snapshots(con, comments)
        for line_no, key, start, earlier, reason in sql.rows(con, "ingest__text_comment_segments"):
            if reason == "before_first":
                raise fail(src, f"this sample has no timestamp and comes before the first timestamp "
                                f"comment (line {comments[0][0]}): put the comment before the samples",
                           line=line_no)
            raise fail(src, f"series {shorten(key, 80)} appears again after the timestamp comment on line "
                            f"{start} (first on line {earlier}): give each concatenated snapshot its own "
                            "timestamp comment", line=line_no)
        first_line, first_ts = comments[0]
        notes.append(f"snapshot times from {len(comments)} timestamp comment(s) (first on line {first_line}: "
                     f"{iso(first_ts)})")
        return "comment"
    second = sql.rows(con, "ingest__text_second_snapshot")
    if second:
        line_no, key, earlier, reason = second[0]
        why = (f"series {shorten(key, 80)} already appeared on line {earlier}" if reason == "repeat"
               else "it follows a `# EOF` line")
        raise fail(src, f"a second snapshot starts here ({why}) but the samples carry no timestamps: put a "
                        "comment holding only the scrape time before each snapshot (e.g. "
                        "`# scrape_time=2026-11-29T10:00:00Z`), add sample timestamps, or load one file per "
                        "snapshot named by its time", line=line_no)
    named = time_from_name(src.original.name)
    if named is not None:
        _insert_snapshots(con, [(0, named)])
        notes.append(f"no sample timestamps: time {iso(named)} taken from the file name")
        return "filename"
    modified = file_mtime(src.original)
    _insert_snapshots(con, [(0, modified)])
    notes.append(f"no sample timestamps, no timestamp comment and no time in the file name: using the "
                 f"file's modification time {iso(modified)}")
    return "mtime"


def _insert_snapshots(con: duckdb.DuckDBPyConnection, starts: list[tuple[int, datetime]]) -> None:
    con.execute(
        "insert into text_snapshots select unnest($lines), unnest($times)",
        {"lines": [ln for ln, _ in starts], "times": [t for _, t in starts]},
    )


__all__ = ["read", "read_exposition"]

"""The checks every staged file goes through, whatever its format: what no number may be computed from.

Run by ``app.ingest.stage`` after the format's reader, on its ``stage_keys``/``stage_points``/
``stage_families`` (vectorized SQL, ``queries/ingest/ingest__check_*.sql``; Python only words the notes).
Each finding is dropped, repaired or kept with a note saying which, naming the series and the line
(a row of Parquet, a series of Prometheus API JSON):

- samples negative in a series that only counts up (counter, bucket, ``_count``): dropped, because a
  counter holding one would make a false reset (the load's insert leaves them out, and
  ``bad_point_notes`` words them when there were any);
- samples whose value is NaN or infinite (a summary's quantile excepted, stored as it is), or whose
  time is outside the years 1 to 9999: valid samples (OpenMetrics allows both), kept apart in
  ``skipped_samples`` (``ingest__insert_skipped_samples``; such a time as NULL), which the cube does
  not read, and counted in the load report;
- a histogram with buckets but no ``+Inf`` bucket: its ``_count`` stands in (the same number by
  definition: repaired), or, without one, its buckets are dropped (no total to take a share of);
- a ``_count`` that differs from its ``+Inf`` bucket: kept as it is (shares come from the buckets,
  request counts from ``_count``), with a note (``count_vs_inf_notes``, run by the load once the
  samples are stored: those find the histograms to compare, without a pass over every staged pair);
- a ``# TYPE`` the samples contradict (a "gauge" whose samples are ``_bucket``/``_count``/``_sum``:
  read as the histogram they are, as Prometheus would store them);
- samples dated more than a day after the load or before 2000: kept, with a note (``time_range_notes``,
  run by the load once the samples are stored, from the dataset's time range: the staged samples,
  spilled to disk at a month's size, are read again only when that range leaves those bounds).

Duplicate samples (two values of one series at one instant) and non-monotone buckets are found by
the cube the load builds; ``app.load`` words those.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb

from app import sql
from app.ingest.base import IngestError, Source, Staged, points_as_table, shorten

MAX_EXAMPLES = 3
FUTURE_SLACK = timedelta(days=1)
PAST = datetime(2000, 1, 1)  # no LLM server exported metrics before (ingest__check_time_range)
_WHERE = {"prometheus-api-json": "series", "parquet": "row", "frame": "row"}
_REASONS = {
    "time": "a timestamp outside the years 1 to 9999",
    "value": "a NaN or infinite value",
    "negative": "a negative value in a series that only counts up (counter, bucket or _count)",
}


def where_word(fmt: str) -> str:
    """What ``src_line`` numbers in a file of ``fmt``: ``line``, ``row`` or ``series``."""
    return _WHERE.get(fmt, "line")


def check(con: duckdb.DuckDBPyConnection, src: Source, staged: Staged) -> None:
    """Run the checks on the staged file that repair or drop what must not be used, and append the
    notes to ``staged.notes``; raise ``IngestError`` when no sample is left. The samples no number may
    be computed from are left out by the load's insert (``bad_point_notes`` words them)."""
    # the classified series the load stores too (made once: 4 s at 10^6 series)
    sql.materialize(con, "ingest__staged_series", "stage_series")
    staged.series_staged = True
    dropped = _missing_inf(con, staged)
    _type_mismatch(con, staged.notes)
    if dropped and not con.execute("select count(*) from stage_points").fetchone()[0]:
        raise IngestError(src.display, "no samples left: " + "; ".join(n for n in staged.notes if "dropped" in n))


def _value_text(value: float | None) -> str:
    if value is None:
        return "NULL"
    return f"{value:g}".replace("inf", "Inf").replace("nan", "NaN")


def bad_point_notes(con: duckdb.DuckDBPyConnection, staged: Staged, unit: str, n_staged: int,
                    n_stored: int) -> list[str]:
    """The notes on the samples no number may be computed from, which the load's insert left out
    (macro bad_point_reason), run once the samples are stored: none when it stored every staged
    sample; else the staged samples are judged again (``ingest__check_bad_points``) for the notes, and
    those dropped from them too, for what reads them later. Judging every staged sample up front
    would read them all again (spilled to disk at a month's size) to find usually none."""
    if n_stored == n_staged:
        return []
    points_as_table(con, staged)  # read twice, then changed
    sql.materialize(con, "ingest__check_bad_points", "check_bad_points")
    notes = []
    for reason, n, examples in sql.rows(con, "ingest__check_bad_summary", n=MAX_EXAMPLES):
        shown = "; ".join(
            f"{shorten(e['series'], 100)} = {_value_text(e['value'])}"
            + (f" at {e['ts'].isoformat()}Z" if e["ts"] is not None and reason != "time" else "")
            + f" on {unit} {e['src_line']}"
            for e in examples)
        more = f" and {n - len(examples)} more" if n > len(examples) else ""
        if reason in ("value", "time"):  # valid samples no number may be computed from: stored apart, the cube skips them
            notes.append(f"kept {n} sample(s) with {_REASONS[reason]} apart (valid "
                         f"{'values' if reason == 'value' else 'samples'}, stored in skipped_samples; the cube "
                         f"skips them): {shown}{more}")
        else:
            notes.append(f"dropped {n} sample(s) with {_REASONS[reason]}: {shown}{more}")
    sql.execute(con, "ingest__check_drop_points")
    return notes


def _missing_inf(con: duckdb.DuckDBPyConnection, staged: Staged) -> bool:
    """Repair or drop the histograms without a +Inf bucket; whether buckets were dropped."""
    notes = staged.notes
    sql.materialize(con, "ingest__check_missing_inf", "check_missing_inf")
    rows = sql.rows(con, "ingest__check_missing_inf_list")
    if not rows:
        return False
    repaired = [series for series, count_key in rows if count_key is not None]
    dropped = [series for series, count_key in rows if count_key is None]
    points_as_table(con, staged)  # samples are added or deleted below
    if repaired:
        sql.execute(con, "ingest__check_add_inf_keys")
        sql.execute(con, "ingest__check_add_inf_points")
        sql.materialize(con, "ingest__staged_series", "stage_series")  # with the new +Inf series
        notes.append(f"{len(repaired)} histogram(s) have no +Inf bucket: their _count is used as the +Inf bucket "
                     f"(repaired): {_names(repaired)}")
    if dropped:
        sql.execute(con, "ingest__check_drop_buckets")
        notes.append(f"{len(dropped)} histogram(s) have no +Inf bucket and no _count (a truncated file?): their "
                     f"buckets are dropped (no total to take a share of): {_names(dropped)}")
    return bool(dropped)


def _names(series: list[str]) -> str:
    more = f" and {len(series) - MAX_EXAMPLES} more" if len(series) > MAX_EXAMPLES else ""
    return ", ".join(shorten(s, 100) for s in series[:MAX_EXAMPLES]) + more


def count_vs_inf_notes(con: duckdb.DuckDBPyConnection, unit: str, dataset_id: int) -> list[str]:
    """The note on the scrapes where a histogram's ``_count`` differs from its ``+Inf`` bucket, run by
    the load once the checked samples are stored: the stored samples find the histograms that differ
    at all (``ingest__count_inf_differing``), and only those are compared on the staged samples, which
    name the lines (at a month's size they are spilled to disk)."""
    sql.materialize(con, "ingest__count_inf_pairs", "count_inf_pairs")
    differing = [group_id for (group_id,) in sql.rows(con, "ingest__count_inf_differing", dataset_id=dataset_id)]
    if not differing:
        return []
    rows = sql.rows(con, "ingest__check_count_vs_inf", max_rows=MAX_EXAMPLES, group_ids=differing)
    if not rows:  # e.g. one series has a scrape the other lacks: no scrape holds two different values
        return []
    shown = "; ".join(f"{shorten(series, 100)} at {ts.isoformat()}Z ({unit} {line}): _count {_value_text(c)}, "
                      f"+Inf bucket {_value_text(i)}" for series, ts, c, i, line, _ in rows)
    n_bad = rows[0][-1]
    more = f" and {n_bad - len(rows)} more" if n_bad > len(rows) else ""
    return [f"_count differs from the +Inf bucket at {n_bad} scrape(s): {shown}{more}; both kept as they are "
            "(shares use the buckets, request counts use _count)"]


def _type_mismatch(con: duckdb.DuckDBPyConnection, notes: list[str]) -> None:
    for family, declared, found, example in sql.rows(con, "ingest__check_type_mismatch"):
        if found == "histogram":
            notes.append(f"`# TYPE {family} {declared}` but its samples ({example}, ...) are a histogram's "
                         "_bucket/_count/_sum: read as a histogram, as Prometheus would store them")
        else:
            notes.append(f"`# TYPE {family} {declared}` but sample {shorten(example, 100)} has no _bucket/_count/"
                         "_sum suffix, which every histogram sample has: kept as an untyped series")


def time_range_notes(con: duckdb.DuckDBPyConnection, unit: str, t_min: datetime | None,
                     t_max: datetime | None) -> list[str]:
    """The notes on staged samples dated in the future (more than a day after now) or before 2000,
    given the time range of the staged samples (``t_min``, ``t_max``): none within those bounds."""
    future = datetime.now(UTC).replace(tzinfo=None) + FUTURE_SLACK
    if t_min is None or t_max is None or (t_max <= future and t_min >= PAST):
        return []
    n_future, future_line, latest, n_past, past_line, earliest = sql.rows(
        con, "ingest__check_time_range", future=future)[0]
    notes = []
    if n_future:
        notes.append(f"{n_future} sample(s) are dated in the future (after {future:%Y-%m-%d}; the latest "
                     f"{latest.isoformat()}Z, first on {unit} {future_line}): kept as they are; check the "
                     "exporter's clock or the timestamp unit")
    if n_past:
        notes.append(f"{n_past} sample(s) are dated before 2000 (the earliest {earliest.isoformat()}Z, first on "
                     f"{unit} {past_line}): kept as they are; times since a process start, or seconds read as "
                     "milliseconds?")
    return notes


__all__ = ["bad_point_notes", "check", "count_vs_inf_notes", "time_range_notes", "where_word"]

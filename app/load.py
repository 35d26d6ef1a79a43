"""Loading: files, DataFrames and per-request records into the workspace, each as one dataset.

A load is atomic (one transaction of the workspace) and idempotent (a file whose bytes were loaded
before is reported ``unchanged``). Each file gets a ``LoadReport``: what was kept, how it was read,
and the dataset's summary (engine, signals, paths, resets, repairs), read from the dataset's
5-minute cube, which the load keeps as a cached cube.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from app import cube, ingest, records, sql
from app.ingest import checks
from app.ingest.base import IngestError, shorten
from app.ingest.checks import where_word
from app.ingest.frame import digest_frame, stage_frame
from app.store import Workspace, path_mapping

SUMMARY_WINDOW_S = 300
MAX_EXAMPLES = 3


@dataclass
class LoadReport:
    """What happened to one file of a load. Its ``as_json()`` is the stable JSON of ``headroom load``."""

    file: str
    status: str  # loaded | unchanged | failed
    dataset: str | None = None
    dataset_id: int | None = None
    format: str | None = None
    gzip: bool = False
    engine: str | None = None
    series: int = 0
    samples: int = 0
    start: str | None = None
    end: str | None = None
    scrape_interval_s: float | None = None
    time_source: str | None = None
    signals: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    unknown_metrics: list[str] = field(default_factory=list)
    resets: int = 0
    repairs: int = 0
    snapshot: bool = False
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


Stager = Callable[[duckdb.DuckDBPyConnection], Any]


def load_files(ws: Workspace, paths: Iterable[str | Path], names: Sequence[str] | None = None) -> list[LoadReport]:
    """Load each file as its own dataset; a failing file is reported and the others still load."""
    reports = []
    for i, p in enumerate(paths):
        name = names[i] if names and i < len(names) else None
        reports.append(load_file(ws, Path(p), name=name))
    return reports


def load_file(ws: Workspace, path: Path, name: str | None = None, display: str | None = None) -> LoadReport:
    """Load one file (metrics in any supported format, or per-request records), gzip or not."""
    display = display or str(path)
    try:
        digest = _digest(path)
    except OSError as exc:
        return LoadReport(file=display, status="failed", errors=[f"{display}: cannot read ({exc.strerror})"])
    try:
        with ingest.open_source(path, display=display) as src:
            kind = records.sniff(src)
            if kind:
                report = _load(ws, display, digest, name or path.name, lambda con: records.stage(con, src, kind),
                               lambda con, _: _commit_records(con, kind, src, digest, name or path.name))
            else:
                report = _load(ws, display, digest, name or path.name, lambda con: ingest.stage(con, src),
                               lambda con, staged: _commit_staged(con, staged, src, digest, name or path.name))
            # a database error names the file it read: an upload's or a gzip's temp copy, not the user's name
            for where in {str(src.path), str(path)} - {display}:
                report.errors = [e.replace(where, display) for e in report.errors]
            return report
    except IngestError as exc:
        return LoadReport(file=display, status="failed", errors=[str(exc)])
    except Exception as exc:  # a reader's bug must not take the other files of a load with it
        return LoadReport(file=display, status="failed", errors=[internal_error(display, exc)])


INTERNAL_ERROR = "Headroom could not read this file (an internal error"


def internal_error(display: str, exc: Exception) -> str:
    """The message of a failure no reader anticipated: the load rolled back, the other files still load
    (tests/ingest/test_fuzz_loads.py holds the readers to never getting here)."""
    first = (str(exc).splitlines() or [""])[0][:200]
    return f"{display}: {INTERNAL_ERROR}, {type(exc).__name__}: {first}); nothing of it was kept. Please report it."


def load_frame(ws: Workspace, frame: pd.DataFrame, name: str) -> LoadReport:
    """Load a DataFrame of samples (columns metric, labels, ts, value) as a dataset, through the same
    checks as a file (``app.ingest.checks``: what no number may be computed from is dropped or repaired,
    with a note naming the series and the frame's row)."""
    cur = ws.cursor()
    try:
        digest = digest_frame(cur, frame)
    finally:
        cur.close()
    src = ingest.Source(path=Path(name), display=name, original=Path(name))

    def stage(con: duckdb.DuckDBPyConnection) -> ingest.Staged:
        sql.ensure_macros(con)
        staged = stage_frame(con, frame)
        checks.check(con, src, staged)
        return staged

    return _load(ws, name, digest, name, stage, lambda con, staged: _commit_staged(con, staged, src, digest, name))


def _load(ws: Workspace, display: str, digest: str, name: str, stager: Stager,
          commit: Callable[[duckdb.DuckDBPyConnection, Any], LoadReport]) -> LoadReport:
    existing = ws.dataset_summary(digest)
    if existing:
        report = LoadReport(**existing)
        report.file, report.status = display, "unchanged"
        return report
    try:
        with ws.transaction() as con:
            return commit(con, stager(con))
    except IngestError as exc:
        return LoadReport(file=display, status="failed", errors=[str(exc)])
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        return LoadReport(file=display, status="failed", errors=[f"{display}: {first}"])


def _commit_staged(con: duckdb.DuckDBPyConnection, staged: ingest.Staged, src: ingest.Source, digest: str,
                   name: str) -> LoadReport:
    n_points = staged.n_points
    if n_points is None:
        n_points = con.execute("select count(*) from stage_points").fetchone()[0]
    notes = list(staged.notes)
    if n_points == 0:
        n_families = max(con.execute("select count(distinct family) from stage_families").fetchone()[0],
                         staged.n_metadata_families)
        if not n_families:
            raise IngestError(src.display, "no samples found")
        # a server that has served nothing yet exposes only its HELP/TYPE lines: a valid exposition
        notes.append(f"the file holds only metadata ({n_families} families declared by # HELP/# TYPE) and no "
                     "samples yet (a server that has served nothing?): loaded with no samples")
    if not staged.series_staged:  # the checks of app.ingest made it already
        sql.materialize(con, "ingest__staged_series", "stage_series")
    dataset_id = con.execute("select nextval('dataset_ids')").fetchone()[0]
    sql.execute(con, "ingest__insert_series")
    sql.execute(con, "ingest__insert_samples", dataset_id=dataset_id)
    sql.execute(con, "ingest__insert_families", dataset_id=dataset_id)
    n_series, n_samples, t_min, t_max, interval = sql.rows(con, "ingest__dataset_stats", dataset_id=dataset_id)[0]
    unit = where_word(staged.format)
    n_values = 0
    if n_samples < n_points:  # NaN, infinities, any time are valid: kept beside the samples, skipped by the cube
        sql.execute(con, "ingest__insert_skipped_samples", dataset_id=dataset_id)
        n_values = con.execute("select count(*) from skipped_samples where dataset_id = $id and reason = 'value'",
                               {"id": dataset_id}).fetchone()[0]
    dropped = checks.bad_point_notes(con, staged, unit, n_points, n_samples)
    # a file of NaN values (a gauge that has no reading yet) is a valid exposition; one whose every time
    # no timestamp holds is a wrong unit or a corrupt file, and nothing of it could be placed
    if n_points and not n_samples and not n_values:
        raise IngestError(src.display, "no samples left: " + "; ".join(
            n for n in dropped + notes if n.startswith(("dropped", "kept"))))
    if n_points and not n_samples:
        notes.append("every sample is NaN or infinite: the dataset holds no number the cube can use")
    notes = dropped + notes
    notes.extend(checks.count_vs_inf_notes(con, unit, dataset_id))
    notes.extend(checks.time_range_notes(con, unit, t_min, t_max))
    report = LoadReport(
        file=src.display, status="loaded", dataset=unique_name(con, name), dataset_id=dataset_id,
        format=staged.format, gzip=staged.gzip, series=n_series, samples=n_samples, start=iso_utc(t_min),
        end=iso_utc(t_max), scrape_interval_s=interval, time_source=staged.time_source, notes=notes,
    )
    describe_dataset(con, dataset_id, report, several_times=t_min != t_max)
    _duplicate_notes(con, report, unit)  # the last reader of the staged samples
    if staged.release is not None:
        staged.release(con)
    if SUMMARY_WINDOW_S == cube.FIT_WINDOW_S:  # the summary's sample pass serves the capacity fit's cube too
        cube.keep_fit_cube(con, dataset_id, path_mapping(con)[1])
    insert_dataset(con, report, digest, engine=report.engine, n_series=n_series, n_samples=n_samples,
                    t_min=t_min, t_max=t_max, interval=interval)
    return report


# the records with a time outside [$lo, $hi] (and some time given)
_COUNT_OUT_OF_RANGE = (
    "select count(*) from stage_records where not (coalesce(arrival, first_token, finish) is null or ("
    "coalesce(arrival between $lo and $hi, true) and coalesce(first_token between $lo and $hi, true) "
    "and coalesce(finish between $lo and $hi, true)))")
_DROP_OUT_OF_RANGE = (
    "delete from stage_records where not (coalesce(arrival, first_token, finish) is null or ("
    "coalesce(arrival between $lo and $hi, true) and coalesce(first_token between $lo and $hi, true) "
    "and coalesce(finish between $lo and $hi, true)))")


def _commit_records(con: duckdb.DuckDBPyConnection, kind: str, src: ingest.Source, digest: str,
                    name: str) -> LoadReport:
    # a time outside 1970-2200 is a wrong unit or a corrupt field: those records are dropped, and said
    # so (DuckDB hands Python such timestamps as text, and the shares' time range never reaches them)
    bounds = {"lo": records.FAR_PAST, "hi": records.FAR_FUTURE}
    dropped = con.execute(_COUNT_OUT_OF_RANGE, bounds).fetchone()[0]
    if dropped:
        con.execute(_DROP_OUT_OF_RANGE, bounds)
    n, t_min, t_max = con.execute(
        "select count(*), min(coalesce(arrival, first_token)), max(coalesce(finish, first_token)) "
        "from stage_records").fetchone()
    if n == 0:
        raise IngestError(src.display, "no per-request records found" + (
            f" ({dropped} with times outside 1970-2200 dropped)" if dropped else ""))
    dataset_id = con.execute("select nextval('dataset_ids')").fetchone()[0]
    con.execute("insert into request_records select $id, * from stage_records", {"id": dataset_id})
    paths = [r[0] for r in con.execute("select distinct path from stage_records order by 1").fetchall()]
    failed = con.execute("select count(*) from stage_records where finished_reason in ('abort', 'error')"
                         ).fetchone()[0]
    report = LoadReport(file=src.display, status="loaded", dataset=unique_name(con, name), dataset_id=dataset_id,
                        format=kind, gzip=src.gzip, samples=int(n), start=iso_utc(t_min), end=iso_utc(t_max),
                        time_source="samples", signals=["per-request records"], paths=paths,
                        notes=[*src.notes, f"{n} per-request records ({failed} failed): exact joint breach shares"])
    if dropped:
        report.notes.append(f"dropped {dropped} record(s) whose times fall outside 1970-2200 (a wrong unit or a "
                            "corrupt field)")
    untimed = con.execute("select count(*) from stage_records where coalesce(arrival, first_token, finish) is null"
                          ).fetchone()[0]
    if untimed:
        report.notes.append(
            f"{'all' if untimed == n else untimed} record(s) carry no absolute time (the {records.WHAT[kind][0]} "
            "gives durations only, or a clock with no epoch): their shares are exact, but they cannot be placed "
            "in time, so every time range includes them")
    insert_dataset(con, report, digest, engine=None, n_series=0, n_samples=int(n), t_min=t_min, t_max=t_max,
                    interval=None)
    return report


def insert_dataset(con: duckdb.DuckDBPyConnection, report: LoadReport, digest: str, *, engine: str | None,
                    n_series: int, n_samples: int, t_min: datetime | None, t_max: datetime | None,
                    interval: float | None) -> None:
    con.execute(
        "insert into datasets values ($id, $name, $digest, $source, $format, $engine, $time_source, "
        "$loaded_at, $n_series, $n_samples, $t_min, $t_max, $interval, $summary)",
        {"id": report.dataset_id, "name": report.dataset, "digest": digest, "source": report.file,
         "format": report.format, "engine": engine, "time_source": report.time_source,
         "loaded_at": datetime.now(UTC).replace(tzinfo=None), "n_series": n_series, "n_samples": n_samples,
         "t_min": t_min, "t_max": t_max, "interval": interval, "summary": json.dumps(report.as_json())})


def describe_dataset(con: duckdb.DuckDBPyConnection, dataset_id: int, report: LoadReport,
                     window_s: int = SUMMARY_WINDOW_S, path_labels: Sequence[str] | None = None,
                     several_times: bool = False) -> None:
    """Fill the engine/signal/path/health fields of ``report`` (inside the load's transaction).
    ``several_times``: the caller knows the samples have more than one time, so the dataset is no
    single snapshot and its scrape times need not be counted (a pass over its samples).

    The summary reads the dataset's 5-minute cube (a live pull's: its own window and path labels); it
    is kept as the cached cube of that spec, so the first page or report on this dataset alone (the
    usual first look) does not build it again."""
    stored_labels, rules = path_mapping(con)
    path_labels = list(path_labels) if path_labels is not None else stored_labels
    cube.build_into_temp(con, [dataset_id], window_s, path_labels)
    cube.keep_built(con, [dataset_id], window_s, path_labels, rules)
    engines = sql.rows(con, "summary__engines")
    if engines:
        report.engine = engines[0][0]
        others = [e for e, _ in engines[1:]]
        if others:
            report.notes.append("also recognised: " + ", ".join(others))
    for prefix, engine, n_families, example in sql.rows(con, "summary__prefixed_families"):
        report.notes.append(f"recognised {n_families} {engine} metric famil{'y' if n_families == 1 else 'ies'} under "
                            f"the re-export prefix {prefix!r} ({example} read as {example[len(prefix):]})")
    report.signals = [r[0] for r in con.execute(
        "select distinct signal from cube_series order by signal").fetchall()]
    report.paths = [r[0] for r in con.execute(
        "select path from cube_series group by path order by count(*) desc, path").fetchall()]
    report.unknown_metrics = [r[0] for r in sql.rows(con, "summary__unknown_families", dataset_id=dataset_id)]
    health = dict(con.execute(
        "select stat, sum(value) from cube_new where stat in ('resets', 'repairs') group by stat").fetchall())
    report.resets = int(health.get("resets", 0) or 0)
    report.repairs = int(health.get("repairs", 0) or 0)
    if report.repairs:
        _repair_notes(con, report)
    scrapes, started = (0, None) if several_times else sql.rows(con, "summary__snapshot", dataset_id=dataset_id)[0]
    if scrapes == 1:
        report.snapshot = True
        since = f"the server started at {started.isoformat()}Z" if started else "the server started (start time not exported)"
        report.notes.append(f"single snapshot: counters and histograms are increases since {since}")
    if report.engine is None and report.samples:  # a metadata-only file has its own note
        report.notes.append("no metric of a known engine was found; all metrics are kept and listed as unknown")


def _repair_notes(con: duckdb.DuckDBPyConnection, report: LoadReport) -> None:
    """Name the bucket series the cube repaired (a bucket rising less than a lower one in a window)."""
    rows = sql.rows(con, "summary__repaired_buckets", max_rows=MAX_EXAMPLES)
    what = (f"{report.repairs} bucket increase(s) were below a lower bucket's (cumulative buckets never are) and "
            "were raised to the running maximum over le, as Prometheus' histogram_quantile does (repaired)")
    if not rows:
        report.notes.append(what)  # only after summing several label sets of a path
        return
    shown = "; ".join(f"{shorten(series, 120)} rose {inc:g} in the window after {iso_utc(start)} while a lower "
                      f"bucket rose {lower:g}" for series, start, inc, lower, _ in rows)
    more = f" and {rows[0][-1] - len(rows)} more" if rows[0][-1] > len(rows) else ""
    report.notes.append(f"{what}: {shown}{more}")


def _duplicate_notes(con: duckdb.DuckDBPyConnection, report: LoadReport, unit: str) -> None:
    """Say which samples shared a series and an instant, and which value the cube keeps (the highest)."""
    if not con.execute("select exists (from cube_duplicate_series)").fetchone()[0]:
        return
    rows = sql.rows(con, "summary__duplicates", max_rows=MAX_EXAMPLES)
    if not rows:
        return
    n_instants, n_differing = rows[0][-2], rows[0][-1]
    differing = [r for r in rows if r[2] > 1]
    for series, ts, _, kept, lines, vals, _, _ in differing[:1]:
        where = f"{unit}s " + " and ".join(map(str, lines)) if len(lines) <= 3 else f"{unit}s {lines[0]}, ..."
        report.notes.append(f"series {shorten(series, 120)} has {len(vals)} values at {iso_utc(ts)} ({where}: "
                            f"{', '.join(f'{v:g}' for v in vals)}): the highest ({kept:g}) is kept"
                            + (f"; {n_differing} such instant(s) in all" if n_differing > 1 else ""))
    if n_instants > n_differing:
        same = [r for r in rows if r[2] == 1]
        example = (f" (first: {shorten(same[0][0], 120)} at {iso_utc(same[0][1])}, {unit}s "
                   f"{' and '.join(map(str, same[0][4][:3]))})" if same else "")
        report.notes.append(f"{n_instants - n_differing} instant(s) where a series repeats the same value{example}: "
                            "kept once")


def unique_name(con: duckdb.DuckDBPyConnection, name: str) -> str:
    taken = {r[0] for r in con.execute("select name from datasets").fetchall()}
    if name not in taken:
        return name
    i = 2
    while f"{name} ({i})" in taken:
        i += 1
    return f"{name} ({i})"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def iso_utc(ts: datetime | str | None) -> str | None:
    if isinstance(ts, str):  # DuckDB hands Python a timestamp beyond its datetime's range as text
        return ts
    return ts.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z") if ts else None

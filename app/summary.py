"""What a loaded dataset holds: engine, signals, paths, unknown metrics, resets and repairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from app import sql

if TYPE_CHECKING:
    from app.store import LoadReport

SUMMARY_WINDOW_S = 300


def describe_dataset(con: duckdb.DuckDBPyConnection, dataset_id: int, report: LoadReport) -> None:
    """Fill the engine/signal/path/health fields of ``report`` (runs inside the load's transaction).

    The summary reads the dataset's 5-minute cube; it is kept as the cached cube of that spec, so the
    first page or report on this dataset alone (the usual first look) does not build it again."""
    from app.cube import build_into_temp, keep_built
    from app.store import path_mapping

    path_labels, rules = path_mapping(con)
    build_into_temp(con, [dataset_id], SUMMARY_WINDOW_S, path_labels)
    keep_built(con, [dataset_id], SUMMARY_WINDOW_S, path_labels, rules)
    engines = sql.rows(con, "summary__engines")
    if engines:
        report.engine = engines[0][0]
        others = [e for e, _ in engines[1:]]
        if others:
            report.notes.append("also recognised: " + ", ".join(others))
    report.signals = [r[0] for r in con.execute(
        "select distinct signal from cube_series order by signal").fetchall()]
    report.paths = [r[0] for r in con.execute(
        "select path from cube_series group by path order by count(*) desc, path").fetchall()]
    report.unknown_metrics = [r[0] for r in sql.rows(con, "summary__unknown_families", dataset_id=dataset_id)]
    health = dict(con.execute(
        "select stat, sum(value) from cube_new where stat in ('resets', 'repairs') group by stat").fetchall())
    report.resets = int(health.get("resets", 0) or 0)
    report.repairs = int(health.get("repairs", 0) or 0)
    snap = sql.rows(con, "summary__snapshot", dataset_id=dataset_id)[0]
    scrapes, started = snap
    if scrapes == 1:
        report.snapshot = True
        since = f"the server started at {started.isoformat()}Z" if started else "the server started (start time not exported)"
        report.notes.append(f"single snapshot: counters and histograms are increases since {since}")
    if report.engine is None:
        report.notes.append("no metric of a known engine was found; all metrics are kept and listed as unknown")

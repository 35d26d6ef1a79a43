"""One benchmark task in a fresh process: ``python -m app.bench.worker '<json task>'``.

Each task prints one JSON line with its wall-clock seconds (imports and process start excluded) and
its peak RSS, so a 100 M-sample build is measured on its own, not on top of what ran before it.

Tasks: ``load`` (files into a workspace file), ``cube`` (the cube of every dataset of a workspace
file, found where the load kept it and built from scratch, optionally written to Parquet), ``grouped`` (the least a cube must do: one group-by of the stored
samples per series and window, no counter resets, labels or paths), ``pandas`` (the reference cube of
one Parquet file, optionally written to Parquet), ``simulate`` (the month benchmark's export), ``month``
(load, analyse and the scenario grid of that export, phase by phase).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from app import load, sql
from app.bench.measure import Steps, peak_rss_mb, statements

# the figures are those of a workspace mapped by model_name (its stored mapping, so the cube a load keeps is
# the one the cube task asks for, and the pandas reference groups the same way)
PATH_LABELS = ["model_name"]
# VictoriaMetrics keeps a sample as a decimal of 12 significant digits (its lib/decimal's
# conversionPrecision): an increase it computes can be off the file's by a part in 10^12 of each
# series' value at the window's two ends
STORE_PRECISION = 1e-12


def _load(task: dict[str, Any]) -> dict[str, Any]:
    from app.store import Workspace

    per_file = []
    with Workspace(task["db"]) as ws:
        ws.con.execute("set enable_progress_bar = false")
        ws.set_paths(PATH_LABELS)
        with sql.statement_times() as times:
            t0 = time.perf_counter()
            for path in task["files"]:
                t = time.perf_counter()
                report = load.load_file(ws, Path(path))
                if report.status != "loaded":
                    raise RuntimeError(f"{path}: {report.status} {report.errors}")
                per_file.append({"file": Path(path).name, "seconds": time.perf_counter() - t,
                                 "samples": report.samples})
            seconds = time.perf_counter() - t0
    return {"seconds": seconds, "samples": sum(f["samples"] for f in per_file), "per_file": per_file,
            "statements": statements(times, seconds)}


def _cube(task: dict[str, Any]) -> dict[str, Any]:
    """The cube of every dataset as a user first asks for it (``first_seconds``: a lookup when the load
    kept it, one file's 5-minute cube) and, timed as ``seconds``, its build from scratch."""
    from app.cube import cube_frame, ensure_cube
    from app.store import Workspace, drop_cubes_for

    window_s = int(task["window_s"])
    with Workspace(task["db"]) as ws:
        ws.con.execute("set enable_progress_bar = false")
        cubes = "select count(*) from cube_index"  # every load keeps one: the table is there
        before = ws.con.execute(cubes).fetchone()[0]
        with sql.statement_times() as times:
            t0 = time.perf_counter()
            cube_id = ensure_cube(ws, None, window_s, PATH_LABELS)
            first = time.perf_counter() - t0
        seconds = first
        kept = ws.con.execute(cubes).fetchone()[0] == before  # found, not built
        if kept:
            found = cube_frame(ws, cube_id)
            with ws.transaction() as con:
                for dataset_id in ws.dataset_ids():
                    drop_cubes_for(con, dataset_id)
            with sql.statement_times() as times:
                t0 = time.perf_counter()
                cube_id = ensure_cube(ws, None, window_s, PATH_LABELS)
                seconds = time.perf_counter() - t0
            if not cube_frame(ws, cube_id).equals(found):
                raise AssertionError("the cube the load kept differs from the cube built from scratch")
        rows = ws.con.execute("select count(*) from cube_rows where cube_id = $id", {"id": cube_id}).fetchone()[0]
        if task.get("dump"):
            cube_frame(ws, cube_id).to_parquet(task["dump"], index=False)
    return {"seconds": seconds, "first_seconds": first, "kept": kept, "cube_rows": int(rows),
            "statements": statements(times, seconds)}


# every aggregate is summed so that none is pruned; first/last by time and min/max are what a
# counter's increase in a window needs before resets are looked at
_GROUPED = """
select count(*), sum(n), sum(lo + hi + first_v + last_v) from (
    select series_id, time_bucket(to_seconds($window_s), ts) as w, count(*) as n, min(value) as lo,
        max(value) as hi, arg_min(value, ts) as first_v, arg_max(value, ts) as last_v
    from samples
    group by series_id, w
)
"""


def _grouped(task: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    from app.store import _engine_config

    con = duckdb.connect(task["db"], read_only=True, config=_engine_config())
    try:
        con.execute("set enable_progress_bar = false")
        t0 = time.perf_counter()
        groups = con.execute(_GROUPED, {"window_s": int(task["window_s"])}).fetchone()[0]
        seconds = time.perf_counter() - t0
    finally:
        con.close()
    return {"seconds": seconds, "groups": int(groups)}


def _pandas(task: dict[str, Any]) -> dict[str, Any]:
    from app.bench.reference import pandas_cube

    t0 = time.perf_counter()
    cube = pandas_cube(task["file"], int(task["window_s"]), PATH_LABELS)
    seconds = time.perf_counter() - t0
    if task.get("dump"):
        cube.to_parquet(task["dump"], index=False)
    return {"seconds": seconds, "cube_rows": len(cube)}


def _say(message: str) -> None:
    """A progress line for the bench's log (the parent shows stderr lines that start with two spaces)."""
    sys.stderr.write(f"  {message}\n")
    sys.stderr.flush()


def _simulate(task: dict[str, Any]) -> dict[str, Any]:
    """``headroom simulate`` of the month benchmark's export (metrics only)."""
    from app.simulator.sample import write_sample

    t0 = time.perf_counter()
    every = task.get("scrape_interval_s")
    summary = write_sample(task["out"], seed=int(task["seed"]), hours=float(task["hours"]),
                           replicas=int(task["replicas"]), records=False,
                           scrape_interval_s=None if every is None else float(every),
                           progress=lambda m: _say(m.strip()))
    return {"seconds": time.perf_counter() - t0, "summary": summary}


def _fresh_workspace(db: Path) -> Any:
    """A new workspace file at ``db`` (an earlier run's file and its WAL removed), mapped by
    ``PATH_LABELS``; the caller closes it (``with``)."""
    from app.store import Workspace

    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    ws = Workspace(str(db))
    ws.con.execute("set enable_progress_bar = false")
    ws.set_paths(PATH_LABELS)
    return ws


def _month(task: dict[str, Any]) -> dict[str, Any]:
    """The month benchmark in one process: load the export into a fresh workspace file, analyse it (fit,
    demand, calibration, residual), then the scenario grid on every core and again in this process.
    Each phase reports its time and this process's peak RSS during it (the peak is reset between
    phases where Linux allows); the grid on every core also the peak of its worker processes and of
    the whole process tree."""
    from app.bench.measure import ChildMemory, reset_peak_rss
    from app.economics.predict import scenarios
    from app.economics.run.executors import default_workers
    from app.promise.shares import Promise
    from app.store import Workspace

    phases: dict[str, dict[str, float]] = {}
    resettable = reset_peak_rss()

    def phase(name: str, seconds: float, **extra: float) -> None:
        phases[name] = {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), **extra}
        _say(f"{name}: {seconds:.1f} s, peak RSS {phases[name]['peak_rss_mb']:.0f} MiB")
        reset_peak_rss()

    db = Path(task["db"])
    with _fresh_workspace(db) as ws:
        with sql.statement_times() as times:
            t0 = time.perf_counter()
            report = load.load_file(ws, Path(task["metrics"]))
            if report.status != "loaded":
                raise RuntimeError(f"{task['metrics']}: {report.status} {report.errors}")
            seconds = time.perf_counter() - t0
        load_statements = statements(times, seconds)
        phase("load", seconds)
        steps = Steps(_say)  # the analyse's own progress messages mark its steps
        with ChildMemory() as pool, sql.statement_times() as times:  # the residual's seeds in local processes
            t0 = time.perf_counter()
            analysis = scenarios.analyse(ws, ws.dataset_ids(), [Promise(ttft_s=0.5, tpot_s=0.05)], PATH_LABELS,
                                         progress=steps)
            seconds = time.perf_counter() - t0
        analyse_steps, analyse_statements = steps.done(), statements(times, seconds)
        phase("analyse", seconds, workers_peak_rss_mb=pool.child_peak_mb, tree_peak_rss_mb=pool.tree_peak_mb)
    replicas, traffic, seeds = list(task["replicas"]), list(task["traffic"]), int(task["seeds"])
    hours = analysis.demand.duration_s / 3600
    _say(f"grid of {len(replicas) * len(traffic)} scenarios x {seeds} seeds on {default_workers()} "
         f"processes ({hours:.1f} h of demand, observed N={analysis.observed.replicas})")
    twin_runs = [0]  # the runs the grid took: a backlogged scenario adds its envelope's two
    with ChildMemory() as pool:
        t0 = time.perf_counter()
        predictions = scenarios.grid(analysis, replicas, traffic, [1.0], seeds=seeds, progress=_say,
                                     on_run=lambda _done, total, _msg: twin_runs.append(total))
        seconds = time.perf_counter() - t0
    phase("grid", seconds, workers_peak_rss_mb=pool.child_peak_mb, tree_peak_rss_mb=pool.tree_peak_mb)
    if task.get("sequential", True):
        _say("the same grid in this process:")
        t0 = time.perf_counter()
        scenarios.grid(analysis, replicas, traffic, [1.0], seeds=seeds, workers=1, progress=_say)
        phase("grid_sequential", time.perf_counter() - t0)
    if task.get("dump_cube"):  # the 5-minute cube the load kept, for the pushdown's comparison (not timed)
        from app.bench.reference import counter_magnitudes
        from app.cube import cube_frame, ensure_cube

        with Workspace(str(db)) as ws:
            cube_frame(ws, ensure_cube(ws, ws.dataset_ids(), 300, PATH_LABELS)).to_parquet(task["dump_cube"],
                                                                                             index=False)
            counter_magnitudes(ws, ws.dataset_ids(), PATH_LABELS).to_parquet(magnitudes_path(task["dump_cube"]),
                                                                             index=False)
    return {"phases": phases, "peak_reset": resettable, "samples": report.samples,
            "load_statements": load_statements, "analyse_steps": analyse_steps,
            "analyse_statements": analyse_statements,
            "observed_replicas": analysis.observed.replicas, "demand_hours": hours,
            "demand_window_s": analysis.demand.window_s, "scrape_interval_s": report.scrape_interval_s,
            "requests": {p.name: float(p.requests.sum()) for p in analysis.demand.paths},
            "processes": default_workers(), "twin_runs": twin_runs[-1],
            "peak_rss_mb": max(p["peak_rss_mb"] for p in phases.values()),
            "flagged": sum(p.flagged for p in predictions),
            "predictions": [{"replicas": p.replicas, "traffic": p.traffic, "path": p.path,
                             "breach_share": p.breach_share, "flagged": p.flagged} for p in predictions]}


def _month_pushdown(task: dict[str, Any]) -> dict[str, Any]:
    """The month's export in a live VictoriaMetrics (imported once into ``task["vm_dir"]``, found there by
    a rerun), read as ``headroom scenarios --prometheus URL --pushdown`` reads it (per series at
    1-minute windows, the scalar series raw), analysed and run in the same grid as the file's; then
    its 5-minute cube against the file's (``task["file_cube"]``, the month task's dump), cell by cell."""
    import duckdb
    import pandas as pd

    from app.bench import victoria
    from app.bench.measure import ChildMemory, reset_peak_rss
    from app.cube import cube_frame, ensure_cube
    from app.economics.predict import scenarios
    from app.live import pushdown
    from app.live.client import Store
    from app.promise.shares import Promise, evaluate, time_range

    phases: dict[str, dict[str, float]] = {}
    reset_peak_rss()

    def phase(name: str, seconds: float, **extra: float) -> None:
        phases[name] = {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), **extra}
        _say(f"{name}: {seconds:.1f} s, peak RSS {phases[name]['peak_rss_mb']:.0f} MiB")
        reset_peak_rss()

    parquet, vm_dir, db = Path(task["metrics"]), Path(task["vm_dir"]), Path(task["db"])
    lo, hi = duckdb.connect().execute("select min(timestamp), max(timestamp) from read_parquet($f)",
                                      {"f": str(parquet)}).fetchall()[0]
    start = pd.Timestamp(lo).tz_convert("UTC").floor("1h")
    end = pd.Timestamp(hi).tz_convert("UTC").ceil("1min") + pd.Timedelta(minutes=1)
    made = victoria.imported(vm_dir, parquet)
    if made is None:
        victoria.clear(vm_dir)  # an earlier import of other data, or of these dates unmoved
    with victoria.running(vm_dir, vm_dir.parent / f"{vm_dir.name}.log") as url:
        if made is None:
            _say(f"importing {parquet.name} into VictoriaMetrics ({vm_dir}), once")
            made = victoria.import_parquet(url, parquet, Path(task["tmp"]), _say)
            victoria.mark_imported(vm_dir, parquet, made)
            reused = False
        else:
            _say(f"VictoriaMetrics holds {made['samples']:,} samples of {parquet.name} from an earlier run: reused")
            reused = True
        # the store holds the export moved back by whole days (victoria.shift_days): read that range
        moved = pd.Timedelta(days=int(made["shift_days"]))
        reset_peak_rss()
        with _fresh_workspace(db) as ws:
            t0 = time.perf_counter()
            report = pushdown.fetch_cube(ws, Store(url=url, timeout_s=600), (start - moved).isoformat(),
                                         (end - moved).isoformat(),
                                         window="1m", by="series", chunk="1d", progress=_say, raw_scalars=True)
            if report.status != "loaded":
                raise RuntimeError(f"pushdown from {url}: {report.status} {report.errors}")
            phase("pull", time.perf_counter() - t0)
            promises = [Promise(ttft_s=0.5, tpot_s=0.05)]
            with ChildMemory() as pool:
                t0 = time.perf_counter()
                analysis = scenarios.analyse(ws, [report.dataset_id], promises, PATH_LABELS, progress=_say)
                seconds = time.perf_counter() - t0
            phase("analyse", seconds, workers_peak_rss_mb=pool.child_peak_mb, tree_peak_rss_mb=pool.tree_peak_mb)
            with ChildMemory() as pool:
                t0 = time.perf_counter()
                predictions = scenarios.grid(analysis, list(task["replicas"]), list(task["traffic"]), [1.0],
                                             seeds=int(task["seeds"]), progress=_say)
                seconds = time.perf_counter() - t0
            phase("grid", seconds, workers_peak_rss_mb=pool.child_peak_mb, tree_peak_rss_mb=pool.tree_peak_mb)
            cube_id = ensure_cube(ws, [report.dataset_id], 300, PATH_LABELS)
            pulled = cube_frame(ws, cube_id)
            pulled["window_start"] = pulled["window_start"] + moved  # back to the export's dates
            t_lo, t_hi = time_range(ws, cube_id, None, None)
            shares = evaluate(ws, cube_id, 300, promises, t_lo, t_hi).paths
    compared = _compare_cubes(pd.read_parquet(task["file_cube"]), pulled,
                              pd.read_parquet(magnitudes_path(task["file_cube"])))
    return {"phases": phases, "samples": made["samples"], "import_s": made["seconds"], "import_reused": reused,
            "shift_days": int(made["shift_days"]),
            "json_bytes": made.get("json_bytes"), "pulled_rows": report.samples, "demand_window_s": analysis.demand.window_s,
            "observed_replicas": analysis.observed.replicas, "demand_hours": analysis.demand.duration_s / 3600,
            "peak_rss_mb": max(p["peak_rss_mb"] for p in phases.values()), "cube": compared,
            "shares": {str(r["path"]): {"ttft": r["ttft_share"], "tpot": r["tpot_share"]}
                       for _, r in shares.iterrows()},
            "predictions": [{"replicas": p.replicas, "traffic": p.traffic, "path": p.path,
                             "breach_share": p.breach_share, "flagged": p.flagged} for p in predictions]}


def magnitudes_path(cube: str | Path) -> Path:
    """Where the month task keeps its counters' magnitudes beside the cube it dumps."""
    return Path(cube).with_suffix(".magnitudes.parquet")


def _compare_cubes(file_cube: Any, pulled: Any, magnitudes: Any = None) -> dict[str, Any]:
    """The pushdown cube's cells against the file's: how many agree to 1e-9 (relative), and of those
    that do not, how many lie where the two reads are known to part (docs: Live stores, Pushdown and
    extrapolation): in the first window of their (path, signal, le, stat) series, where VictoriaMetrics
    counts a counter from zero and the file keeps its first sample as a baseline; in a window the file
    has no sample in (a scrape gap), which VictoriaMetrics answers for the minute after the last sample
    with an increase of 0; or, with ``magnitudes`` (``reference.counter_magnitudes`` of the file),
    within what VictoriaMetrics' storage precision allows an increase of counters that large (2 x
    ``STORE_PRECISION`` x their magnitude: a float ``_sum`` a month old is kept to fewer digits than an
    increase of a few seconds needs). ``unexplained`` is the rest."""
    keys = ["window_start", "path", "signal", "le", "stat"]
    a = file_cube.rename(columns={"value": "file"})
    b = pulled.rename(columns={"value": "pushdown"})
    for frame in (a, b):
        frame["le"] = frame["le"].fillna(-1.0)
        frame["signal"] = frame["signal"].fillna("")
    both = a.merge(b, on=keys, how="outer")
    gap = (both["file"] - both["pushdown"]).abs()
    same = gap <= 1e-9 * both[["file", "pushdown"]].abs().max(axis=1).clip(lower=1)
    first = both.groupby(keys[1:])["window_start"].transform("min") == both["window_start"]
    unscraped = ~both["window_start"].isin(a["window_start"].unique())
    differ = ~same.fillna(False)
    bound: Any = float("nan")
    if magnitudes is not None:
        m = magnitudes.assign(signal=magnitudes["signal"].fillna(""), le=magnitudes["le"].fillna(-1.0))
        bound = both[keys[1:]].merge(m, on=keys[1:], how="left")["magnitude"].to_numpy()
    stored = gap.le(2 * STORE_PRECISION * bound)  # no magnitude (a gauge's cell, none given): never within
    rest = differ & ~first & ~unscraped
    return {"cells": len(both), "same": int((~differ).sum()), "differ": int(differ.sum()),
            "differ_in_first_window": int((differ & first).sum()),
            "differ_in_unscraped_window": int((differ & ~first & unscraped).sum()),
            "differ_within_store_precision": int((rest & stored).sum()),
            "unexplained": int((rest & ~stored).sum()),
            "only_in_file": int(both["pushdown"].isna().sum()), "only_in_pushdown": int(both["file"].isna().sum())}


TASKS = {"load": _load, "cube": _cube, "grouped": _grouped, "pandas": _pandas, "simulate": _simulate,
         "month": _month, "month_pushdown": _month_pushdown}


def main(argv: list[str]) -> int:
    task = json.loads(argv[0])
    out = TASKS[task["task"]](task)
    out["peak_rss_mb"] = max(out.get("peak_rss_mb", 0.0), peak_rss_mb())  # a task that resets it gives its own
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

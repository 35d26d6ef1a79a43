"""The benchmarks. Each generates its data deterministically, measures Headroom and what a user would
otherwise use in the same run, checks that the two give the same answer where they must, and returns
:class:`app.bench.measure.Result` rows."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from app import ingest, sql
from app.bench import browser, generate, promql, victoria
from app.bench.measure import Result, child, profile, statements, timed
from app.bench.reference import compare
from app.cube import store_rows
from app.economics.decide import decision
from app.economics.decide.money import Prices
from app.economics.model.demand import FINE_DEMAND_WINDOWS_S, MAX_DEMAND_WINDOWS
from app.economics.predict import scenarios
from app.economics.run.executors import default_workers
from app.economics.run.ray_executor import RayCluster
from app.economics.run.replay import (
    WARMUP_S,
    demand_requests,
    outcomes,
    replay,
    run_twin,
    twin_config,
    twin_max_model_len,
)
from app.engine.fleet import run_fleet
from app.load import load_file
from app.promise import screen as promise_screen
from app.promise import shares as pm
from app.promise.shares import Promise
from app.simulator import simulate_day
from app.simulator.sample import write_metrics_parquet
from app.store import Workspace

Log = Callable[[str], None]
WINDOW_S = 300


@dataclass(frozen=True)
class Size:
    """What ``--size`` runs."""

    name: str
    text_lines: int
    cube_samples: tuple[int, ...]  # the growth series; the last is the largest cube build
    cube_files: tuple[int, ...]  # exports per size (a week of samples arrives as several files)
    pandas_at: int  # the size compared with pandas and with Prometheus
    interaction_days: float
    interaction_paths: int
    replay_hours: float
    grid_replicas: tuple[int, ...]
    grid_traffic: tuple[float, ...]
    repeat: int  # runs of each timing, the best kept (small: one; it checks the pairs, not the figures)
    interaction_budget_s: float
    month_hours: float  # the economics_month export: hours x replicas, simulated
    month_replicas: int
    month_grid_replicas: tuple[int, ...]
    month_grid_traffic: tuple[float, ...]
    month_seeds: int
    month15_hours: float  # the economics_month_15s export: the same fleet scraped every 15 s
    month15_replicas: int


SIZES = {
    "small": Size("small", text_lines=50_000, cube_samples=(100_000, 300_000, 1_000_000), cube_files=(1, 1, 1),
                  pandas_at=300_000, interaction_days=3, interaction_paths=10, replay_hours=0.5,
                  grid_replicas=(3, 4, 5, 6, 8), grid_traffic=(1.0, 1.5), repeat=1, interaction_budget_s=6,
                  month_hours=0.5, month_replicas=4, month_grid_replicas=(3, 4, 5), month_grid_traffic=(1.0, 1.5),
                  month_seeds=2, month15_hours=1, month15_replicas=4),
    "full": Size("full", text_lines=1_000_000, cube_samples=(1_000_000, 10_000_000, 100_000_000),
                 cube_files=(1, 1, 10), pandas_at=10_000_000, interaction_days=30, interaction_paths=10,
                 replay_hours=24, grid_replicas=(3, 4, 5, 6, 8), grid_traffic=(1.0, 1.5), repeat=3,
                 interaction_budget_s=240, month_hours=720, month_replicas=8, month_grid_replicas=(6, 8, 10),
                 month_grid_traffic=(1.0, 1.5), month_seeds=3, month15_hours=720, month15_replicas=8),
}


def _best(runs: list[float]) -> float:
    return min(runs)


# -- text exposition -------------------------------------------------------------------------------
def text_ingest(size: Size, workdir: Path, log: Log) -> list[Result]:
    """Headroom's DuckDB text parser against prometheus_client's, on the same file; same samples."""

    shape = generate.FleetShape()
    fleet = generate.write_fleet_parquet(workdir / "text-src", size.text_lines, seed=11, shape=shape, stem="text")
    info = generate.write_exposition(fleet.paths[0], workdir / "metrics.prom")
    log(f"text exposition: {info.lines:,} lines, {info.samples:,} samples")
    path = Path(info.path)

    def headroom_parse(ws: Workspace) -> Workspace:
        with ingest.open_source(path) as src:
            ingest.stage(ws.con, src)
        return ws

    # a fresh workspace per run, opened before the clock starts: the reference builds no store either
    runs, ws, where = [], None, []
    for _ in range(size.repeat):
        if ws is not None:
            ws.close()
        fresh = Workspace(":memory:")
        with sql.statement_times() as times:
            r, ws = timed(lambda fresh=fresh: headroom_parse(fresh))
        if not runs or r[0] < min(runs):  # the statements of the run whose time is the figure
            where = statements(times, r[0])
        runs += r
    assert ws is not None
    ours = _headroom_samples(ws)
    ws.close()
    load_runs = []
    for _ in range(size.repeat):
        with Workspace(":memory:") as w:
            r, report = timed(lambda w=w: load_file(w, path))
            load_runs += r
    log(f"  headroom parse best {_best(runs):.2f} s")

    def reference_parse() -> list:
        text = path.read_text()
        return list(text_string_to_metric_families(text))

    ref_runs, families = timed(reference_parse, 1 if size.text_lines >= 500_000 else size.repeat)
    log(f"  prometheus_client parse {_best(ref_runs):.2f} s")
    theirs = _client_samples(families)
    del families
    equal, why = _same_samples(ours, theirs)
    if not equal:
        raise AssertionError(f"text parse: Headroom and prometheus_client disagree: {why}")
    best = _best(runs)
    return [Result(
        name="text_ingest", samples=info.lines, seconds=best, reference="prometheus_client",
        reference_seconds=_best(ref_runs), runs=runs, reference_runs=ref_runs,
        detail={"lines": info.lines, "samples": info.samples, "lines_per_s": round(info.lines / best),
                "reference_lines_per_s": round(info.lines / _best(ref_runs)), "same_samples": True,
                "load_seconds": round(_best(load_runs), 4), "format": info.format, "statements": where,
                "what": "parse (ingest.stage: read, split, labels) vs text_string_to_metric_families; "
                        "load_seconds = the whole load (parse, store, dataset summary)"},
    )]


def _headroom_samples(ws: Any) -> tuple[list[tuple], np.ndarray, np.ndarray, np.ndarray]:
    keys = ws.con.execute("select series_key, metric, map_entries(labels) from stage_keys").fetchall()
    canon = {k: (m, tuple(sorted((e["key"], e["value"]) for e in entries))) for k, m, entries in keys}
    idx = {k: i for i, k in enumerate(canon)}
    cols = ws.con.execute("select series_key, epoch_ms(ts) as ts_ms, value from stage_points").fetchnumpy()
    series = np.fromiter((idx[k] for k in cols["series_key"]), dtype=np.int64, count=len(cols["series_key"]))
    return list(canon.values()), series, np.asarray(cols["ts_ms"], dtype=np.int64), np.asarray(cols["value"])


def _client_samples(families: list) -> tuple[list[tuple], np.ndarray, np.ndarray, np.ndarray]:
    idx: dict[tuple, int] = {}
    series, ts, values = [], [], []
    for fam in families:
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            series.append(idx.setdefault(key, len(idx)))
            ts.append(-1 if s.timestamp is None else round(float(s.timestamp) * 1000))
            values.append(s.value)
    return list(idx), np.asarray(series, dtype=np.int64), np.asarray(ts, dtype=np.int64), np.asarray(values)


def _same_samples(a: tuple, b: tuple) -> tuple[bool, str]:
    """Both sides hold the same (series, timestamp, value) multiset."""
    keys_a, s_a, t_a, v_a = a
    keys_b, s_b, t_b, v_b = b
    if len(s_a) != len(s_b):
        return False, f"{len(s_a)} samples against {len(s_b)}"
    if set(keys_a) != set(keys_b):
        return False, f"series differ, e.g. {sorted(set(keys_a) ^ set(keys_b))[:2]}"
    rank = {k: i for i, k in enumerate(sorted(keys_a))}
    ga = np.asarray([rank[k] for k in keys_a])[s_a]
    gb = np.asarray([rank[k] for k in keys_b])[s_b]
    oa, ob = np.lexsort((v_a, t_a, ga)), np.lexsort((v_b, t_b, gb))
    same = (np.array_equal(ga[oa], gb[ob]) and np.array_equal(t_a[oa], t_b[ob])
            and np.array_equal(v_a[oa], v_b[ob], equal_nan=True))
    return same, "" if same else "values or timestamps differ"


# -- cube builds -------------------------------------------------------------------------------------
def _bare_scan(files: list[str], repeat: int) -> list[float]:
    """The floor: ``select count(*), sum(value)`` over the same Parquet files, fresh connection."""
    runs = []
    for _ in range(repeat):
        con = duckdb.connect()
        t0 = time.perf_counter()
        con.execute("select count(*), sum(value) from read_parquet($files)", {"files": files}).fetchall()
        runs.append(time.perf_counter() - t0)
        con.close()
    return runs


def cube_builds(size: Size, workdir: Path, log: Log, promql: bool = True) -> list[Result]:
    """Parquet -> workspace -> cube at each size, against the bare scan; pandas (and Prometheus) at one
    size, with the cubes asserted equal to pandas'; the growth exponent of the cube build."""
    results: list[Result] = []
    cube_times: dict[int, float] = {}
    load_times: dict[int, float] = {}
    for n, files in zip(size.cube_samples, size.cube_files, strict=True):
        src = workdir / f"fleet-{n}"
        t0 = time.perf_counter()
        fleet = generate.write_fleet_parquet(src, n, files=files, seed=7)
        log(f"fleet of {fleet.samples:,} samples ({fleet.series} series, {fleet.hours:.1f} h, {files} file(s), "
            f"{fleet.restarts} restarts) written in {time.perf_counter() - t0:.1f} s")
        bare = _bare_scan(fleet.paths, size.repeat)
        db = workdir / f"workspace-{n}.duckdb"
        for p in (db, Path(str(db) + ".wal")):
            p.unlink(missing_ok=True)
        load = child({"task": "load", "db": str(db), "files": fleet.paths}, workdir)
        log(f"  load {load['seconds']:.1f} s (peak RSS {load['peak_rss_mb']:.0f} MiB)")
        compare_here = n == size.pandas_at
        dump = workdir / f"cube-{n}.parquet"
        cube = child({"task": "cube", "db": str(db), "window_s": WINDOW_S,
                      "dump": str(dump) if compare_here else None}, workdir)
        grouped = child({"task": "grouped", "db": str(db), "window_s": WINDOW_S}, workdir)
        log(f"  cube {cube['seconds']:.2f} s ({cube['cube_rows']:,} rows, peak RSS {cube['peak_rss_mb']:.0f} MiB); "
            f"bare scan {_best(bare):.3f} s; group-by per series and window {grouped['seconds']:.2f} s")
        cube_times[fleet.samples] = cube["seconds"]
        load_times[fleet.samples] = load["seconds"]
        results.append(Result(
            name="parquet_load", samples=fleet.samples, seconds=load["seconds"], reference="bare_scan",
            reference_seconds=_best(bare), peak_rss_mb=load["peak_rss_mb"], runs=[load["seconds"]],
            reference_runs=bare, detail={"files": files, "per_file_s": [round(f["seconds"], 3) for f in load["per_file"]],
                                         "statements": load.get("statements", []),
                                         "what": "Workspace.load_file of each export: parse, store, dataset summary"}))
        results.append(Result(
            name="cube_build", samples=fleet.samples, seconds=cube["seconds"], reference="bare_scan",
            reference_seconds=_best(bare), peak_rss_mb=cube["peak_rss_mb"], runs=[cube["seconds"]],
            reference_runs=bare, detail={"cube_rows": cube["cube_rows"], "window_s": WINDOW_S,
                                         "statements": cube.get("statements", []),
                                         "series": fleet.series, "hours": round(fleet.hours, 2),
                                         "restarts": fleet.restarts,
                                         "grouped_scan_s": round(grouped["seconds"], 3),
                                         "grouped_groups": grouped["groups"],
                                         "what": "ensure_cube on the loaded workspace, from scratch (fresh process); "
                                                 "grouped_scan_s: one group-by of the stored samples per "
                                                 "(series, window) with count, min, max, first and last, "
                                                 "the least a cube must do"}))
        if compare_here:
            results.append(_against_pandas(fleet, load, cube, dump, workdir, log, compare))
            if promql:
                results += _against_prometheus(fleet, cube, workdir, log)
        db.unlink(missing_ok=True)
    sizes = sorted(cube_times)
    growth = _exponent(sizes, [cube_times[s] for s in sizes])
    growth_load = _exponent(sizes, [load_times[s] for s in sizes])
    for r in results:
        if r.name == "cube_build":
            r.detail["growth_exponent"] = growth
            r.detail["load_growth_exponent"] = growth_load
    return results


def _exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) against log(samples): 1 = linear."""
    if len(sizes) < 2:
        return None
    slope = np.polyfit(np.log(np.asarray(sizes, float)), np.log(np.asarray(seconds, float)), 1)[0]
    return round(float(slope), 3)


def _against_pandas(fleet: generate.FleetInfo, load: dict, cube: dict, dump: Path, workdir: Path, log: Log,
                    compare: Callable) -> Result:
    if len(fleet.paths) != 1:
        raise ValueError("the pandas reference reads one file")
    ref_dump = workdir / "cube-pandas.parquet"
    ref = child({"task": "pandas", "file": fleet.paths[0], "window_s": WINDOW_S, "dump": str(ref_dump)}, workdir)
    why = compare(pd.read_parquet(dump), pd.read_parquet(ref_dump))
    if why:
        raise AssertionError(f"cube: Headroom and the pandas reference differ: {why}")
    log(f"  pandas {ref['seconds']:.1f} s (peak RSS {ref['peak_rss_mb']:.0f} MiB); cubes identical")
    # what a user waits from the Parquet file to the cube: the load (which keeps the file's 5-minute
    # cube) and the first ensure_cube after it
    total = load["seconds"] + cube["first_seconds"]
    return Result(
        name="parquet_to_cube", samples=fleet.samples, seconds=total, reference="pandas",
        reference_seconds=ref["seconds"], peak_rss_mb=max(load["peak_rss_mb"], cube["peak_rss_mb"]),
        runs=[total], reference_runs=[ref["seconds"]],
        detail={"load_s": round(load["seconds"], 3), "first_cube_s": round(cube["first_seconds"], 4),
                "cube_kept_by_load": cube["kept"], "cube_s": round(cube["seconds"], 3), "same_cube": True,
                "cube_rows": cube["cube_rows"], "reference_peak_rss_mb": round(ref["peak_rss_mb"], 1),
                "cube_only_ratio": round(ref["seconds"] / cube["seconds"], 2),
                "what": "Parquet to cube: Headroom's load + the first ensure_cube after it (a lookup when "
                        "the load kept its 5-minute cube) against pandas read_parquet + the same cube; "
                        "cube_only_ratio: pandas against the cube built from scratch"})


def _against_prometheus(fleet: generate.FleetInfo, cube: dict, workdir: Path, log: Log) -> list[Result]:
    if not promql.available():
        log("  prometheus/promtool not found: the PromQL comparison is skipped")
        return []
    om = workdir / "fleet.om.txt"
    t0 = time.perf_counter()
    generate.write_exposition(fleet.paths[0], om, openmetrics=True)
    written = time.perf_counter() - t0
    backfill_s = promql.backfill(om, workdir / "prometheus-data")
    om.unlink(missing_ok=True)
    log(f"  OpenMetrics written in {written:.1f} s, promtool backfill {backfill_s:.1f} s")
    start = fleet.start_s + WINDOW_S - fleet.start_s % WINDOW_S  # first window end on the grid
    end = fleet.end_s + (-fleet.end_s) % WINDOW_S
    runs, sanity = [], {}
    with promql.server(workdir / "prometheus-data", workdir) as url:
        for _ in range(2):
            seconds, sanity = promql.run_cube(url, start, end, WINDOW_S)
            runs.append(seconds)
    log(f"  PromQL cube queries best {min(runs):.2f} s")
    return [Result(
        name="promql_cube", samples=fleet.samples, seconds=cube["seconds"], reference="promql",
        reference_seconds=min(runs), peak_rss_mb=cube["peak_rss_mb"], runs=[cube["seconds"]], reference_runs=runs,
        detail={"queries": len(promql.cube_queries(WINDOW_S)), "backfill_s": round(backfill_s, 2),
                "statements": cube.get("statements", []),
                "promql_ttft_count": round(sanity.get("ttft_count", 0.0), 1),
                "what": "Headroom's cube build against the PromQL range queries giving the same rows "
                        "(step = window), on the same samples backfilled into Prometheus"})]


# -- interaction -------------------------------------------------------------------------------------
def interaction(size: Size, workdir: Path, log: Log, analysis: Any, predictions: list[Any]) -> list[Result]:
    """A promise change and a price change on a many-day, many-path cube with its replays cached."""
    table = generate.cube_rows(size.interaction_days, size.interaction_paths, WINDOW_S)
    # a workspace file, as the dashboard keeps (an in-memory DuckDB stores the cube uncompressed and
    # reads it slower)
    db = workdir / "interaction.duckdb"
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    ws = Workspace(str(db))
    try:
        ws.con.execute("set enable_progress_bar = false")
        ws.con.register("bench_cube", table)
        store_rows(ws.con, 1, "bench_cube", WINDOW_S)
        ws.con.unregister("bench_cube")
        spec = {"datasets": [], "window_s": WINDOW_S, "path_labels": ["model_name"], "rules": []}

        ws.con.execute("insert into cube_index (cube_key, cube_id, spec) values ('bench', 1, $s)",
                       {"s": json.dumps(spec)})
        log(f"interaction cube: {size.interaction_days:g} days x {size.interaction_paths} paths, "
            f"{table.num_rows:,} cube rows")
        start, end = pm.time_range(ws, 1, None, None)
        # what the Promise page runs (promise_screen.evaluate: the shares over the range, per step and
        # the alerts at each step's end, looked up in the cube's running totals, which the first
        # change builds); beside it, today's full-resolution path (promise.evaluate, every window)
        t0 = time.perf_counter()
        first = promise_screen.evaluate(ws, 1, WINDOW_S, [pm.Promise(ttft_s=0.3, tpot_s=0.045)], start, end)
        first_s = time.perf_counter() - t0
        totals: list[float] = []
        full: list[float] = []
        deadline = time.perf_counter() + size.interaction_budget_s
        i = 0
        while i < 5 or (i < 25 and time.perf_counter() < deadline):
            promises = [pm.Promise(ttft_s=0.25 + 0.05 * i, tpot_s=0.04 + 0.002 * i, target=0.99)]
            t0 = time.perf_counter()
            screen = promise_screen.evaluate(ws, 1, WINDOW_S, promises, start, end)
            totals.append(time.perf_counter() - t0)
            if i < 3:
                t0 = time.perf_counter()
                pm.evaluate(ws, 1, WINDOW_S, promises, start, end)
                full.append(time.perf_counter() - t0)
                _same_range_rows(screen.paths, pm.shares(ws, 1, promises, start, end))
            i += 1
        log(f"  promise change: median {statistics.median(totals) * 1000:.0f} ms over {len(totals)} changes "
            f"(steps of {screen.step_s} s; every window: {statistics.median(full) * 1000:.0f} ms)")
        where = profile(lambda: promise_screen.evaluate(ws, 1, WINDOW_S, promises, start, end))
    finally:
        ws.close()
    steps = int(len(screen.windows) / max(1, len(screen.paths)))
    promise_result = Result(
        name="promise_change", samples=table.num_rows, seconds=statistics.median(totals), runs=totals,
        detail={"statistic": "median", "cube_rows": table.num_rows, "days": size.interaction_days,
                "paths": size.interaction_paths, "window_s": WINDOW_S, "step_s": screen.step_s,
                "steps_per_path": steps, "looked_up": screen.looked_up, "first_change_s": round(first_s, 3),
                "first_step_s": first.step_s,
                "every_window_median_ms": round(statistics.median(full) * 1000, 1),
                "same_range_rows": True, "profile": where, "tried": PROMISE_TRIED,
                "what": "a new TTFT/TPOT promise as the Promise page evaluates it (promise_screen.evaluate): "
                        "the shares per path over the range, per step (at most "
                        f"{promise_screen.MAX_POINTS:,} per path) and the alerts at each step's end, each range "
                        "two lookups in the cube's running totals, on a workspace file; first_change_s: the "
                        "first change, which builds the running totals; every_window_median_ms: the same "
                        "promise window by window (promise.evaluate, the download's path); same_range_rows: "
                        "the range rows equal promise.shares' to 1e-12 (asserted)"})

    paths = [generate.PATHS[p % len(generate.PATHS)] for p in range(size.interaction_paths)]
    wide_analysis, wide_predictions = _widen(analysis, predictions, paths)
    price_runs = []
    for i in range(25):
        prices = Prices(replica_hour=8.0 + i, breach=dict.fromkeys(paths, 0.01 * (1 + i % 5)), horizon_hours=720)
        t0 = time.perf_counter()
        decision.document(wide_analysis, wide_predictions, prices)
        price_runs.append(time.perf_counter() - t0)
    log(f"  price change: median {statistics.median(price_runs) * 1000:.1f} ms "
        f"({len(wide_predictions)} cached predictions)")
    price_result = Result(
        name="price_change", samples=len(wide_predictions), seconds=statistics.median(price_runs), runs=price_runs,
        detail={"statistic": "median", "predictions": len(wide_predictions), "paths": len(paths),
                "scenarios": len(wide_predictions) // len(paths),
                "what": "decision.document re-pricing cached predictions (no replay)"})
    out = [promise_result, price_result]
    why = browser.missing()
    if why is None:
        out.append(promise_change_browser(size, workdir, log))
    else:
        log(f"  promise_change_browser skipped: {why}")
    return out


BROWSER_CHANGES = (0.35, 0.5, 0.42, 1.0, 0.3, 0.75, 0.6)  # TTFT thresholds typed, at and between bucket bounds


def promise_change_browser(size: Size, workdir: Path, log: Log) -> Result:
    """The promise change in the dashboard: a workspace holding an export of ``interaction_paths`` paths
    over ``interaction_days`` (one replica scraped every 5 minutes: the Promise page reads its 5-minute
    cube), ``streamlit run`` on it, and Chromium typing a path's TTFT threshold, timed to the
    breach-share chart's redraw (``app.bench.browser``)."""
    shape = generate.FleetShape(replicas=1, paths=tuple(generate.PATHS[p % len(generate.PATHS)]
                                                   for p in range(size.interaction_paths)), scrape_interval_s=300)
    samples = int(size.interaction_days * generate.DAY_S / shape.scrape_interval_s) * shape.series
    t0 = time.perf_counter()
    fleet = generate.write_fleet_parquet(workdir / "browser-src", samples, seed=5, shape=shape, stem="paths")
    db = workdir / "browser.duckdb"
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    with Workspace(str(db)) as ws:
        ws.con.execute("set enable_progress_bar = false")
        for path in fleet.paths:
            report = load_file(ws, Path(path))
            if report.status != "loaded":
                raise RuntimeError(f"{path}: {report.errors}")
    log(f"promise change in the browser: {fleet.samples:,} samples of {size.interaction_paths} paths over "
        f"{size.interaction_days:g} days loaded in {time.perf_counter() - t0:.0f} s")
    first_path = sorted(shape.paths)[0]
    scratch = workdir / "browser"
    with browser.dashboard(db, scratch) as url, browser.chromium(scratch) as page:
        t0 = time.perf_counter()
        browser.open_promise(page, url, first_path)
        opened = time.perf_counter() - t0
        timed = browser.promise_changes(page, first_path, BROWSER_CHANGES, log=lambda m: log(f"  {m}"))
    runs = timed["seconds"]
    with Workspace(str(db)) as ws:
        cube_id = int(ws.con.execute("select max(cube_id) from cube_index").fetchall()[0][0])
        start, end = pm.time_range(ws, cube_id, None, None)
    log(f"  promise change in the browser: median {statistics.median(runs) * 1000:.0f} ms over {len(runs)} changes")
    return Result(
        name="promise_change_browser", samples=fleet.samples, seconds=statistics.median(runs), runs=runs,
        detail={"statistic": "median", "days": size.interaction_days, "paths": size.interaction_paths,
                "thresholds": list(BROWSER_CHANGES), "server_ms": timed["server_ms"],
                "server_median_ms": round(browser.median(timed["server_ms"]), 1),
                "step_s": promise_screen.screen_step(WINDOW_S, start, end), "first_page_s": round(opened, 2),
                "what": "Chromium (Playwright) on the dashboard's Promise page: a path's TTFT threshold typed and "
                        "Enter, to the breach-share chart's traces changing (the chart redrawn with the new "
                        "shares); server_ms: the page's run on the server for each change (its sidebar's "
                        "'Last interaction'); first_page_s: the Promise page opened and drawn the first time"})


# what was done about the month's time (each change leaves every prediction as it was); the analyse's
# steps and statements, and the grid's runs, are in the row's detail
MONTH_TRIED = [
    "the residual, the closing sweeps and the remedies replay the observed N on one set of worker processes that "
    "keep each seed's requests (afd7fb8): each call had started its own and synthesized the same requests again",
    "a closing move clamped at a factor just tried keeps that try's views instead of replaying them (d1d61d8)",
    "a time scale is not tried again when nothing moved since its last try (b0c2314): two whole-month replays "
    "per seed for the same answer",
    "the grid's second pass runs on the processes of its first (1e62772), and the envelope of scenarios "
    "foreseen backlogged is planned with their seeds (d083001)",
    "the grid's and the residual's runs start in this process while the worker processes start (eb7fef8), "
    "and the workers no longer import scipy.stats (596429c): a worker's imports took 1.9 to 2.0 s, now 1.1 to "
    "1.25 s",
    "the twin's engine alone on the same traces (a day at N' 3, 4, 5 and 8, traffic 1 and 1.5), fc9d294's and "
    "that of each commit that changed it since, in six interleaved rounds, the fastest of five runs each: counted "
    "runs take 0.853 s against 0.825 s (+3.4 %), with the same request times; the whole step comes with the "
    "prefix cache (17114bc), whose checks and wider rows run with the cache off too, and no later commit moved it "
    "(the 8 to 10 % measured through the replay came from a noisy stretch); 128-byte rows aligned to cache "
    "lines ran within 2 % of today's 131-byte ones, so the rows were left as they are",
    "left: the closing sweeps (the twin at the observed N moved within 5 % to meet the observed shares) and the "
    "envelope's runs are work fc9d294 did not do; each sweep is two to three rounds of whole-month replays",
]

# what the promise change was tried with before the lookups, for the page where the goal is not met
PROMISE_TRIED = [
    "every window in one statement (promise__shares: per-window rows and alerts in one pass, the range rows on "
    "the other core): 218 ms at 526ffe0, 151 ms of it the per-window statement",
    "a plan kept between changes, halves of the paths on two cursors, partitioned windows: no gain "
    "(the statement's fixed cost, about 37 ms, paid by each)",
    "the lookups as one SQL statement over stored running totals: about 0.2 s of planning alone",
    "running totals of the lists built in DuckDB (one row per bucket and window): about 5 s per histogram "
    "of this cube, against a fraction of a second in numpy",
]


def _same_range_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The lookups' range rows are promise__shares' (every number to 1e-12), or the benchmark stops."""
    a, b = got.set_index("path").sort_index(), want.set_index("path").sort_index()
    if list(a.index) != list(b.index):
        raise AssertionError(f"promise change: paths {list(a.index)} against {list(b.index)}")
    for column in pm.SHARE_COLUMNS[2:]:
        x, y = a[column], b[column]
        if column == "tpot_basis" or column.endswith("_exact"):
            same = [(None if pd.isna(u) else u) == (None if pd.isna(v) else v) for u, v in zip(x, y, strict=True)]
        else:
            u, v = x.astype(float).to_numpy(), y.astype(float).to_numpy()
            same = list((np.isnan(u) & np.isnan(v)) | (np.abs(u - v) <= 1e-12 * np.maximum(1.0, np.abs(v))))
        if not all(same):
            raise AssertionError(f"promise change: {column} of the lookups differs from promise.shares'")


def _widen(analysis: Any, predictions: list[Any], paths: list[str]) -> tuple[Any, list[Any]]:
    """The cached replays of a dashboard grid (1..16 replicas x 3 traffic x 2 context) for ``paths``,
    cloned from real predictions of the replay benchmark (re-pricing is arithmetic on them)."""
    base = [p for p in predictions if p.path == predictions[0].path] or predictions
    observed = replace(analysis.observed, requests={p: 1000.0 * (k + 1) for k, p in enumerate(paths)})
    thresholds = dict.fromkeys(paths, next(iter(analysis.thresholds.values())))
    wide = replace(analysis, observed=observed, thresholds=thresholds)
    out = []
    for n in range(1, 17):
        for g in (0.5, 1.0, 1.5):
            for m in (1.0, 1.5):
                src = base[(n + int(g * 2) + int(m * 2)) % len(base)]
                for k, path in enumerate(paths):
                    share = min(1.0, src.breach_share * (1 + 0.1 * k) * 8 / (n + 4))
                    out.append(replace(src, replicas=n, traffic=g, context=m, path=path, breach_share=share,
                                       breach_share_low=share * 0.8, breach_share_high=min(1.0, share * 1.2)))
    return wide, out


# -- scenario replay ---------------------------------------------------------------------------------
def scenario_replay(size: Size, workdir: Path, log: Log,
                    ray_address: str | None = None) -> tuple[list[Result], Any, list[Any]]:
    """The economics replay of a simulated day of 4-replica demand: seconds per replica-hour, and a
    10-scenario grid (sequential, as ``headroom scenarios`` runs it, and on every core); with
    ``ray_address``, the same grid on that Ray cluster too, against the local pool (the same
    predictions, or it raises)."""
    t0 = time.perf_counter()
    sim = simulate_day(seed=7, replicas=4, hours=size.replay_hours)
    parquet = workdir / "simulated-day.parquet"
    write_metrics_parquet(sim.metrics_frame, parquet)
    del sim
    log(f"simulated {size.replay_hours:g} h of a 4-replica fleet in {time.perf_counter() - t0:.1f} s")
    db = workdir / "replay.duckdb"
    for stale in (db, db.with_name(db.name + ".wal")):  # an earlier run's: the load would be "unchanged"
        stale.unlink(missing_ok=True)
    ws = Workspace(str(db))
    try:
        ws.con.execute("set enable_progress_bar = false")
        ws.set_paths(["model_name"])  # as the figures were measured: the load keeps the cube analyse reads
        report = load_file(ws, parquet)
        if report.status != "loaded":
            raise RuntimeError(f"simulated day: {report.errors}")
        t0 = time.perf_counter()
        promises = [Promise(ttft_s=0.5, tpot_s=0.05)]
        analysis = scenarios.analyse(ws, ws.dataset_ids(), promises, ["model_name"])
        analyse_s = time.perf_counter() - t0
    finally:
        ws.close()
    log(f"  analyse (fit, demand, calibration at N={analysis.observed.replicas}) {analyse_s:.1f} s")
    hours = (analysis.demand.duration_s + WARMUP_S) / 3600
    replicas = analysis.observed.replicas
    runs = []
    for seed in range(size.repeat if size.replay_hours < 6 else 2):
        t0 = time.perf_counter()
        replay(analysis.model, analysis.demand, replicas, analysis.thresholds, seed=3000 + seed)
        runs.append(time.perf_counter() - t0)
    per_rh = [r / (replicas * hours) for r in runs]
    log(f"  replay at N={replicas}: {_best(runs):.2f} s = {_best(per_rh):.4f} s per replica-hour")
    # the reference: the same requests through the Python engine the compiled one was written from
    reqs = demand_requests(analysis.demand, seed=3000, max_model_len=twin_max_model_len(analysis.model))
    t0 = time.perf_counter()
    fast_run, fast = run_twin(analysis.model, analysis.demand, replicas, seed=3000, requests=reqs)
    engine_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = outcomes(run_fleet(fast_run.trace, twin_config(analysis.model, replicas), seed=3000, drain=True,
                             metrics=False))
    python_s = time.perf_counter() - t0
    differ = [f for f in ("first_token", "finish", "ttft_s", "tpot_s", "replica", "preemptions")
              if not np.array_equal(ref[f], fast[f], equal_nan=True)]
    if differ:
        raise RuntimeError(f"the compiled twin differs from the Python engine in {', '.join(differ)}")
    python_per_rh = python_s / (replicas * hours)
    log(f"  the Python engine on the same requests: {python_s:.2f} s = {python_per_rh:.4f} s per replica-hour; "
        "same requests and times")
    results = [Result(
        name="scenario_replay", samples=None, seconds=_best(per_rh), unit="replica-hour", runs=per_rh,
        reference="python_engine", reference_seconds=python_per_rh, reference_runs=[python_per_rh],
        detail={"replicas": replicas, "simulated_hours": round(hours, 3), "replay_s": round(_best(runs), 3),
                "analyse_s": round(analyse_s, 2), "requests": len(reqs["arrival_s"]),
                "twin_run_s": round(engine_s, 3), "python_engine_s": round(python_s, 3),
                "what": "economics.replay.replay of the observed demand at the observed fleet size (requests "
                        "synthesised, the compiled twin, shares), seconds per simulated replica-hour (the "
                        "quarter-hour warm-up included); the reference is the Python engine on the same "
                        "requests (asserted: the same request times)"})]

    grid = [(n, g) for g in size.grid_traffic for n in size.grid_replicas]
    replica_hours = sum(n * hours for n, _ in grid)
    workers = default_workers()
    chosen = scenarios.grid_executor(analysis, [(n, g, 1.0) for n, g in grid], 1)
    log(f"  {len(grid)}-scenario grid, 1 seed each, as headroom scenarios runs it ({chosen.describe()}):")
    twin_runs: list[int] = []  # the runs it took: a backlogged scenario adds its envelope's two
    t0 = time.perf_counter()
    predictions = scenarios.grid(analysis, list(size.grid_replicas), list(size.grid_traffic), [1.0], seeds=1,
                                 progress=lambda msg: log(f"    {msg}"), on_run=lambda _d, total, _m: twin_runs.append(total))
    parallel = time.perf_counter() - t0
    log(f"  grid {parallel:.1f} s; the same grid in one process:")
    t0 = time.perf_counter()
    scenarios.grid(analysis, list(size.grid_replicas), list(size.grid_traffic), [1.0], seeds=1, workers=1,
                   progress=lambda msg: log(f"    {msg}"))
    sequential = time.perf_counter() - t0
    log(f"  grid in one process {sequential:.1f} s; on every core ({workers} processes):")
    t0 = time.perf_counter()
    scenarios.grid(analysis, list(size.grid_replicas), list(size.grid_traffic), [1.0], seeds=1, workers=workers,
                   progress=lambda msg: log(f"    {msg}"))
    every_core = time.perf_counter() - t0
    log(f"  grid on {workers} processes {every_core:.1f} s")
    # where a grid's time goes, in this process (not timed above: cProfile's hooks cost a little)
    where = profile(lambda: scenarios.grid(analysis, list(size.grid_replicas), list(size.grid_traffic), [1.0],
                                           seeds=1, workers=1), repeat=1)
    results.append(Result(
        name="scenario_grid", samples=len(grid), seconds=parallel, reference="sequential",
        reference_seconds=sequential, runs=[parallel], reference_runs=[sequential],
        detail={"scenarios": len(grid), "seeds": 1, "replica_hours": round(replica_hours, 1),
                "s_per_replica_hour": round(parallel / replica_hours, 4),
                "sequential_s_per_replica_hour": round(sequential / replica_hours, 4),
                "twin_runs": twin_runs[-1], "envelope_runs": twin_runs[-1] - len(grid),
                "s_per_twin_run": round(parallel / twin_runs[-1], 3), "profile": where,
                "processes": chosen.workers or workers, "every_core_s": round(every_core, 3),
                "every_core_processes": workers,
                "what": "scenarios.grid (N' x traffic, 1 seed) as headroom scenarios runs it (local processes, "
                        "or this process for a grid too small to pay for starting them), against the same grid "
                        "with workers=1; every_core_s: with a process per core; twin_runs: the runs it took, "
                        "envelope_runs of them the sensitivity envelope of backlogged scenarios"}))
    if ray_address:
        log(f"  the same grid on the Ray cluster at {ray_address}:")
        t0 = time.perf_counter()
        on_ray = scenarios.grid(analysis, list(size.grid_replicas), list(size.grid_traffic), [1.0], seeds=1,
                                progress=lambda msg: log(f"    {msg}"), executor=RayCluster(ray_address))
        ray_s = time.perf_counter() - t0
        if [repr(asdict(p)) for p in on_ray] != [repr(asdict(p)) for p in predictions]:
            raise RuntimeError(f"the grid on the Ray cluster at {ray_address} differs from the local pool's")
        log(f"  grid on Ray {ray_s:.1f} s; the same predictions as the local pool")
        results.append(Result(
            name="scenario_grid_ray", samples=len(grid), seconds=ray_s, reference="local_pool",
            reference_seconds=every_core, runs=[ray_s], reference_runs=[every_core],
            detail={"scenarios": len(grid), "seeds": 1, "replica_hours": round(replica_hours, 1),
                    "s_per_replica_hour": round(ray_s / replica_hours, 4), "address": ray_address,
                    "processes": workers, "same_predictions": True,
                    "what": "the same grid as scenario_grid on a Ray cluster (connection, runtime environment "
                            "and worker start-up included), against the local pool"}))
    return results, analysis, predictions


# -- economics at month scale ------------------------------------------------------------------------
MONTH_SEED = 7


def month_export(size: Size, workdir: Path, log: Log, scrape_interval_s: float | None = None,
                 ) -> tuple[Path, dict[str, Any]]:
    """The month benchmark's export (``headroom simulate --hours H --replicas R [--scrape-interval S]``,
    metrics only) in ``workdir``, generated in its own process (the samples written piece by piece), or
    found there from an earlier run with the same parameters; (its directory, how it was made:
    parameters, seconds, peak RSS, reused). ``scrape_interval_s`` None: the simulator's default for the
    span (60 s beyond a day)."""
    params: dict[str, Any] = {"seed": MONTH_SEED, "hours": size.month_hours, "replicas": size.month_replicas}
    if scrape_interval_s is not None:
        params["scrape_interval_s"] = float(scrape_interval_s)
    out = workdir / (f"month-{size.month_hours:g}h-{size.month_replicas}r"
                     + ("" if scrape_interval_s is None else f"-{scrape_interval_s:g}s"))
    made = out / "bench.json"
    metrics = out / "metrics.parquet"
    if made.exists() and metrics.exists():
        info = json.loads(made.read_text())
        if info.get("params") == params and info.get("metrics_bytes") == metrics.stat().st_size:
            log(f"month export found in {out} (generated earlier in {info['seconds']:.0f} s): reused")
            return out, {**info, "reused": True}
    made.unlink(missing_ok=True)
    every = "" if scrape_interval_s is None else f" --scrape-interval {scrape_interval_s:g}"
    log(f"simulating the month export: headroom simulate --hours {size.month_hours:g} --replicas "
        f"{size.month_replicas}{every} --no-records (its own process)")
    res = child({"task": "simulate", "out": str(out), **params}, workdir, timeout_s=4 * 3600, log=log)
    summary = res["summary"]
    info = {"params": params, "seconds": res["seconds"], "peak_rss_mb": res["peak_rss_mb"],
            "metrics_bytes": summary["metrics_bytes"], "samples": summary["samples"], "series": summary["series"],
            "requests": summary["requests"], "scrape_interval_s": summary["scrape_interval_s"],
            "sim_seconds": summary.get("sim_seconds"), "true_shares": summary["true_shares"]}
    made.write_text(json.dumps(info, indent=2) + "\n")
    log(f"  {info['requests']:,} requests, {info['samples']:,} samples of {info['series']:,} series every "
        f"{info['scrape_interval_s']:g} s ({info['metrics_bytes'] / 1e6:.0f} MB) in {info['seconds']:.0f} s, "
        f"peak RSS {info['peak_rss_mb']:.0f} MiB")
    return out, {**info, "reused": False}


def economics_month(size: Size, workdir: Path, log: Log) -> list[Result]:
    """A simulated month of a fleet (``--size small``: half an hour) end to end in one fresh process:
    load + analyse + a scenario grid with several seeds on every core, against the same grid in one
    process; the phase split and each phase's peak RSS in ``detail``."""
    out, made = month_export(size, workdir, log)
    return [_month_row("economics_month", size, out, made, workdir, log)[0]]


MONTH15_SCRAPE_S = 15.0


def economics_month_15s(size: Size, workdir: Path, log: Log) -> list[Result]:
    """The month at the scale users have: the same fleet scraped every 15 s (``--size full``: 30 days of
    8 replicas, about 740 M samples, generated once into ``workdir`` and reused), loaded, analysed and
    replayed in the month's grid; with ``victoria-metrics`` installed, the same export imported once
    into a live VictoriaMetrics and read by ``--pushdown`` (``economics_month_15s_pushdown``)."""
    month15 = replace(size, month_hours=size.month15_hours, month_replicas=size.month15_replicas)
    out, made = month_export(month15, workdir, log, scrape_interval_s=MONTH15_SCRAPE_S)
    file_cube = workdir / "month15-cube.parquet"
    row, res = _month_row("economics_month_15s", month15, out, made, workdir, log,
                          extra={"dump_cube": str(file_cube)})
    results = [row]
    if victoria.available():
        try:
            results.append(_month_pushdown_row(month15, out, made, row, workdir, file_cube, log))
        except RuntimeError as exc:
            if size.name == "small":
                raise
            log(f"  economics_month_15s_pushdown failed, no row: {exc}")
    else:
        log("  economics_month_15s_pushdown skipped: victoria-metrics is not installed")
    file_cube.unlink(missing_ok=True)
    return results


def _month_row(name: str, size: Size, out: Path, made: dict[str, Any], workdir: Path, log: Log,
               extra: dict[str, Any] | None = None) -> tuple[Result, dict[str, Any]]:
    task = {"task": "month", "metrics": str(out / "metrics.parquet"), "db": str(workdir / "month.duckdb"),
            "replicas": list(size.month_grid_replicas), "traffic": list(size.month_grid_traffic),
            "seeds": size.month_seeds, **(extra or {})}
    res = child(task, workdir, timeout_s=24 * 3600, log=lambda msg: log(f"  {msg.strip()}"))
    (workdir / "month.duckdb").unlink(missing_ok=True)
    ph = res["phases"]
    base = ph["load"]["seconds"] + ph["analyse"]["seconds"]
    seconds = base + ph["grid"]["seconds"]
    reference = base + ph["grid_sequential"]["seconds"]
    scenarios_n = len(size.month_grid_replicas) * len(size.month_grid_traffic)
    hours = res["demand_hours"] + 0.25  # each twin run replays a quarter hour of warm-up before the export
    replica_hours = sum(size.month_grid_replicas) * len(size.month_grid_traffic) * size.month_seeds * hours
    log(f"  {name}: {seconds:.1f} s on {res['processes']} processes (load {ph['load']['seconds']:.1f} s, analyse "
        f"{ph['analyse']['seconds']:.1f} s, grid {ph['grid']['seconds']:.1f} s); in one process {reference:.1f} s; "
        f"peak RSS {res['peak_rss_mb']:.0f} MiB")
    duration_s = res["demand_hours"] * 3600
    every = made["scrape_interval_s"]
    return Result(
        name=name, samples=res["samples"], seconds=seconds, reference="sequential",
        reference_seconds=reference, peak_rss_mb=res["peak_rss_mb"], runs=[seconds], reference_runs=[reference],
        detail={"hours": size.month_hours, "replicas": size.month_replicas,
                "observed_replicas": res["observed_replicas"], "scenarios": scenarios_n, "seeds": size.month_seeds,
                "grid_replicas": list(size.month_grid_replicas), "grid_traffic": list(size.month_grid_traffic),
                "replica_hours": round(replica_hours, 1), "processes": res["processes"],
                "twin_runs": res["twin_runs"], "envelope_runs": res["twin_runs"] - scenarios_n * size.month_seeds,
                "requests": made["requests"], "series": made["series"], "scrape_interval_s": every,
                "metrics_bytes": made["metrics_bytes"],
                "demand_window_s": res.get("demand_window_s"),
                "windows_at_scrape_interval": int(round(duration_s / every)) if every else None,
                "max_demand_windows": MAX_DEMAND_WINDOWS, "fine_demand_windows_s": list(FINE_DEMAND_WINDOWS_S),
                "generation_s": round(made["seconds"], 1), "generation_peak_rss_mb": round(made["peak_rss_mb"], 1),
                "generation_reused": made["reused"],
                **{f"{k}_s": round(v["seconds"], 3) for k, v in ph.items()},
                **{f"{k}_peak_rss_mb": round(v["peak_rss_mb"], 1) for k, v in ph.items()},
                **{f"{k}_{m}_peak_rss_mb": round(ph[k][f"{m}_peak_rss_mb"], 1)
                   for k in ("analyse", "grid") for m in ("workers", "tree")},
                "peak_reset_per_phase": res["peak_reset"], "flagged_predictions": res["flagged"],
                "load_statements": res.get("load_statements", []), "analyse_steps": res.get("analyse_steps", []),
                "analyse_statements": res.get("analyse_statements", []),
                "s_per_replica_hour": round(ph["grid"]["seconds"] / replica_hours, 5), "tried": MONTH_TRIED,
                "what": "load (Workspace.load_file) + analyse (fit, demand, calibration, residual) + a "
                        f"{scenarios_n}-scenario grid x {size.month_seeds} seeds on every core, in one fresh "
                        "process, against the same with the grid in one process; the export is simulated by "
                        "the bench (generation_s, not counted) and reused from --workdir; peak RSS: the "
                        "process's own (each phase's, reset between phases); the grid's worker processes and "
                        "the process tree's sampled total beside it; demand_window_s: the demand's window "
                        "(the scrape interval where it is one of fine_demand_windows_s and needs at most "
                        "max_demand_windows windows, else 60 s)"}), res


def _month_pushdown_row(size: Size, out: Path, made: dict[str, Any], file_row: Result, workdir: Path,
                        file_cube: Path, log: Log) -> Result:
    """The 15 s month imported once into a live VictoriaMetrics and read by ``--pushdown``: pull +
    analyse + the same grid, against the file path's load + analyse + grid; the 5-minute cubes compared
    cell by cell (VictoriaMetrics' increase() counts from the last sample before the window, so the
    cubes agree but in each series' first window)."""
    task = {"task": "month_pushdown", "metrics": str(out / "metrics.parquet"), "db": str(workdir / "month-vm.duckdb"),
            "vm_dir": str(workdir / f"{out.name}-victoria-metrics"), "tmp": str(workdir / "tmp"),
            "file_cube": str(file_cube), "replicas": list(size.month_grid_replicas),
            "traffic": list(size.month_grid_traffic), "seeds": size.month_seeds}
    res = child(task, workdir, timeout_s=24 * 3600, log=lambda msg: log(f"  {msg.strip()}"))
    (workdir / "month-vm.duckdb").unlink(missing_ok=True)
    ph = res["phases"]
    seconds = ph["pull"]["seconds"] + ph["analyse"]["seconds"] + ph["grid"]["seconds"]
    cube = res["cube"]
    log(f"  economics_month_15s_pushdown: {seconds:.1f} s (pull {ph['pull']['seconds']:.1f} s, analyse "
        f"{ph['analyse']['seconds']:.1f} s, grid {ph['grid']['seconds']:.1f} s) against the file's "
        f"{file_row.seconds:.1f} s; cube cells differing {cube['differ']:,} of {cube['cells']:,} "
        f"({cube['differ_in_first_window']:,} in a series' first window, {cube['differ_in_unscraped_window']:,} in "
        f"windows without a scrape, {cube['differ_within_store_precision']:,} within VictoriaMetrics' storage "
        f"precision, {cube['unexplained']:,} unexplained)")
    return Result(
        name="economics_month_15s_pushdown", samples=res["samples"], seconds=seconds, reference="file",
        reference_seconds=file_row.seconds, peak_rss_mb=res["peak_rss_mb"], runs=[seconds],
        reference_runs=[file_row.seconds],
        detail={"hours": size.month_hours, "replicas": size.month_replicas, "scrape_interval_s": made["scrape_interval_s"],
                "import_s": round(res["import_s"], 1), "import_reused": res["import_reused"],
                "shift_days": res["shift_days"],
                "json_bytes": res["json_bytes"], "pulled_rows": res["pulled_rows"],
                "demand_window_s": res["demand_window_s"], "observed_replicas": res["observed_replicas"],
                **{f"{k}_s": round(v["seconds"], 3) for k, v in ph.items()},
                **{f"{k}_peak_rss_mb": round(v["peak_rss_mb"], 1) for k, v in ph.items()},
                "cube_cells": cube["cells"], "cube_cells_same": cube["same"], "cube_cells_differ": cube["differ"],
                "cube_cells_differ_in_first_window": cube["differ_in_first_window"],
                "cube_cells_differ_in_unscraped_window": cube["differ_in_unscraped_window"],
                "cube_cells_differ_within_store_precision": cube["differ_within_store_precision"],
                "cube_cells_unexplained": cube["unexplained"],
                "cube_only_in_file": cube["only_in_file"], "cube_only_in_pushdown": cube["only_in_pushdown"],
                "shares": res["shares"],
                "what": "the same export imported once into a live VictoriaMetrics (import_s, not counted; "
                        "reused from --workdir) and read as headroom scenarios --prometheus URL --pushdown reads it "
                        "(per series at 1-minute windows, the scalar series raw: pull), analysed and run in the "
                        "same grid, against the file path's load + analyse + grid (economics_month_15s); the "
                        "5-minute cubes of both compared cell by cell (to 1e-9; a cell of increases also to "
                        "VictoriaMetrics' 12 significant digits of the counters behind it)"})


def growth_exponent(results: list[Result]) -> float | None:
    for r in results:
        if r.name == "cube_build" and r.detail.get("growth_exponent") is not None:
            return r.detail["growth_exponent"]
    return None


def isfinite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)

"""``headroom bench``: the small size runs end to end and prints the documented JSON; the pairs it
compares agree (Headroom's text parse = prometheus_client's samples, Headroom's cube = the pandas
cube). No timing is asserted: timings belong to the benchmark's output, not to a test."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path

import pandas as pd
import pytest

from app import cli, load
from app.bench import browser, document, generate, promql, suites, victoria
from app.bench.reference import compare, pandas_cube
from app.cube import cube_frame, ensure_cube
from app.store import Workspace

RESULT_KEYS = ["name", "samples", "seconds", "reference", "reference_seconds", "ratio", "peak_rss_mb"]
REFERENCES = {"prometheus_client", "bare_scan", "pandas", "promql", "python_engine", "sequential", "local_pool", "file",
              None}


def _cube(files: list[str], window_s: int = 300) -> pd.DataFrame:
    with Workspace(":memory:") as ws:
        for f in files:
            assert load.load_file(ws, Path(f)).status == "loaded"
        return cube_frame(ws, ensure_cube(ws, None, window_s, ["model_name"]))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> generate.FleetInfo:
    # a small fleet that still holds restarts, a scrape gap and a label set appearing part-way
    shape = generate.FleetShape(replicas=3, scrape_interval_s=15)
    return generate.write_fleet_parquet(tmp_path_factory.mktemp("fleet"), 120_000, files=3, seed=5, shape=shape)


@pytest.fixture(scope="module")
def whole(fleet: generate.FleetInfo, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same samples as one file."""
    out = tmp_path_factory.mktemp("whole") / "fleet.parquet"
    pd.concat([pd.read_parquet(p) for p in fleet.paths]).to_parquet(out, index=False)
    return str(out)


def test_month_export_is_reused_from_the_workdir(tmp_path: Path) -> None:
    """A rerun with --workdir finds the month export it generated (same parameters) and skips the
    simulation; other parameters generate again."""
    from dataclasses import replace

    from app.bench import suites

    size = replace(suites.SIZES["small"], month_hours=0.1, month_replicas=2)
    lines: list[str] = []
    first, made = suites.month_export(size, tmp_path, lines.append)
    assert made["reused"] is False and made["samples"] > 0 and (first / "metrics.parquet").exists()
    again, reused = suites.month_export(size, tmp_path, lines.append)
    assert again == first and reused["reused"] is True and reused["seconds"] == made["seconds"]
    _, other = suites.month_export(replace(size, month_replicas=3), tmp_path, lines.append)
    assert other["reused"] is False


def test_generated_fleet_is_deterministic(tmp_path: Path) -> None:
    a = generate.write_fleet_parquet(tmp_path / "a", 60_000, seed=3)
    b = generate.write_fleet_parquet(tmp_path / "b", 60_000, seed=3)
    assert a.samples == b.samples and a.restarts >= 1
    pd.testing.assert_frame_equal(pd.read_parquet(a.paths[0]), pd.read_parquet(b.paths[0]))


@pytest.mark.parametrize("window_s", [60, 300, 3600])
def test_headroom_cube_equals_the_pandas_cube(whole: str, window_s: int) -> None:
    headroom = _cube([whole], window_s)
    assert {"resets", "replicas"} <= set(headroom["stat"])
    assert compare(headroom, pandas_cube(whole, window_s)) is None


def test_several_exports_give_the_cube_of_one(fleet: generate.FleetInfo, whole: str) -> None:
    assert compare(_cube(fleet.paths), _cube([whole])) is None


def test_overlapping_exports_are_deduplicated(fleet: generate.FleetInfo, whole: str) -> None:
    # the middle export loaded twice (once inside the whole file): one value per series and time
    assert compare(_cube([whole, fleet.paths[1]]), _cube([whole])) is None


def test_text_exposition_round_trip(whole: str, tmp_path: Path) -> None:
    info = generate.write_exposition(whole, tmp_path / "m.prom")
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, Path(info.path))
        assert (report.status, report.format, report.samples) == ("loaded", "prometheus-text", info.samples)
        text_cube = cube_frame(ws, ensure_cube(ws, None, 300, ["model_name"]))
    assert compare(text_cube, _cube([whole])) is None


@pytest.mark.slow
def test_small_bench_prints_the_documented_json(tmp_path: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["bench", "--size", "small", "--format", "json", "--quiet", "--workdir", str(tmp_path)])
    assert code == 0
    doc = json.loads(out.getvalue())
    assert set(doc) >= {"machine", "results", "growth_exponent"}
    assert set(doc["machine"]) >= {"cores", "memory_gb", "python", "duckdb"}
    names = {r["name"] for r in doc["results"]}
    expected = {"text_ingest", "parquet_load", "cube_build", "parquet_to_cube", "promise_change", "price_change",
                "scenario_replay", "scenario_grid", "economics_month", "economics_month_15s"}
    if promql.available():
        expected.add("promql_cube")
    if browser.missing() is None:
        expected.add("promise_change_browser")
    if victoria.available():
        expected.add("economics_month_15s_pushdown")
    assert expected <= names
    for r in doc["results"]:
        assert list(r)[: len(RESULT_KEYS)] == RESULT_KEYS
        assert r["reference"] in REFERENCES
        assert r["seconds"] > 0
        if r["reference"] is None:
            assert r["reference_seconds"] is None and r["ratio"] is None
        else:
            assert math.isclose(r["ratio"], r["reference_seconds"] / r["seconds"], rel_tol=1e-2)
    by_name = {r["name"]: r for r in doc["results"]}
    # the pairs agree: the same samples, the same cube (the bench raises otherwise; it also says so)
    assert by_name["text_ingest"]["detail"]["same_samples"] is True
    assert by_name["parquet_to_cube"]["detail"]["same_cube"] is True
    # one file: its load kept the 5-minute cube (the worker checks it equals a build from scratch), and
    # parquet_to_cube counts the lookup after the load
    to_cube = by_name["parquet_to_cube"]["detail"]
    assert to_cube["cube_kept_by_load"] is True
    assert math.isclose(by_name["parquet_to_cube"]["seconds"], to_cube["load_s"] + to_cube["first_cube_s"],
                        rel_tol=1e-2)
    assert [r["samples"] for r in doc["results"] if r["name"] == "cube_build"] == sorted(
        r["samples"] for r in doc["results"] if r["name"] == "cube_build")
    assert isinstance(doc["growth_exponent"], float)
    # the month row, scaled down: its phases add up, its export is the bench's own, each phase has a peak
    month = by_name["economics_month"]["detail"]
    assert math.isclose(by_name["economics_month"]["seconds"], month["load_s"] + month["analyse_s"] + month["grid_s"],
                        rel_tol=1e-2)
    assert month["generation_reused"] is False and month["requests"] > 0 and month["scenarios"] == 6
    # every run of the grid is counted: the seeds' and, of a backlogged scenario, the envelope's two
    assert month["twin_runs"] == month["scenarios"] * month["seeds"] + month["envelope_runs"]
    assert month["envelope_runs"] % 2 == 0
    grid = by_name["scenario_grid"]["detail"]
    assert grid["twin_runs"] == grid["scenarios"] * grid["seeds"] + grid["envelope_runs"]
    assert grid["envelope_runs"] % 2 == 0 and grid["envelope_runs"] <= 2 * grid["scenarios"]
    assert all(month[f"{k}_peak_rss_mb"] > 0 for k in ("load", "analyse", "grid", "grid_sequential"))
    # where the time goes: each load's and cube build's named queries, then the time outside them; the
    # month's analyse step by step, from its own progress messages
    for name in ("text_ingest", "parquet_load", "cube_build", "promql_cube"):
        if name in by_name:
            rows = by_name[name]["detail"]["statements"]
            assert rows[-1]["query"] == "outside the named queries" and rows[0]["calls"] >= 1, name
    assert any(s["query"] == "cube__build" for s in by_name["cube_build"]["detail"]["statements"])
    assert any(s["query"] == "ingest__insert_samples" for s in month["load_statements"])
    assert month["analyse_statements"][-1]["query"] == "outside the named queries"
    steps = [s["step"] for s in month["analyse_steps"] if s["step"] != "before the first message"]
    assert steps[0].startswith("fitting the replica model") and any("the residual" in s for s in steps)
    assert by_name["economics_month"]["peak_rss_mb"] == max(
        month[f"{k}_peak_rss_mb"] for k in ("load", "analyse", "grid", "grid_sequential"))
    # the promise change is looked up at the screen's resolution, its range rows those of promise.shares
    change = by_name["promise_change"]["detail"]
    assert change["looked_up"] is True and change["same_range_rows"] is True and change["profile"]
    assert change["steps_per_path"] <= 1000
    # the 15 s month: its demand per minute (a window of the scrape interval only at 5 s scrapes), the
    # note saying why, its phases adding up
    month15 = by_name["economics_month_15s"]["detail"]
    assert month15["scrape_interval_s"] == 15 and month15["demand_window_s"] == 60
    assert "taken only at 5 s scrapes" in document.demand_note(month15)
    assert math.isclose(by_name["economics_month_15s"]["seconds"],
                        month15["load_s"] + month15["analyse_s"] + month15["grid_s"], rel_tol=1e-2)
    if "economics_month_15s_pushdown" in by_name:
        pushed = by_name["economics_month_15s_pushdown"]["detail"]
        # VictoriaMetrics does not extrapolate: the cubes differ only in a series' first window and
        # in windows without a scrape
        assert pushed["cube_cells_unexplained"] == 0
        assert pushed["cube_cells_differ"] == (pushed["cube_cells_differ_in_first_window"]
                                               + pushed["cube_cells_differ_in_unscraped_window"])
        assert pushed["cube_cells_same"] > 0.9 * pushed["cube_cells"]
    if "promise_change_browser" in by_name:
        assert len(by_name["promise_change_browser"]["runs"]) == len(suites.BROWSER_CHANGES)
    table = document.to_table(doc)
    assert "cube_build" in table and "growth exponent" in table and "cores" in table


# -- the single-sort cube query against its former formulation ----------------------------------------
def _windows_both_ways(ws: Workspace, window_s: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """cube__series_windows as the cube build runs it, and the former formulation, on the same data."""
    from app.bench.reference import series_windows_by_sorting
    from app.cube import build_into_temp

    ids = ws.dataset_ids()
    build_into_temp(ws.con, ids, window_s, ["model_name"])
    cols = "series_id, window_start, increase, resets, gauge_min, gauge_sum, gauge_n, gauge_max, first_counted"
    new = ws.con.execute(f"select {cols} from cube_series_windows order by series_id, window_start").df()
    return new, series_windows_by_sorting(ws.con, ids, window_s)


@pytest.mark.parametrize("window_s", [60, 420, 3600, 86400])
def test_single_sort_query_equals_its_former_formulation(whole: str, window_s: int) -> None:
    with Workspace(":memory:") as ws:
        assert load.load_file(ws, Path(whole)).status == "loaded"
        new, old = _windows_both_ways(ws, window_s)
    pd.testing.assert_frame_equal(new, old, check_exact=True)


def test_edge_cases_equal_the_former_formulation(tmp_path: Path) -> None:
    """Duplicates within and across exports, NaN and Inf, a series created part-way, a single-scrape
    replica, a joint histogram reset, samples before the window origin (2000-01-03)."""
    from tests.conftest import T0, histogram, samples
    from tests.conftest import load as load_rows

    v1 = {"engine": "0", "instance": "a:8000", "model_name": "chat"}
    rows = samples("vllm:prompt_tokens_total", v1, [(0, 5), (15, 9), (30, 9), (45, 2), (60, 7), (75, 30)])
    # NaN and +Inf arrive through the text format (a frame's NaN is a missing value)
    text = tmp_path / "odd.prom"
    text.write_text("".join(
        f'vllm:generation_tokens_total{{engine="0",instance="a:8000",model_name="chat"}} {v} {(T0 + t) * 1000}\n'
        for t, v in [(0, "1"), (15, "NaN"), (30, "4"), (45, "6"), (60, "+Inf"), (75, "+Inf"), (90, "8"),
                     (135, "9"), (150, "+Inf"), (165, "+Inf")]))
    rows += samples("vllm:num_requests_running", v1, [(0, 3), (15, 4), (15, 6), (30, 1)])  # a repeated sample
    rows += histogram("vllm:time_to_first_token_seconds", v1, ["0.5", "1.0", "+Inf"],
                      [(0, [10, 12, 30], 9.0), (60, [8, 13, 14], 5.0), (120, [9, 15, 20], 6.5)])
    rows += samples("vllm:request_success_total", {**v1, "finished_reason": "abort"}, [(30, 3), (45, 4)])
    rows += samples("vllm:request_success_created", {**v1, "finished_reason": "abort"}, [(30, T0 + 20), (45, T0 + 20)])
    rows += samples("vllm:request_success_total", {**v1, "instance": "snap:8000"}, [(30, 42)])
    before_origin = 946_684_800 - 600 - T0  # 1999-12-31T23:50:00Z, in seconds after T0
    rows += samples("vllm:num_preemptions_total", {**v1, "instance": "old:8000"},
                    [(before_origin + 15 * k, v) for k, v in enumerate([1, 2, 0, 3, 5, 5, 1, 9])])
    with Workspace(":memory:") as ws:
        load_rows(ws, rows, "a")
        assert load.load_file(ws, text).status == "loaded"
        # an overlapping export: two samples again, one with another value (the higher one counts)
        load_rows(ws, samples("vllm:prompt_tokens_total", v1, [(30, 9), (45, 4)]), "b")
        for window_s in (60, 300):
            new, old = _windows_both_ways(ws, window_s)
            pd.testing.assert_frame_equal(new, old, check_exact=True)


# -- the streaming pass in storage order against the sort -------------------------------------------------
def _windows_presorted_and_sorted(ws: Workspace, window_s: int) -> tuple[bool, pd.DataFrame, pd.DataFrame]:
    """Whether the build took the streaming pass, its cube__series_windows, and the same query sorting."""
    from app import sql
    from app.cube import build_into_temp, sample_pass

    ids = ws.dataset_ids()
    build_into_temp(ws.con, ids, window_s, ["model_name"])
    cols = "series_id, window_start, increase, resets, gauge_min, gauge_sum, gauge_n, gauge_max, first_counted"
    built = ws.con.execute(f"select {cols} from cube_series_windows order by series_id, window_start").df()
    # the build leaves the run tables empty: run the pass again to see which way it went
    disjoint = sample_pass(ws.con, ids, window_s)
    sql.materialize(ws.con, "cube__series_windows", "sorted_windows", dataset_ids=ids, window_s=window_s,
                    dedupe=False, presorted=False, replicas=None)
    by_sort = ws.con.execute(f"select {cols} from sorted_windows order by series_id, window_start").df()
    return bool(disjoint), built, by_sort


@pytest.mark.parametrize("order", ["series by series", "exports newest first", "scrape by scrape", "shuffled rows"])
def test_streaming_pass_equals_the_sort(fleet: generate.FleetInfo, whole: str, tmp_path: Path, order: str) -> None:
    """The build's windows equal the sort's whatever the storage order; it streams whenever the runs of
    each series are disjoint (shuffled rows make runs that skip samples of their series: it sorts)."""
    files = [whole]
    if order == "exports newest first":
        files = list(reversed(fleet.paths))
    elif order in ("scrape by scrape", "shuffled rows"):
        frame = pd.read_parquet(whole)
        frame = (frame.sort_values(["timestamp", "metric", "labels"]) if order == "scrape by scrape"
                 else frame.sample(frac=1.0, random_state=3))
        files = [str(tmp_path / "reordered.parquet")]
        frame.to_parquet(files[0], index=False)
    with Workspace(":memory:") as ws:
        for f in files:
            assert load.load_file(ws, Path(f)).status == "loaded"
        for window_s in (60, 300):
            disjoint, built, by_sort = _windows_presorted_and_sorted(ws, window_s)
            assert disjoint == (order != "shuffled rows")
            pd.testing.assert_frame_equal(built, by_sort, check_exact=True)


def test_overlapping_runs_fall_back_to_the_sort(fleet: generate.FleetInfo, whole: str) -> None:
    with Workspace(":memory:") as ws:
        for f in (whole, fleet.paths[1]):  # the middle export twice: its series' runs overlap
            assert load.load_file(ws, Path(f)).status == "loaded"
        disjoint, built, by_sort = _windows_presorted_and_sorted(ws, 300)
    assert not disjoint
    assert len(built) == len(by_sort)


# -- a large build, a few replicas at a time ---------------------------------------------------------------
def test_replica_parts_first_fit_largest_first() -> None:
    from app.cube import replica_parts

    kept = [("a", 5), ("b", 9), ("c", 3), ("d", 4), ("huge", 30), ("e", 1)]
    parts = replica_parts(kept, 10)
    assert parts == [["huge"], ["b", "e"], ["a", "d"], ["c"]]
    assert sorted(r for p in parts for r in p) == sorted(r for r, _ in kept)
    assert replica_parts([("x", 3)], 10) == [["x"]]
    assert replica_parts([], 10) == []


@pytest.mark.parametrize("case", ["series by series", "shuffled rows", "overlapping exports"])
def test_a_build_in_replica_parts_is_the_whole_build(fleet: generate.FleetInfo, whole: str, tmp_path: Path,
                                                     case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``WINDOWS_PART_SAMPLES`` kept samples the series windows are computed a few replicas at a
    time: the same rows, bit for bit, through the streaming pass, the sort and the deduplicated pass."""
    from app import cube, sql

    files = [whole]
    if case == "shuffled rows":
        files = [str(tmp_path / "shuffled.parquet")]
        pd.read_parquet(whole).sample(frac=1.0, random_state=3).to_parquet(files[0], index=False)
    elif case == "overlapping exports":
        files = [whole, fleet.paths[1]]
    cols = "series_id, window_start, increase, resets, gauge_min, gauge_sum, gauge_n, gauge_max, first_counted"
    with Workspace(":memory:") as ws:
        for f in files:
            assert load.load_file(ws, Path(f)).status == "loaded"
        ids = ws.dataset_ids()

        def build() -> tuple[pd.DataFrame, pd.DataFrame]:
            cube.build_into_temp(ws.con, ids, 300, ["model_name"])
            windows = ws.con.execute(f"select {cols} from cube_series_windows order by series_id, window_start").df()
            built = ws.con.execute("select * from cube_new").df()
            return windows, built.sort_values(list(built.columns[:6]), ignore_index=True)

        whole_windows, whole_cube = build()
        parts_run: list[list[str] | None] = []
        insert_into = sql.insert_into

        def counted(con: object, name: str, table: str, **params: object) -> None:
            parts_run.append(params.get("replicas"))  # type: ignore[arg-type]
            insert_into(con, name, table, **params)  # type: ignore[arg-type]

        monkeypatch.setattr(cube, "WINDOWS_PART_SAMPLES", 0)  # every replica a part of its own
        monkeypatch.setattr(cube.sql, "insert_into", counted)
        parted_windows, parted_cube = build()
        duplicates = ws.con.execute("select count(*) from cube_duplicate_series").fetchone()[0]
    # the parts after each pass's first (3 replicas): one pass, or two when exports repeat samples
    assert (duplicates > 0) == (case == "overlapping exports")
    assert len(parts_run) == 2 * (2 if duplicates else 1)
    assert all(p is not None and len(p) == 1 for p in parts_run)
    pd.testing.assert_frame_equal(parted_windows, whole_windows, check_exact=True)
    pd.testing.assert_frame_equal(parted_cube, whole_cube, check_exact=False, rtol=1e-12)


# -- a cube of some signals --------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["series by series", "scrape by scrape"])
def test_a_cube_of_some_signals_is_the_full_cubes_rows(whole: str, tmp_path: Path, order: str) -> None:
    """The demand's and the capacity fit's cubes hold only the signals they read, from those series'
    samples alone: their rows are the full cube's rows of those signals, bit for bit (resets, repairs
    and the scrape gap included), but for ``replicas``, the replicas reporting a kept signal, and the
    bucket rows and repairs of the histograms whose buckets they do not read."""
    from app.cube import FIT_BUCKETS, FIT_SIGNALS, REPLICA_LABELS, cube_frame, ensure_cube
    from app.economics.model.demand import DEMAND_BUCKETS, DEMAND_SIGNALS

    files = [whole]
    if order == "scrape by scrape":  # the kept series' runs are then stretches with the others left out
        files = [str(tmp_path / "reordered.parquet")]
        pd.read_parquet(whole).sort_values(["timestamp", "metric", "labels"]).to_parquet(files[0], index=False)
    with Workspace(":memory:") as ws:
        assert load.load_file(ws, Path(files[0])).status == "loaded"
        cubes = "select count(*) from cube_index"
        loaded = cube_frame(ws, ensure_cube(ws, None, 300, REPLICA_LABELS, signals=FIT_SIGNALS, buckets=FIT_BUCKETS))
        assert ws.con.execute(cubes).fetchone()[0] == 2  # the load kept the fit's cube beside its 5-minute one
        ws.con.execute("delete from cube_index where spec->>'signals' is not null")
        for window_s, labels, signals, buckets in ((60, ["model_name"], DEMAND_SIGNALS, DEMAND_BUCKETS),
                                                   (300, REPLICA_LABELS, FIT_SIGNALS, FIT_BUCKETS)):
            part = cube_frame(ws, ensure_cube(ws, None, window_s, labels, signals=signals, buckets=buckets))
            if window_s == 300:  # the one the load kept (from its own pass over the samples) is the same
                pd.testing.assert_frame_equal(loaded, part, check_exact=True)
            full = cube_frame(ws, ensure_cube(ws, None, window_s, labels))
            assert set(part["signal"].dropna()) == set(full["signal"].dropna()) & set(signals)
            assert {"ttft", "prompt_tokens", "generation_tokens"} <= set(part["signal"].dropna())
            # of the TTFT histogram (neither reads its buckets) the count and sum, not the bucket rows
            assert (full["signal"].eq("ttft") & full["le"].notna()).any()
            assert not (part["signal"].eq("ttft") & part["le"].notna()).any()
            assert (part["signal"].eq("ttft") & part["stat"].eq("count")).any()
            totals_only = ~full["signal"].isin(buckets) & (full["le"].notna() | full["stat"].eq("repairs"))
            kept = full[full["signal"].isin(signals) & ~totals_only].reset_index(drop=True)
            pd.testing.assert_frame_equal(part[part["stat"] != "replicas"].reset_index(drop=True), kept,
                                          check_exact=True)
            assert part["stat"].eq("resets").any() or window_s == 60  # the fleet's restarts are in it
            # the replicas reporting: those of the full cube wherever every replica reports a kept signal
            reps = part[part["stat"] == "replicas"].merge(full[full["stat"] == "replicas"],
                                                          on=["window_start", "path"], suffixes=("", "_full"))
            assert len(reps) and (reps["value"] <= reps["value_full"]).all()

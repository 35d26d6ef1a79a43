"""The sample-by-sample windows (``cube__series_windows_sparse``: every window of a series holds one
sample, a 60 s scrape read in 60 s windows) against the per-window aggregate of
``cube__series_windows`` on the same samples: the same rows, bit for bit, with restarts, a scrape
gap, bucket repairs, series that appear late, `_created` and a replica scraped once."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import sql
from app.bench.generate import FleetShape, write_fleet_parquet
from app.cube import cube_frame, ensure_cube, sample_pass
from app.load import load_file
from app.store import Workspace
from tests.conftest import histogram, load, samples

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
KEY = ["series_id", "window_start"]


def _both(ws: Workspace, window_s: int) -> tuple[bool, pd.DataFrame, pd.DataFrame]:
    """(sparse?, the aggregate's rows, the sample-by-sample rows) of every series at ``window_s``."""
    con, ids = ws.con, ws.dataset_ids()
    sql.materialize(con, "signals__series", "cube_series", dataset_ids=ids, path_labels=["model_name"])
    assert sample_pass(con, ids, window_s)
    sparse = bool(sql.rows(con, "cube__sparse_windows", window_s=window_s)[0][0])
    general = sql.df(con, "cube__series_windows", dataset_ids=ids, window_s=window_s, dedupe=False, presorted=True,
                     replicas=None)
    by_sample = sql.df(con, "cube__series_windows_sparse", dataset_ids=ids, window_s=window_s, replicas=None)
    return sparse, _sorted(general), _sorted(by_sample)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(KEY, ignore_index=True)


def _assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b) > 0
    for col in a.columns:
        assert a[col].dtype == b[col].dtype, col
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind == "f":  # NaN where NaN, the rest bit for bit
            assert np.array_equal(np.isnan(x), np.isnan(y), equal_nan=False), col
            assert np.array_equal(x[~np.isnan(x)], y[~np.isnan(y)]), col
        else:
            assert a[col].equals(b[col]), col


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bench's generated fleet scraped every 60 s: restarts, a scrape gap, bucket repairs,
    finished_reason="error" appearing late."""
    out = tmp_path_factory.mktemp("sparse")
    info = write_fleet_parquet(out, 400_000, shape=FleetShape(replicas=3, scrape_interval_s=60))
    assert info.restarts > 0
    return Path(info.paths[0])


def test_a_60_s_scrape_in_60_s_windows_is_the_aggregates_rows(fleet: Path) -> None:
    with Workspace(":memory:") as ws:
        assert load_file(ws, fleet).status == "loaded"
        sparse, general, by_sample = _both(ws, 60)
        assert sparse
        _assert_same(general, by_sample)
        assert (general["resets"] > 0).any() and general["first_counted"].any()
        assert general["gauge_n"].notna().any()
        # and a cube of 120 s windows is not sparse: the aggregate builds it
        assert not _both(ws, 120)[0]


@pytest.mark.parametrize("window_s", [60, 300])
def test_the_pass_in_ranges_is_the_pass_in_one(fleet: Path, monkeypatch: pytest.MonkeyPatch, window_s: int) -> None:
    """cube__sample_runs reads the samples in ranges of row ids side by side: a range's ends only end
    runs, which the run links join, so every series' windows are those of one range; and the
    connection keeps the insertion order it had (a load stores a file in its order)."""
    from app import cube

    with Workspace(":memory:") as ws:
        assert load_file(ws, fleet).status == "loaded"
        cols = "series_id, window_start, increase, resets, gauge_min, gauge_sum, gauge_n, gauge_max, first_counted"
        built = {}
        for ranges in (1, 3, 4):
            monkeypatch.setattr(cube, "SAMPLE_RANGES", ranges)
            cube.build_into_temp(ws.con, ws.dataset_ids(), window_s, ["model_name"])
            built[ranges] = ws.con.execute(f"select {cols} from cube_series_windows order by all").df()
            assert ws.con.execute("select current_setting('preserve_insertion_order')").fetchone()[0] is True
        _assert_same(built[1], built[4])
        _assert_same(built[1], built[3])


def test_the_cube_of_a_60_s_scrape_is_the_same_by_either_pass(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ensure_cube takes the sample-by-sample pass when it applies: the cube it stores is the one the
    aggregate gives (counts exactly; `_sum` and gauge sums to the order of a float sum)."""
    real = sql.rows

    def never_sparse(con, name, **params):  # type: ignore[no-untyped-def]
        return [(False,)] if name == "cube__sparse_windows" else real(con, name, **params)

    frames = []
    for take in (True, False):
        with Workspace(":memory:") as ws:
            assert load_file(ws, fleet).status == "loaded"
            if not take:
                monkeypatch.setattr(sql, "rows", never_sparse)
            frames.append(cube_frame(ws, ensure_cube(ws, None, 60, ["model_name"]))
                          .sort_values(["signal", "path", "stat", "le", "window_start"], ignore_index=True))
            monkeypatch.undo()
    a, b = frames
    assert a.drop(columns="value").equals(b.drop(columns="value"))
    assert np.allclose(a["value"], b["value"], rtol=1e-12, atol=0, equal_nan=True)


def test_created_nan_and_a_single_scrape_take_the_same_rules() -> None:
    les = ["0.5", "+Inf"]
    rows = histogram("vllm:time_to_first_token_seconds", V1, les,
                     [(0, [10, 12], 9.0), (60, [8, 13], 5.0), (120, [9, 15], 6.0), (180, [9, 16], 6.5)])
    created = {"labels": V1}
    rows += samples("vllm:time_to_first_token_seconds_created", created["labels"],
                    [(0, 1000.0), (60, 1000.0), (120, 2000.0), (180, 2000.0)])
    rows += samples("vllm:num_requests_running", V1, [(0, 1.0), (60, math.nan), (120, 3.0), (180, 2.0)])
    rows += samples("vllm:prompt_tokens_total", V1, [(0, 100.0), (60, math.inf), (120, 150.0), (180, 160.0)])
    # a second replica scraped once: its value is the increase since it started
    rows += samples("vllm:generation_tokens_total", {**V1, "instance": "10.0.0.2:8000"}, [(120, 42.0)])
    with Workspace(":memory:") as ws:
        load(ws, rows)
        sparse, general, by_sample = _both(ws, 60)
        assert sparse
        _assert_same(general, by_sample)
        assert general["resets"].sum() > 0 and general["first_counted"].any()


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 50), st.booleans(), st.sampled_from([60, 61, 75, 120, 300])),
                   min_size=2, max_size=40),
)
def test_any_counter_scraped_at_least_a_window_apart_gives_the_aggregates_rows(
        steps: list[tuple[int, bool, int]]) -> None:
    value, t, pts = 0.0, 0, []
    for inc, reset, gap in steps:
        value = float(inc) if reset else value + inc
        pts.append((t, value))
        t += gap
    with Workspace(":memory:") as ws:
        load(ws, samples("vllm:generation_tokens_total", V1, pts))
        sparse, general, by_sample = _both(ws, 60)
        assert sparse
        _assert_same(general, by_sample)


def test_the_sample_by_sample_pass_in_replica_parts_is_the_whole_pass(fleet: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``WINDOWS_PART_SAMPLES`` kept samples the sparse pass runs a replica at a time too: the
    same series windows and the same cube, bit for bit (a replica's rows are its own)."""
    from app import cube

    def build() -> tuple[pd.DataFrame, pd.DataFrame]:
        with Workspace(":memory:") as ws:
            assert load_file(ws, fleet).status == "loaded"
            cube.build_into_temp(ws.con, ws.dataset_ids(), 60, ["model_name"])
            windows = ws.con.execute("from cube_series_windows order by series_id, window_start").df()
            built = ws.con.execute("from cube_new order by all").df()
            return windows, built

    whole = build()
    parts: list[object] = []
    real = sql.insert_into

    def counted(con, name, table, **params):  # type: ignore[no-untyped-def]
        if "replicas" in params:
            parts.append((name, params["replicas"]))
        real(con, name, table, **params)

    monkeypatch.setattr(cube, "WINDOWS_PART_SAMPLES", 1)  # every replica a part of its own
    monkeypatch.setattr(sql, "insert_into", counted)
    parted = build()
    # 3 replicas: 2 parts after the first, in the load's 300 s summary cube and in the 60 s one
    assert [name for name, _ in parts] == ["cube__series_windows"] * 2 + ["cube__series_windows_sparse"] * 2
    for a, b in zip(whole, parted, strict=True):
        _assert_same(a, b)

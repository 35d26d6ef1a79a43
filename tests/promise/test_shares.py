"""Breach shares, bounds, the joint promise and burn rates through the promise queries
(docs/methods.md#share-above-threshold, docs/methods.md#joint-promise, docs/methods.md#burn-rates)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from app import sql
from app.cube import ensure_cube
from app.promise.shares import (
    Promise,
    burn_alerts,
    burn_factor,
    evaluate,
    meets_target,
    parse_promise,
    path_report,
    preset_promise,
    presets,
    shares,
    time_range,
)
from app.store import Workspace
from tests.conftest import histogram, load, samples

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
TV15_LES = ["0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "+Inf"]
TV15 = [120, 400, 700, 850, 930, 990, 998, 1000]


def one_window(family: str, les: list[str], counts: list[int], labels: dict | None = None) -> list[dict]:
    return histogram(family, labels or V1, les, [(0, [0] * len(les), 0.0), (60, counts, 500.0)])


def path_shares(ws: Workspace, promise: Promise, window_s: int = 60, **kw: object):
    cube_id = ensure_cube(ws, None, window_s, None)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, [promise], start, end, **kw)
    return frame.set_index("path")


@pytest.mark.parametrize(
    ("threshold", "share", "low", "high", "exact"),
    [
        (1.0, 0.07, 0.07, 0.07, True),
        (0.5, 0.3, 0.3, 0.3, True),
        (0.6, 0.24, 0.15, 0.30, False),
        (0.05, 0.94, 0.88, 1.0, False),
        (6.0, 0.002, 0.0, 0.002, False),
    ],
)
def test_tv_1_5_breach_share_and_bounds(ws: Workspace, threshold: float, share: float, low: float,
                                        high: float, exact: bool) -> None:
    load(ws, one_window(TTFT, TV15_LES, TV15))
    row = path_shares(ws, Promise(ttft_s=threshold)).loc["chat"]
    assert row["requests"] == 1000
    assert row["ttft_share"] == pytest.approx(share, rel=1e-9)
    assert row["ttft_low"] == pytest.approx(low, rel=1e-9, abs=1e-12)
    assert row["ttft_high"] == pytest.approx(high, rel=1e-9)
    assert bool(row["ttft_exact"]) is exact
    if exact:  # computed from the exact form (N - C_j) / N, no float noise
        assert row["ttft_share"] == share


def test_tv_1_6_envelope_before_the_share(ws: Workspace) -> None:
    load(ws, one_window(TTFT, TV15_LES, [120, 400, 700, 695, 930, 990, 998, 1000]))
    row = path_shares(ws, Promise(ttft_s=0.6)).loc["chat"]
    # the (0.5, 0.75] bucket is empty after the fix: estimate and both bounds are 0.3
    assert (row["ttft_share"], row["ttft_low"], row["ttft_high"]) == (0.3, 0.3, 0.3)


@pytest.mark.parametrize(("a", "b", "union"), [(0.04, 0.07, (0.07, 0.11)), (0.30, 0.24, (0.30, 0.54)),
                                               (0.7, 0.6, (0.7, 1.0))])
def test_tv_3_1_to_3_3_frechet_bounds(ws: Workspace, a: float, b: float, union: tuple[float, float]) -> None:
    n = 1000
    rows = one_window(TTFT, ["0.5", "+Inf"], [round(n * (1 - a)), n])
    rows += one_window(TPOT, ["0.05", "+Inf"], [round(n * (1 - b)), n])
    load(ws, rows)
    row = path_shares(ws, Promise(ttft_s=0.5, tpot_s=0.05)).loc["chat"]
    assert row["tpot_basis"] == "requests"
    assert (row["joint_low"], row["joint_high"]) == pytest.approx(union, rel=1e-9)


def test_tv_3_5_itl_request_bound(ws: Workspace) -> None:
    # no per-request TPOT histogram: 1000 finished requests, 12 ITL observations above Y = 50 ms
    rows = one_window(ITL, ["0.05", "+Inf"], [99_988, 100_000])
    rows += samples("vllm:request_success_total", {**V1, "finished_reason": "stop"}, [(0, 0), (60, 1000)])
    rows += one_window(TTFT, ["0.5", "+Inf"], [1000, 1000])
    load(ws, rows)
    row = path_shares(ws, Promise(ttft_s=0.5, tpot_s=0.05)).loc["chat"]
    assert row["tpot_basis"] == "tokens"
    assert row["tpot_share"] == pytest.approx(12 / 100_000)  # gap-weighted, labelled as such
    assert row["finished_requests"] == 1000
    # request share(TPOT > Y) <= 12 / 1000; TTFT never breached -> joint in [0, 0.012]
    assert (row["joint_low"], row["joint_high"]) == pytest.approx((0.0, 0.012))


def test_failed_requests_enter_the_joint_share_unless_excluded(ws: Workspace) -> None:
    rows = one_window(TTFT, ["0.5", "+Inf"], [990, 1000])
    rows += samples("vllm:request_success_total", {**V1, "finished_reason": "abort"}, [(0, 0), (60, 20)])
    rows += samples("vllm:request_success_total", {**V1, "finished_reason": "stop"}, [(0, 0), (60, 980)])
    load(ws, rows)
    row = path_shares(ws, Promise(ttft_s=0.5, tpot_s=0.05)).loc["chat"]
    assert row["failed_requests"] == 20
    # TTFT 0.01, failed 0.02, TPOT missing -> joint open to 1 on the high side
    assert row["joint_low"] == pytest.approx(0.02)
    assert row["joint_high"] == 1.0
    row = path_shares(ws, Promise(ttft_s=0.5), include_failed=False).loc["chat"]
    assert (row["joint_low"], row["joint_high"]) == pytest.approx((0.01, 0.01))


def test_promise_for_one_path_and_default_for_the_others(ws: Workspace) -> None:
    rows = one_window(TTFT, ["0.5", "2.5", "+Inf"], [90, 99, 100])
    rows += one_window(TTFT, ["0.5", "2.5", "+Inf"], [50, 95, 100], {**V1, "model_name": "batch"})
    load(ws, rows)
    cube_id = ensure_cube(ws, None, 60, None)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, [Promise(ttft_s=0.5), Promise(path="batch", ttft_s=2.5)], start, end)
    got = dict(zip(frame["path"], zip(frame["ttft_threshold_s"], frame["ttft_share"], strict=True), strict=True))
    assert got == {"batch": (2.5, 0.05), "chat": (0.5, 0.1)}


# -- §5 burn rates -------------------------------------------------------------------------------
def test_tv_5_1_and_5_2_burn_factors() -> None:
    rules = [(2, 1), (5, 6), (10, 24), (10, 72)]  # Sloth: page quick/slow, ticket quick/slow
    assert [burn_factor(b, 720, h) for b, h in rules] == [14.4, 6.0, 3.0, 1.0]
    assert [burn_factor(b, 672, h) for b, h in rules] == pytest.approx(
        [13.44, 5.6000000000000005, 2.8000000000000003, 0.9333333333333333], rel=1e-12)
    # budget consumed at the threshold over the long window: factor * long / period
    assert [burn_factor(b, 720, h) * h / 720 for b, h in rules] == pytest.approx([0.02, 0.05, 0.1, 0.1])
    pyrra = [(14, 1), (7, 6), (2, 24), (1, 96)]
    assert [f * h / 672 for f, h in pyrra] == pytest.approx(
        [0.020833333333333332, 0.0625, 0.07142857142857142, 0.14285714285714285], rel=1e-12)


def _windows(ws: Workspace, counts: list[tuple[int, int]], labels: dict | None = None) -> None:
    """5-minute windows of (requests, breaches at TTFT 0.5 s)."""
    scrapes, total, bad = [(0, [0, 0], 0.0)], 0, 0
    for i, (n, b) in enumerate(counts, start=1):
        total, bad = total + n, bad + b
        scrapes.append((300 * i, [total - bad, total], 0.0))
    load(ws, histogram(TTFT, labels or V1, ["0.5", "+Inf"], scrapes))


def test_tv_5_3_request_weighted_ratio_and_page(ws: Workspace) -> None:
    # windows (1000 req, 10 bad) and (100 req, 50 bad): request-weighted 60/1100, not (0.01 + 0.5) / 2
    _windows(ws, [(1000, 10), (100, 50)])
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    assert shares(ws, cube_id, [Promise(ttft_s=0.5)], start, end).loc[0, "ttft_share"] == pytest.approx(60 / 1100)
    alerts = burn_alerts(ws, cube_id, 300, [Promise(ttft_s=0.5)], start, end).set_index("window_start")
    # SLO 99 %: page when both 5 m and 1 h ratios exceed 0.144 (burn 14.4)
    assert list(alerts["burn_high"].round(9)) == [1.0, 50.0]
    assert list(alerts["page_1h"]) == ["ok", "ok"]  # 1 h ratio 60/1100 = 0.0545 < 0.144
    assert alerts["ticket_3d"].iloc[-1] == "firing"  # 3 d and 6 h burn 5.45 > 1


def test_page_fires_when_both_windows_burn_fast(ws: Workspace) -> None:
    _windows(ws, [(100, 20)] * 12)  # an hour at 20 % breaches: burn 20 on 5 m and on 1 h
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    alerts = burn_alerts(ws, cube_id, 300, [Promise(ttft_s=0.5)], start, end)
    assert set(alerts["page_1h"]) == {"firing"}
    assert alerts["burn_low"].tolist() == pytest.approx([20.0] * 12)


def test_trailing_ranges_count_idle_windows_as_time(ws: Workspace) -> None:
    """Idle windows have no row (no requests), yet a 1 h range still spans 12 windows of time: the
    busy window 65 minutes back must not count. Window 1: 10 000 clean requests; windows 2-6 burn
    20; 7-12 idle; window 13 burns 15. The 1 h range of window 13 is windows 2-13: 115 breaches of
    600 (burn 19.2: page), not of 10 600 (burn 1.1)."""
    _windows(ws, [(10000, 0)] + [(100, 20)] * 5 + [(0, 0)] * 6 + [(100, 15)])
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    alerts = burn_alerts(ws, cube_id, 300, [Promise(ttft_s=0.5)], start, end)
    assert len(alerts) == 7  # the idle windows have no row
    last = alerts.iloc[-1]
    assert last["burn_low"] == pytest.approx(15.0)
    assert last["page_1h"] == "firing"
    # 6 h: every window, 115 of 10 600 (burn 1.08 < 6); 30 min: window 13 alone (15 > 6)
    assert last["page_6h"] == "ok"


def test_trailing_ranges_stay_inside_their_path(ws: Workspace) -> None:
    """The running totals run over the paths one after another: a range reaching back before a
    path's first window starts there, never in the previous path's windows. Path a burns 20 for an
    hour; path b (next in order) has two clean windows: every b range has burn 0, and a's alerts are
    those of a alone."""
    _windows(ws, [(100, 20)] * 12, {**V1, "model_name": "a"})
    _windows(ws, [(100, 0)] * 2, {**V1, "model_name": "b", "instance": "10.0.0.2:8000"})
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    alerts = burn_alerts(ws, cube_id, 300, [Promise(ttft_s=0.5)], start, end)
    assert alerts["path"].tolist() == ["a"] * 12 + ["b"] * 2  # by path, then time
    assert alerts["window_start"].is_monotonic_increasing is False  # b starts again at the first window
    a, b = alerts[alerts["path"] == "a"], alerts[alerts["path"] == "b"]
    assert a["window_start"].is_monotonic_increasing and b["window_start"].is_monotonic_increasing
    assert set(a["page_1h"]) == {"firing"} and set(a["ticket_3d"]) == {"firing"}
    assert set(b["page_1h"]) == set(b["page_6h"]) == set(b["ticket_3d"]) == {"ok"}
    assert b["burn_high"].tolist() == [0.0, 0.0]


def test_evaluate_of_two_paths_at_once_is_the_three_tables(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two cores promise.evaluate runs the range rows and the per-window rows at once: the
    tables are those of the separate calls over every path, in the same order."""
    monkeypatch.setattr("app.promise.shares.os.cpu_count", lambda: 2)
    for k, name in enumerate(["a", "b", "c"]):
        _windows(ws, [(100 * (k + 1), 5 * k), (50, 25), (0, 0), (400, 7 * k)],
                 {**V1, "model_name": name, "instance": f"10.0.0.{k + 1}:8000"})
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    promises = [Promise(ttft_s=0.5), Promise(path="c", ttft_s=0.5, target=0.95)]
    tables = evaluate(ws, cube_id, 300, promises, start, end)
    pd.testing.assert_frame_equal(tables.paths, shares(ws, cube_id, promises, start, end))
    pd.testing.assert_frame_equal(tables.windows, shares(ws, cube_id, promises, start, end, by_window=True))
    pd.testing.assert_frame_equal(tables.alerts, burn_alerts(ws, cube_id, 300, promises, start, end))
    assert tables.paths["path"].tolist() == ["a", "b", "c"]
    assert tables.windows["path"].tolist() == ["a"] * 3 + ["b"] * 3 + ["c"] * 3  # by path, then time
    assert tables.paths.set_index("path").loc["c", "target"] == 0.95


def test_evaluate_is_the_three_tables(ws: Workspace) -> None:
    """promise.evaluate (what the Promise page runs) gives what the separate calls give."""
    _windows(ws, [(1000, 10), (100, 50), (0, 0), (400, 7)])
    load(ws, one_window(TPOT, ["0.05", "+Inf"], [990, 1000]))
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    promises = [Promise(ttft_s=0.5, tpot_s=0.05, e2e_s=3.0)]
    tables = evaluate(ws, cube_id, 300, promises, start, end)
    pd.testing.assert_frame_equal(tables.paths, shares(ws, cube_id, promises, start, end))
    windows = shares(ws, cube_id, promises, start, end, by_window=True)
    pd.testing.assert_frame_equal(tables.windows.reset_index(drop=True), windows)
    pd.testing.assert_frame_equal(tables.alerts, burn_alerts(ws, cube_id, 300, promises, start, end))
    assert len(tables.paths) == 1 and len(windows) == 3


def _scraped(ws: Workspace, counts: dict[int, tuple[int, int]], labels: dict) -> None:
    """TTFT scrapes at 300 s x k for the k in ``counts`` (requests, breaches at 0.5 s in the window
    ending there); a k left out is a scrape gap."""
    scrapes, total, bad = [(0, [0, 0], 0.0)], 0, 0
    for k in sorted(counts):
        n, b = counts[k]
        total, bad = total + n, bad + b
        scrapes.append((300 * k, [total - bad, total], 0.0))
    load(ws, histogram(TTFT, labels, ["0.5", "+Inf"], scrapes))


def _misfits(ws: Workspace, cube_id: int, promises: list[Promise]) -> int:
    start, end = time_range(ws, cube_id, None, None)
    table = sql.arrow(ws.cursor(), "promise__shares", cube_id=cube_id, start_ts=start, end_ts=end,
                      promises=[p.as_param() for p in promises], per_window=True, over_range=False,
                      include_failed=True, paths=None, window_s=300, fast_factor=14.4, slow_factor=6.0,
                      ticket_factor=1.0)
    return table["misfits"][-1].as_py()


def _assert_alerts_are_the_grids(ws: Workspace, cube_id: int, promises: list[Promise]) -> None:
    """evaluate's and burn_alerts' alerts are promise__burn_alerts' (the dense grid) on the windows."""
    start, end = time_range(ws, cube_id, None, None)
    tables = evaluate(ws, cube_id, 300, promises, start, end)
    windows = shares(ws, cube_id, promises, start, end, by_window=True)
    grid = burn_alerts(ws, cube_id, 300, promises, start, end, windows=windows)
    pd.testing.assert_frame_equal(tables.windows, windows, check_exact=True)
    pd.testing.assert_frame_equal(tables.alerts, grid, check_exact=True)
    pd.testing.assert_frame_equal(burn_alerts(ws, cube_id, 300, promises, start, end), grid, check_exact=True)
    pd.testing.assert_frame_equal(tables.paths, shares(ws, cube_id, promises, start, end), check_exact=True)


def test_alerts_in_the_shares_pass_are_the_dense_grids(ws: Workspace) -> None:
    """Three paths whose stored windows are consecutive and busy at both ends (idle ones between):
    the stream is the grid (no misfits), and its alerts are promise__burn_alerts' to the bit; with
    a hot hour on a so that pages fire and the 1 h range of b reaches back into a."""
    for k, name in enumerate(["a", "b", "c"]):
        burst = dict.fromkeys(range(1, 13), (100, 30)) if name == "a" else {}
        counts = dict.fromkeys(range(1, 25), (50 * (k + 1), k)) | burst | {5: (0, 0), 6: (0, 0)}
        _scraped(ws, counts, {**V1, "model_name": name, "instance": f"10.0.0.{k + 1}:8000"})
    cube_id = ensure_cube(ws, None, 300, None)
    promises = [Promise(ttft_s=0.5), Promise(path="b", ttft_s=0.5, target=0.95)]
    assert _misfits(ws, cube_id, promises) == 0
    _assert_alerts_are_the_grids(ws, cube_id, promises)
    start, end = time_range(ws, cube_id, None, None)
    assert "firing" in set(evaluate(ws, cube_id, 300, promises, start, end).alerts["page_1h"])


@pytest.mark.parametrize("case", ["idle first window", "idle last window", "missing window"])
def test_alerts_fall_back_to_the_grid_when_the_stream_is_not_it(ws: Workspace, case: str) -> None:
    """A path whose first or last stored window has no requests, or a window missing from the store
    (a cube stored before gaps were filled): the stream is not the grid (misfits), and the tables
    are promise__burn_alerts' on the sorted windows."""
    a = dict.fromkeys(range(1, 13), (100, 20))
    b = dict.fromkeys(range(1, 13), (100, 1))
    if case == "idle first window":
        b[1] = (0, 0)
    elif case == "idle last window":
        a[12] = (0, 0)
    _scraped(ws, a, {**V1, "model_name": "a"})
    _scraped(ws, b, {**V1, "model_name": "b", "instance": "10.0.0.2:8000"})
    cube_id = ensure_cube(ws, None, 300, None)
    if case == "missing window":
        ws.con.execute("delete from cube_window_histograms where path = 'b' and window_start = "
                       "(select min(window_start) + interval 30 minute from cube_window_histograms)")
    promises = [Promise(ttft_s=0.5)]
    assert _misfits(ws, cube_id, promises) > 0
    _assert_alerts_are_the_grids(ws, cube_id, promises)


def test_a_scrape_gap_is_stored_as_empty_windows(ws: Workspace) -> None:
    """Two scrapes missing on b: the store holds a row of NULLs for each window of the gap, so the
    stream stays the grid (no misfits); the gap counts nothing and the tables are the grid's."""
    a = dict.fromkeys(range(1, 13), (100, 20))
    b = {k: (100, 1) for k in range(1, 13) if k not in (6, 7)}
    _scraped(ws, a, {**V1, "model_name": "a"})
    _scraped(ws, b, {**V1, "model_name": "b", "instance": "10.0.0.2:8000"})
    cube_id = ensure_cube(ws, None, 300, None)
    empty = ws.con.execute("select count(*) from cube_window_histograms where cube_id = $c and path = 'b' "
                           "and coalesce(ttft_count, ttft_layout, finished) is null", {"c": cube_id}).fetchall()
    assert empty[0][0] >= 1
    promises = [Promise(ttft_s=0.5)]
    assert _misfits(ws, cube_id, promises) == 0
    _assert_alerts_are_the_grids(ws, cube_id, promises)


def test_interval_burns_are_possible_not_firing(ws: Workspace) -> None:
    # threshold 0.6 s between bounds 0.5 and 2.5: low end 0, high end 20 %
    scrapes, total = [(0, [0, 0, 0], 0.0)], 0
    for i in range(1, 13):
        total += 100
        scrapes.append((300 * i, [total * 0.8, total, total], 0.0))
    load(ws, histogram(TTFT, V1, ["0.5", "2.5", "+Inf"], scrapes))
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    alerts = burn_alerts(ws, cube_id, 300, [Promise(ttft_s=0.6)], start, end)
    assert set(alerts["page_1h"]) == {"possible"}


# -- parsing, presets, JSON ------------------------------------------------------------------------
def test_parse_promise() -> None:
    assert parse_promise("chat=0.5/0.03@0.995") == Promise("chat", 0.5, 0.03, target=0.995)
    assert parse_promise("2/0.1") == Promise("*", 2.0, 0.1, target=0.99)
    assert parse_promise("batch=2/0.1@99.9%").target == pytest.approx(0.999)
    for bad in ["fast", "chat=0.5", "0.5/0.03@2", "chat=-1/0.03"]:
        with pytest.raises(ValueError):
            parse_promise(bad)


def test_mlperf_presets_match_methods_table() -> None:
    table = {
        "llama3.1-8b": ((2.0, 0.1), (0.5, 0.03)),
        "llama2-70b": ((2.0, 0.2), (0.45, 0.04)),
        "llama3.1-405b": ((6.0, 0.175), (4.5, 0.08)),
        "mixtral-8x7b": ((2.0, 0.2), None),
        "deepseek-r1": ((2.0, 0.08), None),
    }
    names = set(presets())
    for bench, (server, interactive) in table.items():
        p = preset_promise(f"mlperf-v5.1-{bench}-server")
        assert (p.ttft_s, p.tpot_s, p.target) == (*server, 0.99)
        if interactive:
            p = preset_promise(f"mlperf-v5.1-{bench}-interactive")
            assert (p.ttft_s, p.tpot_s) == interactive
        else:
            assert f"mlperf-v5.1-{bench}-interactive" not in names


def test_meets_target_is_null_when_the_interval_straddles() -> None:
    assert meets_target(0.995, 0.999, 0.99) is True
    assert meets_target(0.95, 0.98, 0.99) is False
    assert meets_target(0.98, 0.995, 0.99) is None


def test_path_report_json_shape(ws: Workspace) -> None:
    load(ws, one_window(TTFT, TV15_LES, TV15) + one_window(TPOT, ["0.05", "+Inf"], [990, 1000]))
    row = path_shares(ws, Promise(ttft_s=1.0, tpot_s=0.05)).reset_index().iloc[0]
    doc = path_report(row)
    assert doc["ttft"] == {"threshold_s": 1.0, "share": 0.07, "share_low": 0.07, "share_high": 0.07, "exact": True}
    assert doc["tpot"]["basis"] == "requests" and doc["tpot"]["share"] == 0.01
    assert doc["joint"] == {"share_low": 0.07, "share_high": pytest.approx(0.08), "exact_share": None}
    assert doc["meets_target"] is False and doc["e2e"] is None
    assert doc["budget_remaining"] == pytest.approx(1 - 0.08 / 0.01)
    assert math.isclose(doc["attainment_low"], 0.92) and math.isclose(doc["attainment_high"], 0.93)


def test_a_bucket_layout_changed_part_way_reads_each_windows_own_bounds(ws: Workspace) -> None:
    """An engine upgrade changed the TTFT buckets between two windows: each window interpolates
    between its own neighbours (0.1-0.5, then 0.2-0.5), and over the range the windows' breached
    counts add up (65 + 53.33 of 200), not bucket counts of two layouts."""
    old = {**V1, "instance": "old:8000"}
    new = {**V1, "instance": "new:8000"}
    load(ws, histogram(TTFT, old, ["0.1", "0.5", "+Inf"], [(0, [0, 0, 0], 0.0), (60, [10, 60, 100], 30.0)])
         + histogram(TTFT, new, ["0.2", "0.5", "+Inf"], [(61, [0, 0, 0], 0.0), (120, [30, 80, 100], 30.0)]))
    cube_id = ensure_cube(ws, None, 60, None)
    layouts = ws.con.execute("select les from cube_bucket_layouts where cube_id = $id and signal = 'ttft' "
                             "order by layout_id", {"id": cube_id}).fetchall()
    assert layouts == [([0.1, 0.5, math.inf],), ([0.2, 0.5, math.inf],)]
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, [Promise(ttft_s=0.3)], start, end, by_window=True)
    got = [(r.ttft_share, r.ttft_low, r.ttft_high) for r in frame.itertuples()]
    assert got == [pytest.approx((0.65, 0.40, 0.90)), pytest.approx((1 - (30 + 50 / 3) / 100, 0.20, 0.70))]
    whole = shares(ws, cube_id, [Promise(ttft_s=0.3)], start, end).iloc[0]
    assert (whole.ttft_share, whole.ttft_low, whole.ttft_high) == pytest.approx(
        ((65 + 100 - 30 - 50 / 3) / 200, (40 + 20) / 200, (90 + 70) / 200))
    assert not whole.ttft_exact
    # thresholds on a bound of both layouts are exact over the range too
    assert bool(shares(ws, cube_id, [Promise(ttft_s=0.5)], start, end).iloc[0].ttft_exact)

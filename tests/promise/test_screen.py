"""The Promise page's tables at the screen's resolution (app.promise.screen) against today's
full-resolution path (app.promise.shares: promise__shares), both ways on the bundled sample and on generated
data: every number the lookups give equals (to 1e-12) the one promise__shares gives over the same
windows as a range, exact at a bucket bound and within its bounds elsewhere; at a step of one cube
window the per-window rows are promise__shares' own; an alert rule's burn over a trailing range is
that range's joint interval over the budget."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.bench import generate
from app.cube import ensure_cube, store_rows
from app.load import load_file
from app.promise import screen as ps
from app.promise import shares as pm
from app.store import Workspace
from tests.conftest import histogram, load, samples
from tests.support.paths import SAMPLE

TOL = 1e-12
NUMBERS = [c for c in pm.SHARE_COLUMNS if c not in ("window_start", "path", "tpot_basis")
           and not c.endswith("_exact")]
FLAGS = ["ttft_exact", "tpot_exact", "e2e_exact", "queue_exact", "tpot_basis"]


def _value(v: object) -> object:
    return None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v


def assert_same_row(got: pd.Series, want: pd.Series, where: str) -> None:
    """Every share column equal to 1e-12 (relative above 1, absolute below), NULLs in the same places,
    the flags and the TPOT basis identical."""
    for c in NUMBERS:
        a, b = _value(got[c]), _value(want[c])
        assert (a is None) == (b is None), f"{where} {c}: {a} against {b}"
        if a is not None:
            assert abs(float(a) - float(b)) <= TOL * max(1.0, abs(float(b))), f"{where} {c}: {a} against {b}"
    for c in FLAGS:
        assert _value(got[c]) == _value(want[c]), f"{where} {c}: {got[c]} against {want[c]}"


def assert_honest(frame: pd.DataFrame) -> None:
    """At a bucket bound the share is exact (estimate = both bounds); elsewhere the estimate lies in them."""
    for h in ("ttft", "tpot", "e2e", "queue"):
        rows = frame[frame[f"{h}_share"].notna()]
        assert (rows[f"{h}_low"] <= rows[f"{h}_share"] + TOL).all() and (rows[f"{h}_share"] <= rows[f"{h}_high"] + TOL).all()
        exact = rows[rows[f"{h}_exact"].fillna(False).astype(bool)]
        assert (exact[f"{h}_share"] == exact[f"{h}_low"]).all() and (exact[f"{h}_share"] == exact[f"{h}_high"]).all()
    assert (frame["joint_low"] <= frame["joint_high"] + TOL).all()


def range_rows(ws: Workspace, cube_id: int, promises: list[pm.Promise], start: datetime, end: datetime,
               include_failed: bool) -> pd.DataFrame:
    return pm.shares(ws, cube_id, promises, start, end, include_failed=include_failed).set_index("path")


def check_both_ways(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise], include_failed: bool,
                    start: datetime, end: datetime, max_points: int, steps_checked: int = 8) -> ps.ScreenTables:
    screen = ps.evaluate(ws, cube_id, window_s, promises, start, end, include_failed, max_points=max_points)
    assert screen.looked_up
    assert screen.step_s == ps.screen_step(window_s, start, end, max_points)
    whole = range_rows(ws, cube_id, promises, start, end, include_failed)
    assert sorted(screen.paths["path"]) == sorted(whole.index)
    for _, row in screen.paths.iterrows():
        assert_same_row(row, whole.loc[row["path"]], f"range {row['path']}")
    assert_honest(screen.paths)
    assert_honest(screen.windows)
    step = timedelta(seconds=screen.step_s)
    # every step of the first path and a spread of the others: promise__shares over the step as a range
    picks = sorted(set(np.linspace(0, len(screen.windows) - 1, steps_checked).astype(int)))
    for i in picks:
        row = screen.windows.iloc[i]
        s0 = row["window_start"].to_pydatetime()
        want = range_rows(ws, cube_id, promises, max(start, s0), min(end, s0 + step), include_failed)
        assert_same_row(row, want.loc[row["path"]], f"step {s0} {row['path']}")
    # the steps without a row are those promise__shares has none for (no requests: a gap, an idle path);
    # 24 steps spread over the whole range (its gap and restart included), not the first 40 in a row
    shown = set(zip(screen.windows["path"], screen.windows["window_start"], strict=True))
    first = start + timedelta(seconds=-(start - datetime(1970, 1, 1)).total_seconds() % window_s)  # a window's start
    n_steps = math.ceil((end - first) / step)
    for k in sorted(set(np.linspace(0, n_steps - 1, min(24, n_steps)).astype(int))):
        t = first + k * step
        want = range_rows(ws, cube_id, promises, t, min(end, t + step), include_failed)
        for path in whole.index:
            assert ((path, pd.Timestamp(t)) in shown) == (path in want.index), f"step {t} {path}"
    return screen


@pytest.fixture(scope="module")
def sample_ws() -> Iterator[Workspace]:
    """The bundled day (4 replicas scraped every 15 s, two paths, a restart and a scrape gap)."""
    w = Workspace(":memory:")
    report = load_file(w, SAMPLE)
    assert report.status == "loaded", report.errors
    yield w
    w.close()


def sample_promises(bounds: dict[str, list[float]]) -> list[tuple[list[pm.Promise], bool]]:
    """Promise sets at bucket bounds (exact) and between them (estimates), with E2E and queue time, for
    every path and per path, with and without failed requests."""
    ttft, tpot = bounds["ttft"], bounds.get("tpot") or bounds["itl"]
    sets = [([pm.Promise(ttft_s=ttft[i], tpot_s=tpot[j], target=0.99)], True) for i, j in ((2, 2), (5, 4), (8, 7))]
    sets.append(([pm.Promise(ttft_s=(ttft[3] + ttft[4]) / 2, tpot_s=(tpot[3] + tpot[4]) * 0.45, target=0.95)], True))
    sets.append(([pm.Promise(ttft_s=ttft[4], tpot_s=tpot[5], e2e_s=bounds["e2e"][6], queue_s=0.07, target=0.999)],
                 False))
    sets.append(([pm.Promise(ttft_s=0.013, tpot_s=1e-4, target=0.9)], True))  # below the first bounds
    sets.append(([pm.Promise(ttft_s=10_000.0, tpot_s=900.0, target=0.9)], True))  # above the last finite bounds
    return sets


@pytest.mark.parametrize("window_s", [60, 300])
def test_the_bundled_day_both_ways(sample_ws: Workspace, window_s: int) -> None:
    cube_id = ensure_cube(sample_ws, None, window_s, None)
    start, end = pm.time_range(sample_ws, cube_id, None, None)
    bounds = pm.bucket_bounds(sample_ws, cube_id)
    sets = sample_promises(bounds)
    # each promise set at one of the two widths: the even ones at 5 minutes, the odd ones at a minute
    for promises, include_failed in (sets[::2] if window_s == 300 else sets[1::2]):
        for max_points in (10_000, 30):  # every window; steps of the day's 1/30th or coarser
            check_both_ways(sample_ws, cube_id, window_s, promises, include_failed, start, end, max_points)
        # a range that starts and ends inside the day, not on a step
        check_both_ways(sample_ws, cube_id, window_s, promises, include_failed, start + timedelta(hours=3, minutes=5),
                        end - timedelta(hours=7), 25)


def test_a_step_of_one_window_is_promise_shares_per_window(sample_ws: Workspace) -> None:
    """At a step of one cube window the rows are promise__shares' per-window rows, every one; the alert
    rows are its windows with requests, and each one's own burn rate is its per-window burn rate."""
    cube_id = ensure_cube(sample_ws, None, 300, None)
    start, end = pm.time_range(sample_ws, cube_id, None, None)
    for promises, include_failed in sample_promises(pm.bucket_bounds(sample_ws, cube_id))[:5]:
        screen = ps.evaluate(sample_ws, cube_id, 300, promises, start, end, include_failed, max_points=10_000)
        full = pm.evaluate(sample_ws, cube_id, 300, promises, start, end, include_failed)
        assert screen.step_s == 300
        got = screen.windows.sort_values(["path", "window_start"]).reset_index(drop=True)
        want = full.windows.sort_values(["path", "window_start"]).reset_index(drop=True)
        assert list(got["window_start"]) == list(want["window_start"]) and list(got["path"]) == list(want["path"])
        for i in range(len(got)):
            assert_same_row(got.iloc[i], want.iloc[i], f"window {got['window_start'][i]}")
        a = screen.alerts.sort_values(["path", "window_start"]).reset_index(drop=True)
        b = full.alerts.sort_values(["path", "window_start"]).reset_index(drop=True)
        assert list(a["window_start"]) == list(b["window_start"])
        for c in ("requests", "burn_low", "burn_high"):
            np.testing.assert_allclose(a[c].astype(float), b[c].astype(float), rtol=TOL, atol=TOL)


def trailing_oracle(ws: Workspace, cube_id: int, promises: list[pm.Promise], include_failed: bool, start: datetime,
                    at_end: datetime, seconds: int, window_s: int) -> pd.DataFrame:
    """promise__shares over the rule's trailing range ending at ``at_end`` (at least one window, not
    before the range's start): the joint interval per path."""
    lo = max(start, at_end - timedelta(seconds=max(seconds, window_s)))
    return range_rows(ws, cube_id, promises, lo, at_end, include_failed)


def test_each_alert_rule_reads_its_trailing_ranges(sample_ws: Workspace) -> None:
    """At a step's end each rule's long and short burn is promise__shares' joint interval over the
    trailing range (5 min to 3 d) over the budget, and the state follows from them."""
    window_s = 60
    cube_id = ensure_cube(sample_ws, None, window_s, None)
    start, end = pm.time_range(sample_ws, cube_id, None, None)
    assert {0.25}.issubset(pm.bucket_bounds(sample_ws, cube_id)["ttft"])
    states_seen = set()
    for ttft_s, tpot_s in ((0.25, 0.05), (0.3, 0.06)):  # at bucket bounds; between them
        promises = [pm.Promise(ttft_s=ttft_s, tpot_s=tpot_s, target=0.99)]
        states_seen |= _check_rules(sample_ws, cube_id, window_s, promises, start, end)
    assert len(states_seen) >= 2  # promises chosen to show more than one state


def _check_rules(sample_ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise], start: datetime,
                 end: datetime) -> set[str]:
    screen = ps.evaluate(sample_ws, cube_id, window_s, promises, start, end, True, max_points=40)
    factors = pm._alert_params(window_s, 30)
    rules = {"page_1h": (3600, 300, "fast_factor"), "page_6h": (21600, 1800, "slow_factor"),
             "ticket_3d": (259200, 21600, "ticket_factor")}
    step = timedelta(seconds=screen.step_s)
    states_seen = set()
    for _, row in screen.alerts.iloc[:: max(1, len(screen.alerts) // 8)].iterrows():
        at_end = min(end, row["window_start"].to_pydatetime() + step)
        budget = 1 - row["target"]
        burns = {}
        for seconds in (300, 1800, 3600, 21600, 259200):
            want = trailing_oracle(sample_ws, cube_id, promises, True, start, at_end, seconds, window_s).loc[row["path"]]
            burns[seconds] = (want["joint_low"] / budget, want["joint_high"] / budget)
        for rule, (long_s, short_s, factor_name) in rules.items():
            f = factors[factor_name]
            (lo_l, hi_l), (lo_s, hi_s) = burns[long_s], burns[short_s]
            state = ("firing" if lo_l > f and lo_s > f else "possible" if hi_l > f and hi_s > f else "ok")
            assert row[rule] == state, f"{rule} at {at_end}"
            states_seen.add(state)
    return states_seen


def fleet_workspace(tmp: Path, hours: float) -> Workspace:
    """A generated 2-replica fleet (restarts, a scrape gap, a failed-request reason that appears part-way)."""
    shape = generate.FleetShape(replicas=2, paths=generate.PATHS[:3], scrape_interval_s=30)
    fleet = generate.write_fleet_parquet(tmp, int(hours * 3600 / shape.scrape_interval_s) * shape.series, seed=3,
                                     shape=shape)
    w = Workspace(":memory:")
    for path in fleet.paths:
        report = load_file(w, Path(path))
        assert report.status == "loaded", report.errors
    return w


def test_a_generated_fleet_both_ways(tmp_path: Path) -> None:
    ws = fleet_workspace(tmp_path, 26)
    try:
        for window_s in (60, 300):
            cube_id = ensure_cube(ws, None, window_s, None)
            start, end = pm.time_range(ws, cube_id, None, None)
            bounds = pm.bucket_bounds(ws, cube_id)
            promises = [pm.Promise(ttft_s=bounds["ttft"][4], tpot_s=bounds["tpot"][3], target=0.99),
                        pm.Promise(path=generate.PATHS[1], ttft_s=0.33, tpot_s=0.031, queue_s=bounds["queue"][5],
                                   target=0.9)]
            for include_failed in (True, False):
                check_both_ways(ws, cube_id, window_s, promises, include_failed, start, end, 48)
                check_both_ways(ws, cube_id, window_s, promises, include_failed, start + timedelta(minutes=47),
                                start + timedelta(hours=20, minutes=5), 100, steps_checked=5)
    finally:
        ws.close()


def test_the_bench_cube_both_ways(tmp_path: Path) -> None:
    """The interaction benchmark's cube (generated per window: ten paths over three days)."""
    ws = Workspace(str(tmp_path / "bench.duckdb"))
    try:
        table = generate.cube_rows(3, 4, 300)
        ws.con.register("bench_cube", table)
        store_rows(ws.con, 1, "bench_cube", 300)
        ws.con.unregister("bench_cube")
        ws.con.execute("insert into cube_index (cube_key, cube_id, spec) values ('bench', 1, $s)",
                       {"s": json.dumps({"datasets": [], "window_s": 300, "path_labels": ["model_name"], "rules": []})})
        start, end = pm.time_range(ws, 1, None, None)
        for i in range(3):
            promises = [pm.Promise(ttft_s=0.25 + 0.05 * i, tpot_s=0.04 + 0.002 * i, target=0.99)]
            screen = check_both_ways(ws, 1, 300, promises, True, start, end, 200)
            assert screen.step_s == 1800  # three days of 5-minute windows: 864 windows, 144 steps of 30 min
    finally:
        ws.close()


def test_a_layout_that_changes_part_way_is_evaluated_window_by_window(ws: Workspace) -> None:
    """Two bucket layouts' counts do not add up: such a cube is evaluated by promise__shares, window by window."""
    labels = {"engine": "0", "instance": "a:8000", "model_name": "chat"}
    family = "vllm:time_to_first_token_seconds"
    rows = histogram(family, labels, ["0.5", "1.0", "+Inf"], [(0, [0, 0, 0], 0.0), (60, [5, 8, 10], 6.0)])
    rows += histogram(family, {**labels, "instance": "b:8000"}, ["0.25", "0.5", "+Inf"],
                      [(120, [0, 0, 0], 0.0), (180, [2, 6, 10], 7.0)])
    rows += samples("vllm:num_requests_running", labels, [(0, 1), (180, 2)])
    load(ws, rows)
    cube_id = ensure_cube(ws, None, 60, None)
    start, end = pm.time_range(ws, cube_id, None, None)
    promises = [pm.Promise(ttft_s=0.5)]
    screen = ps.evaluate(ws, cube_id, 60, promises, start, end)
    full = pm.evaluate(ws, cube_id, 60, promises, start, end)
    assert not screen.looked_up and screen.step_s == 60
    pd.testing.assert_frame_equal(screen.paths, full.paths)
    pd.testing.assert_frame_equal(screen.windows, full.windows)


def test_a_path_that_begins_late_and_a_gap(ws: Workspace) -> None:
    """A path whose windows begin after the range's start, with a missing window in its span: its
    steps begin at its first window and the gap counts nothing, as promise__shares has it."""
    a = {"engine": "0", "instance": "a:8000", "model_name": "chat"}
    b = {**a, "model_name": "batch"}
    family = "vllm:time_to_first_token_seconds"
    les = ["0.5", "1.0", "+Inf"]
    rows = histogram(family, a, les, [(t, [3 * k, 5 * k, 6 * k], 4.0 * k) for k, t in enumerate(range(0, 1800, 60))])
    rows += histogram(family, b, les, [(t, [k, 2 * k, 4 * k], 3.0 * k) for k, t in enumerate(range(600, 1800, 60))
                                       if not 900 <= t < 1080])
    load(ws, rows)
    cube_id = ensure_cube(ws, None, 60, None)
    start, end = pm.time_range(ws, cube_id, None, None)
    for max_points in (100, 7, 3):
        check_both_ways(ws, cube_id, 60, [pm.Promise(ttft_s=0.7, target=0.9)], True, start, end, max_points, 40)


@pytest.mark.parametrize(("window_s", "span", "step"), [
    (300, timedelta(days=30), 3600), (300, timedelta(days=1), 300), (60, timedelta(hours=16), 60),
    (60, timedelta(days=2), 300), (300, timedelta(days=3), 300 * 1), (300, timedelta(days=4), 600),
    (60, timedelta(days=365), 43200), (7200, timedelta(days=30), 7200)])
def test_the_step_follows_the_range(window_s: int, span: timedelta, step: int) -> None:
    t0 = datetime(2026, 11, 1)
    assert ps.screen_step(window_s, t0, t0 + span) == step
    assert math.ceil(span.total_seconds() / step) <= ps.MAX_POINTS or step == window_s

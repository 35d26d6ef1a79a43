"""Figures asserted as data: traces, x/y values, axis titles with units (no image snapshots)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.ui import charts
from tests.conftest import ts

W = [ts(0), ts(300), ts(600)]


def test_requests_over_time_is_per_second_per_path() -> None:
    frame = pd.DataFrame({"window_start": W * 2, "path": ["a"] * 3 + ["b"] * 3,
                          "requests": [300, 600, 900, 30, 60, 90], "replicas": 4})
    fig = charts.requests_over_time(frame, 300)
    assert [t.name for t in fig.data] == ["a", "b"]
    assert list(fig.data[0].y) == [1.0, 2.0, 3.0] and list(fig.data[1].y) == [0.1, 0.2, 0.3]
    assert fig.layout.yaxis.title.text == "requests per second"
    assert "UTC" in fig.layout.xaxis.title.text


def test_requests_over_time_breaks_the_line_at_missing_windows() -> None:
    # windows 0, 300 and then 3000: a gap (a scrape gap, or another day's dataset) is not drawn as traffic
    frame = pd.DataFrame({"window_start": [ts(0), ts(300), ts(3000)], "path": "a", "requests": [300, 600, 900],
                          "replicas": 4})
    (trace,) = charts.requests_over_time(frame, 300).data
    # on the 5-minute grid from the first window to the last (x0, dx: no time per point), NaN (plotly's
    # gap) in the eight windows between
    assert trace.x is None and trace.x0 == ts(0).strftime("%Y-%m-%d %H:%M:%S") and trace.dx == 300_000
    assert list(trace.y[[0, 1, 10]]) == [1.0, 2.0, 3.0] and np.isnan(trace.y[2:10]).all() and len(trace.y) == 11
    assert trace.connectgaps is False


def test_a_mostly_empty_grid_keeps_the_windows_times_with_one_gap_point() -> None:
    # two days a month apart at 1-minute windows: 43,000 empty grid points for 4 windows, so the stored
    # times are the x, and one NaN point after each window whose successor is not the next window
    times = [ts(0), ts(60), ts(30 * 86400), ts(30 * 86400 + 60)]
    x, rows = charts.on_grid(pd.DataFrame({"window_start": times, "v": [1.0, 2.0, 3.0, 4.0]}), 60)
    assert list(pd.to_datetime(x["x"])) == [pd.Timestamp(t) for t in (ts(0), ts(60), ts(120), *times[2:])]
    assert rows["v"].tolist()[:2] == [1.0, 2.0] and np.isnan(rows["v"].iloc[2]) and rows["v"].tolist()[3:] == [3.0, 4.0]
    # dense enough: x0/dx and every window of the grid, in time order whatever the input's
    x, rows = charts.on_grid(pd.DataFrame({"window_start": [ts(120), ts(0)], "v": [3.0, 1.0]}), 60)
    assert x == {"x0": ts(0).strftime("%Y-%m-%d %H:%M:%S"), "dx": 60_000}
    assert rows["v"].iloc[0] == 1.0 and np.isnan(rows["v"].iloc[1]) and rows["v"].iloc[2] == 3.0
    x, rows = charts.on_grid(pd.DataFrame({"window_start": pd.to_datetime([]), "v": []}), 60)
    assert x == {"x": []} and rows.empty


def test_data_health_stacks_resets_and_repairs() -> None:
    frame = pd.DataFrame({"window_start": [W[0], W[1], W[1]], "path": ["a", "a", "a"],
                          "signal": ["ttft", "ttft", "tpot"], "stat": ["resets", "repairs", "repairs"],
                          "value": [2.0, 1.0, 3.0]})
    fig = charts.data_health(frame)
    assert [t.name for t in fig.data] == ["repairs · a", "resets · a"]
    assert list(fig.data[0].y) == [4.0]  # both signals of the window
    assert fig.layout.barmode == "stack"
    assert "per window" in fig.layout.yaxis.title.text


def _by_window() -> pd.DataFrame:
    return pd.DataFrame({"window_start": W, "path": "chat", "target": 0.99, "ttft_share": [0.1, 0.2, 0.3],
                         "ttft_low": [0.05, 0.2, 0.25], "ttft_high": [0.15, 0.2, 0.35],
                         "joint_low": [0.1, 0.2, 0.3], "joint_high": [0.2, 0.3, 0.4]})


def test_breach_share_band_in_percent() -> None:
    fig = charts.breach_share_by_window(_by_window(), 300, "ttft")
    names = [t.name for t in fig.data]
    assert names == ["chat high", "chat interval", "chat estimate", "chat error budget"]
    assert list(fig.data[0].y) == pytest.approx([15.0, 20.0, 35.0])
    assert fig.data[1].fill == "tonexty" and list(fig.data[1].y) == pytest.approx([5.0, 20.0, 25.0])
    assert list(fig.data[2].y) == pytest.approx([10.0, 20.0, 30.0])
    assert list(fig.data[3].y) == pytest.approx([1.0, 1.0, 1.0])  # 1 - target
    assert fig.layout.yaxis.title.text == "breached requests (%)"
    joint = charts.breach_share_by_window(_by_window(), 300, "joint")
    assert [t.name for t in joint.data] == ["chat high", "chat interval", "chat error budget"]


def test_alert_states_heatmap() -> None:
    alerts = pd.DataFrame({"window_start": W, "path": "chat", "page_1h": ["ok", "possible", "firing"],
                           "page_6h": ["ok", "ok", None], "ticket_3d": ["firing"] * 3})
    fig = charts.alert_states(alerts, 300)
    (heat,) = fig.data
    assert list(heat.y) == ["chat · page 1h/5m", "chat · page 6h/30m", "chat · ticket 3d/6h"]
    assert list(heat.z[0]) == [0, 1, 2] and list(heat.z[2]) == [2, 2, 2]
    assert np.isnan(heat.z[1][2])  # no state: blank
    assert list(heat.colorbar.ticktext) == ["ok", "possible", "firing"]


def _fleet() -> pd.DataFrame:
    return pd.DataFrame({"replicas": [5, 3, 4], "traffic": 1.0, "context": 1.0,
                         "headroom_cost": [3600.0, 2160.0, 2880.0], "breach_cost": [500.0, 5000.0, 1000.0],
                         "breach_cost_low": [250.0, 2500.0, 500.0], "breach_cost_high": [1000.0, 10000.0, 2000.0],
                         "total_cost": [4100.0, 7160.0, 3880.0], "total_cost_low": [3850.0, 4660.0, 3380.0],
                         "total_cost_high": [4600.0, 12160.0, 4880.0], "extrapolated": False})


def test_scenario_costs_against_replicas() -> None:
    fig = charts.scenario_costs(_fleet())
    assert [t.name for t in fig.data] == ["headroom cost", "breach cost", "total", "cheapest N'"]
    assert list(fig.data[0].x) == [3, 4, 5] and list(fig.data[0].y) == [2160.0, 2880.0, 3600.0]
    breach = fig.data[1]
    assert list(breach.error_y.array) == [5000.0, 1000.0, 500.0]  # high - point
    assert list(breach.error_y.arrayminus) == [2500.0, 500.0, 250.0]
    assert list(fig.data[3].x) == [4] and list(fig.data[3].y) == [3880.0]
    assert fig.layout.xaxis.title.text == "replicas N'"
    assert fig.layout.yaxis.title.text == "cost over the horizon (USD)"


def test_compare_totals_one_line_per_set() -> None:
    fig = charts.compare_totals({"a": _fleet(), "b": _fleet().assign(total_cost=lambda f: f["total_cost"] * 2)})
    assert [t.name for t in fig.data] == ["a", "b"]
    assert list(fig.data[1].y) == [14320.0, 7760.0, 8200.0]
    assert "USD" in fig.layout.yaxis.title.text


def test_load_response_figure() -> None:
    axis = {"curve": pd.DataFrame({"load": [0.5, 1.0, 1.5], "share_low": [0.01, 0.02, 0.1],
                                   "share_high": [0.02, 0.03, 0.2]}),
            "range": (0.5, 1.5),
            "readings": pd.DataFrame({"replicas": [3], "load": [2.0], "share": [0.3], "share_low": [0.1],
                                      "share_high": [1.0], "extrapolated": [True]}),
            "model": pd.DataFrame({"replicas": [3], "load": [2.0], "share": [0.2], "share_low": [0.1],
                                   "share_high": [0.3], "extrapolated": [True]})}
    fig = charts.load_response(axis, "chat")
    assert [t.name for t in fig.data] == ["curve (fit of high ends)", "curve (fit of low ends)", "curve read at N'",
                                          "capacity model (twin replay)"]
    assert list(fig.data[0].y) == pytest.approx([2.0, 3.0, 20.0]) and fig.data[1].fill == "tonexty"
    reading, model = fig.data[2], fig.data[3]
    assert list(reading.error_y.array) == pytest.approx([70.0])
    assert list(reading.error_y.arrayminus) == pytest.approx([20.0])
    assert list(model.y) == pytest.approx([20.0]) and list(model.text) == ["N'=3"]
    assert list(model.error_y.array) == pytest.approx([10.0])
    assert fig.layout.xaxis.title.text == "load (the path's requests per second per replica)"
    assert fig.layout.yaxis.title.text == "joint breach share (%)"
    assert fig.layout.shapes[0].x0 == 0.5 and fig.layout.shapes[0].x1 == 1.5  # the observed range


def test_queueing_figures_are_labelled_thinking_tools() -> None:
    hours = [{"hour": h, "arrival_rate": 10.0, "rho": r, "utilisation_term": r / (1 - r), "variability_term": 1.3,
              "service_s": 0.4, "wait_s": 0.4 * 1.3 * r / (1 - r)} for h, r in enumerate([0.5, 0.8, 0.9])]
    fig = charts.kingman_terms(hours)
    assert "thinking tool, not the estimator" in fig.layout.title.text
    assert [t.name for t in fig.data] == ["ρ/(1−ρ)", "(c²a + c²s)/2", "E[S] (s)", "Kingman wait (s)"]
    assert list(fig.data[0].y) == pytest.approx([1.0, 4.0, 9.0])
    assert list(fig.data[3].y) == pytest.approx([0.52, 2.08, 4.68])
    assert fig.layout.yaxis3.title.text == "seconds (s)" and fig.layout.yaxis3.type == "log"
    assert fig.layout.xaxis3.title.text == "hour of the export (h)"
    # TV-4.4: lambda 3, mu 2 -> C(2, 1.5) = 0.642857..., E[Wq] = 0.642857 s
    erl = charts.erlang_c([{"replicas": 3, "p_wait": 0.2, "mean_wait_s": 0.1},
                           {"replicas": 2, "p_wait": 0.6428571428571429, "mean_wait_s": 0.6428571428571429}])
    assert "thinking tool, not the estimator" in erl.layout.title.text
    assert list(erl.data[0].x) == [2, 3] and list(erl.data[0].y) == pytest.approx([64.28571428571429, 20.0])
    assert list(erl.data[1].y) == pytest.approx([0.6428571428571429, 0.1])
    assert erl.layout.yaxis.title.text == "probability of waiting (%)"
    assert erl.layout.yaxis2.title.text == "mean wait (s)"


def test_cached_share_over_time_per_window_with_the_range_dashed() -> None:
    """The per-window table of ``demand__cached_share_by_window`` (its hand-computed test's): a line per
    path that exports a prefix-cache counter (batch has none: no line of zeros), gaps where a window had no
    prompt token, and the share over the range dashed at the ratio of the sums."""
    starts = [ts(-60), ts(0), ts(60), ts(120)]
    nan = np.nan
    windows = pd.DataFrame({
        "window_start": starts * 3, "path": ["batch"] * 4 + ["chat"] * 4 + ["rag"] * 4,
        "prompt_tokens": [0, 100, 200, 0, 0, 1000, 1000, 0, 0, 400, 400, 100],
        "cached_tokens": [nan] * 4 + [0, 500, 300, 0, 0, 200, 160, 0],
        "cached_share": [nan] * 4 + [nan, 0.5, 0.3, nan, nan, 0.5, 0.4, 0.0]})
    totals = pd.DataFrame({"path": ["batch", "chat", "rag"], "cached_share": [nan, 0.4, 0.4]})
    fig = charts.cached_share_over_time(windows, totals, 60)
    assert [t.name for t in fig.data] == ["chat per window", "chat over the range (40.0 %)", "rag per window",
                                          "rag over the range (40.0 %)"]
    chat, chat_range, rag, _ = fig.data
    assert chat.x0 == ts(-60).strftime("%Y-%m-%d %H:%M:%S") and chat.dx == 60_000 and chat.connectgaps is False
    assert np.isnan(chat.y[[0, 3]]).all() and list(chat.y[1:3]) == [50.0, 30.0]
    assert list(rag.y[1:]) == [50.0, 40.0, 0.0]
    assert list(chat_range.y) == [40.0, 40.0] and chat_range.line.dash == "dash"
    assert list(chat_range.x) == [ts(-60), ts(180)]  # from the first window's start to the last one's end
    assert fig.layout.yaxis.title.text == "prompt tokens served from the cache (%)"
    assert "read from the export" in fig.layout.title.text and "UTC" in fig.layout.xaxis.title.text

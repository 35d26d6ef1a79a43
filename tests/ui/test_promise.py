"""The Promise page's view logic (``app.ui.promise``), without Streamlit: the tables and their notes, quick
ranges, stored promises, alerts, headlines, the rules file."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

from app.cube import ensure_cube
from app.promise.shares import Promise, shares, time_range
from app.store import Workspace
from app.ui import data as data_view
from app.ui import promise as promise_view
from tests.conftest import histogram, load, ts

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
TV15_LES = ["0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "+Inf"]
TV15 = [120, 400, 700, 850, 930, 990, 998, 1000]


def _one_window(ws: Workspace) -> int:
    load(ws, histogram(TTFT, V1, TV15_LES, [(0, [0] * 8, 0.0), (60, TV15, 500.0)]))
    load(ws, histogram(TPOT, V1, ["0.025", "0.05", "+Inf"], [(0, [0, 0, 0], 0.0), (60, [900, 990, 1000], 30.0)]),
         name="tpot")
    return ensure_cube(ws, None, 60, None)


def test_promise_tables_and_bound_notes(ws: Workspace) -> None:
    cube_id = _one_window(ws)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, [Promise(ttft_s=0.6, tpot_s=0.05, target=0.99)], start, end)
    summary, marginals = promise_view.promise_tables(frame, {"chat": 0.1})
    s = summary.set_index("path").loc["chat"]
    # TTFT 0.6 s lies inside (0.5, 0.75]: estimate 24 %, bounds [15 %, 30 %] (docs/methods.md#share-above-threshold);
    # TPOT 0.05 s is a bound: 1 %. Joint: Fréchet [max(15, 1), min(100, 30 + 1)] %
    m = marginals.set_index("signal")
    assert m.loc["TTFT", "breach %"] == pytest.approx(24.0)
    assert (m.loc["TTFT", "low %"], m.loc["TTFT", "high %"]) == (pytest.approx(15.0), pytest.approx(30.0))
    assert m.loc["TTFT", "exact"] == "estimate" and m.loc["TPOT", "exact"] == "exact"
    assert m.loc["TPOT", "breach %"] == pytest.approx(1.0)
    assert (s["joint breach low %"], s["joint breach high %"]) == (pytest.approx(15.0), pytest.approx(31.0))
    assert s["joint exact %"] == pytest.approx(10.0)
    assert s["meets target"] == "no"
    assert s["budget remaining %"] == pytest.approx(100 * (1 - 0.31 / 0.01))
    notes = promise_view.bound_notes(marginals, data_view.bucket_bounds(ws, cube_id))
    assert len(notes) == 1
    assert "TTFT 0.6 s is not a bucket bound" in notes[0] and "Use 0.5 s or 0.75 s" in notes[0]


def test_quick_ranges_count_back_from_the_end_of_the_data() -> None:
    day = datetime(2026, 11, 17)
    # two days of 5-minute windows, the second day's 23:00-23:25 missing (a scrape gap)
    starts = [day + timedelta(minutes=5 * i) for i in range(576)]
    starts = [t for t in starts if not day + timedelta(hours=47) <= t < day + timedelta(hours=47, minutes=30)]
    picks = promise_view.quick_ranges(starts, 300)
    last = day + timedelta(hours=47, minutes=55)
    # at least two windows long and shorter than the 48 hours of data; 7 and 30 days are not offered
    assert list(picks) == ["last 15 min", "last 1 h", "last 6 h", "last 24 h", "all"]
    assert picks["last 15 min"] == (day + timedelta(hours=47, minutes=45), last)
    # the last hour starts at 23:00, which the gap left out: its first window is the first after it
    assert picks["last 1 h"] == (day + timedelta(hours=47, minutes=30), last)
    assert picks["last 6 h"] == (day + timedelta(hours=42), last)
    assert picks["last 24 h"] == (day + timedelta(hours=24), last)
    assert picks["all"] == (day, last)
    # hour windows: 15 minutes and an hour are shorter than two windows
    hours = [day + timedelta(hours=i) for i in range(24)]
    assert list(promise_view.quick_ranges(hours, 3600)) == ["last 6 h", "all"]
    # exactly 24 hours of data: "last 24 h" would be all of it, which "all" says
    assert "last 24 h" not in promise_view.quick_ranges(hours, 3600)
    # nothing to pick from: no windows, one window, or a span shorter than every quick range
    assert promise_view.quick_ranges([], 300) == {}
    assert promise_view.quick_ranges([day], 300) == {}
    assert promise_view.quick_ranges([day, day + timedelta(minutes=5)], 300) == {}


def test_promise_defaults_and_storage(ws: Workspace) -> None:
    assert promise_view.default_promise("llama-3.1-8b-interactive")["tpot_s"] == 0.03
    assert promise_view.default_promise("batch")["ttft_s"] == 2.0
    ws.set_setting(promise_view.SETTING_PROMISES, {"batch": {"preset": "custom", "ttft_s": 5.0, "tpot_s": 0.1,
                                                        "e2e_s": 60.0, "queue_s": None, "target": 0.95}})
    stored = promise_view.stored_promises(ws, ["batch", "chat"])
    assert stored["batch"]["e2e_s"] == 60.0 and stored["chat"]["preset"].endswith("interactive")
    t = promise_view.promise_tuple("batch", stored["batch"])
    assert t == ("batch", 5.0, 0.1, 60.0, None, 0.95)
    assert promise_view.to_promises([t])[0] == Promise(path="batch", ttft_s=5.0, tpot_s=0.1, e2e_s=60.0, target=0.95)


def test_alert_summary_counts_firing_windows() -> None:
    alerts = pd.DataFrame({"window_start": [ts(0), ts(60), ts(0), ts(60)], "path": ["a", "a", "b", "b"],
                           "page_1h": ["firing", "ok", "ok", "ok"], "page_6h": ["ok", "possible", None, "ok"],
                           "ticket_3d": ["firing", "firing", "ok", "ok"]})
    out = promise_view.alert_summary(alerts).set_index("path")
    assert out.loc["a", "page 1h/5m"] == "ok (1 windows firing)"
    assert out.loc["a", "ticket 3d/6h"] == "firing (2 windows firing)"
    assert out.loc["b", "page 6h/30m"] == "ok (0 windows firing)"


def test_headlines_per_path(ws: Workspace) -> None:
    cube_id = _one_window(ws)
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, [Promise(ttft_s=0.6, tpot_s=0.05, target=0.99)], start, end)
    summary, marginals = promise_view.promise_tables(frame, {})
    (items,) = promise_view.headlines(summary, marginals).values()
    assert [(label, value) for label, value, _ in items] == [
        ("TTFT > 0.6 s (estimate)", "24.00 %"), ("TPOT > 0.05 s", "1.00 %"), ("joint breach", "15.00–31.00 %"),
        ("meets 99 %", "no")]
    assert items[0][2] == "interpolated inside its bucket; bounds 15.00–30.00 %"
    assert items[3][2] == "attainment 69.00–85.00 %"


def test_the_rules_file_of_the_promise_page() -> None:
    promises = promise_view.to_promises([("chat", 0.5, 0.05, None, None, 0.99)])
    text, note = promise_view.rules_file(promises, ["model_name"], [], {"ttft": [0.25, 0.5], "tpot": [0.05]}, "vllm-v1")
    assert text is not None and "headroom:ttft_breach:ratio_rate5m" in text and 'model_name=\\"chat\\"' in text
    assert "reading model_name" in note
    none, why = promise_view.rules_file(promises, ["model_name", "instance"], [], {}, None)
    assert none is None and "model_name / instance" in why and "--path-label" in why
    none, why = promise_view.rules_file(promises, ["model_name"], [("a", "b")], {}, None)
    assert none is None and "renaming rules" in why
    none, why = promise_view.rules_file(promises, ["model_name"], [], {"ttft": [0.25, 1.0], "tpot": [0.05]}, None)
    assert none is None and "TTFT 0.5 s is not a bucket bound" in why

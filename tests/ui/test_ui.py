"""The view logic behind the pages (``app.ui``: data, promise, economics, sets, model), without Streamlit."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from types import SimpleNamespace

import pandas as pd
import pytest

from app.cube import ensure_cube
from app.load import LoadReport
from app.promise.shares import Promise, shares, time_range
from app.store import Workspace
from app.ui import cache as ui_cache
from app.ui import capacity_model as model_view
from app.ui import data as data_view
from app.ui import economics as economics_view
from app.ui import promise as promise_view
from app.ui import scenario_sets as sets_view
from tests.conftest import histogram, load, ts

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
TV15_LES = ["0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "+Inf"]
TV15 = [120, 400, 700, 850, 930, 990, 998, 1000]


# -- data ----------------------------------------------------------------------------------------------
def test_rules_round_trip_and_errors() -> None:
    rules = [("llama-3.1-8b-(chat|interactive)", "chat"), (".*-batch", "batch")]
    assert data_view.parse_rules(data_view.format_rules(rules)) == rules
    assert data_view.parse_rules("# a comment\n\n  a => b  \n") == [("a", "b")]
    with pytest.raises(ValueError, match="line 2: expected REGEX => PATH"):
        data_view.parse_rules("a => b\nno arrow here")
    with pytest.raises(ValueError, match="line 1: bad regex"):
        data_view.parse_rules("(unclosed => x")


def test_labels_and_window_text() -> None:
    assert data_view.parse_labels(" model_name, instance ,") == ["model_name", "instance"]
    with pytest.raises(ValueError, match="not a Prometheus label name"):
        data_view.parse_labels("model-name")
    with pytest.raises(ValueError, match="at least one label"):
        data_view.parse_labels(" , ")
    assert [data_view.window_text(s) for s in (60, 300, 3600, 5400, 86400, 90)] == ["1m", "5m", "1h", "90m", "1d", "90s"]


def test_report_rows_keep_errors_and_unknown_metrics() -> None:
    good = LoadReport(file="a.prom", status="loaded", format="prometheus-text", engine="vllm-v1", series=3,
                      samples=9, signals=["ttft", "tpot"], paths=["chat"], unknown_metrics=["python_info"],
                      notes=["single snapshot"])
    bad = LoadReport(file="b.prom", status="failed", errors=["b.prom: line 3: bad value"])
    rows = data_view.report_rows([good, bad]).set_index("file")
    assert rows.loc["a.prom", "signals"] == "ttft, tpot"
    assert rows.loc["a.prom", "unknown metrics"] == "python_info"
    assert rows.loc["b.prom", "status"] == "failed"
    assert rows.loc["b.prom", "errors"] == "b.prom: line 3: bad value"


def test_sample_path_override(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    assert data_view.sample_path().name == "metrics.parquet"
    monkeypatch.setenv(data_view.SAMPLE_ENV, str(tmp_path / "slice.parquet"))
    assert data_view.sample_path() == tmp_path / "slice.parquet"
    ws = Workspace(":memory:")
    assert data_view.ensure_sample_loaded(ws) is None  # a missing file loads nothing and raises nothing
    ws.close()


def test_data_health_lists_resets(ws: Workspace) -> None:
    # a TTFT histogram whose counters restart (all buckets drop to lower values) in the second window
    les = ["0.5", "+Inf"]
    load(ws, histogram(TTFT, V1, les, [(0, [10, 20], 5.0), (60, [30, 40], 9.0), (120, [2, 3], 1.0)]))
    cube_id = ensure_cube(ws, None, 60, None)
    health = data_view.data_health(ws, cube_id)
    resets = health[health["stat"] == "resets"]
    assert resets["value"].sum() > 0
    assert set(resets["path"]) == {"chat"}


# -- promise ---------------------------------------------------------------------------------------------
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


# -- economics -------------------------------------------------------------------------------------------
INPUTS = {**economics_view.ECON_DEFAULTS, "datasets": [2, 1], "replicas": "3:5", "traffic": "1.0,1.5", "context": "1"}
PROMISES = {"chat": {"ttft_s": 0.5, "tpot_s": 0.03, "e2e_s": None, "target": 0.99},
            "batch": {"ttft_s": 2.0, "tpot_s": 0.1, "e2e_s": 30.0, "target": 0.9}}


def _key(form: dict, promises: dict = PROMISES) -> str:
    return economics_view.scenario_inputs(form, ["model_name"], [], promises).replay_key()


def test_the_replay_key_leaves_prices_targets_and_e2e_out() -> None:
    key = _key(INPUTS)
    repriced = {**INPUTS, "gpu_hour": 99.0, "breach": {"chat": 5.0}, "horizon_hours": 24.0, "split": "equal"}
    retargeted = {p: {**v, "target": 0.5, "e2e_s": 1.0} for p, v in PROMISES.items()}
    assert _key(repriced, retargeted) == key
    tighter = {**PROMISES, "chat": {**PROMISES["chat"], "ttft_s": 0.25}}
    assert _key(INPUTS, tighter) != key
    assert _key({**INPUTS, "seeds": 2}) != key
    assert _key({**INPUTS, "kv_cache_tokens": 4096}) != key
    assert json.loads(key)["datasets"] == [1, 2]
    with pytest.raises(ValueError, match="replicas"):
        _key({**INPUTS, "replicas": "x"})
    with pytest.raises(ValueError, match="at least one dataset"):
        _key({**INPUTS, "datasets": []})
    with pytest.raises(ValueError, match="kv_cache_tokens: must be at least 1"):
        _key({**INPUTS, "kv_cache_tokens": 0})


def test_the_form_and_the_cli_make_the_same_scenario_inputs() -> None:
    """The dashboard's form and ``headroom scenarios``' flags meet in one ``ScenarioInputs``."""
    from app.economics.decide.inputs import ScenarioInputs
    from app.economics.decide.money import Prices
    from app.economics.model.capacity import Assumptions

    form = {**INPUTS, "price_basis": "replica-hour", "replica_hour": 7.0, "breach": {"chat": 0.5},
            "default_breach": 0.02, "max_num_seqs": 64, "router": "round_robin"}
    got = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES)
    cli = ScenarioInputs(datasets=(1, 2), path_labels=("model_name",), replicas=(3, 4, 5), traffic=(1.0, 1.5),
                         promises=(Promise(path="chat", ttft_s=0.5, tpot_s=0.03, target=0.9),
                                   Promise(path="batch", ttft_s=2.0, tpot_s=0.1, e2e_s=30.0)),
                         assumptions=Assumptions(max_num_seqs=64, router="round_robin"),
                         prices=Prices(7.0, {"chat": 0.5, "*": 0.02}))
    assert got == cli
    assert got.replay_key() == cli.replay_key()
    assert dict(got.prices_for(["chat", "batch"]).breach) == {"chat": 0.5, "batch": 0.02}


def test_scenario_order_and_limit() -> None:
    inputs = economics_view.scenario_inputs(INPUTS, ["model_name"], [], PROMISES)
    assert inputs.scenarios() == [(3, 1.0, 1.0), (4, 1.0, 1.0), (5, 1.0, 1.0),
                                  (3, 1.5, 1.0), (4, 1.5, 1.0), (5, 1.5, 1.0)]
    with pytest.raises(ValueError, match="200 scenarios"):
        _key({**INPUTS, "replicas": "1:300"})
    with pytest.raises(ValueError, match="traffic"):
        _key({**INPUTS, "traffic": "0"})


def test_prices_by_gpu_or_replica_hour() -> None:
    form = {**INPUTS, "gpu_hour": 2.0, "gpus_per_replica": 8, "breach": {"chat": 0.5}, "default_breach": 0.01}
    p = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES).prices_for(["chat", "batch"])
    assert p.replica_hour == 16.0 and dict(p.breach) == {"chat": 0.5, "batch": 0.01}
    form = {**INPUTS, "price_basis": "replica-hour", "replica_hour": 7.0}
    p = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES).prices_for(["chat"])
    assert p.replica_hour == 7.0 and p.horizon_hours == 720.0


def _doc() -> dict:
    """A priced document of two scenarios and one path, by hand: 720 h, $1 per replica-hour."""
    rows = [{"replicas": n, "traffic": 1.0, "context": 1.0, "path": "chat", "breach_share": s,
             "breach_share_low": s / 2, "breach_share_high": 2 * s, "ttft_share": s, "tpot_share": 0.0,
             "extrapolated": n == 3, "extrapolation_reasons": ["below the observed N"] if n == 3 else [],
             "requests": 1000.0, "expected_breaches": 1000 * s, "breach_cost": 1000 * s * 10,
             "headroom_cost": 720.0 * n, "total_cost": 720.0 * n + 1000 * s * 10,
             "breach_cost_low": 1000 * s * 5, "breach_cost_high": 1000 * s * 20,
             "cost_per_kept_request": 720.0 * n / (1000 * (1 - s))} for n, s in ((3, 0.5), (4, 0.1))]
    from app.economics.decide import decision

    fleet = decision.fleet_totals(rows)
    return {"scenarios": rows, "fleet": fleet, "cheapest_by_traffic_context": decision.cheapest(fleet),
            "cheapest": {"replicas": 4, "traffic": 1.0, "context": 1.0, "total_cost": fleet[1]["total_cost"]},
            "break_even_breach_price": {"chat": None}, "observed_replicas": 4,
            "prices": {"replica_hour": 1.0, "breach": {"chat": 10.0}, "horizon_hours": 720.0, "cost_split": "requests"}}


def test_verdict_and_tables() -> None:
    doc = _doc()
    (v,) = economics_view.verdict(doc)
    # 3 replicas: 2160 + 5000 = 7160; 4: 2880 + 1000 = 3880; at the interval ends 3 -> [4660, 12160],
    # 4 -> [3380, 4880]: 4 either way
    assert v["replicas"] == 4 and v["determined_by_data"]
    assert v["cost_per_kept_request"] == pytest.approx(2880 / 900)
    table = economics_view.scenario_table(doc)
    assert list(table["N'"]) == [3, 4]
    assert table.loc[0, "flags"] == "below the observed N"
    assert table.loc[1, "joint breach %"] == pytest.approx(10.0)
    assert list(economics_view.fleet_frame(doc, 1.0, 1.0)["total_cost"]) == [7160.0, 3880.0]


def _run() -> dict:
    form = {**INPUTS, "gpu_hour": 3.0, "gpus_per_replica": 2.0, "breach": {"chat": 0.5}}
    inputs = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES)
    return {"spec": inputs.replay_key(), "inputs": form, "scenario_inputs": inputs}


def test_saved_sets_use_the_cli_format_and_round_trip(ws: Workspace) -> None:
    from app.economics.decide import saved

    inputs = sets_view.saved_inputs(_run())
    # the shape `headroom scenarios --save` writes, plus the dashboard's own form
    assert inputs["replicas"] == [3, 4, 5] and inputs["traffic"] == [1.0, 1.5] and inputs["context"] == [1.0]
    assert inputs["prices"]["replica_hour"] == 6.0 and inputs["prices"]["breach"] == {"batch": 0.01, "chat": 0.5}
    assert {p["path"]: p["ttft_s"] for p in inputs["promises"]} == {"batch": 2.0, "chat": 0.5}
    assert sets_view.form_inputs(inputs)["gpu_hour"] == 3.0  # the dashboard form comes back as it was
    saved.save(ws, "baseline", inputs, _doc())
    saved.save(ws, "pricier", {**inputs, "seeds": 3}, {**_doc(), "prices": {**_doc()["prices"], "replica_hour": 2.0}})
    text = saved.export_json(ws)
    for name in saved.names(ws):
        saved.delete(ws, name)
    assert saved.import_json(ws, text) == ["baseline", "pricier"]
    sets = {n: saved.get(ws, n) for n in saved.names(ws)}
    table = sets_view.sets_table(sets).set_index("name")
    assert table.loc["baseline", "replicas"] == "3, 4, 5" and table.loc["pricier", "replica-hour $"] == 2.0
    assert table.loc["baseline", "cheapest N'"] == 4
    cmp = sets_view.compare_headlines(["baseline", "pricier"], [sets["baseline"], sets["pricier"]]).set_index("")
    assert cmp.loc["replica-hour", "baseline"] == "$1" and cmp.loc["replica-hour", "pricier"] == "$2"
    assert cmp.loc["total cost at the cheapest N'", "baseline"] == "$3,880"
    assert cmp.loc["seeds", "pricier"] == "3"
    assert list(sets_view.set_fleet(sets["baseline"])["replicas"]) == [3, 4]


def test_form_inputs_from_a_cli_saved_set() -> None:
    cli = {"datasets": [1], "replicas": [2, 3, 4], "traffic": [1.0, 1.5], "context": [1.0], "seeds": 3,
           "prices": {"replica_hour": 8.0, "breach": {"chat": 0.2}, "horizon_hours": 24.0, "cost_split": "equal"},
           "assumptions": {"router": "round_robin", "max_num_seqs": 128, "max_num_batched_tokens": 4096}}
    form = sets_view.form_inputs(cli)
    assert (form["replicas"], form["traffic"], form["context"]) == ("2,3,4", "1,1.5", "1")
    assert form["price_basis"] == "replica-hour" and form["replica_hour"] == 8.0 and form["split"] == "equal"
    assert form["router"] == "round_robin" and form["max_num_seqs"] == 128 and form["breach"] == {"chat": 0.2}
    assert economics_view.grid_axes(form) == ([2, 3, 4], [1.0, 1.5], [1.0])


# -- model views -----------------------------------------------------------------------------------------
def test_model_and_curve_on_one_load_axis() -> None:
    windows = [ts(300 * i) for i in range(4)]
    load = model_view.path_load(pd.DataFrame({
        "window_start": windows * 2, "path": ["chat"] * 4 + ["batch"] * 4,
        "requests": [600, 1200, 1800, 2400, 3000, 0, 0, 0], "replicas": [4, 4, 4, 4, 4, 4, 4, 8]}), 300, "chat")
    # the path's own requests; the replicas of the window (any path: 8 in the last one)
    assert list(load["load"]) == [0.5, 1.0, 1.5, 1.0]
    load = pd.DataFrame({"window_start": windows, "requests": [600, 1200, 1800, 2400], "replicas": 4,
                         "load": [0.5, 1.0, 1.5, 2.0]})
    # request-weighted mean load 1.5 req/s per replica at 4 replicas: 3.0 at 2, 4.5 at 2 with traffic x1.5
    assert model_view.scenario_load(load, 4) == pytest.approx(1.5)
    assert model_view.scenario_load(load, 2) == pytest.approx(3.0)
    assert model_view.scenario_load(load, 2, 1.5) == pytest.approx(4.5)
    cross = {"chat": {"observed_load_range": [0.5, 2.0],
                      "curve": [{"load": 0.5, "share_low": 0.01, "share_high": 0.02}],
                      "readings": [{"replicas": 2, "traffic": 1.0, "share": 0.5, "share_low": 0.2,
                                    "share_high": 1.0, "extrapolated": True},
                                   {"replicas": 2, "traffic": 1.5, "share": 0.7, "share_low": 0.3,
                                    "share_high": 1.0, "extrapolated": True}]}}
    pred = SimpleNamespace(path="chat", replicas=2, traffic=1.0, context=1.0, breach_share=0.4,
                           breach_share_low=0.3, breach_share_high=0.5, extrapolated=True)
    other = SimpleNamespace(**{**vars(pred), "path": "batch"})
    axis = model_view.load_axis(cross, "chat", [pred, other], load)
    assert axis["range"] == (0.5, 2.0)
    assert axis["readings"][["replicas", "load", "share"]].to_dict("records") == [
        {"replicas": 2, "load": pytest.approx(3.0), "share": 0.5}]
    assert axis["model"][["replicas", "load", "share", "share_high"]].to_dict("records") == [
        {"replicas": 2, "load": pytest.approx(3.0), "share": 0.4, "share_high": 0.5}]


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


def test_break_even_lines_say_what_is_missing() -> None:
    doc = _doc()  # cheapest 4 of 3..4: no larger size was computed
    doc["break_even_replicas"] = None
    assert economics_view.break_even_lines(doc) == [
        "Break-even price of one **chat** breach for a larger size: add a size above N'=4 to the replica range to "
        "see it"]
    doc["cheapest"] = {**doc["cheapest"], "replicas": 3}
    doc["break_even_replicas"] = 4
    doc["break_even_breach_price"] = {"chat": 1.8}
    assert economics_view.break_even_lines(doc) == [
        "Break-even price of one **chat** breach for 4 replicas (1 more than the cheapest): **\\$1.8000** "
        "(entered: \\$10.0000)"]  # \$: no maths
    doc["break_even_replicas"] = 6  # a grid of 3, 6: the next size is three replicas more
    assert economics_view.break_even_lines(doc)[0].startswith(
        "Break-even price of one **chat** breach for 6 replicas (3 more than the cheapest)")


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


def _recording_replay(calls: list[list[tuple[int, float, float]]]) -> Callable:
    """A replay for ``ReplayStore``: notes what it is asked for and keeps one fake prediction each."""
    def replay(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        calls.append(list(missing))
        for s in missing:
            keep(s, [SimpleNamespace(replicas=s[0], share=0.1 * s[0])])
    return replay


def test_the_replay_store_replays_only_what_it_lacks_all_at_once() -> None:
    """A run asks the replay once, for every scenario the store lacks (in the run's order, a repeat
    once); what it holds comes back as copies; past ``max_entries`` the least recently used goes."""
    calls: list[list[tuple[int, float, float]]] = []
    replay = _recording_replay(calls)
    store = ui_cache.ReplayStore(max_entries=4)
    first = store.replayed("ws", "key", [(2, 1, 1), (3, 1, 1), (2, 1, 1)], replay)
    assert calls == [[(2, 1.0, 1.0), (3, 1.0, 1.0)]]
    assert [r.predictions[0].replicas for r in first] == [2, 3, 2]
    assert first[0].computed_at == first[1].computed_at
    first[0].predictions[0].share = 99.0  # a caller's change stays its own
    again = store.replayed("ws", "key", [(3, 1.0, 1.0), (4, 1.0, 1.0), (2, 1.0, 1.0)], replay)
    assert calls[1] == [(4, 1.0, 1.0)]
    assert [r.predictions[0].share for r in again] == pytest.approx([0.3, 0.4, 0.2])
    assert again[0].computed_at == first[1].computed_at  # held: from the cache
    store.replayed("ws", "other key", [(2, 1.0, 1.0)], replay)  # another replay key is another scenario
    assert calls[2] == [(2, 1.0, 1.0)]
    store.replayed("ws", "key", [(5, 1.0, 1.0)], replay)  # five held: (3, 1, 1) was used least recently
    store.replayed("ws", "key", [(3, 1.0, 1.0), (2, 1.0, 1.0)], replay)
    assert calls[-1] == [(3, 1.0, 1.0)]


def _blocking_replay(calls: list[list[tuple[int, float, float]]], started: threading.Event,
                     release: threading.Event, stop_after: int | None = None) -> Callable:
    """A replay that says it started, waits to be released, then keeps its scenarios (or the first
    ``stop_after`` of them and raises, as a stopped script does)."""
    def replay(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        calls.append(list(missing))
        started.set()
        assert release.wait(10)
        for i, s in enumerate(missing):
            if stop_after is not None and i == stop_after:
                raise ValueError("stopped")
            keep(s, [SimpleNamespace(replicas=s[0])])
    return replay


def _in_thread(store: ui_cache.ReplayStore, grid: list[tuple[int, float, float]], replay: Callable,
               out: dict[str, object]) -> threading.Thread:
    def run() -> None:
        try:
            out["result"] = store.replayed("ws", "key", grid, replay)
        except ValueError as exc:
            out["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_two_runs_at_once_replay_each_scenario_once() -> None:
    """Two sessions asking for overlapping grids at the same moment: the second waits for what the
    first is replaying (saying how many, as the page's bar does) and replays only the rest."""
    store = ui_cache.ReplayStore()
    store.WAIT_POLL_S = 0.01
    first_calls: list[list[tuple[int, float, float]]] = []
    started, release, first = threading.Event(), threading.Event(), {}
    thread = _in_thread(store, [(2, 1.0, 1.0), (3, 1.0, 1.0)],
                        _blocking_replay(first_calls, started, release), first)
    assert started.wait(10)
    second_calls: list[list[tuple[int, float, float]]] = []
    waits: list[int] = []
    shown: list[tuple[float, str]] = []
    progress = economics_view.ReplayProgress(lambda done, text: shown.append((done, text)))

    def on_wait(left: int) -> None:
        waits.append(left)
        progress.waiting(left)
        release.set()  # the first run finishes once the second is seen waiting

    second = store.replayed("ws", "key", [(3, 1.0, 1.0), (4, 1.0, 1.0)], _recording_replay(second_calls),
                             on_wait=on_wait)
    thread.join(10)
    assert first_calls == [[(2, 1.0, 1.0), (3, 1.0, 1.0)]] and second_calls == [[(4, 1.0, 1.0)]]
    assert waits and set(waits) == {1}
    assert shown and shown[0] == (0.0, "waiting for 1 scenario another session is replaying")
    assert [r.predictions[0].replicas for r in second] == [3, 4]
    assert [r.predictions[0].replicas for r in first["result"]] == [2, 3]
    assert not store._running


def test_a_run_waited_for_that_stops_leaves_its_scenarios_to_the_waiting_run() -> None:
    """The first session is stopped after one scenario: the run waiting for both holds that one and
    replays the other itself."""
    store = ui_cache.ReplayStore()
    store.WAIT_POLL_S = 0.01
    first_calls: list[list[tuple[int, float, float]]] = []
    started, release, first = threading.Event(), threading.Event(), {}
    thread = _in_thread(store, [(2, 1.0, 1.0), (3, 1.0, 1.0)],
                        _blocking_replay(first_calls, started, release, stop_after=1), first)
    assert started.wait(10)
    calls: list[list[tuple[int, float, float]]] = []
    again = store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], _recording_replay(calls),
                           on_wait=lambda _left: release.set())
    thread.join(10)
    assert isinstance(first["error"], ValueError)
    assert calls == [[(3, 1.0, 1.0)]] and [r.predictions[0].replicas for r in again] == [2, 3]
    assert not store._running


def test_a_replay_stopped_part_way_keeps_the_scenarios_it_finished() -> None:
    """Streamlit stops a script at its next call when the user moves on; an error stops it too: the
    scenarios whose runs were all in stay held, the next run replays only the others."""
    def stopped_after_one(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        keep(missing[0], [SimpleNamespace(replicas=missing[0][0])])
        raise ValueError("stopped")

    store = ui_cache.ReplayStore()
    with pytest.raises(ValueError, match="stopped"):
        store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], stopped_after_one)
    calls: list[list[tuple[int, float, float]]] = []
    again = store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], _recording_replay(calls))
    assert calls == [[(3, 1.0, 1.0)]] and [r.predictions[0].replicas for r in again] == [2, 3]
    with pytest.raises(RuntimeError, match=r"without scenarios \[\(4, 1.0, 1.0\)\]"):
        store.replayed("ws", "key", [(4, 1.0, 1.0)], lambda _missing, _keep: None)

"""Where the tail lives (app/tail/): attribution from the histograms held to the simulator's
per-request truth, on fleets whose engine and traffic differ from the twin's defaults."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import cli, load
from app.bench.accuracy import FleetCase, _start, case, truth
from app.cube import ensure_cube
from app.economics.model.capacity import Assumptions
from app.economics.predict import scenarios as sc
from app.promise import shares as pm
from app.promise.shares import Promise
from app.simulator import simulate_day
from app.simulator.metrics import minimal_export
from app.store import Workspace
from app.tail import attribution as at
from app.tail import report as tail_report
from app.tail import signals as sg
from app.tail import twin


@dataclass
class Fleet:
    case: FleetCase
    ws: Workspace
    cube_id: int
    records: pd.DataFrame
    promises: list[Promise]
    dataset_id: int
    frame: pd.DataFrame


def _fleet(name: str, kind: str = "full") -> Iterator[Fleet]:
    c = case(name)
    sim = simulate_day(seed=c.seed, hours=c.hours, start=_start(c), config=c.fleet,
                       traffic=c.traffic, events=c.events)
    frame = sim.metrics_frame if kind == "full" else minimal_export(sim.metrics_frame)
    ws = Workspace(":memory:")
    report = load.load_frame(ws, frame, f"{name}-{kind}")
    assert report.status == "loaded", report.errors
    cube_id = ensure_cube(ws, [report.dataset_id], 300, ["model_name"])
    promises = [Promise(path=p, ttft_s=t, tpot_s=y, e2e_s=20.0) for p, (t, y) in c.promises.items()]
    yield Fleet(c, ws, cube_id, sim.records, promises, report.dataset_id, frame)
    ws.close()


@pytest.fixture(scope="module")
def rag() -> Iterator[Fleet]:
    """f2-rag-4x: 4 replicas, RAG prompts beside chat, a power-of-two router, slower steps."""
    yield from _fleet("f2-rag-4x")


def _truth(records: pd.DataFrame, path: str, threshold: float, start: pd.Timestamp, end: pd.Timestamp) -> dict:
    """From the records: TTFT breaches, those queueing explains (all but the ones whose TTFT without
    the queue wait breaches while the queue alone does not), queue alone."""
    d = records[(records["path"] == path) & records["ttft_s"].notna() & (records["first_token"] > start)
                & (records["first_token"] <= end)]
    rest = d["ttft_s"] - d["queue_s"]
    breach = d["ttft_s"] > threshold
    explained = breach & ~((rest > threshold) & (d["queue_s"] <= threshold))
    return {"n": len(d), "ttft": float(breach.mean()), "explained": float(explained.mean()),
            "queue_alone": float((d["queue_s"] > threshold).mean()), "breaches": int(breach.sum())}


def test_queue_attribution_holds_the_simulators_truth(rag: Fleet) -> None:
    start, end = pm.time_range(rag.ws, rag.cube_id, None, None)
    att = at.attribute(rag.ws, rag.cube_id, rag.promises, start, end)
    rows = att.ttft.set_index("path")
    assert set(rows.index) == set(rag.case.promises)
    for path, (threshold, _) in rag.case.promises.items():
        truth = _truth(rag.records, path, threshold, pd.Timestamp(start, tz="UTC"), pd.Timestamp(end, tz="UTC"))
        r = rows.loc[path]
        assert truth["breaches"] > 50, f"{path}: the fleet must breach for the test to mean something"
        assert r["basis"] == "queue + prefill histograms"
        # the TTFT share the histogram gives is the truth's (the thresholds are bucket bounds)
        assert r["ttft_share"] == pytest.approx(truth["ttft"], abs=2e-3)
        # queue alone: a lower bound, and the histogram reads it
        assert r["queue_alone_share"] == pytest.approx(truth["queue_alone"], abs=2e-3)
        # the interval holds the true share of breaches queueing explains (with the populations'
        # first-token vs finish difference at the range's ends: 0.2 pp)
        assert r["queue_explained_low"] - 2e-3 <= truth["explained"] <= r["queue_explained_high"] + 2e-3
        assert r["queue_explained_low"] >= r["queue_alone_low"]


def test_a_minimal_export_widens_the_interval_to_queue_alone_and_every_breach() -> None:
    fleet = next(_fleet("f2-rag-4x", "minimal"))
    start, end = pm.time_range(fleet.ws, fleet.cube_id, None, None)
    rows = at.attribute(fleet.ws, fleet.cube_id, fleet.promises, start, end).ttft.set_index("path")
    for _, r in rows.iterrows():
        assert r["basis"].startswith("queue histogram (no prefill histogram")
        assert r["queue_explained_low"] == pytest.approx(r["queue_alone_low"])
        assert r["queue_explained_high"] == pytest.approx(r["ttft_share_high"])
        assert np.isnan(r["queue_explained_point"])
    fleet.ws.close()


def test_explained_bounds_on_hand_computed_shares() -> None:
    one = lambda x: (np.array([x]),) * 3  # noqa: E731 - exact shares: estimate = low = high
    # a = 10 %, queue alone 6 %, prefill alone 3 %: E in [max(6, 7), min(10, 7 + 6)] = [7, 10] %,
    # independence overlap 6 * 3 / 10 = 1.8 % -> point 8.8 %
    e = at.explained(one(0.10), one(0.06), one(0.03))
    assert (e["low"][0], e["high"][0]) == pytest.approx((0.07, 0.10))
    assert e["point"][0] == pytest.approx(0.088)
    # no prefill histogram: [queue alone, every breach]
    e = at.explained(one(0.10), one(0.06), None)
    assert (e["low"][0], e["high"][0]) == pytest.approx((0.06, 0.10))
    # a queue share above the TTFT share (populations counted at different times) is capped by it
    e = at.explained(one(0.05), one(0.08), one(0.0))
    assert (e["low"][0], e["high"][0]) == pytest.approx((0.05, 0.05))
    # bucket intervals widen the ends: a in [8, 12] %, q in [5, 6] %, r in [1, 2] %
    a = (np.array([0.1]), np.array([0.08]), np.array([0.12]))
    q = (np.array([0.055]), np.array([0.05]), np.array([0.06]))
    r = (np.array([0.015]), np.array([0.01]), np.array([0.02]))
    e = at.explained(a, q, r)
    assert (e["low"][0], e["high"][0]) == pytest.approx((0.06, 0.12))


def test_twin_attribution_against_the_fleets_own_simulator(rag: Fleet) -> None:
    """The twin, fitted on the export alone, replayed at N and 4 N: the part capacity causes within
    +-25 % (or 0.2 pp) of the truth (the fleet's simulator replaying the same arrivals at 4 N) where
    the twin stands behind it (unflagged), the true shares inside the intervals always; money = share
    x requests per month x price."""
    c = rag.case
    promises = [Promise(path=p, ttft_s=t, tpot_s=y) for p, (t, y) in c.promises.items()]
    analysis = sc.analyse(rag.ws, [rag.dataset_id], promises, ["model_name"], Assumptions(**c.given), seeds=2)
    rows = {r.path: r for r in twin.attribute(analysis, {"*": 0.02}, seeds=2, workers=1)}
    at_n, ample = truth(c, c.replicas, 1.0, 1.0), truth(c, 4 * c.replicas, 1.0, 1.0)
    for path, r in rows.items():
        true_capacity = at_n[path]["joint"] - ample[path]["joint"]
        assert true_capacity > 0.005, "the fleet must have capacity breaches for the test to mean something"
        assert r.ample_replicas == 4 * c.replicas
        # the accuracy goal of the harness: an unflagged share within tolerance, a flagged one's
        # interval holding the truth (and saying why it is wide)
        if r.flagged:
            assert r.flags
        else:
            assert abs(r.capacity_share - true_capacity) <= max(0.25 * true_capacity, 0.002)
        assert r.capacity_share_low <= true_capacity <= r.capacity_share_high
        assert r.intrinsic_share_low <= ample[path]["joint"] <= r.intrinsic_share_high
        assert r.capacity_fraction > 0.8  # on this fleet nearly every breach is capacity's
        money = r.money()
        assert money["capacity_usd_per_month"] == pytest.approx(r.capacity_share * r.requests_per_month * 0.02)
        hours = c.hours
        # the demand spans the export to its last window end: within 1 % of the export hours
        assert r.requests_per_month == pytest.approx(analysis.observed.requests[path] / hours * 720, rel=0.01)


def _with_gpu_util(frame: pd.DataFrame) -> pd.DataFrame:
    """The export plus a DCGM utilisation gauge per replica, as DCGM measures it: the share of the
    sample period a kernel ran, integer percent — busy whenever one request runs, so it saturates
    long before a queue forms (the reason never to scale on it)."""
    running = frame[frame["metric"] == "vllm:num_requests_running"].copy()
    instance = running["labels"].astype(str).map(lambda s: json.loads(s)["instance"])
    util = running.assign(
        metric="DCGM_FI_DEV_GPU_UTIL",
        labels=[json.dumps({"gpu": "0", "instance": i, "modelName": "NVIDIA H100"}) for i in instance],
        value=np.round(100 * (1 - np.exp(-running["value"].to_numpy(float) / 1.5))))
    out = pd.concat([frame.astype({"metric": str, "labels": str}), util], ignore_index=True)
    return out


@pytest.fixture(scope="module")
def rag_signals(rag: Fleet) -> Iterator[sg.SignalReport]:
    ws = Workspace(":memory:")
    report = load.load_frame(ws, _with_gpu_util(rag.frame), "f2-with-dcgm")
    assert report.status == "loaded", report.errors
    cube_id = ensure_cube(ws, [report.dataset_id], 60, ["model_name"])
    yield sg.analyse(ws, cube_id, 60, rag.promises)
    ws.close()


def test_signals_rank_gpu_utilisation_last_and_recommend_a_queue_or_batch_rule(rag_signals: sg.SignalReport) -> None:
    rep = rag_signals
    by = {r.signal: r for r in rep.results}
    assert set(by) == {"waiting", "running", "kv_usage", "preemptions_per_replica_minute", "gpu_util"}
    # leads 0..15 minutes, each with the number of windows it rests on (fewer at longer leads)
    for r in by.values():
        assert sorted(r.correlation) == list(range(16))
        assert r.correlation[0][1] >= r.correlation[15][1] > 100
    assert rep.worst == "gpu_util"
    assert by["gpu_util"].best_rho < min(by[s].best_rho for s in ("waiting", "running", "kv_usage"))
    assert by["waiting"].level is not None
    assert rep.rule is not None and rep.rule.signal in sg.SCALE_ON
    assert rep.rule.text.startswith(f"scale out when {rep.rule.signal} >= ")
    assert rep.rule.precision >= rep.rule.base_rate  # the rule's alerts are followed by breach more than chance
    doc = sg.to_json(rep)
    assert doc["worst_signal"] == "gpu_util" and doc["rule"]["text"] == rep.rule.text


def test_level_and_lead_on_hand_built_windows() -> None:
    # breach share 0 below a signal of 4, 5 % from 4 on: the fit's floor is 0, the level 4
    x = np.array([0, 1, 2, 3, 4, 5, 6, 1, 2, 3.0])
    y = np.array([0, 0, 0, 0, 0.05, 0.05, 0.05, 0, 0, 0])
    level, floor, curve = sg._level(x, y, np.ones(10), 0.01)
    assert (level, floor) == (4.0, 0.0)
    assert sg.fitted_at(curve, 5.5) == pytest.approx(0.05)
    # an onset at window 6; the signal crossed its level at window 3 and stayed: a lead of 3 windows
    signal = np.array([0, 0, 0, 5, 5, 5, 5, 0.0])
    assert sg._warnings(signal, 4.0, np.array([6]), horizon=15) == [3]
    # a signal on for longer than the horizon carried no news of the onset
    assert sg._warnings(np.full(30, 5.0), 4.0, np.array([25]), horizon=15) == []
    # two consecutive windows above the level make one alert at the second
    assert sg._alerts(np.array([5, 0, 5, 5, 0.0]), 4.0, 2).tolist() == [False, False, False, True, False]


def test_onsets_and_followed_windows_by_hand() -> None:
    # budget 0.01: above at windows 4, 5 and 9 (NaN counts as not above); an onset needs 3 quiet windows
    y = np.array([0, 0, 0, np.nan, 0.02, 0.03, 0, 0, 0, 0.05, 0])
    assert sg._onsets(y, 0.01).tolist() == [4, 9]
    assert sg._onsets(np.array([0.05, 0, 0, 0, 0.05]), 0.01).tolist() == [4]  # window 0 has no quiet past
    # followed within 2 windows: 2..5 reach window 4 or 5, 7..9 reach 9, the last window only itself
    assert sg._followed(y, 0.01, 2).astype(int).tolist() == [0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.005, 0.02, math.nan]), max_size=40), st.integers(0, 6))
def test_onsets_and_followed_are_the_window_by_window_rules(values: list[float], horizon: int) -> None:
    y = np.array(values, dtype=float)
    above = np.nan_to_num(y, nan=0.0) > 0.01
    onsets = [t for t in range(sg.QUIET_WINDOWS, len(y)) if above[t] and not above[t - sg.QUIET_WINDOWS:t].any()]
    assert sg._onsets(y, 0.01).tolist() == onsets
    assert sg._followed(y, 0.01, horizon).tolist() == [bool(above[t: t + 1 + horizon].any()) for t in range(len(y))]


@pytest.mark.slow
def test_headroom_tail_prints_the_documented_json_markdown_and_csv(rag: Fleet, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    export_file = tmp_path / "f2.parquet"
    rag.frame.to_parquet(export_file)
    flags = [str(export_file), "--promise", "svc-a=1.0/0.05", "--promise", "svc-b=0.5/0.05", "--window", "1m"]
    assert cli.main(["tail", *flags, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"datasets", "start", "end", "window_s", "counts", "promises", "attribution", "twin", "signals"}
    assert doc["counts"] == "exact: increases of the raw samples"
    assert doc["datasets"] == ["f2.parquet"] and doc["window_s"] == 60 and doc["twin"] is None
    assert [a["path"] for a in doc["attribution"]] == ["svc-a", "svc-b"]
    a = doc["attribution"][0]
    assert set(a) == {"path", "ttft_threshold_s", "requests", "ttft_share", "queue_alone", "prefill_alone",
                      "queue_explained", "basis", "e2e"}
    assert a["queue_explained"]["share_low"] <= a["queue_explained"]["share_high"] <= a["ttft_share"]["high"]
    assert [s["scope"] for s in doc["signals"]] == ["(fleet)", "svc-a", "svc-b"]
    fleet = doc["signals"][0]
    assert {r["signal"] for r in fleet["signals"]} == {"waiting", "running", "kv_usage",
                                                       "preemptions_per_replica_minute"}
    assert [c["lead_min"] for c in fleet["signals"][0]["correlation"]] == list(range(16))
    assert fleet["rule"]["text"].startswith("scale out when ")
    assert any("GPU utilisation: not in the data" in n for n in fleet["notes"])
    assert a["e2e"] is None
    assert cli.main(["tail", *flags, "--e2e", "svc-a=20", "--format", "json"]) == 0
    with_e2e = json.loads(capsys.readouterr().out)["attribution"]
    e2e = with_e2e[0]["e2e"]
    assert e2e["threshold_s"] == 20.0 and with_e2e[1]["e2e"] is None
    for phase in ("queue_alone", "prefill_alone", "decode_alone"):  # each phase alone is inside the e2e breaches
        assert e2e[phase]["low"] <= e2e["e2e"]["high"] + 1e-9
    assert cli.main(["tail", *flags, "--e2e", "svc-a=x"]) == 2
    capsys.readouterr()
    assert cli.main(["tail", *flags, "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Where the tail lives ") and "Datasets: f2.parquet." in text
    assert f"Recommended: **{fleet['rule']['text']}**" in text
    assert cli.main(["tail", *flags, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "# datasets: f2.parquet"
    assert lines[3] == ",".join(tail_report.CSV_FIELDS)
    rule = [r for r in lines if r.startswith("rule,(fleet),")]
    assert len(rule) == 1 and fleet["rule"]["text"] in rule[0]

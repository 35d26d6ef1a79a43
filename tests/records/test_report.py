"""Simulator histograms and per-request records in one workspace: the report's intervals contain the
exact shares of the records.

Three hours of the 4-replica fleet (default events: replica 2 crashes at 01:12 and is back at
01:16; nothing is scraped from 01:57 to 02:09), written as ``metrics.parquet`` + ``requests.parquet``
like the bundled sample and loaded from those files. For both paths and promises on and off the
bucket bounds, the report (over the whole export) must hold the exact shares of the records:

- TTFT and TPOT marginals: inside [share_low, share_high], equal to the share when the threshold is
  a bound — on the population the metrics saw (``tests/support/report_truth.py``: first tokens and finishes
  that died with the crashed process are in the records but in no histogram);
- the joint share: inside the Fréchet interval widened only by the population-edge counts (TTFT
  counts first tokens, TPOT finishes), for the finished population (``true_shares``) and for the
  population ``app.records.exact_joint_shares`` uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from app import load
from app.cli import main
from app.cube import ensure_cube
from app.engine.metrics_catalog import ITL_BUCKETS, TTFT_BUCKETS
from app.promise import report
from app.promise.shares import Promise
from app.records import exact_joint_shares
from app.simulator import simulate_day
from app.simulator.sample import write_metrics_parquet, write_records_parquet
from app.store import Workspace
from tests.support.report_truth import (
    Populations,
    observed_shares,
    population_bounds,
    populations,
    served_names,
)

TTFT_S = [0.5, 0.6, 0.25, 1.0, 2.5, 5.0]
TPOT_S = [0.025, 0.03, 0.05, 0.1]
PAIRS = [(x, TPOT_S[i % len(TPOT_S)]) for i, x in enumerate(TTFT_S)] + [(0.6, 0.1), (5.0, 0.025)]


@dataclass
class Export:
    dir: Path
    db: Path
    config: dict
    records: pd.DataFrame  # read back from requests.parquet
    served: dict[str, str]  # record path -> model_name
    start: pd.Timestamp
    end: pd.Timestamp
    metrics_id: int
    records_id: int
    pops: Populations


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Export:
    out = tmp_path_factory.mktemp("sim3h")
    sim = simulate_day(seed=7, replicas=4, hours=3, warmup_s=900)
    write_metrics_parquet(sim.metrics_frame, out / "metrics.parquet")
    write_records_parquet(sim.records, out / "requests.parquet")
    db = out / "workspace.duckdb"
    with Workspace(db) as ws:
        m, r = load.load_file(ws, out / "metrics.parquet"), load.load_file(ws, out / "requests.parquet")
        assert (m.status, m.engine, r.status, r.format) == ("loaded", "vllm-v1", "loaded", "simulator-records-parquet")
        assert r.samples == len(sim.records)
        ensure_cube(ws, [m.dataset_id, r.dataset_id], 300, ["model_name"])
    records = pd.read_parquet(out / "requests.parquet")
    start, end = pd.Timestamp(sim.config["export_start"]), pd.Timestamp(sim.config["export_end"])
    assert (m.start, m.end) == (sim.config["export_start"], sim.config["export_end"])
    return Export(dir=out, db=db, config=sim.config, records=records, served=served_names(sim.config),
                  start=start, end=end, metrics_id=m.dataset_id, records_id=r.dataset_id,
                  pops=populations(records, sim.config, out / "metrics.parquet", start, end))


@pytest.fixture
def ws(export: Export) -> Iterator[Workspace]:
    w = Workspace(export.db)
    yield w
    w.close()


def record_paths(ws: Workspace, export: Export) -> dict[str, str]:
    """{simulator path name: the path the loaded records carry} (today the records keep the
    simulator's ``interactive``/``batch``; the metrics name paths by ``model_name``)."""
    loaded = {r[0] for r in ws.cursor().execute(
        "select distinct path from request_records where dataset_id = $id", {"id": export.records_id}).fetchall()}
    out = {name: served if served in loaded else name for name, served in export.served.items()}
    assert set(out.values()) == loaded
    return out


def _records_joint(rec: pd.DataFrame, on: pd.Series, x: float, y: float, include_failed: bool) -> float:
    """The joint breach share of the records ``on``, computed here with pandas: failed requests breach
    when failures count, and leave the population when they do not."""
    breach = (rec["ttft_s"] > x) | (rec["tpot_s"] > y)
    failed = rec["finished_reason"].isin(["abort", "error"])
    if include_failed:
        breach |= failed
    else:
        on = on & ~failed
    return float(breach[on].mean())


def _on_bound(x: float, bounds: tuple[float, ...]) -> bool:
    return any(abs(x - b) <= 1e-9 * b for b in bounds)


def test_crash_loses_observations_the_records_keep(export: Export) -> None:
    """The population correction is real and small: the crash took a few first tokens and finishes."""
    lost_first, lost_finish = int(export.pops.lost_first.sum()), int(export.pops.lost_finish.sum())
    assert 0 < lost_first < 100 and 0 < lost_finish < 100


@pytest.mark.parametrize(("ttft_s", "tpot_s"), PAIRS)
def test_report_intervals_contain_the_exact_shares(export: Export, ws: Workspace, ttft_s: float,
                                                   tpot_s: float) -> None:
    rec, pops = export.records, export.pops
    ids = [export.metrics_id, export.records_id]
    cube_id = ensure_cube(ws, ids, 300, ["model_name"])
    promises = [Promise(path=served, ttft_s=ttft_s, tpot_s=tpot_s) for served in export.served.values()]
    # exact joint shares of the records, per path, over the export (failed requests aside: the
    # requests lost in the crash fail in the records but never reach request_success{abort})
    names = record_paths(ws, export)
    exact = exact_joint_shares(ws, [export.records_id], [Promise(path=names[name], ttft_s=ttft_s, tpot_s=tpot_s)
                                                         for name in export.served],
                               export.start.tz_localize(None), export.end.tz_localize(None), include_failed=False)
    exact = {name: exact[names[name]] for name in export.served}
    doc = report.build(ws, cube_id, 300, promises, include_failed=False,
                       exact_joint={export.served[k]: v for k, v in exact.items()})
    truth = observed_shares(rec, pops, dict.fromkeys(export.served, (ttft_s, tpot_s)), export.start, export.end)
    by_path = {p["path"]: p for p in doc["paths"]}
    assert sorted(by_path) == sorted(export.served.values())
    for name, served in export.served.items():
        p, t = by_path[served], truth.loc[name]
        on = rec["path"] == name
        first, finish = pops.first_seen & on, pops.finish_seen & on
        assert p["requests"] == first.sum() == t.first_tokens  # the TTFT histogram counts T exactly
        for sig, true_share, bounds in (("ttft", t.ttft_share, TTFT_BUCKETS), ("tpot", t.tpot_share, ITL_BUCKETS)):
            m = p[sig]
            assert m["share_low"] <= true_share <= m["share_high"], (served, sig, m, true_share)
            assert m["exact"] is _on_bound(m["threshold_s"], bounds)
            if m["exact"]:
                assert m["share"] == true_share  # both (N - C) / N of the same integers
        assert p["tpot"]["basis"] == "requests"
        joint = p["joint"]
        assert joint["share_low"] == max(p["ttft"]["share_low"], p["tpot"]["share_low"])
        assert joint["share_high"] == min(1.0, p["ttft"]["share_high"] + p["tpot"]["share_high"])
        # the joint over the finished population (true_shares) ...
        low, high = population_bounds(p, first, finish, finish)
        assert low <= t.joint_share <= high, (served, low, t.joint_share, high)
        assert joint["share_low"] - low < 0.002 and high - joint["share_high"] < 0.002  # edges are small
        # ... and over the population exact_joint_shares takes (first token, else finish, else
        # arrival, in [start, end)), which the report shows as `exact_share`
        when = rec["first_token"].fillna(rec["finish"]).fillna(rec["arrival"])
        app_pop = on & (when >= export.start) & (when < export.end)
        assert joint["exact_share"] == exact[name]
        low, high = population_bounds(p, first, finish, app_pop)
        assert low <= exact[name] <= high, (served, low, exact[name], high)


@pytest.mark.parametrize("include_failed", [False, True])
def test_exact_joint_shares_count_every_request_of_the_range(export: Export, ws: Workspace,
                                                             include_failed: bool) -> None:
    """``exact_joint_shares`` = breached / requests of the range, requests still in flight included.

    Fails today with failures counted (bug): queries/records/records__joint_shares.sql sets
    ``failed = finished_reason in ('abort', 'error')``, NULL for a request still in flight; the
    breach flag ``... or ($include_failed and failed)`` is then NULL for an in-flight request that
    breached nothing, and ``avg()`` drops it from the denominator."""
    rec, names = export.records, record_paths(ws, export)
    x, y = 0.5, 0.025
    start, end = export.start.tz_localize(None), export.end.tz_localize(None)
    exact = exact_joint_shares(ws, [export.records_id], [Promise(ttft_s=x, tpot_s=y)], start, end,
                               include_failed=include_failed)
    when = rec["first_token"].fillna(rec["finish"]).fillna(rec["arrival"])
    in_range = (when >= export.start) & (when < export.end)  # its documented [start, end)
    assert (in_range & rec["finished_reason"].isna()).sum() > 0  # requests in flight at the end
    for name in export.served:
        on = in_range & (rec["path"] == name)
        assert exact[names[name]] == pytest.approx(_records_joint(rec, on, x, y, include_failed), rel=1e-12), name


def test_cli_report_attaches_the_exact_joint_share(export: Export, capsys: pytest.CaptureFixture[str]) -> None:
    """``headroom report metrics.parquet requests.parquet`` must show the records' exact joint share
    for each path, over the range the histograms cover.

    Fails today (bug): the simulator's records name paths ``interactive``/``batch`` while the metrics'
    paths are the ``model_name`` values ``llama-3.1-8b-interactive``/``-batch``, so no promise matches
    a record and ``exact_share`` stays null; ``cmd_report`` asks for the records of all time
    (start/end None), warm-up requests the histograms never saw included; and in-flight requests
    drop out of the denominator (see the test above)."""
    x, y = 0.5, 0.025
    # the workspace already holds both files (loaded from them by the fixture) and the cube
    code = main(["report", "--db", str(export.db),
                 *[arg for served in export.served.values() for arg in ("--promise", f"{served}={x}/{y}")],
                 "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    rec = export.records
    when = rec["first_token"].fillna(rec["finish"]).fillna(rec["arrival"])
    # the histograms hold what was observed after the first scrape (a baseline) up to the last one
    in_range = (when > export.start) & (when <= export.end)
    for p in doc["paths"]:
        name = next(k for k, v in export.served.items() if v == p["path"])
        expected = _records_joint(rec, in_range & (rec["path"] == name), x, y, include_failed=True)
        assert p["joint"]["exact_share"] == pytest.approx(expected, rel=1e-12), p["path"]

"""The cube pulled by PromQL (``--pushdown``, ``app.live.pushdown``) from a real Prometheus and a real
VictoriaMetrics holding every serving series of a simulated 2 h, 2-replica, 2-path vLLM V1 fleet
(buckets, ``_count``/``_sum``, counters and gauges; replica 1 crashes at 00:48 and restarts, nothing is
scraped from 01:18:00 to 01:27:36; each replica scraped at its own offset so no sample sits on a window
edge), against what the same data gives as a file:

- Prometheus: every cell of the pushdown cube is what the PromQL oracle (``tests/support/promql_oracle.py``,
  ``extrapolatedRate`` of the raw samples, version-aware) gives for the series Headroom maps to that path
  and signal, summed, with the cube's bucket envelope; gauges' min/mean/max and the replica count are the
  file cube's exactly; so the pushdown cube differs from the file cube exactly by PromQL's extrapolation
  (and the delta from the last sample before each window, which ``increase()`` does not see);
- VictoriaMetrics: MetricsQL's ``increase()`` counts from the last sample before the window and does not
  extrapolate, so its pushdown cube is the exact file cube, but for each series' first window (where it
  takes the counter to start from zero) and the decimal `_sum`/gauges (1e-9);
- by path and by series, window multiples, the refusals, the CLI and the whole-range shares.
"""

from __future__ import annotations

import io
import json
import math
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.util import patch_config_options

from app import cli, load, sql
from app.cube import cube_frame, ensure_cube
from app.live import pushdown
from app.live.client import Store
from app.simulator import simulate_day
from app.store import Workspace
from app.ui import data as data_view
from app.ui import state
from tests.support import export_formats as ef
from tests.support.live_fleet import E0, SHIFT_S, WHOLE
from tests.support.promql_oracle import Semantics, extrapolate, in_range
from tests.support.servers import need_prometheus, prometheus, victoria_metrics
from tests.support.small_export import frame as small_frame

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

WINDOW = 300
COMPARED = ("increase", "count", "sum", "min", "mean", "max", "replicas")


def full_frame() -> pd.DataFrame:
    """Every series of the simulated fleet, each replica's samples moved by its scrape offset."""
    sim = simulate_day(seed=11, replicas=2, hours=2, warmup_s=600)
    raw = sim.metrics_frame
    cats = [json.loads(c) for c in raw["labels"].cat.categories]
    labels = [cats[i] for i in raw["labels"].cat.codes.to_numpy()]
    shift = pd.to_timedelta([SHIFT_S[d["instance"]] for d in labels], unit="s")
    return pd.DataFrame({"metric": raw["metric"].astype(str).to_numpy(), "labels": labels,
                         "ts": pd.DatetimeIndex(raw["ts"]) + shift, "value": raw["value"].to_numpy()})


@dataclass
class Served:
    url: str
    semantics: Semantics | None  # Prometheus' variant; None for VictoriaMetrics
    frame: pd.DataFrame
    ws: Workspace
    file_id: int
    om: Path | None = None  # the frame as OpenMetrics text, as Prometheus' backfill read it
    oracle: pd.DataFrame | None = None  # oracle_cube's result, computed once per module

    def pull(self, by: str = "path", window: str = "5m", labels: list[str] | None = None) -> int:
        report = pushdown.fetch_cube(self.ws, Store(url=self.url), str(E0), str(E0 + WHOLE), window,
                                     path_labels=labels, by=by)
        assert report.status in ("loaded", "unchanged"), report.errors
        return int(report.dataset_id)

    def cube(self, dataset_id: int, window_s: int = WINDOW, labels: list[str] | None = None) -> pd.DataFrame:
        return cube_frame(self.ws, ensure_cube(self.ws, [dataset_id], window_s, labels or ["__model__"]))


def _served(tmp: Path, url: str, semantics: Semantics | None, frame: pd.DataFrame, om: Path | None = None) -> Served:
    ws = Workspace(":memory:")
    loaded = load.load_frame(ws, frame, "file")
    assert loaded.status == "loaded", loaded.errors
    return Served(url=url, semantics=semantics, frame=frame, ws=ws, file_id=int(loaded.dataset_id), om=om)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return full_frame()


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Iterator[Served]:
    need_prometheus()
    tmp = tmp_path_factory.mktemp("pushdown-prometheus")
    om = ef.write_openmetrics(frame, tmp / "fleet.om.txt")  # also the file the CLI tests load
    with prometheus(tmp, om) as url:
        with urllib.request.urlopen(url + "/api/v1/status/buildinfo", timeout=10) as resp:
            version = json.load(resp)["data"]["version"]
        served = _served(tmp, url, Semantics.for_version(version), frame, om)
        yield served
        served.ws.close()


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("pushdown-vm")
    with victoria_metrics(tmp, frame) as url:
        served = _served(tmp, url, None, frame)
        yield served
        served.ws.close()


# -- the oracle's cube -----------------------------------------------------------------------------------
def _points(frame: pd.DataFrame) -> dict[tuple, list[tuple[float, float]]]:
    seconds = pd.DatetimeIndex(frame["ts"]).as_unit("ms").asi8 / 1000
    out: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for metric, labels, t, value in zip(frame["metric"], frame["labels"], seconds, frame["value"], strict=True):
        out[(metric, tuple(sorted(labels.items())))].append((float(t), float(value)))
    for pts in out.values():
        pts.sort()
    return out


def _mapping(served: Served) -> pd.DataFrame:
    """The file dataset's series with the signal and path Headroom gives them (``signals__series``)."""
    con = served.ws.con
    sql.materialize(con, "signals__series", "oracle_series", dataset_ids=[served.file_id], path_labels=["__model__"])
    out = con.execute("select o.signal, o.kind, o.suffix, o.le, o.path, o.scale, s.metric, s.labels "
                      "from oracle_series as o join series as s using (series_id)").df()
    con.execute("drop table oracle_series")
    out["key"] = [(m, tuple(sorted(dict(lab).items()))) for m, lab in zip(out["metric"], out["labels"], strict=True)]
    return out


def oracle_cube(served: Served) -> pd.DataFrame:
    """Per window, path and signal: the sum over the path's series of the oracle's increase() (buckets
    with the cube's running-max envelope over le; `_sum` scaled), and the gauges' min/mean/max over the
    samples each range selects. Computed once per served store (the tests only read it)."""
    if served.oracle is None:
        served.oracle = _oracle_cube(served)
    return served.oracle


def _oracle_cube(served: Served) -> pd.DataFrame:
    points = _points(served.frame)
    mapping = _mapping(served)
    ends = pushdown.window_ends(pd.Timestamp(E0, unit="s").to_pydatetime(),
                                pd.Timestamp(E0 + WHOLE, unit="s").to_pydatetime(), WINDOW)
    rows = []
    for end in ends:
        start = end - WINDOW
        ws = pd.Timestamp(start, unit="s")
        sums: dict[tuple, float] = {}
        gauges: dict[tuple, list[float]] = defaultdict(list)
        for m in mapping.itertuples():
            pts = points[m.key]
            if m.kind == "gauge":
                gauges[(m.path, m.signal)] += [v for _, v in in_range(pts, start, end, served.semantics)]
                continue
            if m.kind not in ("histogram", "counter") or m.suffix not in ("bucket", "count", "sum", "total"):
                continue
            ex = extrapolate(pts, start, end, served.semantics)
            if ex is None:
                continue
            stat = {"bucket": "increase", "total": "increase"}.get(m.suffix, m.suffix)
            le = m.le if m.suffix == "bucket" else None
            key = (m.path, m.signal, None if le is None or math.isnan(le) else le, stat)
            sums[key] = sums.get(key, 0.0) + ex.increase * (m.scale if m.suffix == "sum" else 1.0)
        for (path, signal, le, stat), value in sums.items():
            rows.append((ws, path, signal, le, stat, value))
        for (path, signal), values in gauges.items():
            if values:
                rows += [(ws, path, signal, None, "min", min(values)),
                         (ws, path, signal, None, "mean", sum(values) / len(values)),
                         (ws, path, signal, None, "max", max(values))]
    out = pd.DataFrame(rows, columns=["window_start", "path", "signal", "le", "stat", "value"])
    buckets = out["le"].notna()
    env = out[buckets].sort_values("le")
    env["value"] = env.groupby(["window_start", "path", "signal"])["value"].cummax()
    return pd.concat([out[~buckets], env], ignore_index=True)


def _cells(cube: pd.DataFrame, stats: tuple[str, ...] = COMPARED) -> pd.Series:
    sel = cube[cube["stat"].isin(stats)].copy()
    sel["le"] = sel["le"].fillna(-1.0)
    return sel.set_index(["window_start", "path", "signal", "le", "stat"])["value"].sort_index()


# -- Prometheus --------------------------------------------------------------------------------------------
def test_pushdown_cube_is_promql_extrapolation_of_the_same_series(prom: Served) -> None:
    got = _cells(prom.cube(prom.pull()))
    want = _cells(oracle_cube(prom), COMPARED[:-1])
    counted = got.drop(index="replicas", level="stat")
    assert set(counted.index) == set(want.index)
    diff = (counted - want.reindex(counted.index)).abs()
    assert (diff <= 1e-9 * want.reindex(counted.index).abs().clip(lower=1.0)).all(), diff.sort_values().tail()
    # the store's gauges and replica counts are the file cube's; its counts are not (extrapolated)
    file = _cells(prom.cube(prom.file_id))
    for stat in ("min", "mean", "max", "replicas"):
        a, b = got.xs(stat, level="stat"), file.xs(stat, level="stat")
        pd.testing.assert_series_equal(a, b.reindex(a.index), check_exact=False, rtol=1e-12)
    counts = got.xs("count", level="stat")
    exact = file.xs("count", level="stat").reindex(counts.index)
    assert (counts != exact).mean() > 0.5  # extrapolation moves most windows' counts
    assert ((counts - exact).abs() / exact.clip(lower=1)).median() < 0.1


def test_by_series_sums_locally_to_the_store_sum(prom: Served) -> None:
    by_path = _cells(prom.cube(prom.pull("path")))
    by_series = prom.pull("series")
    local = _cells(prom.cube(by_series))
    # a window where a path's replicas were scraped once has no increase (PromQL needs two samples): by
    # path the replicas still show (a count_over_time), per series nothing of the path does
    assert set(local.index) <= set(by_path.index)
    only = by_path.index.difference(local.index)
    assert len(only) <= 4 and set(only.get_level_values("stat")) == {"replicas"}
    pd.testing.assert_series_equal(local, by_path.reindex(local.index), check_exact=False, rtol=1e-9)
    # per series, any path mapping can be built; by path, only the labels the store summed by
    per_replica = prom.cube(by_series, labels=["instance"])
    assert set(per_replica["path"]) == {"10.0.0.1:8000", "10.0.0.2:8000"}
    with pytest.raises(ValueError, match=r"summed in .* by model_name: it has no instance"):
        prom.cube(prom.pull("path"), labels=["instance"])


def test_a_cube_window_is_any_multiple_of_the_pulled_one(prom: Served) -> None:
    dataset_id = prom.pull()
    five = prom.cube(dataset_id)
    fifteen = prom.cube(dataset_id, window_s=900)
    sel = five[five["stat"].isin(["increase", "count", "sum"])].copy()
    sel["window_start"] = sel["window_start"].dt.floor("15min")
    want = sel.fillna({"le": -1.0}).groupby(["window_start", "path", "signal", "le", "stat"])["value"].sum()
    got = _cells(fifteen, ("count", "sum"))
    pd.testing.assert_series_equal(got, want.drop(index="increase", level="stat").reindex(got.index),
                                   check_exact=False, rtol=1e-12)
    with pytest.raises(ValueError, match="a multiple of 300 s"):
        prom.cube(dataset_id, window_s=420)
    with pytest.raises(ValueError, match="cannot share a cube with files"):
        ensure_cube(prom.ws, [dataset_id, prom.file_id], WINDOW, ["__model__"])


def test_report_on_the_pushdown_agrees_with_the_file_within_extrapolation(prom: Served, tmp_path: Path) -> None:
    """``headroom report --prometheus URL --pushdown``: every path's TTFT and TPOT share over the two
    hours is 1 - sum C(T) / sum N of the oracle's extrapolated counts (to 1e-9), and the report says its
    counts are extrapolated. Against the file's exact share it moved by up to 1.2 pp here (the batch
    path's TTFT at 0.5 s: 45.85 % against 44.64 %): increase() misses each window's first delta and
    clamps each bucket series at zero on its own, so the factors do not cancel in the ratio."""
    om = prom.om
    args = ["--start", str(E0), "--end", str(E0 + WHOLE), "--promise", "0.5/0.05", "--format", "json"]
    docs = []
    for source in (["--prometheus", prom.url, "--pushdown"], [str(om)]):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main(["report", *source, *args]) == 0
        doc = json.loads(out.getvalue())
        docs.append(({p["path"]: p for p in doc["paths"]}, doc["counts"]))
    (live, live_counts), (file, file_counts) = docs
    assert live_counts.startswith("extrapolated: PromQL increase() computed by the store (http://127.0.0.1:")
    assert file_counts == "exact: increases of the raw samples"
    assert live.keys() == file.keys() and len(live) == 2
    oracle = oracle_cube(prom)
    for path in live:
        for signal, threshold in (("ttft", 0.5), ("tpot", 0.05)):
            cells = oracle[(oracle["path"] == path) & (oracle["signal"] == signal) & (oracle["stat"] == "increase")]
            le = cells["le"].astype(float)
            n, c = cells["value"][le == math.inf].sum(), cells["value"][le == threshold].sum()
            assert live[path][signal]["share"] == pytest.approx(1 - c / n, abs=1e-9), (path, signal)
            assert abs(live[path][signal]["share"] - file[path][signal]["share"]) < 0.02, (path, signal)
        assert live[path]["requests"] != file[path]["requests"]


def test_tail_on_the_pushdown_says_its_counts_are_the_stores(prom: Served, tmp_path: Path) -> None:
    """``headroom tail --prometheus URL --pushdown`` runs on the pulled cube: the same paths as on the file,
    its TTFT shares the report's on the same pull, and it says the counts are extrapolated."""
    om = prom.om
    args = ["--start", str(E0), "--end", str(E0 + WHOLE), "--promise", "0.5/0.05", "--window", "5m", "--format", "json"]
    docs = {}
    for name, command, source in (("live", "tail", ["--prometheus", prom.url, "--pushdown"]), ("file", "tail", [str(om)]),
                                  ("report", "report", ["--prometheus", prom.url, "--pushdown"])):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main([command, *source, *args]) == 0
        docs[name] = json.loads(out.getvalue())
    assert docs["live"]["counts"].startswith("extrapolated: PromQL increase() computed by the store")
    assert docs["file"]["counts"] == "exact: increases of the raw samples"
    live = {a["path"]: a for a in docs["live"]["attribution"]}
    assert live.keys() == {a["path"] for a in docs["file"]["attribution"]} and len(live) == 2
    for p in docs["report"]["paths"]:
        assert live[p["path"]]["ttft_share"]["share"] == pytest.approx(p["ttft"]["share"], abs=1e-12)


def test_fetch_pushdown_keeps_one_dataset_per_pull(prom: Served, tmp_path: Path) -> None:
    db = tmp_path / "ws.duckdb"
    base = ["fetch", "--prometheus", prom.url, "--pushdown", "--start", str(E0), "--end", str(E0 + WHOLE),
            "--db", str(db), "--format", "json", "--quiet"]
    docs = []
    for _ in range(2):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main(base) == 0
        docs.append(json.loads(out.getvalue())["files"][0])
    assert [d["status"] for d in docs] == ["loaded", "unchanged"]
    assert docs[0]["format"] == "live" and docs[0]["engine"] == "vllm-v1"
    assert set(docs[0]["paths"]) >= {"llama-3.1-8b-interactive", "llama-3.1-8b-batch"}
    with Workspace(str(db)) as ws:
        assert len(ws.dataset_ids()) == 1
        ws.delete_dataset(ws.dataset_ids()[0])
        assert ws.cursor().execute("select count(*) from live_windows").fetchone()[0] == 0
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        assert cli.main([*base[:-3], "--out", str(tmp_path / "x.parquet")]) == 2
    assert "--pushdown keeps the pulled cube in the workspace" in err.getvalue()


def test_scenarios_on_a_pushdown_fit_the_scrapes_and_flag_the_demand(prom: Served, tmp_path: Path) -> None:
    """``headroom scenarios --prometheus URL --pushdown``: per-series windows for the cubes, the scalar
    series raw for the per-scrape fit. The engine config and the step-time fit come from the same raw
    scrapes as the file's (the fit's data is identical); the demand is the store's extrapolation, and
    every scenario carries the flag that says so."""
    om = prom.om
    args = ["--replicas", "2", "--seeds", "1", "--replica-hour-price", "10", "--breach-price", "0.01",
            "--promise", "0.5/0.05", "--format", "json", "--quiet"]
    docs = []
    for source in (["--prometheus", prom.url, "--pushdown", "--start", str(E0), "--end", str(E0 + WHOLE)], [str(om)]):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main(["scenarios", *source, *args]) == 0
        docs.append(json.loads(out.getvalue()))
    live, file = docs
    for key in ("kv_tokens", "block_size", "max_num_batched_tokens"):
        assert live["capacity_model"][key] == file["capacity_model"][key]
    assert live["capacity_model"]["fit"]["data"] == file["capacity_model"]["fit"]["data"]
    assert live["capacity_model"]["step_base_s"] == pytest.approx(file["capacity_model"]["step_base_s"], rel=0.01)
    pushed = [f for f in live["flags"] if "--pushdown" in f["message"]]
    assert len(pushed) == 1 and pushed[0]["widens_by"] == 0.1
    assert not any("--pushdown" in f["message"] for f in file["flags"])
    assert all(any("--pushdown" in f for f in row["flags"]) for row in live["scenarios"])


def test_the_data_pages_connect_pulls_by_pushdown(prom: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Data page's Connect, "Pushdown": the store's windows become a dataset of kind live, said so."""
    db = tmp_path / "ws.duckdb"
    with Workspace(str(db)) as ws:  # not empty: the dashboard does not load its bundled sample
        assert load.load_frame(ws, small_frame(["chat"], seed=3), "small").status == "loaded"
    monkeypatch.setenv("HEADROOM_DB", str(db))
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        with patch_config_options({"runner.enforceSerializableSessionState": False}):
            at = AppTest.from_file(str(Path(cli.__file__).parent / "streamlit_app.py"), default_timeout=60).run()
            at.switch_page("app_pages/data.py").run()
            at.text_input(key=state.LIVE_URL).set_value(prom.url)
            at.text_input(key=state.LIVE_START).set_value(str(E0))
            at.text_input(key=state.LIVE_END).set_value(str(E0 + WHOLE))
            at.radio(key=state.LIVE_MODE).set_value(data_view.READ_PUSHDOWN)
            at.button(key="FormSubmitter:connect_form-Read").click().run(timeout=120)
            assert not at.exception, at.exception
            shown = " ".join(w.value for w in at.warning) + " ".join(e.value for e in at.error)
            assert "live, engine vllm" in shown, shown
            assert "window values pulled" in shown and "pulled by PromQL" in shown
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
    with Workspace(str(db)) as ws:
        kinds = ws.datasets()["format"].tolist()
    assert kinds == ["frame", "live"]


# -- VictoriaMetrics ---------------------------------------------------------------------------------------
def test_victoriametrics_pushdown_is_the_exact_cube_but_first_windows(vm: Served) -> None:
    got = _cells(vm.cube(vm.pull()))
    file = _cells(vm.cube(vm.file_id))
    first = pd.Timestamp(E0, unit="s")  # every series' first sample lies in the first window
    assert set(got.index) == set(file.index)
    later = got.index.get_level_values("window_start") > first
    decimal = got.index.get_level_values("stat").isin(["sum", "min", "mean", "max"])
    a, b = got[later & ~decimal], file.reindex(got.index)[later & ~decimal]
    pd.testing.assert_series_equal(a, b, check_exact=True)
    a, b = got[later & decimal], file.reindex(got.index)[later & decimal]
    pd.testing.assert_series_equal(a, b, check_exact=False, rtol=1e-9)
    # in the first window MetricsQL counts each counter from zero; the file cube keeps the first
    # sample as the baseline
    head = ~later & got.index.get_level_values("stat").isin(["increase", "count"])
    assert (got[head] >= file.reindex(got.index)[head]).all() and (got[head] > file.reindex(got.index)[head]).any()

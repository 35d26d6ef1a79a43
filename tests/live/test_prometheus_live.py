"""Headroom against a real Prometheus holding the same data (the Debian ``prometheus``/``promtool``).

Two hours of a 2-path, 2-replica vLLM V1 fleet from the simulator (with its default events: replica 1
crashes at 00:48 and is ready at 00:52; nothing is scraped from 01:18:00 to 01:27:36) are written as
OpenMetrics, backfilled with ``promtool tsdb create-blocks-from openmetrics`` and served by a
``prometheus`` on 127.0.0.1. The same frame is loaded into Headroom. Each replica is scraped at its own
offset (4 s and 11 s past the 15 s grid), as Prometheus spreads targets, so no sample sits on a window
edge.

What the tests show, for TTFT and TPOT bucket bounds and ``_count`` of both paths:

- the backfill keeps every sample (so PromQL and Headroom read the same data);
- ``sum by (model_name) (increase(...[w]))`` is PromQL's ``extrapolatedRate`` of the raw samples
  (``tests/support/promql_oracle.py``, version-aware: 2.42 selects ``[T_s, T_e]`` and clamps at zero before
  the 1.1 x interval test; 3.x selects ``(T_s, T_e]`` and tests first) to 1e-9;
- per series, Headroom's window increase = the delta from the last sample before the window
  (``d0``) + the in-range increase, and PromQL = the in-range increase x (sampled + dStart + dEnd) /
  sampled; so Prometheus - Headroom = sum over series of ((factor - 1) x in-range - d0), to 1e-9,
  in plain windows, the crash windows and both sides of the scrape gap;
- Headroom's window breach share is exactly (N - C(T)) / N of its cube; over the whole export the
  PromQL share agrees within the bound set by the spread of the extrapolation factors.
"""

from __future__ import annotations

import io
import json
import math
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from app import cli, load
from app.cube import cube_frame, ensure_cube
from app.promise import rules
from app.promise.shares import Promise, shares
from app.store import Workspace
from tests.support import export_formats as ef
from tests.support.live_fleet import E0, PATHS, TPOT, TTFT, WHOLE, fleet_frame
from tests.support.promql_oracle import (
    PROMETHEUS_2,
    PROMETHEUS_3,
    Extrapolation,
    Semantics,
    extrapolate,
    in_range,
)
from tests.support.servers import free_port, need_prometheus, prometheus, running

pytestmark = pytest.mark.prometheus

SIGNAL = {TTFT: "ttft", TPOT: "tpot"}
# bucket bounds as the export spells them (prometheus_client's floatToGoString); None = `_count`
LES = {TTFT: ["0.25", "0.5", "1.0", "2.5", None], TPOT: ["0.025", "0.05", "0.1", None]}

# (window end in minutes after E0, window length in seconds): plain windows, the crash (replica 1's
# last samples at 00:47:56, first after the restart at 00:52:11), the scrape gap (last samples 01:17:xx,
# none in (01:20, 01:25], first after it 01:27:49 / 01:27:56), and 1 h windows
WINDOWS = [(10, 300), (30, 300), (50, 300), (55, 300), (80, 300), (85, 300), (90, 300), (120, 300),
           (60, 3600), (120, 3600)]
# the parts of the formula each special window must exercise (start/end: extrapolated by half an
# interval because the first/last sample is too far from the edge, or clamped at the counter's zero)
EXERCISES = {(50, 300): {"end avg/2"}, (55, 300): {"start zero-clamp"},
             (80, 300): {"end avg/2"}, (90, 300): {"start avg/2"}, (60, 3600): {"reset in range"}}


# -- the dataset ---------------------------------------------------------------------------------------
def _key(metric: str, labels: dict[str, str]) -> tuple:
    return (metric, tuple(sorted(labels.items())))


@dataclass
class Fleet:
    url: str
    semantics: Semantics
    points: dict[tuple, list[tuple[float, float]]]  # series -> [(unix s, value)] in time order
    resets: dict[tuple, set[float]]  # histogram label set -> scrape times where Headroom resets it
    ws: Workspace
    dataset_id: int
    openmetrics: Path
    cubes: dict[tuple[int, str], pd.DataFrame] = field(default_factory=dict)

    def cube(self, window_s: int, by: str) -> pd.DataFrame:
        """The cube by path (``model_name``) or by series (``model_name / instance``: one histogram
        label set each), built on first use."""
        if (window_s, by) not in self.cubes:
            labels = ["model_name"] if by == "path" else ["model_name", "instance"]
            cube_id = ensure_cube(self.ws, [self.dataset_id], window_s, labels)
            self.cubes[(window_s, by)] = cube_frame(self.ws, cube_id)
        return self.cubes[(window_s, by)]

    def query(self, expr: str, at: float) -> list[dict]:
        qs = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=30) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]


def _group(metric: str, labels: dict[str, str]) -> tuple:
    family = metric.rsplit("_", 1)[0]
    return (family, tuple(sorted((k, v) for k, v in labels.items() if k != "le")))


def _headroom_resets(points: dict[tuple, list[tuple[float, float]]]) -> dict[tuple, set[float]]:
    """Scrape times at which a histogram label set resets the way Headroom detects it (docs/methods.md#joint-resets): any bucket or ``_count`` decreases, or ``_created`` changes."""
    out: dict[tuple, set[float]] = defaultdict(set)
    for (metric, labels), pts in points.items():
        suffix = metric.rsplit("_", 1)[1]
        if suffix == "sum":
            continue
        group = _group(metric, dict(labels))
        for (_, prev), (t, cur) in zip(pts, pts[1:], strict=False):
            if (suffix == "created" and cur != prev) or (suffix != "created" and cur < prev):
                out[group].add(t)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    need_prometheus()
    tmp = tmp_path_factory.mktemp("prometheus")
    frame = fleet_frame()
    om = ef.write_openmetrics(frame, tmp / "fleet.om.txt")
    seconds = pd.DatetimeIndex(frame["ts"]).as_unit("ms").asi8 / 1000
    points: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for metric, labels, t, value in zip(frame["metric"], frame["labels"], seconds, frame["value"], strict=True):
        points[_key(metric, labels)].append((float(t), float(value)))
    for pts in points.values():
        pts.sort()
    with prometheus(tmp, om) as url, Workspace(":memory:") as ws:
        with urllib.request.urlopen(url + "/api/v1/status/buildinfo", timeout=10) as resp:
            version = json.load(resp)["data"]["version"]
        loaded = load.load_frame(ws, frame, "fleet")
        assert loaded.status == "loaded", loaded.errors
        yield Fleet(url=url, semantics=Semantics.for_version(version), points=dict(points),
                    resets=_headroom_resets(points), ws=ws, dataset_id=loaded.dataset_id, openmetrics=om)


# -- helpers -------------------------------------------------------------------------------------------
def _series_of(fleet: Fleet, family: str, le: str | None, path: str | None = None) -> list[tuple]:
    metric = f"{family}_bucket" if le is not None else f"{family}_count"
    out = []
    for key in fleet.points:
        labels = dict(key[1])
        if key[0] == metric and labels.get("le") == le and (path is None or labels["model_name"] == path):
            out.append(key)
    return sorted(out)


def _selector(family: str, le: str | None) -> str:
    return f'{family}_bucket{{le="{le}"}}' if le is not None else f"{family}_count"


def _cube_value(cube: pd.DataFrame, window_start: float, path: str, family: str, le: str | None) -> float:
    """A cube cell; 0 when the cube has no row (no sample of the path in that window)."""
    ws = pd.Timestamp(window_start, unit="s")
    sel = cube[(cube.window_start == ws) & (cube.path == path) & (cube.signal == SIGNAL[family])]
    if le is None:
        sel = sel[sel.stat == "count"]
    else:
        sel = sel[(sel.stat == "increase") & (sel["le"] == float(le))]
    assert len(sel) <= 1
    return float(sel.value.iloc[0]) if len(sel) else 0.0


def _headroom_parts(fleet: Fleet, key: tuple, start: float, end: float) -> tuple[float, float]:
    """(d0, in-range) of one series in the window (start, end] under Headroom's rules: d0 is the delta
    from the last sample before the window to the first inside it, the in-range part the sum of the
    deltas between samples inside it; a reset of the label set takes the new value."""
    pts = fleet.points[key]
    resets = fleet.resets.get(_group(key[0], dict(key[1])), set())
    inside = [i for i, (t, _) in enumerate(pts) if start < t <= end]
    if not inside:
        return 0.0, 0.0

    def delta(i: int) -> float:
        return pts[i][1] if pts[i][0] in resets else pts[i][1] - pts[i - 1][1]

    first = inside[0]
    d0 = delta(first) if first > 0 else 0.0  # a series' first sample is a baseline
    return d0, sum(delta(i) for i in inside[1:])


def _formula_parts(pts: list[tuple[float, float]], start: float, end: float, semantics: Semantics,
                   ex: Extrapolation) -> set[str]:
    """Which special cases of extrapolatedRate one series went through."""
    sel = in_range(pts, start, end, semantics)
    avg = ex.sampled / (ex.n - 1)
    out = set()
    if sel[0][0] - start >= 1.1 * avg and ex.d_start == avg / 2:
        out.add("start avg/2")
    elif ex.d_start < sel[0][0] - start:
        out.add("start zero-clamp")
    if end - sel[-1][0] >= 1.1 * avg:
        out.add("end avg/2")
    if any(b < a for (_, a), (_, b) in zip(sel, sel[1:], strict=False)):
        out.add("reset in range")
    return out


# -- tests ---------------------------------------------------------------------------------------------
def test_oracle_reproduces_the_methods_vectors() -> None:
    """The oracle itself (docs/methods.md#promql-increase) on four cases (3.x) and the 2.x reading of the last."""
    tv = {
        "TV-2.1": ([(5, 10), (20, 25), (35, 4), (50, 19)], 45.33333333333333),
        "TV-2.2": ([(10, 1), (25, 16), (40, 31), (55, 46)], 51.0),
        "TV-2.3": ([(30, 100), (45, 130)], 75.0),
    }
    for name, (pts, expected) in tv.items():
        got = extrapolate(pts, 0, 60, PROMETHEUS_3)
        assert got is not None and math.isclose(got.increase, expected, rel_tol=1e-12), name
    tv24 = [(0, 100), (15, 110), (30, 130), (45, 131), (60, 150), (75, 5), (90, 20), (105, 20), (120, 41)]
    assert math.isclose(extrapolate(tv24, 0, 60, PROMETHEUS_3).increase, 53.33333333333333, rel_tol=1e-12)
    assert math.isclose(extrapolate(tv24, 60, 120, PROMETHEUS_3).increase, 41.0, rel_tol=1e-12)
    # 2.x: the sample on the left edge is in the range, so no extrapolation at all
    assert extrapolate(tv24, 0, 60, PROMETHEUS_2).increase == 50.0
    # 2.x clamps at the counter's zero before the 1.1 x interval test, 3.x after it (dStart = 30 >= 16.5)
    pts = [(30, 2), (45, 17), (60, 32)]  # dZero = 30 * 2 / 30 = 2: both extrapolate to the zero point
    assert extrapolate(pts, 0, 60, PROMETHEUS_2).d_start == 2.0
    assert extrapolate(pts, 0, 60, PROMETHEUS_3).d_start == 2.0
    pts = [(30, 12), (45, 17), (60, 22)]  # dZero = 30 * 12 / 10 = 36: no clamp, half an interval
    assert extrapolate(pts, 0, 60, PROMETHEUS_2).d_start == 7.5
    pts = [(30, 5), (45, 10), (60, 15)]  # dZero = 15, under the threshold: 2.x keeps 15, 3.x has 7.5
    assert extrapolate(pts, 0, 60, PROMETHEUS_2).d_start == 15.0
    assert extrapolate(pts, 0, 60, PROMETHEUS_3).d_start == 7.5


def test_openmetrics_file_is_what_promtool_needs(fleet: Fleet) -> None:
    """The OpenMetrics pitfalls of a backfill: `# EOF`, LF only, seconds timestamps, MetricPoints
    together (timestamps never go backwards within a label set; promtool drops such samples
    silently)."""
    text = fleet.openmetrics.read_bytes().decode()
    assert text.endswith("\n# EOF\n") and "\r" not in text
    last: dict[tuple, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        body, _, ts = line.rpartition(" ")
        name, _, labels = body.partition("{")
        stamp = float(ts)
        assert 1.7e9 < stamp < 2.0e9  # seconds, not milliseconds
        group = (name.rsplit("_", 1)[0], ",".join(p for p in labels.split(",") if not p.startswith("le=")))
        assert stamp >= last.get(group, 0.0), line
        last[group] = stamp


def test_backfill_keeps_every_sample(fleet: Fleet) -> None:
    end = E0 + WHOLE
    got: dict[tuple, list[tuple[float, float]]] = {}
    for family in (TTFT, TPOT):
        for series in fleet.query(f'{{__name__=~"{family}_(bucket|count|sum|created)"}}[{WHOLE + 60}s]', end):
            metric = dict(series["metric"])
            name = metric.pop("__name__")
            got[_key(name, metric)] = [(float(t), float(v)) for t, v in series["values"]]
    assert got.keys() == fleet.points.keys() and len(got) == 2 * 2 * (26 + 23)
    for key, pts in fleet.points.items():
        assert got[key] == pts, key
    # and no sample sits on a window edge, so 2.x's closed and 3.x's left-open ranges select the same
    assert all(round(t) % 300 for pts in fleet.points.values() for t, _ in pts)


@pytest.mark.parametrize(("end_min", "window_s"), WINDOWS)
def test_promql_increase_is_extrapolated_rate_of_headroom_increases(fleet: Fleet, end_min: int, window_s: int) -> None:
    end = E0 + 60 * end_min
    start = end - window_s
    path_cube = fleet.cube(window_s, "path")
    series_cube = fleet.cube(window_s, "series")
    checked = extrapolated = 0
    exercised: set[str] = set()
    for family, les in LES.items():
        for le in les:
            promql = {r["metric"]["model_name"]: float(r["value"][1]) for r in fleet.query(
                f"sum by (model_name) (increase({_selector(family, le)}[{window_s}s]))", end)}
            raw = {(r["metric"]["model_name"], r["metric"]["instance"]): [(float(t), float(v)) for t, v in r["values"]]
                   for r in fleet.query(f"{_selector(family, le)}[{window_s}s]", end)}
            for path in PATHS:
                expected, explained, headroom = 0.0, 0.0, 0.0
                parts: list[Extrapolation] = []
                for key in _series_of(fleet, family, le, path):
                    instance = dict(key[1])["instance"]
                    pts = fleet.points[key]
                    # the range Prometheus selected is the one the oracle selects
                    assert raw.get((path, instance), []) == in_range(pts, start, end, fleet.semantics)
                    ex = extrapolate(pts, start, end, fleet.semantics)
                    d0, inside = _headroom_parts(fleet, key, start, end)
                    h_series = _cube_value(series_cube, start, f"{path} / {instance}", family, le)
                    # Headroom's per-series window increase: the delta into the window + the in-range one
                    assert h_series == d0 + inside, (key, end_min)
                    headroom += h_series
                    if ex is None:
                        continue
                    parts.append(ex)
                    exercised |= _formula_parts(pts, start, end, fleet.semantics, ex)
                    # every reset inside the range is visible per series here, so PromQL's in-range
                    # increase is Headroom's in-range part ...
                    assert ex.result == inside, (key, end_min)
                    expected += ex.increase
                    # ... and PromQL = (Headroom - d0) x (sampled + dStart + dEnd) / sampled
                    explained += (h_series - d0) * ex.factor
                assert _cube_value(path_cube, start, path, family, le) == headroom
                if not parts:  # no series with two samples in the range: PromQL has no result
                    assert path not in promql and headroom == 0.0
                    continue
                assert math.isclose(promql[path], expected, rel_tol=1e-9), (path, family, le, end_min)
                assert math.isclose(promql[path], explained, rel_tol=1e-9)
                checked += 1
                extrapolated += any(p.factor != 1.0 for p in parts) and promql[path] != headroom
    assert EXERCISES.get((end_min, window_s), set()) <= exercised
    if end_min == 85:  # inside the scrape gap: no sample at all, in Prometheus or in Headroom
        assert checked == 0
    else:  # 2 paths x (5 TTFT + 4 TPOT series sets), each extrapolated: PromQL's increase is not Headroom's
        assert checked == 18 and extrapolated >= 1


def test_window_shares_are_exact_bucket_ratios(fleet: Fleet) -> None:
    """Headroom's breach share of a window is (N - C(T)) / N of its cube, for every bucket bound."""
    cube_id = ensure_cube(fleet.ws, None, 300, ["model_name"])
    cube = fleet.cube(300, "path")
    start, end = pd.Timestamp(E0, unit="s"), pd.Timestamp(E0 + WHOLE, unit="s")
    compared = 0
    for ttft, tpot in (("0.25", "0.025"), ("0.5", "0.05"), ("1.0", "0.1"), ("2.5", "0.025")):
        promises = [Promise(path=p, ttft_s=float(ttft), tpot_s=float(tpot)) for p in PATHS]
        frame = shares(fleet.ws, cube_id, promises, start, end, by_window=True)
        for row in frame.itertuples():
            w = pd.Timestamp(row.window_start).timestamp()
            for family, le, share, exact in ((TTFT, ttft, row.ttft_share, row.ttft_exact),
                                             (TPOT, tpot, row.tpot_share, row.tpot_exact)):
                n = _cube_value(cube, w, row.path, family, "+Inf")
                c = _cube_value(cube, w, row.path, family, le)
                if n == 0:
                    assert share is None or math.isnan(share)
                    continue
                assert exact and share == (n - c) / n, (row.path, family, le, row.window_start)
                compared += 1
    assert compared > 300


def test_whole_export_share_agrees_with_promql(fleet: Fleet) -> None:
    """Over the whole export extrapolation barely matters: every series' factor is within
    [f_lo, f_hi] with f_hi / f_lo - 1 < 0.5 %, so C_P / N_P = sum f C_s / sum f N_s lies within
    [C_H f_lo / (N_H f_hi), C_H f_hi / (N_H f_lo)] of Headroom's exact counts (no reset is missed
    per series here, which the test checks)."""
    end = E0 + WHOLE
    cube_id = ensure_cube(fleet.ws, None, 300, ["model_name"])
    start_ts, end_ts = pd.Timestamp(E0, unit="s"), pd.Timestamp(end, unit="s")
    for family, les in LES.items():
        n_promql = {r["metric"]["model_name"]: float(r["value"][1]) for r in fleet.query(
            f"sum by (model_name) (increase({family}_count[{WHOLE}s]))", end)}
        for le in les[:-1]:
            c_promql = {r["metric"]["model_name"]: float(r["value"][1]) for r in fleet.query(
                f'sum by (model_name) (increase({family}_bucket{{le="{le}"}}[{WHOLE}s]))', end)}
            promise = [Promise(ttft_s=float(le))] if family == TTFT else [Promise(tpot_s=float(le))]
            frame = shares(fleet.ws, cube_id, promise, start_ts, end_ts).set_index("path")
            for path in PATHS:
                factors, n_h, c_h = [], 0.0, 0.0
                for which, total in ((None, "n"), (le, "c")):
                    for key in _series_of(fleet, family, which, path):
                        ex = extrapolate(fleet.points[key], E0, end, fleet.semantics)
                        d0, inside = _headroom_parts(fleet, key, E0, end)
                        assert d0 == 0.0 and ex.result == inside  # no reset missed per series
                        factors.append(ex.factor)
                        if total == "n":
                            n_h += inside
                        else:
                            c_h += inside
                f_lo, f_hi = min(factors), max(factors)
                assert 1.0 <= f_lo and f_hi / f_lo - 1 < 0.005
                share_h = frame.loc[path, f"{SIGNAL[family]}_share"]
                assert share_h == (n_h - c_h) / n_h
                share_p = (n_promql[path] - c_promql[path]) / n_promql[path]
                low = 1 - c_h * f_hi / (n_h * f_lo)
                high = 1 - c_h * f_lo / (n_h * f_hi)
                assert low - 1e-12 <= share_p <= high + 1e-12, (path, family, le, share_p, share_h)
                assert abs(share_p - share_h) < 0.005


# -- the promise as rules ----------------------------------------------------------------------------
def test_the_rules_evaluate_to_the_breach_ratios(fleet: Fleet) -> None:
    """Each recording rule's expression, evaluated by Prometheus at a window's end, is PromQL's
    extrapolated breach ratio of the raw samples (the oracle) to 1e-9, and Headroom's exact share of
    the same hour within the extrapolation's reach (0.5 pp)."""
    plan = rules.plan([Promise(path=p, ttft_s=0.5, tpot_s=0.05) for p in PATHS], bounds={
        "ttft": [float(x) for x in LES[TTFT][:-1]], "tpot": [float(x) for x in LES[TPOT][:-1]]})
    cube_id = ensure_cube(fleet.ws, None, 300, ["model_name"])
    compared = 0
    for end in (E0 + 3600, E0 + 7200):
        start = end - 3600
        frame = shares(fleet.ws, cube_id, [Promise(path=p, ttft_s=0.5, tpot_s=0.05) for p in PATHS],
                       pd.Timestamp(start, unit="s"), pd.Timestamp(end, unit="s")).set_index("path")
        for promise, ths, match in plan.promises:
            for th in ths:
                got = fleet.query(rules.ratio_expr(th, "model_name", match, "1h"), end)
                assert [r["metric"] for r in got] == [{"model_name": promise.path}]
                value = float(got[0]["value"][1])
                family, le = th.family, repr(th.bound)
                n = sum(extrapolate(fleet.points[k], start, end, fleet.semantics).result
                        for k in _series_of(fleet, family, None, promise.path))
                c = sum(extrapolate(fleet.points[k], start, end, fleet.semantics).result
                        for k in _series_of(fleet, family, le, promise.path))
                assert value == pytest.approx((n - c) / n, abs=1e-9), (promise.path, th.signal, end)
                headroom = frame.loc[promise.path, f"{th.signal}_share"]
                assert abs(value - headroom) < 0.005, (promise.path, th.signal, value, headroom)
                compared += 1
    assert compared == 8


def test_prometheus_loads_the_rules_and_evaluates_them(tmp_path: Path) -> None:
    """The rules file in a Prometheus' rule_files (evaluation every second): every rule healthy."""
    need_prometheus()
    text = rules.to_yaml(rules.plan([Promise(path=PATHS[0], ttft_s=0.5, tpot_s=0.05), Promise(ttft_s=2.5)]))
    (tmp_path / "rules.yml").write_text(text)
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 15s\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                  f"--web.listen-address=127.0.0.1:{port}"], tmp_path / "prometheus.log", url + "/-/ready",
                 timeout_s=30) as proc:
        deadline = time.monotonic() + 30
        while True:  # ready, then every rule evaluated once
            with urllib.request.urlopen(url + "/api/v1/rules", timeout=5) as resp:
                groups = json.load(resp)["data"]["groups"]
            evaluated = [r for g in groups for r in g["rules"] if r.get("lastEvaluation", "").startswith("20")]
            if groups and len(evaluated) == sum(len(g["rules"]) for g in groups):
                break
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.2)
    all_rules = [r for g in groups for r in g["rules"]]
    assert len(all_rules) == 7 * 4 + 6 + 7 * 3 + 6  # the TTFT-only promise has one ratio per window
    assert {r["health"] for r in all_rules} == {"ok"}, [r.get("lastError") for r in all_rules]


# -- reading the store live ----------------------------------------------------------------------------
def test_the_raw_samples_read_live_give_the_file_cube_exactly(fleet: Fleet, tmp_path: Path) -> None:
    """``headroom fetch`` (raw samples, chunked by the hour: not evaluated, not extrapolated) then a load
    gives the cube of the same data loaded from the file, cell for cell, at 5-minute and 1-minute windows."""
    out = tmp_path / "live.parquet"
    rc = cli.main(["fetch", "--prometheus", fleet.url, "--start", str(E0 - 60), "--end", str(E0 + WHOLE),
                   "--chunk", "1h", "--out", str(out), "--quiet"])
    assert rc == 0
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, out)
        assert report.status == "loaded", report.errors
        assert report.samples == sum(len(p) for p in fleet.points.values())
        for window_s in (300, 60):
            live_cube = cube_frame(ws, ensure_cube(ws, [report.dataset_id], window_s, ["model_name"]))
            file_cube = fleet.cube(window_s, "path")
            pd.testing.assert_frame_equal(live_cube.reset_index(drop=True), file_cube.reset_index(drop=True),
                                          check_exact=True)


def test_headroom_report_on_the_live_store_equals_the_report_on_the_file(fleet: Fleet) -> None:
    """``headroom report --prometheus URL`` prints what ``headroom report FILE`` prints on the same data."""
    args = ["--start", pd.Timestamp(E0, unit="s").isoformat(), "--end", pd.Timestamp(E0 + WHOLE, unit="s").isoformat(),
            "--promise", "0.5/0.05", "--format", "json"]
    docs = []
    for source in (["--prometheus", fleet.url], [str(fleet.openmetrics)]):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main(["report", *source, *args]) == 0
        doc = json.loads(out.getvalue())
        docs.append({k: v for k, v in doc.items() if k != "datasets"})
    assert docs[0] == docs[1]
    assert docs[0]["paths"] and all(p["requests"] > 0 for p in docs[0]["paths"])


def test_headroom_tail_on_the_live_store_equals_the_tail_on_the_file(fleet: Fleet) -> None:
    """``headroom tail --prometheus URL`` prints what ``headroom tail FILE`` prints on the same data."""
    args = ["--start", pd.Timestamp(E0, unit="s").isoformat(), "--end", pd.Timestamp(E0 + WHOLE, unit="s").isoformat(),
            "--promise", "0.5/0.05", "--format", "json"]
    docs = []
    for source in (["--prometheus", fleet.url], [str(fleet.openmetrics)]):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            assert cli.main(["tail", *source, *args]) == 0
        doc = json.loads(out.getvalue())
        docs.append({k: v for k, v in doc.items() if k != "datasets"})
    assert docs[0] == docs[1]
    assert docs[0]["attribution"] and all(a["requests"] > 0 for a in docs[0]["attribution"])


def test_discovery_names_the_engine_families_and_path_labels(fleet: Fleet) -> None:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert cli.main(["fetch", "--prometheus", fleet.url, "--discover", "--start", str(E0),
                         "--end", str(E0 + WHOLE)]) == 0
    found = json.loads(out.getvalue())
    assert found["engines"] == ["vllm"] and found["families"] == sorted([TTFT, TPOT])
    assert found["path_labels"] == {"model_name": sorted(PATHS)}  # instance, engine and le are not path labels

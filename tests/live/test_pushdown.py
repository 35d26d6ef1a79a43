"""Pushdown without a server: the PromQL a pull issues, the window grid, and a hand-made pull kept as a
dataset of kind ``live`` whose cube is computed by hand (sums by path, the bucket envelope, gauges
across replicas, replicas from the presence rows, window multiples, the refusals), and the pages on it.
The same code against a real Prometheus and VictoriaMetrics: ``tests/live/test_pushdown_live.py``."""

from __future__ import annotations

import gc
import json
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.util import patch_config_options

from app.cube import cube_frame, ensure_cube, pulled_by_store
from app.live import pushdown
from app.live.client import Store
from app.load import load_frame
from app.store import Workspace
from tests.support import scripted_store as scripted
from tests.support.paths import ROOT
from tests.support.small_export import frame as small_frame

TTFT = "vllm:time_to_first_token_seconds"
T0 = datetime(2026, 11, 17, 0, 0)


def test_plan_sums_by_the_path_labels_and_keeps_rule_labels() -> None:
    names = [f"{TTFT}_bucket", f"{TTFT}_count", f"{TTFT}_sum", f"{TTFT}_created", "vllm:request_success_total",
             "vllm:num_requests_waiting", "vllm:cache_config_info", "unrelated_metric"]
    by_path = {(q.metric, q.stat): q.expr for q in pushdown.plan(names, ["model_name"], 300, "path", '{job="vllm"}')}
    sel = '{job="vllm"}'
    assert by_path[(f"{TTFT}_bucket", "increase")] == \
        f"sum by (le, model_name) (increase({TTFT}_bucket{sel}[300s]))"
    assert by_path[(f"{TTFT}_count", "increase")] == f"sum by (model_name) (increase({TTFT}_count{sel}[300s]))"
    # request_success's signal rules match on finished_reason: the sum keeps it
    assert by_path[("vllm:request_success_total", "increase")] == \
        f"sum by (model_name, finished_reason) (increase(vllm:request_success_total{sel}[300s]))"
    replica = "model_name, instance, pod, WorkerId, engine, dp_rank"
    assert by_path[("vllm:num_requests_waiting", "gauge_sum")] == \
        f"sum by ({replica}) (sum_over_time(vllm:num_requests_waiting{sel}[300s]))"
    assert by_path[("vllm:num_requests_waiting", "gauge_min")].startswith("min by (")
    assert by_path[(f"{TTFT}_count", "present")] == f"count by ({replica}) (count_over_time({TTFT}_count{sel}[300s]))"
    # `_created`, info series and unknown metrics are not windowed
    assert {m for m, _ in by_path} == {f"{TTFT}_bucket", f"{TTFT}_count", f"{TTFT}_sum", "vllm:request_success_total",
                                       "vllm:num_requests_waiting"}
    per_series = {(q.metric, q.stat): q.expr for q in pushdown.plan(names, [], 60, "series")}
    assert per_series[(f"{TTFT}_bucket", "increase")] == f"increase({TTFT}_bucket[60s])"
    assert per_series[("vllm:num_requests_waiting", "gauge_max")] == "max_over_time(vllm:num_requests_waiting[60s])"
    assert not any(stat == "present" for _, stat in per_series)


def test_window_ends_are_the_cube_grid() -> None:
    e0 = datetime(2026, 11, 17, tzinfo=UTC).timestamp()
    start, end = datetime.fromtimestamp(e0 + 7, UTC), datetime.fromtimestamp(e0 + 603, UTC)
    assert pushdown.window_ends(start, end, 300) == [e0 + 300, e0 + 600, e0 + 900]
    assert pushdown.window_ends(datetime.fromtimestamp(e0, UTC), datetime.fromtimestamp(e0 + 600, UTC), 300) == \
        [e0 + 300, e0 + 600]


def test_model_label_resolves_to_what_the_series_carry() -> None:
    assert pushdown.resolve_labels(["__model__"], {"model": ["a"], "tenant": ["x"]}) == ["model"]
    assert pushdown.resolve_labels(["__model__", "tenant"], {"model_name": ["a"], "tenant": ["x"]}) == \
        ["model_name", "tenant"]
    with pytest.raises(pushdown.LiveError, match="no series carries a model label"):
        pushdown.resolve_labels(["__model__"], {"tenant": ["x"]})
    with pytest.raises(pushdown.LiveError, match="not a Prometheus label name"):
        pushdown.resolve_labels(['a"b'], {})


def _rows() -> pd.DataFrame:
    """Two 5-minute windows of a path `chat` on two replicas, as a pull by path returns them."""
    def lab(**kw: str) -> str:
        return json.dumps(kw, sort_keys=True)

    w1, w2 = pd.Timestamp(T0), pd.Timestamp(T0) + pd.Timedelta(minutes=5)
    rows = []
    for w, (c025, c05, inf, total, s) in ((w1, (9, 8, 10, 10, 4.0)), (w2, (2, 6, 9, 9, 3.5))):
        rows += [(f"{TTFT}_bucket", lab(le="0.25", model_name="chat"), w, "increase", c025),
                 (f"{TTFT}_bucket", lab(le="0.5", model_name="chat"), w, "increase", c05),
                 (f"{TTFT}_bucket", lab(le="+Inf", model_name="chat"), w, "increase", inf),
                 (f"{TTFT}_count", lab(model_name="chat"), w, "increase", total),
                 (f"{TTFT}_sum", lab(model_name="chat"), w, "increase", s),
                 ("vllm:request_success_total", lab(finished_reason="abort", model_name="chat"), w, "increase",
                  1.0 if w == w1 else 0.0),
                 ("vllm:request_success_total", lab(finished_reason="stop", model_name="chat"), w, "increase",
                  total - (1.0 if w == w1 else 0.0))]
        for inst, (lo, tot, n, hi) in (("a:8000", (0, 6, 20, 2)), ("b:8000", (1, 14, 20, 3))):
            labels = lab(instance=inst, model_name="chat")
            rows += [("vllm:num_requests_waiting", labels, w, "gauge_min", lo),
                     ("vllm:num_requests_waiting", labels, w, "gauge_sum", tot),
                     ("vllm:num_requests_waiting", labels, w, "gauge_n", n),
                     ("vllm:num_requests_waiting", labels, w, "gauge_max", hi),
                     (f"{TTFT}_count", labels, w, "present", 20)]
    return pd.DataFrame(rows, columns=["metric", "labels", "window_start", "stat", "value"])


def _keep(ws: Workspace, window_s: int = 300) -> int:
    """``_rows`` staged as a store's answers would be (one answer per metric and statistic), then kept."""
    with closing(ws.cursor()) as con:
        staging = pushdown.Staging(con)
        for (metric, stat), part in _rows().groupby(["metric", "stat"], sort=False):
            answer = [{"metric": json.loads(labels), "values": [
                [(w - pd.Timestamp(0)).total_seconds() + window_s, str(v)] for w, v in zip(
                    series["window_start"], series["value"], strict=True)]}
                for labels, series in part.groupby("labels", sort=False)]
            staging.windows(pushdown.PullQuery(metric, "", "", stat, ""), answer, window_s)
        pulled = pushdown.Pulled(staged=con, rows=staging.rows, value_sum=staging.value_sum, queries=9,
                                 labels=["model_name"], requested=["__model__"], notes=["pulled by PromQL (test)"],
                                 store_labels=["instance", "model_name", "engine"])
        t0 = datetime(2026, 11, 17, tzinfo=UTC)
        report = pushdown.store_pulled(ws, pulled, Store(url="http://store:9090"), t0,
                                       t0.replace(minute=10), window_s, "path", None)
    assert report.status == "loaded", report.errors
    assert report.samples == len(_rows())
    return int(report.dataset_id)


def _cell(cube: pd.DataFrame, minute: int, signal: str | None, stat: str, le: float | None = None) -> float:
    sel = cube[(cube["window_start"] == pd.Timestamp(T0) + pd.Timedelta(minutes=minute)) & (cube["stat"] == stat)]
    sel = sel[sel["signal"].isna()] if signal is None else sel[sel["signal"] == signal]
    if le is not None:
        sel = sel[sel["le"] == le]
    assert len(sel) == 1, sel
    return float(sel["value"].iloc[0])


def test_a_kept_pull_makes_the_cube_by_hand() -> None:
    with Workspace(":memory:") as ws:
        dataset_id = _keep(ws)
        assert ws.datasets().set_index("dataset_id").loc[dataset_id, "format"] == "live"
        five = cube_frame(ws, ensure_cube(ws, [dataset_id], 300, ["__model__"]))
        assert set(five["path"]) == {"chat"}
        # buckets: the running max over le (0.25 rose 9 while 0.5 rose 8: raised, and counted)
        assert [_cell(five, 0, "ttft", "increase", le) for le in (0.25, 0.5, float("inf"))] == [9, 9, 10]
        assert _cell(five, 0, "ttft", "repairs") == 1
        assert [_cell(five, 5, "ttft", "increase", le) for le in (0.25, 0.5, float("inf"))] == [2, 6, 9]
        assert (_cell(five, 0, "ttft", "count"), _cell(five, 0, "ttft", "sum")) == (10, 4.0)
        assert (_cell(five, 0, "requests", "increase"), _cell(five, 0, "failed_requests", "increase")) == (10, 1)
        # gauges across the replicas: min of mins, sum of sums over sum of counts, max of maxes
        assert (_cell(five, 0, "waiting", "min"), _cell(five, 0, "waiting", "mean"),
                _cell(five, 0, "waiting", "max")) == (0, 0.5, 3)
        assert _cell(five, 0, None, "replicas") == 2  # the presence rows name the replicas; the sums name none
        # a 10-minute cube holds both windows
        ten = cube_frame(ws, ensure_cube(ws, [dataset_id], 600, ["__model__"]))
        assert [_cell(ten, 0, "ttft", "increase", le) for le in (0.25, 0.5, float("inf"))] == [11, 14, 19]
        assert (_cell(ten, 0, "ttft", "count"), _cell(ten, 0, "ttft", "sum")) == (19, 7.5)
        assert _cell(ten, 0, "waiting", "mean") == 0.5 and _cell(ten, 0, None, "replicas") == 2
        assert pulled_by_store(ws, ensure_cube(ws, [dataset_id], 300, ["__model__"])) == [
            {"url": "http://store:9090", "window_s": 300, "by": "path"}]
        # what it cannot make, said
        with pytest.raises(ValueError, match="needs a multiple of 300 s"):
            ensure_cube(ws, [dataset_id], 420, ["__model__"])
        with pytest.raises(ValueError, match="summed in http://store:9090 by model_name: it has no instance"):
            ensure_cube(ws, [dataset_id], 300, ["instance"])
        file = load_frame(ws, small_frame(["chat"], seed=1), "file")
        with pytest.raises(ValueError, match="cannot share a cube with files"):
            ensure_cube(ws, [dataset_id, int(file.dataset_id)], 300, ["__model__"])
        # a delete takes its windows and pull record with it, and the file's series stay
        ws.delete_dataset(dataset_id)
        left = ws.cursor().execute("select (select count(*) from live_windows), (select count(*) from live_pulls), "
                                   "(select count(*) from series)").fetchone()
        assert left[:2] == (0, 0) and left[2] > 0


@pytest.fixture
def live_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "live.duckdb"
    monkeypatch.setenv("HEADROOM_DB", str(db))
    st.cache_data.clear()
    st.cache_resource.clear()
    with patch_config_options({"runner.enforceSerializableSessionState": False}):
        yield db
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.mark.parametrize(("window_s", "says"), [
    (300, "PromQL increase() computed by the store (pushdown)"),
    (600, "needs a multiple of 600 s (not 300 s)"),
])
def test_the_promise_page_says_where_the_counts_come_from(live_db: Path, window_s: int, says: str) -> None:
    with Workspace(live_db) as ws:
        _keep(ws, window_s)
    at = AppTest.from_file(str(ROOT / "app" / "streamlit_app.py"), default_timeout=30).run()
    at.switch_page("app_pages/promise.py").run()
    assert not at.exception, at.exception
    shown = [w.value for w in at.warning] + [e.value for e in at.error]
    assert any(says in text.replace("\\", "") for text in shown), shown


# -- a pull from a scripted store: the dataset the earlier code kept, one answer held at a time ------------
SCRIPTED_T0 = datetime(2026, 11, 17, 0, 0, 7, tzinfo=UTC)
SCRIPTED_T1 = datetime(2026, 11, 17, 1, 3, tzinfo=UTC)


@pytest.mark.parametrize("by", ["path", "series"])
def test_a_pull_keeps_the_dataset_the_earlier_code_kept(by: str) -> None:
    """The fixture holds what the code before the pull was staged in DuckDB kept from the same answers
    (its windows and raw samples, its report and digest): three chunks per query, NaN and +Inf dropped,
    millisecond times."""
    expected = json.loads((ROOT / "tests" / "fixtures" / "live" / "scripted_pull.json").read_text())[by]
    client = scripted.ScriptedClient()
    with Workspace(":memory:") as ws, closing(ws.cursor()) as con:
        pulled = pushdown.pull(client, con, SCRIPTED_T0, SCRIPTED_T1, 300, ["__model__"], by=by, chunk_s=1800,
                               raw_scalars=True)
        report = pushdown.store_pulled(ws, pulled, client.store, SCRIPTED_T0, SCRIPTED_T1, 300, by, None)
        got = scripted.dataset_content(ws.con, int(report.dataset_id))
        digest = ws.con.execute("select digest from datasets").fetchone()[0]
    assert got["windows"] == expected["windows"]
    assert got["samples"] == expected["samples"]
    assert {k: getattr(report, k) for k in expected["report"]} == expected["report"]
    assert digest == expected["digest"]
    assert "NaN or infinite value(s) the store returned were dropped" in report.notes[1]


def test_a_pull_stages_each_answer_before_asking_for_the_next() -> None:
    """Memory bounded by one answer: at every request the rows of all earlier answers are in DuckDB
    already, and no earlier answer is still held (at most the one just staged, until it is replaced)."""
    seen: list[tuple[str, int, int, int]] = []

    def check(kind: str) -> None:
        gc.collect()
        staged = [con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("live_pulled", "live_raw")]
        assert staged == [client.given["range"], client.given["raw"]], (kind, staged, client.given)
        alive = sum(1 for ref in client.answers if ref() is not None)
        assert alive <= 1, (kind, alive)
        seen.append((kind, *staged, alive))

    client = scripted.ScriptedClient(before_request=check)
    with Workspace(":memory:") as ws, closing(ws.cursor()) as con:
        pulled = pushdown.pull(client, con, SCRIPTED_T0, SCRIPTED_T1, 300, ["__model__"], chunk_s=1800,
                               raw_scalars=True)
        check("end")
    assert pulled.rows == client.given["range"] and pulled.raw == client.given["raw"] > 0
    kinds = [k for k, *_ in seen]
    assert kinds.count("range") == 13 * 3 and kinds.count("raw") == 2  # 13 queries x 3 chunks, 2 hours raw
    assert seen[-2][1] == pulled.rows  # the raw reads came after every window was staged


def test_a_pull_of_nothing_but_nan_is_refused() -> None:
    class NaNStore(scripted.ScriptedClient):
        def query_range(self, expr: str, start: float, end: float, step_s: int) -> list:
            return [{"metric": {"model_name": "chat"}, "values": [[start, "NaN"], [end, "+Inf"]]}]

    with Workspace(":memory:") as ws, closing(ws.cursor()) as con, \
            pytest.raises(pushdown.LiveError, match="no window of the serving metrics"):
        pushdown.pull(NaNStore(), con, SCRIPTED_T0, SCRIPTED_T1, 300, ["__model__"], chunk_s=1800)

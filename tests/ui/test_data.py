"""The Data page's view logic (``app.ui.data``), without Streamlit: path rules, labels, the load report's
rows, the sample, data health."""

from __future__ import annotations

import pytest

from app.cube import ensure_cube
from app.load import LoadReport
from app.store import Workspace
from app.ui import data as data_view
from tests.conftest import histogram, load

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"


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

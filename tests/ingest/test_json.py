"""Prometheus API JSON, VictoriaMetrics JSON lines and AIPerf server-metrics readers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb

from app import load
from app.ingest import open_source, stage
from app.ingest.base import Staged
from app.store import Workspace

T = 1764410400  # 2025-11-29T10:00:00Z


def staged_rows(path: Path) -> tuple[list[tuple], Staged, list[tuple]]:
    """(metric, sorted labels, value, epoch µs, src_line) rows, the Staged, and stage_families rows."""
    con = duckdb.connect()
    with open_source(path) as src:
        info = stage(con, src, check=False)  # what the reader parsed, before the checks
    rows = con.execute(
        "select k.metric, map_entries(k.labels), p.value, epoch_us(p.ts), p.src_line "
        "from stage_points p join stage_keys k using (series_key) order by k.metric, p.ts, p.value"
    ).fetchall()
    out = [(m, tuple(sorted((e["key"], e["value"]) for e in labels)), v, us, line) for m, labels, v, us, line in rows]
    return out, info, sorted(con.execute("select * from stage_families").fetchall())


def test_query_range_matrix_values_are_strings_with_nan_and_inf(tmp_path: Path) -> None:
    path = tmp_path / "range.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "vllm:x_bucket", "engine": "0", "le": "0.5", "model_name": "m"},
         "values": [[T, "612"], [T + 15.5, "NaN"]]},
        {"metric": {"__name__": "vllm:y"}, "values": [[T, "+Inf"], [T + 15, "-Inf"], [T + 30, "1e-3"]]},
    ]}, "warnings": ["ignored"]}))
    rows, info, families = staged_rows(path)
    labels = (("engine", "0"), ("le", "0.5"), ("model_name", "m"))
    assert [r[:2] + (r[3], r[4]) for r in rows] == [
        ("vllm:x_bucket", labels, T * 10**6, 1), ("vllm:x_bucket", labels, (T + 15) * 10**6 + 500_000, 1),
        ("vllm:y", (), T * 10**6, 2), ("vllm:y", (), (T + 15) * 10**6, 2), ("vllm:y", (), (T + 30) * 10**6, 2)]
    assert rows[0][2] == 612.0 and math.isnan(rows[1][2])
    assert [r[2] for r in rows[2:]] == [math.inf, -math.inf, 0.001]
    assert (info.format, info.time_source, families) == ("prometheus-api-json", "samples", [])


def test_array_of_vector_responses_meets_the_same_series(tmp_path: Path) -> None:
    path = tmp_path / "instant.json"
    path.write_text(json.dumps([
        {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "a", "x": "1", "b": "2"}, "value": [T, "1"]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"b": "2", "__name__": "a", "x": "1"}, "value": [T + 15, "2"]}]}},
    ]))
    con = duckdb.connect()
    with open_source(path) as src:
        stage(con, src)
    assert con.execute("select count(*) from stage_keys").fetchone()[0] == 1
    assert con.execute("select list(value order by ts) from stage_points").fetchone()[0] == [1.0, 2.0]


def test_bare_result_list_as_prometheus_api_client_returns_it(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps([{"metric": {"__name__": "a"}, "values": [[T, "3"]]},
                                {"metric": {"__name__": "b"}, "value": [T, "4"]}]))
    rows, info, _ = staged_rows(path)
    assert [(r[0], r[2]) for r in rows] == [("a", 3.0), ("b", 4.0)]
    assert info.format == "prometheus-api-json"


def test_native_histograms_are_skipped_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "nh.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "rpc_seconds", "job": "api"}, "histograms": [[T, {"count": "3", "sum": "1.5"}]]},
        {"metric": {"__name__": "up", "job": "api"}, "values": [[T, "1"]]},
    ]}}))
    rows, info, _ = staged_rows(path)
    assert [(r[0], r[2]) for r in rows] == [("up", 1.0)]
    assert info.notes == ['skipped native histogram samples (not supported) of 1 series: rpc_seconds{job="api"}']


def test_victoriametrics_export(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(
        json.dumps({"metric": {"__name__": "vllm:num_requests_running", "engine": "0"},
                    "values": [3, 4.5, "NaN"], "timestamps": [T * 1000, T * 1000 + 15000, T * 1000 + 30001]}) + "\n"
        + json.dumps({"metric": {"__name__": "b"}, "values": [1e6], "timestamps": [T * 1000]}) + "\n")
    rows, info, _ = staged_rows(path)
    assert [(r[0], r[2], r[3], r[4]) for r in rows[:3]] == [
        ("b", 1e6, T * 10**6, 2),
        ("vllm:num_requests_running", 3.0, T * 10**6, 1),
        ("vllm:num_requests_running", 4.5, (T + 15) * 10**6, 1),
    ]
    assert math.isnan(rows[3][2]) and rows[3][3] == T * 10**6 + 30_001_000
    assert info.format == "victoriametrics-jsonl"


def aiperf_line(ts_s: int, metrics: dict, url: str = "http://10.0.0.5:8000/metrics") -> str:
    return json.dumps({"endpoint_url": url, "timestamp_ns": ts_s * 10**9, "endpoint_latency_ns": 1000,
                       "metrics": metrics}) + "\n"


def test_aiperf_histograms_counters_and_instance(tmp_path: Path) -> None:
    labels = {"engine": "0", "model_name": "m"}
    path = tmp_path / "server_metrics_export.jsonl"
    path.write_text(
        aiperf_line(T, {
            "vllm:num_requests_running": [{"labels": labels, "value": 3.0}],
            "vllm:prompt_tokens": [{"labels": labels, "value": 100.0}],  # counter named without _total
            "vllm:generation_tokens_total": [{"labels": labels, "value": 50.0}],
            "vllm:time_to_first_token_seconds": [
                {"labels": labels, "buckets": {"0.1": 1.0, "0.5": 3.0}, "sum": 0.9, "count": 4.0}],
            "nan_gauge": [{"labels": None, "value": None}],
            "pinned": [{"labels": {"instance": "own:1"}, "value": 7.0}],
        })
        + aiperf_line(T + 15, {
            "dynamo_x_seconds": [{"labels": {"a": "b"}, "histogram": {"0.005": 0.0, "+Inf": 2.0}, "sum": 1.0,
                                  "count": 2.0}],
        }, url="https://user@worker-a:9000/metrics?x=1"))
    rows, info, families = staged_rows(path)
    inst = ("instance", "10.0.0.5:8000")
    base = (("engine", "0"), inst, ("model_name", "m"))
    got = {(m, lab): (v, us, line) for m, lab, v, us, line in rows}
    assert got[("vllm:num_requests_running", base)] == (3.0, T * 10**6, 1)
    assert got[("vllm:prompt_tokens", base)] == (100.0, T * 10**6, 1)
    assert got[("vllm:generation_tokens_total", base)] == (50.0, T * 10**6, 1)
    hist = "vllm:time_to_first_token_seconds"
    assert got[(hist + "_bucket", (("engine", "0"), inst, ("le", "0.1"), ("model_name", "m")))][0] == 1.0
    assert got[(hist + "_bucket", (("engine", "0"), inst, ("le", "0.5"), ("model_name", "m")))][0] == 3.0
    assert got[(hist + "_bucket", (("engine", "0"), inst, ("le", "+Inf"), ("model_name", "m")))][0] == 4.0
    assert got[(hist + "_count", base)][0] == 4.0 and got[(hist + "_sum", base)][0] == 0.9
    assert got[("pinned", (("instance", "own:1"),))][0] == 7.0  # the entry's own instance wins
    dyn = (("a", "b"), ("instance", "worker-a:9000"))
    assert got[("dynamo_x_seconds_bucket", (*dyn[:1], dyn[1], ("le", "+Inf")))] == (2.0, (T + 15) * 10**6, 2)
    assert len([r for r in rows if r[0] == "dynamo_x_seconds_bucket"]) == 2  # +Inf present: not added twice
    assert not any(r[0] == "nan_gauge" for r in rows)
    assert info.notes == ["skipped 1 entries with a null value (NaN or Inf in AIPerf's JSON)"]
    assert families == [("dynamo_x_seconds", "histogram", None), (hist, "histogram", None)]


def test_aiperf_counters_with_and_without_total_give_the_same_signal(tmp_path: Path) -> None:
    labels = {"engine": "0", "model_name": "m"}
    for name in ("vllm:prompt_tokens", "vllm:prompt_tokens_total"):
        path = tmp_path / f"{name.replace(':', '_')}.jsonl"
        path.write_text("".join(aiperf_line(T + 15 * i, {name: [{"labels": labels, "value": 100.0 * i}]})
                                for i in range(3)))
        with Workspace(":memory:") as ws:
            report = load.load_file(ws, path)
        assert report.status == "loaded" and report.engine == "vllm-v1"
        assert report.signals == ["prompt_tokens_total"]

"""Format detection reads the content, never the file name."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from app import load
from app.ingest import open_source
from app.ingest.base import IngestError
from app.ingest.detect import detect
from app.store import Workspace
from tests.support import export_formats as ef

FRAME = pd.DataFrame({
    "metric": ["vllm:num_requests_running", "vllm:prompt_tokens_total"],
    "labels": [{"engine": "0", "model_name": "m", "instance": "h:1"}] * 2,
    "ts": [datetime(2026, 11, 29, 10, tzinfo=UTC)] * 2,
    "value": [3.0, 120.0],
})

# (writer, the format it must be detected as); every file gets a misleading name
WRITERS = [
    (lambda p: ef.write_prometheus_text(FRAME, p), "prometheus-text"),
    (lambda p: ef.write_openmetrics(FRAME, p), "openmetrics"),
    (lambda p: ef.write_prom_api_matrix(FRAME, p), "prometheus-api-json"),
    (lambda p: ef.write_prom_api_vectors(FRAME, p), "prometheus-api-json"),
    (lambda p: ef.write_vm_jsonl(FRAME, p), "victoriametrics-jsonl"),
    (lambda p: ef.write_promtool_dump(FRAME, p), "promtool-dump"),
    (lambda p: ef.write_csv(FRAME, p), "csv"),
    (lambda p: ef.write_parquet(FRAME, p), "parquet"),
    (lambda p: ef.write_aiperf_jsonl(FRAME, p), "aiperf-server-metrics"),
]
MISLEADING = ["data.txt", "data.prom", "data.json", "data.csv", "data.parquet", "noextension"]


def detected(path: Path) -> str:
    with open_source(path) as src:
        return detect(src)


@pytest.mark.parametrize(("index", "misleading"), [(i, MISLEADING[i % len(MISLEADING)]) for i in range(len(WRITERS))])
def test_detected_from_content_whatever_the_name(tmp_path: Path, index: int, misleading: str) -> None:
    write, fmt = WRITERS[index]
    path = write(tmp_path / misleading)
    assert detected(path) == fmt
    renamed = path.rename(tmp_path / "metrics.parquet.json.prom")
    assert detected(renamed) == fmt
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, renamed)
    assert (report.status, report.format, report.samples) == ("loaded", fmt, 2)


def test_gzip_detected_by_magic_bytes_and_content(tmp_path: Path) -> None:
    inner = ef.write_vm_jsonl(FRAME, tmp_path / "x.csv")
    packed = ef.gzip_file(inner, tmp_path / "export.prom")  # gzip named .prom
    assert detected(packed) == "victoriametrics-jsonl"
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, packed)
    assert (report.status, report.format, report.gzip) == ("loaded", "victoriametrics-jsonl", True)


def test_openmetrics_detected_by_eof_at_the_end_of_a_large_file(tmp_path: Path) -> None:
    lines = [f'x{{i="{i}"}} {i} 1764410400' for i in range(20000)]
    path = tmp_path / "big"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    assert path.stat().st_size > 65536
    assert detected(path) == "openmetrics"


@pytest.mark.parametrize(("text", "fmt"), [
    ("# Fixture captured from SGLang v0.5.10\n# HELP a x\n# TYPE a gauge\na 1\n", "prometheus-text"),
    ("a_total 5\n", "prometheus-text"),
    ('a{b="c"} +Inf\n', "prometheus-text"),
    ("# TYPE a gaugehistogram\n", "openmetrics"),
    ('{__name__="a", b="c"} 1 1764410400000\n', "promtool-dump"),
    ('[{"metric":{"__name__":"a"},"values":[[1764410400,"1"]]}]', "prometheus-api-json"),
    ('{\n  "status": "success",\n  "data": {"resultType": "vector", "result": []}\n}\n', "prometheus-api-json"),
    ("sep=;\nTime;metric;value\n1;a;2\n", "csv"),
    ("ts\tname\tvalue\n1\ta\t2\n", "csv"),
])
def test_detection_of_shapes(tmp_path: Path, text: str, fmt: str) -> None:
    path = tmp_path / "f"
    path.write_text(text)
    assert detected(path) == fmt


def test_per_request_jsonl_is_not_taken_for_server_metrics(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"endpoint_url": "http://h:1/metrics", "timestamp_ns": 1, "metrics": {}}) + "\n")
    assert detected(path) == "aiperf-server-metrics"


@pytest.mark.parametrize(("data", "looks"), [
    (b"Dear diary, the GPUs were hot.\n", "its first line is 'Dear diary, the GPUs were hot.'"),
    (b'{"hello": "world"}\n', "its first line is '{\"hello\": \"world\"}'"),
    (b"\x00\x01\x02binary\xff\xfe", "binary data (not text, JSON, CSV or Parquet)"),
])
def test_unrecognised_content_says_what_it_looks_like(tmp_path: Path, data: bytes, looks: str) -> None:
    path = tmp_path / "metrics.prom"
    path.write_bytes(data)
    with pytest.raises(IngestError) as info:
        detected(path)
    message = str(info.value)
    assert message.startswith(f"metrics.prom: unrecognised format: {looks}. Supported: ")
    for fmt in ("OpenMetrics", "Prometheus API JSON", "VictoriaMetrics", "promtool tsdb dump", "CSV/Parquet", "AIPerf"):
        assert fmt in message


def test_victoriametrics_series_longer_than_the_detection_window(tmp_path: Path) -> None:
    n = 20_000
    path = tmp_path / "export"
    path.write_text(json.dumps({"metric": {"__name__": "a"}, "values": [1.5] * n,
                                "timestamps": [1764410400000 + 15000 * i for i in range(n)]}) + "\n")
    assert path.stat().st_size > 65536
    assert detected(path) == "victoriametrics-jsonl"

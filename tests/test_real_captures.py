"""Every real /metrics capture loads and its engine, signals and unknown metrics are recognised."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from app import load
from app.store import Workspace

REAL = Path(__file__).resolve().parent / "fixtures" / "real"  # copied unchanged, see SOURCES.md

EXPECTED = {
    "vllm-v0-opt125m-datadog.prom": ("vllm-v0", {
        "ttft", "itl", "e2e", "prompt_tokens", "generation_tokens", "running", "waiting", "kv_usage",
        "preemptions", "requests", "prompt_tokens_total", "generation_tokens_total", "kv_config"}),
    # (no failed_requests: this capture's request_success_total has only finished_reason stop/length)
    "vllm-docs-design-metrics-excerpt.prom": ("vllm-v0", {
        "running", "generation_tokens_total", "requests", "failed_requests", "ttft"}),
    "nim-llm-llama31-8b-datadog.prom": ("nim", {
        "ttft", "itl", "e2e", "prompt_tokens", "generation_tokens", "running", "waiting", "kv_usage",
        "max_running", "requests", "failed_requests", "prompt_tokens_total", "generation_tokens_total"}),
    "sglang-v0.5.10-abridged-datadog.prom": ("sglang", {
        "ttft", "itl", "e2e", "queue", "prompt_tokens", "generation_tokens", "running", "waiting", "kv_usage",
        "requests", "prompt_tokens_total", "generation_tokens_total", "kv_capacity_tokens"}),
    "triton-trtllm-readme-base-metrics.prom": ("triton", {"requests", "failed_requests", "waiting"}),
    "trtllm-backend-readme-inflight-batcher.prom": ("trtllm", {"running", "waiting", "max_running", "kv_usage"}),
    "trtllm-backend-readme-v1-model.prom": (None, set()),
    "dcgm-exporter-t4-mixed-datadog.prom": ("dcgm", {"gpu_util"}),
}

# a few metrics of each capture that no engine row maps (they must be listed, not dropped)
UNKNOWN = {
    "vllm-v0-opt125m-datadog.prom": {"vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc", "python_gc_collections"},
    "nim-llm-llama31-8b-datadog.prom": {"process_cpu_seconds", "process_start_time_seconds"},
    "sglang-v0.5.10-abridged-datadog.prom": {"sglang:cache_hit_rate", "sglang:gen_throughput"},
    "triton-trtllm-readme-base-metrics.prom": {"nv_inference_count", "nv_inference_queue_duration_us"},
    "trtllm-backend-readme-inflight-batcher.prom": {"nv_trt_llm_runtime_memory_metrics"},
    "trtllm-backend-readme-v1-model.prom": {"nv_trt_llm_v1_metrics"},
    "dcgm-exporter-t4-mixed-datadog.prom": {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"},
    "vllm-docs-design-metrics-excerpt.prom": set(),
}


def test_every_capture_is_covered() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in REAL.glob("*.prom"))


def _sample_lines(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.strip() and not ln.startswith("#") and ln.strip() != "...")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_loads_with_engine_and_signals(name: str, tmp_path: Path) -> None:
    path = shutil.copy(REAL / name, tmp_path / name)
    engine, signals = EXPECTED[name]
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, Path(path))
    assert report.status == "loaded", report.errors
    assert report.format == "prometheus-text"
    assert report.engine == engine
    assert set(report.signals) == signals
    assert UNKNOWN[name] <= set(report.unknown_metrics)
    # plus one +Inf bucket per histogram whose +Inf line the capture left out (its _count stands in)
    repaired = sum(int(m[1]) for n in report.notes if (m := re.match(r"(\d+) histogram\(s\) have no \+Inf bucket: "
                                                                     r"their _count is used", n)))
    assert report.samples == _sample_lines((REAL / name).read_text()) + repaired
    # a single curl of /metrics: no sample timestamps, no time in the name, so the file's mtime
    assert report.time_source == "mtime" and report.snapshot


def test_opt125m_capture_values(tmp_path: Path) -> None:
    """Spot-check parsed values against the file: one TTFT request, process start 2024-06-11."""
    path = shutil.copy(REAL / "vllm-v0-opt125m-datadog.prom", tmp_path / "capture.prom")
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, Path(path))
        rows = dict(ws.con.execute(
            "select s.metric || coalesce('{le=' || (s.labels['le']) || '}', ''), p.value from samples p "
            "join series s using (series_id) where s.family = 'vllm:time_to_first_token_seconds'").fetchall())
    assert rows["vllm:time_to_first_token_seconds_count"] == 1.0
    assert rows["vllm:time_to_first_token_seconds_bucket{le=+Inf}"] == 1.0
    assert abs(rows["vllm:time_to_first_token_seconds_sum"] - 0.313) < 0.001
    assert "single snapshot: counters and histograms are increases since the server started at 2024-06-11T21:15:58.300000Z" in report.notes


def test_abbreviated_docs_excerpt_skips_ellipsis_lines_with_a_note(tmp_path: Path) -> None:
    path = shutil.copy(REAL / "vllm-docs-design-metrics-excerpt.prom", tmp_path / "excerpt.prom")
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, Path(path))
    assert "skipped 3 line(s) holding only `...` (an abbreviated paste): line(s) 4, 8, 14" in report.notes
    assert report.paths == ["meta-llama/Llama-3.1-8B-Instruct"]

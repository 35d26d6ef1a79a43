"""Every real /metrics capture loads and its engine, signals and unknown metrics are recognised."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from app import load
from app.store import Workspace
from tests.support.paths import FIXTURES, REAL

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
        "requests", "prompt_tokens_total", "generation_tokens_total", "kv_capacity_tokens",
        "prompt_tokens_cached_total"}),
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


# -- exports whose engine hides behind a prefix or a label other than model_name ----------------
CONSTRUCTED = FIXTURES / "constructed"  # written, see its SOURCES.md


def _load(name: str, tmp_path: Path, ws: Workspace, folder: Path = CONSTRUCTED) -> load.LoadReport:
    report = load.load_file(ws, Path(shutil.copy(folder / name, tmp_path / name)))
    assert report.status == "loaded", report.errors
    return report


def _series(ws: Workspace, dataset_id: int, column: str, signal: str) -> set[str]:
    """The distinct ``column`` (path, replica) of the dataset's series of ``signal``, mapped as its cube
    maps them (``signals__series`` with the workspace's path labels)."""
    load.sql.materialize(ws.con, "signals__series", "probe_series", dataset_ids=[dataset_id],
                         path_labels=ws.path_labels())
    assert column in ("path", "replica")
    rows = ws.con.execute(f"select distinct {column} from probe_series where signal = $s", {"s": signal}).fetchall()
    ws.con.execute("drop table probe_series")
    return {r[0] for r in rows}


def test_ray_serve_llm_capture_is_vllm_under_the_ray_prefix(tmp_path: Path) -> None:
    with Workspace(":memory:") as ws:
        report = _load("ray-serve-llm-vllm-v1.prom", tmp_path, ws)
        replicas = _series(ws, report.dataset_id, "replica", "running")
        kv = ws.con.execute(
            "select count(*), min(kv_tokens) from (" + load.sql.get("capacity__kv_config").sql + ")",
            {"dataset_ids": [report.dataset_id]}).fetchone()
    assert report.engine == "vllm-v1"
    assert {"ttft", "itl", "e2e", "queue", "running", "waiting", "kv_usage", "requests", "failed_requests",
            "preemptions", "prompt_tokens_total", "generation_tokens_total", "kv_config"} == set(report.signals)
    assert "recognised 12 vllm metric families under the re-export prefix 'ray_' " \
           "(ray_vllm:cache_config_info read as vllm:cache_config_info)" in report.notes
    # the engine-wide cache_config_info takes its replica's path: no `(none)`
    assert report.paths == ["meta-llama/Llama-3.1-8B-Instruct"]
    # Ray's own metrics are no engine's, and stay listed; the engine's are not
    assert {"ray_serve_num_http_requests", "python_gc_collections"} <= set(report.unknown_metrics)
    assert not [m for m in report.unknown_metrics if m.startswith("ray_vllm:")]
    assert len(replicas) == 2  # two Ray workers, each engine "0": told apart by WorkerId
    assert kv == (2, 27713 * 16)


def test_triton_models_are_paths_by_its_model_label(tmp_path: Path) -> None:
    with Workspace(":memory:") as ws:
        report = _load("triton-8-models.prom", tmp_path, ws)
        gpu_paths = _series(ws, report.dataset_id, "path", "gpu_util")
        real = _load("triton-trtllm-readme-base-metrics.prom", tmp_path, ws, folder=REAL)
    assert report.engine == "triton" and len(report.paths) == 8 and "(none)" not in report.paths
    assert {"llama31_8b_trtllm", "reranker_onnx"} <= set(report.paths)
    assert gpu_paths == set(report.paths)  # the GPU every model runs on: its gauge in each path
    assert real.paths == ["tensorrt_llm"]


def test_an_explicit_path_mapping_wins_over_the_engines_model_label(tmp_path: Path) -> None:
    with Workspace(":memory:") as ws:
        ws.set_paths(["model_name"])
        report = _load("triton-8-models.prom", tmp_path, ws)
        assert report.paths == ["(none)"]  # what the user asked for: Triton has no model_name
        ws.set_paths(["model", "version"])
        from app.cube import ensure_cube
        cube_id = ensure_cube(ws, [report.dataset_id], 300)
        paths = {r[0] for r in ws.con.execute("select distinct path from cube_rows where cube_id = $c",
                                              {"c": cube_id}).fetchall()}
    assert "llama31_8b_trtllm / 1" in paths and "(none)" not in paths


def test_the_model_label_stands_beside_other_path_labels() -> None:
    from tests.conftest import load as load_rows
    from tests.conftest import samples
    with Workspace(":memory:") as ws:
        ids = [load_rows(ws, samples("vllm:num_requests_running", {"model_name": "chat", "instance": "a"},
                                     [(0, 1), (60, 2)]), name="a"),
               load_rows(ws, samples("nv_inference_pending_request_count", {"model": "rank", "instance": "b"},
                                     [(0, 1), (60, 2)]), name="b")]
        load.sql.materialize(ws.con, "signals__series", "probe", dataset_ids=ids,
                             path_labels=["__model__", "instance"])
        paths = sorted(r[0] for r in ws.con.execute("select path from probe").fetchall())
    assert paths == ["chat / a", "rank / b"]


def test_a_known_name_inside_another_engines_name_is_not_a_prefix() -> None:
    """`vllm:request_max_num_generation_tokens` ends in NIM's `generation_tokens`, but one generic name
    under a prefix is not a re-export; two are (`foo_prompt_tokens`, `foo_generation_tokens`)."""
    from tests.conftest import load as load_rows
    from tests.conftest import samples
    with Workspace(":memory:") as ws:
        one = load_rows(ws, samples("vllm:request_max_num_generation_tokens_total", {"model_name": "m"},
                                    [(0, 1), (60, 2)]), name="one")
        load.sql.materialize(ws.con, "signals__series", "probe", dataset_ids=[one], path_labels=["__model__"])
        assert ws.con.execute("select count(*) from probe").fetchone()[0] == 0
        two = load_rows(ws, samples("foo_prompt_tokens_total", {"model_name": "m"}, [(0, 1), (60, 2)])
                        + samples("foo_generation_tokens_total", {"model_name": "m"}, [(0, 1), (60, 2)]), name="two")
        load.sql.materialize(ws.con, "signals__series", "probe", dataset_ids=[two], path_labels=["__model__"])
        got = ws.con.execute("select signal, prefix from probe order by 1").fetchall()
    assert got == [("generation_tokens_total", "foo_"), ("prompt_tokens_total", "foo_")]


def test_engine_wide_series_of_a_capture_take_its_model_path(tmp_path: Path) -> None:
    with Workspace(":memory:") as ws:
        report = _load("vllm-v0-opt125m-datadog.prom", tmp_path, ws, folder=REAL)
        kv_paths = _series(ws, report.dataset_id, "path", "kv_config")
    assert report.paths == ["facebook/opt-125m"] and kv_paths == {"facebook/opt-125m"}

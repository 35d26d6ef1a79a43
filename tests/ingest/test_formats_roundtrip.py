"""One generated vLLM-V1-like source written in every supported format loads into the identical cube.

The source: two replicas (instances) × two model_name paths, 40 scrapes at 15 s; a TTFT histogram,
a prompt-token counter and a running-requests gauge; replica 2 restarts half way (counter reset).
Each format is loaded into a fresh in-memory Workspace and its cube (5-minute windows) must equal
the cube of the frame loaded directly, exactly. Observations are multiples of 1/1024 s, so every sum
the cube takes is exact in binary floating point whatever order DuckDB adds in parallel.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from app import load
from app.cube import cube_frame, ensure_cube
from app.store import Workspace
from tests.support import export_formats as ef

START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
BOUNDS = ["0.1", "0.5", "1.0", "2.5", "+Inf"]
INSTANCES = ["10.0.0.1:8000", "10.0.0.2:8000"]
MODELS = ["chat", "batch"]
SCRAPES = 28
RESET_AT = 17  # replica 2 restarts before this scrape


def vllm_frame(seed: int = 7) -> pd.DataFrame:
    """Cumulative vLLM V1 series: histogram, counter, gauge; replica 2's counters restart at RESET_AT."""
    rng = random.Random(seed)
    rows = []
    for instance in INSTANCES:
        for model in MODELS:
            base = {"engine": "0", "instance": instance, "job": "vllm", "model_name": model}
            buckets, total, prompt = [0] * len(BOUNDS), 0.0, 0
            for i in range(SCRAPES):
                if instance == INSTANCES[1] and i == RESET_AT:
                    buckets, total, prompt = [0] * len(BOUNDS), 0.0, 0
                ts = START + timedelta(seconds=15 * i)
                for _ in range(rng.randint(0, 6)):
                    ttft = round(rng.lognormvariate(-1.0, 0.9) * 1024) / 1024
                    total += ttft
                    for j, bound in enumerate(BOUNDS):
                        if bound == "+Inf" or ttft <= float(bound):
                            buckets[j] += 1
                    prompt += rng.randint(20, 900)
                for bound, count in zip(BOUNDS, buckets, strict=True):
                    rows.append(("vllm:time_to_first_token_seconds_bucket", {**base, "le": bound}, ts, float(count)))
                rows.append(("vllm:time_to_first_token_seconds_count", base, ts, float(buckets[-1])))
                rows.append(("vllm:time_to_first_token_seconds_sum", base, ts, total))
                rows.append(("vllm:prompt_tokens_total", base, ts, float(prompt)))
                rows.append(("vllm:num_requests_running", base, ts, float(rng.randint(0, 12))))
    return pd.DataFrame(rows, columns=["metric", "labels", "ts", "value"])


FRAME = vllm_frame()


def cube_of(paths: list[Path]) -> pd.DataFrame:
    with Workspace(":memory:") as ws:
        reports = load.load_files(ws, paths)
        assert all(r.status == "loaded" for r in reports), [r.errors for r in reports]
        return cube_frame(ws, ensure_cube(ws, window_s=300))


@pytest.fixture(scope="module")
def reference_cube() -> pd.DataFrame:
    with Workspace(":memory:") as ws:
        report = load.load_frame(ws, FRAME, "frame")
        assert report.status == "loaded" and report.engine == "vllm-v1"
        cube = cube_frame(ws, ensure_cube(ws, window_s=300))
    # the cube must hold what the test is about: both paths, the histogram, the reset
    assert set(cube["path"]) == set(MODELS)
    assert {"ttft", "prompt_tokens_total", "running"} <= set(cube["signal"].dropna())
    assert cube.loc[cube["stat"] == "resets", "value"].sum() > 0
    return cube


def _write(kind: str, tmp: Path) -> list[Path]:
    if kind == "text-ms":
        return [ef.write_prometheus_text(FRAME, tmp / "a.prom")]
    if kind == "openmetrics":
        return [ef.write_openmetrics(FRAME, tmp / "a.txt")]
    if kind == "api-matrix":
        return [ef.write_prom_api_matrix(FRAME, tmp / "range.json")]
    if kind == "api-vectors":
        return [ef.write_prom_api_vectors(FRAME, tmp / "instant.json")]
    if kind == "vm-jsonl":
        return [ef.write_vm_jsonl(FRAME, tmp / "export.jsonl")]
    if kind == "promtool-dump":
        return [ef.write_promtool_dump(FRAME, tmp / "dump.txt")]
    if kind == "csv":
        return [ef.write_csv(FRAME, tmp / "long.csv")]
    if kind == "csv-columns-epoch-ms":
        return [ef.write_csv(FRAME, tmp / "long.csv", label_columns=True, time_format="ms")]
    if kind == "parquet":
        return [ef.write_parquet(FRAME, tmp / "long.parquet")]
    if kind == "parquet-columns":
        return [ef.write_parquet(FRAME, tmp / "long.parquet", label_columns=True)]
    if kind == "aiperf":
        return [ef.write_aiperf_jsonl(FRAME, tmp / "server_metrics_export.jsonl")]
    if kind == "aiperf-bare-counters":
        return [ef.write_aiperf_jsonl(FRAME, tmp / "server_metrics_export.jsonl", bare_counter_names=True,
                                      bucket_key="histogram")]
    if kind == "gzip-openmetrics":
        return [ef.gzip_file(ef.write_openmetrics(FRAME, tmp / "a.txt"))]
    if kind == "snapshot-dir":
        return ef.write_snapshot_dir(FRAME, tmp / "scrapes")
    raise AssertionError(kind)


KINDS = [
    "text-ms", "openmetrics", "api-matrix", "api-vectors", "vm-jsonl", "promtool-dump", "csv",
    "csv-columns-epoch-ms", "parquet", "parquet-columns", "aiperf", "aiperf-bare-counters",
    "gzip-openmetrics", pytest.param("snapshot-dir", marks=pytest.mark.slow),  # a file per scrape
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_format_gives_the_identical_cube(kind: str, tmp_path: Path, reference_cube: pd.DataFrame) -> None:
    cube = cube_of(_write(kind, tmp_path))
    pd.testing.assert_frame_equal(cube, reference_cube, check_exact=True)


def test_snapshot_dir_takes_times_from_file_names(tmp_path: Path) -> None:
    paths = ef.write_snapshot_dir(FRAME, tmp_path / "scrapes")
    assert len(paths) == SCRAPES
    with Workspace(":memory:") as ws:
        first = load.load_file(ws, paths[0])
        assert first.time_source == "filename"
        assert first.start == "2026-11-29T10:00:00Z" and first.snapshot
        assert "no sample timestamps: time 2026-11-29T10:00:00Z taken from the file name" in first.notes


def test_gzip_is_reported_and_read_by_content(tmp_path: Path) -> None:
    path = ef.gzip_file(ef.write_prometheus_text(FRAME, tmp_path / "a.prom"), tmp_path / "metrics.bin")
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path)
    assert (report.status, report.format, report.gzip) == ("loaded", "prometheus-text", True)
    assert report.samples == len(FRAME)


def test_go_g_matches_promtool_number_format() -> None:
    assert [ef.go_g(v) for v in (612.0, 0.25, 1e6, 1234567.0, 100000.0, 1e-05, float("nan"), float("-inf"))] == [
        "612", "0.25", "1e+06", "1.234567e+06", "100000", "1e-05", "NaN", "-Inf"]

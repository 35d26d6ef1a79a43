"""A ``vllm bench serve --save-detailed`` result loads in memory that follows its records, not its size:
the per-token gaps and generated texts (most of such a file) are skipped by ``app.ingest.jsonscan``
and never parsed. A 1 GB result (docs/input-formats.md#per-request-records) is the measured case; here
a small one checks the records, and two files of the same records, one ten times the other's size,
check the loader's peak memory does not grow with the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app import load
from app.store import Workspace
from tests.support import genai_perf, vllm_bench
from tests.support.paths import ROOT as REPO

_PEAK = """
import json, resource, sys
from pathlib import Path
from app import load
from app.store import Workspace
with Workspace(":memory:") as ws:
    r = load.load_file(ws, Path(sys.argv[1]))
print(json.dumps({"status": r.status, "samples": r.samples, "errors": r.errors,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


@pytest.mark.parametrize("latencies", [False, True], ids=["upstream-gaps", "fork-latencies"])
def test_the_records_of_a_detailed_result(tmp_path: Path, latencies: bool) -> None:
    """Upstream vLLM writes the gaps (E2E = TTFT + their sum); a fork's `latencies` are used where written."""
    path = tmp_path / "vllm-infqps-concurrency256-Llama-3.1-8B-20261128-101500.json"
    truth = vllm_bench.write(path, 2000, failed_every=50, latencies=latencies)
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path)
        assert report.status == "loaded" and report.format == "vllm-bench-json", report.errors
        n, failed, ttft_sum, tpot_sum, paths = ws.con.execute(
            "select count(*), count(*) filter (finished_reason = 'error'), sum(ttft_s), sum(tpot_s), "
            "list(distinct path) from request_records").fetchone()
    assert (n, failed) == (2000, 40) == (truth["requests"], truth["failed"])
    assert ttft_sum == pytest.approx(truth["ttft_sum"], rel=1e-12)
    assert tpot_sum == pytest.approx(truth["tpot_sum"], rel=1e-12)
    assert paths == ["meta-llama/Llama-3.1-8B-Instruct"]


def test_the_records_of_a_genai_perf_export(tmp_path: Path) -> None:
    """The prompts and streamed responses (most of the file) are left out before DuckDB reads it."""
    path = tmp_path / "profile_export.json"
    truth = genai_perf.write(path, 500)
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path)
        assert report.status == "loaded" and report.format == "genai-perf-json", report.errors
        n, ttft_sum = ws.con.execute("select count(*), sum(ttft_s) from request_records").fetchone()
    assert n == truth["requests"] == 500
    assert ttft_sum == pytest.approx(truth["ttft_sum"], rel=1e-12)


def _peak(path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _PEAK, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_loaders_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    vllm_bench.write(small, 20_000)
    vllm_bench.write(large, 20_000, text_factor=40)  # the same records, ten times the bytes
    size_small, size_large = small.stat().st_size, large.stat().st_size
    assert size_large > 9 * size_small and size_large > 250 << 20
    a, b = _peak(small), _peak(large)
    assert a["status"] == b["status"] == "loaded" and a["samples"] == b["samples"] == 20_000, (a, b)
    grown = b["peak_mib"] - a["peak_mib"]
    print(f"\npeak RSS {a['peak_mib']:.0f} MiB on {size_small >> 20} MiB, {b['peak_mib']:.0f} MiB on "
          f"{size_large >> 20} MiB")
    # reading the file whole (as the loader did) costs at least its size again
    assert grown < 0.2 * (size_large - size_small) / (1 << 20), (a, b)

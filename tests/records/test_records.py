"""Per-request records: every supported format loads, and the histogram intervals contain the exact shares."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from app import load
from app.cube import ensure_cube
from app.promise import report
from app.promise.shares import Promise
from app.records import exact_joint_shares
from app.store import Workspace
from tests.conftest import T0, histogram, ts
from tests.support.paths import FIXTURES

TTFT_LES = ["0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "+Inf"]
TPOT_LES = ["0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "+Inf"]
LABELS = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}


def _requests(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ttft = rng.lognormvariate(-1.2, 0.8)
        # correlated with TTFT on half of the requests, so the joint is not at a Fréchet end
        tpot = rng.lognormvariate(-3.4, 0.5) * (1 + (ttft if i % 2 else 0))
        out.append({"ttft": ttft, "tpot": tpot, "out": rng.randint(2, 400), "fail": rng.random() < 0.01})
    return out


def _cumulative(values: list[float], les: list[str]) -> list[int]:
    return [sum(1 for v in values if le == "+Inf" or v <= float(le)) for le in les]


def _vllm_bench_json(reqs: list[dict], path: Path) -> None:
    doc = {
        "date": pd.Timestamp(ts(0)).strftime("%Y%m%d-%H%M%S"), "endpoint_type": "vllm", "backend": "vllm",
        "model_id": "chat", "num_prompts": len(reqs), "completed": len(reqs),
        "input_lens": [100] * len(reqs), "output_lens": [r["out"] for r in reqs],
        "ttfts": [r["ttft"] for r in reqs],
        "latencies": [r["ttft"] + r["tpot"] * (r["out"] - 1) for r in reqs],
        "itls": [[] for _ in reqs], "start_times": [i * 0.01 for i in range(len(reqs))],
        "errors": ["boom" if r["fail"] else "" for r in reqs],
    }
    path.write_text(json.dumps(doc))


def test_histogram_intervals_contain_the_exact_shares(tmp_path: Path) -> None:
    reqs = _requests(3000, seed=11)
    ttfts = [r["ttft"] for r in reqs]
    tpots = [r["tpot"] for r in reqs]
    rows = histogram("vllm:time_to_first_token_seconds", LABELS, TTFT_LES,
                     [(0, [0] * 8, 0.0), (120, _cumulative(ttfts, TTFT_LES), sum(ttfts))])
    rows += histogram("vllm:request_time_per_output_token_seconds", LABELS, TPOT_LES,
                      [(0, [0] * 7, 0.0), (120, _cumulative(tpots, TPOT_LES), sum(tpots))])
    bench = tmp_path / "bench.json"
    _vllm_bench_json(reqs, bench)
    with Workspace(":memory:") as ws:
        hist = load.load_frame(ws, pd.DataFrame(rows), "histograms")
        rec = load.load_file(ws, bench)
        assert rec.status == "loaded" and rec.format == "vllm-bench-json" and rec.samples == 3000
        ids = [hist.dataset_id, rec.dataset_id]
        cube_id = ensure_cube(ws, ids, 300, None)
        for ttft_s, tpot_s in [(0.5, 0.05), (0.6, 0.04), (0.25, 0.1), (2.0, 0.03), (1.0, 0.075)]:
            promise = [Promise(ttft_s=ttft_s, tpot_s=tpot_s)]
            exact = exact_joint_shares(ws, ids, promise, None, None, include_failed=False)
            doc = report.build(ws, cube_id, 300, promise, include_failed=False, exact_joint=exact)
            (path,) = doc["paths"]
            joint = path["joint"]
            assert joint["exact_share"] == exact["chat"]
            assert joint["share_low"] - 1e-12 <= exact["chat"] <= joint["share_high"] + 1e-12
            for sig, limit, values in (("ttft", ttft_s, ttfts), ("tpot", tpot_s, tpots)):
                true_share = sum(v > limit for v in values) / len(values)
                m = path[sig]
                assert m["share_low"] - 1e-12 <= true_share <= m["share_high"] + 1e-12
                if m["exact"]:
                    assert m["share"] == pytest.approx(true_share, abs=1e-12)


def test_failed_records_count_when_included(tmp_path: Path) -> None:
    reqs = _requests(500, seed=3)
    bench = tmp_path / "bench.json"
    _vllm_bench_json(reqs, bench)
    with Workspace(":memory:") as ws:
        rid = load.load_file(ws, bench).dataset_id
        p = [Promise(ttft_s=100.0, tpot_s=100.0)]
        failed = sum(r["fail"] for r in reqs) / len(reqs)
        assert exact_joint_shares(ws, [rid], p, None, None, include_failed=True) == {"chat": pytest.approx(failed)}
        assert exact_joint_shares(ws, [rid], p, None, None, include_failed=False) == {"chat": 0.0}


def test_aiperf_and_genai_perf_records(tmp_path: Path) -> None:
    aiperf = tmp_path / "profile_export.jsonl"
    lines = []
    for i, (ttft_ms, itl_ms) in enumerate([(85.0, 11.3), (600.0, 20.0), (90.0, 60.0), (100.0, 10.0)]):
        start = (T0 + i) * 1_000_000_000
        lines.append(json.dumps({
            "metadata": {"session_num": i, "request_start_ns": start, "worker_id": "worker_0",
                         "benchmark_phase": "profiling"},
            "metrics": {"time_to_first_token": {"value": ttft_ms, "unit": "ms"},
                        "inter_token_latency": {"value": itl_ms, "unit": "ms"},
                        "request_latency": {"value": ttft_ms + 100 * itl_ms, "unit": "ms"},
                        "output_sequence_length": {"value": 101, "unit": "tokens"}},
            "error": {"code": 500} if i == 3 else None}))
    aiperf.write_text("\n".join(lines) + "\n")
    genai = tmp_path / "profile_export.json"
    base = T0 * 1_000_000_000
    genai.write_text(json.dumps({"version": "1", "service_kind": "openai", "experiments": [{
        "experiment": {"mode": "request_rate", "value": 1.0},
        "requests": [
            {"timestamp": base, "response_timestamps": [base + 100_000_000, base + 120_000_000, base + 140_000_000]},
            {"timestamp": base + 10**9, "response_timestamps": [base + 10**9 + 700_000_000, base + 10**9 + 800_000_000]},
        ]}]}))
    with Workspace(":memory:") as ws:
        a = load.load_file(ws, aiperf)
        g = load.load_file(ws, genai)
        assert (a.format, a.samples, a.paths) == ("aiperf-profile-jsonl", 4, ["aiperf"])
        assert (g.format, g.samples) == ("genai-perf-json", 2)
        p = [Promise(ttft_s=0.5, tpot_s=0.05)]
        # aiperf: request 2 breaches TTFT, request 3 TPOT, request 4 failed
        assert exact_joint_shares(ws, [a.dataset_id], p, None, None) == {"aiperf": 0.75}
        # failures excluded: the share is over the three requests that did not fail
        assert exact_joint_shares(ws, [a.dataset_id], p, None, None, include_failed=False) == {"aiperf": 2 / 3}
        # genai-perf: TTFT 0.1 s and 0.7 s; TPOT 20 ms and 100 ms
        assert exact_joint_shares(ws, [g.dataset_id], p, None, None) == {"genai-perf": 0.5}


def test_vllm_bench_without_details_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "vllm-1.0qps-llama-20261129-101500.json"
    f.write_text(json.dumps({"date": "20261129-101500", "endpoint_type": "vllm", "backend": "vllm",
                             "num_prompts": 2, "mean_ttft_ms": 85.1}))
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, f)
    assert r.status == "failed"
    assert "--save-detailed" in r.errors[0] and f.name in r.errors[0]


def test_sglang_bench_serving_runs(tmp_path: Path) -> None:
    """Two runs appended to one JSONL file (the second with its arrays under `details`, as newer SGLang
    writes them): one path per run; E2E = TTFT + the gaps; a request with an error failed."""
    src = FIXTURES / "queries" / "records__from_sglang_bench.jsonl"
    path = tmp_path / "sglang_2026_2_512_128.jsonl"
    path.write_text(src.read_text())
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, path)
        assert (r.status, r.format, r.samples, r.paths) == ("loaded", "sglang-bench-jsonl", 3,
                                                            ["sglang run 1", "sglang run 2"]), r.errors
        rows = ws.con.execute("select path, ttft_s, tpot_s, e2e_s, finished_reason from request_records "
                              "order by path, finished_reason desc").fetchall()
        assert rows == [("sglang run 1", 0.08, pytest.approx(0.0115), pytest.approx(0.103), "stop"),
                        ("sglang run 1", None, None, None, "error"),
                        ("sglang run 2", 0.09, pytest.approx(0.02), pytest.approx(0.11), "stop")]
        p = [Promise(ttft_s=0.085, tpot_s=0.015)]
        # run 1: one failure (a breach when failures count); run 2: TPOT 20 ms > 15 ms
        assert exact_joint_shares(ws, [r.dataset_id], p, None, None) == {"sglang run 1": 0.5, "sglang run 2": 1.0}
        assert exact_joint_shares(ws, [r.dataset_id], p, None, None, include_failed=False) == {
            "sglang run 1": 0.0, "sglang run 2": 1.0}


def test_sglang_results_without_details_are_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "sglang_2026_2.jsonl"
    f.write_text("\n".join(json.dumps({"backend": "sglang", "dataset_name": "random", "completed": 2,
                                       "mean_ttft_ms": 80.0 + i}) for i in range(2)) + "\n")
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, f)
    assert r.status == "failed" and "--output-details" in r.errors[0]


def test_aiperf_records_judged_on_several_lines(tmp_path: Path) -> None:
    """Cancelled requests first (their metrics hold only error_request_count), as AIPerf writes them:
    still a per-request file, never handed to the server-metrics reader."""
    lines = [json.dumps({"metadata": {"session_num": i, "request_start_ns": (T0 + i) * 10**9, "worker_id": "w0",
                                      "benchmark_phase": "profiling", "was_cancelled": True},
                         "metrics": {"error_request_count": {"value": 1, "unit": "requests"}},
                         "error": {"code": 499, "type": "RequestCancellationError", "message": "cancelled"}})
             for i in range(3)]
    lines.append(json.dumps({"metadata": {"session_num": 3, "request_start_ns": (T0 + 3) * 10**9, "worker_id": "w0",
                                          "benchmark_phase": "profiling", "was_cancelled": False},
                             "metrics": {"time_to_first_token": {"value": 0.2, "unit": "s"},
                                         "inter_token_latency": {"value": 20.0, "unit": "ms"},
                                         "request_latency": {"value": 2200.0, "unit": "ms"}}}))
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, path)
        assert (r.status, r.format, r.samples) == ("loaded", "aiperf-profile-jsonl", 4), r.errors
        assert ws.con.execute("select list(finished_reason order by arrival), max(ttft_s), max(tpot_s) "
                              "from request_records").fetchone() == (["abort"] * 3 + ["stop"], 0.2, 0.02)

"""Per-request files that real runs of the tools wrote (tests/fixtures/real/records, SOURCES.md says
where each comes from): each loads, its records agree with the tool's own summary where the summary
measures the same thing, and ``headroom report`` gives exact shares equal to those computed here,
independently, from the file with plain Python."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from app import load
from app.cli import main
from app.store import Workspace
from tests.support.paths import REAL

RECORDS = REAL / "records"
VLLM = RECORDS / "vllm-0.6-benchmark_serving-llama31-8b-10req.json"
AIPERF = RECORDS / "aiperf-0.1-profile_export.jsonl"
AIPERF_SUMMARY = RECORDS / "aiperf-0.1-profile_export_aiperf.json"
GUIDELLM_JSON = RECORDS / "guidellm-v0.3-benchmarks_stripped.json"
GUIDELLM_YAML = RECORDS / "guidellm-v0.3-benchmarks_stripped.yaml"


# -- the truth, from each file with plain Python -----------------------------------------------------
def vllm_truth(path: Path) -> list[dict]:
    """vLLM's arrays side by side: E2E = TTFT + the request's gaps; TPOT = gaps / (output tokens - 1)."""
    doc = json.loads(path.read_text())
    out = []
    for ttft, gaps, n_out, error in zip(doc["ttfts"], doc["itls"], doc["output_lens"], doc["errors"], strict=True):
        failed = bool(error)
        out.append({"failed": failed, "ttft": None if failed else ttft,
                    "tpot": None if failed else (sum(gaps) / (n_out - 1) if n_out > 1 else 0.0),
                    "e2e": None if failed else ttft + sum(gaps)})
    return out


def aiperf_truth(path: Path) -> list[dict]:
    """One record per line; AIPerf 0.1 names TTFT `ttft`; latencies in ms; an `error` fails the request."""
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        m = rec["metrics"]
        failed = rec.get("error") is not None
        out.append({"failed": failed,
                    "ttft": None if failed else m["ttft"]["value"] / 1000,
                    "tpot": None if failed else m["inter_token_latency"]["value"] / 1000,
                    "e2e": None if failed else m["request_latency"]["value"] / 1000})
    return out


def joint(truth: list[dict], ttft_s: float, tpot_s: float, include_failed: bool) -> float:
    """The joint breach share: failures breach when counted, and leave the population when not."""
    pop = [r for r in truth if include_failed or not r["failed"]]
    return sum(r["failed"] or r["ttft"] > ttft_s or r["tpot"] > tpot_s for r in pop) / len(pop)


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["report", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- vLLM --------------------------------------------------------------------------------------------
def test_vllm_result_agrees_with_its_own_summary() -> None:
    doc = json.loads(VLLM.read_text())
    assert "latencies" not in doc and "start_times" not in doc  # what benchmark_serving.py wrote then
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, VLLM)
        assert (r.status, r.format, r.samples, r.paths) == ("loaded", "vllm-bench-json", 10,
                                                            ["neuralmagic/Meta-Llama-3.1-8B-FP8"])
        assert any("no absolute time" in n for n in r.notes)  # no start times: shares, no placement
        ttft, tpot, e2e = ws.con.execute("select list(ttft_s order by rowid), list(tpot_s order by rowid), "
                                         "list(e2e_s order by rowid) from request_records").fetchone()
    truth = vllm_truth(VLLM)
    assert ttft == [t["ttft"] for t in truth]
    assert tpot == pytest.approx([t["tpot"] for t in truth], rel=1e-12)
    assert e2e == pytest.approx([t["e2e"] for t in truth], rel=1e-12)
    # vLLM's summary: the mean TTFT is of the same numbers; its TPOT and latency run to the end of the
    # stream (after the last token), which the file does not hold per request: ours are a little lower
    assert 1000 * statistics.mean(ttft) == pytest.approx(doc["mean_ttft_ms"], rel=1e-12)
    tpots = [t for t, n in zip(tpot, doc["output_lens"], strict=True) if n > 1]
    assert 1000 * statistics.mean(tpots) == pytest.approx(doc["mean_tpot_ms"], rel=0.01)
    assert 1000 * statistics.mean(tpots) <= doc["mean_tpot_ms"]
    assert 1000 * statistics.mean(e2e) <= doc["mean_latency_ms"]


@pytest.mark.parametrize(("ttft_s", "tpot_s"), [(0.0635, 0.0052), (0.064, 0.006), (0.05, 0.1), (1.0, 0.0051)])
def test_report_of_the_vllm_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str], ttft_s: float,
                                       tpot_s: float) -> None:
    """`headroom report VLLM_BENCH.json --promise ...`: no metrics export, every share exact."""
    path = shutil.copy(VLLM, tmp_path / VLLM.name)
    truth = vllm_truth(VLLM)
    for extra, include in (([], True), (["--exclude-failed"], False)):
        doc = _report(capsys, str(path), "--promise", f"{ttft_s}/{tpot_s}", *extra)
        (p,) = doc["paths"]
        assert p["requests"] == 10 and p["joint"]["exact_share"] == pytest.approx(
            joint(truth, ttft_s, tpot_s, include), abs=1e-15)
        assert p["ttft"]["share"] == pytest.approx(sum(t["ttft"] > ttft_s for t in truth) / 10, abs=1e-15)
        assert p["ttft"]["exact"] is p["tpot"]["exact"] is True


def _vllm_export(path: Path, model: str) -> None:
    """A vLLM V1 /metrics export of two scrapes (TTFT and TPOT histograms of 10 requests)."""
    lines = []
    for ts, c in ((1725697500000, 0), (1725697560000, 10)):
        for family, les, counts in (
            ("vllm:time_to_first_token_seconds", ["0.05", "0.1", "+Inf"], [c * 3 // 10, c, c]),
            ("vllm:request_time_per_output_token_seconds", ["0.005", "0.01", "+Inf"], [c * 3 // 10, c, c]),
        ):
            for le, n in zip(les, counts, strict=True):
                lines.append(f'{family}_bucket{{engine="0",model_name="{model}",le="{le}"}} {n} {ts}')
            lines.append(f'{family}_count{{engine="0",model_name="{model}"}} {c} {ts}')
            lines.append(f'{family}_sum{{engine="0",model_name="{model}"}} {c * 0.05} {ts}')
    path.write_text("\n".join(lines) + "\n")


def test_report_of_an_export_with_the_vllm_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`headroom report EXPORT VLLM_BENCH.json --promise ...`: the histograms' bounds and the records'
    exact joint share (the records carry no time: every range includes them)."""
    export = tmp_path / "metrics.prom"
    _vllm_export(export, "neuralmagic/Meta-Llama-3.1-8B-FP8")
    path = shutil.copy(VLLM, tmp_path / VLLM.name)
    truth = vllm_truth(VLLM)
    for extra, include in (([], True), (["--exclude-failed"], False)):
        doc = _report(capsys, str(export), str(path), "--promise", "0.05/0.005", *extra)
        (p,) = doc["paths"]
        assert p["joint"]["exact_share"] == pytest.approx(joint(truth, 0.05, 0.005, include), abs=1e-15)
        assert p["joint"]["share_low"] is not None


# -- AIPerf ------------------------------------------------------------------------------------------
def test_aiperf_export_agrees_with_its_own_summary() -> None:
    """AIPerf 0.1.1 wrote the 11 cancelled requests first; the records' means are the summary's."""
    first = json.loads(AIPERF.read_text().splitlines()[0])
    assert first["metrics"] == {"error_request_count": {"value": 1, "unit": "requests"}}
    summary = json.loads(AIPERF_SUMMARY.read_text())["records"]
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, AIPERF)
        assert (r.status, r.format, r.samples) == ("loaded", "aiperf-profile-jsonl", 100), r.errors
        n_ok, n_failed, ttft, tpot, e2e = ws.con.execute(
            "select count(*) filter (finished_reason = 'stop'), count(*) filter (finished_reason in ('abort', 'error')), "
            "avg(ttft_s), avg(tpot_s) filter (finished_reason = 'stop'), avg(e2e_s) from request_records").fetchone()
    assert (n_ok, n_failed) == (summary["request_count"]["avg"], summary["error_request_count"]["avg"]) == (89, 11)
    assert 1000 * ttft == pytest.approx(summary["ttft"]["avg"], rel=1e-12)
    assert 1000 * tpot == pytest.approx(summary["inter_token_latency"]["avg"], rel=1e-12)
    assert 1000 * e2e == pytest.approx(summary["request_latency"]["avg"], rel=1e-12)


def test_aiperf_summary_is_refused_with_what_to_load() -> None:
    with Workspace(":memory:") as ws:
        r = load.load_file(ws, AIPERF_SUMMARY)
    assert r.status == "failed" and "profile_export.jsonl" in r.errors[0] and "Error" not in r.errors[0]


@pytest.mark.parametrize(("ttft_s", "tpot_s"), [(2.5, 0.03), (1.0, 0.025), (4.0, 0.05)])
def test_report_of_the_aiperf_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str], ttft_s: float,
                                         tpot_s: float) -> None:
    path = shutil.copy(AIPERF, tmp_path / "profile_export.jsonl")
    truth = aiperf_truth(AIPERF)
    for extra, include in (([], True), (["--exclude-failed"], False)):
        doc = _report(capsys, str(path), "--promise", f"{ttft_s}/{tpot_s}", *extra)
        (p,) = doc["paths"]
        assert p["requests"] == (100 if include else 89)
        assert p["joint"]["exact_share"] == pytest.approx(joint(truth, ttft_s, tpot_s, include), abs=1e-15)


# -- GuideLLM ----------------------------------------------------------------------------------------
def test_guidellm_report_json_and_yaml_give_the_same_records(tmp_path: Path) -> None:
    """GuideLLM's maintainers kept one successful request of the run in this report."""
    doc = json.loads(GUIDELLM_JSON.read_text())
    assert yaml.safe_load(GUIDELLM_YAML.read_text())["benchmarks"][0]["requests"]["successful"][0]["request_id"] == \
        doc["benchmarks"][0]["requests"]["successful"][0]["request_id"]
    (req,) = doc["benchmarks"][0]["requests"]["successful"]
    rows = []
    for path in (GUIDELLM_JSON, GUIDELLM_YAML):
        with Workspace(":memory:") as ws:
            r = load.load_file(ws, path)
            assert r.status == "loaded" and r.samples == 1, r.errors
            rows.append(ws.con.execute("select ttft_s, tpot_s, e2e_s, prompt_tokens, output_tokens, epoch_us(arrival) "
                                       "from request_records").fetchone())
    assert rows[0] == rows[1]
    ttft, tpot, e2e, n_in, n_out, arrival_us = rows[0]
    assert ttft == pytest.approx(req["time_to_first_token_ms"] / 1000, rel=1e-15)
    # GuideLLM's inter-token latency is vLLM's TPOT: (last token - first token) / (output tokens - 1)
    assert tpot == pytest.approx((req["last_token_time"] - req["first_token_time"]) / (req["output_tokens"] - 1),
                                 rel=1e-9)
    assert e2e == req["request_latency"] and (n_in, n_out) == (257, 128)
    assert arrival_us == round(req["start_time"] * 1e6)


def test_report_of_the_guidellm_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shutil.copy(GUIDELLM_JSON, tmp_path / "benchmarks.json")
    for promise, share in (("0.02/0.006", 1.0), ("0.03/0.006", 0.0), ("0.03/0.005", 1.0)):
        (p,) = _report(capsys, str(path), "--promise", promise)["paths"]
        assert (p["path"], p["requests"], p["joint"]["exact_share"]) == ("guidellm", 1, share)

"""`headroom scenarios` and `headroom saved` end to end on a short simulated export (one seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.config import Events
from app.simulator import simulate_day
from app.simulator.metrics import minimal_export
from app.simulator.sample import write_metrics_parquet
from tests.support.cli_run import run_cli, simulated_export

PROMISES = ["--promise", "llama-3.1-8b-interactive=0.5/0.05", "--promise", "llama-3.1-8b-batch=5/0.1"]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated_export(tmp_path_factory.mktemp("scen") / "metrics.parquet", hours=2.0)


@pytest.mark.slow
def test_scenarios_json_document(export: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "ws.duckdb")
    code, out, err = run_cli(["scenarios", str(export), "--db", db, "--replicas", "2:3", "--replica-hour-price", "4",
                          "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--horizon-hours", "10",
                          "--save", "base", "--format", "json"])
    assert code == 0, err
    assert "N'=2 g=1 m=1" in err  # progress on stderr
    doc = json.loads(out)
    assert doc["observed_replicas"] == 2
    rows = doc["scenarios"]
    assert {(r["replicas"], r["path"]) for r in rows} == {
        (n, p) for n in (2, 3) for p in ("llama-3.1-8b-interactive", "llama-3.1-8b-batch")}
    for r in rows:
        assert r["breach_share_low"] <= r["breach_share"] <= r["breach_share_high"]
        assert r["expected_breaches"] == pytest.approx(r["requests"] * r["breach_share"])
        assert r["breach_cost"] == pytest.approx(r["expected_breaches"] * 0.05)
        assert r["total_cost"] == pytest.approx(r["breach_cost"] + r["headroom_cost"])
    for n in (2, 3):  # the path rows of a scenario add up to the fleet's headroom cost
        assert sum(r["headroom_cost"] for r in rows if r["replicas"] == n) == pytest.approx(n * 10 * 4)
    fleet = {t["replicas"]: t["total_cost"] for t in doc["fleet"]}
    assert doc["cheapest"]["replicas"] == min(fleet, key=fleet.get)
    assert set(doc["break_even_breach_price"]) == {"llama-3.1-8b-interactive", "llama-3.1-8b-batch"}
    model = doc["capacity_model"]
    assert model["kv_tokens"] == 56000 and model["fit"]["windows"] > 0
    assert doc["queueing"]["note"].startswith("thinking tool")
    assert set(doc["cross_check"]) == {"llama-3.1-8b-interactive", "llama-3.1-8b-batch"}
    assert any("router" in a for a in doc["assumptions"])
    # saved, listed, exported and imported
    code, out, _ = run_cli(["saved", "list", "--db", db])
    assert code == 0 and out.startswith("base\t")
    code, exported, _ = run_cli(["saved", "export", "--db", db])
    other = tmp_path / "other.duckdb"
    f = tmp_path / "sets.json"
    f.write_text(exported)
    assert run_cli(["saved", "import", str(f), "--db", str(other)])[0] == 0
    code, out, _ = run_cli(["saved", "compare", "base", "base", "--db", str(other), "--format", "json"])
    assert code == 0 and {r["difference"] for r in json.loads(out)} == {0.0}


def test_scenarios_markdown_and_input_errors(export: Path) -> None:
    code, out, err = run_cli(["scenarios", str(export), "--replicas", "2", "--gpu-hour-price", "2", "--gpus-per-replica",
                          "2", "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--quiet"])
    assert code == 0 and err == ""
    assert "| replicas | traffic | context | headroom |" in out and "Capacity model of one replica" in out
    assert "Assumptions the metrics cannot show" in out and "Cross-check" in out
    code, _, err = run_cli(["scenarios", str(export), "--replicas", "0:2", "--replica-hour-price", "1", *PROMISES])
    assert code == 2 and "replica counts must be >= 1" in err
    code, _, err = run_cli(["scenarios", str(export), "--replicas", "2", *PROMISES])
    assert code == 2 and "--replica-hour-price" in err
    code, _, err = run_cli(["scenarios", str(export), "--replicas", "2", "--replica-hour-price", "1", *PROMISES,
                        "--save", "x"])
    assert code == 2 and "--save needs --db" in err


@pytest.fixture(scope="module")
def minimal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A minimal export (no cache_config_info, iteration_tokens_total or phase-time histograms), and one
    without the KV and running gauges as well (nothing to fit the KV capacity or the step law on)."""
    res = simulate_day(seed=3, replicas=2, hours=1.0, scrape_interval_s=15.0, events=Events())
    folder = tmp_path_factory.mktemp("minimal")
    frame = minimal_export(res.metrics_frame)
    write_metrics_parquet(frame, folder / "minimal.parquet")
    names = frame["metric"].astype(str)
    bare = frame[~names.isin(["vllm:kv_cache_usage_perc", "vllm:num_requests_running"])].reset_index(drop=True)
    write_metrics_parquet(bare, folder / "bare.parquet")
    return folder / "minimal.parquet", folder / "bare.parquet"


@pytest.mark.slow
def test_scenarios_on_a_minimal_export_run_to_the_end_with_sources(minimal: tuple[Path, Path]) -> None:
    code, out, err = run_cli(["scenarios", str(minimal[0]), "--replicas", "2:3", "--replica-hour-price", "4",
                          "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--max-num-seqs", "256",
                          "--format", "json"])
    assert code == 0, err
    assert "NaN" not in out and "Infinity" not in out
    doc = json.loads(out)
    sources = doc["capacity_model"]["sources"]
    assert sources["kv_tokens"]["kind"] == "fitted" and "by simulation" in sources["kv_tokens"]["detail"]
    assert doc["capacity_model"]["kv_tokens"] == pytest.approx(56000, rel=0.15)  # the engine had 56,000
    assert sources["max_num_seqs"] == {"value": 256, "kind": "given", "detail": "--max-num-seqs"}
    assert sources["max_num_batched_tokens"]["kind"] == "assumed"  # nothing in the data shows it
    assert sources["tpot_scale"]["kind"] == "calibrated" and sources["step_base_s"]["kind"] == "fitted"
    assert sources["router"]["kind"] == "fitted"
    assert set(doc["capacity_model"]["model_error_at_observed_replicas"]) == {
        "llama-3.1-8b-interactive", "llama-3.1-8b-batch"}
    code, text, _ = run_cli(["scenarios", str(minimal[0]), "--replicas", "2", "--replica-hour-price", "4",
                         "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--quiet"])
    assert code == 0
    assert "| kv_tokens |" in text and "| fitted | by simulation" in text and "Residual at the observed" in text


@pytest.mark.slow
def test_a_model_the_data_cannot_identify_is_flagged_not_refused(minimal: tuple[Path, Path]) -> None:
    code, out, err = run_cli(["scenarios", str(minimal[1]), "--replicas", "2:3", "--replica-hour-price", "4",
                          "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    messages = " ".join(f["message"] for f in doc["flags"])
    assert "--kv-cache-tokens" in messages and "GPU KV cache size" in messages
    assert "vllm:num_requests_running" in messages  # what would let the step law be fitted
    assert doc["capacity_model"]["sources"]["kv_tokens"]["kind"] == "assumed"
    assert doc["capacity_model"]["sources"]["step_base_s"]["kind"] == "assumed"
    for r in doc["scenarios"]:
        assert r["flagged"] and r["flags"]
        assert r["breach_share_high"] >= 2 * r["breach_share"] or r["breach_share_high"] == 1.0
    # the same run with the KV size given: that flag is gone, the given value is used as it is
    code, out, _ = run_cli(["scenarios", str(minimal[1]), "--replicas", "2", "--replica-hour-price", "4",
                        "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--kv-cache-tokens", "56000",
                        "--format", "json"])
    doc = json.loads(out)
    assert code == 0 and doc["capacity_model"]["kv_tokens"] == 56000
    assert doc["capacity_model"]["sources"]["kv_tokens"]["kind"] == "given"
    assert not any("--kv-cache-tokens" in f["message"] for f in doc["flags"])
    code, _, err = run_cli(["scenarios", str(minimal[1]), "--replicas", "2", "--replica-hour-price", "4", *PROMISES,
                        "--kv-cache-tokens", "0"])
    assert code == 2 and "--kv-cache-tokens 0: must be a positive number of tokens" in err

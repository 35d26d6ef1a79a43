"""`headroom scenarios` and `headroom saved` end to end on a short simulated export (one seed)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from app import cli
from app.simulator import Events, simulate_day
from app.simulator.sample import write_metrics_parquet

PROMISES = ["--promise", "llama-3.1-8b-interactive=0.5/0.05", "--promise", "llama-3.1-8b-batch=5/0.1"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = simulate_day(seed=3, replicas=2, hours=2.0, scrape_interval_s=15.0, events=Events())
    path = tmp_path_factory.mktemp("scen") / "metrics.parquet"
    write_metrics_parquet(res.metrics_frame, path)
    return path


def test_scenarios_json_document(export: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "ws.duckdb")
    code, out, err = run(["scenarios", str(export), "--db", db, "--replicas", "2:3", "--replica-hour-price", "4",
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
    code, out, _ = run(["saved", "list", "--db", db])
    assert code == 0 and out.startswith("base\t")
    code, exported, _ = run(["saved", "export", "--db", db])
    other = tmp_path / "other.duckdb"
    f = tmp_path / "sets.json"
    f.write_text(exported)
    assert run(["saved", "import", str(f), "--db", str(other)])[0] == 0
    code, out, _ = run(["saved", "compare", "base", "base", "--db", str(other), "--format", "json"])
    assert code == 0 and {r["difference"] for r in json.loads(out)} == {0.0}


def test_scenarios_markdown_and_input_errors(export: Path) -> None:
    code, out, err = run(["scenarios", str(export), "--replicas", "2", "--gpu-hour-price", "2", "--gpus-per-replica",
                          "2", "--breach-price", "0.05", *PROMISES, "--seeds", "1", "--quiet"])
    assert code == 0 and err == ""
    assert "| replicas | traffic | context | headroom |" in out and "Capacity model of one replica" in out
    assert "Assumptions the metrics cannot show" in out and "Cross-check" in out
    code, _, err = run(["scenarios", str(export), "--replicas", "0:2", "--replica-hour-price", "1", *PROMISES])
    assert code == 2 and "replica counts must be >= 1" in err
    code, _, err = run(["scenarios", str(export), "--replicas", "2", *PROMISES])
    assert code == 2 and "--replica-hour-price" in err
    code, _, err = run(["scenarios", str(export), "--replicas", "2", "--replica-hour-price", "1", *PROMISES,
                        "--save", "x"])
    assert code == 2 and "--save needs --db" in err

"""`headroom scenarios --policy FILE.yaml` end to end on a short simulated export, and the policy
file's errors (each names the file and the key)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from app.economics.decide import policy_file, scenarios_text
from app.economics.decide.policies import histogram_cut_share
from app.economics.model.demand import LengthDistribution
from tests.support.cli_run import run_cli, simulated_export

PROMISES = ["--promise", "llama-3.1-8b-interactive=0.5/0.05", "--promise", "llama-3.1-8b-batch=5/0.1"]
BASE = ["--replicas", "2", "--replica-hour-price", "4", "--breach-price", "0.05", *PROMISES, "--seeds", "1",
        "--horizon-hours", "10", "--quiet"]
POLICY = """
autoscaler: {scale_out_at: 2, out_for: 1m, scale_in_at: 0.2, in_for: 5m, cooldown: 2m, cold_start: 3m,
             wake_start: 10s, min_replicas: 1, max_replicas: 4}
admission: {queue_factor: [0.5, 2]}
retry: {queue_factor: 0.5, attempts: 3, backoff: 500ms, budget_per_minute: 5}
degradation:
  cap_tokens: {tokens: 200}
  smaller_model: {path: llama-3.1-8b-interactive, share: 0.5, step_factor: 0.5}
  defer: {path: llama-3.1-8b-batch, hours: 1, ttft: 30m}
degraded_price: {llama-3.1-8b-interactive: 0.01, "*": 0.002}
"""


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated_export(tmp_path_factory.mktemp("pol") / "metrics.parquet", hours=2.0)


@pytest.mark.parametrize(("text", "says"), [
    ("autoscaler: {signal: gpu_util}", "autoscaler.signal: expected waiting or running"),
    ("autoscaler: {cold_start: soon}", "autoscaler.cold_start: expected a duration"),
    ("autoscaler: {min_replicas: 5, max_replicas: 2}", "autoscaler: replicas: need 1 <= min_replicas"),
    ("admission: {queue_factor: [1, -2]}", "admission.queue_factor: must be a finite number >= 0"),
    ("retry: {attempts: 2.5}", "retry.attempts: expected a whole number"),
    ("degradation: {smaller_model: {path: x, share: 2}}", "degradation.smaller_model.share"),
    ("degradation: {cap_tokens: {}}", "degradation.cap_tokens.tokens: required"),
    ("autoscalr: {}", "autoscalr: unknown section"),
    ("admission: {queue: 1}", "admission.queue: unknown setting"),
    ("admission: [1, 2", "line 1: not valid YAML"),
])
def test_a_bad_policy_file_is_refused_naming_the_file_and_the_key(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    code, out, err = run_cli(["scenarios", "--replicas", "2", "--replica-hour-price", "1", *PROMISES,
                          "--policy", str(f)])
    assert code == 2 and not out
    assert f"{f}: {says}" in err, err


def test_a_missing_policy_file_is_named() -> None:
    code, _, err = run_cli(["scenarios", "--replicas", "2", "--replica-hour-price", "1", *PROMISES,
                        "--policy", "/nonexistent/p.yaml"])
    assert code == 2 and "/nonexistent/p.yaml: cannot be read" in err


def test_the_policy_rows_the_file_asks_for() -> None:
    ps = policy_file.parse_text(POLICY, "p.yaml").for_fleet(2)
    names = [r.name for r in ps.rows]
    assert [r.kind for r in ps.rows] == ["autoscaler"] * 2 + ["admission"] * 3 + ["retry"] * 2 + ["degradation"] * 3
    assert names[0].endswith("cold start 3 min") and names[1].endswith("wake from sleep 10 s")
    assert names[2] == "unbounded queue, 2 replicas"
    assert ps.rows[5].policy.retry.budget_per_minute is None and ps.rows[6].policy.retry.budget_per_minute == 5
    assert ps.rows[6].policy.retry.backoff_s == 0.5
    assert ps.degraded_price == {"llama-3.1-8b-interactive": 0.01, "*": 0.002}
    with pytest.raises(policy_file.PolicyFileError, match="p.yaml: degradation.defer.path: no path 'nope'"):
        policy_file.check_paths(policy_file.parse_text("degradation: {defer: {path: nope}}", "p.yaml"), ["a"], "p.yaml")


def test_scenarios_with_a_policy_file(export: Path, tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY)
    code, out, err = run_cli(["scenarios", str(export), *BASE, "--policy", str(f), "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    pol = doc["policies"]
    rows = {(r["policy"], r["path"]): r for r in pol["rows"]}
    assert len(rows) == 10 * 2
    static = {r["path"]: r for r in doc["scenarios"] if r["replicas"] == 2}
    for path, s in static.items():
        unbounded = rows[("unbounded queue, 2 replicas", path)]
        # the same fleet without a policy: the static row's share (counted by arrival, not by finish)
        assert unbounded["breach_share"] == pytest.approx(s["breach_share"], rel=0.05, abs=0.003)
        assert unbounded["rejected_share"] == 0 and unbounded["attempts_per_request"] == 1
        assert unbounded["headroom_cost"] + rows[("unbounded queue, 2 replicas", next(p for p in static if p != path))][
            "headroom_cost"] == pytest.approx(2 * 10 * 4)
        tight = rows[("queue cap 0.5 x running, 2 replicas", path)]
        assert tight["rejected_share"] >= rows[("queue cap 2 x running, 2 replicas", path)]["rejected_share"]
        # rejections are breaches
        assert tight["breach_share"] >= tight["rejected_share"]
        free = rows[("retries 3 attempts, no budget, queue cap 0.5 x running, 2 replicas", path)]
        budget = rows[("retries 3 attempts, budget 5/min, queue cap 0.5 x running, 2 replicas", path)]
        assert 1 <= budget["attempts_per_request"] <= free["attempts_per_request"] <= 3
        capped = rows[("answers capped at 200 tokens, 2 replicas", path)]
        assert capped["degraded_answers"] > 0 and capped["tokens_saved_share"] > 0
        assert capped["degraded_cost"] == pytest.approx(
            capped["degraded_answers"] * (0.01 if path == "llama-3.1-8b-interactive" else 0.002))
    auto = [t for t in pol["fleet"] if t["kind"] == "autoscaler"]
    assert len(auto) == 2 and all(1 <= t["mean_replicas"] <= 4 for t in auto)
    first = next(r for r in pol["rows"] if r["kind"] == "autoscaler" and r["timeline"])
    assert abs(len(first["timeline"]["t_s"]) - doc["observed"]["hours"] * 3600 / 15) <= 1 and set(first["timeline"]["replicas"]) <= {1, 2, 3, 4}
    small = [r for r in pol["rows"] if r["policy"].startswith("50% of")]
    assert small[0]["mean_replicas"] == pytest.approx(3.0)  # the fleet's 2 and the smaller model's 1
    # the other renderings (what --format csv|markdown print of the same document) carry the same rows
    table = list(csv.DictReader(io.StringIO(scenarios_text.scenarios_csv(doc))))
    assert sum(1 for r in table if r["policy"]) == 20 and sum(1 for r in table if not r["policy"]) == 2
    text = scenarios_text.scenarios_markdown(doc)
    assert "Policies replayed through the twin" in text and "| unbounded queue, 2 replicas |" in text


def test_a_retry_ratio_adds_its_own_row() -> None:
    ps = policy_file.parse_text("admission: {}\nretry: {ratio: 0.1, budget_per_minute: 30}", "p.yaml").for_fleet(3)
    retry = [r for r in ps.rows if r.kind == "retry"]
    assert [r.policy.retry.ratio for r in retry] == [None, None, 0.1]
    assert retry[2].name.startswith("retries 3 attempts, retry ratio 0.1")


def test_the_share_cut_read_off_the_generation_histogram() -> None:
    class _Path:
        name = "p"
        output = LengthDistribution(bounds=np.array([100.0, 500.0, 1000.0]), shares=np.array([0.5, 0.3, 0.15, 0.05]),
                                    mu=5.0, sigma=1.0, count=100.0, mean_observed=300.0, max_len=2048)

    class _Demand:
        paths = [_Path()]

    class _Analysis:
        demand = _Demand()

    a = _Analysis()
    assert histogram_cut_share(a, "p", 500) == (0.2, 0.2)  # on a bucket bound: exact
    low, high = histogram_cut_share(a, "p", 300)  # inside (100, 500]: between the bounds
    assert (low, high) == pytest.approx((0.2, 0.5))
    assert histogram_cut_share(a, "q", 300) is None

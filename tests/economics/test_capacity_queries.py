"""The capacity model's queries on hand-written samples, against tables computed by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from app.economics.model import capacity
from app.store import Workspace
from tests.conftest import histogram, load, samples, ts

A = {"instance": "a:8000", "engine": "0", "model_name": "chat"}
A2 = {**A, "model_name": "rag"}  # a second path on the same engine: summed into its replica
B = {"instance": "b:8000", "engine": "0", "model_name": "chat"}


def _fleet() -> list[dict]:
    rows = []
    # replica a: two paths' ITL histograms and token counters, scraped at 0, 15, 30 s
    rows += histogram("vllm:inter_token_latency_seconds", A, ["0.05", "+Inf"],
                      [(0, [10, 10], 0.2), (15, [110, 110], 2.2), (30, [260, 260], 5.2)])
    rows += histogram("vllm:inter_token_latency_seconds", A2, ["0.05", "+Inf"],
                      [(0, [0, 0], 0.0), (15, [50, 50], 1.0), (30, [50, 50], 1.0)])
    rows += samples("vllm:generation_tokens_total", A, [(0, 10), (15, 112), (30, 264)])
    rows += samples("vllm:prompt_tokens_total", A, [(0, 100), (15, 600), (30, 900)])
    rows += samples("vllm:num_requests_running", A, [(0, 2), (15, 6), (30, 8)])
    rows += samples("vllm:num_requests_waiting", A, [(0, 0), (15, 1), (30, 0)])
    rows += samples("vllm:kv_cache_usage_perc", A, [(0, 0.1), (15, 0.3), (30, 0.5)])
    rows += histogram("vllm:time_to_first_token_seconds", A, ["0.5", "+Inf"],
                      [(0, [1, 1], 0.1), (15, [4, 5], 2.1), (30, [6, 7], 2.5)])
    # replica b: its ITL counter goes down at 30 s (a restart): that interval has no increases
    rows += histogram("vllm:inter_token_latency_seconds", B, ["0.05", "+Inf"],
                      [(0, [5, 5], 0.1), (15, [25, 25], 0.5), (30, [3, 3], 0.06)])
    rows += samples("vllm:num_requests_running", B, [(0, 1), (15, 1), (30, 1)])
    return rows


def test_scrape_intervals_by_hand(ws: Workspace) -> None:
    ds = load(ws, _fleet())
    got = capacity.scrape_intervals(ws, [ds]).set_index(["replica", "ts"])
    a = got.loc["a:8000 / 0"]
    assert list(a.index) == [ts(15), ts(30)]  # the first scrape is the baseline
    assert list(a["dt_s"]) == [15.0, 15.0]
    # ITL: (110 - 10) + (50 - 0) gaps in the first interval, (2.2 - 0.2) + (1.0 - 0) s of them
    assert list(a["itl_count"]) == [150.0, 150.0]
    assert list(a["itl_sum"]) == pytest.approx([3.0, 3.0])
    assert list(a["generation_tokens"]) == [102.0, 152.0]
    assert list(a["prompt_tokens"]) == [500.0, 300.0]
    assert list(a["ttft_count"]) == [4.0, 2.0] and list(a["ttft_sum"]) == pytest.approx([2.0, 0.4])
    assert list(a["running_before"]) == [2.0, 6.0] and list(a["running"]) == [6.0, 8.0]
    assert list(a["waiting"]) == [1.0, 0.0] and list(a["kv_before"]) == pytest.approx([0.1, 0.3])
    assert a["steps"].isna().all() and a["queue_count"].isna().all()  # not exported
    assert list(a["resets"]) == [0, 0]
    b = got.loc["b:8000 / 0"]
    assert list(b["itl_count"].iloc[:1]) == [20.0] and math.isnan(b["itl_count"].iloc[1])
    assert list(b["resets"]) == [0, 2]  # _count and _sum went down at 30 s



def test_scrape_intervals_take_the_highest_of_several_datasets(ws: Workspace) -> None:
    # one counter in two datasets: at 15 s the second holds the higher value, at 30 s the first; at 45 s
    # the counter restarts; the prompt counter starts late (its first sample is only a baseline)
    first = load(ws, samples("vllm:generation_tokens_total", A, [(0, 10), (15, 40), (30, 70), (45, 5), (60, 25)])
                 + samples("vllm:prompt_tokens_total", A, [(30, 100), (45, 130), (60, 190)])
                 + samples("vllm:num_requests_running", A, [(0, 1), (15, 2), (30, 3), (45, 3), (60, 4)]), "first")
    second = load(ws, samples("vllm:generation_tokens_total", A, [(15, 50), (30, 60)]), "second")
    got = capacity.scrape_intervals(ws, [first, second]).set_index("ts")
    assert list(got.index) == [ts(15), ts(30), ts(45), ts(60)] and list(got["dt_s"]) == [15.0] * 4
    # 50 - 10, 70 - 50 (the highest at each time), a restart (5 < 70: no increases), 25 - 5
    assert got["generation_tokens"].tolist()[:2] == [40.0, 20.0] and math.isnan(got["generation_tokens"].iloc[2])
    assert got["generation_tokens"].iloc[3] == 20.0 and list(got["resets"]) == [0, 0, 1, 0]
    # nothing before 30 s, a baseline at 30 s, then 130 - 100 is lost to the restart, 190 - 130
    assert got["prompt_tokens"].isna().tolist() == [True, True, True, False] and got["prompt_tokens"].iloc[3] == 60.0
    assert list(got["running_before"]) == [1.0, 2.0, 3.0, 3.0] and list(got["running"]) == [2.0, 3.0, 3.0, 4.0]
    # the second dataset alone: its two samples make one interval
    alone = capacity.scrape_intervals(ws, [second])
    assert alone[["ts", "generation_tokens", "resets"]].values.tolist() == [[ts(30), 10.0, 0]]

def test_busy_intervals_keep_what_a_step_time_can_be_read_from(ws: Workspace) -> None:
    ds = load(ws, _fleet())
    busy = capacity.busy_intervals(capacity.scrape_intervals(ws, [ds]))
    # replica b has no token counter (so no interval with generated tokens), replica a both intervals
    assert sorted(busy["replica"].unique()) == ["a:8000 / 0"] and len(busy) == 2


def test_engine_evidence_from_step_and_length_buckets(ws: Workspace) -> None:
    labels = {"instance": "a:8000", "engine": "0", "model_name": "m"}
    rows = histogram("vllm:iteration_tokens_total", labels, ["1024", "2048", "4096", "+Inf"],
                     [(0, [0, 0, 0, 0], 0), (60, [30, 40, 40, 40], 50000), (120, [70, 90, 90, 90], 110000)])
    rows += histogram("vllm:request_prompt_tokens", labels, ["1000", "2000", "5000", "10000", "20000", "+Inf"],
                      [(0, [0] * 6, 0), (60, [1, 2, 3, 3, 3, 3], 6000), (120, [2, 4, 6, 6, 6, 6], 12000)])
    ds = load(ws, rows)
    ev = capacity.engine_evidence(ws, [ds])
    assert ev.step_token_bounds.to_dict("list") == {"le": [1024.0, 2048.0, 4096.0, math.inf],
                                                    "steps": [70.0, 90.0, 90.0, 90.0]}
    assert ev.length_top_bound == 20000.0 and ev.prompt_top == 5000.0
    assert ev.kv_config.empty
    no_intervals = pd.DataFrame(columns=list(capacity.scrape_intervals(ws, [ds]).columns))
    m = capacity.fit_model(no_intervals, pd.DataFrame(), ev, capacity.Assumptions())
    # prompts of up to 5000 tokens explain iterations of (1024, 2048]: vLLM V1 counts a prompt whole in
    # the iteration its prefill ends, so the histogram does not bound the budget
    assert (m.max_num_batched_tokens, m.sources["max_num_batched_tokens"].kind) == (8192, "assumed")
    assert "whole in the iteration its prefill ends" in m.sources["max_num_batched_tokens"].detail
    # prompts of at most 1000 tokens cannot: the largest iterations are steps of the budget
    short = capacity.EngineEvidence(kv_config=ev.kv_config, step_token_bounds=ev.step_token_bounds,
                                    length_top_bound=ev.length_top_bound, prompt_top=1000.0)
    m = capacity.fit_model(no_intervals, pd.DataFrame(), short, capacity.Assumptions())
    assert m.max_num_batched_tokens == 2048 and m.sources["max_num_batched_tokens"].kind == "fitted"

"""vLLM's automatic prefix caching in the step-level engines (app/engine/prefix.py): a case worked by
hand, the Python reference against the compiled twin bit for bit with the cache at work, the hit rates
that routing and replica counts give, and the exporter's families."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.fleet import run_fleet
from app.engine.outcomes import run_arrays
from app.engine.prefix import prefix_keys
from app.engine.replica import Replica, Requests, StepCounters
from app.engine.trace import PathSpec, Trace, TrafficSpec
from app.engine.twin_fleet import run_fleet_compiled, simulate

# a step lasts 0.1 s plus 0.01 s per prefill token: a TTFT shows the tokens prefilled
HAND_STEP = StepTime(base_s=0.1, per_decode_seq_s=0.0, per_prefill_token_s=0.01, per_context_token_s=0.0,
                     per_prefill_pair_s=0.0, noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)
HAND_ENGINE = EngineConfig(block_size=4, num_gpu_blocks=12, max_model_len=48, max_num_seqs=4,
                           max_num_batched_tokens=64, prefix_caching=True)
ONE_PATH = TrafficSpec(paths=(PathSpec(name="chat", served_name="chat", mean_rate=0.0, peak_to_trough=1.0,
                                       peak_hour_utc=0.0, prompt_median=10.0, prompt_sigma=0.0),),
                       max_model_len=48)


def _hand_trace() -> Trace:
    n = 5
    return Trace(origin=0.0, duration_s=5.0, warmup_s=0.0,
                 arrival_s=np.array([0.0, 0.05, 2.0, 3.0, 4.0]), path=np.zeros(n, dtype=np.int8),
                 prompt_tokens=np.array([10, 9, 16, 34, 9], dtype=np.int64),
                 output_tokens=np.array([3, 6, 2, 1, 1], dtype=np.int64), hits_max=np.zeros(n, dtype=bool),
                 request_id=np.arange(n, dtype=np.int64), spec=ONE_PATH,
                 prefix_group=np.array([0, 0, 0, -1, 0]), prefix_tokens=np.array([8, 8, 8, 0, 8], dtype=np.int32),
                 conversation=np.array([7, -1, 7, -1, -1]), history_tokens=np.array([0, 0, 5, 0, 0], dtype=np.int32))


def test_a_small_case_worked_by_hand() -> None:
    """Block size 4, a pool of 12 blocks, one replica; A, B, E share an 8-token system prompt (group
    blocks g0, g1); A and C are turns 1 and 2 of a conversation (C repeats A's 2 new tokens and 3
    answers: history 5); D shares nothing. The free queue is written head first; eK are empty blocks.

    - A (t 0, prompt 10, out 3): nothing cached. 3 blocks from the head; its prefill registers the full
      blocks g0, g1 (block 2 holds tokens 8-9, partial). Step 0.1 + 10 x 0.01 = 0.2: first token 0.2.
    - B (arrives 0.05, prompt 9, out 6) waits for A's step; at 0.2 it hits g0, g1 (held by A: shared,
      nothing leaves the free queue), prefills 1 token: needs ceil(9/4) - 2 = 1 block. Used blocks:
      g0, g1, A's block 2, B's block 2 = 4, not 6. Step 0.1 + 0.01: first token 0.31, TTFT 0.26.
    - A finishes at 0.41 holding 12 computed tokens: its block 2 (tokens 8-11, now full) is registered
      as the conversation's c2, and released last-first: c2 goes free, g1 and g0 stay (B holds them).
      The scrape at 0.35 reads 4 of 12 blocks (both running).
    - B decodes to 14 computed tokens (one more block, from the head), finishes at 0.81, registers its
      block 2 (b2) and frees [b3 (partial, empty), b2, g1, g0] onto the tail.
      Queue: [e6..e12, c2, b3, b2, g1, g0].
    - C (t 2, prompt 16 = 8 + 5 + 3): hits g0, g1, c2 (12 tokens, all three taken out of the queue),
      prefills 4 tokens (0.14: first token 2.14), registers c3; a decode step needs one block more.
      Released at 2.24: queue [e8..e12, b3, b2, c4, c3, c2, g1, g0].
    - D (t 3, prompt 34, out 1) shares nothing: 9 blocks from the head: e8..e12, b3, b2 (evicted),
      c4, c3 (evicted): 2 evictions. Its first token ends it at 3.44; it frees its 9 blocks last-first
      behind [c2, g1, g0].
    - E (t 4, prompt 9): the system prompt survived at the tail: hits g0, g1 (taken out of the queue),
      its 1 new block comes from the head: c2, evicted (3 evictions in all). Prefill 1 token: TTFT 0.11.

    Queries (prompt tokens at first scheduling) 10 + 9 + 16 + 34 + 9 = 78; hits 0 + 8 + 12 + 0 + 8 = 28.
    """
    trace = _hand_trace()
    config = FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35)
    ref = run_fleet(trace, config, drain=True)
    d = run_arrays(ref)
    assert d["cached_tokens"].tolist() == [0, 8, 12, 0, 8]
    assert d["ttft_s"] == pytest.approx([0.2, 0.26, 0.14, 0.44, 0.11], abs=1e-6)
    assert d["e2e_s"] == pytest.approx([0.41, 0.76, 0.24, 0.44, 0.11], abs=1e-6)
    c = ref.counters[0]
    assert (c.prefix_queries.sum(), c.prefix_hits.sum()) == (78, 28)
    # the step that scheduled B ended at 0.31: the scrape at 0.35 (grid point 1) counts B's query
    assert (c.prefix_queries[1], c.prefix_hits[1]) == (10 + 9, 8)
    assert c.gauges[1].tolist() == [2, 0, 4 / 12]  # A and B running, 4 distinct blocks
    # the compiled twin: the same times, hits, gauges and evictions
    fast = run_fleet_compiled(trace, config)
    e = run_arrays(fast)
    for f in ("first_token_us", "finish_us", "cached_tokens", "scheduled_us"):
        assert np.array_equal(d[f], e[f]), f
    assert np.array_equal(c.gauges, fast.counters[0].gauges)
    assert int(simulate(trace, config).evictions[0]) == 3


def test_the_reference_replica_keeps_its_books() -> None:
    """The hand case's replica after the run: every block free, none referenced, the queue as the
    docstring above leaves it (E's release: [D's 9 blocks, e(E's block 2), g1, g0] behind nothing)."""
    trace = _hand_trace()
    keys = prefix_keys(trace, 4)
    reqs = Requests(trace.arrival_s, trace.path, trace.prompt_tokens, trace.output_tokens, trace.hits_max,
                    HAND_STEP, keys)
    rep = Replica(0, HAND_ENGINE, HAND_STEP, reqs, StepCounters(20, 1, [1.0], [1.0]), 0.0, 0.35, seed=1)
    for i in range(reqs.n):
        while rep.plan_end <= reqs.arrival[i]:
            rep.process()
        rep.enqueue(i, reqs.arrival[i])
    while rep.plan_end < float("inf"):
        rep.process()
    assert rep.used == 0 and len(rep.freeq) == 12
    assert all(v == 0 for v in rep.kv_ref.values()) and set(rep.kv_ref) == {k for k in rep.freeq if k >= 0}
    assert rep.evictions == 3
    # what is cached at the end: D's 8 full blocks and the system prompt's 2 (E's own block 2 was partial)
    queue = list(rep.freeq)
    assert [k >= 0 for k in queue] == [False] + [True] * 8 + [False, True, True]
    g0 = (keys.prefix_entity[0] << 24) | 0
    assert queue[-1] == g0 and queue[-2] == g0 | 1


def test_caching_on_a_trace_that_shares_nothing_changes_nothing() -> None:
    """The interface's promise: without prefix arrays (or with the cache off) the engines run as before."""
    trace = _hand_trace()
    for name in ("prefix_group", "prefix_tokens", "conversation", "history_tokens"):
        setattr(trace, name, None)
    on = FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35)
    off = FleetConfig(replicas=1, engine=EngineConfig(**{**HAND_ENGINE.__dict__, "prefix_caching": False}),
                      step=HAND_STEP, scrape_interval_s=0.35)
    a, b = run_arrays(run_fleet(trace, on, drain=True)), run_arrays(run_fleet(trace, off, drain=True))
    for f in ("first_token_us", "finish_us", "scheduled_us", "cached_tokens"):
        assert np.array_equal(a[f], b[f]), f
    assert a["cached_tokens"].sum() == 0
    # without the cache every prompt token is prefilled: B's TTFT is 0.1 + 9 x 0.01 after A's step
    assert a["ttft_s"][1] == pytest.approx(0.2 + 0.19 - 0.05, abs=1e-6)


def test_inconsistent_prefix_fields_are_refused() -> None:
    trace = _hand_trace()
    trace.history_tokens = np.array([0, 0, 9, 0, 0], dtype=np.int32)  # 8 + 9 > 16
    with pytest.raises(ValueError, match=r"trace request 2 \(id 2\): prefix_tokens \+ history_tokens > prompt"):
        prefix_keys(trace, 4)
    trace = _hand_trace()
    trace.prefix_tokens = np.array([8, 8, 4, 0, 8], dtype=np.int32)
    with pytest.raises(ValueError, match="conversation 7 with another shared prefix"):
        prefix_keys(trace, 4)

"""Issue 41, the conversation case: a path's cached share split into a shared prefix and conversation
history, the conversations drawn from the replayed requests, and what the twin's prefix cache serves
of them at one and two replicas under load-based and prefix-aware routing."""

from __future__ import annotations

import numpy as np
import pytest

from app.economics.model import conversations as conv
from app.economics.model.demand import PrefixSplit
from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.outcomes import run_arrays
from app.engine.trace import PathSpec, Trace, TrafficSpec
from app.engine.twin_fleet import run_fleet_compiled


def test_a_chain_by_hand() -> None:
    """Blocks of 4 tokens, every request behind a prefix of 4 (one block) but the last (none); a turn is
    followed by another when its draw is below 0.5; a conversation not continued within 20 s of being
    ready has ended; a follow-up's prompt must hold the whole conversation so far.

    - 0 (t=0; 20 + 10 tokens) goes on, ready at 5; 1 (t=1; 9 + 3) goes on, ready at 6.
    - 2 (t=10, prompt 16): of the ready ones, 0 is 30 tokens long, 1 is 12: 2 continues 1, history
      9 + 3 - 1 - 4 = 7 (all of 1 but its answer's last token, whose KV is never cached, and the prefix);
      its own draw (0.9) ends the conversation there.
    - 3 (t=12, prompt 40) continues 0: history 20 + 10 - 1 - 4 = 25; it goes on, ready at 20.
    - 4 (t=30, prompt 7) holds no conversation ready (3: 45 tokens): a first turn, going on at 35.
    - 5 (t=50): 3 (ready at 20) has ended; 4 starts with another prefix (4 against 0).
    """
    arrival = np.array([0.0, 1.0, 10.0, 12.0, 30.0, 50.0])
    prompt = np.array([20, 9, 16, 40, 7, 20])
    output = np.array([10, 3, 5, 5, 5, 5])
    held = np.array([4, 4, 4, 4, 4, 0])
    ready = np.array([5.0, 6.0, 15.0, 20.0, 35.0, 55.0])
    wish = np.array([0.1, 0.1, 0.9, 0.1, 0.1, 0.1])
    c = np.empty(6, dtype=np.int64)
    h = np.empty(6, dtype=np.int64)
    p = np.empty(6, dtype=np.int64)
    conv._chain(arrival, prompt, output, held, ready, wish, 0.5, 20.0, 4, 16, c, h, p)
    assert c.tolist() == [0, 1, 1, 0, 4, 5]
    assert h.tolist() == [0, 0, 7, 25, 0, 0]
    assert p.tolist() == [-1, -1, 1, 0, -1, -1]  # the turn each follows
    # the history a cache keeping the conversation serves: the leading whole blocks of prefix + history
    assert conv.history_hits(held, h, 4).tolist() == [0, 0, 4, 24, 0, 0]
    # looking at the earliest ready conversation only, 2 would not have found 1 behind 0
    conv._chain(arrival, prompt, output, held, ready, wish, 0.5, 20.0, 4, 1, c, h, p)
    assert c.tolist()[:3] == [0, 1, 2]
    # no turn goes on: no conversation
    conv._chain(arrival, prompt, output, held, ready, wish, 0.0, 20.0, 4, 16, c, h, p)
    assert c.tolist() == list(range(6)) and not h.any() and (p == -1).all()


def test_a_turns_gap_is_its_wait_after_the_estimated_answer() -> None:
    """What a closed-loop replay keeps (``Turns.gap_s``): a later turn's arrival less its previous turn's
    arrival, TTFT and output x TPOT (the split's estimate of the answer), never less than the think
    time it drew; a first turn follows none."""
    rng = np.random.default_rng(7)
    n = 400
    arrival = np.sort(rng.uniform(0.0, 1200.0, n))
    output = rng.integers(20, 200, n)
    prompt = 64 + rng.integers(1, 40, n) + np.arange(n) % 7 * 300  # long prompts can hold a history
    held = np.full(n, 64)
    split = PrefixSplit(cached_share=0.5, conversation_share=0.5, conversation_source="given",
                        conversation_detail="", shared_tokens=64, shared_share=0.1, followup_share=0.6, think_s=8.0,
                        ttft_s=0.4, tpot_s=0.02)
    t = conv.turns(arrival, prompt, output, held, split, 16, conv.chain_rng(1, 0))
    later = t.previous >= 0
    assert later.sum() > 50 and (t.previous[later] < np.flatnonzero(later)).all()
    j = t.previous[later]
    assert t.gap_s[later] == pytest.approx(arrival[later] - (arrival[j] + 0.4 + output[j] * 0.02), abs=1e-9)
    assert (t.gap_s[later] >= 0).all() and (t.gap_s[~later] == 0).all()
    # a turn continues its previous turn's conversation, and chain() is its first two fields
    assert (t.conversation[later] == t.conversation[j]).all()
    c, h = conv.chain(arrival, prompt, output, held, split, 16, conv.chain_rng(1, 0))
    assert np.array_equal(c, t.conversation) and np.array_equal(h, t.history)


def test_the_split_is_the_least_conversation_the_prompt_lengths_allow() -> None:
    """Blocks of 4; prompts 9, 13, 30 and 48 (100 tokens), caps 8, 12, 28, 44. Their 1 % quantile is 9.12,
    so a prefix every request starts with is at most 8 tokens and serves 8 + 8 + 8 + 8 = 32 %.

    - 50 % cached: 32 % shared, the rest conversation, 36 % of the cached tokens;
    - 30 % cached: a shared prefix alone can serve it (the size nearest, 8 tokens: 32 %), no conversation;
    - 50 % cached, 20 % of it given as conversation: the shared prefix nearest 40 % (12 tokens: 44 %)."""
    prompt = np.array([9, 13, 30, 48])
    assert conv.short_prompt_prefix(prompt, 4) == 8
    size, served, share, kind, detail = conv.split_cached(prompt, 0.5, 4, None)
    assert (size, kind) == (8, "assumed") and served == pytest.approx(0.32) and share == pytest.approx(0.36)
    assert "the least conversation the prompt lengths allow" in detail
    size, served, share, kind, _ = conv.split_cached(prompt, 0.3, 4, None)
    assert (size, served, share, kind) == (8, pytest.approx(0.32), 0.0, "assumed")
    size, served, share, kind, _ = conv.split_cached(prompt, 0.5, 4, 0.2)
    assert (size, kind) == (12, "given") and served == pytest.approx(0.44) and share == pytest.approx(0.12)
    assert conv.split_cached(prompt, 0.0, 4, None)[:3] == (0, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        conv.split_cached(prompt, 0.5, 4, 1.5)
    assert conv.conversation_shares(["0.6", "chat=40%"]) == {"*": 0.6, "chat": 0.4}
    with pytest.raises(ValueError, match="PATH=SHARE"):
        conv.conversation_shares(["chat=lots"])


def _trace(seed: int = 3, n: int = 600, rate: float = 0.5) -> tuple[Trace, np.ndarray]:
    """One path of ``n`` requests (Poisson at ``rate``/s) behind a 64-token prefix, chained into
    conversations; (trace, the history tokens a cache keeping every conversation would serve)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    prompt = (64 + rng.lognormal(np.log(400), 0.6, n)).astype(np.int64)
    output = np.minimum(rng.lognormal(np.log(60), 0.5, n), 300).astype(np.int64) + 1
    block = 16
    held = np.minimum((prompt - 1) // block * block, 64)
    split = PrefixSplit(cached_share=0.6, conversation_share=0.5, conversation_source="given", conversation_detail="",
                        shared_tokens=64, shared_share=0.1, followup_share=0.7, think_s=10.0, ttft_s=1.0, tpot_s=0.05)
    c, h = conv.chain(arrival, prompt, output, held, split, block, conv.chain_rng(seed, 0))
    spec = TrafficSpec(paths=(PathSpec(name="chat", served_name="chat", mean_rate=rate, peak_to_trough=1.0,
                                       peak_hour_utc=0.0, prompt_median=400, prompt_sigma=0.6),), max_model_len=4096)
    trace = Trace(origin=1_760_000_000.0, duration_s=float(arrival[-1] + 120), warmup_s=0.0, arrival_s=arrival,
                  path=np.zeros(n, dtype=np.int8), prompt_tokens=prompt, output_tokens=output,
                  hits_max=np.zeros(n, dtype=bool), request_id=np.arange(n, dtype=np.int64), spec=spec,
                  prefix_group=np.zeros(n, dtype=np.int64), prefix_tokens=held.astype(np.int32), conversation=c,
                  history_tokens=h)
    return trace, conv.history_hits(held, np.where(c >= 0, h, 0), block)


def _served(trace: Trace, replicas: int, router: str) -> np.ndarray:
    engine = EngineConfig(model="t", max_num_seqs=64, max_num_batched_tokens=2048, block_size=16,
                          num_gpu_blocks=100_000, max_model_len=4096, prefix_caching=True)
    step = StepTime(base_s=0.005, per_decode_seq_s=1e-4, per_prefill_token_s=2e-5, per_context_token_s=0.0,
                    per_prefill_pair_s=0.0, noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)
    config = FleetConfig(replicas=replicas, router=router, engine=engine, step=step, scrape_interval_s=15.0,
                         affinity_margin=1000)
    return run_arrays(run_fleet_compiled(trace, config, seed=1))["cached_tokens"]


def test_the_twin_serves_the_history_at_one_replica_half_of_it_at_two_and_all_of_it_sticky() -> None:
    """At N'=1 every turn finds its conversation where it left it: the twin serves each request its
    shared prefix (but the very first) and its history's whole blocks, to the token. At N'=2 a least
    outstanding router sends a follow-up to either replica: about half the history is served (and the
    history that was, both replicas hold the prefix). The prefix-aware router (a margin no load
    reaches) keeps every turn home: all of it again."""
    trace, history = _trace()
    follow = history > 0
    assert 0.3 < follow.mean() < 0.7 and history.sum() > 0.2 * trace.prompt_tokens.sum()
    one = _served(trace, 1, "least_outstanding")
    expected = trace.prefix_tokens.astype(np.int64) + history
    expected[0] = 0
    assert np.array_equal(one, expected)
    two = _served(trace, 2, "least_outstanding")
    shared = trace.prefix_tokens.astype(np.int64)
    kept = (two - shared)[follow].clip(min=0).sum() / history.sum()
    assert 0.35 < kept < 0.65, kept
    sticky = _served(trace, 2, "prefix_aware")
    assert (sticky - shared)[follow].clip(min=0).sum() == history.sum()


def test_the_follow_up_factor_by_block_by_hand() -> None:
    """Blocks of 60 s from t = 1,000 (unix): factors 0.5, 2, 0. Requests at 10 s, 70 s and 130 s after
    an origin of 1,000 fall in blocks 0, 1 and 2; one at -5 s and one at 200 s outside (factor 1).
    With factor 0 no request wishes to go on; the draws are those without factors."""
    split = PrefixSplit(cached_share=0.5, conversation_share=1.0, conversation_source="given", conversation_detail="",
                        shared_tokens=0, shared_share=0.0, followup_share=0.5, think_s=1.0,
                        followup_by_block=np.array([0.5, 2.0, 0.0]), followup_origin=1000.0, followup_block_s=60.0)
    assert split.factor_at(1000.0, np.array([10.0, 70.0, 130.0, -5.0, 200.0])).tolist() == [0.5, 2.0, 0.0, 1.0, 1.0]
    # an origin 60 s later moves every request one block on
    assert split.factor_at(1060.0, np.array([10.0, 70.0])).tolist() == [2.0, 0.0]
    arrival = np.arange(130.0, 190.0, 1.0)  # every request in the block of factor 0 ...
    prompt = np.full(len(arrival), 64, dtype=np.int64)
    held = np.zeros(len(arrival), dtype=np.int64)
    conv_, _ = conv.chain(arrival, prompt, np.full(len(arrival), 1), held, split, 16, np.random.default_rng(1), 1000.0)
    assert (conv_ == -1).all()  # ... so no conversation has a second turn

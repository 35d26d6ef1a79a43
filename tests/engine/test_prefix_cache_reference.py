"""The engine's prefix cache against a deliberately naive, step-by-step transcription of vLLM V1's.

The naive engine shares no code with ``app.engine``: physical blocks with a key and a reference count,
a free queue as a plain list (head first), a key -> block map, per request the list of its blocks;
every step walks every request. It caches a block the step it becomes full, generated tokens
included, as vLLM does (the engines register generated blocks only when they are released: the
simplification ``app/engine/prefix.py`` argues changes no hit while a conversation's turns do not
overlap, which this test holds it to). Both run the same requests on one replica (noise off) and must
give the same first-scheduled, first-token and finish times, preemptions and hits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.fleet import run_fleet
from app.engine.prefix import KEY_SHIFT, prefix_keys
from tests.support.prefix_trace import shared_trace

STEP = StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)


@dataclass
class Block:
    key: int | None = None
    ref: int = 0


@dataclass
class Req:
    id: int
    arrival: float
    prompt: int
    target: int
    prefix_key: int  # entity of the shared prefix's blocks
    prefix_blocks: int
    own_key: int  # entity of the other blocks
    first_cap: int
    computed: int = 0
    generated: int = 0
    blocks: list[int] = field(default_factory=list)
    cached_upto: int = 0  # blocks registered or hit
    no_more: bool = False  # a block's key was cached already: the rest stay unkeyed
    scheduled: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    preemptions: int = 0
    hit_tokens: int = -1  # at the first scheduling
    in_prefill: bool = True

    def key(self, j: int) -> int:
        return ((self.prefix_key if j < self.prefix_blocks else self.own_key) << KEY_SHIFT) | j


@dataclass
class NaiveCache:
    engine: EngineConfig
    waiting: list[Req] = field(default_factory=list)
    running: list[Req] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.blocks = [Block() for _ in range(self.engine.num_gpu_blocks)]
        self.free_queue = list(range(self.engine.num_gpu_blocks))
        self.cached: dict[int, int] = {}  # key -> block
        self.bs = self.engine.block_size

    def allocate(self, r: Req, n: int) -> None:
        for _ in range(n):
            b = self.free_queue.pop(0)
            block = self.blocks[b]
            if block.key is not None:
                del self.cached[block.key]
                block.key = None
            block.ref = 1
            r.blocks.append(b)

    def cache_full(self, r: Req, tokens: int) -> None:
        """vLLM's cache_full_blocks: every block full after ``tokens`` tokens, first copy kept."""
        while not r.no_more and r.cached_upto < tokens // self.bs:
            key = r.key(r.cached_upto)
            if key in self.cached:
                r.no_more = True
                break
            self.cached[key] = r.blocks[r.cached_upto]
            self.blocks[r.blocks[r.cached_upto]].key = key
            r.cached_upto += 1

    def free(self, r: Req) -> None:
        for b in reversed(r.blocks):
            self.blocks[b].ref -= 1
            if self.blocks[b].ref == 0:
                self.free_queue.append(b)
        r.blocks, r.cached_upto, r.no_more, r.computed = [], 0, False, 0

    def lookup(self, r: Req, tokens: int) -> list[int]:
        most = (tokens - 1) // self.bs
        if math.isnan(r.scheduled):
            most = min(most, r.first_cap)
        hit = []
        for j in range(most):
            b = self.cached.get(r.key(j))
            if b is None:
                break
            hit.append(b)
        return hit

    def run(self, reqs: list[Req], step: StepTime) -> None:
        bs, nb, budget_max = self.bs, self.engine.num_gpu_blocks, self.engine.max_num_batched_tokens
        pending = sorted(reqs, key=lambda r: (r.arrival, r.id))
        t = 0.0
        while pending or self.waiting or self.running:
            if not self.waiting and not self.running:
                t = max(t, pending[0].arrival)
            while pending and pending[0].arrival <= t:
                self.waiting.append(pending.pop(0))
            budget = budget_max
            work: list[tuple[Req, int, int]] = []  # (request, new tokens, computed before)
            preempted = False
            idx = 0
            while idx < len(self.running) and budget > 0:
                r = self.running[idx]
                new = min(r.prompt + r.generated - r.computed, budget)
                need = -(-(r.computed + new) // bs) - len(r.blocks)
                ok = True
                while need > len(self.free_queue):
                    victim = self.running.pop()
                    self.free(victim)
                    victim.in_prefill = True
                    victim.preemptions += 1
                    self.waiting.insert(0, victim)
                    preempted = True
                    if victim is r:
                        ok = False
                        break
                if not ok:
                    break
                self.allocate(r, need)
                self.cache_full(r, r.computed + new)
                budget -= new
                work.append((r, new, r.computed))
                idx += 1
            if not preempted:
                while self.waiting and budget > 0 and len(self.running) < self.engine.max_num_seqs:
                    r = self.waiting[0]
                    total = r.prompt + r.generated
                    hit = self.lookup(r, total)
                    taken = sum(1 for b in hit if self.blocks[b].ref == 0)
                    need = -(-total // bs) - len(hit) + taken
                    if need > len(self.free_queue) - int(self.engine.admission_watermark * nb):
                        break
                    self.waiting.pop(0)
                    self.running.append(r)
                    for b in hit:
                        if self.blocks[b].ref == 0:
                            self.free_queue.remove(b)
                        self.blocks[b].ref += 1
                    r.blocks, r.cached_upto, r.computed = list(hit), len(hit), len(hit) * bs
                    new = min(total - r.computed, budget)
                    if math.isnan(r.scheduled):
                        r.scheduled, r.hit_tokens = t, r.computed
                    self.allocate(r, -(-(r.computed + new) // bs) - len(hit))
                    self.cache_full(r, r.computed + new)
                    budget -= new
                    work.append((r, new, r.computed))
            decode = [(r, new, comp) for r, new, comp in work if not r.in_prefill]
            prefill = [(r, new, comp) for r, new, comp in work if r.in_prefill]
            if work:
                dur = (step.base_s + step.per_decode_seq_s * len(decode)
                       + step.per_decode_seq_sq_s * len(decode) ** 2
                       + step.per_prefill_token_s * sum(n for _, n, _ in prefill)
                       + step.per_context_token_s * (sum(c + 1 for _, _, c in decode)
                                                     + sum(c + n for _, n, c in prefill))
                       + step.per_prefill_pair_s * sum(n * (c + n / 2) for _, n, c in prefill))
            else:
                dur = 1e-3
            t += dur
            for r, new, _ in work:
                r.computed += new
                if r.computed == r.prompt + r.generated:
                    r.generated += 1
                    r.in_prefill = False
                    if r.generated == 1:
                        r.first_token = t
                    if r.generated == r.target:
                        r.finish = t
                        self.running.remove(r)
                        self.free(r)


CASES = {
    # light: most conversations find their history (prompt and answers) still cached at the next turn
    "turns hit their history": (2100, {"conversations": 300, "singles": 300, "batch": 50, "think_s": 10.0,
                                       "min_think_s": 10.0}),
    # busy, a small pool: preemptions (a re-prefill hits its own released blocks) and evictions
    "preemptions and evictions": (1100, {"conversations": 700, "singles": 1200, "batch": 250, "think_s": 40.0,
                                         "min_think_s": 60.0}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_engine_caches_as_a_naive_step_by_step_transcription(name: str) -> None:
    """Half an hour on one replica: conversations behind a 640-token system prompt (some requests the
    prompt alone), one-shot requests, some sharing nothing, and the batch path's own prompt."""
    blocks, load = CASES[name]
    trace = shared_trace(9, 1800.0, chat_system=640, plain_share=0.1, repeat_share=0.03, **load)
    engine = EngineConfig(num_gpu_blocks=blocks, max_model_len=16384, prefix_caching=True)
    run = run_fleet(trace, FleetConfig(replicas=1, step=STEP, engine=engine), seed=1, drain=True)
    keys = prefix_keys(trace, engine.block_size)
    r = run.reqs
    ref = [Req(i, r.eng_arrival[i], r.prompt[i], r.target[i], int(keys.prefix_entity[i]), int(keys.prefix_blocks[i]),
               int(keys.entity[i]), int(keys.first_cap[i])) for i in range(r.n)]
    NaiveCache(engine).run(ref, STEP)
    # a conversation's turns never overlap in time (the engines' simplification holds here)
    conv = trace.conversation
    for c in np.unique(conv[conv >= 0]):
        turns = sorted((q for q in ref if conv[q.id] == c), key=lambda q: q.arrival)
        assert all(a.finish < b.arrival for a, b in zip(turns, turns[1:], strict=False))
    assert [q.preemptions for q in ref] == r.npre
    assert [q.hit_tokens for q in ref] == r.cached
    np.testing.assert_allclose([q.scheduled for q in ref], r.sched_t, atol=1e-7)
    np.testing.assert_allclose([q.first_token for q in ref], r.first_t, atol=1e-7)
    np.testing.assert_allclose([q.finish for q in ref], r.finish_t, atol=1e-7)
    cached = np.array(r.cached)
    beyond_prompt = (conv >= 0) & (cached > 640)  # a turn that hit its earlier turns' answers too
    if blocks > 2000:
        assert beyond_prompt.sum() > 0.5 * (trace.history_tokens > 0).sum()
    else:
        assert sum(r.npre) > 20

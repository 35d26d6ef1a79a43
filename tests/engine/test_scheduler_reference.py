"""The engine against a deliberately naive, step-by-step transcription of the vLLM V1 scheduler.

The reference shares no code with ``app.engine.replica``: every step walks every request, blocks are
counted per request, nothing is advanced in closed form. Both run the same requests on one replica
(noise off) and must give the same first-scheduled, first-token and finish times and preemption counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np
import pytest

from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.fleet import run_fleet
from app.simulator import generate_trace, scenario_trace
from app.simulator.traffic import DEFAULT_DAY


@dataclass
class Req:
    id: int
    engine_arrival: float
    prompt: int
    target: int
    computed: int = 0  # tokens whose KV is computed
    generated: int = 0
    blocks: int = 0
    scheduled: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    preemptions: int = 0
    in_prefill: bool = True  # admitted (or re-admitted after a preemption) and no token out yet


@dataclass
class ReferenceEngine:
    engine: EngineConfig
    step: StepTime
    waiting: list[Req] = field(default_factory=list)
    running: list[Req] = field(default_factory=list)
    free: int = 0

    def run(self, reqs: list[Req]) -> None:
        bs, budget_max = self.engine.block_size, self.engine.max_num_batched_tokens
        self.free = self.engine.num_gpu_blocks
        pending = sorted(reqs, key=lambda r: (r.engine_arrival, r.id))
        t = 0.0
        while pending or self.waiting or self.running:
            if not self.waiting and not self.running:
                t = max(t, pending[0].engine_arrival)
            while pending and pending[0].engine_arrival <= t:
                self.waiting.append(pending.pop(0))
            budget = budget_max
            work: list[tuple[Req, int]] = []
            preempted = False
            idx = 0
            while idx < len(self.running) and budget > 0:
                r = self.running[idx]
                tokens_total = r.prompt + r.generated  # known tokens; the last sampled one has no KV yet
                new = min(tokens_total - r.computed, budget)
                need = -(-(r.computed + new) // bs) - r.blocks
                ok = True
                while need > self.free:
                    victim = self.running.pop()
                    self.free += victim.blocks
                    victim.blocks, victim.computed, victim.in_prefill = 0, 0, True
                    victim.preemptions += 1
                    self.waiting.insert(0, victim)
                    preempted = True
                    if victim is r:
                        ok = False
                        break
                if not ok:
                    break
                self.free -= need
                r.blocks += need
                budget -= new
                work.append((r, new))
                idx += 1
            if not preempted:
                while self.waiting and budget > 0 and len(self.running) < self.engine.max_num_seqs:
                    r = self.waiting[0]
                    tokens_total = r.prompt + r.generated
                    # the whole prompt must fit, leaving the watermark free
                    if -(-tokens_total // bs) > self.free - int(self.engine.admission_watermark
                                                                * self.engine.num_gpu_blocks):
                        break
                    new = min(tokens_total, budget)
                    need = -(-new // bs)
                    self.waiting.pop(0)
                    self.running.append(r)
                    self.free -= need
                    r.blocks += need
                    budget -= new
                    if math.isnan(r.scheduled):
                        r.scheduled = t
                    work.append((r, new))
            decode = [r for r, _ in work if not r.in_prefill]
            prefill = [(r, new) for r, new in work if r.in_prefill]
            s = self.step
            if work:
                n, u = len(decode), s.per_decode_seq_sq_until
                # past u the squared term goes on along its tangent at u: u^2 + 2u (n - u)
                squared = n ** 2 if u <= 0 or n <= u else u ** 2 + 2 * u * (n - u)
                dur = (s.base_s + s.per_decode_seq_s * n + s.per_decode_seq_sq_s * squared
                       + s.per_prefill_token_s * sum(n for _, n in prefill)
                       + s.per_context_token_s * (sum(r.computed + 1 for r in decode)
                                                  + sum(r.computed + n for r, n in prefill))
                       + s.per_prefill_pair_s * sum(n * (r.computed + n / 2) for r, n in prefill))
            else:
                dur = 1e-3
            t += dur
            for r, new in work:
                r.computed += new
                if r.computed == r.prompt + r.generated:  # all known tokens computed: a token comes out
                    r.generated += 1
                    r.in_prefill = False
                    if r.generated == 1:
                        r.first_token = t
                    if r.generated == r.target:
                        r.finish = t
                        self.running.remove(r)
                        self.free += r.blocks
                        r.blocks = 0


@pytest.mark.parametrize("blocks,g,watermark,batch_sq,sq_until", [
    (2100, 0.5, 0.0, 0.0, 0.0), (3500, 0.15, 0.0, 0.0, 0.0), (2600, 0.4, 0.03, 2e-6, 0.0),
    (2600, 0.4, 0.0, 2e-6, 12.0)])
def test_engine_matches_a_naive_step_by_step_scheduler(blocks: int, g: float, watermark: float,
                                                       batch_sq: float, sq_until: float) -> None:
    """Also with the mechanics only the accuracy harness's fleets use: an admission watermark and a
    step time quadratic in the batch; and with the twin's fitted law, quadratic up to a batch and on
    its tangent past it."""
    tr = scenario_trace(generate_trace(5, hours=0.25, warmup_s=0, start=DEFAULT_DAY + timedelta(hours=12)), g=g)
    step = StepTime(noise_sigma=0.0, per_decode_seq_sq_s=batch_sq, per_decode_seq_sq_until=sq_until)
    engine = EngineConfig(num_gpu_blocks=blocks, admission_watermark=watermark)
    run = run_fleet(tr, FleetConfig(replicas=1, step=step, engine=engine), seed=1, drain=True)
    r = run.reqs
    ref = [Req(i, r.eng_arrival[i], r.prompt[i], r.target[i]) for i in range(r.n)]
    ReferenceEngine(engine, step).run(ref)
    assert sum(q.preemptions for q in ref) > (500 if blocks < 2500 else 10)
    assert [q.preemptions for q in ref] == r.npre
    np.testing.assert_allclose([q.first_token for q in ref], r.first_t, atol=1e-7)
    np.testing.assert_allclose([q.finish for q in ref], r.finish_t, atol=1e-7)
    np.testing.assert_allclose([q.scheduled for q in ref], r.sched_t, atol=1e-7)
    if sq_until:  # the batch went past the limit: the law past it is what was compared
        unlimited = run_fleet(tr, FleetConfig(replicas=1, step=replace(step, per_decode_seq_sq_until=0.0),
                                              engine=engine), seed=1, drain=True)
        assert max(unlimited.reqs.finish_t) > max(r.finish_t) + 1.0

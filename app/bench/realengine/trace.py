"""The open-loop trace the real-engine harness drives: Poisson arrivals whose rate follows a slow
sine (a compressed day) with bursts on top, lognormal prompt and output lengths.

Traces of one seed are *coupled* across traffic multipliers: arrivals are drawn once at the highest
rate the harness asks for and thinned, so the trace at x0.6 is a subset of the trace at x1.0 — the
scenarios differ by their load, not by the luck of the draw. A context multiplier scales the prompt of
each request (the same requests, longer prompts).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from app.engine.trace import Conversations
from app.simulator.traffic import draw_followups, lognormal_tokens

MAX_TRAFFIC = 3.0  # the highest multiplier a coupled trace can be thinned to


@dataclass(frozen=True)
class Burst:
    start_s: float
    duration_s: float
    factor: float  # the rate is multiplied by this during the burst


@dataclass(frozen=True)
class TraceSpec:
    """One path's traffic: rate (requests/s) = ``rate`` x (1 + ``sine_amplitude`` sin(2 pi t /
    ``sine_period_s``)) x the burst factor; prompt and output lengths lognormal around their medians,
    clipped to [``*_min``, ``*_max``]."""

    duration_s: float = 720.0
    rate: float = 2.4
    sine_amplitude: float = 0.35
    sine_period_s: float = 480.0
    bursts: tuple[Burst, ...] = (Burst(420.0, 30.0, 2.2),)
    prompt_median: float = 300.0
    prompt_sigma: float = 0.7
    prompt_min: int = 16
    prompt_max: int = 1536
    output_median: float = 64.0
    output_sigma: float = 0.8
    output_min: int = 4
    output_max: int = 400
    vocab: int = 8192
    first_id: int = 3  # ids below are the special tokens
    seed: int = 7
    conversations: Conversations = field(default_factory=Conversations)

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        r = self.rate * (1.0 + self.sine_amplitude * np.sin(2 * math.pi * t / self.sine_period_s))
        for b in self.bursts:
            r = np.where((t >= b.start_s) & (t < b.start_s + b.duration_s), r * b.factor, r)
        return r

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> TraceSpec:
        d = dict(d)
        d["bursts"] = tuple(Burst(**b) for b in d.get("bursts", ()))
        d["conversations"] = Conversations(**d.get("conversations", {}))
        return cls(**d)

    def system_ids(self) -> list[int]:
        """The system prompt's token ids (the same for every request of the path)."""
        return prompt_ids(self.seed * 1_000_003 + 1, self.conversations.system_tokens, self)


@dataclass
class Trace:
    """Requests in arrival order: arrival (s from the start), prompt and output tokens, a request seed
    from which the driver draws the prompt's token ids."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    request_seed: np.ndarray
    spec: TraceSpec
    traffic: float = 1.0
    context: float = 1.0
    notes: list[str] = field(default_factory=list)
    # per conversation, its follow-up turns: (think s, message tokens, output tokens) each
    followups: list[list[tuple[float, int, int]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def write_jsonl(self, path: Path) -> Path:
        """One line per conversation (a single request when it has no follow-up turns)."""
        with path.open("w") as f:
            for k, (a, p, o, s) in enumerate(zip(self.arrival_s, self.prompt_tokens, self.output_tokens,
                                                 self.request_seed, strict=True)):
                row = {"arrival_s": round(float(a), 6), "prompt_tokens": int(p), "output_tokens": int(o),
                       "seed": int(s)}
                if self.followups and self.followups[k]:
                    row["followups"] = [[round(t, 3), int(m), int(n)] for t, m, n in self.followups[k]]
                f.write(json.dumps(row) + "\n")
        return path


def generate(spec: TraceSpec, traffic: float = 1.0, context: float = 1.0, max_model_len: int | None = None
             ) -> Trace:
    """The trace of ``spec`` at ``traffic`` x its rate and prompts x ``context`` (coupled: see the
    module docstring); a prompt is cut so that prompt + output fits ``max_model_len`` (the engine
    would refuse the request)."""
    if not 0 < traffic <= MAX_TRAFFIC:
        raise ValueError(f"traffic multiplier {traffic}: expected in (0, {MAX_TRAFFIC}]")
    rng = np.random.default_rng(spec.seed)
    grid = np.linspace(0, spec.duration_s, int(spec.duration_s * 10) + 1)
    peak = float(spec.rate_at(grid).max()) * MAX_TRAFFIC
    n = rng.poisson(peak * spec.duration_s)
    t = np.sort(rng.uniform(0, spec.duration_s, n))
    u = rng.uniform(0, 1, n)
    prompt = lognormal_tokens(rng, n, spec.prompt_median, spec.prompt_sigma, spec.prompt_min, spec.prompt_max)
    output = lognormal_tokens(rng, n, spec.output_median, spec.output_sigma, spec.output_min, spec.output_max)
    seeds = rng.integers(0, 2**31 - 1, n)
    keep = u < spec.rate_at(t) * traffic / peak
    prompt = prompt[keep]
    if context != 1.0:
        prompt = np.maximum(np.rint(prompt * context), 1).astype(np.int64)
    if max_model_len is not None:
        prompt = np.maximum(np.minimum(prompt, max_model_len - output[keep]), 1)
    trace = Trace(arrival_s=t[keep], prompt_tokens=prompt, output_tokens=output[keep], request_seed=seeds[keep],
                  spec=spec, traffic=traffic, context=context)
    if spec.conversations.turns_mean > 1.0:
        # a stream of its own, so that the single-turn draws above stay those of a trace without turns;
        # drawn for every candidate and thinned alike (coupled across traffic multipliers)
        crng = np.random.default_rng([spec.seed, 1])
        follow, think, message = draw_followups(crng, n, spec.conversations)
        answer = lognormal_tokens(crng, len(think), spec.output_median, spec.output_sigma, spec.output_min,
                                  spec.output_max)
        at = np.cumsum(follow)[:-1]
        think, message, answer = np.split(think, at), np.split(message, at), np.split(answer, at)
        trace.followups = [
            [(float(t_), int(max(np.rint(m_ * context), 1)), int(o_)) for t_, m_, o_ in zip(think[i], message[i],
                                                                                               answer[i], strict=True)]
            for i in np.flatnonzero(keep)]
    return trace


def prompt_ids(seed: int, length: int, spec: TraceSpec) -> list[int]:
    """The token ids of a request's prompt: random, so that no two prompts share a cached prefix."""
    rng = np.random.default_rng(int(seed))
    return rng.integers(spec.first_id, spec.vocab, length).tolist()

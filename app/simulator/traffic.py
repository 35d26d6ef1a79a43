"""Arrival traces: who asks for what, and when. Deterministic for a seed.

Each path is an inhomogeneous Poisson process (drawn by thinning) whose rate follows a smooth
day/night cosine, with short bursts on the paths that have them. Prompt and output lengths are
drawn independently per request. A scenario trace (traffic x g, context x m) is derived from a base
trace so that scenarios stay comparable: ``g < 1`` keeps each base request on a fixed per-request
coin flip (so g = 0.5 is a subset of g = 0.8), ``g > 1`` adds requests drawn from the same process
(same rate curve, same bursts, fixed extra streams), and ``m`` multiplies prompt lengths.

A path may share prompt tokens (``PathSpec.conversations``): a system prompt in front of every request,
and conversations whose follow-up turns resend the earlier turns and their answers. Then its process
draws conversations (first turns); each has a geometric number of follow-ups, drawn from a stream of
its own (so that the first turns are those of the path without follow-ups), each arriving after the
previous turn as the user reads its answer and thinks (``Conversations``), its prompt the system
prompt + the history + its message. A conversation ends at the trace's end or at the first turn
that would not fit ``max_model_len``. The trace then carries ``prefix_group`` (the path's index),
``prefix_tokens``, ``conversation`` (-1 for a conversation of one turn) and ``history_tokens``
(:class:`app.engine.trace.Trace`); without sharing on any path they are None and the trace is the
one drawn before paths could share. A scenario keeps or drops a conversation whole (its first
turn's coin) and scales every part of a prompt by m, the histories chained again.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from app.engine.trace import Burst, Conversations, PathSpec, Trace, TrafficSpec

DEFAULT_DAY = datetime(2026, 11, 17, tzinfo=UTC)  # a Tuesday
EXTRA_ID_BASE = 1 << 32  # ids of requests added by g > 1: (copy << 32) | index
# what a trace says its requests share (None on a trace where no path shares anything)
SHARING = ("prefix_group", "prefix_tokens", "conversation", "history_tokens")
MIN_PROMPT = 8  # a first turn's own text is at least this long
HEADROOM_TOKENS = 64  # a prompt leaves at least this much of max_model_len for its answer


def _rng(seed: int, *stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, *stream])


def diurnal_factor(spec: PathSpec, unix_s: np.ndarray) -> np.ndarray:
    """Rate multiplier of a path at absolute times: a cosine over the UTC day, mean 1."""
    amplitude = (spec.peak_to_trough - 1.0) / (spec.peak_to_trough + 1.0)
    hour = (np.asarray(unix_s) % 86400.0) / 3600.0
    return 1.0 + amplitude * np.cos(2 * math.pi * (hour - spec.peak_hour_utc) / 24.0)


def draw_bursts(seed: int, origin: float, duration_s: float, spec: TrafficSpec) -> tuple[Burst, ...]:
    """Bursts for a trace: about ``bursts_per_day`` per 24 h, inside the busy hours when the trace
    covers them (anywhere in a short trace otherwise), sorted by start."""
    rng = _rng(seed, 7)
    n = int(rng.poisson(spec.bursts_per_day * duration_s / 86400.0)) if duration_s >= 86400 else \
        max(1, int(round(spec.bursts_per_day * duration_s / 86400.0)))
    lo_h, hi_h = spec.burst_hours_utc
    out = []
    for _ in range(n):
        minutes = rng.uniform(*spec.burst_minutes)
        mult = rng.uniform(*spec.burst_multiplier)
        start = None
        for _attempt in range(50):  # prefer the busy hours
            t = rng.uniform(0.05 * duration_s, 0.95 * duration_s - minutes * 60)
            hour = ((origin + t) % 86400) / 3600
            if lo_h <= hour <= hi_h:
                start = t
                break
        if start is None:
            start = rng.uniform(0.05 * duration_s, max(0.05 * duration_s, 0.95 * duration_s - minutes * 60))
        out.append(Burst(round(float(start), 3), round(minutes * 60, 3), round(float(mult), 3)))
    return tuple(sorted(out, key=lambda b: b.start_s))


def rate(spec: PathSpec, origin: float, t: np.ndarray, bursts: tuple[Burst, ...]) -> np.ndarray:
    """Requests/s of one path at trace times ``t``."""
    t = np.asarray(t, dtype=float)
    lam = spec.mean_rate * diurnal_factor(spec, origin + t)
    if spec.bursty:
        for b in bursts:
            lam = np.where((t >= b.start_s) & (t < b.start_s + b.duration_s), lam * b.multiplier, lam)
    return lam


def lognormal_tokens(rng: np.random.Generator, n: int, median: float, sigma: float, lo: int, hi: int) -> np.ndarray:
    """``n`` token counts: lognormal around ``median``, rounded, clipped to [lo, hi]."""
    return np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), lo, hi).astype(np.int64)


def draw_followups(rng: np.random.Generator, n: int, c: Conversations
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The follow-up turns of ``n`` conversations: per conversation how many (geometric, so that a
    conversation has ``c.turns_mean`` turns on average), then for every follow-up, conversation by
    conversation, its think time (exponential, seconds) and its message's tokens (lognormal, at most
    4 x the median). The caller draws the answers next, from the same ``rng``, with its own length law
    (the real-engine harness and the simulator both do)."""
    follow = rng.geometric(1.0 / c.turns_mean, n) - 1
    total = int(follow.sum())
    think = rng.exponential(c.think_s_mean, total)
    message = lognormal_tokens(rng, total, c.followup_median, c.followup_sigma, 1, 4 * int(c.followup_median) + 1)
    return follow, think, message


def _before_in_run(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per position, the sum of the values before it in its run (runs are consecutive; ``first`` marks
    the start of each)."""
    before = np.cumsum(values) - values
    return before - before[first][np.cumsum(first) - 1]


def _draw_path(rng: np.random.Generator, spec: PathSpec, origin: float, duration_s: float,
               bursts: tuple[Burst, ...], max_model_len: int, scale: float = 1.0,
               turns_rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """Arrivals of one path by thinning, then independent lengths; on a path whose requests share
    tokens, a system prompt before each first turn's text and the follow-up turns (``turns_rng``)."""
    system = spec.conversations.system_tokens
    if not 0 <= system <= max_model_len - HEADROOM_TOKENS - MIN_PROMPT:
        raise ValueError(f"path {spec.name}: a system prompt of {system} tokens leaves no room for a prompt in "
                         f"max_model_len {max_model_len}")
    amplitude = (spec.peak_to_trough - 1.0) / (spec.peak_to_trough + 1.0)
    peak_burst = max((b.multiplier for b in bursts), default=1.0) if spec.bursty else 1.0
    lam_max = scale * spec.mean_rate * (1 + amplitude) * peak_burst
    n_cand = int(rng.poisson(lam_max * duration_s))
    t = np.sort(rng.uniform(0.0, duration_s, n_cand))
    keep = rng.uniform(size=n_cand) * lam_max < scale * rate(spec, origin, t, bursts)
    t = t[keep]
    n = len(t)
    body = np.exp(rng.normal(math.log(spec.prompt_median), spec.prompt_sigma, n))
    tail = np.exp(rng.uniform(math.log(spec.long_min), math.log(spec.long_max), n))
    is_long = rng.uniform(size=n) < spec.long_share
    own = np.where(is_long, tail, body)
    own = np.clip(np.rint(own), MIN_PROMPT, max_model_len - HEADROOM_TOKENS - system).astype(np.int64)
    prompt = system + own
    out = np.exp(rng.normal(math.log(spec.output_median), spec.output_sigma, n))
    out = np.maximum(np.rint(out), 2).astype(np.int64)
    one = rng.uniform(size=n) < spec.one_token_share
    limit = np.where(one, 1, spec.max_tokens)
    limit = np.minimum(limit, max_model_len - prompt)
    hits = out >= limit
    out = np.minimum(out, limit)
    first = {"arrival_s": t, "prompt_tokens": prompt, "output_tokens": out, "hits_max": hits}
    if not spec.conversations.shares:
        return first
    if spec.conversations.turns_mean > 1.0:
        if turns_rng is None:
            raise ValueError(f"path {spec.name}: its follow-up turns need a stream of their own (turns_rng)")
        return _with_followups(turns_rng, spec, first, own, duration_s, max_model_len)
    return {**first, "prefix_tokens": np.full(n, system, dtype=np.int32),
            "conversation": np.full(n, -1, dtype=np.int64), "history_tokens": np.zeros(n, dtype=np.int32)}


def _with_followups(rng: np.random.Generator, spec: PathSpec, first: dict[str, np.ndarray], own_first: np.ndarray,
                    duration_s: float, max_model_len: int) -> dict[str, np.ndarray]:
    """The turns of the conversations whose first turns are ``first`` (own text ``own_first``), in
    conversation order: turn j's history is every earlier turn's text and answer, its prompt the system
    prompt + its history + its message; it arrives ``read_s_per_token`` x the previous answer + a think
    time after the previous turn. A conversation keeps its turns up to the trace's end and up to the
    last that fits ``max_model_len`` (prompts grow turn by turn, so the kept turns lead). ``conversation``
    is the index of the first turn (-1 for a conversation of one turn)."""
    c = spec.conversations
    n = len(own_first)
    follow, think, message = draw_followups(rng, n, c)
    answer = np.maximum(np.rint(np.exp(rng.normal(math.log(spec.output_median), spec.output_sigma, len(think)))),
                        2).astype(np.int64)
    turns = 1 + follow
    size = int(turns.sum())
    owner = np.repeat(np.arange(n), turns)
    start = np.zeros(size, dtype=bool)
    start[np.cumsum(turns) - turns] = True
    own = np.empty(size, dtype=np.int64)
    own[start], own[~start] = own_first, message
    drawn = np.empty(size, dtype=np.int64)  # the answer asked for, before max_model_len cuts it
    drawn[start], drawn[~start] = first["output_tokens"], np.minimum(answer, spec.max_tokens)
    history = _before_in_run(own + drawn, start)
    prompt = c.system_tokens + history + own
    limit = np.minimum(spec.max_tokens, max_model_len - prompt)
    out = np.where(start, drawn, np.minimum(drawn, limit))
    hits = np.empty(size, dtype=bool)
    hits[start] = first["hits_max"]
    hits[~start] = answer >= limit[~start]
    gap = np.zeros(size)
    previous = np.flatnonzero(~start) - 1
    gap[~start] = c.read_s_per_token * out[previous] + think
    arrival = first["arrival_s"][owner] + _before_in_run(gap, start) + gap
    keep = (prompt <= max_model_len - HEADROOM_TOKENS) & (arrival < duration_s)
    # a turn past the end or too long ends its conversation: its later turns go too
    keep &= _before_in_run((~keep).astype(np.int64), start) == 0
    multi = np.bincount(owner[keep], minlength=n) > 1
    conversation = np.where(multi[owner], owner, -1)
    return {"arrival_s": arrival[keep], "prompt_tokens": prompt[keep], "output_tokens": out[keep],
            "hits_max": hits[keep], "prefix_tokens": np.full(int(keep.sum()), c.system_tokens, dtype=np.int32),
            "conversation": conversation[keep].astype(np.int64),
            "history_tokens": history[keep].astype(np.int32)}


def _draw(seed: int, stream: int, origin: float, duration_s: float, spec: TrafficSpec,
          bursts: tuple[Burst, ...], scale: float = 1.0) -> dict[str, np.ndarray]:
    """Every path's requests, merged in arrival order; with ``SHARING`` arrays when a path shares
    tokens (its conversations numbered apart from the other paths')."""
    sharing = any(p.conversations.shares for p in spec.paths)
    parts = []
    conversations = 0
    for k, p in enumerate(spec.paths):
        d = _draw_path(_rng(seed, stream, k), p, origin, duration_s, bursts, spec.max_model_len, scale,
                       _rng(seed, stream, k, 1) if p.conversations.turns_mean > 1.0 else None)
        n = len(d["arrival_s"])
        d["path"] = np.full(n, k, dtype=np.int8)
        if sharing:
            d["prefix_group"] = np.full(n, k if p.conversations.system_tokens > 0 else -1, dtype=np.int64)
            d.setdefault("prefix_tokens", np.zeros(n, dtype=np.int32))
            d.setdefault("history_tokens", np.zeros(n, dtype=np.int32))
            conv = d.setdefault("conversation", np.full(n, -1, dtype=np.int64))
            d["conversation"] = np.where(conv >= 0, conv + conversations, -1)
            conversations += int(conv.max()) + 1 if n else 0
        parts.append(d)
    merged = {key: np.concatenate([d[key] for d in parts]) for key in parts[0]}
    order = np.argsort(merged["arrival_s"], kind="stable")
    return {key: v[order] for key, v in merged.items()}


def generate_trace(seed: int, hours: float = 24.0, start: datetime | float = DEFAULT_DAY,
                   warmup_s: float = 1800.0, spec: TrafficSpec | None = None,
                   bursts: tuple[Burst, ...] | None = None) -> Trace:
    """The base trace (g = 1, m = 1): ``warmup_s`` before ``start`` plus ``hours`` after it.

    ``bursts`` (trace seconds) override the seeded ones; pass ``()`` for none.
    """
    spec = spec or TrafficSpec()
    day0 = start.timestamp() if isinstance(start, datetime) else float(start)
    origin = day0 - warmup_s
    duration = warmup_s + hours * 3600.0
    if bursts is None:
        bursts = tuple(replace(b, start_s=b.start_s + warmup_s)
                       for b in draw_bursts(seed, day0, hours * 3600.0, spec))
    d = _draw(seed, 1, origin, duration, spec, bursts)
    return Trace(origin=origin, duration_s=duration, warmup_s=warmup_s,
                 request_id=np.arange(len(d["arrival_s"]), dtype=np.int64), spec=spec, bursts=bursts,
                 seed=seed, **d)


def _columns(trace: Trace) -> tuple[str, ...]:
    """The per-request arrays of ``trace`` (``SHARING`` ones when it has them)."""
    base = ("arrival_s", "path", "prompt_tokens", "output_tokens", "hits_max", "request_id")
    return base + tuple(k for k in SHARING if getattr(trace, k) is not None)


def _take(trace: Trace, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: getattr(trace, k)[mask] for k in _columns(trace)}


def _whole_conversations(coins: np.ndarray, conversation: np.ndarray | None) -> np.ndarray:
    """Each request's coin; a follow-up turn takes its conversation's first turn's (requests sorted
    by arrival), so that a scenario keeps or drops a conversation whole."""
    if conversation is None or not (conversation >= 0).any():
        return coins
    mine = np.flatnonzero(conversation >= 0)
    _, first, where = np.unique(conversation[mine], return_index=True, return_inverse=True)
    out = coins.copy()
    out[mine] = coins[mine[first]][where]
    return out


def scale_traffic(trace: Trace, g: float) -> Trace:
    """Traffic x ``g``. Below 1, each base request is kept when its fixed coin (seeded by the trace's
    seed) is below g; above 1, extra requests are superposed from independent copies of the same
    process (copy k at full rate, the last copy thinned by its own fixed coins). A conversation's turns
    share its first turn's coin; an extra copy's conversations are numbered as its requests are."""
    if g <= 0:
        raise ValueError("traffic multiplier must be positive")
    if trace.traffic_multiplier != 1.0:
        raise ValueError("scale a base trace (traffic multiplier 1)")
    if g == 1.0:
        return trace
    coins = _whole_conversations(_rng(trace.seed, 101).uniform(size=len(trace)), trace.conversation)
    parts = [_take(trace, coins < min(g, 1.0))]
    extra = g - 1.0
    k = 1
    while extra > 1e-12:
        d = _draw(trace.seed, 200 + k, trace.origin, trace.duration_s, trace.spec, trace.bursts)
        frac = min(extra, 1.0)
        coins = _whole_conversations(_rng(trace.seed, 300 + k).uniform(size=len(d["arrival_s"])),
                                     d.get("conversation"))
        keep = coins < frac
        d = {key: v[keep] for key, v in d.items()}
        d["request_id"] = (k * EXTRA_ID_BASE + np.flatnonzero(keep)).astype(np.int64)
        if "conversation" in d:
            d["conversation"] = np.where(d["conversation"] >= 0, k * EXTRA_ID_BASE + d["conversation"], -1)
        parts.append(d)
        extra -= 1.0
        k += 1
    merged = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    order = np.argsort(merged["arrival_s"], kind="stable")
    return replace(trace, traffic_multiplier=g, **{key: v[order] for key, v in merged.items()})


def scale_context(trace: Trace, m: float) -> Trace:
    """Prompt lengths x ``m``, capped at ``max_model_len - 64``; an output that no longer fits in
    ``max_model_len`` is cut short (finished_reason "length"). On a trace whose requests share tokens,
    each part of a prompt is scaled (the system prompt, the turn's own text) and the histories chained
    again from the scaled turns (``_scale_shared``)."""
    if m <= 0:
        raise ValueError("context multiplier must be positive")
    if m == 1.0:
        return trace
    if trace.prefix_tokens is not None or trace.conversation is not None:
        return _scale_shared(trace, m)
    cap = trace.spec.max_model_len
    prompt = np.minimum(np.rint(trace.prompt_tokens * m), cap - 64).astype(np.int64)
    prompt = np.maximum(prompt, 1)
    out = np.minimum(trace.output_tokens, cap - prompt)
    hits = trace.hits_max | (out < trace.output_tokens)
    return replace(trace, prompt_tokens=prompt, output_tokens=out, hits_max=hits,
                   context_multiplier=trace.context_multiplier * m)


def _scale_shared(trace: Trace, m: float) -> Trace:
    """``scale_context`` of a trace whose requests share tokens: the shared prefix and each turn's own
    text x m (a first turn's text cut to fit ``max_model_len - 64``), each turn's history the scaled
    texts and the answers of the turns before it; a follow-up that no longer fits ends its
    conversation (it and its later turns are dropped, as a client whose conversation outgrew the
    model would stop); an answer that no longer fits is cut short."""
    cap = trace.spec.max_model_len - HEADROOM_TOKENS
    n = len(trace)
    group = trace.prefix_group if trace.prefix_group is not None else np.full(n, -1)
    conv = trace.conversation if trace.conversation is not None else np.full(n, -1)
    prefix = np.where(group >= 0, trace.prefix_tokens if trace.prefix_tokens is not None else 0, 0).astype(np.int64)
    history = np.where(conv >= 0, trace.history_tokens if trace.history_tokens is not None else 0, 0).astype(np.int64)
    prefix_m = np.rint(prefix * m).astype(np.int64)
    own_m = np.maximum(np.rint((trace.prompt_tokens - prefix - history) * m), 1).astype(np.int64)
    own_m = np.where(history == 0, np.minimum(own_m, np.maximum(cap - prefix_m, 1)), own_m)
    # turns in conversation order (a request of no conversation is a run of its own)
    order = np.lexsort((trace.arrival_s, np.where(conv >= 0, conv, -1 - np.arange(n))))
    key = np.where(conv >= 0, conv, -1 - np.arange(n))[order]
    start = np.ones(n, dtype=bool)
    start[1:] = key[1:] != key[:-1]
    out = trace.output_tokens[order]
    history_m = np.empty(n, dtype=np.int64)
    history_m[order] = _before_in_run(own_m[order] + out, start)
    prompt = prefix_m + history_m + own_m
    fits = np.empty(n, dtype=bool)
    fits[order] = _before_in_run((prompt[order] > cap).astype(np.int64), start) + (prompt[order] > cap) == 0
    out = np.minimum(trace.output_tokens, trace.spec.max_model_len - prompt)
    cut = replace(trace, prompt_tokens=prompt, output_tokens=out, hits_max=trace.hits_max | (out < trace.output_tokens),
                  prefix_tokens=prefix_m.astype(np.int32) if trace.prefix_tokens is not None else None,
                  history_tokens=history_m.astype(np.int32) if trace.history_tokens is not None else None,
                  context_multiplier=trace.context_multiplier * m)
    if fits.all():
        return cut
    kept = _take(cut, fits)
    if "conversation" in kept:  # a conversation left with one turn is none
        conv = kept["conversation"]
        _, where, count = np.unique(conv, return_inverse=True, return_counts=True)
        kept["conversation"] = np.where((conv >= 0) & (count[where] > 1), conv, -1)
    return replace(cut, **kept)


def scenario_trace(trace: Trace, g: float = 1.0, m: float = 1.0) -> Trace:
    """The base trace under traffic x g and context x m (g = m = 1 returns the base unchanged)."""
    return scale_context(scale_traffic(trace, g), m)

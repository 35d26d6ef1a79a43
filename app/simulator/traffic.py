"""Arrival traces: who asks for what, and when. Deterministic for a seed.

Each path is an inhomogeneous Poisson process (drawn by thinning) whose rate follows a smooth
day/night cosine, with short bursts on the paths that have them. Prompt and output lengths are
drawn independently per request. A scenario trace (traffic x g, context x m) is derived from a base
trace so that scenarios stay comparable: ``g < 1`` keeps each base request on a fixed per-request
coin flip (so g = 0.5 is a subset of g = 0.8), ``g > 1`` adds requests drawn from the same process
(same rate curve, same bursts, fixed extra streams), and ``m`` multiplies prompt lengths.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from app.engine.trace import Burst, PathSpec, Trace, TrafficSpec

DEFAULT_DAY = datetime(2026, 11, 17, tzinfo=UTC)  # a Tuesday
EXTRA_ID_BASE = 1 << 32  # ids of requests added by g > 1: (copy << 32) | index


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


def _draw_path(rng: np.random.Generator, spec: PathSpec, origin: float, duration_s: float,
               bursts: tuple[Burst, ...], max_model_len: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Arrivals of one path by thinning, then independent lengths."""
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
    prompt = np.where(is_long, tail, body)
    prompt = np.clip(np.rint(prompt), 8, max_model_len - 64).astype(np.int64)
    out = np.exp(rng.normal(math.log(spec.output_median), spec.output_sigma, n))
    out = np.maximum(np.rint(out), 2).astype(np.int64)
    one = rng.uniform(size=n) < spec.one_token_share
    limit = np.where(one, 1, spec.max_tokens)
    limit = np.minimum(limit, max_model_len - prompt)
    hits = out >= limit
    out = np.minimum(out, limit)
    return {"arrival_s": t, "prompt_tokens": prompt, "output_tokens": out, "hits_max": hits}


def _draw(seed: int, stream: int, origin: float, duration_s: float, spec: TrafficSpec,
          bursts: tuple[Burst, ...], scale: float = 1.0) -> dict[str, np.ndarray]:
    parts = []
    for k, p in enumerate(spec.paths):
        d = _draw_path(_rng(seed, stream, k), p, origin, duration_s, bursts, spec.max_model_len, scale)
        d["path"] = np.full(len(d["arrival_s"]), k, dtype=np.int8)
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


def _take(trace: Trace, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: getattr(trace, k)[mask] for k in
            ("arrival_s", "path", "prompt_tokens", "output_tokens", "hits_max", "request_id")}


def scale_traffic(trace: Trace, g: float) -> Trace:
    """Traffic x ``g``. Below 1, each base request is kept when its fixed coin (seeded by the trace's
    seed) is below g; above 1, extra requests are superposed from independent copies of the same
    process (copy k at full rate, the last copy thinned by its own fixed coins)."""
    if g <= 0:
        raise ValueError("traffic multiplier must be positive")
    if trace.traffic_multiplier != 1.0:
        raise ValueError("scale a base trace (traffic multiplier 1)")
    if g == 1.0:
        return trace
    coins = _rng(trace.seed, 101).uniform(size=len(trace))
    parts = [_take(trace, coins < min(g, 1.0))]
    extra = g - 1.0
    k = 1
    while extra > 1e-12:
        d = _draw(trace.seed, 200 + k, trace.origin, trace.duration_s, trace.spec, trace.bursts)
        frac = min(extra, 1.0)
        keep = _rng(trace.seed, 300 + k).uniform(size=len(d["arrival_s"])) < frac
        d = {key: v[keep] for key, v in d.items()}
        d["request_id"] = (k * EXTRA_ID_BASE + np.flatnonzero(keep)).astype(np.int64)
        parts.append(d)
        extra -= 1.0
        k += 1
    merged = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    order = np.argsort(merged["arrival_s"], kind="stable")
    return replace(trace, traffic_multiplier=g, **{key: v[order] for key, v in merged.items()})


def scale_context(trace: Trace, m: float) -> Trace:
    """Prompt lengths x ``m``, capped at ``max_model_len - 64``; an output that no longer fits in
    ``max_model_len`` is cut short (finished_reason "length")."""
    if m <= 0:
        raise ValueError("context multiplier must be positive")
    if m == 1.0:
        return trace
    cap = trace.spec.max_model_len
    prompt = np.minimum(np.rint(trace.prompt_tokens * m), cap - 64).astype(np.int64)
    prompt = np.maximum(prompt, 1)
    out = np.minimum(trace.output_tokens, cap - prompt)
    hits = trace.hits_max | (out < trace.output_tokens)
    return replace(trace, prompt_tokens=prompt, output_tokens=out, hits_max=hits,
                   context_multiplier=trace.context_multiplier * m)


def scenario_trace(trace: Trace, g: float = 1.0, m: float = 1.0) -> Trace:
    """The base trace under traffic x g and context x m (g = m = 1 returns the base unchanged)."""
    return scale_context(scale_traffic(trace, g), m)

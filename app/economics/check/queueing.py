"""Queueing formulas as a labelled thinking tool (docs/methods.md#queueing), not the breach-share estimator.

A batching, preempting LLM server is not a G/G/c queue: TTFT's wait part speaks to these formulas,
TPOT does not. They show why waiting explodes near saturation and how variability and pooling matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def kingman_terms(arrival_rate: float, mean_service_s: float, ca2: float, cs2: float) -> dict[str, float]:
    """Kingman's G/G/1 approximation split into its three factors (seconds for the wait)."""
    rho = arrival_rate * mean_service_s
    utilisation = math.inf if rho >= 1 else rho / (1 - rho)
    variability = (ca2 + cs2) / 2
    return {"rho": rho, "utilisation_term": utilisation, "variability_term": variability,
            "service_term_s": mean_service_s, "wait_s": utilisation * variability * mean_service_s}


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c (offered load a = lambda / mu < c)."""
    if offered_load >= servers:
        return 1.0
    term, acc = 1.0, 1.0  # a^k / k!, running sum for k < c
    for k in range(1, servers):
        term *= offered_load / k
        acc += term
    last = term * offered_load / servers * servers / (servers - offered_load)
    return last / (acc + last)


def erlang_c_wait(servers: int, arrival_rate: float, service_rate: float) -> float:
    """Mean wait in queue of M/M/c (seconds)."""
    c = erlang_c(servers, arrival_rate / service_rate)
    return c / (servers * service_rate - arrival_rate) if servers * service_rate > arrival_rate else math.inf


def erlang_c_tail(servers: int, arrival_rate: float, service_rate: float, t: float) -> float:
    """P(wait > t) in M/M/c."""
    if servers * service_rate <= arrival_rate:
        return 1.0
    return erlang_c(servers, arrival_rate / service_rate) * math.exp(-(servers * service_rate - arrival_rate) * t)


def allen_cunneen_wait(servers: int, arrival_rate: float, service_rate: float, ca2: float, cs2: float) -> float:
    """G/G/c mean wait: the M/M/c wait scaled by (ca2 + cs2) / 2."""
    return erlang_c_wait(servers, arrival_rate, service_rate) * (ca2 + cs2) / 2


def index_of_dispersion(counts: Sequence[float]) -> float:
    """Var/mean of arrival counts in equal windows (sample variance): an estimate of c_a^2."""
    n = len(counts)
    mean = sum(counts) / n
    var = sum((x - mean) ** 2 for x in counts) / (n - 1)
    return var / mean


def bucket_moments(bounds: Sequence[float], cumulative: Sequence[float]) -> tuple[float, float, float]:
    """(m1, m2, c_s^2) from cumulative bucket counts with observations uniform inside each bucket.

    ``bounds`` are the finite upper bounds (the first bucket starts at 0); a populated +Inf bucket
    leaves the variance unidentified and is not accepted here."""
    lo, prev, n, s1, s2 = 0.0, 0.0, 0.0, 0.0, 0.0
    for hi, cum in zip(bounds, cumulative, strict=True):
        k = cum - prev
        s1 += k * (lo + hi) / 2
        s2 += k * (lo * lo + lo * hi + hi * hi) / 3
        n += k
        lo, prev = hi, cum
    m1, m2 = s1 / n, s2 / n
    return m1, m2, (m2 - m1 * m1) / (m1 * m1)

"""The arithmetic of a stretch: consecutive steps of one batch whose j-th step lasts f * (A + delta * j),
so that the first k steps take tau(k) = f * (k * A + delta * k * (k - 1) / 2).

Plain functions of floats, shared by the Python engine (:mod:`app.engine.replica`) and, compiled
by numba, the twin's engine (:mod:`app.engine.twin_engine`): the same operations in the same
order, hence the same step counts to the bit."""

from __future__ import annotations

import math


def first_tau_at_least(f: float, A: float, dl: float, y: float) -> int:
    """Smallest k >= 0 with tau(k) >= y (= the number of steps that start before T + y)."""
    if y <= 0:
        return 0
    if dl > 0:
        bq = A - dl * 0.5
        k = int(max(0.0, (-bq + math.sqrt(bq * bq + 2 * dl * y / f)) / dl))
    else:
        k = int(y / (f * A))
    # the closed form's guess, corrected for rounding
    while k > 0 and f * ((k - 1) * A + dl * (k - 1) * (k - 2) * 0.5) >= y:
        k -= 1
    while f * (k * A + dl * k * (k - 1) * 0.5) < y:
        k += 1
    return k


def steps_ending_by(f: float, A: float, dl: float, y: float) -> int:
    """Largest m >= 0 with tau(m) <= y (= the number of steps that end by T + y)."""
    if y < 0:
        return 0
    if dl > 0:
        bq = A - dl * 0.5
        m = int(max(0.0, (-bq + math.sqrt(bq * bq + 2 * dl * y / f)) / dl))
    else:
        m = int(y / (f * A))
    while m > 0 and f * (m * A + dl * m * (m - 1) * 0.5) > y:
        m -= 1
    while f * ((m + 1) * A + dl * (m + 1) * m * 0.5) <= y:
        m += 1
    return m

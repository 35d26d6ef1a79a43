"""The arithmetic of a stretch: consecutive steps of one batch whose j-th step lasts f * (A + delta * j),
so that the first k steps take tau(k) = f * (k * A + delta * k * (k - 1) / 2).

Plain functions of floats, shared by the Python engine (:mod:`app.engine.replica`) and, compiled
by numba, the twin's engine (:mod:`app.engine.twin_engine`): the same operations in the same
order, hence the same step counts to the bit."""

from __future__ import annotations

import math


def step_count(f: float, A: float, dl: float, y: float, ending_by: bool) -> int:
    """The steps of a stretch up to T + y: without ``ending_by``, the smallest k >= 0 with tau(k) >= y
    (the steps that start before T + y); with it, the largest m >= 0 with tau(m) <= y (the steps that
    end by T + y). The closed form's guess, corrected for rounding."""
    if y < 0 or (y <= 0 and not ending_by):
        return 0
    if dl > 0:
        bq = A - dl * 0.5
        k = int(max(0.0, (-bq + math.sqrt(bq * bq + 2 * dl * y / f)) / dl))
    else:
        k = int(y / (f * A))
    if ending_by:
        while k > 0 and f * (k * A + dl * k * (k - 1) * 0.5) > y:
            k -= 1
        while f * ((k + 1) * A + dl * (k + 1) * k * 0.5) <= y:
            k += 1
    else:
        while k > 0 and f * ((k - 1) * A + dl * (k - 1) * (k - 2) * 0.5) >= y:
            k -= 1
        while f * (k * A + dl * k * (k - 1) * 0.5) < y:
            k += 1
    return k


def first_tau_at_least(f: float, A: float, dl: float, y: float) -> int:
    """Smallest k >= 0 with tau(k) >= y (= the number of steps that start before T + y)."""
    return step_count(f, A, dl, y, False)


def steps_ending_by(f: float, A: float, dl: float, y: float) -> int:
    """Largest m >= 0 with tau(m) <= y (= the number of steps that end by T + y)."""
    return step_count(f, A, dl, y, True)

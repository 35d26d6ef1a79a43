"""A small pure-Python oracle of PromQL's ``increase()`` on classic counters (``extrapolatedRate``).

docs/methods.md#promql-increase describes the Prometheus 3.x form. The Debian ``prometheus`` this project tests against
is 2.42, whose float path differs in two ways (prometheus ``promql/engine.go``/``functions.go``
before 3.0 and before PR #13725):

- range selectors are closed on both ends, ``[T_s, T_e]`` (3.0 made them left-open, ``(T_s, T_e]``;
  the 3.0 migration guide, "Left-open range selectors");
- the counter zero-clamp (``dStart = min(dStart, sampled * v_1 / result)``) is applied *before* the
  1.1 x average-interval threshold test, not after it.

``Semantics.for_version`` picks the right variant from ``/api/v1/status/buildinfo``.
Times are Unix seconds (floats); Prometheus works in milliseconds, so they are rounded to ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Semantics:
    """Which PromQL variant a server implements."""

    left_open: bool  # range (T_s, T_e] (3.x) or [T_s, T_e] (2.x)
    clamp_before_threshold: bool  # 2.x order of the zero clamp and the threshold test

    @classmethod
    def for_version(cls, version: str) -> Semantics:
        major = int(version.split(".", 1)[0])
        return cls(left_open=major >= 3, clamp_before_threshold=major < 3)


PROMETHEUS_2 = Semantics(left_open=False, clamp_before_threshold=True)
PROMETHEUS_3 = Semantics(left_open=True, clamp_before_threshold=False)


@dataclass(frozen=True)
class Extrapolation:
    """One series' ``increase()`` over a range, with the parts of the formula."""

    result: float  # in-range increase: v_n - v_1 + the value before each decrease
    d_start: float  # seconds extrapolated before the first sample (after threshold and clamp)
    d_end: float  # seconds extrapolated after the last sample
    sampled: float  # t_n - t_1
    n: int  # samples in the range

    @property
    def factor(self) -> float:
        return (self.sampled + self.d_start + self.d_end) / self.sampled

    @property
    def increase(self) -> float:
        # the same float operations as Prometheus: result * (sampled + dStart + dEnd) / sampled
        return self.result * ((self.sampled + self.d_start + self.d_end) / self.sampled)


def _ms(t: float) -> int:
    return round(t * 1000)


def in_range(points: Sequence[tuple[float, float]], start: float, end: float,
             semantics: Semantics) -> list[tuple[float, float]]:
    """The samples a range selector ending at ``end`` with length ``end - start`` selects."""
    lo, hi = _ms(start), _ms(end)
    return [(t, v) for t, v in points if (_ms(t) > lo if semantics.left_open else _ms(t) >= lo) and _ms(t) <= hi]


def extrapolate(points: Sequence[tuple[float, float]], start: float, end: float,
                semantics: Semantics) -> Extrapolation | None:
    """``increase()`` of one counter series whose raw samples are ``points`` (time order); None when
    fewer than two samples fall in the range (PromQL then drops the series)."""
    pts = in_range(points, start, end, semantics)
    if len(pts) < 2:
        return None
    values = [v for _, v in pts]
    result = values[-1] - values[0]
    for prev, cur in zip(values, values[1:], strict=False):
        if cur < prev:  # a counter reset inside the range: the counter restarted from zero
            result += prev
    t_first, t_last = _ms(pts[0][0]), _ms(pts[-1][0])
    d_start = (t_first - _ms(start)) / 1000
    d_end = (_ms(end) - t_last) / 1000
    sampled = (t_last - t_first) / 1000
    avg = sampled / (len(pts) - 1)
    threshold = avg * 1.1

    def clamp(d: float) -> float:
        # counters cannot go below zero: do not extrapolate the start past the zero point
        if result > 0 and values[0] >= 0:
            return min(d, sampled * (values[0] / result))
        return d

    if semantics.clamp_before_threshold:
        d_start = clamp(d_start)
        if d_start >= threshold:
            d_start = avg / 2
    else:
        if d_start >= threshold:
            d_start = avg / 2
        d_start = clamp(d_start)
    if d_end >= threshold:
        d_end = avg / 2
    return Extrapolation(result=result, d_start=d_start, d_end=d_end, sampled=sampled, n=len(pts))

"""Twin attribution: the breaches that remain when the observed demand is replayed through the fitted
twin with ample replicas (intrinsic: long prompts, slow decode) against those that vanish (capacity,
the part headroom can buy down), in breaches and dollars per month.

It reads the economics' fitted :class:`~app.economics.predict.scenarios.Analysis` and its replay
(``scenarios.grid``) as they are: the twin at the observed N, at 2 N and at 4 N ("ample"). The part that
vanishes is the share at N minus the share at 4 N, its interval the difference of the two intervals'
far ends; the replay at 2 N says whether 4 N is past the point where more replicas stop helping
(``converged``: the two within ±10 % or 0.1 pp).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.economics.predict import scenarios as sc

AMPLE_FACTORS = (2, 4)
CONVERGED_REL, CONVERGED_ABS = 0.10, 0.001


@dataclass(frozen=True)
class TwinAttribution:
    """One path: shares of requests (the joint promise, and TTFT alone) at N and with ample replicas."""

    path: str
    replicas: int
    ample_replicas: int
    requests_per_month: float
    breach_share_at_n: float
    breach_share_at_n_low: float
    breach_share_at_n_high: float
    intrinsic_share: float
    intrinsic_share_low: float
    intrinsic_share_high: float
    capacity_share: float
    capacity_share_low: float
    capacity_share_high: float
    ttft_share_at_n: float
    ttft_intrinsic_share: float
    converged: bool
    flagged: bool
    flags: list[str]
    breach_price: float | None

    @property
    def capacity_fraction(self) -> float:
        """The part of the breaches at N that capacity causes."""
        return self.capacity_share / self.breach_share_at_n if self.breach_share_at_n > 0 else math.nan

    def money(self) -> dict[str, float | None]:
        """Breaches per month (point, low, high) that vanish and remain, and their dollars."""
        month = self.requests_per_month
        out: dict[str, float | None] = {
            "capacity_breaches_per_month": self.capacity_share * month,
            "capacity_breaches_per_month_low": self.capacity_share_low * month,
            "capacity_breaches_per_month_high": self.capacity_share_high * month,
            "intrinsic_breaches_per_month": self.intrinsic_share * month,
        }
        price = self.breach_price
        for k in list(out):
            out[k.replace("breaches", "usd")] = None if price is None else float(out[k] or 0.0) * price
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "replicas": self.replicas, "ample_replicas": self.ample_replicas,
            "requests_per_month": self.requests_per_month,
            "breach_share_at_n": {"share": self.breach_share_at_n, "low": self.breach_share_at_n_low,
                                  "high": self.breach_share_at_n_high},
            "intrinsic": {"share": self.intrinsic_share, "low": self.intrinsic_share_low,
                          "high": self.intrinsic_share_high},
            "capacity": {"share": self.capacity_share, "low": self.capacity_share_low,
                         "high": self.capacity_share_high, "fraction_of_breaches": self.capacity_fraction},
            "ttft_share_at_n": self.ttft_share_at_n, "ttft_intrinsic_share": self.ttft_intrinsic_share,
            "converged": self.converged, "flagged": self.flagged, "flags": self.flags,
            "breach_price": self.breach_price, **self.money(),
        }


def _converged(a: float, b: float) -> bool:
    return abs(a - b) <= max(CONVERGED_REL * max(a, b), CONVERGED_ABS)


def attribute(analysis: sc.Analysis, breach_prices: dict[str, float] | None = None, horizon_hours: float = 720.0,
              seeds: int = 3, progress: Callable[[str], None] | None = None,
              workers: int | None = None) -> list[TwinAttribution]:
    """Per path of the analysis: the twin's breaches at the observed N against those at 4 N. ``breach_prices``:
    path (or ``*``) -> USD per breach."""
    n0 = analysis.observed.replicas
    counts = [n0] + [f * n0 for f in AMPLE_FACTORS]
    preds = sc.grid(analysis, counts, seeds=seeds, progress=progress, workers=workers)
    by = {(p.path, p.replicas): p for p in preds}
    hours = analysis.demand.duration_s / 3600 if analysis.demand.duration_s else math.nan
    prices = breach_prices or {}
    out = []
    for path in analysis.thresholds:
        at_n, half, ample = (by[(path, n)] for n in counts)
        per_hour = analysis.observed.requests.get(path, at_n.requests) / hours if hours else math.nan
        flags = sorted(set(at_n.flags) | set(ample.flags))
        out.append(TwinAttribution(
            path=path, replicas=n0, ample_replicas=ample.replicas, requests_per_month=per_hour * horizon_hours,
            breach_share_at_n=at_n.breach_share, breach_share_at_n_low=at_n.breach_share_low,
            breach_share_at_n_high=at_n.breach_share_high,
            intrinsic_share=ample.breach_share, intrinsic_share_low=ample.breach_share_low,
            intrinsic_share_high=ample.breach_share_high,
            capacity_share=max(0.0, at_n.breach_share - ample.breach_share),
            capacity_share_low=max(0.0, at_n.breach_share_low - ample.breach_share_high),
            capacity_share_high=max(0.0, at_n.breach_share_high - ample.breach_share_low),
            ttft_share_at_n=at_n.ttft_share, ttft_intrinsic_share=ample.ttft_share,
            converged=_converged(half.breach_share, ample.breach_share),
            flagged=at_n.flagged or ample.flagged, flags=flags,
            breach_price=prices.get(path, prices.get("*")),
        ))
    return out

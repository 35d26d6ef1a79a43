"""The empirical load–response curve (docs/methods.md#load-response-curve), kept as a cross-check beside the capacity model.

Breach share against per-replica load, fitted by weighted isotonic regression (pool adjacent
violators, scipy), then read at a scenario's per-replica load ``x * N_w / k``. Inside the observed
load range the fit is used; outside it monotonicity alone bounds the share: below the lowest load
it lies in [0, f(x_min)], above the highest in [f(x_max), 1]. The curve assumes no carry-over
between windows and perfect pooling: docs/economics.md explains why it misleads at other replica counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression


@dataclass(frozen=True)
class Curve:
    """A fitted non-decreasing curve: breach share at per-replica load ``x`` (points sorted by x)."""

    x: np.ndarray
    y: np.ndarray
    weight: np.ndarray

    @property
    def x_min(self) -> float:
        return float(self.x[0])

    @property
    def x_max(self) -> float:
        return float(self.x[-1])

    def __call__(self, load: np.ndarray | float) -> np.ndarray:
        """Point estimate: linear between fitted points, clipped at the ends (sklearn's out_of_bounds='clip')."""
        return np.interp(load, self.x, self.y)

    def bounds(self, load: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """Hard bounds from monotonicity alone."""
        load = np.asarray(load, dtype=float)
        point = self(load)
        low = np.where(load < self.x_min, 0.0, point)
        high = np.where(load > self.x_max, 1.0, point)
        return low, high


def fit(load: np.ndarray, share: np.ndarray, weight: np.ndarray) -> Curve:
    """Weighted isotonic fit of ``share`` on ``load`` (windows with zero weight are dropped; ties pooled)."""
    load, share, weight = (np.asarray(a, dtype=float) for a in (load, share, weight))
    keep = (weight > 0) & np.isfinite(load) & np.isfinite(share)
    load, share, weight = load[keep], share[keep], weight[keep]
    if load.size == 0:
        raise ValueError("no window with requests to fit the load-response curve")
    ux, inverse = np.unique(load, return_inverse=True)
    w = np.bincount(inverse, weights=weight)
    y = np.bincount(inverse, weights=share * weight) / w
    fitted = isotonic_regression(y, weights=w, increasing=True).x
    return Curve(x=ux, y=fitted, weight=w)


@dataclass(frozen=True)
class CurveScenario:
    replicas: int
    share: float
    share_low: float
    share_high: float
    extrapolated: bool


def scenario(curve: Curve, load: np.ndarray, replicas_observed: np.ndarray, requests: np.ndarray,
             replicas: int, traffic: float = 1.0) -> CurveScenario:
    """Request-weighted breach share with ``replicas`` instead of the observed count per window
    (and traffic x ``traffic``: the per-replica load scales with it, the weights too)."""
    load, replicas_observed, requests = (np.asarray(a, dtype=float) for a in (load, replicas_observed, requests))
    x_k = load * replicas_observed * traffic / replicas
    point = curve(x_k)
    low, high = curve.bounds(x_k)
    total = requests.sum()
    return CurveScenario(
        replicas=replicas,
        share=float((requests * point).sum() / total),
        share_low=float((requests * low).sum() / total),
        share_high=float((requests * high).sum() / total),
        extrapolated=bool(((x_k < curve.x_min) | (x_k > curve.x_max)).any()),
    )

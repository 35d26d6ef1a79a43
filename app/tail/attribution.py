"""Breach attribution from the histograms: how much of a path's TTFT tail its queue time explains.

The queue, prefill and TTFT histograms are separate marginals of the same requests, so which
request breached for which reason is not identified; what the inclusions give is an interval.
For a TTFT threshold X, with a = P(TTFT > X), q = P(queue > X), r = P(prefill > X) (shares of
requests, each from its own histogram, query ``tail__phase_breaches``):

- TTFT ≥ queue time and TTFT ≥ prefill time (both are engine intervals inside TTFT), so
  {queue > X} ⊆ {TTFT > X} and {prefill > X} ⊆ {TTFT > X}.
- A breach is *explained by queueing* when it would not breach without its queue wait, or its queue
  wait alone breaches: every breach except those whose prefill alone exceeds X while the queue
  alone does not. Its share is E = a − r + P(queue > X and prefill > X), and the overlap lies in the
  Fréchet interval within the breached population, [max(0, q + r − a), min(q, r)] (docs/methods.md#frechet),
  so E ∈ [max(q, a − r), min(a, a − r + q)].
- Without a prefill histogram r is anywhere in [0, a]: E ∈ [q, a] (queue alone is the lower bound).
- Each of a, q, r carries its bucket interval (exact at a bucket bound); the ends take the worst of
  them. The point shown is the independence coupling of the two events inside the breaches
  (overlap = q·r/a): a point inside the interval, labelled so, not an estimate.
- Caveats stated with the numbers: TTFT is counted at first token, queue and prefill at finish, so a
  window's populations differ (ranges of many windows agree); prefill time excludes the frontend's
  tokenization delay, which TTFT includes.

For an end-to-end threshold the queue, prefill and decode shares above it are the breaches each phase
explains alone (lower bounds, each with its interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from app import sql
from app.promise.shares import ALL_PATHS, Promise
from app.store import Workspace


def path_thresholds(paths: list[str], promises: list[Promise]) -> dict[str, Promise]:
    """Each path's promise: its own, else the one for every path."""
    own = {p.path: p for p in promises}
    out = {}
    for path in paths:
        p = own.get(path) or own.get(ALL_PATHS)
        if p is not None:
            out[path] = p
    return out


def phase_counts(ws: Workspace, cube_id: int, promises: list[Promise], start: datetime,
                 end: datetime) -> pd.DataFrame:
    """``tail__phase_breaches``: per window, path, breach and phase, the observations above the threshold."""
    paths = [r[0] for r in sql.rows(ws.cursor(), "cube__request_paths", cube_id=cube_id)]
    chosen = path_thresholds(paths, promises)
    names = sorted(chosen)
    return sql.df(ws.cursor(), "tail__phase_breaches", cube_id=cube_id, start_ts=start, end_ts=end, paths=names,
                  ttft_s=[chosen[p].ttft_s for p in names], e2e_s=[chosen[p].e2e_s for p in names])


def _wide(counts: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per ``keys`` + breach with n/bad/low/high per phase as columns ``<signal>_<stat>``."""
    if counts.empty:
        return pd.DataFrame(columns=keys + ["breach", "threshold_s"])
    agg = counts.groupby(keys + ["breach", "signal"], as_index=False).agg(
        threshold_s=("threshold_s", "first"), n=("n", "sum"), bad=("bad", "sum"), bad_low=("bad_low", "sum"),
        bad_high=("bad_high", "sum"), exact=("exact", "all"))
    wide = agg.pivot_table(index=keys + ["breach", "threshold_s"], columns="signal",
                           values=["n", "bad", "bad_low", "bad_high", "exact"], aggfunc="first")
    wide.columns = [f"{sig}_{stat}" for stat, sig in wide.columns]
    return wide.reset_index()


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype=float) if name in frame else np.full(len(frame), np.nan)


def _share(frame: pd.DataFrame, signal: str, stat: str) -> np.ndarray:
    n = _col(frame, f"{signal}_n")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, _col(frame, f"{signal}_{stat}") / n, np.nan)


def explained(a: tuple[np.ndarray, np.ndarray, np.ndarray], q: tuple[np.ndarray, np.ndarray, np.ndarray],
              r: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The share of requests whose TTFT breach queueing explains (module docstring), from the (estimate,
    low, high) shares of TTFT, queue and prefill above the threshold; ``r`` None: no prefill histogram.
    Returns ``point``, ``low``, ``high`` (shares of requests)."""
    a_est, a_lo, a_hi = a
    q_est, q_lo, q_hi = (np.minimum(x, y) for x, y in zip(q, a, strict=True))  # queue > X implies TTFT > X
    if r is None:
        low, high = q_lo, a_hi
        point = np.full(len(a_est), np.nan)
    else:
        r_est, r_lo, r_hi = (np.minimum(x, y) for x, y in zip(r, a, strict=True))
        low = np.maximum(q_lo, a_lo - r_hi)
        high = np.minimum(a_hi, a_hi - r_lo + q_hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            overlap = np.where(a_est > 0, q_est * r_est / a_est, 0.0)
        point = np.clip(a_est - r_est + overlap, low, high)
    low = np.clip(low, 0.0, None)
    high = np.maximum(high, low)
    return {"point": point, "low": low, "high": high}


def _fraction(part: np.ndarray, of_low: np.ndarray, of_high: np.ndarray, upper: bool) -> np.ndarray:
    """part / breaches, at the end of the breaches' interval that makes the fraction widest."""
    of = of_low if upper else of_high
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(of > 0, part / of, np.nan)
    return np.clip(out, 0.0, 1.0)


def _ttft_table(wide: pd.DataFrame) -> pd.DataFrame:
    t = wide[wide["breach"] == "ttft"].reset_index(drop=True)
    a = tuple(_share(t, "ttft", s) for s in ("bad", "bad_low", "bad_high"))
    q = tuple(_share(t, "queue", s) for s in ("bad", "bad_low", "bad_high"))
    has_prefill = "prefill_n" in t and bool(np.any(_col(t, "prefill_n") > 0))
    r = tuple(_share(t, "prefill", s) for s in ("bad", "bad_low", "bad_high")) if has_prefill else None
    has_queue = bool(np.any(_col(t, "queue_n") > 0))
    e = explained(a, q, r)  # type: ignore[arg-type]
    out = pd.DataFrame({c: t[c] for c in t.columns if c in ("window_start", "path", "threshold_s")})
    out["requests"] = _col(t, "ttft_n")
    out["ttft_share"], out["ttft_share_low"], out["ttft_share_high"] = a
    out["ttft_exact"] = t.get("ttft_exact", pd.Series(False, index=t.index)).fillna(False).astype(bool)
    out["queue_alone_share"], out["queue_alone_low"], out["queue_alone_high"] = q if has_queue else (np.nan,) * 3
    if r is not None:
        out["prefill_alone_share"], out["prefill_alone_low"], out["prefill_alone_high"] = r
    else:
        out["prefill_alone_share"] = out["prefill_alone_low"] = out["prefill_alone_high"] = np.nan
    if has_queue:
        out["queue_explained_point"], out["queue_explained_low"], out["queue_explained_high"] = (
            e["point"], e["low"], e["high"])
    else:
        out["queue_explained_point"] = out["queue_explained_low"] = out["queue_explained_high"] = np.nan
    a_lo, a_hi = a[1], a[2]
    # the same as fractions of the TTFT breaches (wide ends: the low part over the most breaches)
    out["queue_explained_fraction_low"] = _fraction(out["queue_explained_low"].to_numpy(float), a_lo, a_hi, False)
    out["queue_explained_fraction_high"] = _fraction(out["queue_explained_high"].to_numpy(float), a_lo, a_hi, True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["queue_explained_fraction_point"] = np.where(a[0] > 0, out["queue_explained_point"] / a[0], np.nan)
    out["basis"] = "queue + prefill histograms" if r is not None else (
        "queue histogram (no prefill histogram: the upper end is every breach)" if has_queue else "no queue histogram")
    return out


def _e2e_table(wide: pd.DataFrame) -> pd.DataFrame:
    t = wide[wide["breach"] == "e2e"].reset_index(drop=True)
    out = pd.DataFrame({c: t[c] for c in t.columns if c in ("window_start", "path", "threshold_s")})
    out["requests"] = _col(t, "e2e_n")
    for sig in ("e2e", "queue", "prefill", "decode"):
        name = "e2e" if sig == "e2e" else f"{sig}_alone"
        out[f"{name}_share"], out[f"{name}_low"], out[f"{name}_high"] = (
            _share(t, sig, s) for s in ("bad", "bad_low", "bad_high"))
    return out


@dataclass
class Attribution:
    """Per path over the range (``ttft``, ``e2e``) and per window (``ttft_windows``)."""

    ttft: pd.DataFrame
    e2e: pd.DataFrame
    ttft_windows: pd.DataFrame


def attribute(ws: Workspace, cube_id: int, promises: list[Promise], start: datetime, end: datetime) -> Attribution:
    counts = phase_counts(ws, cube_id, promises, start, end)
    over = _wide(counts, ["path"])
    per_window = _wide(counts, ["window_start", "path"])
    return Attribution(ttft=_ttft_table(over), e2e=_e2e_table(over), ttft_windows=_ttft_table(per_window))


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def to_json(att: Attribution) -> list[dict[str, Any]]:
    """One object per path (docs/cli/tail.md)."""
    out = []
    e2e = {r["path"]: r for _, r in att.e2e.iterrows()}
    for _, r in att.ttft.iterrows():
        doc: dict[str, Any] = {
            "path": r["path"], "ttft_threshold_s": _num(r["threshold_s"]), "requests": _num(r["requests"]),
            "ttft_share": {"share": _num(r["ttft_share"]), "low": _num(r["ttft_share_low"]),
                           "high": _num(r["ttft_share_high"]), "exact": bool(r["ttft_exact"])},
            "queue_alone": {"share": _num(r["queue_alone_share"]), "low": _num(r["queue_alone_low"]),
                            "high": _num(r["queue_alone_high"])},
            "prefill_alone": {"share": _num(r["prefill_alone_share"]), "low": _num(r["prefill_alone_low"]),
                              "high": _num(r["prefill_alone_high"])},
            "queue_explained": {"share_low": _num(r["queue_explained_low"]),
                                "share_high": _num(r["queue_explained_high"]),
                                "share_independence_point": _num(r["queue_explained_point"]),
                                "fraction_of_breaches_low": _num(r["queue_explained_fraction_low"]),
                                "fraction_of_breaches_high": _num(r["queue_explained_fraction_high"]),
                                "fraction_of_breaches_independence_point": _num(r["queue_explained_fraction_point"])},
            "basis": r["basis"],
            "e2e": None,
        }
        if r["path"] in e2e:
            x = e2e[r["path"]]
            doc["e2e"] = {"threshold_s": _num(x["threshold_s"]), **{
                k: {"share": _num(x[f"{k}_share"]), "low": _num(x[f"{k}_low"]), "high": _num(x[f"{k}_high"])}
                for k in ("e2e", "queue_alone", "prefill_alone", "decode_alone")}}
        out.append(doc)
    return out

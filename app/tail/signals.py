"""Early and scaling signals: which gauge predicts breach share in the following windows, by how much it
leads, the level at which breach starts to rise, and a scaling rule with its evidence.

Per window (query ``tail__signal_windows``): the waiting queue and running batch per replica, KV-cache
occupancy, preemptions per replica-minute and, when DCGM (or another engine's) utilisation is loaded,
GPU utilisation; per window and path the breach share of the promise (``promise.shares``: the joint
interval's low end, the share certainly breached; over the fleet, request-weighted).

- **Rank correlation** (Spearman) of the signal at t with the breach share at t + lead, for leads of
  0–15 minutes in steps of the window, with the number of windows that have requests at t + lead. The
  lead where it peaks says whether the signal leads (a peak at 0 moves with breach); its mean over
  leads of 1–15 minutes says how well it predicts the following windows, and ranks the signals (the
  lowest is the worst).
- **Level**: an isotonic (non-decreasing) fit of the breach share on the signal, weighted by requests
  (``scipy.optimize.isotonic_regression``); the level is the lowest signal value at which the fitted
  share reaches the error budget's rate (1 − target): where breach starts to rise past what the promise
  allows.
- **Lead**: breach onsets are windows above the budget rate after at least 3 windows at or below it; a
  signal warns an onset when it was at or above its level in the 15 minutes before it; its lead is the
  time from its first such window to the onset (median over the onsets it warned).
- **Rule**: scale out when the signal (waiting or running per replica: the ones to scale on) is at or
  above its level for k minutes, k in 1, 2, 3, 5 picked by F1 of "an alert is followed by a breaching
  window within 15 minutes" (precision) and "an onset was alerted in the 15 minutes before" (recall);
  the signal with the higher F1 wins. Its precision, recall and lead are the evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression
from scipy.stats import spearmanr

from app import sql
from app.promise import shares as pm
from app.store import Workspace

SIGNALS = {  # column -> (label, unit)
    "waiting": ("waiting requests per replica", "requests"),
    "running": ("running batch per replica", "requests"),
    "kv_usage": ("KV-cache occupancy", "share"),
    "preemptions_per_replica_minute": ("preemptions per replica-minute", "per minute"),
    "gpu_util": ("GPU utilisation", "share"),
}
SCALE_ON = ("waiting", "running")
SEED_QUEUE_LEVELS = (3, 5)  # the usual advice: start at 3-5 waiting, raised until latency meets the target
MAX_LEAD_S = 900
QUIET_WINDOWS = 3
FLOOR_QUANTILE = 0.10
ONSET_BURN = 2.0  # a window breaches when its share is above twice the budget rate
DURATIONS_MIN = (1, 2, 3, 5)
FLEET = "(fleet)"


@dataclass
class SignalResult:
    signal: str
    label: str
    windows: int
    correlation: dict[int, tuple[float, int]]  # lead in minutes -> (Spearman rho, windows)
    best_lead_min: int | None  # the lead at which the correlation peaks (0: it moves with breach, no lead)
    best_rho: float
    predictive_rho: float  # mean over leads of 1-15 minutes: how well it predicts the following windows
    level: float | None
    floor: float
    onsets: int
    warned: int
    median_lead_min: float | None
    curve: list[tuple[float, float]] = field(default_factory=list)  # (signal, fitted share) at each distinct value


@dataclass
class Rule:
    signal: str
    level: float
    minutes: int
    precision: float
    recall: float
    alerts: int
    base_rate: float  # share of all windows followed by a breaching window within 15 minutes
    median_lead_min: float | None
    text: str


@dataclass
class SignalReport:
    scope: str
    window_s: int
    budget: float
    windows: pd.DataFrame  # per window: the signals, requests, breach share
    results: list[SignalResult]
    rule: Rule | None
    worst: str | None
    notes: list[str]


def signal_windows(ws: Workspace, cube_id: int, window_s: int, start: datetime, end: datetime) -> pd.DataFrame:
    return sql.df(ws.cursor(), "tail__signal_windows", cube_id=cube_id, start_ts=start, end_ts=end,
                  window_s=float(window_s))


def breach_windows(ws: Workspace, cube_id: int, promises: list[pm.Promise], start: datetime,
                   end: datetime) -> pd.DataFrame:
    """Per window and path: requests and the breach share (joint low end); plus the fleet, request-weighted."""
    w = pm.shares(ws, cube_id, promises, start, end, by_window=True)
    w = w[["window_start", "path", "requests", "joint_low", "ttft_share", "target"]].copy()
    w["bad"] = w["joint_low"].fillna(0) * w["requests"].fillna(0)
    w["budget_n"] = (1 - w["target"]) * w["requests"].fillna(0)
    fleet = w.groupby("window_start", as_index=False).agg(requests=("requests", "sum"), bad=("bad", "sum"),
                                                          budget_n=("budget_n", "sum"))
    fleet["path"] = FLEET
    both = pd.concat([w, fleet], ignore_index=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        both["breach_share"] = np.where(both["requests"] > 0, both["bad"] / both["requests"], np.nan)
    return both[["window_start", "path", "requests", "breach_share", "budget_n"]]


def _regular(frame: pd.DataFrame, window_s: int, start: datetime, end: datetime) -> pd.DataFrame:
    idx = pd.date_range(pd.Timestamp(start), pd.Timestamp(end), freq=f"{window_s}s", inclusive="left")
    return frame.set_index("window_start").reindex(idx).rename_axis("window_start")


def _level(x: np.ndarray, y: np.ndarray, w: np.ndarray, budget: float
           ) -> tuple[float | None, float, list[tuple[float, float]]]:
    """The isotonic fit on the windows' distinct signal values (tied windows pooled, request-weighted);
    its floor (the fit at the signal's 10th percentile of requests: the breach no level of this signal
    removes) and the level, the lowest value at which the fit exceeds the floor by ``budget``; None when
    it never does."""
    ok = ~np.isnan(x) & ~np.isnan(y) & (w > 0)
    if ok.sum() < 5:
        return None, math.nan, []
    pooled = pd.DataFrame({"x": x[ok], "yw": y[ok] * w[ok], "w": w[ok]}).groupby("x", sort=True).sum()
    xs, ws = pooled.index.to_numpy(float), pooled["w"].to_numpy(float)
    fit = isotonic_regression(pooled["yw"].to_numpy(float) / ws, weights=ws, increasing=True).x
    floor = float(fit[min(len(fit) - 1, int(np.searchsorted(np.cumsum(ws) / ws.sum(), FLOOR_QUANTILE)))])
    above = np.nonzero(fit >= floor + budget)[0]
    return (float(xs[above[0]]) if len(above) else None), floor, list(zip(xs.tolist(), fit.tolist(), strict=True))


def fitted_at(curve: list[tuple[float, float]], value: float) -> float | None:
    """The isotonic fit's breach share at a signal value (the step at or below it)."""
    below = [b for a, b in curve if a <= value]
    return below[-1] if below else None


def _thin_curve(curve: list[tuple[float, float]], points: int = 80) -> list[tuple[float, float]]:
    """The fit at up to ``points`` signal values, every step kept where it rises (for the chart and the JSON)."""
    if len(curve) <= points:
        return curve
    rises = [i for i in range(1, len(curve)) if curve[i][1] != curve[i - 1][1]]
    pick = sorted({0, len(curve) - 1, *rises[:points], *np.linspace(0, len(curve) - 1, points // 2).astype(int).tolist()})
    return [curve[i] for i in pick]


def _onsets(y: np.ndarray, budget: float) -> np.ndarray:
    """Windows above the budget rate after QUIET_WINDOWS windows that were not (counted with a running
    sum: a month of 1-minute windows is 43,200 of them)."""
    above = np.nan_to_num(y, nan=0.0) > budget
    before = np.concatenate(([0], np.cumsum(above)))
    t = np.arange(QUIET_WINDOWS, len(y))
    return t[above[t] & (before[t] == before[t - QUIET_WINDOWS])].astype(int)


def _warnings(x: np.ndarray, level: float, onsets: np.ndarray, horizon: int) -> list[int]:
    """Per onset warned, its lead in windows: the signal is at or above ``level`` at the onset or the
    window before, and that run of windows began inside the horizon before the onset (a signal that
    had been on for longer carried no news of this onset)."""
    hit = np.nan_to_num(x, nan=-np.inf) >= level
    leads = []
    for t in onsets:
        end = t if hit[t] else t - 1
        if end < 0 or not hit[end]:
            continue
        start = end
        while start > 0 and hit[start - 1] and t - start < horizon + 1:
            start -= 1
        if t - start <= horizon:
            leads.append(int(t - start))
    return leads


def _alerts(x: np.ndarray, level: float, k: int) -> np.ndarray:
    """Windows where the signal has been at or above ``level`` for ``k`` consecutive windows."""
    hit = (np.nan_to_num(x, nan=-np.inf) >= level).astype(int)
    run = np.convolve(hit, np.ones(k, dtype=int), mode="full")[: len(hit)]
    return run >= k


def _followed(y: np.ndarray, budget: float, horizon: int) -> np.ndarray:
    """Per window: a window above the budget rate at it or within the horizon after it (a running sum's
    difference over [t, t + horizon])."""
    bad = np.nan_to_num(y, nan=0.0) > budget
    before = np.concatenate(([0], np.cumsum(bad)))
    t = np.arange(len(bad))
    return before[np.minimum(t + 1 + horizon, len(bad))] > before[t]


def _rule_score(x: np.ndarray, followed: np.ndarray, level: float, k: int, horizon: int,
                onsets: np.ndarray) -> tuple[float, float, int]:
    """Precision, recall and alert count of "x >= level for k windows"; ``followed``: ``_followed``."""
    alerts = _alerts(x, level, k)
    idx = np.nonzero(alerts)[0]
    precision = float(followed[idx].mean()) if len(idx) else math.nan
    warned = [alerts[max(0, t - horizon): t + 1].any() for t in onsets]
    recall = float(np.mean(warned)) if len(onsets) else math.nan
    return precision, recall, int(len(idx))


def analyse(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise],
            start: datetime | None = None, end: datetime | None = None, scope: str = FLEET) -> SignalReport:
    """The signal table and rule for ``scope`` (the fleet, or one path) over the cube's windows."""
    start, end = pm.time_range(ws, cube_id, start, end)
    sig = _regular(signal_windows(ws, cube_id, window_s, start, end), window_s, start, end)
    breach = breach_windows(ws, cube_id, promises, start, end)
    mine = breach[breach["path"] == scope].drop(columns="path")
    frame = sig.join(_regular(mine, window_s, start, end), how="left")
    req = frame["requests"].to_numpy(float)
    budget_n, total = np.nansum(frame["budget_n"].to_numpy(float)), np.nansum(req)
    budget = float(budget_n / total) if total > 0 else 0.01
    y = frame["breach_share"].to_numpy(float)
    step_min = window_s / 60
    leads = list(range(0, MAX_LEAD_S // window_s + 1))
    horizon = max(1, MAX_LEAD_S // window_s)
    onsets = _onsets(y, ONSET_BURN * budget)
    notes: list[str] = []
    results = []
    for col, (label, _) in SIGNALS.items():
        x = frame[col].to_numpy(float) if col in frame else np.full(len(frame), np.nan)
        present = int((~np.isnan(x)).sum())
        if present < 5:
            if col == "gpu_util":
                notes.append("GPU utilisation: not in the data (load a DCGM exporter's DCGM_FI_DEV_GPU_UTIL to compare it)")
            continue
        corr: dict[int, tuple[float, int]] = {}
        for lead in leads:
            xs, ys = x[: len(x) - lead] if lead else x, y[lead:]
            ok = ~np.isnan(xs) & ~np.isnan(ys)
            n = int(ok.sum())
            rho = float(spearmanr(xs[ok], ys[ok]).statistic) if n >= 5 and np.ptp(xs[ok]) > 0 and np.ptp(ys[ok]) > 0 else math.nan
            corr[int(round(lead * step_min))] = (rho, n)
        valid = {k: v[0] for k, v in corr.items() if not math.isnan(v[0])}
        following = [v for k, v in valid.items() if k > 0]
        if not valid and np.nanmax(x) - np.nanmin(x) == 0:
            notes.append(f"{label}: constant at {np.nanmax(x):.3g} over every window, so it predicts nothing "
                         "(its rank correlation counts as 0)")
            valid, following = {0: 0.0}, [0.0]
        best = max(valid, key=lambda k: valid[k]) if valid else None
        level, floor, curve = _level(x, y, np.nan_to_num(req), budget)
        warned = _warnings(x, level, onsets, horizon) if level is not None else []
        results.append(SignalResult(
            signal=col, label=label, windows=present, correlation=corr, best_lead_min=best,
            best_rho=valid[best] if best is not None else math.nan,
            predictive_rho=float(np.mean(following)) if following else math.nan, level=level, floor=floor,
            onsets=int(len(onsets)),
            warned=len(warned), median_lead_min=float(np.median(warned)) * step_min if warned else None, curve=curve))
    ranked = [r for r in results if not math.isnan(r.predictive_rho)]
    worst = min(ranked, key=lambda r: r.predictive_rho).signal if len(ranked) > 1 else None
    rule = _rule(frame, results, y, ONSET_BURN * budget, horizon, onsets, step_min)
    if rule is None:
        notes.append("no scaling rule: neither the waiting queue nor the running batch reaches a level at which "
                     "breach share rises past the error budget's rate in this data")
    return SignalReport(scope=scope, window_s=window_s, budget=budget, windows=frame.reset_index(), results=results,
                        rule=rule, worst=worst, notes=notes)


def _rule(frame: pd.DataFrame, results: list[SignalResult], y: np.ndarray, budget: float, horizon: int,
          onsets: np.ndarray, step_min: float) -> Rule | None:
    best: tuple[float, Rule] | None = None
    followed = _followed(y, budget, horizon)  # the same for every candidate rule
    base_rate = float(followed.mean())
    for r in results:
        if r.signal not in SCALE_ON or r.level is None:
            continue
        x = frame[r.signal].to_numpy(float)
        for minutes in DURATIONS_MIN:
            k = max(1, int(round(minutes / step_min)))
            if k * step_min != minutes and minutes != DURATIONS_MIN[0]:
                continue  # a duration the windows cannot express
            precision, recall, n = _rule_score(x, followed, r.level, k, horizon, onsets)
            if not n or math.isnan(precision) or math.isnan(recall):
                continue
            f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
            leads = _warnings(x, r.level, onsets, horizon)
            per = "" if r.signal == "kv_usage" else " per replica"
            minutes_shown = k * step_min
            text = (f"scale out when {r.signal} >= {r.level:.3g}{per} for {minutes_shown:g} minute"
                    f"{'s' if minutes_shown != 1 else ''}")
            rule = Rule(signal=r.signal, level=r.level, minutes=int(minutes_shown), precision=precision, recall=recall,
                        alerts=n, base_rate=base_rate, median_lead_min=float(np.median(leads)) * step_min if leads else None, text=text)
            if best is None or f1 > best[0] + 1e-12:
                best = (f1, rule)
    return best[1] if best else None


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def to_json(rep: SignalReport) -> dict[str, Any]:
    """docs/cli/tail.md: the ``signals`` object."""
    return {
        "scope": rep.scope, "window_s": rep.window_s, "budget_rate": rep.budget,
        "onset_share": ONSET_BURN * rep.budget,
        "signals": [{
            "signal": r.signal, "label": r.label, "windows": r.windows,
            "correlation": [{"lead_min": k, "spearman": _num(v[0]), "windows": v[1]} for k, v in r.correlation.items()],
            "best_lead_min": r.best_lead_min, "best_spearman": _num(r.best_rho),
            "predictive_spearman": _num(r.predictive_rho), "level": _num(r.level),
            "floor": _num(r.floor),
            "level_method": "isotonic fit of breach share on the signal, weighted by requests: lowest value at which "
                            "the fit exceeds its floor (the fit at the signal's 10th percentile) by the budget rate",
            "onsets": r.onsets, "onsets_warned": r.warned, "median_lead_min": _num(r.median_lead_min),
            "curve": [{"signal": a, "breach_share": b} for a, b in _thin_curve(r.curve)],
            # the seed's starting point for a queue threshold (3-5 waiting per replica), read off the fit
            "breach_share_at": ({str(v): fitted_at(r.curve, v) for v in SEED_QUEUE_LEVELS}
                                if r.signal == "waiting" else None),
        } for r in rep.results],
        "worst_signal": rep.worst,
        "rule": None if rep.rule is None else {
            "text": rep.rule.text, "signal": rep.rule.signal, "level": rep.rule.level, "minutes": rep.rule.minutes,
            "precision": _num(rep.rule.precision), "recall": _num(rep.rule.recall), "alerts": rep.rule.alerts,
            "base_rate": _num(rep.rule.base_rate),
            "median_lead_min": _num(rep.rule.median_lead_min)},
        "notes": rep.notes,
    }

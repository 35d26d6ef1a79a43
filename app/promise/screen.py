"""The promise at the screen's resolution: the Promise page's tables read from running totals of the
cube's windows, by lookup, instead of a pass over every window at every change.

Nobody reads 8,640 points per path: a chart a thousand-odd pixels wide shows about a thousand. As
Grafana's "max data points" does, the per-window view takes a step that follows the range
(:func:`screen_step`: at most ``MAX_POINTS`` steps per path, a whole number of cube windows). The
windows' counts add up, so the counts of any run of windows (a, b] are the running totals at b less
those at a: the shares over the range, each step's, and the burn of each alert rule's trailing range
(5 min, 30 min, 1 h, 6 h, 3 d, the SRE workbook's) are two lookups each. Each number is the one
:func:`app.promise.shares.shares` gives over the same windows as a range: exact at a bucket bound, the same
estimate and bounds elsewhere (a histogram's estimate is linear in its counts, so the estimate of
summed counts is the sum of the windows' estimates), held to 1e-12 by ``tests/promise/test_screen.py``.
A file's counts are whole numbers, which running sums keep exactly; a pushdown's (PromQL's
extrapolated ``increase()``) are fractions, whose difference of two month-long totals can carry a
relative rounding of about 1e-11 on one window's count.

What differs from :func:`app.promise.shares.evaluate`'s per-window table: a step longer than the cube window
is one row (its numbers over its windows), and an alert rule's burn over a trailing range is the
joint interval of that range's counts over the budget, as ``headroom rules`` records it in Prometheus
and as the range rows have it, where ``promise__shares`` sums each window's own joint interval
weighted by its requests (near it, not the same), so a rule whose burn sits right at its factor may
read otherwise there. The state of a rule at a time is then the same whatever the range or step
shown. The per-window table stays :func:`app.promise.shares.evaluate`'s (the report, and the page's
full-resolution download).

The running totals are numpy cumulative sums over each path's windows of ``cube_window_histograms``
(``promise__window_lists``), built on a cube's first evaluation and kept for the workspace
(``_TOTALS``, its last two cubes): DuckDB has no element-wise running sum of lists (through one row per
bucket and window it took 5 s per histogram of the bench's 30-day, 10-path cube), and a statement
that looks up and does the share arithmetic cost more to plan (about 0.2 s) than the 100 ms a
promise change may take; the arithmetic is ``promise__shares``' written again on arrays, held equal
to it by the tests. A cube whose histogram changed its bucket layout part-way has no totals (two
layouts' counts do not add up): it is evaluated window by window (:func:`app.promise.shares.evaluate`).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from app import sql
from app.promise import shares as pm
from app.store import Workspace

HISTOGRAMS = ("ttft", "tpot", "itl", "e2e", "queue")

# steps per path at most: about the points a chart 1,500 pixels wide shows (Grafana's "max data
# points" is the panel's width in pixels)
MAX_POINTS = 1000

# the steps a view may take, in seconds: Grafana's and Prometheus' usual ones (those that are a
# multiple of the cube window)
STEPS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400)

# (rule column, long window s, short window s, alert parameter): the SRE workbook's pairs
_RULES = (("page_1h", 3600, 300, "fast_factor"), ("page_6h", 21600, 1800, "slow_factor"),
          ("ticket_3d", 259200, 21600, "ticket_factor"))
_TRAILING_S = (300, 1800, 3600, 21600, 259200)

# cubes whose running totals this process keeps (a 30-day, 10-path cube of 5-minute windows holds
# about 90 MB of them)
_KEPT_CUBES = 2


def screen_step(window_s: int, start: datetime, end: datetime, max_points: int = MAX_POINTS) -> int:
    """The step (seconds) of the per-window view of [start, end): the cube window while the range
    holds at most ``max_points`` windows, else the smallest of ``STEPS_S`` that is a multiple of the
    window and cuts the range into at most ``max_points`` steps (or a whole number of windows that
    does, when none of them does)."""
    windows = max(1, math.ceil((end - start).total_seconds() / window_s))
    if windows <= max_points:
        return int(window_s)
    for step in STEPS_S:
        if step % window_s == 0 and math.ceil(windows * window_s / step) <= max_points:
            return step
    return int(window_s) * math.ceil(windows / max_points)


# -- the running totals -----------------------------------------------------------------------------
@dataclass
class _Histogram:
    """One histogram of one path: its layout's bounds and, from row 0 (before the path's first
    window) to row k (through its k-th window), the running totals."""

    les: list[float]
    counts: np.ndarray | None  # (windows + 1) x len(les): bucket counts over the windows with n > 0
    # (windows + 1) x 5: the observations n over those windows, how many windows observed something,
    # windows of the (non-empty) layout, the `_count` summed and windows that hold one (_N .. _COUNT_WINDOWS)
    scalars: np.ndarray


_N, _N_WINDOWS, _WINDOWS, _COUNT, _COUNT_WINDOWS = range(5)


@dataclass
class _Path:
    first_slot: int
    last_slot: int
    counters: np.ndarray  # (windows + 1) x 4: finished, windows holding it, failed, windows holding it
    histograms: dict[str, _Histogram] = field(default_factory=dict)


@dataclass
class Totals:
    """A cube's running totals per path (``None`` when a histogram has two layouts)."""

    window_s: int
    paths: dict[str, _Path] | None


# per workspace object (gone with it), its last cubes' totals: a cube id is never reused in a
# workspace (a sequence), so an id names one cube's windows for the object's life
_TOTALS: weakref.WeakKeyDictionary[Workspace, OrderedDict[tuple[int, int], Totals]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def totals(ws: Workspace, cube_id: int, window_s: int) -> Totals:
    """The running totals of cube ``cube_id``, built from its per-window lists on first use and kept
    for the workspace (its last ``_KEPT_CUBES`` cubes)."""
    key = (int(cube_id), int(window_s))
    with _LOCK:
        kept = _TOTALS.setdefault(ws, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
    cur = ws.cursor()
    built = _build(cur, cube_id, window_s, sql.rows(cur, "promise__layouts", cube_id=cube_id))
    with _LOCK:
        kept[key] = built
        while len(kept) > _KEPT_CUBES:
            kept.popitem(last=False)
    return built


def _build(cur: Any, cube_id: int, window_s: int, layouts: list[tuple]) -> Totals:
    seen: set[tuple[str, str]] = set()
    for path, signal, *_ in layouts:
        if (path, signal) in seen:
            return Totals(int(window_s), None)
        seen.add((path, signal))
    les = {int(layout_id): [float(x) for x in bounds] for _, _, layout_id, bounds in layouts}
    rows = sql.arrow(cur, "promise__window_lists", cube_id=cube_id)
    out: dict[str, _Path] = {}
    if rows.num_rows == 0:
        return Totals(int(window_s), out)
    names = rows["path"].to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
    ends = np.r_[starts[1:], len(names)]
    slots = rows["window_start"].cast(pa.int64()).to_numpy() // 1_000_000 // int(window_s)
    columns = {c: rows[c].combine_chunks() for c in rows.column_names if c not in ("path", "window_start")}
    for a, b in zip(starts, ends, strict=True):
        part = {c: col.slice(a, b - a) for c, col in columns.items()}
        finished, finished_windows = _running(part["finished"])
        failed, failed_windows = _running(part["failed"])
        entry = _Path(int(slots[a]), int(slots[b - 1]),
                      np.column_stack([finished, finished_windows, failed, failed_windows]).astype(float))
        for h in HISTOGRAMS:
            hist = _running_histogram(part[f"{h}_layout"], part[f"{h}_counts"], part[f"{h}_count"], les)
            if hist is not None:
                entry.histograms[h] = hist
        out[str(names[a])] = entry
    return Totals(int(window_s), out)


def _cumsum0(values: np.ndarray) -> np.ndarray:
    """Running sum with a leading zero row (the totals before the first window)."""
    return np.concatenate([np.zeros((1, *values.shape[1:]), dtype=values.dtype), np.cumsum(values, axis=0)])


def _running(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A counter's running sum (a window without it adds 0) and how many windows held it."""
    held = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(column.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=float)
    return _cumsum0(values), _cumsum0(held.astype(np.int64))


def _running_histogram(layout: pa.Array, counts: pa.Array, count: pa.Array,
                       les: dict[int, list[float]]) -> _Histogram | None:
    """One histogram's running totals over one path's windows, None when the path has none. The
    windows that observed something (n > 0, n the +Inf bucket, else the `_count`) are those
    promise__shares' sums take; a window whose lists are missing (a scrape gap) adds nothing."""
    ids = np.asarray(layout.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    present = ids >= 0
    if not present.any():
        return None
    bounds = les[int(ids[present][0])]
    total, total_windows = _running(count)
    width = len(bounds)
    if width == 0:  # the empty layout: a `_count` without buckets
        zero = _cumsum0(np.zeros(len(ids)))
        return _Histogram(bounds, None, np.column_stack([zero, zero, zero, total, total_windows]).astype(float))
    lengths = np.asarray(counts.value_lengths().fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    flat = np.asarray(counts.flatten().to_numpy(zero_copy_only=False), dtype=float)
    offsets = np.asarray(counts.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = offsets[:-1] - offsets[0]  # a slice's offsets are into its parent's values; flatten() starts at its first
    grid = np.zeros((len(ids), width))
    rows = np.flatnonzero(present & (lengths == width))
    grid[rows] = flat[offsets[rows][:, None] + np.arange(width)[None, :]]
    inf = next((i for i, le in enumerate(bounds) if math.isinf(le) and le > 0), None)
    values = np.asarray(count.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=float)
    n = grid[:, inf] if inf is not None else values
    observed = present & (n > 0)
    scalars = np.column_stack([_cumsum0(np.where(observed, n, 0.0)), _cumsum0(observed.astype(float)),
                               _cumsum0(present.astype(float)), total, total_windows]).astype(float)
    return _Histogram(bounds, _cumsum0(grid * observed[:, None]), scalars)


# -- the arithmetic of promise__shares on ranges' counts ----------------------------------------------
def _positions(les: list[float], threshold: float) -> dict[str, Any] | None:
    """The threshold's place in a layout, as promise__shares' ``positions`` finds it (0-based)."""
    if not les:
        return None
    tol = 1e-9 * threshold
    at = [i for i, le in enumerate(les) if abs(le - threshold) <= tol]
    below = [(le, i) for i, le in enumerate(les) if le < threshold - tol]
    above = [(le, i) for i, le in enumerate(les) if le > threshold + tol and math.isfinite(le)]
    return {"i_at": max(at) if at else None,
            "le_lo": max(below)[0] if below else None, "i_lo": max(below)[1] if below else None,
            "le_hi": min(above)[0] if above else None, "i_hi": min(above)[1] if above else None}


def _span(cum: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The counts of windows (lo, hi] from running totals indexed by row (0: before the first)."""
    return cum[hi] - cum[lo]


def _nan_where(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.where(mask, values, np.nan)


def _breaches(hist: _Histogram | None, spans: np.ndarray | None, threshold: float | None, lo: np.ndarray,
              hi: np.ndarray) -> dict[str, np.ndarray]:
    """Per range (rows lo, hi of the totals; ``spans`` the histogram's scalars over them): n, the breach
    estimate and bounds (counts), `exact` (1, 0, NaN: none) and the ITL request bound's count, as
    promise__shares' ``window_counts`` and range sums give them; NaN where it gives NULL."""
    size = len(lo)
    nan = np.full(size, np.nan)
    out = {"n": nan, "bad": nan, "bad_low": nan, "bad_high": nan, "exact": nan, "above_high": nan}
    if hist is None or spans is None or threshold is None or hist.counts is None:
        return out
    pos = _positions(hist.les, threshold)
    if pos is None:
        return out
    n = spans[:, _N]
    observed = spans[:, _N_WINDOWS] > 0
    held = spans[:, _WINDOWS] > 0
    cols = [i for i in (pos["i_at"], pos["i_lo"], pos["i_hi"]) if i is not None]
    picked = hist.counts[np.ix_(hi, cols)] - hist.counts[np.ix_(lo, cols)]
    at = {i: picked[:, k] for k, i in enumerate(cols)}
    c_at, c_lo, c_hi = (None if i is None else at[i] for i in (pos["i_at"], pos["i_lo"], pos["i_hi"]))
    lo0 = np.zeros(size) if c_lo is None else c_lo
    if c_at is not None:
        bad = bad_low = bad_high = n - c_at
    else:
        if pos["le_hi"] is None:
            bad = n - lo0
        else:
            le_lo = 0.0 if pos["le_lo"] is None else pos["le_lo"]
            bad = n - (lo0 + (c_hi - lo0) * (threshold - le_lo) / (pos["le_hi"] - le_lo))
        bad_low = np.zeros(size) if c_hi is None else n - c_hi
        bad_high = n - lo0
    positive = observed & (n > 0)
    above = n - (c_at if c_at is not None else lo0)
    return {"n": _nan_where(observed, n), "bad": _nan_where(positive, bad), "bad_low": _nan_where(positive, bad_low),
            "bad_high": _nan_where(positive, bad_high),
            "exact": _nan_where(held, np.full(size, 1.0 if c_at is not None else 0.0)),
            "above_high": _nan_where(held, above)}


def _coalesce(*arrays: np.ndarray) -> np.ndarray:
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = np.where(np.isnan(out), a, out)
    return out


def _shares(entry: _Path, promise: dict[str, Any], lo: np.ndarray, hi: np.ndarray,
            include_failed: bool) -> dict[str, Any]:
    """promise__shares' columns (from ``requests`` to ``joint_high``) over each range of one path."""
    size = len(lo)
    hist = entry.histograms
    spans = {h: _span(x.scalars, lo, hi) for h, x in hist.items()}
    b = {h: _breaches(hist.get(h), spans.get(h), promise["tpot_s" if h == "itl" else f"{h}_s"], lo, hi)
         for h in HISTOGRAMS}
    counters = _span(entry.counters, lo, hi)
    finished = _nan_where(counters[:, 1] > 0, counters[:, 0])
    failed = _nan_where(counters[:, 3] > 0, counters[:, 2])
    nan = np.full(size, np.nan)
    ttft_count, tpot_count, e2e_count = (
        nan if h not in spans else _nan_where(spans[h][:, _COUNT_WINDOWS] > 0, spans[h][:, _COUNT])
        for h in ("ttft", "tpot", "e2e"))
    requests = _coalesce(ttft_count, e2e_count, tpot_count, finished)
    finished_requests = _coalesce(finished, e2e_count, tpot_count, ttft_count)
    out: dict[str, Any] = {"requests": requests, "failed_requests": np.where(np.isnan(failed), 0.0, failed),
                           "finished_requests": finished_requests, "target": np.full(size, promise["target"])}
    share: dict[str, dict[str, np.ndarray]] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for h in HISTOGRAMS:
            share[h] = {"share": b[h]["bad"] / b[h]["n"], "low": b[h]["bad_low"] / b[h]["n"],
                        "high": b[h]["bad_high"] / b[h]["n"], "exact": b[h]["exact"]}
        per_request = ~np.isnan(share["tpot"]["share"])
        per_token = ~per_request & ~np.isnan(share["itl"]["share"])
        tpot_request_low = np.where(per_request, share["tpot"]["low"], np.where(per_token, 0.0, np.nan))
        itl_bound = np.where(finished_requests > 0, np.minimum(1.0, b["itl"]["above_high"] / finished_requests), 1.0)
        tpot_request_high = np.where(per_request, share["tpot"]["high"], np.where(per_token, itl_bound, np.nan))
        if include_failed:
            failed_share = np.where(requests > 0, np.minimum(1.0, out["failed_requests"] / requests), np.nan)
        else:
            failed_share = np.zeros(size)
    for h in ("ttft", "tpot", "e2e", "queue"):
        s = share[h]
        if h == "tpot":
            s = {k: _coalesce(share["tpot"][k], share["itl"][k]) for k in s}
        out[f"{h}_threshold_s"] = np.full(size, np.nan if promise[f"{h}_s"] is None else promise[f"{h}_s"])
        out[f"{h}_share"], out[f"{h}_low"], out[f"{h}_high"] = s["share"], s["low"], s["high"]
        out[f"{h}_exact"] = s["exact"]  # 1.0, 0.0 or NaN; made a nullable boolean with the frame
        if h == "tpot":
            out["tpot_basis"] = np.where(per_request, "requests", np.where(per_token, "tokens", None))
    out["failed_share"] = failed_share

    def open_high(h: str, high: np.ndarray) -> np.ndarray:
        # a threshold whose histogram the engine does not export leaves the joint open to 1
        return np.where(np.isnan(high), 1.0 if promise[f"{h}_s"] is not None else 0.0, high)

    out["joint_low"] = np.maximum.reduce([np.nan_to_num(x, nan=0.0) for x in (
        share["ttft"]["low"], tpot_request_low, share["e2e"]["low"], share["queue"]["low"], failed_share)])
    out["joint_high"] = np.minimum(1.0, open_high("ttft", share["ttft"]["high"]) + open_high("tpot", tpot_request_high)
                                   + open_high("e2e", share["e2e"]["high"]) + open_high("queue", share["queue"]["high"])
                                   + np.nan_to_num(failed_share, nan=0.0))
    return out


def _path_promises(entries: dict[str, _Path], promises: list[pm.Promise]) -> dict[str, dict[str, Any]]:
    """Each request path's promise (its own, else the ``*`` one; target 0.99 by default), as
    promise__shares' ``path_promise`` picks it; paths without one are left out."""
    own = {p.path: p for p in promises}
    star = own.get(pm.ALL_PATHS)
    out = {}
    for path in sorted(entries):
        if not entries[path].histograms:  # not a request path (no latency histogram)
            continue
        mine = own.get(path)
        if mine is None and star is None:
            continue
        values = {}
        for f in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
            v = getattr(mine, f) if mine is not None else None
            values[f] = v if v is not None else (getattr(star, f) if star is not None else None)
        values["target"] = mine.target if mine is not None else star.target  # type: ignore[union-attr]
        out[path] = values
    return out


# -- the page's tables ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScreenTables(pm.PromiseTables):
    """:class:`app.promise.shares.PromiseTables` at the screen's resolution: ``windows`` and ``alerts`` hold
    one row per step of ``step_s`` seconds (its first window's start; the cube window when
    ``step_s`` equals it); ``looked_up`` says whether they came from the running totals or from
    every window (:func:`app.promise.shares.evaluate`, one row per window)."""

    step_s: int = 0
    looked_up: bool = False


def evaluate(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise], start: datetime,
             end: datetime, include_failed: bool = True, slo_period_days: float = 30,
             max_points: int = MAX_POINTS) -> ScreenTables:
    """The Promise page's tables for [start, end) at the screen's resolution (``screen_step``): the
    shares per path over the range (``paths``, as :func:`app.promise.shares.shares`), per step
    (``windows``) and the burn rate and alert states at each step's end (``alerts``), from the running
    totals (module docstring); as in promise__shares, a range or step without requests has no row."""
    kept = totals(ws, cube_id, window_s)
    if kept.paths is None:
        full = pm.evaluate(ws, cube_id, window_s, promises, start, end, include_failed, slo_period_days)
        return ScreenTables(full.paths, full.windows, full.alerts, int(window_s), False)
    step_s = screen_step(window_s, start, end, max_points)
    a, b = math.ceil(_epoch(start) / window_s), math.ceil(_epoch(end) / window_s)  # slots a .. b - 1
    k = max(1, step_s // window_s)
    factors = pm._alert_params(window_s, slo_period_days)
    trailing = [max(1, seconds // int(window_s)) for seconds in _TRAILING_S]
    ranges: list[dict[str, np.ndarray]] = []
    windows: list[dict[str, np.ndarray]] = []
    alerts: list[dict[str, np.ndarray]] = []
    for path, promise in _path_promises(kept.paths, promises).items():
        entry = kept.paths[path]
        if not (b - 1 >= entry.first_slot and a <= entry.last_slot):
            continue  # no window of the path in the range
        step_lo = a - 1 + np.arange(0, -(-(b - a) // k)) * k
        step_hi = np.minimum(step_lo + k, b - 1)
        meets = (step_hi >= entry.first_slot) & (step_lo + 1 <= entry.last_slot)
        step_lo, step_hi = step_lo[meets], step_hi[meets]
        steps = len(step_lo)
        # every range in one pass: the whole range, the steps, then each rule range at each step's end
        lo = np.concatenate([[a - 1], step_lo, *[np.maximum(step_hi - m, a - 1) for m in trailing]])
        hi = np.concatenate([[b - 1], step_hi, *[step_hi] * len(trailing)])
        # a slot's row of the totals: 0 before the path's first window, the last after its span
        span = entry.last_slot - entry.first_slot + 1
        got = _shares(entry, promise, np.clip(lo - entry.first_slot + 1, 0, span),
                      np.clip(hi - entry.first_slot + 1, 0, span), include_failed)
        names = np.full(steps, path, dtype=object)
        starts = ((step_lo + 1) * int(window_s) * 1_000_000).astype("datetime64[us]")
        budget = 1 - promise["target"]
        with np.errstate(invalid="ignore", divide="ignore"):
            busy_all = got["requests"] > 0
            burn_low = _nan_where(busy_all, got["joint_low"] / budget)
            burn_high = _nan_where(busy_all, got["joint_high"] / budget)
        burn = {seconds: (burn_low[1 + steps * (j + 1):1 + steps * (j + 2)],
                          burn_high[1 + steps * (j + 1):1 + steps * (j + 2)]) for j, seconds in enumerate(_TRAILING_S)}
        busy = busy_all[1:1 + steps]
        # as promise__shares, a range or step without requests (a gap, an idle path) has no row
        if busy_all[0]:
            ranges.append({"window_start": np.array(["NaT"], dtype="datetime64[us]"),
                           "path": np.array([path], dtype=object), **{c: v[:1] for c, v in got.items()}})
        shown = {c: v[1:1 + steps] for c, v in got.items()}
        windows.append({"window_start": starts[busy], "path": names[busy], **{c: v[busy] for c, v in shown.items()}})
        alert = {"window_start": starts[busy], "path": names[busy], "requests": shown["requests"][busy],
                 "target": shown["target"][busy], "burn_low": burn_low[1:1 + steps][busy],
                 "burn_high": burn_high[1:1 + steps][busy]}
        for column, long_s, short_s, factor_name in _RULES:
            factor = factors[factor_name]
            (lo_long, hi_long), (lo_short, hi_short) = burn[long_s], burn[short_s]
            with np.errstate(invalid="ignore"):
                state = np.where((lo_long > factor) & (lo_short > factor), "firing",
                                 np.where((hi_long > factor) & (hi_short > factor), "possible", "ok")).astype(object)
            alert[column] = state[busy] if window_s <= short_s else np.full(int(busy.sum()), None, dtype=object)
        alerts.append(alert)
    return ScreenTables(_frame(ranges, pm.SHARE_COLUMNS), _frame(windows, pm.SHARE_COLUMNS),
                        _frame(alerts, pm.ALERT_COLUMNS), int(step_s), True)


def _frame(parts: list[dict[str, np.ndarray]], columns: tuple[str, ...]) -> pd.DataFrame:
    """One frame of the paths' columns with the dtypes :func:`app.promise.shares.shares`' frames have (floats,
    nullable booleans, text, naive UTC times), built from the arrays directly."""
    data: dict[str, Any] = {}
    for c in columns:
        values = np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, dtype=object)
        if c.endswith("_exact"):
            flags = values.astype(float)
            data[c] = pd.arrays.BooleanArray(flags == 1.0, np.isnan(flags))
        elif c == "window_start":
            data[c] = values.astype("datetime64[us]")
        elif values.dtype == object:
            data[c] = pd.array(values, dtype="str")
        else:
            data[c] = values.astype(float)
    return pd.DataFrame(data)


def _epoch(t: datetime) -> float:
    """Seconds since the epoch (a naive time is UTC, as the cube's window starts are)."""
    return t.timestamp() if t.tzinfo is not None else (t - datetime(1970, 1, 1)).total_seconds()


def full_resolution_csv(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise], start: datetime,
                        end: datetime, include_failed: bool = True, slo_period_days: float = 30) -> str:
    """Every window's shares with its burn rate and alert states, as CSV: :func:`app.promise.shares.evaluate`'s
    per-window tables (the page's download at full resolution)."""
    full = pm.evaluate(ws, cube_id, window_s, promises, start, end, include_failed, slo_period_days)
    states = full.alerts.drop(columns=["requests", "target"])
    return full.windows.merge(states, on=["window_start", "path"], how="left").to_csv(index=False)

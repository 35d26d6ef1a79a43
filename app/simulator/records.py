"""Per-request records of a run, and the exact breach shares they give.

One row per request of the trace. Times are UTC timestamps to the microsecond (NaT until the event
happens); durations are seconds as vLLM V1 observes them (vLLM's ``vllm/v1/metrics/stats.py``):

- ``ttft_s``  = first_token - arrival (arrival is the API server's: includes tokenization, queue, prefill)
- ``queue_s`` = scheduled (first time) - the engine's arrival (a few ms after ``arrival``: tokenization)
- ``e2e_s``   = finish - arrival
- ``tpot_s``  = decode / (output_tokens - 1), 0 when output_tokens <= 1, where decode = finish - first_token
- prefill = first_token - scheduled, decode = finish - first_token (not stored: derive them)

Every duration is an integer number of microseconds divided by 1e6 — recompute one from the stored
timestamps as ``(t2 - t1)`` in integer microseconds / 1e6 (not ``total_seconds()``, which rounds
differently in the last bit) — so records and histograms agree even for a value exactly on a bucket
bound.

``finished_reason`` is stop / length / abort, or None while in flight. ``lost`` marks requests in
flight on a replica when it crashed (``abort`` at the crash time): the engine never reported them, so
no metric counts their finish. ``output_tokens`` is what was generated (a lost request's partial
count).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from app.engine.fleet import FleetRun
from app.engine.outcomes import NO_TIME, US, run_arrays
from app.engine.replica import REASON_ABORT, REASON_LENGTH, REASON_STOP

REASON_NAMES = {REASON_STOP: "stop", REASON_LENGTH: "length", REASON_ABORT: "abort"}
# DuckDB's time_bucket origin for intervals without months (2000-01-03 00:00:00 UTC): windows here
# line up with the cube's
WINDOW_ORIGIN_S = 946857600


def _utc(origin: float, us: np.ndarray) -> pd.Series:
    """Microseconds since ``origin`` (whole Unix seconds) as UTC timestamps (NaT for NO_TIME)."""
    out = np.where(us == NO_TIME, NO_TIME, us + int(round(origin)) * US)
    return pd.Series(pd.to_datetime(out, unit="us", utc=True))


def build_records(run: FleetRun, arrays: dict[str, np.ndarray] | None = None,
                  rows: slice | None = None) -> pd.DataFrame:
    """One row per request (see the module docstring for the columns); ``rows``: only these requests
    (a month of records is written piece by piece); ``arrays``: the run's :func:`run_arrays`, when
    the caller has them already."""
    whole = run_arrays(run) if arrays is None else arrays
    part = rows or slice(None)
    d = {k: v[part] for k, v in whole.items()}
    trace = run.trace
    names = np.array(trace.path_names, dtype=object)
    reason = np.array([REASON_NAMES.get(int(x)) for x in d["reason"]], dtype=object)
    frame = pd.DataFrame({
        "id": trace.request_id[part],
        "path": pd.Categorical(names[d["path"]], categories=list(trace.path_names)),
        "model_name": np.array([p.served_name for p in trace.spec.paths], dtype=object)[d["path"]],
        "replica": d["replica"],
        "arrival": _utc(trace.origin, d["arrival_us"]),
        "scheduled": _utc(trace.origin, d["scheduled_us"]),
        "first_token": _utc(trace.origin, d["first_token_us"]),
        "finish": _utc(trace.origin, d["finish_us"]),
        "prompt_tokens": d["prompt_tokens"],
        "output_tokens": d["output_tokens"],
        "ttft_s": d["ttft_s"],
        "tpot_s": d["tpot_s"],
        "e2e_s": d["e2e_s"],
        "queue_s": d["queue_s"],
        "finished_reason": reason,
        "preemptions": d["preemptions"],
        "lost": d["lost"],
    })
    return frame


def _window_start(ts: pd.Series, window_s: float | None) -> pd.Series:
    """Left-open, right-closed windows (start, start + window_s], like the cube's."""
    if window_s is None:
        return pd.Series(pd.NaT, index=ts.index, dtype="datetime64[ns, UTC]")
    ns = pd.DatetimeIndex(ts).as_unit("ns").asi8 - WINDOW_ORIGIN_S * 1_000_000_000
    w = int(round(window_s * 1e9))
    start = (-(-ns // w) - 1) * w + WINDOW_ORIGIN_S * 1_000_000_000  # integer ceil: exact
    return pd.Series(pd.to_datetime(start, utc=True), index=ts.index)


def true_shares(records: pd.DataFrame, window_s: float | None,
                thresholds: Mapping[str, tuple[float, float]],
                start: pd.Timestamp | None = None, end: pd.Timestamp | None = None) -> pd.DataFrame:
    """Exact per-window, per-path breach shares from per-request records.

    ``thresholds`` maps a path to (TTFT seconds, TPOT seconds); a request breaches when its value is
    strictly above the threshold (the complement of a histogram's ``le`` bucket). Windows follow
    vLLM's observation times, so they match histogram increases over the same windows:

    - TTFT: requests whose first token came in the window (the TTFT histogram is observed then,
      including requests later lost in a crash);
    - TPOT and joint (TTFT or TPOT breached): requests that finished in the window (TPOT is observed
      at finish; lost requests never are). A one-token request has TPOT 0 and never breaches TPOT.

    Histogram increases match these counts exactly in windows without a crash or a scrape gap; a
    crashed process takes what it observed since its last scrape with it, and an increase across a gap
    lands in the window of the first scrape after it.

    ``window_s=None`` gives one row per path over everything; ``start``/``end`` keep observations in
    (start, end]. Columns: window_start, path, first_tokens, ttft_breached, ttft_share, finished,
    tpot_breached, tpot_share, joint_breached, joint_share (shares NaN when the count is 0).
    """
    out = []
    for path, rec in records.groupby("path", observed=True):
        if path not in thresholds:
            continue
        x_ttft, y_tpot = thresholds[path]
        first = rec[rec["first_token"].notna()]
        done = rec[rec["finished_reason"].notna() & ~rec["lost"]]
        if start is not None:
            first, done = first[first["first_token"] > start], done[done["finish"] > start]
        if end is not None:
            first, done = first[first["first_token"] <= end], done[done["finish"] <= end]
        a = pd.DataFrame({"window_start": _window_start(first["first_token"], window_s),
                          "ttft_breached": (first["ttft_s"] > x_ttft).astype(int)})
        a = a.groupby("window_start", dropna=False).agg(first_tokens=("ttft_breached", "size"),
                                                        ttft_breached=("ttft_breached", "sum"))
        tpot_b = done["tpot_s"] > y_tpot
        b = pd.DataFrame({"window_start": _window_start(done["finish"], window_s),
                          "tpot_breached": tpot_b.astype(int),
                          "joint_breached": (tpot_b | (done["ttft_s"] > x_ttft)).astype(int)})
        b = b.groupby("window_start", dropna=False).agg(finished=("tpot_breached", "size"),
                                                        tpot_breached=("tpot_breached", "sum"),
                                                        joint_breached=("joint_breached", "sum"))
        m = a.join(b, how="outer").fillna(0).reset_index()
        m.insert(1, "path", path)
        out.append(m)
    cols = ["window_start", "path", "first_tokens", "ttft_breached", "ttft_share", "finished",
            "tpot_breached", "tpot_share", "joint_breached", "joint_share"]
    if not out:
        return pd.DataFrame(columns=cols)
    res = pd.concat(out, ignore_index=True)
    for c in ("first_tokens", "ttft_breached", "finished", "tpot_breached", "joint_breached"):
        res[c] = res[c].astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        res["ttft_share"] = np.where(res["first_tokens"] > 0, res["ttft_breached"] / res["first_tokens"], np.nan)
        res["tpot_share"] = np.where(res["finished"] > 0, res["tpot_breached"] / res["finished"], np.nan)
        res["joint_share"] = np.where(res["finished"] > 0, res["joint_breached"] / res["finished"], np.nan)
    return res[cols].sort_values(["window_start", "path"], ignore_index=True)

"""Beside the model: the empirical load–response curve and the queueing view.

The curve (docs/methods.md#load-response-curve) reads the breach share off the observed per-window relation between
per-replica load and breach share. It ignores backlog carried across windows and pooling, which is
why the design (docs/economics.md) does not use it as the estimator; it is shown next to the model's predictions so a
reader sees where the two agree and where the data runs out (its observed load range).

The queueing view (Kingman's three terms per hour, an Erlang-C curve over replica counts) is a
labelled thinking tool: a batching, preempting server is not an M/M/c queue.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.economics.check import curve, queueing
from app.economics.predict.scenarios import Analysis
from app.promise.shares import Promise, shares, time_range
from app.store import Workspace

CURVE_WINDOW_S = 300


def load_response(ws: Workspace, cube_id: int, promises: list[Promise], replicas: list[int],
                  traffic: list[float]) -> dict[str, Any]:
    """Per path: the isotonic curves (joint share low/high ends against per-replica load), the observed
    load range, and the curve's reading at each (replicas, traffic)."""
    start, end = time_range(ws, cube_id, None, None)
    frame = shares(ws, cube_id, promises, start, end, by_window=True, include_failed=False)
    reps = dict(ws.cursor().execute(
        "select window_start, max(value) from cube_rows where cube_id = $id and stat = 'replicas' group by 1",
        {"id": cube_id}).fetchall())
    out: dict[str, Any] = {}
    for path, part in frame.groupby("path"):
        n_w = np.array([reps.get(w, np.nan) for w in part["window_start"]], dtype=float)
        ok = (n_w > 0) & part["joint_low"].notna().to_numpy()
        req = part["requests"].to_numpy(float)[ok]
        load = req / CURVE_WINDOW_S / n_w[ok]
        low = curve.fit(load, part["joint_low"].to_numpy(float)[ok], req)
        high = curve.fit(load, part["joint_high"].to_numpy(float)[ok], req)
        readings = []
        for g in traffic:
            for k in replicas:
                a = curve.scenario(low, load, n_w[ok], req, k, g)
                b = curve.scenario(high, load, n_w[ok], req, k, g)
                readings.append({"replicas": k, "traffic": g, "share": (a.share + b.share) / 2,
                                 "share_low": a.share_low, "share_high": b.share_high,
                                 "extrapolated": a.extrapolated or b.extrapolated})
        out[str(path)] = {
            "observed_load_range": [float(load.min()), float(load.max())],
            "curve": [{"load": float(x), "share_low": float(y_lo), "share_high": float(y_hi)}
                      for x, y_lo, y_hi in zip(high.x, low(high.x), high.y, strict=True)],
            "readings": readings,
        }
    return out


def queueing_view(analysis: Analysis, replicas: list[int]) -> dict[str, Any]:
    """Kingman's terms per hour at the observed fleet size and an Erlang-C curve at the peak hour.

    A replica is taken as one server whose service rate is its request throughput with a full KV
    cache (batch = KV capacity / mean context of a request, step time from the fitted model)."""
    model, demand = analysis.model, analysis.demand
    rng = np.random.default_rng(5)
    weights = np.array([p.requests.sum() for p in demand.paths], dtype=float)
    mix = weights / weights.sum()
    prompt = sum(w * p.prompt.sample(20000, rng).mean() for w, p in zip(mix, demand.paths, strict=True))
    outputs = np.concatenate([p.output.sample(int(20000 * w) + 1, rng) for w, p in zip(mix, demand.paths,
                                                                                       strict=True)])
    out_mean = float(outputs.mean())
    cs2 = float(outputs.var() / out_mean**2)
    batch = max(1.0, min(model.max_num_seqs, model.kv_tokens / (prompt + out_mean / 2)))
    step = model.step_time(batch, 0.0, model.kv_tokens * 0.9)
    service_s = (out_mean * step / batch) + prompt * model.step_per_prefill_token_s
    mu = 1.0 / service_s
    total = sum(p.requests for p in demand.paths)
    per_hour = max(1, 3600 // demand.window_s)
    hours = []
    n_obs = analysis.observed.replicas
    for h in range(len(total) // per_hour):
        counts = total[h * per_hour:(h + 1) * per_hour]
        lam = counts.sum() / 3600
        ca2 = queueing.index_of_dispersion(counts) if counts.mean() > 0 else math.nan
        k = queueing.kingman_terms(lam / n_obs, service_s, ca2, cs2)
        hours.append({"hour": h, "arrival_rate": lam, "rho": k["rho"], "utilisation_term": k["utilisation_term"],
                      "variability_term": k["variability_term"], "service_s": service_s, "wait_s": k["wait_s"]})
    peak = max(h["arrival_rate"] for h in hours) if hours else float(total.sum() / max(demand.duration_s, 1))
    erlang = [{"replicas": c, "p_wait": queueing.erlang_c(c, peak / mu),
               "mean_wait_s": queueing.erlang_c_wait(c, peak, mu)} for c in replicas]
    return {"note": "thinking tool, not the estimator: one replica as one server of rate mu (requests/s at a "
                    "full KV cache); Kingman per hour at the observed fleet size, Erlang C at the peak hour",
            "service_rate_per_replica": mu, "service_cs2": cs2, "kingman": hours, "erlang_c": erlang}

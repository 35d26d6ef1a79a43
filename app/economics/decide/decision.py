"""Scenario predictions priced: headroom cost against breach cost per path, the cheapest fleet size,
the break-even price of a breach, and the cost per request that kept the promise.

Requests over the horizon = the path's observed request rate x traffic multiplier x horizon hours.
The fleet's headroom cost (N' x horizon x replica-hour price) is split across paths by their
requests (``split="requests"``) or equally (``split="equal"``); a path row's ``headroom_cost`` and
``total_cost`` are that path's share, so the rows of one scenario add up to the fleet's totals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from app.economics.decide import money
from app.economics.model.capacity import parameter_value
from app.economics.predict.scenarios import Analysis, Prediction

SPLITS = ("requests", "equal")


def price_rows(analysis: Analysis, predictions: list[Prediction], prices: money.Prices,
               split: str = "requests") -> list[dict[str, Any]]:
    """One row per (scenario, path): the JSON rows of ``headroom scenarios``."""
    if split not in SPLITS:
        raise ValueError(f"cost split {split!r}: expected one of {', '.join(SPLITS)}")
    hours_observed = analysis.demand.duration_s / 3600
    rate = {p: n / hours_observed for p, n in analysis.observed.requests.items()}  # requests per hour
    by_scenario: dict[tuple, list[Prediction]] = defaultdict(list)
    for p in predictions:
        by_scenario[(p.replicas, p.traffic, p.context)].append(p)
    rows = []
    for (n, g, m), preds in by_scenario.items():
        requests = {p.path: rate[p.path] * g * prices.horizon_hours for p in preds}
        fleet = money.headroom_cost(n, prices)
        shares = money.split_by_requests(fleet, requests) if split == "requests" else {
            p: fleet / len(requests) for p in requests}
        for p in preds:
            price = prices.breach.get(p.path, 0.0)
            cost = money.path_cost(requests[p.path], p.breach_share, price, shares[p.path])
            rows.append({
                "replicas": n, "traffic": g, "context": m, "path": p.path,
                "breach_share": p.breach_share, "breach_share_low": p.breach_share_low,
                "breach_share_high": p.breach_share_high,
                "ttft_share": p.ttft_share, "tpot_share": p.tpot_share, "cached_share": p.cached_share,
                "extrapolated": p.extrapolated, "extrapolation_reasons": p.reasons,
                "flagged": p.flagged, "flags": p.flags,
                "requests": requests[p.path],
                **cost,
                "breach_cost_low": requests[p.path] * p.breach_share_low * price,
                "breach_cost_high": requests[p.path] * p.breach_share_high * price,
                "cost_per_kept_request": money.cost_per_kept_request(shares[p.path], requests[p.path],
                                                                     p.breach_share),
            })
    rows.sort(key=lambda r: (r["traffic"], r["context"], r["replicas"], r["path"]))
    return rows


def fleet_totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario: the fleet's headroom, breach and total cost (point and interval ends)."""
    acc: dict[tuple, dict[str, float]] = {}
    for r in rows:
        key = (r["replicas"], r["traffic"], r["context"])
        t = acc.setdefault(key, {"headroom_cost": 0.0, "breach_cost": 0.0, "breach_cost_low": 0.0,
                                 "breach_cost_high": 0.0, "extrapolated": False, "flagged": False})
        for k in ("headroom_cost", "breach_cost", "breach_cost_low", "breach_cost_high"):
            t[k] += r[k]
        t["extrapolated"] = t["extrapolated"] or r["extrapolated"]
        t["flagged"] = t["flagged"] or r.get("flagged", r["extrapolated"])
    out = []
    for (n, g, m), t in sorted(acc.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        out.append({"replicas": n, "traffic": g, "context": m, **t,
                    "total_cost": t["headroom_cost"] + t["breach_cost"],
                    "total_cost_low": t["headroom_cost"] + t["breach_cost_low"],
                    "total_cost_high": t["headroom_cost"] + t["breach_cost_high"]})
    return out


def cheapest(totals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cheapest replica count for each (traffic, context), and whether the interval ends agree."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for t in totals:
        groups[(t["traffic"], t["context"])].append(t)
    out = []
    for (g, m), ts in groups.items():
        best = min(ts, key=lambda t: (t["total_cost"], t["replicas"]))
        best_low = min(ts, key=lambda t: (t["total_cost_low"], t["replicas"]))
        best_high = min(ts, key=lambda t: (t["total_cost_high"], t["replicas"]))
        out.append({"replicas": best["replicas"], "traffic": g, "context": m, "total_cost": best["total_cost"],
                    "replicas_if_low": best_low["replicas"], "replicas_if_high": best_high["replicas"],
                    "determined_by_data": best_low["replicas"] == best["replicas"] == best_high["replicas"]})
    return out


def next_size(rows: list[dict[str, Any]], replicas: int, traffic: float, context: float) -> int | None:
    """The smallest replica count above ``replicas`` computed at this traffic and context (the grid's
    next size: 8 after 6 in a grid of 4, 5, 6, 8, 10); None when there is none."""
    above = [r["replicas"] for r in rows
             if (r["traffic"], r["context"]) == (traffic, context) and r["replicas"] > replicas]
    return min(above) if above else None


def break_even(rows: list[dict[str, Any]], prices: money.Prices, replicas: int, traffic: float,
               context: float) -> dict[str, float | None]:
    """Per path: the price of one breach at which the grid's next size above ``replicas``
    (``next_size``) pays for its extra replicas, holding the other paths' breach prices as entered.
    None when no larger size was computed or it removes none of the path's breaches."""
    bigger = next_size(rows, replicas, traffic, context)
    now = {r["path"]: r for r in rows if (r["replicas"], r["traffic"], r["context"]) == (replicas, traffic, context)}
    nxt = {r["path"]: r for r in rows
           if bigger is not None and (r["replicas"], r["traffic"], r["context"]) == (bigger, traffic, context)}
    out: dict[str, float | None] = {}
    for path, r in now.items():
        if path not in nxt:
            out[path] = None
            continue
        others = sum(now[q]["breach_cost"] - nxt[q]["breach_cost"] for q in now if q != path and q in nxt)
        out[path] = money.break_even_breach_price(r["requests"], r["breach_share"], nxt[path]["breach_share"],
                                                  prices, other_paths_saving=others,
                                                  extra_replicas=int(bigger - replicas))
    return out


def document(analysis: Analysis, predictions: list[Prediction], prices: money.Prices,
             split: str = "requests", cross_check: dict[str, Any] | None = None,
             queueing: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document of ``headroom scenarios`` (docs/cli/scenarios.md)."""
    rows = price_rows(analysis, predictions, prices, split)
    totals = fleet_totals(rows)
    best = cheapest(totals)
    base = next((b for b in best if b["traffic"] == 1.0 and b["context"] == 1.0), best[0] if best else None)
    model = analysis.model
    return {
        "scenarios": rows,
        "fleet": totals,
        "cheapest": None if base is None else {k: base[k] for k in ("replicas", "traffic", "context", "total_cost")},
        "cheapest_by_traffic_context": best,
        "break_even_breach_price": {} if base is None else break_even(rows, prices, base["replicas"],
                                                                       base["traffic"], base["context"]),
        # the size the break-even prices are for: the grid's next above the cheapest
        "break_even_replicas": None if base is None else next_size(rows, base["replicas"], base["traffic"],
                                                                   base["context"]),
        "observed_replicas": analysis.observed.replicas,
        "prices": {"replica_hour": prices.replica_hour, "breach": dict(prices.breach),
                   "horizon_hours": prices.horizon_hours, "cost_split": split},
        "observed": {
            "hours": analysis.demand.duration_s / 3600,
            "requests": analysis.observed.requests,
            "ttft_share": analysis.observed.ttft,
            "tpot_share": analysis.observed.tpot,
            "joint_share_low": analysis.observed.joint_low,
            "joint_share_high": analysis.observed.joint_high,
            "peak_requests_per_s_per_replica": analysis.peak_load_observed,
            "cached_share": {p.name: p.cached_share for p in analysis.demand.paths},
        },
        "prefix_cache": {
            "case": model.assumptions.prefix_cache or "conversation",
            "split": {p.name: p.prefix.as_json() for p in analysis.demand.paths if p.prefix is not None},
        },
        "capacity_model": {
            **model.as_json(),
            "calibration": analysis.calibration,
            "model_error_at_observed_replicas": {path: r.as_json() for path, r in analysis.residuals.items()},
            "fleet_at_observed_replicas": analysis.fleet_residual,
            "demand_notes": analysis.demand.notes,
        },
        "flags": [{"path": f.path, "message": f.message, "widens_by": f.width, "sensitivity_envelope": f.envelope}
                  for f in analysis.flags],
        "cross_check": cross_check,
        "queueing": queueing,
        "assumptions": stated_assumptions(analysis),
    }


ENGINE_FACTS = (("router", "router", "--router"), ("max_num_seqs", "batch cap max_num_seqs", "--max-num-seqs"),
                ("max_num_batched_tokens", "chunked-prefill token budget max_num_batched_tokens",
                 "--max-num-batched-tokens"),
                ("kv_tokens", "KV capacity (tokens per replica)", "--kv-cache-tokens"),
                ("max_model_len", "max_model_len", "--max-model-len"), ("block_size", "KV block size", "--block-size"))


# how a path's think time was obtained (``PrefixSplit.think_source``), in words
# how the twin sends a conversation's later turns (app.engine.closed), as the statements say it
CLOSED_LOOP = "(closed loop, assumed: the user waits for the answer)"
THINK_SOURCES = {"fitted": "fitted on the computed prompt tokens per minute", "bound": "fitted, an upper bound",
                 "given": "given", "assumed": "assumed"}


def stated_assumptions(analysis: Analysis) -> list[str]:
    """What the twin runs on that the metrics cannot show or did not show, in words, with where each
    value came from (each engine fact is settable: CLI flags or the dashboard)."""
    m = analysis.model
    out = []
    for name, label, flag in ENGINE_FACTS:
        src = m.sources.get(name)
        value = parameter_value(m, name)
        shown = f"{value:,.0f}" if isinstance(value, float) else str(value)
        how = f"{src.kind}: {src.detail}" if src else "set"
        if not src or (src.kind != "given" and "pass --" not in src.detail):
            how += f"; {flag}"
        out.append(f"{label} = {shown} ({how})")
    for p in analysis.demand.paths:
        split = p.prefix
        if split is None:
            continue
        think = "given" if m.assumptions.think_s is not None else THINK_SOURCES.get(split.think_source, "assumed")
        out.append(f"{p.name}: of the {split.cached_share:.1%} of prompt tokens the prefix cache served (measured), "
                   f"{split.conversation_share:.0%} conversation history ({split.conversation_source}: "
                   f"{split.conversation_detail}); follow-up turns {split.think_s:g} s after the previous answer "
                   f"(think time, {think}; --think-time), each sent when the twin has answered the turn before it "
                   f"{CLOSED_LOOP}, "
                   f"{split.followup_share:.0%} of requests continuing a conversation ({split.followup_source})")
    running_max = m.observed.get("running_max", math.nan)
    if math.isfinite(running_max):
        out.append(f"observed running maximum {running_max:.0f} requests per replica")
    return out + [
        "FCFS admission when the whole prompt fits in free KV blocks; preemption of the most recently "
        "scheduled request when the cache is full (vLLM V1's scheduler)",
        "arrivals Poisson inside each minute, at the observed per-minute count (first tokens shifted back "
        "by the mean TTFT of when they came)",
        "prompt and output lengths independent; per path the length mix of each 5-minute block as observed",
        "every replica identical; the traffic mix and the engine configuration of the export unchanged",
        "traffic x g thins or duplicates each minute's requests; context x m multiplies prompt lengths",
    ]

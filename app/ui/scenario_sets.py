"""The Scenario sets page's logic: a run's inputs as a saved set, a saved set back into the Economics
form, the sets listed and two compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from app.ui.economics import ECON_DEFAULTS, ENGINE_FACTS, fleet_frame

PREFIX_FACTS = ("prefix_cache", "think_s", "affinity_margin")  # of a CLI set's assumptions, as the form holds them


# -- saved scenario sets (``app.economics.decide.saved``: the CLI's ``headroom saved`` reads the same sets) --------
def saved_inputs(run: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of a run in the shape ``headroom scenarios --save`` stores them, plus the dashboard's
    own form under ``dashboard`` (so "use these inputs" restores the form exactly)."""
    return run["scenario_inputs"].saved(dashboard=dict(run["inputs"]))


def form_inputs(saved: Mapping[str, Any]) -> dict[str, Any]:
    """The Economics form for a saved set's inputs: the dashboard's own, or translated from a CLI set."""
    if "dashboard" in saved:
        return {**ECON_DEFAULTS, **saved["dashboard"]}
    p = saved.get("prices", {})
    a = saved.get("assumptions", {})
    r = saved.get("routing", {})
    return {**ECON_DEFAULTS,
            "replicas": ",".join(str(n) for n in saved.get("replicas", [])) or ECON_DEFAULTS["replicas"],
            "traffic": ",".join(f"{g:g}" for g in saved.get("traffic", [1.0])),
            "context": ",".join(f"{m:g}" for m in saved.get("context", [1.0])),
            "seeds": int(saved.get("seeds", 1)), "datasets": saved.get("datasets"),
            "price_basis": "replica-hour", "replica_hour": float(p.get("replica_hour", 0.0)),
            "horizon_hours": float(p.get("horizon_hours", 720.0)), "breach": dict(p.get("breach", {})),
            "split": p.get("cost_split", "requests"),
            **{k: a[k] for k in ("router", *ENGINE_FACTS, *PREFIX_FACTS) if a.get(k) is not None},
            # the form holds one conversation share for every path: a CLI set's per-path shares stay there
            "conversation_share": (a.get("conversation_share") or {}).get("*"),
            "routing": bool(r.get("on", True)), "routing_replicas": r.get("replicas"),
            "routing_traffic": r.get("traffic")}


def sets_table(sets: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per saved set: when, what was run, and the headline result."""
    rows = []
    for name, s in sets.items():
        i, doc = s.get("inputs", {}), s["document"]
        c = doc.get("cheapest") or {}
        rows.append({"name": name, "saved (UTC)": s.get("saved_at"),
                     "replicas": ", ".join(str(n) for n in i.get("replicas", [])),
                     "traffic": ", ".join(f"{g:g}" for g in i.get("traffic", [])), "seeds": i.get("seeds"),
                     "replica-hour $": doc["prices"]["replica_hour"], "horizon (h)": doc["prices"]["horizon_hours"],
                     "cheapest N'": c.get("replicas"), "total cost $": c.get("total_cost")})
    return pd.DataFrame(rows)


def set_fleet(s: Mapping[str, Any]) -> pd.DataFrame:
    """A saved set's fleet totals for its base case (the case of its cheapest N')."""
    doc = s["document"]
    return fleet_frame(doc, doc["cheapest"]["traffic"], doc["cheapest"]["context"]) if doc.get("cheapest") else \
        pd.DataFrame(doc["fleet"])


def compare_headlines(names: Sequence[str], sets: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Side by side: the headline result and the inputs that tell two saved sets apart."""
    def headline(s: Mapping[str, Any]) -> dict[str, str]:
        doc, i = s["document"], s.get("inputs", {})
        c = doc.get("cheapest") or {}
        agree = all(x["determined_by_data"] for x in doc["cheapest_by_traffic_context"])
        return {"cheapest N'": str(c.get("replicas")),
                "total cost at the cheapest N'": "n/a" if not c else f"${c['total_cost']:,.0f}",
                "interval ends agree": "yes" if agree else "no",
                "replica-hour": f"${doc['prices']['replica_hour']:g}",
                "breach prices": ", ".join(f"{p} ${v:g}" for p, v in sorted(doc["prices"]["breach"].items())),
                "horizon": f"{doc['prices']['horizon_hours']:g} h",
                "promises": "; ".join(f"{p['path']}: TTFT {p['ttft_s']} s, TPOT {p['tpot_s']} s"
                                      for p in i.get("promises", [])),
                "replicas": ", ".join(str(n) for n in i.get("replicas", [])), "seeds": str(i.get("seeds")),
                "datasets": ", ".join(str(d) for d in i.get("datasets", []))}

    heads = [headline(s) for s in sets]
    return pd.DataFrame([{"": k, **{f"{n}{' (B)' if i and n == names[0] else ''}": h[k]
                                    for i, (n, h) in enumerate(zip(names, heads, strict=True))}}
                         for k in heads[0]])


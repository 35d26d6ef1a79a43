"""The Economics page's logic: the form's inputs (stored in the workspace) as ``ScenarioInputs``, and
the priced decision document as the page shows it (verdict, break-even lines, tables)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from app.economics.decide import policy_file
from app.economics.decide.inputs import ANY_PATH, ScenarioInputs, parse_multipliers, parse_replicas
from app.economics.decide.money import Prices
from app.economics.model.capacity import Assumptions
from app.escape import md
from app.promise.shares import Promise
from app.ui.session import Settings
from app.ui.units import pct

SETTING_ECONOMICS = "economics_inputs"


ECON_DEFAULTS: dict[str, Any] = {
    "replicas": "2:8", "traffic": "1.0", "context": "1.0", "seeds": 1, "horizon_hours": 720.0,
    "price_basis": "GPU-hour", "gpu_hour": 2.5, "gpus_per_replica": 1.0, "replica_hour": 2.5,
    "breach": {}, "default_breach": 0.01, "split": "requests", "router": None,
    "max_num_seqs": None, "max_num_batched_tokens": None, "kv_cache_tokens": None, "max_model_len": None,
    "calibrate": True, "observed_replicas": None, "datasets": None,
    # the prefix cache's case and the routing row (docs/economics.md#prefix-cache)
    "prefix_cache": None, "conversation_share": None, "think_s": None, "affinity_margin": None,
    "routing": True, "routing_replicas": None, "routing_traffic": None,
    # the policy rows (the same settings as a --policy file; docs/policies.md#the-policy-file)
    **{f"policy_{k}": v for k, v in {
        "replicas": None, "autoscaler": False, "signal": "waiting", "scale_out_at": 4.0, "out_for": "2m",
        "scale_in_at": 0.5, "in_for": "10m", "cooldown": "5m", "cold_start": "5m", "wake_start": "20s",
        "min_replicas": 2, "max_replicas": 8, "admission": False, "queue_factor": "0.5,1,2", "retry": False,
        "attempts": 3, "backoff": "1s", "budget_per_minute": 60.0, "retry_queue_factor": 0.5,
        "cap_tokens": None, "cap_path": None, "small_share": 0.0, "small_path": None, "small_step_factor": 0.5,
        "small_replicas": 1, "defer_path": None, "defer_hours": 4, "defer_ttft": "1h", "degraded_price": 0.005,
    }.items()},
}


ROUTERS = (None, "least_outstanding", "round_robin", "random", "power_of_two", "prefix_aware")  # None: fitted
PREFIX_CASES = (None, "conversation", "shared", "off")  # None: conversation where the export shows hits


# the engine facts of the form: empty = read from the data (or vLLM's default, stated as assumed)
ENGINE_FACTS = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len")


def economics_inputs(settings: Settings) -> dict[str, Any]:
    """The Economics form as last run (the session's, ``SessionSettings``), over ``ECON_DEFAULTS``."""
    stored = settings.get_setting(SETTING_ECONOMICS, {}) or {}
    return {**ECON_DEFAULTS, **{k: v for k, v in stored.items() if k in ECON_DEFAULTS}}


def default_datasets(frame: pd.DataFrame) -> list[int]:
    """Datasets to replay by default: every one that is not a single snapshot."""
    keep = frame[~frame["snapshot"]]["dataset_id"].tolist()
    return [int(i) for i in (keep or frame["dataset_id"].tolist())]


MAX_SCENARIOS = 200  # a form that asks for more is refused


class ReplayProgress:
    """What the Economics page's progress bar says while a grid replays: each twin run as it ends, and
    while another session replays scenarios this run needs, how many it waits for (the bar stays)."""

    def __init__(self, show: Callable[[float, str], None]) -> None:
        self.show = show
        self.done = 0.0

    def ran(self, done: int, total: int, text: str) -> None:
        self.done = done / total if total else 1.0
        self.show(self.done, text)

    def waiting(self, left: int) -> None:
        self.show(self.done, f"waiting for {left} scenario{'' if left == 1 else 's'} another session is replaying")


def scenario_inputs(form: Mapping[str, Any], labels: Sequence[str], rules: Sequence[tuple[str, str]],
                    promises: Mapping[str, Mapping[str, Any]]) -> ScenarioInputs:
    """The form's inputs as ``ScenarioInputs`` (what ``headroom scenarios`` runs), checked: a bad
    range, multiplier, engine fact or price raises ``ValueError`` in words."""
    replicas, traffic, context = grid_axes(form)
    if len(replicas) * len(traffic) * len(context) > MAX_SCENARIOS:
        raise ValueError(f"more than {MAX_SCENARIOS} scenarios: narrow the replica range or the multipliers")
    breach = {**{p: float(v) for p, v in (form.get("breach") or {}).items()},
              ANY_PATH: float(form["default_breach"])}
    if form["price_basis"] == "replica-hour":
        prices = Prices(replica_hour=float(form["replica_hour"]), breach=breach,
                        horizon_hours=float(form["horizon_hours"]))
    else:
        prices = Prices.from_gpu(float(form["gpu_hour"]), float(form["gpus_per_replica"]), breach,
                                 float(form["horizon_hours"]))
    return ScenarioInputs(
        datasets=tuple(int(i) for i in form.get("datasets") or ()),
        promises=tuple(Promise(path=p, ttft_s=v.get("ttft_s"), tpot_s=v.get("tpot_s"),
                               target=float(v.get("target") or Promise().target)) for p, v in promises.items()),
        path_labels=tuple(labels), rules=tuple((str(a), str(b)) for a, b in rules), replicas=tuple(replicas),
        traffic=tuple(traffic), context=tuple(context), seeds=int(form["seeds"]),
        assumptions=Assumptions(**engine_facts(form)), observed_replicas=form.get("observed_replicas") or None,
        calibrate=bool(form["calibrate"]), prices=prices, split=form["split"], routing=bool(form.get("routing", True)),
        routing_replicas=int(form["routing_replicas"]) if form.get("routing_replicas") else None,
        routing_traffic=float(form["routing_traffic"]) if form.get("routing_traffic") else None)


def engine_facts(form: Mapping[str, Any]) -> dict[str, Any]:
    """The engine facts the user gave on the form (an empty field is left to the data), checked."""
    out: dict[str, Any] = {}
    for k in ENGINE_FACTS:
        v = form.get(k)
        if v is None or v == "":
            continue
        if int(v) < 1:
            raise ValueError(f"{k}: must be at least 1 (leave it empty to read it from the data)")
        out[k] = int(v)
    if form.get("router"):
        out["router"] = form["router"]
    if form.get("prefix_cache"):
        out["prefix_cache"] = form["prefix_cache"]
    share = form.get("conversation_share")
    if share is not None and share != "":
        if not 0.0 <= float(share) <= 1.0:
            raise ValueError(f"conversation share {share}: a share of the cached tokens in [0, 1] (empty: the least "
                             "the prompt lengths allow)")
        out["conversation_share"] = {"*": float(share)}
    if form.get("think_s") is not None and form.get("think_s") != "":
        out["think_s"] = float(form["think_s"])
    if form.get("affinity_margin") is not None and form.get("affinity_margin") != "":
        out["affinity_margin"] = int(form["affinity_margin"])
    return out


def grid_axes(form: Mapping[str, Any]) -> tuple[list[int], list[float], list[float]]:
    """(replica counts, traffic multipliers, context multipliers) in the CLI's syntax."""
    return (parse_replicas(str(form["replicas"])), parse_multipliers(str(form["traffic"]), "traffic"),
            parse_multipliers(str(form["context"]), "context"))


def price(run: Mapping[str, Any]) -> dict[str, Any]:
    """The priced scenarios document of a run (as ``headroom scenarios`` writes it): arithmetic on the
    cached predictions, so a price change costs milliseconds."""
    inputs: ScenarioInputs = run["scenario_inputs"]
    return inputs.document(run["analysis"], run["predictions"], run.get("cross_check"), run.get("queueing"),
                           run.get("policy_predictions"), run.get("policy_set"), run.get("routing_predictions"))


def scenario_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    """One row per scenario and path (shares in %, costs in USD over the horizon)."""
    rows = []
    for r in doc["scenarios"]:
        rows.append({
            "N'": r["replicas"], "traffic": r["traffic"], "context": r["context"], "path": r["path"],
            "joint breach %": pct(r["breach_share"]), "low %": pct(r["breach_share_low"]),
            "high %": pct(r["breach_share_high"]), "TTFT %": pct(r["ttft_share"]),
            "TPOT %": pct(r["tpot_share"]), "flags": "; ".join(r.get("flags") or r["extrapolation_reasons"]) or "",
            "requests": r["requests"], "expected breaches": r["expected_breaches"],
            "breach cost $": r["breach_cost"], "headroom cost $": r["headroom_cost"],
            "total cost $": r["total_cost"], "cost per kept request $": r["cost_per_kept_request"],
        })
    return pd.DataFrame(rows)


def fleet_frame(doc: Mapping[str, Any], traffic: float | None = None, context: float | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(doc["fleet"])
    if frame.empty or traffic is None:
        return frame
    return frame[(frame["traffic"] == traffic) & (frame["context"] == context)].sort_values("replicas")


def verdict(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per (traffic, context): the cheapest N', whether the interval ends agree, and the headroom cost
    per request that kept the promise at that N' (every path together)."""
    out = []
    for c in doc["cheapest_by_traffic_context"]:
        at = [r for r in doc["scenarios"] if (r["replicas"], r["traffic"], r["context"]) ==
              (c["replicas"], c["traffic"], c["context"])]
        headroom = sum(r["headroom_cost"] for r in at)
        kept = sum(r["requests"] * (1 - r["breach_share"]) for r in at)
        out.append({**c, "cost_per_kept_request": headroom / kept if kept > 0 else None})
    return out


def break_even_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per path: the price of one breach at which the grid's next size above the cheapest pays for its
    extra replicas."""
    base = doc["cheapest"]
    if not base:
        return []
    nxt = doc.get("break_even_replicas")
    out = []
    for path, price in doc["break_even_breach_price"].items():
        if nxt is None:
            why = f"add a size above N'={base['replicas']} to the replica range to see it"
        elif price is None:
            why = f"{nxt} replicas remove none of its breaches"
        else:
            why = f"**\\${price:.4f}** (entered: \\${doc['prices']['breach'].get(path, 0):.4f})"
        more = nxt - base["replicas"] if nxt is not None else 1
        what = f"{nxt} replicas ({more} more than the cheapest)" if nxt is not None else "a larger size"
        out.append(f"Break-even price of one **{md(path)}** breach for {what}: {why}")
    return out



def policy_spec(form: Mapping[str, Any]) -> dict[str, Any]:
    """The policy inputs of the form as a policy file's mapping (empty: no policy row)."""
    f = {k.removeprefix("policy_"): v for k, v in form.items() if k.startswith("policy_")}
    spec: dict[str, Any] = {}
    fleet = {"replicas": int(f["replicas"])} if f.get("replicas") else {}
    if f.get("autoscaler"):
        spec["autoscaler"] = {k: f[k] for k in ("signal", "scale_out_at", "out_for", "scale_in_at", "in_for",
                                                "cooldown", "cold_start", "min_replicas", "max_replicas")}
        if f.get("wake_start"):
            spec["autoscaler"]["wake_start"] = f["wake_start"]
    if f.get("admission"):
        try:
            factors = [float(x) for x in str(f["queue_factor"]).split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"queue caps {f['queue_factor']!r}: comma-separated numbers k (k x running)") from None
        spec["admission"] = {**fleet, "queue_factor": factors}
    if f.get("retry"):
        spec["retry"] = {**fleet, "attempts": int(f["attempts"]), "backoff": f["backoff"],
                         "budget_per_minute": float(f["budget_per_minute"]),
                         "queue_factor": float(f["retry_queue_factor"])}
    ladder: dict[str, Any] = {}
    if f.get("cap_tokens"):
        ladder["cap_tokens"] = {"tokens": int(f["cap_tokens"]), **({"path": f["cap_path"]} if f.get("cap_path") else {})}
    if f.get("small_share") and f.get("small_path"):
        ladder["smaller_model"] = {"path": f["small_path"], "share": float(f["small_share"]),
                                   "step_factor": float(f["small_step_factor"]), "replicas": int(f["small_replicas"])}
    if f.get("defer_path"):
        ladder["defer"] = {"path": f["defer_path"], "hours": int(f["defer_hours"]), "ttft": f["defer_ttft"]}
    if ladder:
        spec["degradation"] = {**fleet, **ladder}
    if spec:
        spec["degraded_price"] = float(f.get("degraded_price") or 0.0)
    return spec


def policy_set(form: Mapping[str, Any], observed_replicas: int) -> policy_file.PolicySet | None:
    """The form's policy rows (None: none asked for), checked as a policy file is."""
    spec = policy_spec(form)
    return policy_file.parse(spec, "policy inputs", observed_replicas) if spec else None


def policy_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    """One row per policy row and path, beside the static rows' table (shares in %, costs in USD)."""
    rows = []
    for r in (doc.get("policies") or {}).get("rows") or []:
        rows.append({
            "policy": r["policy"], "path": r["path"], "mean replicas": r["mean_replicas"],
            "joint breach %": pct(r["breach_share"]), "low %": pct(r["breach_share_low"]),
            "high %": pct(r["breach_share_high"]), "TTFT %": pct(r["ttft_share"]), "TPOT %": pct(r["tpot_share"]),
            "rejected %": pct(r["rejected_share"]), "attempts per request": r["attempts_per_request"],
            "degraded answers": r["degraded_answers"], "breach cost $": r["breach_cost"],
            "headroom cost $": r["headroom_cost"], "degraded cost $": r["degraded_cost"],
            "total cost $": r["total_cost"], "flags": "; ".join(r.get("flags") or []),
        })
    return pd.DataFrame(rows)


def policy_fleet_frame(doc: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame((doc.get("policies") or {}).get("fleet") or [])


def timelines(doc: Mapping[str, Any]) -> pd.DataFrame:
    """The autoscaler rows' replicas over time (minutes from the export's start): policy, minute,
    replicas paid for, ready."""
    parts = []
    for r in (doc.get("policies") or {}).get("rows") or []:
        tl = r.get("timeline")
        if tl:
            parts.append(pd.DataFrame({"policy": r["policy"], "minute": [t / 60 for t in tl["t_s"]],
                                       "replicas": tl["replicas"], "ready": tl["ready"]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["policy", "minute", "replicas", "ready"])


def routing_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    """The routing row per routing and path at its N' (shares in %, costs in USD; empty: not priced)."""
    r = doc.get("routing") or {}
    rows = []
    for x in r.get("rows") or []:
        rows.append({
            "routing": x["routing"], "router": x["router"], "N'": x["replicas"], "path": x["path"],
            "joint breach %": pct(x["breach_share"]), "low %": pct(x["breach_share_low"]),
            "high %": pct(x["breach_share_high"]), "TTFT %": pct(x["ttft_share"]), "TPOT %": pct(x["tpot_share"]),
            "cached %": pct(x["cached_share"]), "cached at N (observed) %": pct(x["observed_cached_share"]),
            "breach cost $": x["breach_cost"], "headroom cost $": x["headroom_cost"], "total cost $": x["total_cost"],
            "flags": "; ".join(x.get("flags") or []),
        })
    return pd.DataFrame(rows)


def routing_fleet_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    """Per routing: the fleet's costs at the row's N' and the replicas the promise needs."""
    r = doc.get("routing") or {}
    return pd.DataFrame([{
        "routing": t["routing"], "router": t["router"], "N'": t["replicas"], "headroom cost $": t["headroom_cost"],
        "breach cost $": t["breach_cost"], "total cost $": t["total_cost"], "total low $": t["total_cost_low"],
        "total high $": t["total_cost_high"], "replicas needed": t["replicas_needed"],
        "replicas needed (interval's high end)": t["replicas_needed_if_high"],
    } for t in r.get("fleet") or []])


def routing_curve(doc: Mapping[str, Any]) -> pd.DataFrame:
    """The routing row's breach share and cached share per routing, size and path (shares 0-1)."""
    return pd.DataFrame((doc.get("routing") or {}).get("curve") or [],
                        columns=["routing", "replicas", "path", "breach_share", "breach_share_low", "breach_share_high",
                                 "cached_share", "meets_promise", "flagged"])


def routing_lines(doc: Mapping[str, Any]) -> list[str]:
    """What the routing row says in words: where it is priced, what prefix-aware routing saves, and the
    split of the cached share it stands on (Markdown, escaped)."""
    r = doc.get("routing")
    if not r:
        return []
    if not r["available"]:
        return [f"Not priced: {md(r['reason'])}."]
    w = r["worth"]
    out = [f"At **N'={r['replicas']}** ({md(r['replicas_chosen'])}), traffic ×{r['traffic']:g}: prefix-aware routing "
           f"saves **\\${w['total_cost_saved']:,.0f}** over the horizon (\\${w['total_cost_saved_low']:,.0f} to "
           f"\\${w['total_cost_saved_high']:,.0f} over the intervals) against {md(r['routers']['load-based'])}."]
    if w["replicas_saved"] is not None:
        out.append(f"Replicas the promise needs: {w['replicas_saved']} fewer with prefix-aware routing "
                   f"(\\${w['headroom_cost_saved']:,.0f} of headroom).")
    for path, s in r["split"].items():
        out.append(f"{md(path)}: {100 * s['cached_share']:.1f} % of prompt tokens cached at the observed N (measured); "
                   f"{md(s['conversation_detail'])}; follow-ups {s['followup_share']:.0%} ({md(s['followup_source'])}); "
                   f"think time {s['think_s']:g} s.")
    return out


def report_header(run: Mapping[str, Any], dataset_names: Mapping[int, str], fmt: str) -> str:
    """What a downloaded report came from: the datasets, promises, grid, prices and policy inputs
    (Markdown lines, or ``#`` comment lines before a CSV)."""
    inputs: ScenarioInputs = run["scenario_inputs"]
    lines = ["Headroom scenarios report",
             "datasets: " + ", ".join(f"{i} ({dataset_names.get(i, '?')})" for i in inputs.datasets),
             "promises: " + ", ".join(f"{p.path} TTFT {p.ttft_s} s / TPOT {p.tpot_s} s" for p in inputs.promises),
             f"path labels: {', '.join(inputs.path_labels) or 'none'}",
             f"replicas {','.join(map(str, inputs.replicas))}; traffic x{','.join(f'{g:g}' for g in inputs.traffic)}; "
             f"context x{','.join(f'{m:g}' for m in inputs.context)}; seeds {inputs.seeds}",
             f"engine facts given: {inputs.assumptions.given() or 'none'}"]
    ps = run.get("policy_set")
    if ps is not None:
        lines.append("policies: " + "; ".join(row.name for row in ps.rows))
    if fmt == "csv":
        return "".join(f"# {line}\n" for line in lines)
    return "\n".join([f"# {lines[0]}", ""] + [f"- {line}" for line in lines[1:]]) + "\n\n"

"""The accuracy pages from the harness's JSON (``python -m app.bench.accuracy --format json``).

Two kinds of document: the family's scenario rows (``rows`` of N', traffic, context and path, with
``fits``, and on prefix fleets their ``routing`` rows) → docs/accuracy.md; the policy check's rows
(``--autoscaler``: a ``policy`` per row) → docs/accuracy-policies.md. :func:`page` tells them apart by
their rows. The family's page takes further documents (``also``): fleets run on their own (the prefix
fleets), each shown with its own provenance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from app.docgen.tables import Column, generated_header, pct, provenance_block, table

COMMAND = ("python -m app.docgen accuracy --from docs/data/accuracy.json,docs/data/accuracy-prefix.json "
           "--out docs/accuracy.md")
POLICY_COMMAND = ("python -m app.docgen accuracy --from docs/data/accuracy-policies.json "
                  "--out docs/accuracy-policies.md")

FLEETS = [Column("fleet"), Column("replicas", align="right"), Column("hours", fmt="g", align="right"),
          Column("router"), Column("flags the operator passes", value=lambda f: ", ".join(f["given"]) or "none"),
          Column("what it is", key="about")]

SUMMARY = [Column("fleet"), Column("export"), Column("rows", align="right"),
           Column("goal met", align="right"), Column("unflagged within tolerance", align="right"),
           Column("flagged intervals holding the truth", align="right"),
           Column("median interval, unflagged", fmt=lambda x: f"{100 * x:.2f} pp", align="right"),
           Column("median interval, flagged", fmt=lambda x: f"{100 * x:.2f} pp", align="right")]

FITS = [Column("fleet"), Column("export"),
        Column("KV tokens", value=lambda f: f"{f['kv_tokens']:,.0f} ({f['kv_tokens_source']})"),
        Column("step at batch 1", key="step_ms_at_1", fmt=lambda x: f"{x:.1f} ms", align="right"),
        Column("step at batch 32", key="step_ms_at_32", fmt=lambda x: f"{x:.1f} ms", align="right"),
        Column("prefill", key="prefill_tokens_per_s", fmt=lambda x: f"{x:,.0f} tokens/s", align="right"),
        Column("max_num_seqs", value=lambda f: f"{f['max_num_seqs']} ({f['max_num_seqs_source']})"),
        Column("token budget", value=lambda f: f"{f['max_num_batched_tokens']} ({f['max_num_batched_tokens_source']})"),
        Column("router", value=lambda f: f"{f['router']} ({f['router_source']}; ran {f['true_router']})")]

ROWS = [Column("N'", key="replicas", align="right"), Column("traffic", fmt=lambda x: f"x{x:g}", align="right"),
        Column("context", fmt=lambda x: f"x{x:g}", align="right"), Column("path"),
        Column("TTFT predicted", key="ttft_predicted", fmt=pct, align="right"),
        Column("TTFT true", key="ttft_true", fmt=pct, align="right"),
        Column("joint predicted [interval]", value=lambda r: (
            f"{pct(r['joint_predicted'])} [{100 * r['joint_low']:.2f}, {100 * r['joint_high']:.2f}]")),
        Column("joint true", key="joint_true", fmt=pct, align="right"),
        Column("flagged", value=lambda r: "yes" if r["flagged"] else ""),
        Column("goal met", value=lambda r: "yes" if r["meets_goal"] else "**NO**")]

# the prefix family's rows (``cached_*`` and the routing truth: app.bench.accuracy.rows_for)
PREFIX = [Column("N'", key="replicas", align="right"), Column("traffic", fmt=lambda x: f"x{x:g}", align="right"),
          Column("context", fmt=lambda x: f"x{x:g}", align="right"), Column("path"),
          Column("cached, read at N", key="cached_read", fmt=pct, align="right"),
          Column("cached, true", key="cached_true", fmt=pct, align="right"),
          Column("joint predicted", key="joint_predicted", fmt=pct, align="right"),
          Column("joint true", key="joint_true", fmt=pct, align="right"),
          Column("prefix-aware: cached, true", key="cached_true_routed", fmt=pct, align="right"),
          Column("prefix-aware: TTFT true", key="ttft_true_routed", fmt=pct, align="right"),
          Column("prefix-aware: joint true", key="joint_true_routed", fmt=pct, align="right")]

POLICIES = [Column("fleet"), Column("policy"), Column("path"),
            Column("twin [interval]", value=lambda r: f"{pct(r['twin'])} [{100 * r['low']:.2f}, {100 * r['high']:.2f}]"),
            Column("truth", fmt=pct, align="right"),
            Column("twin / truth − 1", key="relative_error", fmt=lambda x: f"{x:+.1%}", align="right"),
            Column("mean replicas, twin", key="twin_mean_replicas", fmt=".2f", align="right"),
            Column("mean replicas, truth", key="true_mean_replicas", fmt=".2f", align="right")]


def _groups(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["fleet"], r["export"]), []).append(r)
    return out


def _median_width(rows: Sequence[Mapping[str, Any]]) -> float | None:
    widths = [r["joint_high"] - r["joint_low"] for r in rows]
    return statistics.median(widths) if widths else None


def summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per fleet and export: rows, rows meeting the goal, and how (within tolerance, interval holding)."""
    out = []
    for (fleet, kind), part in _groups(rows).items():
        flagged = [r for r in part if r["flagged"]]
        plain = [r for r in part if not r["flagged"]]
        out.append({"fleet": fleet, "export": kind, "rows": len(part),
                    "goal met": sum(r["meets_goal"] for r in part),
                    "unflagged within tolerance": f"{sum(r['meets_goal'] for r in plain)} of {len(plain)}",
                    "flagged intervals holding the truth": f"{sum(r['meets_goal'] for r in flagged)} of {len(flagged)}",
                    "median interval, unflagged": _median_width(plain),
                    "median interval, flagged": _median_width(flagged)})
    return out


def _merged(doc: Mapping[str, Any], also: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The fleets, fits, rows and routing rows of ``doc`` and of every document of ``also``; a fleet in two
    documents is refused (which run's figures would the page show?)."""
    out: dict[str, list[Any]] = {k: [] for k in ("fleets", "fits", "rows", "routing")}
    seen: set[str] = set()
    for d in (doc, *also):
        names = {f["fleet"] for f in d.get("fleets") or []} | {r["fleet"] for r in d["rows"]}
        if names & seen:
            raise ValueError(f"fleets {', '.join(sorted(names & seen))} are in two documents")
        seen |= names
        for k in out:
            out[k] += list(d.get(k) or [])
    return out


def _also_block(d: Mapping[str, Any]) -> list[str]:
    names = list(dict.fromkeys([f["fleet"] for f in d.get("fleets") or []] + [r["fleet"] for r in d["rows"]]))
    return [f"The fleets {', '.join(names)} come from a run of their own ({d.get('seeds', '?')} seeds per "
            "scenario). " + provenance_block(d.get("provenance")), ""]


def family_page(doc: Mapping[str, Any], command: str = COMMAND, also: Sequence[Mapping[str, Any]] = ()) -> str:
    merged = _merged(doc, also)
    rows = merged["rows"]
    goal = doc.get("goal") or {"relative": 0.2, "absolute": 0.005}
    met = sum(r["meets_goal"] for r in rows)
    flagged = sum(r["flagged"] for r in rows)
    fleets = merged["fleets"]
    out = [generated_header("Accuracy of the economics", command),
           "How close the scenario predictions come to the truth on simulated fleets that differ from each other "
           "and from the twin's defaults, in engines, traffic and mechanics (the method: [Economics]"
           "(economics.md#accuracy)). Each fleet is exported fully and minimally; the economics are fitted on the "
           "export alone, with the launch flags its operator would pass; each scenario's truth is the fleet's own "
           "simulator replaying the same arrivals at N', traffic and context.", "",
           provenance_block(doc.get("provenance")), ""]
    for other in also:
        out += _also_block(other)
    out += [f"**Goal**: every unflagged row within ±{100 * goal['relative']:g} % relative or "
            f"±{100 * goal['absolute']:g} percentage point of the truth (TTFT and joint share), every flagged row's "
            f"interval holding the true joint share. Replays per scenario: {doc.get('seeds', '?')} seeds"
            + "".join(f" ({other.get('seeds', '?')} on the fleets of the run of their own)" for other in also)
            + ".", "",
            f"**Result**: {met} of {len(rows)} rows meet the goal; {flagged} of them are flagged (their answer is "
            "an interval that holds the truth, not a number), "
            f"{len(rows) - flagged} are not.", "", "## The fleets", "", table(fleets, FLEETS), "",
            "## Per fleet and export", "", table(summary(rows), SUMMARY), ""]
    if merged["fits"]:
        out += ["## What the fit recovered", "",
                "Each value with its source: `given` (a launch flag), `engine config` (`cache_config_info`), "
                "`fitted`, `calibrated` or `assumed`; the fleet's true router beside the fitted one.", "",
                table(merged["fits"], FITS), ""]
    out += ["## Every scenario", ""]
    for (fleet, kind), part in _groups(rows).items():
        n_met = sum(r["meets_goal"] for r in part)
        out += [f"**{fleet}, {kind} export**: {n_met} of {len(part)} rows meet the goal "
                f"({sum(r['flagged'] for r in part)} flagged).", "",
                "<details><summary>every scenario</summary>", "", table(part, ROWS), "", "</details>", ""]
    return "\n".join(out + prefix_section(rows) + routing_section(merged["routing"]))


def _has(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def prefix_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The prefix family's rows (none: no section): the cached share the fit read against the truth's,
    and the truth behind prefix-aware routing beside the fleet's own router."""
    groups = {k: part for k, part in _groups(rows).items() if any(_has(r.get("cached_true")) for r in part)}
    if not groups:
        return []
    out = ["## The prefix cache", "",
           "Fleets with vLLM's prefix cache on whose paths share tokens: a system prompt per path, conversations "
           "whose follow-up turns resend the earlier turns and answers. The fit reads each path's cached share of "
           "prompt tokens from the export at the observed N and replays it as the conversation case "
           "([Economics](economics.md#prefix-cases)): split into a prefix every request of the path starts with "
           "(as long as the path's short prompts allow) and conversations whose history is cached where their "
           "turns ran; the truth replays the fleet's own conversations, whose hits depend on where a follow-up "
           "lands and on what the cache evicted before it came. Beside each row, the truth at the same scenario "
           "behind prefix-aware routing (the fleet's own router is load-based): what such routing is worth.", ""]
    for (fleet, kind), part in groups.items():
        out += [f"**{fleet}, {kind} export**", "", "<details><summary>cached share and routing</summary>", "",
                table(part, PREFIX), "", "</details>", ""]
    return out


def _needed(n: int | None) -> str:
    return "none replayed" if n is None else str(n)


ROUTING_ROW = [Column("routing"), Column("path"),
               Column("joint predicted [interval]", value=lambda r: (
                   f"{pct(r['joint_predicted'])} [{100 * r['joint_low']:.2f}, {100 * r['joint_high']:.2f}]")),
               Column("joint true", key="joint_true", fmt=pct, align="right"),
               Column("TTFT predicted [interval]", value=lambda r: (
                   f"{pct(r['ttft_predicted'])} [{100 * r['ttft_low']:.2f}, {100 * r['ttft_high']:.2f}]")),
               Column("TTFT true", key="ttft_true", fmt=pct, align="right"),
               Column("cached, predicted", key="cached_predicted", fmt=pct, align="right"),
               Column("cached, true", key="cached_true", fmt=pct, align="right"),
               Column("flagged", value=lambda r: "yes" if r["flagged"] else ""),
               Column("goal met", value=lambda r: "yes" if r["meets_goal"] else "**NO**")]

ROUTING_CURVE = [Column("N'", key="replicas", align="right"), *ROUTING_ROW]

NEEDED = [Column("routing"), Column("twin's router", key="router", fmt=lambda x: f"`{x}`"),
          Column("truth's router", key="true_router", fmt=lambda x: f"`{x}`"),
          Column("promise kept by", key="target", fmt=lambda x: f"{100 * x:g} %", align="right"),
          Column("replicas needed, predicted", value=lambda r: _needed(r["predicted"]), align="right"),
          Column("if the interval's high end", value=lambda r: _needed(r["if_high"]), align="right"),
          Column("replicas needed, true", value=lambda r: _needed(r["true"]), align="right")]


def _needed_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"routing": f["routing"], "router": f["router"], "true_router": f["true_router"], **n}
            for f in row["routings"] for n in f["replicas_needed"]]


def routing_section(routing_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each prefix fleet's routing row (``app.bench.accuracy.routing_row``; none: no section): per export,
    the row at its N' and the replicas the promise needs under each routing, predicted against true, and
    every size replayed."""
    if not routing_rows:
        return []
    out = ["## The routing row", "",
           "What `headroom scenarios --routing` answers ([Economics](economics.md#routing-row)), fitted on each "
           "prefix fleet's export alone and set against the truth: the same requests and conversations replayed at "
           "every size of the grid at traffic x1 under **load-based** routing (the fit's router; its truth the fleet "
           "behind its own router) and under **prefix-aware** routing (its truth the fleet behind `prefix_aware`), "
           "per path the breach shares with their intervals and the share of prompt tokens the cache served. The "
           "row's N' is chosen as the CLI chooses it; the replicas a promise needs are the smallest size whose "
           "every path's joint share keeps it (at the point, and at the interval's high end). The load-based "
           "predictions are the grid's own (the rows above); the dollars follow from these shares and the prices "
           "by the money model, and are not measured here.", ""]
    by_fleet: dict[str, list[Mapping[str, Any]]] = {}
    for r in routing_rows:
        by_fleet.setdefault(r["fleet"], []).append(r)
    for fleet, parts in by_fleet.items():
        out += [f"### {fleet}", ""]
        for r in parts:
            if not r["available"]:
                out += [f"**{r['export']} export**: not priced: {r['reason']}.", ""]
                continue
            rows = r["rows"]
            met = sum(x["meets_goal"] for x in r["curve"])
            out += [f"**{r['export']} export**: the row at N'={r['replicas']}, traffic x{r['traffic']:g} (N' chosen as "
                    f"{r['replicas_chosen']}); {met} of {len(r['curve'])} rows of the curve meet the goal.", "",
                    table(rows, ROUTING_ROW), "", table(_needed_rows(r), NEEDED), "",
                    "<details><summary>every size replayed</summary>", "", table(r["curve"], ROUTING_CURVE), "",
                    "</details>", ""]
            splits = r.get("split") or {}
            if splits:
                out += ["The split the row stands on (measured share, assumed conversation share, fitted follow-ups "
                        "and think time; the twin at the observed N):", ""]
                out += [f"- {path}: {s['conversation_detail']}; follow-ups {pct(s['followup_share'])} "
                        f"({s['followup_source'].split(':')[0] or 'none drawn'}); think time {s['think_s']:g} s ({s['think_source']}); the twin "
                        f"serves {pct(s['twin_cached_share'])} against {pct(s['cached_share'])} measured"
                        for path, s in splits.items()]
                out.append("")
    return out


def policy_page(doc: Mapping[str, Any], command: str = POLICY_COMMAND) -> str:
    rows = doc["rows"]
    out = [generated_header("Accuracy of the policy rows", command),
           "The twin's breach share under a policy it never saw, against the truth: the simulator running the "
           "fleet with the policy, on fleets unlike the twin's defaults; the twin is fitted from the fleet's "
           "minimal export alone (the method: [Policies](policies.md#accuracy)). The autoscaler rows' goal: "
           "within ±25 % of the truth.", "",
           provenance_block(doc.get("provenance")), "", table(rows, POLICIES), ""]
    return "\n".join(out)


def page(doc: Mapping[str, Any], command: str | None = None, also: Sequence[Mapping[str, Any]] = ()) -> str:
    """The page for either kind of accuracy document (``also``: the family's further documents)."""
    rows = doc.get("rows") or []
    if rows and "policy" in rows[0]:
        if also:
            raise ValueError("the policy page takes one document")
        return policy_page(doc, command or POLICY_COMMAND)
    return family_page(doc, command or COMMAND, also)

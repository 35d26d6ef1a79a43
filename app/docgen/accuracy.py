"""The accuracy pages from the harness's JSON (``python -m app.bench.accuracy --format json``).

Two kinds of document: the family's scenario rows (``rows`` of N', traffic, context and path, with
``fits``) → docs/accuracy.md; the policy check's rows (``--autoscaler``: a ``policy`` per row) →
docs/accuracy-policies.md. :func:`page` tells them apart by their rows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from app.docgen.tables import Column, generated_header, pct, provenance_block, table

COMMAND = "python -m app.docgen accuracy --from docs/data/accuracy.json --out docs/accuracy.md"
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


def family_page(doc: Mapping[str, Any], command: str = COMMAND) -> str:
    rows = doc["rows"]
    goal = doc.get("goal") or {"relative": 0.2, "absolute": 0.005}
    met = sum(r["meets_goal"] for r in rows)
    flagged = sum(r["flagged"] for r in rows)
    fleets = doc.get("fleets") or []
    out = [generated_header("Accuracy of the economics", command),
           "How close the scenario predictions come to the truth on simulated fleets that differ from each other "
           "and from the twin's defaults, in engines, traffic and mechanics (the method: [Economics]"
           "(economics.md#accuracy)). Each fleet is exported fully and minimally; the economics are fitted on the "
           "export alone, with the launch flags its operator would pass; each scenario's truth is the fleet's own "
           "simulator replaying the same arrivals at N', traffic and context.", "",
           provenance_block(doc.get("provenance")), "",
           f"**Goal**: every unflagged row within ±{100 * goal['relative']:g} % relative or "
           f"±{100 * goal['absolute']:g} percentage point of the truth (TTFT and joint share), every flagged row's "
           f"interval holding the true joint share. Replays per scenario: {doc.get('seeds', '?')} seeds.", "",
           f"**Result**: {met} of {len(rows)} rows meet the goal; {flagged} of them are flagged (their answer is "
           "an interval that holds the truth, not a number), "
           f"{len(rows) - flagged} are not.", "", "## The fleets", "", table(fleets, FLEETS), "",
           "## Per fleet and export", "", table(summary(rows), SUMMARY), ""]
    if doc.get("fits"):
        out += ["## What the fit recovered", "",
                "Each value with its source: `given` (a launch flag), `engine config` (`cache_config_info`), "
                "`fitted`, `calibrated` or `assumed`; the fleet's true router beside the fitted one.", "",
                table(doc["fits"], FITS), ""]
    out += ["## Every scenario", ""]
    for (fleet, kind), part in _groups(rows).items():
        n_met = sum(r["meets_goal"] for r in part)
        out += [f"**{fleet}, {kind} export**: {n_met} of {len(part)} rows meet the goal "
                f"({sum(r['flagged'] for r in part)} flagged).", "",
                "<details><summary>every scenario</summary>", "", table(part, ROWS), "", "</details>", ""]
    return "\n".join(out + prefix_section(rows))


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
           "prompt tokens from the export at the observed N and replays it as a prefix every request of the path "
           "holds (the \"shared\" case, [Economics](economics.md#prefix-cache)), the same at any N' and load; the "
           "truth replays the conversations, whose hits depend on where a follow-up lands and on what the cache "
           "evicted before it came. Beside each row, the truth at the same scenario behind prefix-aware routing "
           "(the fleet's own router is load-based): what such routing is worth.", ""]
    for (fleet, kind), part in groups.items():
        out += [f"**{fleet}, {kind} export**", "", "<details><summary>cached share and routing</summary>", "",
                table(part, PREFIX), "", "</details>", ""]
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


def page(doc: Mapping[str, Any], command: str | None = None) -> str:
    """The page for either kind of accuracy document."""
    rows = doc.get("rows") or []
    if rows and "policy" in rows[0]:
        return policy_page(doc, command or POLICY_COMMAND)
    return family_page(doc, command or COMMAND)

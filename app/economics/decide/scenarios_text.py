"""Text renderings of the scenarios document (Markdown for people, CSV for spreadsheets)."""

from __future__ import annotations

import csv
import io
from typing import Any

from app.escape import csv_row, md

CSV_FIELDS = ["replicas", "traffic", "context", "path", "breach_share", "breach_share_low", "breach_share_high",
              "ttft_share", "tpot_share", "extrapolated", "flagged", "requests", "expected_breaches", "breach_cost",
              "headroom_cost", "total_cost", "cost_per_kept_request"]


def _usd(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f} %"


def scenarios_markdown(doc: dict[str, Any]) -> str:
    p = doc["prices"]
    out = [f"Scenarios over {p['horizon_hours']:g} h at ${p['replica_hour']:g} per replica-hour; breach prices "
           + ", ".join(f"{md(k)} ${v:g}" for k, v in p["breach"].items())
           + f"; observed {doc['observed_replicas']} replicas over {doc['observed']['hours']:.1f} h.", ""]
    out += ["| replicas | traffic | context | headroom | breaches (point [low, high]) | total | flag |",
            "|---:|---:|---:|---:|---|---:|---|"]
    for t in doc["fleet"]:
        out.append(f"| {t['replicas']} | x{t['traffic']:g} | x{t['context']:g} | {_usd(t['headroom_cost'])} | "
                   f"{_usd(t['breach_cost'])} [{_usd(t['breach_cost_low'])}, {_usd(t['breach_cost_high'])}] | "
                   f"{_usd(t['total_cost'])} | {'extrapolated' if t['extrapolated'] else ('flagged' if t.get('flagged') else '')} |")
    out += ["", "| replicas | traffic | context | path | joint breach [low, high] | TTFT | TPOT | requests | "
            "breach cost | cost per kept request |", "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["scenarios"]:
        kept = "n/a" if r["cost_per_kept_request"] is None else f"${r['cost_per_kept_request']:.5f}"
        out.append(f"| {r['replicas']} | x{r['traffic']:g} | x{r['context']:g} | {md(r['path'])} | "
                   f"{_pct(r['breach_share'])} [{_pct(r['breach_share_low'])}, {_pct(r['breach_share_high'])}]"
                   f"{' *' if r['extrapolated'] else (' !' if r.get('flagged') else '')} | {_pct(r['ttft_share'])} | {_pct(r['tpot_share'])} | "
                   f"{r['requests']:,.0f} | {_usd(r['breach_cost'])} | {kept} |")
    out += policies_markdown(doc)
    out += routing_markdown(doc)
    out.append("")
    for c in doc["cheapest_by_traffic_context"]:
        verdict = "the interval ends agree" if c["determined_by_data"] else (
            f"not determined by the data: {c['replicas_if_low']} at the low end, {c['replicas_if_high']} at the high end")
        out.append(f"- cheapest at traffic x{c['traffic']:g}, context x{c['context']:g}: **{c['replicas']} replicas**, "
                   f"{_usd(c['total_cost'])} ({verdict})")
    target = doc.get("break_even_replicas")
    for path, price in doc["break_even_breach_price"].items():
        txt = "n/a (no larger size in the grid, or it removes no breach)" if price is None else f"${price:.4f}"
        size = (f"{target} replicas, the grid's next size above the cheapest" if target is not None
                else "a larger size than the cheapest")
        out.append(f"- break-even price of one {md(path)} breach for {size}: {txt}")
    out += [""] + capacity_model_markdown(doc)
    if doc.get("assumptions"):
        out += ["", "Assumptions the metrics cannot show (settable):"] + [f"- {a}" for a in doc["assumptions"]]
    return "\n".join(out) + "\n" + cross_check_markdown(doc)


def _value(name: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if name.endswith("_s") and isinstance(value, float):
        scale, unit = {"step_base_s": (1e3, "ms"), "step_per_seq_s": (1e6, "µs"), "step_per_seq_sq_s": (1e9, "ns"),
                       "step_per_prefill_token_s": (1e6, "µs")}.get(name, (1e9, "ns"))
        return f"{scale * value:.4g} {unit}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"
    return str(value)


def capacity_model_markdown(doc: dict[str, Any]) -> list[str]:
    """The replica model with each parameter's source, the calibration and the residual at the
    observed fleet size."""
    m = doc["capacity_model"]
    out = ["Capacity model of one replica (each value with where it came from):", "",
           "| parameter | value | source | how |", "|---|---:|---|---|"]
    for name, p in (m.get("sources") or {}).items():
        out.append(f"| {name} | {_value(name, p['value'])} | {p['kind']} | {p['detail']} |")
    fit = m["fit"]
    out += ["", f"Step time fitted on {fit['data']} ({m.get('step_basis') or 'n/a'}), R² "
            + ("n/a" if fit["r2"] is None else f"{fit['r2']:.2f}") + "; saturation "
            + ("observed: " + "; ".join(m["saturation_evidence"]) if m["saturation_observed"]
               else "never observed — capacity is a lower bound") + "."]
    cal = m.get("calibration") or {}
    if "tpot_scale" in cal:
        out.append(f"Calibration at the observed fleet size ({len(cal.get('rounds', []))} twin runs"
                   f"{'' if cal.get('converged') else ', stopped before converging'}): step time "
                   f"x{cal['tpot_scale']:.3f}, prefill x{cal['prefill_scale']:.3f} ({cal['matched']}).")
    elif cal.get("off"):
        out.append("Calibration off (--no-calibrate): the twin runs the fitted law as it is.")
    errs = m.get("model_error_at_observed_replicas") or {}
    for path, e in errs.items():
        out.append(f"Residual at the observed fleet size, {md(path)}: TTFT {_pct(e.get('ttft_predicted'))} (observed "
                   f"{_pct(doc['observed']['ttft_share'].get(path))}), TPOT {_pct(e.get('tpot_predicted'))} "
                   f"(observed {_pct(doc['observed']['tpot_share'].get(path))}), mean queue "
                   f"{_ms(e.get('queue_mean_s_predicted'))} (observed {_ms(e.get('queue_mean_s_observed'))}); "
                   f"relative {_frac(e.get('ttft'))} / {_frac(e.get('tpot'))}, the draw's noise "
                   f"±{_pct(e.get('ttft_noise'))} / ±{_pct(e.get('tpot_noise'))} (widens every interval; above 10 % "
                   "and beyond the noise flags the path).")
    fleet = m.get("fleet_at_observed_replicas") or {}
    if fleet:
        out.append(f"Fleet at the observed size: running {_num(fleet.get('running_mean_predicted'))} per replica "
                   f"(observed {_num(fleet.get('running_mean_observed'))}; busiest 1 %: "
                   f"{_num(fleet.get('running_peak_predicted'))}, observed {_num(fleet.get('running_peak_observed'))}), waiting "
                   f"{_num(fleet.get('waiting_mean_predicted'))} ({_num(fleet.get('waiting_mean_observed'))}), "
                   f"mean inter-token latency {_ms(fleet.get('itl_mean_s_predicted'))} "
                   f"({_ms(fleet.get('itl_mean_s_observed'))}).")
    for f in doc.get("flags", []):
        out.append(f"! flag ({md(f['path']) if f['path'] else 'every path'}): {f['message']}")
    # a scenario's own flags (a backlog in its twin runs), once per scenario
    shared = {f["message"] for f in doc.get("flags", [])}
    seen: set[tuple[Any, ...]] = set()
    for r in doc.get("scenarios", []):
        for message in r.get("flags", []):
            key = (r["replicas"], r["traffic"], r["context"], message)
            if message in shared or message in r.get("extrapolation_reasons", []) or key in seen:
                continue
            seen.add(key)
            out.append(f"! flag (N'={r['replicas']}, traffic x{r['traffic']:g}, context x{r['context']:g}): {message}")
    out.append("* extrapolated: the scenario leaves what the data supports; its interval includes a "
               "sensitivity envelope (KV capacity and step time +-15 %). ! flagged for a reason above.")
    return out


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{1e3 * x:.1f} ms"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _frac(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def scenarios_csv(doc: dict[str, Any]) -> str:
    """One row per (scenario, path); with policy rows, those too, in the same columns and the
    policy's own (``policy`` empty on a static row)."""
    pol = (doc.get("policies") or {}).get("rows") or []
    routed = (doc.get("routing") or {}).get("rows") or []
    fields = CSV_FIELDS + (POLICY_CSV_FIELDS if pol else []) + (ROUTING_CSV_FIELDS if routed else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in [*doc["scenarios"], *pol, *routed]:
        w.writerow(csv_row({k: r.get(k) for k in fields}))
    return buf.getvalue()


ROUTING_CSV_FIELDS = ["routing", "router", "cached_share", "observed_cached_share"]


def routing_markdown(doc: dict[str, Any]) -> list[str]:
    """The routing row: load-based against prefix-aware routing at one N', or why it is not priced."""
    r = doc.get("routing")
    if not r:
        return []
    if not r["available"]:
        return ["", f"Routing row (load-based against prefix-aware): not priced: {r['reason']}."]
    out = ["", f"Routing row at N'={r['replicas']} ({r['replicas_chosen']}), traffic x{r['traffic']:g}: load-based "
           f"({md(r['routers']['load-based'])}) against prefix-aware routing (a turn stays on its conversation's "
           f"replica unless that one holds more than {r['affinity_margin']} outstanding requests above the least "
           "loaded):", "",
           "| routing | headroom | breaches (point [low, high]) | total | replicas needed (if high) | flag |",
           "|---|---:|---|---:|---:|---|"]
    for t in r["fleet"]:
        need = "none replayed" if t["replicas_needed"] is None else str(t["replicas_needed"])
        high = "none" if t["replicas_needed_if_high"] is None else str(t["replicas_needed_if_high"])
        out.append(f"| {t['routing']} | {_usd(t['headroom_cost'])} | {_usd(t['breach_cost'])} "
                   f"[{_usd(t['breach_cost_low'])}, {_usd(t['breach_cost_high'])}] | {_usd(t['total_cost'])} | "
                   f"{need} ({high}) | {'flagged' if t['flagged'] else ''} |")
    out += ["", "| routing | path | joint breach [low, high] | TTFT [low, high] | TPOT [low, high] | cached "
            "(observed at N) | breach cost |", "|---|---|---|---|---|---:|---:|"]
    for x in r["rows"]:
        out.append(f"| {x['routing']} | {md(x['path'])} | {_pct(x['breach_share'])} [{_pct(x['breach_share_low'])}, "
                   f"{_pct(x['breach_share_high'])}]{' !' if x['flagged'] else ''} | {_pct(x['ttft_share'])} "
                   f"[{_pct(x['ttft_share_low'])}, {_pct(x['ttft_share_high'])}] | {_pct(x['tpot_share'])} "
                   f"[{_pct(x['tpot_share_low'])}, {_pct(x['tpot_share_high'])}] | {_pct(x['cached_share'])} "
                   f"({_pct(x['observed_cached_share'])}) | {_usd(x['breach_cost'])} |")
    w = r["worth"]
    saved = ("n/a (a router meets the promise at no size replayed)" if w["replicas_saved"] is None
             else f"{w['replicas_saved']} replica(s), {_usd(w['headroom_cost_saved'])} of headroom")
    out += ["", f"- prefix-aware routing saves {_usd(w['total_cost_saved'])} at N'={w['replicas']} "
            f"([{_usd(w['total_cost_saved_low'])}, {_usd(w['total_cost_saved_high'])}] over the intervals); "
            f"replicas the promise needs: {saved}"]
    for path, s in r["split"].items():
        follow = (f"follow-ups {s['followup_share']:.0%} ({s['followup_source']}); think time {s['think_s']:.3g} s"
                  if s["followup_share"] > 0 else "no follow-ups: nothing of the share is conversation history")
        out.append(f"- split of {md(path)}'s cached share ({_pct(s['cached_share'])} measured): {s['conversation_detail']}; "
                   f"{follow}")
    return out


POLICY_CSV_FIELDS = ["policy", "kind", "min_replicas", "max_replicas", "mean_replicas", "rejected_share",
                     "attempts_per_request", "degraded_answers", "degraded_share", "tokens_saved_share",
                     "degraded_cost"]


def policies_markdown(doc: dict[str, Any]) -> list[str]:
    """The policy rows beside the static ones: per row the fleet's costs, then per path."""
    pol = doc.get("policies")
    if not pol:
        return []
    out = ["", "Policies replayed through the twin (" + pol["note"] + "):", "",
           "| policy | mean replicas | headroom | breaches (point [low, high]) | degraded answers | total | flag |",
           "|---|---:|---:|---|---:|---:|---|"]
    for t in pol["fleet"]:
        out.append(f"| {md(t['policy'])} | {t['mean_replicas']:.2f} | {_usd(t['headroom_cost'])} | "
                   f"{_usd(t['breach_cost'])} [{_usd(t['breach_cost_low'])}, {_usd(t['breach_cost_high'])}] | "
                   f"{_usd(t['degraded_cost'])} ({t['degraded_answers']:,.0f}) | {_usd(t['total_cost'])} | "
                   f"{'flagged' if t['flagged'] else ''} |")
    out += ["", "| policy | path | breach [low, high] | TTFT | TPOT | rejected | attempts per request | "
            "degraded | breach cost |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in pol["rows"]:
        out.append(f"| {md(r['policy'])} | {md(r['path'])} | {_pct(r['breach_share'])} [{_pct(r['breach_share_low'])}, "
                   f"{_pct(r['breach_share_high'])}]{' !' if r['flagged'] else ''} | {_pct(r['ttft_share'])} | "
                   f"{_pct(r['tpot_share'])} | {_pct(r['rejected_share'])} | {r['attempts_per_request']:.3f} | "
                   f"{_pct(r['degraded_share'])} | {_usd(r['breach_cost'])} |")
    out.append("Rejected requests count as breaches (their promise is broken at the door); TTFT is from the "
               "first attempt, backoff included; a degraded answer is priced at the degraded-answer price.")
    return out


def cross_check_markdown(doc: dict[str, Any]) -> str:
    """The empirical curve's readings beside the model's predictions (g = 1, m = 1)."""
    cc = doc.get("cross_check") or {}
    model = {(r["path"], r["replicas"], r["traffic"]): r for r in doc["scenarios"] if r["context"] == 1.0}
    out = ["", "Cross-check: empirical load–response curve (isotonic, per-replica load) against the model",
           "", "| path | replicas | traffic | curve [low, high] | model [low, high] |", "|---|---:|---:|---|---|"]
    for path, c in cc.items():
        for r in c["readings"]:
            m = model.get((path, r["replicas"], r["traffic"]))
            if m is None:
                continue
            flag = " (outside observed load)" if r["extrapolated"] else ""
            out.append(f"| {md(path)} | {r['replicas']} | x{r['traffic']:g} | {_pct(r['share'])} [{_pct(r['share_low'])}, "
                       f"{_pct(r['share_high'])}]{flag} | {_pct(m['breach_share'])} [{_pct(m['breach_share_low'])}, "
                       f"{_pct(m['breach_share_high'])}] |")
        lo, hi = c["observed_load_range"]
        out.append(f"| {md(path)} | observed per-replica load {lo:.2f}–{hi:.2f} req/s | | | |")
    q = doc.get("queueing")
    if q:
        peak = max(q["kingman"], key=lambda h: h["arrival_rate"]) if q["kingman"] else None
        out += ["", f"Queueing view ({q['note']}): service rate {q['service_rate_per_replica']:.2f} req/s per replica, "
                f"service c_s² {q['service_cs2']:.2f}."]
        if peak:
            out.append(f"Peak hour {peak['hour']}: ρ {peak['rho']:.2f}, ρ/(1−ρ) {peak['utilisation_term']:.2f}, "
                       f"(c_a²+c_s²)/2 {peak['variability_term']:.2f}, E[S] {peak['service_s']:.2f} s → "
                       f"Kingman wait {peak['wait_s']:.2f} s.")
        out.append("Erlang C at the peak hour: " + ", ".join(
            f"{e['replicas']}: P(wait) {e['p_wait']:.2f}" for e in q["erlang_c"]))
    return "\n".join(out)

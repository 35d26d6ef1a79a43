"""Text renderings of the scenarios document (Markdown for people, CSV for spreadsheets)."""

from __future__ import annotations

import csv
import io
from typing import Any

CSV_FIELDS = ["replicas", "traffic", "context", "path", "breach_share", "breach_share_low", "breach_share_high",
              "ttft_share", "tpot_share", "extrapolated", "requests", "expected_breaches", "breach_cost",
              "headroom_cost", "total_cost", "cost_per_kept_request"]


def _usd(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.0f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f} %"


def scenarios_markdown(doc: dict[str, Any]) -> str:
    p = doc["prices"]
    out = [f"Scenarios over {p['horizon_hours']:g} h at ${p['replica_hour']:g} per replica-hour; breach prices "
           + ", ".join(f"{k} ${v:g}" for k, v in p["breach"].items())
           + f"; observed {doc['observed_replicas']} replicas over {doc['observed']['hours']:.1f} h.", ""]
    out += ["| replicas | traffic | context | headroom | breaches (point [low, high]) | total | flag |",
            "|---:|---:|---:|---:|---|---:|---|"]
    for t in doc["fleet"]:
        out.append(f"| {t['replicas']} | x{t['traffic']:g} | x{t['context']:g} | {_usd(t['headroom_cost'])} | "
                   f"{_usd(t['breach_cost'])} [{_usd(t['breach_cost_low'])}, {_usd(t['breach_cost_high'])}] | "
                   f"{_usd(t['total_cost'])} | {'extrapolated' if t['extrapolated'] else ''} |")
    out += ["", "| replicas | traffic | context | path | joint breach [low, high] | TTFT | TPOT | requests | "
            "breach cost | cost per kept request |", "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["scenarios"]:
        kept = "n/a" if r["cost_per_kept_request"] is None else f"${r['cost_per_kept_request']:.5f}"
        out.append(f"| {r['replicas']} | x{r['traffic']:g} | x{r['context']:g} | {r['path']} | "
                   f"{_pct(r['breach_share'])} [{_pct(r['breach_share_low'])}, {_pct(r['breach_share_high'])}]"
                   f"{' *' if r['extrapolated'] else ''} | {_pct(r['ttft_share'])} | {_pct(r['tpot_share'])} | "
                   f"{r['requests']:,.0f} | {_usd(r['breach_cost'])} | {kept} |")
    out.append("")
    for c in doc["cheapest_by_traffic_context"]:
        verdict = "the interval ends agree" if c["determined_by_data"] else (
            f"not determined by the data: {c['replicas_if_low']} at the low end, {c['replicas_if_high']} at the high end")
        out.append(f"- cheapest at traffic x{c['traffic']:g}, context x{c['context']:g}: **{c['replicas']} replicas**, "
                   f"{_usd(c['total_cost'])} ({verdict})")
    for path, price in doc["break_even_breach_price"].items():
        txt = "n/a (no next scenario, or it removes no breach)" if price is None else f"${price:.4f}"
        out.append(f"- break-even price of one {path} breach for one more replica than the cheapest: {txt}")
    m = doc["capacity_model"]
    out += ["", "Capacity model of one replica (fitted from the metrics): step time "
            f"{1e3 * m['step_base_s']:.2f} ms + {1e6 * m['step_per_seq_s']:.1f} µs per decoding sequence + "
            f"{1e6 * m['step_per_prefill_token_s']:.2f} µs per prefill token; KV capacity {m['kv_tokens']:,.0f} tokens "
            f"({m['kv_source']}); fit on {m['fit']['data']}, R² {m['fit']['r2']:.2f}; saturation "
            + ("observed: " + "; ".join(m["saturation_evidence"]) if m["saturation_observed"]
               else "never observed — capacity is a lower bound") + "."]
    cal = m.get("calibration") or {}
    if "fit_window_s" in cal:
        out.append(f"Step time fitted on {cal['fit_window_s']} s replica windows.")
    if "tpot_scale" in cal:
        out.append(f"Calibration at the observed fleet size: step time x{cal['tpot_scale']:.3f}, prefill x"
                   f"{cal['prefill_scale']:.3f} ({cal['matched']}).")
    errs = m.get("model_error_at_observed_replicas") or {}
    for path, e in errs.items():
        out.append(f"Replay at the observed fleet size, {path}: relative error TTFT {e['ttft']:.1%}, "
                   f"TPOT {e['tpot']:.1%}, joint {e['joint']:.1%} (widens every interval).")
    out.append("* extrapolated: the scenario leaves what the data supports; its interval includes a "
               "sensitivity envelope (KV capacity and step time +-15 %).")
    if doc.get("assumptions"):
        out += ["", "Assumptions the metrics cannot show (settable):"] + [f"- {a}" for a in doc["assumptions"]]
    return "\n".join(out) + "\n" + cross_check_markdown(doc)


def scenarios_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in doc["scenarios"]:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIELDS})
    return buf.getvalue()


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
            out.append(f"| {path} | {r['replicas']} | x{r['traffic']:g} | {_pct(r['share'])} [{_pct(r['share_low'])}, "
                       f"{_pct(r['share_high'])}]{flag} | {_pct(m['breach_share'])} [{_pct(m['breach_share_low'])}, "
                       f"{_pct(m['breach_share_high'])}] |")
        lo, hi = c["observed_load_range"]
        out.append(f"| {path} | observed per-replica load {lo:.2f}–{hi:.2f} req/s | | | |")
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

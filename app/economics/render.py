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
    if cal:
        out.append(f"Calibration at the observed fleet size: step time x{cal['tpot_scale']:.3f}, prefill x"
                   f"{cal['prefill_scale']:.3f} ({cal['matched']}).")
    errs = m.get("model_error_at_observed_replicas") or {}
    for path, e in errs.items():
        out.append(f"Replay at the observed fleet size, {path}: relative error TTFT {e['ttft']:.1%}, "
                   f"TPOT {e['tpot']:.1%}, joint {e['joint']:.1%} (widens every interval).")
    out.append("* extrapolated: the scenario leaves what the data supports; its interval includes a "
               "sensitivity envelope (KV capacity and step time +-15 %).")
    return "\n".join(out)


def scenarios_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in doc["scenarios"]:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIELDS})
    return buf.getvalue()

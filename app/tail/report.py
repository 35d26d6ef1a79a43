"""``headroom tail`` and the Tail page's downloads: the attribution and the signals as one document,
printed as JSON, Markdown or CSV, headed by the datasets and settings it came from."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Any

from app.cube import pulled_by_store
from app.escape import csv_row, md, visible
from app.promise import shares as pm
from app.store import Workspace
from app.tail import attribution, signals
from app.tail.twin import TwinAttribution


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise], datasets: list[str],
          start: datetime | None = None, end: datetime | None = None,
          twin_rows: list[TwinAttribution] | None = None) -> dict[str, Any]:
    """The document (docs/cli/tail.md)."""
    start, end = pm.time_range(ws, cube_id, start, end)
    att = attribution.attribute(ws, cube_id, promises, start, end)
    paths = [r["path"] for r in attribution.to_json(att)]
    scopes = [signals.FLEET] + paths
    pulls = pulled_by_store(ws, cube_id)
    counts = ("exact: increases of the raw samples" if not pulls else
              "extrapolated: PromQL increase() computed by the store (" + ", ".join(sorted({p["url"] for p in pulls}))
              + "); the attribution and the signals read those counts")
    return {
        "datasets": datasets, "start": _iso(start), "end": _iso(end), "window_s": window_s, "counts": counts,
        "promises": [{k: v for k, v in p.as_param().items() if v is not None} for p in promises],
        "attribution": attribution.to_json(att),
        "twin": None if twin_rows is None else [r.as_json() for r in twin_rows],
        "signals": [signals.to_json(signals.analyse(ws, cube_id, window_s, promises, start, end, scope=s))
                    for s in scopes],
    }


def _pct(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.{digits}f} %"  # x != x: NaN


def _interval(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "n/a"
    return _pct(lo) if abs(hi - lo) < 5e-7 else f"[{_pct(lo)}, {_pct(hi)}]"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _minutes(x: float | None) -> str:
    return "n/a" if x is None else f"{x:g} min"


def _usd(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None or lo is None or hi is None:
        return "n/a (no breach price)"
    return f"${x:,.0f} [${lo:,.0f}, ${hi:,.0f}]"


def header_lines(doc: dict[str, Any]) -> list[str]:
    promises = "; ".join(
        f"{md(p['path'])}: TTFT {p.get('ttft_s')} s, TPOT {p.get('tpot_s')} s"
        + (f", e2e {p['e2e_s']} s" if p.get("e2e_s") else "") + f", target {100 * p['target']:g} %"
        for p in doc["promises"])
    return [f"Where the tail lives {doc['start']} .. {doc['end']} (windows of {doc['window_s']} s)", "",
            f"Datasets: {', '.join(md(d) for d in doc['datasets']) or '(none)'}. Promises: {promises}.", ""] + (
                [] if doc.get("counts", "exact").startswith("exact") else [f"Counts: {md(doc['counts'])}.", ""])


def to_markdown(doc: dict[str, Any]) -> str:
    lines = header_lines(doc)
    lines += ["## TTFT breaches explained by queueing (histograms)", "",
              "| path | TTFT > | TTFT breach | queue alone > threshold | prefill alone > threshold | "
              "explained by queueing (share of requests) | of the breaches | basis |",
              "|---|---:|---|---|---|---|---|---|"]
    for a in doc["attribution"]:
        q, r, e, t = a["queue_alone"], a["prefill_alone"], a["queue_explained"], a["ttft_share"]
        point = e["fraction_of_breaches_independence_point"]
        lines.append(
            f"| {md(a['path'])} | {_num(a['ttft_threshold_s'])} s | {_interval(t['low'], t['high'])} | "
            f"{_interval(q['low'], q['high'])} | {_interval(r['low'], r['high'])} | "
            f"{_interval(e['share_low'], e['share_high'])} | "
            f"{_interval(e['fraction_of_breaches_low'], e['fraction_of_breaches_high'])}"
            f"{'' if point is None else f' (independence point {_pct(point, 1)})'} | {md(a['basis'])} |")
    lines += ["", "Queue alone above the threshold is a lower bound (TTFT includes the queue wait); the interval "
              "[max(queue alone, TTFT - prefill alone), min(TTFT, TTFT - prefill alone + queue alone)] is Fréchet's "
              "on the separate histograms (docs/methods.md#frechet); without a prefill histogram it is [queue alone, TTFT]."]
    e2e = [a for a in doc["attribution"] if a["e2e"]]
    if e2e:
        lines += ["", "| path | e2e > | e2e breach | queue alone | prefill alone | decode alone |", "|---|---:|---|---|---|---|"]
        for a in e2e:
            x = a["e2e"]
            lines.append(f"| {md(a['path'])} | {_num(x['threshold_s'])} s | " + " | ".join(
                _interval(x[k]["low"], x[k]["high"]) for k in ("e2e", "queue_alone", "prefill_alone", "decode_alone"))
                + " |")
    if doc.get("twin"):
        lines += ["", "## What headroom can buy down (the fitted twin, observed demand replayed)", "",
                  "| path | N | breaches at N | with ample replicas (intrinsic) | vanish (capacity) | of the breaches | "
                  "capacity breaches / month | $ / month | converged | flag |", "|---|---:|---|---|---|---:|---:|---:|---|---|"]
        for t in doc["twin"]:
            b, i, c = t["breach_share_at_n"], t["intrinsic"], t["capacity"]
            usd = t["capacity_usd_per_month"]
            lines.append(
                f"| {md(t['path'])} | {t['replicas']} | {_pct(b['share'])} [{_pct(b['low'])}, {_pct(b['high'])}] | "
                f"{_pct(i['share'])} [{_pct(i['low'])}, {_pct(i['high'])}] at {t['ample_replicas']} | "
                f"{_pct(c['share'])} [{_pct(c['low'])}, {_pct(c['high'])}] | {_pct(c['fraction_of_breaches'], 0)} | "
                f"{t['capacity_breaches_per_month']:,.0f} [{t['capacity_breaches_per_month_low']:,.0f}, "
                f"{t['capacity_breaches_per_month_high']:,.0f}] | "
                f"{_usd(usd, t['capacity_usd_per_month_low'], t['capacity_usd_per_month_high'])} | "
                f"{'yes' if t['converged'] else 'no (2N and 4N differ)'} | {'yes' if t['flagged'] else ''} |")
    for s in doc["signals"]:
        lines += ["", f"## Signals against breach share: {md(s['scope'])}", "",
                  f"Breach share per window: the joint promise's low end"
                  f"{' (request-weighted over the paths)' if s['scope'] == signals.FLEET else ''}; budget rate "
                  f"{_pct(s['budget_rate'])}, a window breaches above {_pct(s['onset_share'])}.", "",
                  "| signal | windows | Spearman lead 0 | peak at lead | Spearman there | Spearman leads 1-15 min (mean) | "
                  "level where breach rises | floor | onsets warned | median lead |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["signals"]:
            rho0 = r["correlation"][0]["spearman"] if r["correlation"] else None
            worst = " (worst ahead)" if r["signal"] == s["worst_signal"] else ""
            lines.append(
                f"| {md(r['label'])}{worst} | {r['windows']} | {_num(rho0, 2)} | {r['best_lead_min']} min | "
                f"{_num(r['best_spearman'], 2)} | {_num(r['predictive_spearman'], 2)} | {_num(r['level'])} | "
                f"{_pct(r['floor'])} | "
                f"{r['onsets_warned']} of {r['onsets']} | "
                f"{_minutes(r['median_lead_min'])} |")
        rule = s["rule"]
        if rule:
            lines += ["", f"Recommended: **{rule['text']}** — its alerts are followed by a breaching window within "
                      f"15 minutes {_pct(rule['precision'], 0)} of the time (any window: {_pct(rule['base_rate'], 0)}), "
                      f"{_pct(rule['recall'], 0)} of breach onsets were alerted in the 15 minutes before "
                      f"({rule['alerts']} alert windows; median lead "
                      f"{_minutes(rule['median_lead_min'])})."]
        waiting = next((r for r in s["signals"] if r["signal"] == "waiting" and r.get("breach_share_at")), None)
        if waiting and all(v is not None for v in waiting["breach_share_at"].values()):
            at = waiting["breach_share_at"]
            lines += ["", "At the usual starting point of a queue threshold (3-5 waiting per replica) the fitted breach "
                      f"share is {_pct(at['3'])} at 3 and {_pct(at['5'])} at 5 (the budget rate is {_pct(s['budget_rate'])})."]
        lines += [f"- {md(n)}" for n in s["notes"]]
    return "\n".join(lines)


CSV_FIELDS = ["section", "scope", "item", "lead_min", "value", "low", "high", "windows", "note"]


def csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(section: str, scope: str, item: str, value: Any = None, low: Any = None, high: Any = None,
            lead: Any = None, windows: Any = None, note: Any = None) -> None:
        rows.append({"section": section, "scope": scope, "item": item, "lead_min": lead, "value": value, "low": low,
                     "high": high, "windows": windows, "note": note})

    for a in doc["attribution"]:
        p = a["path"]
        add("attribution", p, "ttft_breach", a["ttft_share"]["share"], a["ttft_share"]["low"], a["ttft_share"]["high"],
            note=f"threshold {a['ttft_threshold_s']} s")
        for k in ("queue_alone", "prefill_alone"):
            add("attribution", p, k, a[k]["share"], a[k]["low"], a[k]["high"])
        e = a["queue_explained"]
        add("attribution", p, "queue_explained", e["share_independence_point"], e["share_low"], e["share_high"],
            note=a["basis"])
        add("attribution", p, "queue_explained_fraction_of_breaches", e["fraction_of_breaches_independence_point"],
            e["fraction_of_breaches_low"], e["fraction_of_breaches_high"])
        if a["e2e"]:
            for k in ("e2e", "queue_alone", "prefill_alone", "decode_alone"):
                x = a["e2e"][k]
                add("attribution_e2e", p, k, x["share"], x["low"], x["high"], note=f"threshold {a['e2e']['threshold_s']} s")
    for t in doc.get("twin") or []:
        for k in ("breach_share_at_n", "intrinsic", "capacity"):
            add("twin", t["path"], k, t[k]["share"], t[k]["low"], t[k]["high"],
                note=f"N={t['replicas']}, ample={t['ample_replicas']}")
        add("twin", t["path"], "capacity_breaches_per_month", t["capacity_breaches_per_month"],
            t["capacity_breaches_per_month_low"], t["capacity_breaches_per_month_high"])
        add("twin", t["path"], "capacity_usd_per_month", t["capacity_usd_per_month"], t["capacity_usd_per_month_low"],
            t["capacity_usd_per_month_high"])
    for s in doc["signals"]:
        for r in s["signals"]:
            for c in r["correlation"]:
                add("signal_correlation", s["scope"], r["signal"], c["spearman"], lead=c["lead_min"], windows=c["windows"])
            add("signal_level", s["scope"], r["signal"], r["level"], note=f"floor {r['floor']}")
        if s["rule"]:
            rule = s["rule"]
            add("rule", s["scope"], rule["signal"], rule["level"], note=rule["text"], lead=rule["median_lead_min"])
    return rows


def to_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    promises = "; ".join(f"{p['path']}=" + ",".join(f"{k}={v}" for k, v in p.items() if k != "path")
                         for p in doc["promises"])
    buf.write(f"# Where the tail lives {doc['start']} .. {doc['end']} (windows of {doc['window_s']} s)\n"
              f"# datasets: {visible(', '.join(doc['datasets']))}\n# promises: {visible(promises)}\n")
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in csv_rows(doc):
        w.writerow(csv_row(row))
    return buf.getvalue()

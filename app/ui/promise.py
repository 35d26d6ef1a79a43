"""The Promise page's logic: each path's promise (stored, preset or default), its tables of shares
with their bounds, the headline numbers, the bucket-bound notes and the alert summary."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from app.cube import pulled_by_store
from app.escape import md, visible
from app.promise import report, rules, screen
from app.promise import shares as pm
from app.store import MODEL_LABEL, Workspace
from app.ui.session import Settings
from app.ui.units import pct

SETTING_PROMISES = "promises"


PROMISE_FIELDS = ("ttft_s", "tpot_s", "e2e_s", "queue_s", "target")


CUSTOM = "custom"


def default_promise(path: str) -> dict[str, Any]:
    """A starting promise: MLPerf v5.1 Llama 3.1 8B Interactive for paths that say so, else Server."""
    lowered = path.lower()
    name = ("mlperf-v5.1-llama3.1-8b-interactive" if any(w in lowered for w in ("interactive", "chat"))
            else "mlperf-v5.1-llama3.1-8b-server")
    return preset_values(name)


def preset_values(name: str) -> dict[str, Any]:
    p = pm.presets()[name]
    return {"preset": name, "ttft_s": float(p["ttft_s"]), "tpot_s": float(p["tpot_s"]), "e2e_s": None,
            "queue_s": None, "target": float(p["target"])}


def stored_promises(settings: Settings, paths: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The promise of each path: as stored (the session's, ``SessionSettings``), else ``default_promise``."""
    stored = settings.get_setting(SETTING_PROMISES, {}) or {}
    return {p: {**default_promise(p), **stored.get(p, {})} for p in paths}


def promise_tuple(path: str, values: Mapping[str, Any]) -> tuple:
    """A promise as a plain hashable tuple (path, ttft_s, tpot_s, e2e_s, queue_s, target): cache keys."""
    return (path, *[None if values.get(f) is None else float(values[f]) for f in PROMISE_FIELDS])


def to_promises(tuples: Iterable[tuple]) -> list[pm.Promise]:
    return [pm.Promise(path=t[0], ttft_s=t[1], tpot_s=t[2], e2e_s=t[3], queue_s=t[4], target=t[5]) for t in tuples]


SIGNAL_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E", "queue": "queue"}


def promise_tables(frame: pd.DataFrame, exact_joint: Mapping[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per path: requests, joint interval, attainment, verdict, budget;
    one row per path and signal: threshold, share with [low, high], exact or estimate, basis).
    Shares are percentages."""
    summary, marginals = [], []
    for _, row in frame.iterrows():
        doc = pm.path_report(row, exact_share=exact_joint.get(row["path"]))
        joint = doc["joint"]
        summary.append({
            "path": doc["path"], "requests": doc["requests"], "failed": doc["failed_requests"],
            "joint breach low %": pct(joint["share_low"]), "joint breach high %": pct(joint["share_high"]),
            "joint exact %": pct(joint["exact_share"]), "target %": pct(doc["target"]),
            "attainment low %": pct(doc["attainment_low"]), "attainment high %": pct(doc["attainment_high"]),
            "meets target": {True: "yes", False: "no", None: "undetermined"}[doc["meets_target"]],
            "budget remaining %": pct(doc["budget_remaining"]),
            "budget remaining (best case) %": pct(doc["budget_remaining_best"]),
        })
        for signal, label in SIGNAL_NAMES.items():
            m = doc[signal]
            if m is None:
                continue
            basis = "per token (ITL)" if m.get("basis") == "tokens" else "per request"
            marginals.append({
                "path": doc["path"], "signal": label, "threshold (s)": m["threshold_s"],
                "breach %": pct(m["share"]), "low %": pct(m["share_low"]), "high %": pct(m["share_high"]),
                "exact": {True: "exact", False: "estimate", None: "no data"}[m["exact"]],
                "basis": basis if signal == "tpot" else "per request",
            })
    return pd.DataFrame(summary), pd.DataFrame(marginals)


def headlines(summary: pd.DataFrame, marginals: pd.DataFrame) -> dict[str, list[tuple[str, str, str]]]:
    """Per path, (label, value, help) for a row of metrics: each threshold's share, the joint share and
    the verdict against the target."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for s in summary.to_dict("records"):
        items = []
        for m in marginals[marginals["path"] == s["path"]].to_dict("records"):
            exact = m["exact"] == "exact"
            items.append((f"{m['signal']} > {m['threshold (s)']:g} s" + ("" if exact else " (estimate)"),
                          f"{m['breach %']:.2f} %",
                          "exact: the threshold is a bucket bound" if exact else
                          f"interpolated inside its bucket; bounds {m['low %']:.2f}–{m['high %']:.2f} %"))
        if s["joint exact %"] is not None and not pd.isna(s["joint exact %"]):
            items.append(("joint breach (exact)", f"{s['joint exact %']:.2f} %", "from per-request records"))
        else:
            items.append(("joint breach", f"{s['joint breach low %']:.2f}–{s['joint breach high %']:.2f} %",
                          "Fréchet interval: the marginals do not identify the joint share"))
        items.append((f"meets {s['target %']:g} %", s["meets target"],
                      f"attainment {s['attainment low %']:.2f}–{s['attainment high %']:.2f} %"))
        out[s["path"]] = items
    return out


def bound_notes(marginals: pd.DataFrame, bounds: Mapping[str, Sequence[float]]) -> list[str]:
    """One line per threshold that is not a bucket bound, with the neighbouring bounds to pick instead."""
    notes = []
    signal_of = {v: k for k, v in SIGNAL_NAMES.items()}
    estimates = marginals[marginals["exact"] == "estimate"] if len(marginals) else marginals
    for _, row in estimates.iterrows():
        signal = signal_of[row["signal"]]
        les = bounds.get("itl" if signal == "tpot" and row["basis"] != "per request" else signal, [])
        t = row["threshold (s)"]
        below = max((b for b in les if b < t), default=None)
        above = min((b for b in les if b > t), default=None)
        near = " or ".join(f"{b:g} s" for b in (below, above) if b is not None)
        notes.append(f"{row['path']}: {row['signal']} {t:g} s is not a bucket bound, so its share is an "
                     f"interpolated estimate inside [{row['low %']:.2f} %, {row['high %']:.2f} %]. Use {near}, "
                     f"or add {t:g} to the histogram's buckets, to make it exact.")
    return notes


ALERT_LABELS = {"page_1h": "page 1h/5m", "page_6h": "page 6h/30m", "ticket_3d": "ticket 3d/6h"}


def alert_summary(alerts: pd.DataFrame, window_s: int | None = None,
                  breach_prices: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The latest state of each alert rule per path, and how many windows fired; the burn rate of the last
    window (low–high: the joint interval's ends over the budget) and, with ``breach_prices`` (path -> USD
    per breach, the Economics page's), the budget's burn in dollars per hour: breached requests per hour in
    that window (burn × (1 − target) × requests / window) × the price, and the same over the range."""
    if alerts.empty:
        return pd.DataFrame()
    rows = []
    for path, part in alerts.sort_values("window_start").groupby("path", sort=True):
        last = part.iloc[-1]
        row: dict[str, Any] = {"path": path, "at": last["window_start"]}
        for key, label in ALERT_LABELS.items():
            state = last[key] if isinstance(last[key], str) else "n/a"
            row[label] = f"{state} ({int((part[key] == 'firing').sum())} windows firing)"
        if "burn_low" not in part:  # a table without the burn rates (its alert states only)
            rows.append(row)
            continue
        row["burn rate (last window)"] = f"{last['burn_low']:.2f}–{last['burn_high']:.2f}×"
        price = (breach_prices or {}).get(path)
        if price is not None and window_s:
            hours = window_s / 3600
            budget = 1 - float(last["target"])
            per_hour = [float(last[b]) * budget * float(last["requests"]) / hours * price for b in ("burn_low", "burn_high")]
            span_h = len(part) * hours
            total = [float((part[b] * (1 - part["target"]) * part["requests"]).sum()) * price / span_h
                     for b in ("burn_low", "burn_high")]
            row["$ / hour (last window)"] = f"${per_hour[0]:,.2f}–${per_hour[1]:,.2f}"
            row["$ / hour (range)"] = f"${total[0]:,.2f}–${total[1]:,.2f}"
        rows.append(row)
    return pd.DataFrame(rows)


def breach_prices(economics_form: Mapping[str, Any] | None, paths: Sequence[str]) -> dict[str, float] | None:
    """Each path's breach price as entered on the Economics page (its stored form), None before it was."""
    if not economics_form or "breach" not in economics_form:
        return None
    own = economics_form.get("breach") or {}
    default = economics_form.get("default_breach")
    out = {p: float(own[p]) if own.get(p) is not None else float(default) for p in paths
           if own.get(p) is not None or default is not None}
    return out or None


def window_labels(starts: pd.Series) -> dict[datetime, str]:
    """The range slider's options: each distinct window start, in time order, with its label (a month of
    5-minute windows is 8,640 options: labelled in one vectorised pass, not per option at every rerun)."""
    index = pd.DatetimeIndex(starts.unique()).sort_values()
    return dict(zip(index.to_pydatetime(), index.strftime("%m-%d %H:%M"), strict=True))


# Grafana's quick ranges, counted back from the end of the data (an export is history: "now" is its end)
QUICK_RANGES = {"last 15 min": 900, "last 1 h": 3600, "last 6 h": 21600, "last 24 h": 86400,
                "last 7 d": 7 * 86400, "last 30 d": 30 * 86400}
WHOLE_RANGE = "all"


def quick_ranges(starts: Sequence[datetime], window_s: int) -> dict[str, tuple[datetime, datetime]]:
    """The range slider's quick picks: each of ``QUICK_RANGES`` at least two windows long and shorter
    than the data, as (first, last) window starts among ``starts`` (sorted): the windows that begin at
    or after the data's end (the last start + ``window_s``) minus the range; then the whole range."""
    if not starts:
        return {}
    end = starts[-1] + timedelta(seconds=window_s)
    span = (end - starts[0]).total_seconds()
    picks: dict[str, tuple[datetime, datetime]] = {}
    for label, seconds in QUICK_RANGES.items():
        if 2 * window_s <= seconds < span:
            picks[label] = (starts[bisect_left(starts, end - timedelta(seconds=seconds))], starts[-1])
    return {**picks, WHOLE_RANGE: (starts[0], starts[-1])} if picks else {}


def resolution_note(window_s: int, step_s: int) -> str:
    """What the per-window chart and alerts show: every window, or steps of several (the screen's
    resolution), and where every window is."""
    if step_s == window_s:
        return (f"Each point is one {_duration(window_s)} window of the cube. The alert states at a window's end read "
                "the joint breach share over each rule's trailing range (5 min to 3 d) as one range.")
    return (f"Each point is {_duration(step_s)} of {_duration(window_s)} windows (the range holds more windows than "
            f"a chart shows, about {screen.MAX_POINTS:,} per path): its shares are those of the windows in it, "
            "exact at a bucket bound, as over any range. The alert states at a step's end read the joint breach share "
            "over each rule's trailing range (5 min to 3 d) as one range, so they are the same at any zoom. "
            "Every window's shares, burn rate and alert states: the CSV below.")


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def full_resolution_file(ws: Workspace, cube_id: int, window_s: int, promises: Sequence[pm.Promise],
                         start: datetime, end: datetime, include_failed: bool) -> str:
    """Every window's shares, burn rate and alert states as CSV (promise__shares, window by window),
    built when the button is clicked."""
    return screen.full_resolution_csv(ws, cube_id, window_s, list(promises), start, end, include_failed)


def report_download(datasets: Sequence[str], text: str, csv: bool) -> str:
    """``headroom report``'s Markdown or CSV text, headed by the datasets it came from."""
    names = ", ".join(visible(d) for d in datasets)
    return (f"# datasets: {names}\n" if csv else f"Datasets: {', '.join(md(d) for d in datasets)}.\n\n") + text


def report_file(ws: Workspace, cube_id: int, window_s: int, promises: Sequence[pm.Promise], start: datetime,
                end: datetime, include_failed: bool, exact_joint: Mapping[str, float], datasets: Sequence[str],
                csv: bool) -> str:
    """The report download: ``headroom report``'s document for these choices as Markdown or CSV under
    the datasets. Built when the button is clicked (its shares and alerts are a second pass over the
    cube: on a month of windows, a tenth of a second at every change were it built with the page)."""
    doc = report.build(ws, cube_id, window_s, list(promises), start, end, include_failed=include_failed,
                       exact_joint=dict(exact_joint))
    return report_download(datasets, report.to_csv(doc) if csv else report.to_markdown(doc), csv)


def rules_file(promises: Sequence[pm.Promise], labels: Sequence[str], path_rules: Sequence[tuple[str, str]],
               bounds: Mapping[str, Sequence[float]], engine: str | None) -> tuple[str | None, str]:
    """The promises as Prometheus rules (``headroom rules``' YAML), or None with what stops it."""
    if len(labels) != 1 or path_rules:
        return None, (f"The rules name a path by one label's value; this workspace names paths by "
                      f"{' / '.join(labels)}{' with renaming rules' if path_rules else ''}. Run "
                      "`headroom rules EXPORT --path-label LABEL --promise ...` with the label your alerts group by.")
    label = rules.model_label(engine or "vllm") if labels[0] == MODEL_LABEL else labels[0]
    try:
        plan = rules.plan(list(promises), label, "30d", engine or "vllm", bounds)
    except ValueError as exc:
        return None, str(exc)
    return rules.to_yaml(plan, "the Promise page"), (
        f"Recording rules for each path's TTFT and TPOT breach ratio (5 min to 3 d) and the burn-rate alerts of a "
        f"30-day SLO, reading {label}; check with `promtool check rules`.")


def counts_note(ws: Workspace, cube_id: int) -> str | None:
    """What the page says when the cube's counts are a live store's ``increase()`` (pushdown), else None."""
    pulls = pulled_by_store(ws, cube_id)
    if not pulls:
        return None
    return (f"Counts from {', '.join(sorted({str(p['url']) for p in pulls}))} are PromQL increase() computed by the "
            "store (pushdown): extrapolated to each window's edges, not the exact increases, so requests per window "
            "move by a few percent and shares can move by about a point (docs: Live stores, Pushdown and extrapolation). "
            "Read raw samples (Connect without pushdown) for exact numbers.")


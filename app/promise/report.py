"""``headroom report``: the promise report over a time range, as JSON, Markdown or CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

from app import records
from app.cube import pulled_by_store
from app.escape import csv_row, md
from app.live import client as live
from app.promise import shares as pm
from app.store import Workspace

EXACT_COUNTS = "exact: increases of the raw samples"


def parse_time(text: str | None) -> datetime | None:
    """ISO-8601 (``2026-11-29T10:00:00Z``), Unix seconds or relative (``now-7d``); returned as naive UTC."""
    if not text:
        return None
    return live.parse_time(text).astimezone(UTC).replace(tzinfo=None)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(ws: Workspace, cube_id: int, window_s: int, promises: list[pm.Promise],
          start: datetime | None = None, end: datetime | None = None, include_failed: bool = True,
          exact_joint: dict[str, float] | None = None) -> dict[str, Any]:
    """The report document (docs/cli/report.md): one entry per path with request histograms."""
    start, end = pm.time_range(ws, cube_id, start, end)
    frame = pm.shares(ws, cube_id, promises, start, end, include_failed=include_failed)
    alerts = pm.burn_alerts(ws, cube_id, window_s, promises, start, end, include_failed=include_failed)
    last_alerts = alerts.sort_values("window_start").groupby("path").tail(1).set_index("path")
    paths = []
    for _, row in frame.iterrows():
        exact = (exact_joint or {}).get(row["path"])
        doc = pm.path_report(row, exact_share=exact)
        if row["path"] in last_alerts.index:
            a = last_alerts.loc[row["path"]]
            doc["alerts"] = {k: (a[k] if isinstance(a[k], str) else None) for k in pm.ALERT_RULES}
            doc["alerts"]["at"] = _iso(a["window_start"] + _td(window_s))
        paths.append(doc)
    pulls = pulled_by_store(ws, cube_id)
    counts = (EXACT_COUNTS if not pulls else
              "extrapolated: PromQL increase() computed by the store (" + ", ".join(sorted({p["url"] for p in pulls}))
              + "); shares are ratios of one histogram's increases, so extrapolation mostly cancels in them")
    return {"start": _iso(start), "end": _iso(end), "window_s": window_s,
            "include_failed": include_failed, "counts": counts, "paths": paths}


def build_from_records(ws: Workspace, dataset_ids: list[int], window_s: int, promises: list[pm.Promise],
                       start: datetime | None = None, end: datetime | None = None,
                       include_failed: bool = True) -> dict[str, Any]:
    """The report document from per-request records alone (a benchmark's file, no metrics export): every
    share is exact, counted over the requests; the range is the records' own unless given."""
    cur = ws.cursor()
    lo, hi = cur.execute(
        "select min(coalesce(first_token, finish, arrival)), max(coalesce(first_token, finish, arrival)), "
        "from request_records where list_contains($ids, dataset_id)", {"ids": dataset_ids}).fetchone()
    untimed = cur.execute("select count(*) from request_records where list_contains($ids, dataset_id) and "
                          "coalesce(first_token, finish, arrival) is null", {"ids": dataset_ids}).fetchone()[0]
    # the range is left-open, like the cube's windows: start just before the first request
    r_start = start or (lo - timedelta(microseconds=1) if lo else None)
    frame = records.record_shares(ws, dataset_ids, promises, r_start, end, include_failed=include_failed)
    by_path = {p.path: p for p in promises}
    paths = []
    for row in frame.itertuples():
        if not row.requests:
            continue
        promise = by_path.get(row.path) or by_path[pm.ALL_PATHS]
        joint = float(row.joint_share)
        paths.append({
            "path": row.path, "requests": float(row.requests), "failed_requests": float(row.failed_requests),
            "ttft": _exact_marginal(promise.ttft_s, row.ttft_share),
            "tpot": _exact_marginal(promise.tpot_s, row.tpot_share, basis="requests"),
            "e2e": None, "queue": None,
            "joint": {"share_low": joint, "share_high": joint, "exact_share": joint},
            "target": promise.target, "attainment_low": 1 - joint, "attainment_high": 1 - joint,
            "meets_target": pm.meets_target(1 - joint, 1 - joint, promise.target),
            "budget_remaining": 1 - joint / (1 - promise.target),
            "budget_remaining_best": 1 - joint / (1 - promise.target),
        })
    counts = "exact: per-request records (" + ", ".join(
        sorted({r[0] for r in cur.execute("select format from datasets where list_contains($ids, dataset_id)",
                                           {"ids": dataset_ids}).fetchall()})) + ")"
    if untimed:
        counts += f"; {untimed} record(s) carry no absolute time and count in any range"
    return {"start": _iso(r_start) if r_start else None, "end": _iso(end or hi) if (end or hi) else None,
            "window_s": window_s, "include_failed": include_failed, "counts": counts, "paths": paths}


def _exact_marginal(threshold: float | None, share: float, basis: str | None = None) -> dict[str, Any] | None:
    if threshold is None:
        return None
    out = {"threshold_s": float(threshold), "share": float(share), "share_low": float(share),
           "share_high": float(share), "exact": True}
    return {**out, "basis": basis} if basis else out


def _td(seconds: int) -> Any:
    return timedelta(seconds=seconds)


def _pct(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f} %"


def _marginal_md(m: dict[str, Any] | None) -> str:
    if m is None or m["share"] is None:
        return "—"
    interval = "exact" if m["exact"] else f"[{_pct(m['share_low'])}, {_pct(m['share_high'])}]"
    basis = " per token" if m.get("basis") == "tokens" else ""
    return f"{_pct(m['share'])}{basis} ({interval}) > {m['threshold_s']:g} s"


def to_markdown(doc: dict[str, Any]) -> str:
    span = f"{doc['start']} .. {doc['end']}" if doc["start"] else "over the whole file"
    lines = [f"Promise report {span} (windows of {doc['window_s']} s; failed requests "
             f"{'count as breaches' if doc['include_failed'] else 'excluded'})", ""]
    if doc.get("counts", EXACT_COUNTS) != EXACT_COUNTS:
        lines += [f"Counts: {md(doc['counts'])}.", ""]
    lines += ["| path | requests | failed | TTFT breach | TPOT breach | joint breach | target | meets | budget left |",
              "|---|---:|---:|---|---|---|---:|---|---:|"]
    for p in doc["paths"]:
        j = p["joint"]
        joint = f"[{_pct(j['share_low'])}, {_pct(j['share_high'])}]"
        if j["exact_share"] is not None:
            joint += f", exact {_pct(j['exact_share'])}"
        meets = {True: "yes", False: "no", None: "undetermined"}[p["meets_target"]]
        budget = "n/a" if p["budget_remaining"] is None else f"{100 * p['budget_remaining']:.0f} %"
        lines.append(
            f"| {md(p['path'])} | {p['requests']:.0f} | {p['failed_requests']:.0f} | {_marginal_md(p['ttft'])} | "
            f"{_marginal_md(p['tpot'])} | {joint} | {_pct(p['target'], 1)} | {meets} | {budget} |"
        )
    notes = [p for p in doc["paths"] if p["tpot"] and p["tpot"].get("basis") == "tokens"]
    if notes:
        lines += ["", "TPOT \"per token\": the engine exports no per-request TPOT histogram; the share is of "
                  "inter-token gaps, and the joint interval uses the request bound of docs/methods.md#tpot-basis."]
    inexact = [p["path"] for p in doc["paths"] for k in ("ttft", "tpot") if p[k] and p[k]["exact"] is False]
    if inexact:
        lines += ["", "A threshold that is not a bucket bound gives an interpolated estimate and its hard "
                  "interval; add the thresholds as bucket bounds (vLLM --custom-histogram-buckets) to make them exact."]
    return "\n".join(lines)


CSV_FIELDS = ["path", "requests", "failed_requests", "ttft_threshold_s", "ttft_share", "ttft_share_low",
              "ttft_share_high", "ttft_exact", "tpot_threshold_s", "tpot_share", "tpot_share_low", "tpot_share_high",
              "tpot_exact", "tpot_basis", "joint_share_low", "joint_share_high", "joint_exact_share", "target",
              "attainment_low", "attainment_high", "meets_target", "budget_remaining"]


def to_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for p in doc["paths"]:
        row: dict[str, Any] = {k: p.get(k) for k in ("path", "requests", "failed_requests", "target",
                                                     "attainment_low", "attainment_high", "meets_target",
                                                     "budget_remaining")}
        for sig in ("ttft", "tpot"):
            m = p[sig] or {}
            row[f"{sig}_threshold_s"] = m.get("threshold_s")
            row[f"{sig}_share"] = m.get("share")
            row[f"{sig}_share_low"] = m.get("share_low")
            row[f"{sig}_share_high"] = m.get("share_high")
            row[f"{sig}_exact"] = m.get("exact")
        row["tpot_basis"] = (p["tpot"] or {}).get("basis")
        row["joint_share_low"] = p["joint"]["share_low"]
        row["joint_share_high"] = p["joint"]["share_high"]
        row["joint_exact_share"] = p["joint"]["exact_share"]
        w.writerow(csv_row(row))
    return buf.getvalue()

"""The Tail page's logic: the tail document (``app.tail.report``), the per-window quantiles, its tables,
and its figures (pure: data in, plotly Figure out; shares in percent, times in seconds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app import sql
from app.cube import cached_cube
from app.escape import plotly_text
from app.store import Workspace
from app.ui.charts import on_grid, percent_of

SIGNAL_TITLES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end-to-end", "queue": "queue time"}
MARGIN = {"t": 60, "b": 40}

# The page's windows: 1 minute (leads of 0-15 minutes minute by minute), or the 5 minutes a load keeps a
# cube of. A 1-minute cube is a pass over every sample: the bundled day (12 M samples) in seconds, a month
# of 8 replicas at a 60 s scrape (185 M) in about 4 minutes on 2 cores, where its 5-minute cube is already
# there. Above MINUTE_CUBE_SAMPLES the page opens on 5 minutes until the 1-minute cube is asked for.
TAIL_WINDOWS = (60, 300)
MINUTE_CUBE_SAMPLES = 25_000_000


def default_window(samples: int, minute_cube_cached: bool) -> int:
    """The window the Tail page opens on: 1 minute unless its cube is still to build over more than
    ``MINUTE_CUBE_SAMPLES`` samples."""
    return 60 if minute_cube_cached or samples <= MINUTE_CUBE_SAMPLES else 300


def window_note(window_s: int, samples: int, minute_cube_cached: bool) -> str | None:
    """What the page says about its windows while the 1-minute cube of a large dataset is not built."""
    if default_window(samples, minute_cube_cached) == 60:
        return None
    if window_s == 60:
        return (f"Building the 1-minute cube: a pass over all {samples:,} samples of these datasets, minutes at "
                f"this size (once: it is kept in the workspace).")
    return (f"5-minute windows: leads of 0–15 minutes in 5-minute steps. The 1-minute windows need a cube of "
            f"their own, a pass over all {samples:,} samples of these datasets (minutes at this size; once, then "
            f"kept in the workspace): pick 1 min to build it.")


def minute_cube_cached(ws: Workspace, dataset_ids: Sequence[int]) -> bool:
    """Whether the 1-minute cube of these datasets (the workspace's path mapping) is built already."""
    return cached_cube(ws, list(dataset_ids), 60, ws.path_labels()) is not None


def window_quantiles(ws: Workspace, cube_id: int, start: datetime, end: datetime, quantile: float) -> pd.DataFrame:
    """``tail__window_quantiles``: a quantile of each latency histogram per window and path, with its bucket."""
    return sql.df(ws.cursor(), "tail__window_quantiles", cube_id=cube_id, start_ts=start, end_ts=end,
                  quantile=float(quantile))


def latency_over_time(quantiles: pd.DataFrame, path: str, quantile: float, window_s: int) -> go.Figure:
    """TTFT, TPOT and e2e apart (never averaged into one curve): the per-window quantile, and the bucket it
    lies in as a band."""
    names = [s for s in ("ttft", "tpot", "e2e") if ((quantiles["path"] == path) & (quantiles["signal"] == s)).any()]
    fig = make_subplots(rows=max(1, len(names)), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{SIGNAL_TITLES[s]} p{100 * quantile:g} (s)" for s in names] or ["no data"])
    for row, s in enumerate(names, start=1):
        part = quantiles[(quantiles["path"] == path) & (quantiles["signal"] == s)]
        x, rows = on_grid(part[["window_start", "low_s", "high_s", "value_s"]], window_s)
        low = rows["low_s"].to_numpy(dtype=float)
        high = rows["high_s"].to_numpy(dtype=float)
        high = np.where(np.isfinite(high), high, low)  # an open top bucket: the band ends at its last bound
        fig.add_trace(go.Scatter(**x, y=high, mode="lines", line={"width": 0}, showlegend=False,
                                 hoverinfo="skip"), row=row, col=1)
        fig.add_trace(go.Scatter(**x, y=low, mode="lines", line={"width": 0},
                                 fill="tonexty", fillcolor="rgba(99,110,250,0.2)", name="bucket holding it",
                                 showlegend=row == 1, hoverinfo="skip"), row=row, col=1)
        fig.add_trace(go.Scatter(**x, y=rows["value_s"].to_numpy(dtype=float), mode="lines", name=SIGNAL_TITLES[s],
                                 hovertemplate="%{x}<br>%{y:.3f} s<extra>" + SIGNAL_TITLES[s] + "</extra>"),
                      row=row, col=1)
        fig.update_yaxes(title_text="seconds", row=row, col=1)
    fig.update_layout(title=f"{plotly_text(path)}: p{100 * quantile:g} per window (interpolated; band: its bucket)",
                      height=220 * max(1, len(names)) + 80, margin=MARGIN, xaxis_title=None)
    fig.update_xaxes(type="date")
    fig.update_xaxes(title_text="window start (UTC)", row=max(1, len(names)), col=1)
    return fig


def queue_against_ttft(ttft_windows: pd.DataFrame, path: str, window_s: int) -> go.Figure:
    """Per window: the TTFT breach share, the share whose queue time alone breaches, and the interval of
    the share queueing explains (``app.tail.attribution``)."""
    columns = ["queue_explained_high", "queue_explained_low", "ttft_share", "queue_alone_share"]
    x, rows = on_grid(ttft_windows.loc[ttft_windows["path"] == path, ["window_start", *columns]], window_s)
    pct = {c: percent_of(rows, c) for c in columns}
    fig = go.Figure()
    fig.add_trace(go.Scatter(**x, y=pct["queue_explained_high"], mode="lines",
                             line={"width": 0}, showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(**x, y=pct["queue_explained_low"], mode="lines",
                             line={"width": 0}, fill="tonexty", fillcolor="rgba(239,85,59,0.25)",
                             name="explained by queueing (interval)"))
    fig.add_trace(go.Scatter(**x, y=pct["ttft_share"], mode="lines", name="TTFT breach",
                             hovertemplate="%{x}<br>%{y:.2f} %<extra>TTFT breach</extra>"))
    fig.add_trace(go.Scatter(**x, y=pct["queue_alone_share"], mode="lines",
                             name="queue time alone > threshold", line={"dash": "dot"},
                             hovertemplate="%{x}<br>%{y:.2f} %<extra>queue alone</extra>"))
    fig.update_layout(title=f"{plotly_text(path)}: queue time against TTFT", xaxis_title="window start (UTC)",
                      xaxis_type="date", yaxis_title="share of requests (%)", margin=MARGIN)
    return fig


SIGNAL_ROWS = (("kv_usage", "KV-cache occupancy (%)", 100.0), ("preemptions_per_replica_minute",
               "preemptions per replica-minute", 1.0), ("running", "running per replica", 1.0),
               ("waiting", "waiting per replica", 1.0), ("gpu_util", "GPU utilisation (%)", 100.0))


def signals_over_time(windows: pd.DataFrame, window_s: int) -> go.Figure:
    """Each signal over time beside the breach share of the same windows (right axis, %)."""
    rows = [r for r in SIGNAL_ROWS if r[0] in windows and windows[r[0]].notna().any()]
    fig = make_subplots(rows=max(1, len(rows)), cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        specs=[[{"secondary_y": True}] for _ in range(max(1, len(rows)))],
                        subplot_titles=[label for _, label, _ in rows] or ["no signal"])
    x, grid = on_grid(windows[["window_start", "breach_share", *(r[0] for r in rows)]], window_s)
    breach = percent_of(grid, "breach_share")
    for i, (col, label, scale) in enumerate(rows, start=1):
        fig.add_trace(go.Scatter(**x, y=scale * grid[col].to_numpy(dtype=float), mode="lines", name=label,
                                 hovertemplate="%{x}<br>%{y:.3g}<extra>" + label + "</extra>"), row=i, col=1)
        fig.add_trace(go.Scatter(**x, y=breach, mode="lines",
                                 name="breach share (%)", line={"color": "rgba(200,0,0,0.45)", "width": 1},
                                 showlegend=i == 1, hovertemplate="%{x}<br>%{y:.2f} %<extra>breach share</extra>"),
                      row=i, col=1, secondary_y=True)
        fig.update_yaxes(title_text=label, row=i, col=1, secondary_y=False)
        fig.update_yaxes(title_text="breach (%)", row=i, col=1, secondary_y=True)
    fig.update_layout(title="Signals and breach share per window", height=200 * max(1, len(rows)) + 80,
                      margin=MARGIN)
    fig.update_xaxes(type="date")
    fig.update_xaxes(title_text="window start (UTC)", row=max(1, len(rows)), col=1)
    return fig


def level_curve(windows: pd.DataFrame, result: Mapping[str, Any]) -> go.Figure:
    """A signal against the breach share of its windows, the isotonic fit and the level where it rises."""
    col = result["signal"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=windows[col], y=100 * windows["breach_share"], mode="markers", name="windows",
                             marker={"size": 4, "opacity": 0.4}))
    curve = pd.DataFrame(result["curve"])
    if not curve.empty:
        fig.add_trace(go.Scatter(x=curve["signal"], y=100 * curve["breach_share"], mode="lines", line={"shape": "hv"},
                                 name="isotonic fit"))
    if result["level"] is not None:
        fig.add_vline(x=result["level"], line_dash="dash", annotation_text=f"level {result['level']:.3g}")
    fig.update_layout(title=f"Breach share against {result['label']}", xaxis_title=result["label"],
                      yaxis_title="breach share of the window (%)", margin=MARGIN)
    return fig


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def attribution_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    rows = []
    for a in doc["attribution"]:
        e = a["queue_explained"]
        rows.append({
            "path": a["path"], "TTFT >": a["ttft_threshold_s"], "TTFT breach %": _pct(a["ttft_share"]["share"]),
            "queue alone %": _pct(a["queue_alone"]["share"]), "prefill alone %": _pct(a["prefill_alone"]["share"]),
            "explained low %": _pct(e["share_low"]), "explained high %": _pct(e["share_high"]),
            "of breaches low %": _pct(e["fraction_of_breaches_low"]),
            "of breaches high %": _pct(e["fraction_of_breaches_high"]), "basis": a["basis"]})
    return pd.DataFrame(rows)


def twin_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    rows = []
    for t in doc.get("twin") or []:
        rows.append({
            "path": t["path"], "N": t["replicas"], "breach at N %": _pct(t["breach_share_at_n"]["share"]),
            "intrinsic %": _pct(t["intrinsic"]["share"]), "ample N": t["ample_replicas"],
            "capacity %": _pct(t["capacity"]["share"]), "capacity low %": _pct(t["capacity"]["low"]),
            "capacity high %": _pct(t["capacity"]["high"]),
            "capacity breaches / month": t["capacity_breaches_per_month"],
            "capacity $ / month": t["capacity_usd_per_month"], "converged": t["converged"], "flagged": t["flagged"]})
    return pd.DataFrame(rows)


def signal_table(scope_doc: Mapping[str, Any]) -> pd.DataFrame:
    rows = []
    for r in scope_doc["signals"]:
        rows.append({
            "signal": r["label"] + (" (worst ahead)" if r["signal"] == scope_doc["worst_signal"] else ""),
            "windows": r["windows"], "Spearman at lead 0": r["correlation"][0]["spearman"] if r["correlation"] else None,
            "peak at lead (min)": r["best_lead_min"], "Spearman at peak": r["best_spearman"],
            "Spearman leads 1-15 min": r["predictive_spearman"], "level": r["level"], "floor %": _pct(r["floor"]),
            "onsets warned": f"{r['onsets_warned']} of {r['onsets']}", "median lead (min)": r["median_lead_min"]})
    return pd.DataFrame(rows)


def correlation_frame(scope_doc: Mapping[str, Any]) -> pd.DataFrame:
    """Spearman per signal and lead (long), for the lead chart."""
    return pd.DataFrame([{"signal": r["label"], "lead_min": c["lead_min"], "spearman": c["spearman"],
                          "windows": c["windows"]} for r in scope_doc["signals"] for c in r["correlation"]])


def correlation_by_lead(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for name, part in frame.groupby("signal", sort=False):
        fig.add_trace(go.Scatter(x=part["lead_min"], y=part["spearman"], mode="lines+markers", name=str(name),
                                 customdata=part["windows"],
                                 hovertemplate="lead %{x} min<br>ρ %{y:.2f} (%{customdata} windows)<extra></extra>"))
    fig.update_layout(title="Rank correlation with breach share in the following windows",
                      xaxis_title="lead (minutes)", yaxis_title="Spearman ρ", margin=MARGIN)
    return fig


def paths_by_breaches(doc: Mapping[str, Any]) -> list[str]:
    """The document's paths, most TTFT breaches first (the page opens on the worst)."""
    def breaches(a: Mapping[str, Any]) -> float:
        return (a["requests"] or 0.0) * (a["ttft_share"]["share"] or 0.0)
    return [a["path"] for a in sorted(doc["attribution"], key=lambda a: (-breaches(a), a["path"]))]


def scopes(doc: Mapping[str, Any]) -> Sequence[str]:
    return [s["scope"] for s in doc["signals"]]

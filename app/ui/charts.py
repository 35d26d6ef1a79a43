"""Pure figure builders: DataFrame in, plotly Figure out. No Streamlit here.

Shares are drawn in percent, costs in USD over the decision horizon, times in seconds; every axis
title carries its unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.escape import plotly_text
from app.ui.promise import ALERT_LABELS

MARGIN = {"t": 50, "b": 40}
ALERT_STATES = {"ok": 0, "possible": 1, "firing": 2}
# a grid this many times longer than the windows it holds (two snapshots a month apart at 1 minute)
# is drawn from the windows' own times instead, with one gap point where the line breaks
SPARSE_GRID = 4


def on_grid(frame: pd.DataFrame, window_s: int) -> tuple[dict[str, object], pd.DataFrame]:
    """The x of a time-series trace and ``frame`` (one row per ``window_start``) indexed by it, NaN where
    no window was stored (a gap the line does not bridge). On the dense grid of the windows the x is
    plotly's ``x0``/``dx`` (a month of 1-minute windows written as 43,200 times per trace was most of a
    chart's megabytes and of its rerun); a grid mostly empty keeps the stored times, a NaN row after each
    window whose successor is not the next one."""
    starts = pd.DatetimeIndex(frame["window_start"])
    step = pd.Timedelta(seconds=int(window_s))
    rows = frame.set_index(starts).drop(columns="window_start")
    if len(starts) == 0:
        return {"x": []}, rows
    grid = pd.date_range(starts.min(), starts.max(), freq=step)
    if len(grid) <= SPARSE_GRID * len(starts) and starts.isin(grid).all():
        return {"x0": grid[0].strftime("%Y-%m-%d %H:%M:%S"), "dx": int(window_s) * 1000}, rows.reindex(grid)
    ordered = starts.sort_values()
    breaks = ordered[:-1][(ordered[1:] - ordered[:-1]) > step] + step
    index = ordered.union(breaks)
    return {"x": index.to_numpy()}, rows.reindex(index)


def requests_over_time(frame: pd.DataFrame, window_s: int) -> go.Figure:
    """Requests per second per path, from ``cube__requests_by_window``. A line breaks where windows are
    missing (a scrape gap, or datasets from different days), so no traffic is drawn where none was seen."""
    fig = go.Figure()
    for path, part in frame.groupby("path", sort=True):
        x, rows = on_grid(part, window_s)
        fig.add_trace(go.Scatter(
            **x, y=(rows["requests"] / window_s).to_numpy(dtype=float), name=plotly_text(path),
            mode="lines+markers" if len(part) <= 3 else "lines", connectgaps=False,
            hovertemplate="%{x}<br>%{y:.2f} req/s<extra>" + plotly_text(path) + "</extra>",
        ))
    fig.update_layout(
        title="Requests per second by path", xaxis_title="window start (UTC)", xaxis_type="date",
        yaxis_title="requests per second", legend_title="path", margin=MARGIN,
    )
    return fig


def data_health(frame: pd.DataFrame) -> go.Figure:
    """Counter resets and repaired buckets per window (stacked bars per path and statistic)."""
    fig = go.Figure()
    for (stat, path), part in frame.groupby(["stat", "path"], sort=True):
        per_window = part.groupby("window_start", as_index=False)["value"].sum()
        fig.add_trace(go.Bar(x=per_window["window_start"], y=per_window["value"], name=f"{stat} · {plotly_text(path)}",
                             hovertemplate="%{x}<br>%{y:.0f} " + str(stat) + "<extra>" + plotly_text(path) + "</extra>"))
    fig.update_layout(
        title="Data health: counter resets and repaired (non-monotone) buckets", barmode="stack",
        xaxis_title="window start (UTC)", yaxis_title="series resets / buckets repaired per window",
        legend_title="statistic · path", margin=MARGIN,
    )
    return fig


SHARE_COLUMNS = {"joint": (None, "joint_low", "joint_high"), "ttft": ("ttft_share", "ttft_low", "ttft_high"),
                 "tpot": ("tpot_share", "tpot_low", "tpot_high"), "e2e": ("e2e_share", "e2e_low", "e2e_high"),
                 "queue": ("queue_share", "queue_low", "queue_high")}


def percent_of(rows: pd.DataFrame, column: str) -> np.ndarray:
    """A share column of ``on_grid``'s rows in percent, as the float array a trace takes."""
    return 100 * rows[column].to_numpy(dtype=float)


def breach_share_by_window(frame: pd.DataFrame, window_s: int, signal: str = "joint") -> go.Figure:
    """Per window and path: the breach share's interval as a band, the estimate as a line (marginal
    signals; the joint share has only its Fréchet interval) and the error budget (1 − target) dashed."""
    point, low, high = SHARE_COLUMNS[signal]
    fig = go.Figure()
    for path, part in frame.groupby("path", sort=True):
        x, rows = on_grid(part, window_s)
        name = plotly_text(path)
        fig.add_trace(go.Scatter(**x, y=percent_of(rows, high), name=f"{name} high", mode="lines", line={"width": 0.5},
                                 legendgroup=name, showlegend=False,
                                 hovertemplate="%{y:.2f} %<extra>" + f"{name} high</extra>"))
        fig.add_trace(go.Scatter(**x, y=percent_of(rows, low), name=f"{name} interval", mode="lines", fill="tonexty",
                                 line={"width": 0.5}, legendgroup=name,
                                 hovertemplate="%{y:.2f} %<extra>" + f"{name} low</extra>"))
        if point is not None:
            fig.add_trace(go.Scatter(**x, y=percent_of(rows, point), name=f"{name} estimate", mode="lines", legendgroup=name,
                                     hovertemplate="%{y:.2f} %<extra>" + f"{name}</extra>"))
        fig.add_trace(go.Scatter(**x, y=100 - percent_of(rows, "target"), name=f"{name} error budget", mode="lines",
                                 line={"dash": "dash"}, legendgroup=name,
                                 hovertemplate="%{y:.2f} %<extra>" + f"{name} budget</extra>"))
    label = "joint (TTFT or TPOT or failed)" if signal == "joint" else signal.upper()
    fig.update_layout(title=f"Breach share per window: {label}", xaxis_title="window start (UTC)", xaxis_type="date",
                      yaxis_title="breached requests (%)", legend_title="path", margin=MARGIN)
    return fig


def _state_codes(states: pd.Series) -> np.ndarray:
    """An alert state column as ALERT_STATES' codes, NaN where there is no state (float32: the heatmap's
    cells travel to the browser as a binary array)."""
    codes = np.full(len(states), np.nan, dtype=np.float32)
    for name, code in ALERT_STATES.items():
        codes[(states == name).fillna(False).to_numpy(dtype=bool)] = code
    return codes


def alert_states(alerts: pd.DataFrame, window_s: int) -> go.Figure:
    """The multiwindow burn-rate alerts per path over time: ok / possible (only the interval's high end
    burns) / firing, blank where the cube window is longer than the rule's short window or no window
    was stored."""
    # numpy arrays throughout: plotly validates and serialises them whole (a month of 5-minute windows
    # as Python lists took a quarter of a second per promise change)
    rows, z = [], []
    x, grid = on_grid(pd.DataFrame({"window_start": pd.unique(alerts["window_start"])}), window_s)
    codes = alerts[["window_start", "path"]].assign(**{rule: _state_codes(alerts[rule]) for rule in ALERT_LABELS})
    for path, part in codes.groupby("path", sort=True):
        part = part.set_index("window_start").reindex(grid.index)
        for rule, label in ALERT_LABELS.items():
            rows.append(f"{plotly_text(path)} · {label}")
            z.append(part[rule].to_numpy())
    fig = go.Figure(go.Heatmap(
        **x, y=rows, z=np.vstack(z) if z else np.empty((0, len(grid)), np.float32), zmin=0, zmax=2, xgap=0,
        ygap=2,
        colorscale=[[0, "#2e7d32"], [0.33, "#2e7d32"], [0.33, "#f9a825"], [0.66, "#f9a825"], [0.66, "#c62828"],
                    [1, "#c62828"]],
        colorbar={"tickvals": [0.33, 1, 1.67], "ticktext": list(ALERT_STATES), "title": "state"},
        hovertemplate="%{x}<br>%{y}: %{z}<extra></extra>",
    ))
    fig.update_layout(title="Burn-rate alerts (SRE workbook multiwindow rules, 30-day budget)",
                      xaxis_title="window start (UTC)", xaxis_type="date", yaxis_title="path · rule", margin=MARGIN)
    return fig


def scenario_costs(fleet: pd.DataFrame) -> go.Figure:
    """Headroom cost, breach cost (with its interval) and total against N' for one traffic/context case."""
    f = fleet.sort_values("replicas")
    n = f["replicas"]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=n, y=f["headroom_cost"], name="headroom cost", opacity=0.5,
                         hovertemplate="N'=%{x}<br>$%{y:,.0f}<extra>headroom</extra>"))
    fig.add_trace(go.Scatter(
        x=n, y=f["breach_cost"], name="breach cost", mode="lines+markers",
        error_y={"type": "data", "symmetric": False, "array": f["breach_cost_high"] - f["breach_cost"],
                 "arrayminus": f["breach_cost"] - f["breach_cost_low"]},
        hovertemplate="N'=%{x}<br>$%{y:,.0f}<extra>breaches</extra>"))
    fig.add_trace(go.Scatter(
        x=n, y=f["total_cost"], name="total", mode="lines+markers", line={"width": 3},
        error_y={"type": "data", "symmetric": False, "array": f["total_cost_high"] - f["total_cost"],
                 "arrayminus": f["total_cost"] - f["total_cost_low"]},
        hovertemplate="N'=%{x}<br>$%{y:,.0f}<extra>total</extra>"))
    best = f.loc[f["total_cost"].idxmin()]
    fig.add_trace(go.Scatter(x=[best["replicas"]], y=[best["total_cost"]], name="cheapest N'", mode="markers",
                             marker={"symbol": "star", "size": 16}, hovertemplate="cheapest: N'=%{x}<extra></extra>"))
    fig.update_layout(title="Cost over the horizon against replicas", xaxis_title="replicas N'",
                      yaxis_title="cost over the horizon (USD)", xaxis={"dtick": 1}, margin=MARGIN)
    return fig


def compare_totals(fleets: Mapping[str, pd.DataFrame]) -> go.Figure:
    """Total cost against N' of several saved sets (their base traffic/context case)."""
    fig = go.Figure()
    for name, f in fleets.items():
        f = f.sort_values("replicas")
        fig.add_trace(go.Scatter(
            x=f["replicas"], y=f["total_cost"], name=plotly_text(name), mode="lines+markers",
            error_y={"type": "data", "symmetric": False, "array": f["total_cost_high"] - f["total_cost"],
                     "arrayminus": f["total_cost"] - f["total_cost_low"]}))
    fig.update_layout(title="Total cost of the saved sets", xaxis_title="replicas N'",
                      yaxis_title="total cost over the horizon (USD)", xaxis={"dtick": 1}, margin=MARGIN)
    return fig


def load_response(axis: Mapping[str, pd.DataFrame | tuple], path: str) -> go.Figure:
    """The empirical load–response curve (band between the isotonic fits of the per-window interval
    ends; a marker per observed window load) and its readings at each N', beside the capacity model's
    predictions on the same load axis (``app.ui.capacity_model.load_axis``)."""
    curve, model, read = axis["curve"], axis["model"], axis["readings"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=curve["load"], y=100 * curve["share_high"], name="curve (fit of high ends)",
                             mode="lines+markers", marker={"size": 4},
                             hovertemplate="%{x:.2f} req/s/replica<br>%{y:.2f} %<extra>curve high</extra>"))
    fig.add_trace(go.Scatter(x=curve["load"], y=100 * curve["share_low"], name="curve (fit of low ends)",
                             mode="lines+markers", marker={"size": 4}, fill="tonexty",
                             hovertemplate="%{x:.2f} req/s/replica<br>%{y:.2f} %<extra>curve low</extra>"))
    markers = ((read, "curve read at N'", "diamond-open"), (model, "capacity model (twin replay)", "x"))
    for frame, name, symbol in markers:
        if not len(frame):
            continue
        fig.add_trace(go.Scatter(
            x=frame["load"], y=100 * frame["share"], name=name, mode="markers+text",
            marker={"symbol": symbol, "size": 11},
            text=[f"N'={k}" for k in frame["replicas"]], textposition="top center",
            error_y={"type": "data", "symmetric": False, "array": 100 * (frame["share_high"] - frame["share"]),
                     "arrayminus": 100 * (frame["share"] - frame["share_low"])},
            hovertemplate="%{text}: %{x:.2f} req/s/replica<br>%{y:.2f} %<extra>" + name + "</extra>"))
    lo, hi = axis["range"]
    fig.add_vrect(x0=lo, x1=hi, fillcolor="grey", opacity=0.08, line_width=0,
                  annotation_text="observed load range", annotation_position="top left")
    fig.update_layout(title=f"Load–response: {plotly_text(path)} (cross-check of the capacity model)",
                      xaxis_title="load (the path's requests per second per replica)",
                      yaxis_title="joint breach share (%)", margin=MARGIN)
    return fig


def kingman_terms(hours: Sequence[Mapping[str, float]]) -> go.Figure:
    """Kingman's three factors per hour (``crosscheck.queueing_view``) and the wait they imply."""
    frame = pd.DataFrame(list(hours))
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("utilisation term ρ/(1−ρ)", "variability term (c²a + c²s)/2",
                                        "service term E[S] and Kingman's wait"))
    x = frame["hour"]
    fig.add_trace(go.Scatter(x=x, y=frame["utilisation_term"], name="ρ/(1−ρ)", mode="lines+markers"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=frame["variability_term"], name="(c²a + c²s)/2", mode="lines+markers"),
                  row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=frame["service_s"], name="E[S] (s)", mode="lines"), row=3, col=1)
    fig.add_trace(go.Scatter(x=x, y=frame["wait_s"], name="Kingman wait (s)", mode="lines+markers"), row=3, col=1)
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", row=1, col=1, title_text="factor (dimensionless)")
    fig.update_yaxes(row=2, col=1, title_text="factor (dimensionless)")
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", row=3, col=1, title_text="seconds (s)")
    fig.update_xaxes(title_text="hour of the export (h)", row=3, col=1)
    fig.update_layout(title="Kingman per hour at the observed fleet size — a thinking tool, not the estimator",
                      height=650, margin=MARGIN)
    return fig


def erlang_c(rows: Sequence[Mapping[str, float]]) -> go.Figure:
    """M/M/c at the peak hour against the replica count: probability of waiting and mean wait (pooling)."""
    frame = pd.DataFrame(list(rows)).sort_values("replicas")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=frame["replicas"], y=100 * frame["p_wait"], name="P(wait) (%)", opacity=0.6),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=frame["replicas"], y=frame["mean_wait_s"], name="mean wait (s)",
                             mode="lines+markers"), secondary_y=True)
    fig.update_yaxes(title_text="probability of waiting (%)", secondary_y=False)
    fig.update_yaxes(title_text="mean wait (s)", type="log", exponentformat="power", secondary_y=True)
    fig.update_layout(title="Erlang C at the peak hour — a thinking tool, not the estimator",
                      xaxis_title="replicas N'", xaxis={"dtick": 1}, margin=MARGIN)
    return fig


def policy_costs(fleet: pd.DataFrame, policies: pd.DataFrame) -> go.Figure:
    """Total cost (with its interval) against mean replicas paid for: the static N' rows as a line,
    each policy row as a marker, so "degrade", "reject early", "autoscale" and "buy replicas" compare
    on one axis."""
    fig = go.Figure()
    f = fleet.sort_values("replicas")
    fig.add_trace(go.Scatter(
        x=f["replicas"], y=f["total_cost"], name="static N'", mode="lines+markers",
        error_y={"type": "data", "symmetric": False, "array": f["total_cost_high"] - f["total_cost"],
                 "arrayminus": f["total_cost"] - f["total_cost_low"]},
        hovertemplate="N'=%{x}<br>$%{y:,.0f}<extra>static</extra>"))
    for kind, part in policies.groupby("kind", sort=False) if not policies.empty else []:
        fig.add_trace(go.Scatter(
            x=part["mean_replicas"], y=part["total_cost"], name=kind, mode="markers", marker={"size": 11},
            text=[plotly_text(p) for p in part["policy"]],
            error_y={"type": "data", "symmetric": False, "array": part["total_cost_high"] - part["total_cost"],
                     "arrayminus": part["total_cost"] - part["total_cost_low"]},
            hovertemplate="%{text}<br>%{x:.2f} replicas<br>$%{y:,.0f}<extra></extra>"))
    fig.update_layout(title="Total cost over the horizon: static replicas and policies",
                      xaxis_title="replicas paid for (mean over the export)",
                      yaxis_title="headroom + breaches + degraded answers (USD)", margin=MARGIN)
    return fig


def autoscaler_timeline(frame: pd.DataFrame) -> go.Figure:
    """Replicas paid for (starting, ready, draining) and ready over the export, per autoscaler row."""
    fig = go.Figure()
    for name, part in frame.groupby("policy", sort=False):
        label = plotly_text(name)
        fig.add_trace(go.Scatter(x=part["minute"], y=part["replicas"], name=f"paid: {label}", mode="lines",
                                 line={"shape": "hv"}))
        fig.add_trace(go.Scatter(x=part["minute"], y=part["ready"], name=f"ready: {label}", mode="lines",
                                 line={"shape": "hv", "dash": "dot"}))
    fig.update_layout(title="Autoscaler: replicas over time", xaxis_title="minutes from the export's start",
                      yaxis_title="replicas", margin=MARGIN, legend={"orientation": "h", "y": -0.25})
    return fig


def routing_curve(frame: pd.DataFrame) -> go.Figure:
    """The routing row over replica counts: per routing and path the joint breach share (%, with its
    interval) and, on the right axis, the share of prompt tokens the prefix cache served (%, dotted)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for (routing, path), part in frame.groupby(["routing", "path"], sort=False):
        part = part.sort_values("replicas")
        label = f"{routing}: {plotly_text(path)}"
        share = percent_of(part, "breach_share")
        fig.add_trace(go.Scatter(
            x=part["replicas"], y=share, name=f"breach {label}", mode="lines+markers",
            error_y={"type": "data", "symmetric": False, "array": percent_of(part, "breach_share_high") - share,
                     "arrayminus": share - percent_of(part, "breach_share_low")},
            hovertemplate="N'=%{x}<br>%{y:.2f} %<extra>" + label + "</extra>"), secondary_y=False)
        fig.add_trace(go.Scatter(
            x=part["replicas"], y=percent_of(part, "cached_share"), name=f"cached {label}", mode="lines",
            line={"dash": "dot"}, hovertemplate="N'=%{x}<br>%{y:.1f} % cached<extra>" + label + "</extra>"),
            secondary_y=True)
    fig.update_layout(title="Load-based against prefix-aware routing", xaxis_title="replicas N'", margin=MARGIN,
                      legend={"orientation": "h", "y": -0.25})
    fig.update_yaxes(title_text="joint breach share (%)", secondary_y=False)
    fig.update_yaxes(title_text="prompt tokens served from the prefix cache (%)", secondary_y=True)
    return fig


def cached_share_over_time(windows: pd.DataFrame, totals: pd.DataFrame, window_s: int) -> go.Figure:
    """Per path that exports a prefix-cache counter: the share of its prompt tokens the cache served in
    each window (``demand__cached_share_by_window``; a gap where the window had no prompt token), and its
    share over the whole range dashed (``cached_share_totals``: the ratio of the sums)."""
    fig = go.Figure()
    overall = totals.set_index("path")["cached_share"]
    read = windows[windows["cached_tokens"].notna()]
    for path, part in read.groupby("path", sort=True):
        x, rows = on_grid(part[["window_start", "cached_share"]], window_s)
        name = plotly_text(path)
        fig.add_trace(go.Scatter(**x, y=percent_of(rows, "cached_share"), name=f"{name} per window",
                                 mode="lines+markers" if len(part) <= 30 else "lines", connectgaps=False,
                                 legendgroup=name,
                                 hovertemplate="%{x}<br>%{y:.1f} % of prompt tokens<extra>" + name + "</extra>"))
        share = float(overall.get(path, np.nan))
        if np.isfinite(share):
            first, last = part["window_start"].min(), part["window_start"].max() + pd.Timedelta(seconds=window_s)
            fig.add_trace(go.Scatter(x=[first, last], y=[100 * share, 100 * share], mode="lines",
                                     name=f"{name} over the range ({100 * share:.1f} %)", line={"dash": "dash"},
                                     legendgroup=name,
                                     hovertemplate="%{y:.2f} % over the range<extra>" + name + "</extra>"))
    fig.update_layout(title="Prompt tokens served from the prefix cache (read from the export)",
                      xaxis_title="window start (UTC)", xaxis_type="date",
                      yaxis_title="prompt tokens served from the cache (%)", yaxis={"rangemode": "tozero"},
                      legend_title="path", margin=MARGIN)
    return fig

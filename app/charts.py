"""Pure figure builders: DataFrame in, plotly Figure out. No Streamlit here."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def requests_over_time(frame: pd.DataFrame, window_s: int) -> go.Figure:
    """Requests per second per path (stacked areas), from ``cube__requests_by_window``."""
    fig = go.Figure()
    for path, part in frame.groupby("path", sort=True):
        fig.add_trace(go.Scatter(
            x=part["window_start"], y=part["requests"] / window_s, name=str(path),
            mode="lines", stackgroup="requests",
            hovertemplate="%{x}<br>%{y:.2f} req/s<extra>" + str(path) + "</extra>",
        ))
    fig.update_layout(
        title="Requests per second by path", xaxis_title="window start (UTC)",
        yaxis_title="requests per second", legend_title="path", margin={"t": 50, "b": 40},
    )
    return fig

"""The cube of a workspace as a frame, and one of its (signal, stat, le) series as {window: value}."""

from __future__ import annotations

import pandas as pd

from app.cube import cube_frame, ensure_cube
from app.store import Workspace
from tests.conftest import ts


def cube(ws: Workspace, window_s: int, ids: list[int] | None = None, labels: list[str] | None = None) -> pd.DataFrame:
    """The cube of ``ids`` (every dataset: None) at ``window_s``, by ``labels`` (None: the workspace's path labels)."""
    return cube_frame(ws, ensure_cube(ws, ids, window_s, labels))


def values(frame: pd.DataFrame, signal: str | None, stat: str, le: float | None = None) -> dict:
    """{window offset in seconds after T0: value} for one (signal, stat, le)."""
    sel = frame[(frame.stat == stat)]
    sel = sel[sel.signal.isna()] if signal is None else sel[sel.signal == signal]
    sel = sel[sel["le"].isna()] if le is None else sel[sel["le"] == le]
    return {int((w - ts(0)).total_seconds()): v for w, v in zip(sel["window_start"], sel["value"], strict=True)}

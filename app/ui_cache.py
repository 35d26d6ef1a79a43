"""The Streamlit caches, kept deliberately small and keyed by plain values.

The workspace is one per process (``st.cache_resource``); every query runs on its own cursor.
Results are cached by (cube id, parameters): a cube is immutable once built, so a threshold or
price change re-runs only the small query on the cube, never the cube build.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import ui_data
from app.cube import ensure_cube
from app.store import Workspace, default_db_path


@st.cache_resource(show_spinner=False, on_release=lambda ws: ws.close())
def workspace(path: str | None = None) -> Workspace:
    ws = Workspace(path or default_db_path())
    ui_data.ensure_sample_loaded(ws)
    return ws


@st.cache_data(max_entries=16, show_spinner="Building the cube…")
def cube_id(db: str, dataset_ids: tuple[int, ...], window_s: int, path_labels: tuple[str, ...],
            rules: tuple[tuple[str, str], ...]) -> int:
    """Id of the cached cube for this spec (``rules`` is in the key so a new mapping builds a new cube)."""
    return ensure_cube(workspace(db), list(dataset_ids), window_s, list(path_labels))


@st.cache_data(max_entries=32, show_spinner=False)
def requests_per_window(db: str, cube: int) -> pd.DataFrame:
    return ui_data.requests_per_window(workspace(db), cube)

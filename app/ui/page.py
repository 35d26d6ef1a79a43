"""What every page runs first: the workspace, the cube of the current choices and its request paths."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.store import Workspace, default_db_path
from app.ui import cache
from app.ui.cache import CubeRef


@dataclass(frozen=True)
class Page:
    db: str
    ws: Workspace
    ref: CubeRef | None  # the cube of the workspace's datasets, window and path mapping (None: no data)
    paths: list[str]  # its paths with request histograms


def open_page(title: str, needs_paths: bool = True) -> Page:
    """Title the page and open the workspace; with ``needs_paths``, read the current cube and its request
    paths too, and stop with a word when there are none (a page that sets the cube up itself, or reads
    only saved results, passes False and gets no cube)."""
    db = default_db_path()
    ws = cache.workspace(db)
    st.title(title)
    if not needs_paths:
        return Page(db, ws, None, [])
    ref = cache.current_cube(db)
    paths = cache.request_paths(db, ref) if ref else []
    if not paths:
        st.info("No path with request histograms yet: load an export on the Data page.")
        st.stop()
    return Page(db, ws, ref, paths)

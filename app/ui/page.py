"""What every page runs first: the workspace, the session's own settings, the cube of the session's
choices and its request paths."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.escape import md
from app.store import Workspace, default_db_path
from app.ui import cache, session, state
from app.ui.cache import CubeRef
from app.ui.session import SessionSettings

SHARED_NOTE = ("**Shared** with everyone on this workspace: the datasets, the path mapping and the saved scenario "
               "sets. **Yours**, kept under this tab's link (`?s=…`; a reload keeps them): the datasets in your "
               "analysis, the window, the promises and the Economics inputs.")


@dataclass(frozen=True)
class Page:
    db: str
    ws: Workspace
    mine: SessionSettings  # this browser session's own choices
    ref: CubeRef | None  # the cube of the session's datasets and window and the path mapping (None: no data)
    paths: list[str]  # its paths with request histograms


def session_id() -> str:
    """This browser session's id: kept in session state, mirrored in the URL (``?s=``) so a reload of the
    tab comes back to the same choices; a URL without a valid one starts a new session."""
    sid = st.session_state.get(state.SESSION_ID)
    if sid is None:
        given = st.query_params.get(session.SESSION_PARAM)
        sid = given if session.valid_id(given) else session.new_id()
        st.session_state[state.SESSION_ID] = sid
    if st.query_params.get(session.SESSION_PARAM) != sid:
        st.query_params[session.SESSION_PARAM] = sid
    return sid


def open_page(title: str, needs_paths: bool = True) -> Page:
    """Title the page and open the workspace and the session's settings; with ``needs_paths``, read the
    current cube and its request paths too, and stop with a word when there are none (a page that sets
    the cube up itself, or reads only saved results, passes False and gets no cube)."""
    db = default_db_path()
    ws = cache.workspace(db)
    mine = SessionSettings(ws, session_id())
    try:
        session.touch(ws, mine.session_id)  # and the rows of sessions long gone expire
    except ValueError as exc:  # a bad $HEADROOM_SESSION_DAYS: say so, expire nothing
        st.sidebar.warning(md(exc))
    st.sidebar.caption(SHARED_NOTE)
    st.title(title)
    if not needs_paths:
        return Page(db, ws, mine, None, [])
    try:
        ref = cache.current_cube(db, mine)
    except ValueError as exc:  # a live pull that cannot make this cube (its window, path labels, or files beside it)
        st.error(f"{md(str(exc))}. Choose the datasets and the window on the Data page.")
        st.stop()
    paths = cache.request_paths(db, ref) if ref else []
    if not paths:
        st.info("No path with request histograms yet: load an export on the Data page.")
        st.stop()
    return Page(db, ws, mine, ref, paths)

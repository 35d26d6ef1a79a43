"""The workspace every page test runs on: a copy of a template that opened on the slice of the bundled
day (``tests/support/pages.py``), the way the dashboard opens an empty workspace (``HEADROOM_SAMPLE``);
the user's workspace is never touched. Streamlit caches are cleared around every test (AppTest runs
every instance under one session id, so caches would leak between tests)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1.util import patch_config_options

from app import cube
from app.store import Workspace
from app.ui import data as data_view
from tests.support.pages import make_slice


@pytest.fixture(scope="session")
def sample_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_slice(tmp_path_factory.mktemp("slice") / "metrics-11h30-12h30.parquet")


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory, sample_slice: Path) -> Path:
    """A workspace that opened on the slice and built its default cube."""
    path = tmp_path_factory.mktemp("template") / "workspace.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(data_view.SAMPLE_ENV, str(sample_slice))
        with Workspace(path) as ws:
            assert data_view.ensure_sample_loaded(ws).status == "loaded"
            cube.ensure_cube(ws, ws.dataset_ids(), data_view.DEFAULT_WINDOW_S, ws.path_labels())
    return path


@pytest.fixture(autouse=True)
def workspace_db(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, template_db: Path,
                 sample_slice: Path) -> Iterator[Path]:
    db = tmp_path / "workspace.duckdb"
    shutil.copy(template_db, db)
    monkeypatch.setenv("HEADROOM_DB", str(db))
    monkeypatch.setenv(data_view.SAMPLE_ENV, str(sample_slice))
    st.cache_data.clear()
    st.cache_resource.clear()
    # AppTest keeps each widget's format_func (a lambda) in session state for itself, which the
    # project's enforceSerializableSessionState rejects; `assert_picklable` checks our own keys instead
    with patch_config_options({"runner.enforceSerializableSessionState": False}):
        yield db
    st.cache_data.clear()
    st.cache_resource.clear()  # closes the workspace (on_release)

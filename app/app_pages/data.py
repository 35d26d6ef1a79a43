"""Data: upload exports, see what each file held, choose path labels and the window."""

from __future__ import annotations

import streamlit as st

from app import charts, state, ui_cache, ui_data
from app.cube import parse_window
from app.store import default_db_path

db = default_db_path()
ws = ui_cache.workspace(db)

st.title("Data")
st.caption(f"Workspace: `{ws.path}` — set `HEADROOM_DB` or `headroom dashboard --db FILE` to use another.")

with st.form("upload_form", clear_on_submit=True):
    uploads = st.file_uploader(
        "Metric exports (Prometheus text or OpenMetrics, Prometheus API JSON, VictoriaMetrics export, "
        "promtool dump, long CSV/Parquet, AIPerf server metrics; gzip ok)",
        accept_multiple_files=True, key=state.UPLOADS,
    )
    submitted = st.form_submit_button("Load")
if submitted and uploads:
    st.session_state[state.LAST_REPORTS] = ui_data.report_rows(ui_data.load_uploads(ws, uploads))
if state.LAST_REPORTS in st.session_state:
    st.subheader("Last load")
    st.dataframe(st.session_state[state.LAST_REPORTS], hide_index=True)

st.subheader("Datasets")
datasets = ws.datasets()
st.dataframe(datasets, hide_index=True, key="datasets_table")
if datasets.empty:
    st.info("No data yet: upload an export above, or run `headroom load FILE` on the command line.")
    st.stop()

st.session_state.setdefault(state.WINDOW, "5m")
st.session_state.setdefault(state.PATH_LABELS, ",".join(ws.path_labels()))
left, right = st.columns(2)
window_text = left.text_input("Window (1m … 1d)", key=state.WINDOW)
labels_text = right.text_input("Path labels (comma-separated; a path is the values of these labels)",
                               key=state.PATH_LABELS)
try:
    window_s = parse_window(window_text)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
labels = tuple(s.strip() for s in labels_text.split(",") if s.strip()) or ("model_name",)
cube = ui_cache.cube_id(db, tuple(ws.dataset_ids()), window_s, labels, tuple(ws.path_rules()))
traffic = ui_cache.requests_per_window(db, cube)
st.plotly_chart(charts.requests_over_time(traffic, window_s), key="requests_chart")

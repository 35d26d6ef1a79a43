"""Headroom dashboard entry point: page config, navigation, and the server time each rerun took."""

from __future__ import annotations

import time

import streamlit as st

started = time.perf_counter()
st.set_page_config(page_title="Headroom", page_icon=":material/speed:", layout="wide")

# the two pages whose files are named as their titles keep the addresses they had (/model, /sets)
pages = [
    st.Page("app_pages/data.py", title="Data", icon=":material/database:", default=True),
    st.Page("app_pages/promise.py", title="Promise", icon=":material/handshake:"),
    st.Page("app_pages/economics.py", title="Economics", icon=":material/payments:"),
    st.Page("app_pages/capacity_model.py", title="Capacity model", icon=":material/memory:", url_path="model"),
    st.Page("app_pages/tail.py", title="Tail", icon=":material/troubleshoot:"),
    st.Page("app_pages/scenario_sets.py", title="Scenario sets", icon=":material/compare:", url_path="sets"),
]
timing = st.sidebar.empty()
try:
    st.navigation(pages).run()
finally:
    # people check the "milliseconds" claim: this is the whole rerun on the server, queries included
    elapsed_ms = 1000 * (time.perf_counter() - started)
    timing.caption(f"Last interaction: {elapsed_ms:,.0f} ms on the server")

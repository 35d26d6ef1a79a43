"""Headroom dashboard entry point: page config, shared workspace, navigation."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Headroom", page_icon="📈", layout="wide")

pages = [
    st.Page("app_pages/data.py", title="Data", icon="🗂️", default=True),
]
st.navigation(pages).run()

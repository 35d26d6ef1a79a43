"""Empty cells in the dashboard's tables read "—", never None/nan (``app/ui/tables.py``); the Promise page's
"joint exact %" without per-request records is the case the issue names (``tests/app_pages/test_pages.py``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from app.ui import promise as promise_view
from app.ui import tables


def test_a_cell_is_written_with_its_number_columns_format() -> None:
    assert tables.write(None) == tables.EMPTY
    assert tables.write(float("nan"), "%.3f %%") == tables.EMPTY
    assert tables.write(pd.NaT) == tables.EMPTY
    assert tables.write(5.6789, "%.3f %%") == "5.679 %"
    assert tables.write(1234567.4, "$%,.0f") == "$1,234,567"
    assert tables.write(41.6, "%d") == "42"
    assert tables.write(0.25) == "0.25"
    assert tables.write("chat") == "chat"
    assert tables.write(True) == "True"


def test_only_columns_with_a_missing_value_become_text() -> None:
    frame = pd.DataFrame({"path": ["a", "b"], "share %": [1.5, np.nan], "requests": [10, 20],
                          "exact %": [None, None], "snapshot": [True, None]})
    pct = st.column_config.NumberColumn(format="%.2f %%")
    config = {"share %": pct, "exact %": pct, "requests": st.column_config.NumberColumn("count", format="%d"),
              "snapshot": st.column_config.CheckboxColumn("single")}
    view, left = tables.shown(frame, config)
    assert list(view["share %"]) == ["1.50 %", tables.EMPTY]
    assert list(view["exact %"]) == [tables.EMPTY, tables.EMPTY]
    assert view["requests"].tolist() == [10, 20] and left["requests"] == config["requests"]  # still numbers
    assert "share %" not in left and "exact %" not in left  # their number format was applied here
    assert view["snapshot"].tolist()[0] is True and left["snapshot"] == config["snapshot"]  # Streamlit's own
    assert frame["share %"].isna().iloc[1]  # the input is not changed


def test_the_promise_summary_without_records_shows_a_dash_for_the_exact_joint_share() -> None:
    frame = pd.DataFrame([{
        "path": "chat", "requests": 1000.0, "failed_requests": 0.0, "finished_requests": 1000.0,
        "ttft_threshold_s": 0.5, "ttft_share": 0.05, "ttft_low": 0.05, "ttft_high": 0.05, "ttft_exact": True,
        "tpot_threshold_s": 0.05, "tpot_share": 0.03, "tpot_low": 0.03, "tpot_high": 0.03, "tpot_exact": True,
        "tpot_basis": "requests", "e2e_threshold_s": None, "e2e_share": None, "e2e_low": None, "e2e_high": None,
        "e2e_exact": None, "queue_threshold_s": None, "queue_share": None, "queue_low": None, "queue_high": None,
        "queue_exact": None, "failed_share": 0.0, "joint_low": 0.05, "joint_high": 0.08, "target": 0.99}])
    summary, _ = promise_view.promise_tables(frame, {})
    assert summary["joint exact %"].isna().all() or (summary["joint exact %"] == None).all()  # noqa: E711
    view, _ = tables.shown(summary, {c: st.column_config.NumberColumn(format="%.3f %%")
                                     for c in summary.columns if c.endswith("%")})
    assert view["joint exact %"].tolist() == [tables.EMPTY]
    cells = [str(v) for v in view.to_numpy().ravel()]
    assert not {"None", "nan", "NaN", "NaT", "<NA>"} & set(cells)
    assert not any(isinstance(v, float) and math.isnan(v) for v in view.to_numpy().ravel())

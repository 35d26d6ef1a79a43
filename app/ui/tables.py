"""Tables as the pages show them: an empty cell reads "—", never ``None``, ``nan`` or ``NaT``.

``st.dataframe`` writes a missing value as "None" (the Promise page's "joint exact %" without
per-request records). :func:`shown` turns every column that holds a missing value into text: its
numbers written with the column's own ``NumberColumn`` format, its missing cells :data:`EMPTY`.
Columns without a missing value stay numbers (sortable, formatted by Streamlit as before).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

EMPTY = "—"
_PRINTF = re.compile(r"^(?P<pre>[^%]*)%(?P<comma>,?)(?P<prec>\.\d+)?(?P<kind>[dfgei])(?P<post>.*)$")


def missing(value: Any) -> bool:
    if value is None or value is pd.NaT:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array in a cell
        return False


def write(value: Any, fmt: str | None = None) -> str:
    """One cell as text: :data:`EMPTY` when missing; a number through the printf-style ``fmt`` that
    Streamlit's ``NumberColumn`` takes (``%d``, ``%.3f %%``, ``$%,.0f``), else as Python writes it."""
    if missing(value):
        return EMPTY
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    match = _PRINTF.match(fmt or "")
    if match is None:
        return f"{value:g}" if isinstance(value, float) and math.isfinite(value) else str(value)
    kind = "d" if match["kind"] == "i" else match["kind"]
    number = round(value) if kind == "d" else value
    spec = f"{match['comma']}{match['prec'] or ''}{kind}"
    post = match["post"].replace("%%", "%")
    return f"{match['pre']}{format(number, spec)}{post}"


def _format(config: Any) -> tuple[str | None, str | None] | None:
    """(format, label) of a number column's config; None for any other kind of column."""
    if config is None:
        return None, None
    if isinstance(config, str):  # a bare label
        return None, config
    type_config = config.get("type_config") or {}
    if type_config.get("type") != "number":
        return None
    return type_config.get("format"), config.get("label")


def shown(frame: Any, column_config: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``frame`` (a DataFrame, or records) with each column holding a missing value written as text (see
    the module docstring), and the column config left for the columns still numbers (a text column keeps
    its label)."""
    config = dict(column_config or {})
    frame = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
    out = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if not any(missing(v) for v in values):
            continue
        fmt_label = _format(config.get(column))
        if fmt_label is None:  # a checkbox, link or progress column: Streamlit shows those itself
            continue
        fmt, label = fmt_label
        out[column] = [write(v, fmt) for v in values]
        config[column] = st.column_config.TextColumn(label) if label else None
        if config[column] is None:
            del config[column]
    return out, config


def dataframe(frame: Any, column_config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """``st.dataframe`` of :func:`shown`."""
    view, config = shown(frame, column_config)
    return st.dataframe(view, column_config=config or None, **kwargs)

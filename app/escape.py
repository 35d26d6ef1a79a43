"""Text from the data (label values, path names, file and set names) made safe for where it is written:
shown as typed, never run — a CSV cell no spreadsheet reads as a formula, Markdown (an export's table,
a page's ``st.markdown``/``st.success``/widget label) that renders as the literal text, a Plotly label
that is neither markup nor a hover template, and control characters made visible everywhere.

Every writer of user text goes through here (``tests/test_escape.py`` holds the rules; the CSV and
Markdown writers of ``headroom cube|report|scenarios`` and the dashboard's pages call these).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# OWASP "CSV Injection": a cell starting with one of these is a formula in Excel, LibreOffice or
# Google Sheets (tab and CR too: some importers strip them and read what follows)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _is_hidden(ch: str) -> bool:
    """Control characters (C0, DEL, C1) and the invisible format characters that reorder or hide text
    (bidi overrides, zero-width: the "Trojan source" characters)."""
    category = unicodedata.category(ch)
    return category == "Cc" or (category == "Cf" and ch not in "\u00ad")


def visible(text: Any) -> str:
    """``text`` with every control or invisible format character written as an escape (``\\n``,
    ``\\x1b``, ``\\u202e``): one line, nothing hidden, nothing a terminal or a renderer acts on."""
    s = str(text)
    if not any(_is_hidden(ch) for ch in s):
        return s
    out = []
    for ch in s:
        if not _is_hidden(ch):
            out.append(ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_cell(value: Any) -> Any:
    """A CSV cell: non-text values unchanged; text made ``visible`` and, when it would start a formula,
    prefixed with ``'`` (OWASP). Numbers written as text (``-1.5``, ``+Inf``) stay as they are: no
    function can hide in what ``float`` parses."""
    if not isinstance(value, str):
        return value
    shown = visible(value)
    if value.startswith(FORMULA_PREFIXES) and not _is_number(value):
        return "'" + shown
    return shown


def csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every cell of a ``csv.DictWriter`` row through ``csv_cell`` (None written as an empty cell)."""
    return {k: ("" if v is None else csv_cell(v)) for k, v in row.items()}


# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that start markup in
# CommonMark, GFM (tables, strikethrough, autolinks) or Streamlit's dialect (``:red[...]`` directives,
# ``:material/icon:``, ``$`` maths); ``<`` and ``&`` too, so no HTML tag or entity survives
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~$:&])")
# at the start of a line these begin a list, a heading or a rule (``- x``, ``1. x``, ``---``, ``===``)
_LIST_START = re.compile(r"^(\d+)([.)])")


def md(text: Any) -> str:
    """Text for Markdown (an export's table cell or line, Streamlit's markdown, alerts and widget
    labels): rendered as exactly what it says — no emphasis, link, image, HTML, table break or maths."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text))
    if escaped[:1] in ("-", "="):
        return "\\" + escaped
    return _LIST_START.sub(r"\1\\\2", escaped, count=1)


def plotly_text(text: Any) -> str:
    """Text for a Plotly trace name, axis tick or hover template: its pseudo-HTML (``<b>``, ``<a>``,
    ``<br>``) as entities and ``%`` as ``&#37;``, so ``%{x}`` in a path name is not a template field."""
    s = visible(text)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("%", "&#37;")

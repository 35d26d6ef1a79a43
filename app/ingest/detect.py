"""Decide a file's format from its content (first and last KBs), never from its name.

Rules, in order (the file is already decompressed if it was gzip):

1. ``PAR1`` magic → Parquet.
2. First non-blank character ``{`` followed by a label name (``{__name__="x", ...} v ts``) → promtool dump.
3. JSON (first non-blank character ``{`` or ``[`` followed by ``"``/``{``/``[``/``]``):
   an object with ``timestamp_ns`` and ``metrics`` → AIPerf server metrics;
   ``metric`` + ``values`` + ``timestamps`` on one line → VictoriaMetrics export;
   ``status``/``data``/``resultType`` → Prometheus HTTP API.
4. A first line that splits into cells naming a ``value`` column and a time, metric or labels column → CSV.
5. ``# HELP``/``# TYPE`` lines or ``name{...} value`` lines → text exposition; OpenMetrics if a
   ``# EOF``/``# UNIT`` line or an OpenMetrics-only type appears (the text reader re-checks the whole file).
"""

from __future__ import annotations

import json
import re

from app.ingest.base import FORMATS, Source, fail

HEAD_BYTES = 65536
TAIL_BYTES = 4096

TS_COLUMNS = ("timestamp", "ts", "time")
METRIC_COLUMNS = ("metric", "__name__", "name", "metric_name")
VALUE_COLUMNS = ("value",)

_PROMTOOL_RE = re.compile(r'^\{\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*"')
# a sample line: a name then `{` (labels), or a name then a number-like value
_SAMPLE_RE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(?:[ \t]*\{|[ \t]+[-+]?(?:[0-9.]|Inf|inf|NaN|nan))")
_COMMENT_RE = re.compile(r"^#\s*(HELP|TYPE|UNIT|EOF)\b")
_OM_RE = re.compile(r"^# (EOF\s*$|UNIT |TYPE \S+ (info|stateset|gaugehistogram|unknown)\s*$)", re.M)


def _first_lines(text: str, n: int = 200) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()][:n]


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_kind(text: str) -> str | None:
    """Which JSON export ``text`` (the head of the file) looks like."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    try:  # a JSON-lines file: its first line is a whole object
        obj = json.loads(first)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        if "timestamp_ns" in obj and "metrics" in obj:
            return "aiperf-server-metrics"
        if {"metric", "values", "timestamps"} <= obj.keys():
            return "victoriametrics-jsonl"
        if "status" in obj or "data" in obj:
            return "prometheus-api-json"
    # a pretty-printed or large document: look for its keys in the head
    if re.search(r'"timestamp_ns"\s*:', text) and re.search(r'"metrics"\s*:', text):
        return "aiperf-server-metrics"
    if re.search(r'"status"\s*:\s*"(success|error)"', text) or re.search(r'"resultType"\s*:', text):
        return "prometheus-api-json"
    if text.lstrip().startswith("[") and re.search(r'"metric"\s*:\s*\{', text) and re.search(
        r'"values?"\s*:\s*\[', text
    ):  # a bare `result` list, as prometheus-api-client returns it
        return "prometheus-api-json"
    if re.search(r'"timestamps"\s*:\s*\[', text) and re.search(r'"metric"\s*:\s*\{', text):
        return "victoriametrics-jsonl"
    # a VictoriaMetrics series longer than the head: its "timestamps" come after the values
    if re.match(r'\s*\{\s*"metric"\s*:\s*\{[^{}]*\}\s*,\s*"values"\s*:\s*\[', text):
        return "victoriametrics-jsonl"
    return None


def csv_columns(first_line: str) -> list[str] | None:
    """Cells of a CSV header line (``,``, ``;``, tab or ``|`` separated), unquoted; None if one cell."""
    line = first_line.strip().lstrip("\ufeff")
    for delim in (",", ";", "\t", "|"):
        if delim in line:
            return [c.strip().strip('"').strip() for c in line.split(delim)]
    return None


def _csv_kind(lines: list[str]) -> str | None:
    if not lines:
        return None
    header = lines[1] if lines[0].lower().startswith("sep=") and len(lines) > 1 else lines[0]
    cells = csv_columns(header)
    if not cells:
        return None
    lower = {c.lower() for c in cells}
    if lower & set(VALUE_COLUMNS) and lower & {*TS_COLUMNS, *METRIC_COLUMNS, "labels"}:
        return "csv"
    return None


def _refuse_wide_csv(src: Source, lines: list[str]) -> None:
    """A CSV with a time column but no value column cannot be read: say why."""
    cells = csv_columns(lines[0]) if lines else None
    if not cells or not {c.lower() for c in cells} & set(TS_COLUMNS):
        return
    shown = ", ".join(cells[:6]) + ("…" if len(cells) > 6 else "")
    if {c.lower() for c in cells} & {*METRIC_COLUMNS, "labels"}:
        raise fail(src, f"CSV with columns {shown} has no `value` column: expected long format: timestamp, "
                        "metric, labels and/or one column per label, value")
    raise fail(src, f"CSV with columns {shown} has a time column but no `value` column: one column per series "
                    "(e.g. Grafana's \"series joined by time\") cannot be read; export long format: timestamp, "
                    "metric, labels and/or one column per label, value")


def detect(src: Source) -> str:
    """The format of ``src`` (one of ``app.ingest.base.FORMATS``); raise ``IngestError`` if unknown."""
    head = src.head(HEAD_BYTES)
    if not head.strip():
        raise fail(src, "the file is empty")
    if head[:4] == b"PAR1":
        return "parquet"
    size = src.path.stat().st_size
    if size > HEAD_BYTES:
        with src.path.open("rb") as fh:
            fh.seek(max(size - TAIL_BYTES, 0))
            tail = fh.read().decode("utf-8", "replace")
    else:
        tail = ""
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    if len(head) == HEAD_BYTES:  # drop a partial last line
        text = text[: text.rfind("\n") + 1] or text
    lines = _first_lines(text)
    first = lines[0] if lines else ""
    if _PROMTOOL_RE.match(first):
        return "promtool-dump"
    if re.match(r"^[\[{]\s*[\"{\[\]]", first) or first in ("{", "["):
        kind = _json_kind(text)
        if kind:
            return kind
    if not first.startswith("#") and not _SAMPLE_RE.match(first):
        kind = _csv_kind(lines)
        if kind:
            return kind
        _refuse_wide_csv(src, lines)
    if any(_COMMENT_RE.match(ln) or _SAMPLE_RE.match(ln) for ln in lines):
        return "openmetrics" if _OM_RE.search(text) or _OM_RE.search(tail) else "prometheus-text"
    if "\x00" in text or "\ufffd" in text[:200]:
        looks = "binary data (not text, JSON, CSV or Parquet)"
    else:
        looks = f"its first line is {_shorten(first)!r}"
    raise fail(
        src,
        f"unrecognised format: {looks}. Supported: Prometheus text exposition or OpenMetrics "
        "(`name{labels} value [timestamp]`), Prometheus API JSON (query/query_range), VictoriaMetrics "
        "export JSON lines, promtool tsdb dump, long-format CSV/Parquet (timestamp, metric, labels, value), "
        "AIPerf server_metrics_export.jsonl; any of them gzip-compressed",
    )


__all__ = ["FORMATS", "METRIC_COLUMNS", "TS_COLUMNS", "VALUE_COLUMNS", "csv_columns", "detect"]

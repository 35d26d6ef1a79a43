"""Samples of an exposition as multisets of (name, sorted labels, value, timestamp in µs or None): ours
(what a reader stages) and prometheus_client's parsers', with their documented differences undone (its
0.0.4 parser renames a ``# TYPE x counter`` family's samples to ``x_total``; we keep names as exposed)."""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from pathlib import Path

import duckdb
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from app.ingest import open_source, stage
from app.ingest.base import Staged

SENTINEL_MTIME = 978307200  # 2001-01-01: marks "no timestamp" on our side
Sample = tuple[str, tuple[tuple[str, str], ...], object, int | None]


def sample_value(v: float) -> object:
    """A sample value as compared: NaN as a string (NaN equals nothing, not even itself)."""
    return "NaN" if math.isnan(v) else float(v)


def staged(path: Path) -> tuple[Counter[Sample], Staged]:
    """Our samples of a file; samples that took the file's mtime count as having no timestamp."""
    os.utime(path, (SENTINEL_MTIME, SENTINEL_MTIME))
    con = duckdb.connect()
    with open_source(path) as src:
        info = stage(con, src, check=False)  # what the reader parsed, before the checks
    rows = con.execute(
        "select k.metric, map_entries(k.labels), p.value, epoch_us(p.ts) "
        "from stage_points as p join stage_keys as k using (series_key)"
    ).fetchall()
    out: Counter[Sample] = Counter()
    for metric, entries, value, us in rows:
        labels = tuple(sorted((e["key"], e["value"]) for e in entries))
        out[(metric, labels, sample_value(value), None if us == SENTINEL_MTIME * 1_000_000 else us)] += 1
    return out, info


def reference_text(text: str) -> Counter[Sample]:
    """prometheus_client 0.0.4 parser's samples, with its counter renaming undone."""
    renamed = {m.group(1) for m in re.finditer(r"^\s*#\s+TYPE\s+(\S+)\s+counter\s*$", text, re.M)
               if not m.group(1).endswith("_total")}
    out: Counter[Sample] = Counter()
    for family in text_families(text):
        for s in family.samples:
            name = s.name
            if family.type == "counter" and family.name in renamed and name == family.name + "_total":
                name = family.name
            ts = None if s.timestamp is None else round(s.timestamp * 1000) * 1000
            out[(name, tuple(sorted(s.labels.items())), sample_value(s.value), ts)] += 1
    return out


def reference_openmetrics(text: str) -> Counter[Sample]:
    out: Counter[Sample] = Counter()
    for family in om_families(text):
        for s in family.samples:
            ts = s.timestamp
            us = None if ts is None else (ts.sec * 1_000_000 + ts.nsec // 1000 if hasattr(ts, "sec")
                                          else round(ts * 1_000_000))
            out[(s.name, tuple(sorted(s.labels.items())), sample_value(s.value), us)] += 1
    return out

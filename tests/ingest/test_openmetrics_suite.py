"""The OpenMetrics project's parser test suite (tests/fixtures/real/openmetrics-parsers, SOURCES.md
there): each valid case loads with exactly the samples of the reference parser
(``prometheus_client.openmetrics.parser``), NaN and infinite values and repeated timestamps included;
each case that both the OpenMetrics and the Prometheus text grammar reject is refused with a message;
no case crashes a load.

Samples are compared as multisets of (name, sorted labels, value, time in µs). The samples the load
keeps apart from the cube (``skipped_samples``: NaN, infinities, a time no timestamp holds) count as
loaded; a time no timestamp holds (outside the years 1 to 9999) is stored as NULL and matches a
reference time outside that range.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families as text_families

from app import load
from app.load import INTERNAL_ERROR
from app.store import Workspace
from tests.support.exposition import SENTINEL_MTIME, reference_openmetrics, sample_value
from tests.support.paths import REAL

SUITE = REAL / "openmetrics-parsers"
CASES = sorted(p.name for p in SUITE.iterdir() if p.is_dir())
VALID = [c for c in CASES if json.loads((SUITE / c / "test.json").read_text())["shouldParse"]]
UNREPRESENTABLE = "unrepresentable"  # a time outside the years 1 to 9999
_MAX_US = 253402300799 * 10**6


def _text_grammar_rejects(text: str) -> bool:
    try:
        list(text_families(text))
    except Exception:  # the reference parser raises ValueError and others
        return True
    return False


BAD_IN_BOTH = [c for c in CASES if c not in VALID
               and _text_grammar_rejects((SUITE / c / "metrics").read_bytes().decode("utf-8", "replace"))]


def _load(case: str, tmp_path: Path) -> tuple[load.LoadReport, Counter]:
    path = shutil.copy(SUITE / case / "metrics", tmp_path / "metrics")
    os.utime(path, (SENTINEL_MTIME, SENTINEL_MTIME))  # marks the samples that carry no timestamp
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, Path(path))
        rows = ws.con.execute(
            "select s.metric, map_entries(s.labels), p.value, epoch_us(p.ts) from (select series_id, ts, value "
            "from samples union all select series_id, ts, value from skipped_samples) as p "
            "join series as s using (series_id)").fetchall() if report.status == "loaded" else []
    ours: Counter = Counter()
    for metric, entries, value, us in rows:
        when = UNREPRESENTABLE if us is None else None if us == SENTINEL_MTIME * 10**6 else us
        ours[(metric, tuple(sorted((e["key"], e["value"]) for e in entries)), sample_value(value), when)] += 1
    return report, ours


def _reference(case: str) -> Counter:
    out: Counter = Counter()
    for (name, labels, value, us), n in reference_openmetrics((SUITE / case / "metrics").read_text()).items():
        when = UNREPRESENTABLE if us is not None and not -62135596800 * 10**6 <= us <= _MAX_US else us
        out[(name, labels, value, when)] += n
    return out


def test_the_suite_is_whole() -> None:
    assert (len(CASES), len(VALID), len(BAD_IN_BOTH)) == (211, 44, 50)


@pytest.mark.parametrize("case", VALID)
def test_valid_case_loads_exactly(case: str, tmp_path: Path) -> None:
    report, ours = _load(case, tmp_path)
    assert report.status == "loaded", report.errors
    assert ours == _reference(case)


@pytest.mark.parametrize("case", BAD_IN_BOTH)
def test_case_both_grammars_reject_is_refused(case: str, tmp_path: Path) -> None:
    report, _ = _load(case, tmp_path)
    assert report.status == "failed", report.notes
    assert report.errors and INTERNAL_ERROR not in report.errors[0]
    assert "Error:" not in report.errors[0]  # our words, not a database's


@pytest.mark.parametrize("case", [c for c in CASES if c not in VALID and c not in BAD_IN_BOTH])
def test_no_case_crashes_a_load(case: str, tmp_path: Path) -> None:
    """The cases only the OpenMetrics grammar rejects may load as Prometheus text; none may crash."""
    report, _ = _load(case, tmp_path)
    assert report.status in ("loaded", "failed")
    assert not any(INTERNAL_ERROR in e for e in report.errors), report.errors


def test_repeated_timestamps_keep_the_first(tmp_path: Path) -> None:
    """duplicate_timestamps_1: five samples at time 0, the first of each series kept (spec and reference)."""
    report, ours = _load("duplicate_timestamps_1", tmp_path)
    assert sorted(ours) == [("a", (("a", "1"), ("foo", "bar")), 1.0, 0), ("a", (("a", "2"), ("foo", "bar")), 4.0, 0)]
    assert any("repeat a series at a timestamp" in n for n in report.notes)


def test_nan_gauge_is_kept_and_counted(tmp_path: Path) -> None:
    report, ours = _load("nan_gauge", tmp_path)
    assert report.status == "loaded" and report.samples == 0
    assert list(ours) == [("a", (), "NaN", None)]
    assert any(n.startswith("kept 1 sample(s) with a NaN or infinite value apart") for n in report.notes)

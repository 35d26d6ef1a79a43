"""The DuckDB text parser yields exactly the samples prometheus_client's parsers yield.

Compared as multisets of (name, sorted labels, value, timestamp in µs or None). Two documented
differences are undone on prometheus_client's side: its 0.0.4 parser renames the samples of a
`# TYPE x counter` family to `x_total` (we keep names as exposed), and it refuses the `...` lines of
an abbreviated paste (we skip them with a note).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.ingest.base import Staged
from tests.support import export_formats as ef
from tests.support.exposition import Sample, reference_openmetrics, reference_text, staged
from tests.support.paths import REAL

REAL_CAPTURES = sorted(REAL.glob("*.prom"))
# -- real captures ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", REAL_CAPTURES, ids=lambda p: p.name)
def test_real_capture_samples_equal_prometheus_client(path: Path, tmp_path: Path) -> None:
    text = path.read_text()
    copy = tmp_path / path.name
    copy.write_text(text)
    ours, info = staged(copy)
    # prometheus_client refuses the `...` lines of the abbreviated docs paste; we skip them (noted)
    reference = reference_text("\n".join(ln for ln in text.split("\n") if ln.strip() != "..."))
    assert ours == reference
    assert sum(ours.values()) > 0 and info.format == "prometheus-text"


# -- generated 0.0.4 expositions -------------------------------------------------------------------
NAMES = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,8}", fullmatch=True)
LABEL_NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: not n.startswith("__"))  # prometheus_client reserves the `__` prefix
# label values: escapes (\\ \" \n), spaces, commas, braces, '=', '#', non-ASCII
LABEL_VALUES = st.text(alphabet=st.sampled_from(list('ab Z09\\"\n,{}=#.-_é€ ')), max_size=8)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
VALUE_TEXT = st.one_of(
    FLOATS.map(lambda v: ef.format_value(v)),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "1e3", "1E-3", "-0", ".5", "5.", "+1.5", "0.001"]),
)
TIMESTAMPS = st.one_of(st.none(), st.integers(1_500_000_000_000, 2_000_000_000_000))
COMMENTS = st.text(alphabet=st.sampled_from(list("abcXYZ  ,.{}")), max_size=12).map(
    lambda t: "# note " + t
)


@st.composite
def exposition(draw) -> tuple[str, str]:
    """A random 0.0.4 exposition and its line ending."""
    lines: list[str] = []
    untimed: set[tuple] = set()
    # each family is declared once (a second, different TYPE for one family makes prometheus_client
    # rename that family's samples in ways no exporter produces)
    families = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    assume(not any(a != b and a.startswith(b) for a in families for b in families))  # no x and x_total
    for family in families:
        mtype = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", None]))
        if draw(st.booleans()):
            help_text = draw(st.text(alphabet=st.sampled_from(list("ab \\n\"")), max_size=10))
            lines.append(f"# HELP {family} {help_text}")
        if mtype:
            lines.append(f"# TYPE {family} {mtype}")
        for _ in range(draw(st.integers(0, 5))):
            suffix = draw(st.sampled_from(["", "", "_total", "_bucket", "_sum", "_count"]))
            name = family + suffix
            labels = draw(st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=4))
            items = list(labels.items())
            order = draw(st.permutations(items)) if items else []
            ts = draw(TIMESTAMPS)
            if ts is None:
                identity = (name, tuple(sorted(labels.items())))
                assume(identity not in untimed)  # one snapshot: a series at most once
                untimed.add(identity)
            sep = draw(st.sampled_from([" ", " ", "  ", "\t"]))
            if order or draw(st.booleans()):
                body = ", " if draw(st.booleans()) else ","
                label_text = body.join(f'{k}="{ef.escape_label(v)}"' for k, v in order)
                key = f"{name}{{{label_text}{',' if order and draw(st.booleans()) else ''}}}"
            else:
                key = name
            line = f"{key}{sep}{draw(VALUE_TEXT)}" + (f"{sep}{ts}" if ts is not None else "")
            line += draw(st.sampled_from(["", "", " ", "\t "]))  # trailing whitespace
            lines.append(line)
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "   ", draw(COMMENTS)])))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + draw(st.sampled_from(["", newline])), newline


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(exposition())
def test_generated_text_samples_equal_prometheus_client(tmp_path_factory, generated) -> None:
    text, _ = generated
    reference = reference_text(text)
    assume(sum(reference.values()) > 0)
    path = tmp_path_factory.mktemp("gen") / "metrics.prom"
    path.write_bytes(text.encode())
    ours, info = staged(path)
    assert ours == reference
    assert info.format == "prometheus-text"


# -- generated OpenMetrics -------------------------------------------------------------------------
@st.composite
def om_frame(draw) -> pd.DataFrame:
    """Counters and gauges with several timestamps, a histogram with one, nasty label values."""
    start = datetime(2026, 11, 29, 10, tzinfo=UTC)
    rows = []
    n_times = draw(st.integers(1, 3))
    steps = [start + timedelta(milliseconds=draw(st.integers(0, 999))) + timedelta(seconds=15 * i)
             for i in range(n_times)]
    for fam_no in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["counter", "gauge"]))
        name = f"m{fam_no}_{kind}" + ("_total" if kind == "counter" else "")
        for labels in draw(st.lists(st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=3), min_size=1,
                                    max_size=2, unique_by=lambda d: tuple(sorted(d.items())))):
            level = 0.0
            for ts in steps:
                if kind == "counter":
                    level += draw(st.integers(0, 10**6))
                    value = level
                else:
                    value = draw(FLOATS)
                rows.append((name, labels, ts, value))
    labels = draw(st.dictionaries(LABEL_NAMES.filter(lambda n: n != "le"), LABEL_VALUES, max_size=2))
    counts = sorted(draw(st.lists(st.integers(0, 1000), min_size=3, max_size=3)))
    for bound, count in zip(["0.1", "1.0", "+Inf"], counts, strict=True):
        rows.append(("h_seconds_bucket", {**labels, "le": bound}, steps[0], float(count)))
    rows.append(("h_seconds_count", labels, steps[0], float(counts[-1])))
    rows.append(("h_seconds_sum", labels, steps[0], draw(st.floats(0, 1e6))))
    return pd.DataFrame(rows, columns=["metric", "labels", "ts", "value"])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(om_frame())
def test_generated_openmetrics_samples_equal_prometheus_client(tmp_path_factory, frame: pd.DataFrame) -> None:
    path = ef.write_openmetrics(frame, tmp_path_factory.mktemp("om") / "metrics.txt")
    text = path.read_text()
    reference = reference_openmetrics(text)
    ours, info = staged(path)
    assert ours == reference
    assert info.format == "openmetrics" and info.time_source == "samples"


# -- specific shapes -------------------------------------------------------------------------------
def _stage_text(tmp_path: Path, text: str | bytes, name: str = "metrics.prom") -> tuple[Counter[Sample], Staged]:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return staged(path)


def test_escapes_and_tricky_label_values(tmp_path: Path) -> None:
    text = ('x{a="q\\\\n\\"",b="c}d, e f",c="{x=\\"1\\"}",d="line\\nbreak"} 1 1764410400000\n'
            'y{} NaN 1764410400000\n'
            'z +Inf 1764410400000\n')
    ours, _ = _stage_text(tmp_path, text)
    us = 1764410400000 * 1000
    assert ours == Counter({
        ("x", (("a", 'q\\n"'), ("b", "c}d, e f"), ("c", '{x="1"}'), ("d", "line\nbreak")), 1.0, us): 1,
        ("y", (), "NaN", us): 1,
        ("z", (), math.inf, us): 1,
    })
    assert ours == reference_text(text)


def test_openmetrics_timestamps_are_seconds_and_counters_keep_total(tmp_path: Path) -> None:
    text = ("# TYPE vllm:prompt_tokens counter\n"
            'vllm:prompt_tokens_total{engine="0"} 5 1764410400.25\n'
            'vllm:prompt_tokens_created{engine="0"} 1764400000.0 1764410400.25\n'
            "# EOF\n")
    ours, info = _stage_text(tmp_path, text)
    assert info.format == "openmetrics"
    assert ("vllm:prompt_tokens_total", (("engine", "0"),), 5.0, 1764410400250000) in ours
    assert ours == reference_openmetrics(text)


@pytest.mark.parametrize("marker", ["# UNIT x_seconds seconds\n", "# TYPE i info\n", "# TYPE s stateset\n"])
def test_openmetrics_detected_without_eof(tmp_path: Path, marker: str) -> None:
    _, info = _stage_text(tmp_path, marker + "x_seconds 1 1764410400\n")
    assert info.format == "openmetrics"


def test_exemplars_are_dropped(tmp_path: Path) -> None:
    text = ("# TYPE h histogram\n"
            'h_bucket{le="0.1"} 8 # {trace_id="KOO5S4vxi0o"} 0.067 1764410399.1\n'
            'h_bucket{le="+Inf"} 9 1764410400 # {trace_id="x}y"} 2\n'
            "h_count 9 1764410400\nh_sum 1.5 1764410400\n# EOF\n")
    ours, info = _stage_text(tmp_path, text)
    assert info.format == "openmetrics"
    assert ("h_bucket", (("le", "0.1"),), 8.0, None) in ours
    assert ("h_bucket", (("le", "+Inf"),), 9.0, 1764410400000000) in ours


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    text = "# TYPE a gauge\r\n\r\na 1\r\n\r\nb{x=\"1\"} 2\r\n"
    ours, _ = _stage_text(tmp_path, text)
    assert set(ours) == {("a", (), 1.0, None), ("b", (("x", "1"),), 2.0, None)}


def test_promtool_dump_with_utf8_and_uppercase_labels(tmp_path: Path) -> None:
    text = ('{UUID="GPU-1", __name__="DCGM_FI_DEV_GPU_UTIL", gpu="0"} 37 1764410400000\n'
            '{__name__="vllm:num_requests_running", engine="0"} 1e+06 1764410415000\n')
    ours, info = _stage_text(tmp_path, text, "dump.txt")
    assert info.format == "promtool-dump"
    assert ours == Counter({
        ("DCGM_FI_DEV_GPU_UTIL", (("UUID", "GPU-1"), ("gpu", "0")), 37.0, 1764410400000000): 1,
        ("vllm:num_requests_running", (("engine", "0"),), 1e6, 1764410415000000): 1,
    })


def test_native_histogram_in_promtool_dump_is_skipped_with_a_note(tmp_path: Path) -> None:
    text = ('{__name__="a"} 1 1764410400000\n'
            '{__name__="nh", job="x"} {count:3, sum:1.5, [-1,1]:2} 1764410400000\n')
    ours, info = _stage_text(tmp_path, text, "dump.txt")
    assert set(ours) == {("a", (), 1.0, 1764410400000000)}
    assert any("native histogram" in n and '{__name__="nh", job="x"}' in n for n in info.notes)


def test_ellipsis_lines_are_skipped_with_a_note(tmp_path: Path) -> None:
    ours, info = _stage_text(tmp_path, "a 1\n...\nb 2\n  ...  \n")
    assert set(ours) == {("a", (), 1.0, None), ("b", (), 2.0, None)}
    assert "skipped 2 line(s) holding only `...` (an abbreviated paste): line(s) 2, 4" in info.notes


def test_metric_names_with_spaces_before_labels_and_no_space_after(tmp_path: Path) -> None:
    text = 'a {x="1"} 1\nb{x="2"}2\nc\t3\t1764410400000\n'
    ours, _ = _stage_text(tmp_path, text)
    assert ours == reference_text(text)
    assert ("c", (), 3.0, 1764410400000000) in ours


def test_millisecond_timestamps_in_openmetrics_are_read_as_ms_with_a_note(tmp_path: Path) -> None:
    ours, info = _stage_text(tmp_path, "a 1 1764410400000\n# EOF\n")
    assert ("a", (), 1.0, 1764410400000000) in ours
    assert any("look like milliseconds" in n for n in info.notes)

"""Bad files fail with an error naming the file, the line (or series) and what is wrong; line
numbers are exact; in a multi-file load the good files still load."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import load
from app.store import Workspace

HEADER = "# HELP x a gauge\n\n# TYPE x gauge\n\n# just a comment\n"  # 5 lines before the samples


def load_error(path: Path) -> str:
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path, display=path.name)
    assert report.status == "failed", report
    assert len(report.errors) == 1
    return report.errors[0]


TEXT_CASES = [
    # (body after HEADER, bad line number, expected message fragment)
    ('x{a="b"} 1\nx{a="c"} abc\n', 7, "value 'abc' is not a number: 'x{a=\"c\"} abc'"),
    ('x{a="b} 1\n', 6, "unterminated label value: 'x{a=\"b} 1'"),
    ('x{a="b" 1\n', 6, "the label set is not closed with `}`"),
    ('x{a="b"}\n', 6, "expected `name{labels} value [timestamp]`: no value after the series"),
    ("x 1 1764410400000 7\n", 6, "unexpected text after the timestamp: 'x 1 1764410400000 7'"),
    ("x 1 soon\n", 6, "timestamp 'soon' is not a number"),
    ('x{a="1",a="2"} 1\n', 6, "label 'a' appears twice"),
    ("x 1\n1x 2\n", 7, "metric name '1x' is not valid: '1x 2'"),
    ("x{a=b} 1\n", 6, 'bad label set: expected name="value" pairs separated by commas'),
    ("x 1_000\n", 6, "value '1_000' is not a number"),
    ("# TYPE y bogus\ny 1\n", 6, "unknown metric type 'bogus': '# TYPE y bogus'"),
    ("# TYPE y\ny 1\n", 6, "TYPE line without a type"),
]


@pytest.mark.parametrize(("body", "line", "fragment"), TEXT_CASES)
def test_malformed_text_line(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.prom"
    path.write_text(HEADER + body)
    error = load_error(path)
    assert error.startswith(f"bad.prom: line {line}: ")
    assert fragment in error


def test_line_numbers_exact_with_crlf_blank_lines_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "crlf.prom"
    path.write_bytes(b"# HELP x h\r\n\r\n\r\n# TYPE x gauge\r\nx 1\r\n\r\n  \r\n# c\r\nx{a=\"2\"} nan?\r\n")
    assert load_error(path).startswith("crlf.prom: line 9: value 'nan?' is not a number")


@pytest.mark.parametrize("in_a_transaction", [True, False])
def test_line_numbers_exact_deep_in_a_large_file(tmp_path: Path, in_a_transaction: bool) -> None:
    """Lines are read in parallel chunks and numbered by their rows' positions (whose ids start
    elsewhere inside a transaction); the numbering must still be the file's."""
    import duckdb

    from app.ingest import IngestError, open_source, stage

    lines = [f'x{{i="{i}"}} {i} 1764410400000' if i % 7 else "" for i in range(300_000)]
    lines[234_567] = 'x{i="bad"} twelve'
    lines[250_001] = 'y{"unterminated} 1'
    path = tmp_path / "big.prom"
    path.write_text("\n".join(lines) + "\n")
    if in_a_transaction:  # as a load runs it
        error = load_error(path)
    else:
        with open_source(path, display=path.name) as src, pytest.raises(IngestError) as caught:
            stage(duckdb.connect(), src)
        error = str(caught.value)
    assert error.startswith("big.prom: line 234568: value 'twelve' is not a number")
    assert "(also bad: line 250002)" in error


def test_many_bad_lines_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "many.prom"
    path.write_text("a 1\n" + "".join(f"b{i} x\n" for i in range(10)))
    error = load_error(path)
    assert error.startswith("many.prom: line 2: value 'x' is not a number")
    assert error.endswith("(also bad: lines 3, 4, 5, 6, 7 and 4 more)")


def test_long_lines_are_shortened_in_messages(tmp_path: Path) -> None:
    path = tmp_path / "long.prom"
    path.write_text('x{a="' + "v" * 500 + '"} nope\n')
    error = load_error(path)
    assert " … " in error and len(error) < 250 and error.endswith("\"} nope'")


@pytest.mark.parametrize(("data", "line", "fragment"), [
    (b"a 1\nb 2\n\xff\xfe 3\n", 3, "not UTF-8 text"),
    (b'a 1\nb{x="1\r"} 2\n', 2, "a carriage return (\\r) inside a line"),
    (b'a 1\n\nb{x="\x01"} 2\n', 3, "a control character (\\x01) inside a line"),
])
def test_bytes_the_line_reader_cannot_take(tmp_path: Path, data: bytes, line: int, fragment: str) -> None:
    path = tmp_path / "bytes.prom"
    path.write_bytes(data)
    error = load_error(path)
    assert error.startswith(f"bytes.prom: line {line}: ") and fragment in error


def test_concatenated_snapshots_without_times(tmp_path: Path) -> None:
    path = tmp_path / "loop.prom"
    snapshot = "# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"2\"} 2\n"
    path.write_text(snapshot + snapshot)
    error = load_error(path)
    assert error.startswith("loop.prom: line 7: a second snapshot starts here")
    assert 'series x{a="1"} already appeared on line 3' in error
    assert "# scrape_time=2026-11-29T10:00:00Z" in error


def test_second_snapshot_after_eof_without_times(tmp_path: Path) -> None:
    path = tmp_path / "eof.txt"
    path.write_text("a 1\n# EOF\nb 2\n# EOF\n")
    assert load_error(path).startswith("eof.txt: line 3: a second snapshot starts here (it follows a `# EOF` line)")


def test_label_order_does_not_hide_a_repeated_series(tmp_path: Path) -> None:
    path = tmp_path / "order.prom"
    path.write_text('x{a="1",b="2"} 1\nx{b="2",a="1"} 2\n')
    assert load_error(path).startswith("order.prom: line 2: a second snapshot starts here")


def test_timestamp_comment_problems(tmp_path: Path) -> None:
    before = tmp_path / "before.prom"
    before.write_text("x 1\n# 2026-11-29T10:00:00Z\ny 2\n")
    assert load_error(before).startswith("before.prom: line 1: this sample has no timestamp and comes before "
                                         "the first timestamp comment (line 2)")
    twice = tmp_path / "twice.prom"
    twice.write_text("# t=2026-11-29T10:00:00Z\nx 1\ny 1\nx 2\n")
    assert load_error(twice).startswith("twice.prom: line 4: series x{} appears again after the timestamp "
                                        "comment on line 1 (first on line 2)")


def test_unrecognised_and_empty_files(tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("Dear diary, today the GPUs were hot.\n")
    error = load_error(odd)
    assert error.startswith("notes.txt: unrecognised format: its first line is 'Dear diary, today the GPUs were hot.'")
    assert "Prometheus text exposition" in error and "Parquet" in error and "AIPerf" in error
    empty = tmp_path / "empty.prom"
    empty.write_text("\n\n")
    assert load_error(empty) == "empty.prom: the file is empty"


def test_prometheus_api_errors(tmp_path: Path) -> None:
    err = tmp_path / "err.json"
    err.write_text(json.dumps({"status": "error", "errorType": "bad_data",
                               "error": 'invalid parameter "query": 1:5: parse error'}))
    assert load_error(err) == 'err.json: the server returned an error: bad_data: invalid parameter "query": 1:5: parse error'
    scalar = tmp_path / "scalar.json"
    scalar.write_text(json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [1, "5"]}}))
    assert "a scalar result holds no series" in load_error(scalar)
    nameless = tmp_path / "agg.json"
    nameless.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "a"}, "values": [[1764410400, "1"]]},
        {"metric": {"le": "0.5"}, "values": [[1764410400, "2"]]}]}}))
    assert load_error(nameless) == ('agg.json: series 2 {le="0.5"}: the series has no metric name (__name__): '
                                    "export raw series, not an aggregation")
    badvalue = tmp_path / "bad.json"
    badvalue.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "a", "x": "1"}, "values": [[1764410400, "many"]]}]}}))
    assert load_error(badvalue) == 'bad.json: series 1 a{x="1"}: a sample is not a [unix_time, "value"] pair of numbers'


def test_victoriametrics_errors(tmp_path: Path) -> None:
    path = tmp_path / "vm.jsonl"
    path.write_text(
        json.dumps({"metric": {"__name__": "a"}, "values": [1], "timestamps": [1764410400000]}) + "\n"
        + json.dumps({"metric": {"__name__": "b", "x": "1"}, "values": [1, 2], "timestamps": [1764410400000]}) + "\n"
        + json.dumps({"metric": {"__name__": "c"}, "values": ["lots"], "timestamps": [1764410400000]}) + "\n"
    )
    assert load_error(path) == 'vm.jsonl: line 2: series b{x="1"}: 2 values but 1 timestamps (also bad: line 3)'


def test_csv_errors(tmp_path: Path) -> None:
    bad = tmp_path / "long.csv"
    bad.write_text("timestamp,metric,model_name,value\n2026-11-29T10:00:00Z,a,m,1\n"
                   "2026-11-29T10:00:15Z,a,m,abc\nyesterday,a,m,2\n")
    assert load_error(bad) == "long.csv: line 3: value 'abc' is not a number (also bad: line 4)"
    labels = tmp_path / "labels.csv"
    labels.write_text('time;metric;labels;value\n1764410400;a;{"x":"1"};1\n1764410415;a;[1];2\n')
    assert load_error(labels) == "labels.csv: line 3: labels '[1]' is not a JSON object"
    wide = tmp_path / "grafana.csv"
    wide.write_text('"Time","P99","P95"\n1735689600000,0.84,0.51\n')
    assert "has a time column but no `value` column" in load_error(wide)
    nameless = tmp_path / "nameless.csv"
    nameless.write_text("timestamp,value\n1764410400,1\n")
    assert load_error(nameless) == ("nameless.csv: no metric-name column (metric, __name__, name or metric_name) "
                                    "among timestamp, value")


def test_parquet_errors(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"ts": [1764410400, 1764410415], "metric": ["a", ""], "value": [1.0, 2.0]}), path)
    assert load_error(path) == "long.parquet: row 2: the metric name is empty"


def test_aiperf_without_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "server_metrics_export.jsonl"
    path.write_text(json.dumps({"endpoint_url": "http://h:1/metrics", "timestamp_ns": 1764410400000000000,
                                "metrics": {"a": [{"value": 1}]}}) + "\n"
                    + json.dumps({"endpoint_url": "http://h:1/metrics", "timestamp_ns": None,
                                  "metrics": {"a": [{"value": 2}]}}) + "\n")
    assert load_error(path) == "server_metrics_export.jsonl: line 2: the record has no timestamp_ns"


def test_good_files_still_load_beside_bad_ones(tmp_path: Path) -> None:
    good = tmp_path / "good.prom"
    good.write_text('vllm:num_requests_running{engine="0",model_name="m"} 3 1764410400000\n')
    bad = tmp_path / "bad.prom"
    bad.write_text("x 1\ny oops\n")
    good_csv = tmp_path / "good.csv"
    good_csv.write_text("timestamp,metric,model_name,value\n2026-11-29T10:00:00Z,vllm:num_requests_waiting,m,2\n")
    with Workspace(":memory:") as ws:
        reports = load.load_files(ws, [good, bad, good_csv, tmp_path / "missing.prom"])
        assert [r.status for r in reports] == ["loaded", "failed", "loaded", "failed"]
        assert reports[1].errors == [f"{bad}: line 2: value 'oops' is not a number: 'y oops'"]
        datasets = ws.datasets()
        assert list(datasets["name"]) == ["good.prom", "good.csv"]
        assert list(datasets["n_samples"]) == [1, 1]


def test_leading_blank_lines_and_byte_order_mark(tmp_path: Path) -> None:
    lead = tmp_path / "lead.prom"
    lead.write_text("\n\n\nx 1\ny abc\n")
    assert load_error(lead).startswith("lead.prom: line 5: value 'abc' is not a number")
    bom = tmp_path / "bom.prom"
    bom.write_bytes(b"\xef\xbb\xbf# TYPE x gauge\nx 1\n\ny oops\n")
    assert load_error(bom).startswith("bom.prom: line 4: value 'oops' is not a number")

"""Long-format CSV and Parquet: column roles, label columns and labels JSON, time units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import load
from app.ingest import open_source, stage
from app.ingest.base import IngestError, Staged

T = 1764410400  # 2025-11-29T10:00:00Z
T_US = T * 10**6


def staged_rows(path: Path) -> tuple[list[tuple], Staged]:
    con = duckdb.connect()
    with open_source(path) as src:
        info = stage(con, src, check=False)  # what the reader parsed, before the checks
    rows = con.execute(
        "select k.metric, map_entries(k.labels), p.value, epoch_us(p.ts), p.src_line "
        "from stage_points p join stage_keys k using (series_key) order by p.src_line"
    ).fetchall()
    return [(m, dict(sorted((e["key"], e["value"]) for e in lab)), v, us, line) for m, lab, v, us, line in rows], info


@pytest.mark.parametrize(("text", "us"), [
    (str(T), T_US),                                 # seconds (~1e9)
    ("1764410400.25", T_US + 250_000),
    (str(T * 1000 + 123), T_US + 123_000),          # milliseconds (~1e12)
    (str(T * 10**6 + 7), T_US + 7),                 # microseconds (~1e15)
    (str(T * 10**9 + 7_000), T_US + 7),             # nanoseconds (~1e18)
    ("2025-11-29T10:00:00Z", T_US),
    ("2025-11-29 10:00:00", T_US),                  # no offset: UTC
    ("2025-11-29T12:00:00+02:00", T_US),
    ("2025-11-29T09:30:00.5-00:30", T_US + 500_000),
    ("2025-11-29", T_US - 10 * 3600 * 10**6),
])
def test_time_units_and_iso_offsets(tmp_path: Path, text: str, us: int) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"ts,metric,value\n{text},a,1\n")
    rows, _ = staged_rows(path)
    assert rows == [("a", {}, 1.0, us, 2)]


def test_label_columns_and_labels_json_merge(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(
        "Time,labels,__name__,model_name,engine,Value\n"
        f'{T},"{{""engine"":""9"",""job"":""vllm"",""empty"":""""}}",vllm:num_requests_running,m1,0,3\n'
        f"{T + 15},,vllm:num_requests_running,m2,,NaN\n"
        f'{T + 30},"{{""__name__"":""ignored"",""x"":""1, {{2}}""}}",b,,,+Inf\n'
    )
    rows, info = staged_rows(path)
    assert rows[0] == ("vllm:num_requests_running", {"engine": "0", "job": "vllm", "model_name": "m1"}, 3.0, T_US, 2)
    assert rows[1][:2] == ("vllm:num_requests_running", {"model_name": "m2"}) and rows[1][2] != rows[1][2]
    assert rows[2][:3] == ("b", {"x": "1, {2}"}, float("inf"))
    assert info.format == "csv"
    assert info.notes == ["columns: time=Time; value=Value; metric=__name__; labels=labels; "
                          "label columns: model_name, engine"]


def test_metric_name_from_the_labels_json(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(f'timestamp;labels;value\n{T};{{"__name__":"a","b":"c"}};2\n')
    rows, _ = staged_rows(path)
    assert rows == [("a", {"b": "c"}, 2.0, T_US, 2)]


def test_grafana_excel_separator_line(tmp_path: Path) -> None:
    path = tmp_path / "grafana.csv"
    path.write_text(f"sep=;\r\ntime;metric;instance;value\r\n{T * 1000};a;h:1;0,5\r\n{T * 1000};b;h:1;2\r\n")
    rows, info = staged_rows(path)  # a decimal comma, as Excel writes it where `;` separates
    assert [r[2] for r in rows] == [0.5, 2.0]
    assert info.notes[-1] == ("1 value(s) written with a decimal comma (a `;`-separated CSV as Excel saves it), "
                              "read as decimal points: e.g. '0,5' on line 3")
    path.write_text(f"sep=;\r\ntime;metric;instance;value\r\n{T * 1000};a;h:1;0.5\r\n")
    rows, _ = staged_rows(path)
    assert rows == [("a", {"instance": "h:1"}, 0.5, T_US, 3)]


def test_parquet_map_labels_and_timestamptz(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({
        "ts": pa.array([datetime(2025, 11, 29, 12, tzinfo=timezone(timedelta(hours=2)))], pa.timestamp("us", tz="+02:00")),
        "metric_name": ["a"],
        "labels": pa.array([[("k", "v"), ("empty", "")]], pa.map_(pa.string(), pa.string())),
        "pod": ["p-1"],
        "value": pa.array([7], pa.int64()),
    }), path)
    rows, info = staged_rows(path)
    assert rows == [("a", {"k": "v", "pod": "p-1"}, 7.0, T_US, 1)]
    assert info.format == "parquet"


def test_parquet_struct_labels_and_naive_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({
        "timestamp": pa.array([datetime(2025, 11, 29, 10)], pa.timestamp("ns")),
        "metric": ["a"],
        "labels": pa.array([{"engine": "0", "le": "0.5"}], pa.struct([("engine", pa.string()), ("le", pa.string())])),
        "value": [1.5],
    }), path)
    rows, _ = staged_rows(path)
    assert rows == [("a", {"engine": "0", "le": "0.5"}, 1.5, T_US, 1)]


def test_parquet_epoch_numbers(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"ts": pa.array([T * 1000], pa.int64()), "metric": ["a"], "value": [1.0]}), path)
    rows, _ = staged_rows(path)
    assert rows == [("a", {}, 1.0, T_US, 1)]


def test_missing_roles(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("timestamp,metric,labels,valeur\n1,a,{},2\n")
    with pytest.raises(IngestError, match="x.csv: CSV with columns timestamp, metric, labels, valeur has no `value` column"):
        staged_rows(path)
    path.write_text("metric,value,labels\na,2,{}\n")
    with pytest.raises(IngestError, match=r"x.csv: no time \(timestamp, ts or time\) column among metric, value, labels"):
        staged_rows(path)


def test_same_series_in_label_columns_and_json_is_one_series(tmp_path: Path) -> None:
    """Series identity in the workspace is the sorted label set, however the file spells it."""
    from app.store import Workspace

    path = tmp_path / "long.csv"
    path.write_text(
        "timestamp,metric,labels,model_name,value\n"
        f'{T},vllm:num_requests_running,"{{""model_name"":""m""}}",,1\n'
        f"{T + 15},vllm:num_requests_running,,m,2\n"
    )
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path)
    assert (report.status, report.series, report.samples) == ("loaded", 1, 2)
    assert report.start == datetime.fromtimestamp(T, UTC).isoformat().replace("+00:00", "Z")


def test_parquet_missing_timestamp_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({
        "timestamp": pa.array([datetime(2025, 11, 29, 10), None], pa.timestamp("us")),
        "metric": ["a", "a"],
        "value": [1.0, 2.0],
    }), path)
    with pytest.raises(IngestError, match="row 2: the time is missing"):
        staged_rows(path)


def test_parquet_missing_value_in_a_typed_file_names_the_row(tmp_path: Path) -> None:
    """A typed file (native times, a DOUBLE value) is read for bad rows only when a cell is NULL:
    its statistics say so (ingest__long_parse_can_fail), and the NULL is still found and named."""
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({
        "timestamp": pa.array([datetime(2025, 11, 29, 10, i, tzinfo=UTC) for i in range(3)], pa.timestamp("ms", "UTC")),
        "metric": ["a", "a", "a"],
        "value": pa.array([1.0, 2.0, None], pa.float64()),
    }), path)
    with pytest.raises(IngestError, match="row 3: value '' is not a number"):
        staged_rows(path)


def test_parquet_with_a_file_row_number_column_keeps_it_as_a_label(tmp_path: Path) -> None:
    """The reader numbers Parquet rows itself unless the file has a column of that name."""
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({
        "timestamp": pa.array([datetime(2025, 11, 29, 10), datetime(2025, 11, 29, 10)], pa.timestamp("us")),
        "metric": ["a", "a"],
        "File_Row_Number": ["7", "9"],
        "value": [1.0, 2.0],
    }), path)
    rows, _ = staged_rows(path)
    assert rows == [("a", {"File_Row_Number": "7"}, 1.0, T_US, 1), ("a", {"File_Row_Number": "9"}, 2.0, T_US, 2)]
    pq.write_table(pa.table({"timestamp": ["2025-11-29T10:00:00Z", "later"], "metric": ["a", "a"],
                             "file_row_number": ["7", "9"], "value": [1.0, 2.0]}), path)
    with pytest.raises(IngestError, match="row 2: time 'later' is neither"):
        staged_rows(path)


def test_parquet_and_csv_files_in_turn_on_one_workspace(tmp_path: Path) -> None:
    """A Parquet file is read through a view, a CSV through a table, under one name: loads in any
    order, a failed one among them, leave each file's own samples and nothing of the failed one."""
    from app.store import Workspace

    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"ts": pa.array([T, T + 15], pa.int64()), "metric": ["p", "p"], "value": [1.0, 2.0]}),
                   good)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"ts": pa.array([T, T + 15], pa.int64()), "metric": ["b", "b"],
                             "value": ["1", "x"]}), bad)
    csv = tmp_path / "c.csv"
    csv.write_text(f"ts,metric,value\n{T},c,3\n{T + 15},c,4\n{T + 30},c,5\n")
    with Workspace(":memory:") as ws:
        reports = load.load_files(ws, [bad, good, csv, bad, tmp_path / "again.parquet"])
        statuses = [r.status for r in reports]
        assert statuses == ["failed", "loaded", "loaded", "failed", "failed"]
        assert reports[0].errors == [f"{bad}: row 2: value 'x' is not a number"]
        good.rename(tmp_path / "again.parquet")
        assert load.load_file(ws, tmp_path / "again.parquet").status == "unchanged"  # the same content
        got = ws.con.execute("select s.metric, count(*), sum(p.value) from samples p join series s using (series_id) "
                             "group by s.metric order by 1").fetchall()
    assert got == [("c", 3, 12.0), ("p", 2, 3.0)]


def test_parquet_row_numbers_deep_in_many_row_groups(tmp_path: Path) -> None:
    """Rows are numbered by Parquet's own row numbers, across row groups read in parallel."""
    n = 50_000
    text = [str(float(i)) for i in range(n)]
    text[43_210] = "n/a"
    text[47_000] = "?"
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"ts": pa.array([T + 15 * i for i in range(n)], pa.int64()), "metric": ["a"] * n,
                             "value": text}), path, row_group_size=1_000)
    with pytest.raises(IngestError, match=r"row 43211: value 'n/a' is not a number \(also bad: row 47001\)"):
        staged_rows(path)
    text[43_210], text[47_000] = "1", "2"
    pq.write_table(pa.table({"ts": pa.array([T + 15 * i for i in range(n)], pa.int64()), "metric": ["a"] * n,
                             "value": text}), path, row_group_size=1_000)
    rows, _ = staged_rows(path)
    assert [r[4] for r in rows] == list(range(1, n + 1))
    assert all(us == T_US + 15 * 10**6 * (line - 1) for _, _, _, us, line in rows)


@pytest.mark.parametrize("excel_line", [False, True])
def test_csv_line_numbers_deep_in_a_large_file(tmp_path: Path, excel_line: bool) -> None:
    """A CSV is parsed once in parallel and its rows numbered by position: lines stay the file's, in a
    load's transaction (rowids from an offset) and in a bare stage, with or without Grafana's `sep=`."""
    from app.store import Workspace

    n = 300_000
    head = ("sep=,\n" if excel_line else "") + "ts,metric,value\n"
    rows = [f"{T + 15 * i},a,{i}" for i in range(n)]
    rows[250_000] = f"{T},a,oops"
    path = tmp_path / "big.csv"
    path.write_text(head + "\n".join(rows) + "\n")
    first = 3 if excel_line else 2  # the line of rows[0]
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, path, display="big.csv")
    assert report.errors == [f"big.csv: line {first + 250_000}: value 'oops' is not a number"]
    rows[250_000] = f"{T + 15 * 250_000},a,250000"
    path.write_text(head + "\n".join(rows) + "\n")
    got, _ = staged_rows(path)
    assert [r[4] for r in got] == list(range(first, first + n))
    assert all(value == line - first for _, _, value, _, line in got)

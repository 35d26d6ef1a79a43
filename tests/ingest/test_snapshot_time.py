"""Snapshots without sample timestamps: time from a comment, the file name, or the mtime."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

from app.ingest.snapshot_time import parse_time_text, time_from_name
from app.load import load_file, load_files
from app.store import Workspace

SNAPSHOT = '# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge\n' \
           'vllm:num_requests_running{{engine="0",model_name="m"}} {v}\n'


@pytest.mark.parametrize(("name", "expected"), [
    ("metrics-2026-11-29T10:15:00Z.prom", datetime(2026, 11, 29, 10, 15)),
    ("20261129T101500Z.prom", datetime(2026, 11, 29, 10, 15)),
    ("vllm-0.5qps-Llama-3.1-8B-Instruct-20261129-101500.json", datetime(2026, 11, 29, 10, 15)),  # vllm bench
    ("scrape_2026-11-29_10-15-00.txt.gz", datetime(2026, 11, 29, 10, 15)),
    ("2026-11-29T12:15:00+02:00.prom", datetime(2026, 11, 29, 10, 15)),
    ("m.2026-11-29T10:15:00.250Z", datetime(2026, 11, 29, 10, 15, 0, 250000)),
    ("1795947300.prom", datetime(2026, 11, 29, 10, 15)),
    ("node-1795947300123.prom", datetime(2026, 11, 29, 10, 15, 0, 123000)),
    ("Llama-3.1-8B-v2.prom", None),
    ("20261329-101500.prom", None),      # month 13: not a time
    ("id-12345678901234.prom", None),    # 14 digits: not an epoch
])
def test_time_from_file_name(name: str, expected: datetime | None) -> None:
    assert time_from_name(name) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-29T10:15:00Z", datetime(2026, 11, 29, 10, 15)),
    ("2026-11-29 10:15:00", datetime(2026, 11, 29, 10, 15)),
    ("20261129T101500Z", datetime(2026, 11, 29, 10, 15)),
    ("1795947300", datetime(2026, 11, 29, 10, 15)),
    ("1795947300.5", datetime(2026, 11, 29, 10, 15, 0, 500000)),
    ("1795947300500", datetime(2026, 11, 29, 10, 15, 0, 500000)),
    ("1795947300000000000", datetime(2026, 11, 29, 10, 15)),
    ("tomorrow", None),
    ("2026-11-29T10:15:00Z trailing", None),
])
def test_time_text(text: str, expected: datetime | None) -> None:
    assert parse_time_text(text) == expected


def load(path: Path):
    with Workspace(":memory:") as ws:
        report = load_file(ws, path)
        times = [r[0] for r in ws.con.execute("select distinct ts from samples order by 1").fetchall()]
    return report, times


def test_timestamp_comments_time_concatenated_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "loop.prom"
    path.write_text("\n".join([
        "# scrape_time=2026-11-29T10:00:00Z", SNAPSHOT.format(v=1),
        "# time: 1795946415", SNAPSHOT.format(v=2),
        "# 2026-11-29 10:00:30", "", SNAPSHOT.format(v=3),
    ]))
    report, times = load(path)
    assert report.status == "loaded", report.errors
    assert report.time_source == "comment"
    assert times == [datetime(2026, 11, 29, 10, 0), datetime(2026, 11, 29, 10, 0, 15), datetime(2026, 11, 29, 10, 0, 30)]
    assert report.samples == 3 and report.scrape_interval_s == 15.0
    assert "snapshot times from 3 timestamp comment(s) (first on line 1: 2026-11-29T10:00:00Z)" in report.notes


def test_openmetrics_snapshots_separated_by_eof_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "om.txt"
    path.write_text("# 1795946400\nx 1\n# EOF\n# 1795946415\nx 2\n# EOF\n")
    report, times = load(path)
    assert (report.status, report.format, report.time_source) == ("loaded", "openmetrics", "comment")
    assert times == [datetime(2026, 11, 29, 10, 0), datetime(2026, 11, 29, 10, 0, 15)]


def test_free_comments_are_not_times(tmp_path: Path) -> None:
    path = tmp_path / "capture.prom"
    path.write_text("# captured on 2026-09-22 after one request\n" + SNAPSHOT.format(v=1))
    os.utime(path, (1795946400, 1795946400))
    report, times = load(path)
    assert report.time_source == "mtime" and times == [datetime(2026, 11, 29, 10, 0)]
    assert ("no sample timestamps, no timestamp comment and no time in the file name: using the file's "
            "modification time 2026-11-29T10:00:00Z") in report.notes


def test_file_name_time_beats_mtime_and_gzip_uses_the_given_name(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "metrics-20261129T101500Z.prom.gz"
    path.write_bytes(gzip.compress(SNAPSHOT.format(v=1).encode()))
    report, times = load(path)
    assert (report.time_source, report.gzip) == ("filename", True)
    assert times == [datetime(2026, 11, 29, 10, 15)]


def test_sample_timestamps_beat_everything(tmp_path: Path) -> None:
    path = tmp_path / "metrics-20261129T101500Z.prom"
    path.write_text("# 2020-01-01T00:00:00Z\n" + SNAPSHOT.format(v="1 1795946400000"))
    report, times = load(path)
    assert report.time_source == "samples" and times == [datetime(2026, 11, 29, 10, 0)]


def test_mixed_samples_take_their_snapshot_time(tmp_path: Path) -> None:
    path = tmp_path / "metrics-20261129T101500Z.prom"
    path.write_text("a 1 1795946400000\nb 2\n")
    report, times = load(path)
    assert report.time_source == "filename"
    assert times == [datetime(2026, 11, 29, 10, 0), datetime(2026, 11, 29, 10, 15)]
    assert "1 samples without a timestamp took their snapshot's time (1 carried their own)" in report.notes


def test_directory_of_snapshots_merges_series_across_datasets(tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        p = tmp_path / f"scrape-2026-11-29T10-00-{15 * i:02d}.prom"  # `-` as time separator
        p.write_text(SNAPSHOT.format(v=i))
        paths.append(p)
    with Workspace(":memory:") as ws:
        reports = load_files(ws, paths)
        assert [r.time_source for r in reports] == ["filename"] * 3
        n_series, n_samples = ws.con.execute("select count(distinct series_id), count(*) from samples").fetchone()
    assert (n_series, n_samples) == (1, 3)

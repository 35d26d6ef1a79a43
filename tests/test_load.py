"""Loading (``app.load``): one dataset per file, atomic and idempotent, with a summary read from the
5-minute cube the load keeps."""

from __future__ import annotations

import gzip
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cube import cube_frame, ensure_cube
from app.ingest import open_source, stage
from app.load import SUMMARY_WINDOW_S, load_file, load_files, load_frame
from app.store import Workspace
from tests.conftest import T0, histogram, samples, ts

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = FIXTURES / "real" / "vllm-v0-opt125m-datadog.prom"
BENCH = FIXTURES / "queries" / "records__from_vllm_bench.json"


def _tables(ws: Workspace) -> dict[str, int]:
    return {t: ws.con.execute(f"select count(*) from {t}").fetchone()[0]
            for t in ("datasets", "series", "samples", "families", "request_records", "cube_index", "cube_rows")}


def test_a_capture_loads_with_its_summary_and_keeps_its_five_minute_cube(ws: Workspace) -> None:
    report = load_file(ws, VLLM)
    assert report.status == "loaded" and report.format == "prometheus-text"
    assert report.engine is not None and report.engine.startswith("vllm")
    assert report.series > 0 and report.samples == report.series  # a snapshot: one sample per series
    assert report.snapshot and any("single snapshot" in n for n in report.notes)
    assert "ttft" in report.signals and report.paths
    kept = ws.con.execute("select cube_id, spec->>'window_s' from cube_index order by cube_id").fetchall()
    # its 5-minute cube, and from the same pass over the samples the capacity fit's (per replica)
    assert [int(w) for _, w in kept] == [SUMMARY_WINDOW_S, SUMMARY_WINDOW_S]
    # the first cube asked for is the kept one, not a rebuild
    assert ensure_cube(ws, [report.dataset_id], SUMMARY_WINDOW_S) == kept[0][0]
    stored = ws.con.execute("select name, n_series, n_samples, engine from datasets").fetchall()
    assert stored == [(report.dataset, report.series, report.samples, report.engine)]


def test_the_same_bytes_again_are_unchanged_and_a_gzip_copy_too(ws: Workspace, tmp_path: Path) -> None:
    first = load_file(ws, VLLM)
    before = _tables(ws)
    again = load_file(ws, VLLM, display="again.prom")
    assert again.status == "unchanged" and again.file == "again.prom"
    assert again.dataset_id == first.dataset_id and again.samples == first.samples
    assert _tables(ws) == before
    packed = tmp_path / "vllm.prom.gz"
    with VLLM.open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    other = load_file(ws, packed)  # other bytes: a dataset of its own, same series
    assert other.status == "loaded" and other.gzip and other.dataset != first.dataset
    assert _tables(ws)["series"] == before["series"]


def test_a_failed_file_leaves_nothing_and_the_others_load(ws: Workspace, tmp_path: Path) -> None:
    bad = tmp_path / "bad.prom"
    bad.write_text("# TYPE x counter\nx{a=\"1\" 12\n")
    reports = load_files(ws, [bad, VLLM, tmp_path / "missing.prom"])
    assert [r.status for r in reports] == ["failed", "loaded", "failed"]
    assert all(r.errors and r.errors[0].startswith(str(p)) for r, p in
               zip([reports[0], reports[2]], [bad, tmp_path / "missing.prom"], strict=True))
    assert ws.con.execute("select count(*) from datasets").fetchone()[0] == 1
    assert ws.con.execute("select count(distinct dataset_id) from samples").fetchone()[0] == 1


def test_names_are_made_unique_and_a_frame_loads_like_a_file(ws: Workspace) -> None:
    rows = [{"metric": "vllm:num_requests_running", "labels": {"model_name": "m"}, "ts": T0 + t,
             "value": float(t)} for t in (0, 15, 30)]
    a = load_frame(ws, pd.DataFrame(rows), "fleet")
    b = load_frame(ws, pd.DataFrame(rows[:2]), "fleet")
    assert (a.dataset, b.dataset) == ("fleet", "fleet (2)")
    assert load_frame(ws, pd.DataFrame(rows), "fleet").status == "unchanged"  # same content
    cube = cube_frame(ws, ensure_cube(ws, [a.dataset_id], 60))
    assert set(cube["path"]) == {"m"}


def test_per_request_records_load_as_a_records_dataset_without_a_cube(ws: Workspace) -> None:
    report = load_file(ws, BENCH)
    assert report.status == "loaded" and report.format == "vllm-bench-json"
    assert report.signals == ["per-request records"] and report.samples > 0
    counts = _tables(ws)
    assert counts["request_records"] == report.samples
    assert counts["samples"] == 0 and counts["cube_index"] == 0


def test_a_frame_goes_through_the_checks_a_file_does(ws: Workspace) -> None:
    """``load_frame`` (the simulator's and the accuracy harness's way in) drops, repairs and notes what a
    file's load would: a NaN counter value, a negative bucket, a histogram without its +Inf bucket."""
    labels = {"model_name": "m"}
    rows = samples("vllm:prompt_tokens_total", labels, [(0, 5), (15, float("nan")), (30, 9)])
    hist = histogram("vllm:time_to_first_token_seconds", labels, ["0.5", "+Inf"],
                     [(0, [1, 2], 0.4), (15, [-3, 4], 0.8), (30, [3, 6], 1.2)])
    rows += [r for r in hist if r["labels"].get("le") != "+Inf"]  # a _count, but no +Inf bucket
    report = load_frame(ws, pd.DataFrame(rows), "checked")
    assert report.status == "loaded", report.errors
    assert report.notes[0] == (
        'kept 1 sample(s) with a NaN or infinite value apart (valid values, stored in skipped_samples; the cube '
        'skips them): vllm:prompt_tokens_total{model_name="m"} = NaN at '
        f"{ts(15).isoformat()}Z on row 2")
    assert report.notes[1] == (
        "dropped 1 sample(s) with a negative value in a series that only counts up (counter, bucket or _count): "
        f'vllm:time_to_first_token_seconds_bucket{{le="0.5",model_name="m"}} = -3 at {ts(15).isoformat()}Z on row 7')
    assert report.notes[2].startswith("1 histogram(s) have no +Inf bucket: their _count is used as the +Inf bucket "
                                      "(repaired): vllm:time_to_first_token_seconds")
    stored = ws.con.execute(
        "select s.metric, count(*), sum(p.value) from samples p join series s using (series_id) "
        "where p.dataset_id = $id group by 1 order by 1", {"id": report.dataset_id}).fetchall()
    assert stored == [("vllm:prompt_tokens_total", 2, 14.0),
                      ("vllm:time_to_first_token_seconds_bucket", 5, 1 + 3 + 2 + 4 + 6),  # 0.5 (one dropped), +Inf
                      ("vllm:time_to_first_token_seconds_count", 3, 12.0),
                      ("vllm:time_to_first_token_seconds_sum", 3, pytest.approx(2.4))]


def test_count_against_inf_compares_what_the_load_keeps(ws: Workspace) -> None:
    """A `_count` that differs from its +Inf bucket is noted at the scrapes that differ among the samples
    the load keeps: a NaN `_count` (dropped) is not one of them, and a histogram whose +Inf bucket its
    `_count` repaired never differs, nor does one whose +Inf bucket misses a scrape its `_count` has
    (no scrape holds two different values)."""
    labels = {"model_name": "m"}
    hist = histogram("vllm:e2e_request_latency_seconds", labels, ["1", "+Inf"],
                     [(0, [1, 2], 0.4), (15, [2, 4], 0.8), (30, [3, 6], 1.2), (45, [4, 8], 1.6)])
    for r in hist:
        if r["metric"].endswith("_count") and r["ts"] == T0 + 15:
            r["value"] = 5.0  # differs from +Inf (4)
        if r["metric"].endswith("_count") and r["ts"] == T0 + 30:
            r["value"] = float("nan")  # dropped, so not compared
    repaired = histogram("vllm:time_to_first_token_seconds", labels, ["0.5", "+Inf"],
                         [(0, [1, 2], 0.4), (15, [3, 4], 0.8)])
    gap = histogram("vllm:request_queue_time_seconds", labels, ["1", "+Inf"], [(0, [1, 2], 0.4), (15, [2, 4], 0.8)])
    rows = hist + [r for r in repaired if r["labels"].get("le") != "+Inf"]
    rows += [r for r in gap if not (r["labels"].get("le") == "+Inf" and r["ts"] == T0 + 15)]
    report = load_frame(ws, pd.DataFrame(rows), "pairs")
    assert report.status == "loaded", report.errors
    assert report.notes[0].startswith("kept 1 sample(s) with a NaN or infinite value apart (valid values, stored "
                                      "in skipped_samples; the cube skips them): "
                                      'vllm:e2e_request_latency_seconds_count{model_name="m"} = NaN')
    assert report.notes[1].startswith("1 histogram(s) have no +Inf bucket")
    count_line = next(i for i, r in enumerate(rows, 1)
                      if r["metric"].endswith("_count") and r["ts"] == T0 + 15)
    assert report.notes[2] == (
        "_count differs from the +Inf bucket at 1 scrape(s): "
        f'vllm:e2e_request_latency_seconds{{model_name="m"}} at {ts(15).isoformat()}Z (row {count_line}): '
        "_count 5, +Inf bucket 4; both kept as they are (shares use the buckets, request counts use _count)")


def test_samples_dated_in_the_future_or_before_2000_are_kept_with_a_note(ws: Workspace, tmp_path: Path) -> None:
    """The time-range notes come from the stored dataset's range, and name the first line of each."""
    future = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    path = tmp_path / "clocks.csv"
    path.write_text("timestamp,metric,model_name,value\n"
                    "2026-11-29T10:00:00Z,vllm:num_requests_running,m,1\n"
                    "1999-12-31T23:00:00Z,vllm:num_requests_running,m,2\n"
                    f"{future:%Y-%m-%dT%H:%M:%S}Z,vllm:num_requests_running,m,3\n"
                    "1970-01-01T00:10:00Z,vllm:num_requests_running,m,4\n")
    report = load_file(ws, path)
    assert report.status == "loaded" and report.samples == 4
    day = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    assert [n for n in report.notes if "dated" in n] == [
        f"1 sample(s) are dated in the future (after {day}; the latest {future.replace(tzinfo=None).isoformat()}Z, "
        "first on line 4): kept as they are; check the exporter's clock or the timestamp unit",
        "2 sample(s) are dated before 2000 (the earliest 1970-01-01T00:10:00Z, first on line 3): kept as they are; "
        "times since a process start, or seconds read as milliseconds?"]
    plain = tmp_path / "plain.csv"
    plain.write_text("timestamp,metric,model_name,value\n2026-11-29T10:00:00Z,vllm:num_requests_running,m,1\n")
    assert not [n for n in load_file(ws, plain).notes if "dated" in n]


def test_a_frame_of_only_nan_is_kept_apart(ws: Workspace) -> None:
    """NaN and infinite values are valid (OpenMetrics): stored beside the samples, which the cube reads,
    and counted in the report; a frame of nothing else loads with no sample the cube can use."""
    rows = samples("vllm:num_requests_running", {"model_name": "m"}, [(0, float("nan")), (15, float("inf"))])
    report = load_frame(ws, pd.DataFrame(rows), "all-nan")
    assert report.status == "loaded" and report.samples == 0, report.errors
    assert report.notes[0].startswith("kept 2 sample(s) with a NaN or infinite value apart")
    assert "every sample is NaN or infinite" in " ".join(report.notes)
    kept = ws.con.execute("select count(*), count(*) filter (isnan(value)), count(*) filter (isinf(value)) "
                          "from skipped_samples where dataset_id = $id", {"id": report.dataset_id}).fetchone()
    assert kept == (2, 1, 1)
    assert ws.con.execute("select count(*) from samples").fetchone()[0] == 0


_COUNT_EDITS = st.lists(st.sampled_from(["same", "differs", "nan", "no_inf", "no_count", "negative_inf"]),
                        min_size=1, max_size=12)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(edits=_COUNT_EDITS)
def test_the_count_against_inf_note_counts_the_differing_kept_scrapes(edits: list[str]) -> None:
    """Whatever the edits to a histogram's `_count` and `+Inf` samples, the note counts exactly the
    scrapes where both are kept (neither dropped as a bad point nor missing) and differ: what the
    stored samples' sums of hashes find is then compared scrape by scrape."""
    labels = {"model_name": "m"}
    rows: list[dict] = []
    expected = 0
    for k, edit in enumerate(edits):
        t = 15 * k
        good = float(k + 1)
        count = {"differs": good + 0.5, "nan": float("nan")}.get(edit, good)
        inf = -1.0 if edit == "negative_inf" else good
        rows += samples("vllm:e2e_request_latency_seconds_bucket", {**labels, "le": "1"}, [(t, 0.0)])
        if edit != "no_inf":
            rows += samples("vllm:e2e_request_latency_seconds_bucket", {**labels, "le": "+Inf"}, [(t, inf)])
        if edit != "no_count":
            rows += samples("vllm:e2e_request_latency_seconds_count", labels, [(t, count)])
        expected += edit == "differs"
    with Workspace(":memory:") as w:
        report = load_frame(w, pd.DataFrame(rows), "edits")
    assert report.status == "loaded", report.errors
    noted = [n for n in report.notes if n.startswith("_count differs from the +Inf bucket")]
    if expected:
        assert len(noted) == 1 and noted[0].startswith(f"_count differs from the +Inf bucket at {expected} scrape(s)")
    else:
        assert noted == []


def _temp_tables(ws: Workspace) -> dict[str, tuple[str, int]]:
    kinds = dict(ws.con.execute("select table_name, table_type from information_schema.tables "
                                "where table_catalog = 'temp' and table_name in "
                                "('stage_points', 'long_parsed', 'long_input', 'long_keys')").fetchall())
    return {name: (kind, ws.con.execute(f"select count(*) from {name}").fetchone()[0]) for name, kind in kinds.items()}


def test_a_long_file_is_stored_from_its_reader_and_leaves_nothing_staged(ws: Workspace, tmp_path: Path) -> None:
    """A long CSV/Parquet file's samples go from the file to `samples` without a staged copy (views over
    the reader), whatever was loaded before; the checks that change staged samples still work on it,
    and once stored the views are left as empty tables, as other readers leave their helpers."""
    start = datetime(2026, 11, 29, 10, tzinfo=UTC)
    frame = pd.DataFrame({
        "timestamp": [start + timedelta(seconds=15 * i) for i in range(8)],
        "metric": ["vllm:num_requests_running"] * 4 + ["vllm:prompt_tokens_total"] * 4,
        "model_name": ["m"] * 8,
        "value": [1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0],
    })
    first = tmp_path / "first.parquet"
    frame.to_parquet(first)
    report = load_file(ws, first)
    assert report.status == "loaded" and report.samples == 8
    stored = ws.con.execute("select count(*), sum(value) from samples where dataset_id = $d",
                            {"d": report.dataset_id}).fetchone()
    assert stored == (8, 110.0)
    assert _temp_tables(ws) == dict.fromkeys(("stage_points", "long_parsed", "long_input", "long_keys"),
                                             ("LOCAL TEMPORARY", 0))
    assert load_file(ws, VLLM).status == "loaded"  # a text file's table stage_points after the view
    # a counter that goes down is a bad point: the check turns the view into a table to drop it
    negative = tmp_path / "negative.csv"
    negative.write_text("timestamp,metric,model_name,value\n"
                        "2026-11-29T10:00:00Z,vllm:prompt_tokens_total,m,5\n"
                        "2026-11-29T10:00:15Z,vllm:prompt_tokens_total,m,-1\n"
                        "2026-11-29T10:00:30Z,vllm:prompt_tokens_total,m,7\n")
    report = load_file(ws, negative)
    assert report.status == "loaded" and report.samples == 2
    assert [n for n in report.notes if n.startswith("dropped")] == [
        "dropped 1 sample(s) with a negative value in a series that only counts up (counter, bucket or _count): "
        "vllm:prompt_tokens_total{model_name=\"m\"} = -1 at 2026-11-29T10:00:15Z on line 3"]
    frame["value"] = frame["value"] * 2
    again = tmp_path / "again.parquet"
    frame.to_parquet(again)
    report = load_file(ws, again)
    assert report.status == "loaded" and report.samples == 8
    assert ws.con.execute("select sum(value) from samples where dataset_id = $d",
                          {"d": report.dataset_id}).fetchone()[0] == 220.0
    assert all(n == 0 for _, n in _temp_tables(ws).values())


def test_a_frame_loads_after_a_long_file_staged_without_a_load(ws: Workspace, tmp_path: Path) -> None:
    """Staging a long file outside a load (as the readers' tests and tools do) leaves its view
    `stage_points`; a frame's reader, which makes a table of that name, still loads."""
    path = tmp_path / "long.csv"
    path.write_text("timestamp,metric,model_name,value\n2026-11-29T10:00:00Z,vllm:num_requests_running,m,1\n")
    with open_source(path) as src:
        stage(ws.con, src, check=False)
    assert ws.con.execute("select table_type from information_schema.tables where table_catalog = 'temp' "
                          "and table_name = 'stage_points'").fetchone() == ("VIEW",)
    rows = [{"metric": "vllm:num_requests_running", "labels": {"model_name": "m"}, "ts": T0 + t,
             "value": float(t)} for t in (0, 15, 30)]
    report = load_frame(ws, pd.DataFrame(rows), "after")
    assert report.status == "loaded" and report.samples == 3, report.errors

"""Hand-computed cube tables for tiny fixtures, and the counter cases of docs/methods.md#counters."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cube import (
    FIT_BUCKETS,
    FIT_SIGNALS,
    REPLICA_LABELS,
    cached_cube,
    cube_frame,
    ensure_cube,
    parse_window,
)
from app.load import load_file, load_frame
from app.store import Workspace
from tests.conftest import histogram, load, samples, ts
from tests.support.cube import cube, values

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"


def test_tv_2_4_reset_inside_a_window(ws: Workspace) -> None:
    # docs/methods.md#exact-increases: 60 s windows, 15 s scrapes, restart between t=60 and t=75
    pts = [(0, 100), (15, 110), (30, 130), (45, 131), (60, 150), (75, 5), (90, 20), (105, 20), (120, 41)]
    load(ws, samples("vllm:prompt_tokens_total", V1, pts))
    frame = cube(ws, 60)
    # the first sample is a baseline (window (-60, 0]); (0,60] = 10+20+1+19; (60,120] = 5+15+0+21
    assert values(frame, "prompt_tokens_total", "increase") == {-60: 0.0, 0: 50.0, 60: 41.0}
    assert values(frame, "prompt_tokens_total", "resets") == {60: 1.0}


def test_tv_2_5_joint_reset_of_a_histogram(ws: Workspace) -> None:
    les = ["0.5", "1.0", "+Inf"]
    rows = histogram(TTFT, V1, les, [(0, [10, 12, 30], 9.0), (60, [8, 13, 14], 5.0)])
    rows += histogram(TTFT, {**V1, "model_name": "batch"}, les, [(0, [10, 12, 30], 9.0), (60, [25, 28, 29], 20.0)])
    load(ws, rows)
    frame = cube(ws, 60)
    chat = frame[frame.path == "chat"]
    batch = frame[frame.path == "batch"]
    # per-series detection would give [8, 1, 14] (non-monotone) and [15, 16, 29]; joint gives the new values
    assert [values(chat, "ttft", "increase", le)[0] for le in (0.5, 1.0, math.inf)] == [8, 13, 14]
    assert [values(batch, "ttft", "increase", le)[0] for le in (0.5, 1.0, math.inf)] == [25, 28, 29]
    assert values(chat, "ttft", "count") == {-60: 0, 0: 14}
    assert values(batch, "ttft", "count") == {-60: 0, 0: 29}
    assert values(chat, "ttft", "sum") == {-60: 0, 0: 5.0}
    assert values(chat, "ttft", "resets") == {0: 1}  # one reset of the label set, not one per bucket
    assert values(chat, "ttft", "repairs") == {}


def test_gap_puts_the_increase_in_the_window_after_it(ws: Workspace) -> None:
    pts = [(0, 0), (15, 3), (30, 5), (45, 9), (60, 10), (195, 40), (210, 41), (240, 47)]
    load(ws, samples("vllm:generation_tokens_total", V1, pts))
    inc = values(cube(ws, 60), "generation_tokens_total", "increase")
    # nothing between 60 and 195: the 30 tokens of the gap land in (180, 240] with the later samples
    assert inc == {-60: 0, 0: 10, 180: 30 + 1 + 6}
    assert sum(inc.values()) == 47


def test_late_scrape_crosses_the_window_edge(ws: Workspace) -> None:
    # the scrape due at t=60 arrived at t=61: its delta belongs to the window holding t=61
    pts = [(0, 0), (15, 2), (30, 4), (45, 6), (61, 9), (75, 11), (90, 12), (105, 12), (120, 15)]
    load(ws, samples("vllm:num_preemptions_total", V1, pts))
    inc = values(cube(ws, 60), "preemptions", "increase")
    assert inc == {-60: 0, 0: 6, 60: 9}


def test_labels_in_another_order_are_one_series(ws: Workspace) -> None:
    a = [{"metric": "vllm:prompt_tokens_total", "labels": '{"model_name": "chat", "engine": "0"}',
          "ts": t, "value": v} for t, v in [(ts(0), 1.0), (ts(15), 4.0)]]
    b = [{"metric": "vllm:prompt_tokens_total", "labels": '{"engine": "0", "model_name": "chat"}',
          "ts": t, "value": v} for t, v in [(ts(30), 10.0), (ts(45), 12.0)]]
    load(ws, a + b)
    assert ws.con.execute("select count(*) from series").fetchone()[0] == 1
    assert values(cube(ws, 60), "prompt_tokens_total", "increase") == {-60: 0, 0: 11}


def test_non_monotone_bucket_is_repaired_and_counted(ws: Workspace) -> None:
    # docs/methods.md#non-monotone-buckets: le=0.75 increased less than le=0.5 in the window
    les = ["0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "+Inf"]
    zero = [0] * 8
    rows = histogram(TTFT, V1, les, [(0, zero, 0.0), (60, [120, 400, 700, 695, 930, 990, 998, 1000], 500.0)])
    load(ws, rows)
    frame = cube(ws, 60)
    got = [values(frame, "ttft", "increase", float(le))[0] for le in les]
    assert got == [120, 400, 700, 700, 930, 990, 998, 1000]
    assert values(frame, "ttft", "repairs") == {0: 1}


def test_gauges_min_mean_max_and_replicas(ws: Workspace) -> None:
    r1 = {**V1, "instance": "a:8000"}
    r2 = {**V1, "instance": "b:8000"}
    rows = samples("vllm:num_requests_running", r1, [(15, 2), (30, 4), (45, 6), (60, 8)])
    rows += samples("vllm:num_requests_running", r2, [(15, 10), (30, 0)])
    rows += samples("vllm:kv_cache_usage_perc", r2, [(75, 0.5)])
    load(ws, rows)
    frame = cube(ws, 60)
    assert values(frame, "running", "min") == {0: 0}
    assert values(frame, "running", "max") == {0: 10}
    assert values(frame, "running", "mean") == {0: pytest.approx(30 / 6)}
    assert values(frame, "kv_usage", "mean") == {60: 0.5}
    assert values(frame, None, "replicas") == {0: 2, 60: 1}


def test_first_sample_counts_when_created_after_the_replica_started(ws: Workspace) -> None:
    # the replica was scraped at t=0; a new label set appeared at t=30, created at t=20
    rows = samples("vllm:request_success_total", {**V1, "finished_reason": "stop"}, [(0, 5), (15, 7), (30, 9)])
    rows += samples("vllm:request_success_total", {**V1, "finished_reason": "abort"}, [(30, 3), (45, 4)])
    rows += samples("vllm:request_success_created", {**V1, "finished_reason": "abort"},
                    [(30, ts(20).timestamp() + 0), (45, ts(20).timestamp())])
    load(ws, rows)
    frame = cube(ws, 60)
    # stop: baseline 5 then +2 +2; abort: 3 since creation, then +1
    assert values(frame, "requests", "increase") == {-60: 0, 0: 2 + 2 + 3 + 1}
    assert values(frame, "failed_requests", "increase") == {0: 4}


def test_single_snapshot_is_the_increase_since_start(ws: Workspace) -> None:
    rows = histogram(TTFT, V1, ["0.5", "+Inf"], [(30, [7, 9], 3.5)])
    rows += samples("process_start_time_seconds", {"instance": "10.0.0.1:8000"}, [(30, ts(-3600).timestamp())])
    report = load_frame(ws, pd.DataFrame(rows), "snapshot")
    assert report.snapshot
    assert any("since the server started" in n for n in report.notes)
    frame = cube(ws, 300)
    assert values(frame, "ttft", "count") == {0: 9}
    assert values(frame, "ttft", "increase", 0.5) == {0: 7}


def test_renamed_metric_emitted_twice_is_counted_once(ws: Workspace) -> None:
    # vLLM 0.10.2-0.14 emit time_per_output_token_seconds and inter_token_latency_seconds identically
    les = ["0.05", "+Inf"]
    scr = [(0, [0, 0], 0.0), (60, [8, 10], 0.5)]
    rows = histogram("vllm:inter_token_latency_seconds", V1, les, scr)
    rows += histogram("vllm:time_per_output_token_seconds", V1, les, scr)
    load(ws, rows)
    assert values(cube(ws, 60), "itl", "count") == {-60: 0, 0: 10}


def test_path_label_and_rules(ws: Workspace) -> None:
    rows = samples("vllm:prompt_tokens_total", {**V1, "model_name": "m1", "job": "a"}, [(0, 0), (30, 5)])
    rows += samples("vllm:prompt_tokens_total", {**V1, "model_name": "m2", "job": "a"}, [(0, 0), (30, 7)])
    load(ws, rows)
    ws.set_paths(["model_name"], [("m[12]", "everything")])
    frame = cube(ws, 60)
    assert set(frame.path) == {"everything"}
    assert values(frame, "prompt_tokens_total", "increase") == {-60: 0, 0: 12}
    ws.set_paths(["job", "model_name"], [])
    frame = cube(ws, 60)
    assert set(frame.path) == {"a / m1", "a / m2"}


def test_a_load_keeps_its_five_minute_cube(ws: Workspace) -> None:
    # the load's summary builds the dataset's 5-minute cube; it is the cached cube of that spec, the
    # same rows a fresh build gives (beside it, from the same pass, the capacity fit's: test_bench.py)
    les = ["0.5", "1.0", "+Inf"]
    rows = histogram(TTFT, V1, les, [(0, [10, 12, 30], 9.0), (300, [8, 13, 14], 5.0), (600, [9, 15, 20], 7.0)])
    rows += samples("vllm:prompt_tokens_total", V1, [(0, 100), (300, 150), (600, 5)])
    dataset_id = load(ws, rows)
    index = ws.cursor().execute("select cube_id, spec from cube_index order by cube_id").fetchall()
    assert len(index) == 2
    kept, spec = index[0]
    assert json.loads(spec) == {"datasets": [dataset_id], "window_s": 300, "path_labels": ["__model__"],
                                "rules": []}
    assert json.loads(index[1][1]) == {"datasets": [dataset_id], "window_s": 300, "path_labels": REPLICA_LABELS,
                                       "rules": [], "signals": sorted(FIT_SIGNALS), "buckets": sorted(FIT_BUCKETS)}
    assert ensure_cube(ws, [dataset_id], 300) == kept  # found, not built
    assert ws.cursor().execute("select count(*) from cube_index").fetchone()[0] == 2
    frame = cube_frame(ws, kept)
    assert values(frame, "ttft", "count") == {-300: 0, 0: 14, 300: 6}
    assert values(frame, "prompt_tokens_total", "resets") == {300: 1}
    with ws.transaction() as con:
        for table in ("cube_index", "cube_rows", "cube_bucket_layouts", "cube_window_histograms"):
            con.execute(f"delete from {table}")
    rebuilt = ensure_cube(ws, [dataset_id], 300)
    assert rebuilt != kept
    pd.testing.assert_frame_equal(cube_frame(ws, rebuilt), frame)
    # another window is another cube
    assert ensure_cube(ws, [dataset_id], 60) not in (kept, rebuilt)


def test_a_cached_cube_is_looked_up_without_a_build_and_without_waiting_for_one(ws: Workspace) -> None:
    dataset_id = load(ws, samples("vllm:prompt_tokens_total", V1, [(0, 100), (300, 150), (600, 5)]))
    kept = ensure_cube(ws, [dataset_id], 300)
    assert cached_cube(ws, [dataset_id], 300) == cached_cube(ws, None, 300) == kept
    assert cached_cube(ws, [dataset_id], 60) is None
    assert cached_cube(ws, [dataset_id], 300, ["instance"]) is None  # another path mapping, another cube
    assert ws.cursor().execute("select count(*) from cube_index where spec->>'window_s' = '60'").fetchone()[0] == 0
    # another session's build holds the workspace's transaction for as long as it takes: the lookup
    # answers meanwhile (it reads on a cursor of its own)
    with ThreadPoolExecutor(1) as pool:
        with ws.transaction():
            lookup = pool.submit(cached_cube, ws, [dataset_id], 300)
            answered_inside = wait([lookup], timeout=60).done == {lookup}
        assert answered_inside and lookup.result() == kept
    minute = ensure_cube(ws, [dataset_id], 60)
    assert cached_cube(ws, [dataset_id], 60) == minute


def test_per_request_records_beside_the_metrics_do_not_change_the_cube(ws: Workspace, tmp_path: Path) -> None:
    rows = samples("vllm:prompt_tokens_total", V1, [(0, 100), (300, 150)])
    metrics = load(ws, rows)
    kept = ensure_cube(ws, [metrics], 300)
    bench = tmp_path / "bench.json"  # vllm bench serve --save-detailed: two requests of path "chat"
    bench.write_text(json.dumps({
        "date": pd.Timestamp(ts(0)).strftime("%Y%m%d-%H%M%S"), "endpoint_type": "vllm", "backend": "vllm",
        "model_id": "chat", "num_prompts": 2, "completed": 2, "input_lens": [100, 100], "output_lens": [10, 20],
        "ttfts": [0.1, 0.2], "latencies": [0.5, 1.0], "itls": [[], []], "start_times": [0.0, 0.01],
        "errors": ["", ""]}))
    records = load_file(ws, bench)
    assert records.status == "loaded", records.errors
    # the records add no samples: the same cube, found, not built again under another key
    assert ensure_cube(ws, [metrics, records.dataset_id], 300) == kept
    assert ensure_cube(ws, None, 300) == kept


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("1m", 60), ("1d", 86400), ("90s", 90), (600, 600)])
def test_parse_window(text: str | int, seconds: int) -> None:
    assert parse_window(text) == seconds


@pytest.mark.parametrize("text", ["30s", "2d", "soon", ""])
def test_parse_window_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="window"):
        parse_window(text)


# -- tiling: windows add up exactly, whatever the resets ------------------------------------------
def _oracle_total(values_: list[float]) -> float:
    """Sum of positive deltas with a reset taking the new value (docs/methods.md#exact-increases), first sample = baseline."""
    total = 0.0
    for prev, cur in zip(values_, values_[1:], strict=False):
        total += cur if cur < prev else cur - prev
    return total


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 50), st.booleans()), min_size=2, max_size=60),
    interval=st.sampled_from([5, 15, 30]),
)
def test_windows_tile_exactly(steps: list[tuple[int, bool]], interval: int) -> None:
    value, pts = 0.0, []
    for i, (inc, reset) in enumerate(steps):
        value = float(inc) if reset else value + inc
        pts.append((i * interval, value))
    with Workspace(":memory:") as w:
        load(w, samples("vllm:generation_tokens_total", V1, pts))
        totals = {}
        for window_s in (60, 120, 600):
            totals[window_s] = sum(values(cube(w, window_s), "generation_tokens_total", "increase").values())
    expected = _oracle_total([v for _, v in pts])
    assert totals == {60: expected, 120: expected, 600: expected}

"""The fleet simulator: traces, engine physics, metric semantics, and the records <-> histograms bridge.

The shared fixture is 1.5 h of the busy afternoon (plus 10 min of unscraped warm-up) on 4 replicas with
the default events: replica 2 crashes at 40 % of the span and is ready 4 min later; no scrape is stored
for 7.2 min from 65 % of the span.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app import load
from app.cube import cube_frame, ensure_cube
from app.engine.config import EngineConfig, Events, FleetConfig, StepTime
from app.engine.fleet import run_fleet
from app.engine.metrics_catalog import ITL_BUCKETS, TTFT_BUCKETS, go_float, request_token_buckets
from app.engine.outcomes import run_arrays
from app.engine.trace import TrafficSpec
from app.simulator import (
    default_events,
    generate_trace,
    run_scenario,
    scale_context,
    scale_traffic,
    scenario_trace,
    simulate_day,
    true_shares,
)
from app.simulator.cli import main as simulate_main
from app.simulator.sample import PROMISES, metrics_table, write_metrics_parquet
from app.simulator.traffic import DEFAULT_DAY
from app.store import Workspace

NOON = DEFAULT_DAY + timedelta(hours=12)
HOURS = 1.5
SERVED = {"llama-3.1-8b-interactive": "interactive", "llama-3.1-8b-batch": "batch"}


@pytest.fixture(scope="module")
def day():
    return simulate_day(seed=11, hours=HOURS, start=NOON, warmup_s=600, keep_run=True)


def tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """The metrics frame with its labels parsed into columns (parsed once per distinct label set)."""
    cats = frame["labels"].cat.categories
    parsed = pd.DataFrame([json.loads(c) for c in cats])
    codes = frame["labels"].cat.codes.to_numpy()
    out = pd.DataFrame({"metric": frame["metric"].astype(str).to_numpy(), "ts": frame["ts"].to_numpy(),
                        "value": frame["value"].to_numpy()})
    for col in ("instance", "model_name", "le", "finished_reason"):
        out[col] = parsed[col].to_numpy()[codes] if col in parsed else None
    return out


@pytest.fixture(scope="module")
def samples(day) -> pd.DataFrame:
    return tidy(day.metrics_frame)


def _export_start(day) -> pd.Timestamp:
    return pd.Timestamp(day.config["export_start"])


# -- traces -------------------------------------------------------------------------------------------
def test_trace_is_deterministic_for_a_seed() -> None:
    a, b, c = generate_trace(3, hours=2), generate_trace(3, hours=2), generate_trace(4, hours=2)
    for name in ("arrival_s", "path", "prompt_tokens", "output_tokens", "hits_max", "request_id"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert len(a) != len(c) or not np.array_equal(a.arrival_s, c.arrival_s)


def test_trace_has_the_shape_of_a_day() -> None:
    tr = generate_trace(7, hours=24, warmup_s=0)
    frame = tr.to_frame()
    inter = frame[frame.path == "interactive"]
    per_hour = inter.groupby(inter.arrival.dt.hour).size()
    in_burst = {int((tr.origin + b.start_s) % 86400 // 3600) for b in tr.bursts}
    calm = per_hour.drop(index=list(in_burst))
    assert 2.2 < calm.max() / calm.min() < 3.4  # diurnal peak/trough ~2.8
    assert 2 <= len(tr.bursts) <= 8 and all(2 <= b.multiplier <= 4 and 120 <= b.duration_s <= 600 for b in tr.bursts)
    assert 0.8 < len(inter) / len(frame) < 0.9  # interactive is most of the traffic
    batch = frame[frame.path == "batch"]
    assert 500 <= inter.prompt_tokens.median() <= 1000 and 200 <= inter.output_tokens.median() <= 320
    assert 3000 <= batch.prompt_tokens.median() <= 4500 and batch.prompt_tokens.max() > 25_000
    assert 300 <= batch.output_tokens.median() <= 800
    assert (frame.prompt_tokens + frame.output_tokens <= tr.spec.max_model_len).all()
    assert frame.hits_max.any() and (inter.output_tokens == 1).any()
    # a request that hit max_tokens generated exactly max_tokens (or max_tokens=1)
    caps = frame[frame.hits_max].groupby("path").output_tokens.max()
    assert caps["interactive"] == 1024 and caps["batch"] == 1536


def test_scenario_traces_are_nested_and_deterministic() -> None:
    base = generate_trace(5, hours=3)
    assert scenario_trace(base) is base
    half, most = scale_traffic(base, 0.5), scale_traffic(base, 0.8)
    assert set(half.request_id) <= set(most.request_id) <= set(base.request_id)
    assert 0.45 < len(half) / len(base) < 0.55
    more = scale_traffic(base, 1.5)
    assert set(base.request_id) <= set(more.request_id)
    assert 1.4 < len(more) / len(base) < 1.6 and np.all(np.diff(more.arrival_s) >= 0)
    assert np.array_equal(more.request_id, scale_traffic(base, 1.5).request_id)  # same extras every time
    long = scale_context(base, 1.5)
    assert np.array_equal(long.arrival_s, base.arrival_s)
    cap = base.spec.max_model_len - 64
    assert np.array_equal(long.prompt_tokens, np.minimum(np.rint(base.prompt_tokens * 1.5), cap))
    assert (long.prompt_tokens + long.output_tokens <= base.spec.max_model_len).all()
    assert (long.hits_max >= base.hits_max).all()


# -- determinism --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_same_seed_same_export_bytes(tmp_path: Path, day) -> None:
    again = simulate_day(seed=11, hours=HOURS, start=NOON, warmup_s=600)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_metrics_parquet(day.metrics_frame, a)
    write_metrics_parquet(again.metrics_frame, b)
    assert a.read_bytes() == b.read_bytes()
    pd.testing.assert_frame_equal(day.records, again.records)
    other = simulate_day(seed=12, hours=0.25, start=NOON, warmup_s=600)
    assert not other.records["ttft_s"].equals(day.records["ttft_s"].iloc[:len(other.records)])


# -- metric semantics ---------------------------------------------------------------------------------
def test_series_names_labels_and_buckets(day, samples) -> None:
    ttft = samples[samples.metric == "vllm:time_to_first_token_seconds_bucket"]
    assert list(dict.fromkeys(ttft["le"])) == [go_float(b) for b in TTFT_BUCKETS] + ["+Inf"]
    assert go_float(0.001) == "0.001" and go_float(1.0) == "1.0" and go_float(2560.0) == "2560.0"
    itl = samples[samples.metric == "vllm:request_time_per_output_token_seconds_bucket"]
    assert list(dict.fromkeys(itl["le"])) == [go_float(b) for b in ITL_BUCKETS] + ["+Inf"]
    prompt = samples[samples.metric == "vllm:request_prompt_tokens_bucket"]
    assert list(dict.fromkeys(prompt["le"]))[-3:] == ["10000.0", "20000.0", "+Inf"]
    assert request_token_buckets(32768)[-1] == 20000 and request_token_buckets(4096)[-1] == 2000
    assert set(ttft.model_name) == set(SERVED)
    engine_level = samples[samples.metric.isin(["vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                                                "vllm:num_preemptions_total"])]
    assert set(engine_level.model_name) == {"llama-3.1-8b"}
    assert set(samples.instance.dropna()) == {f"10.0.0.{k}:8000" for k in range(1, 5)}
    reasons = samples[samples.metric == "vllm:request_success_total"].finished_reason
    assert set(reasons) == {"stop", "length", "abort", "error"}  # pre-created
    frame = day.metrics_frame
    info = frame[frame.metric == "vllm:cache_config_info"]
    assert (info.value == 1).all()
    labels = json.loads(info.labels.iloc[0])
    assert labels["num_gpu_blocks"] == "3500" and labels["block_size"] == "16" and "model_name" not in labels
    kv = samples[samples.metric == "vllm:kv_cache_usage_perc"].value
    assert kv.between(0, 1).all() and kv.max() > 0.5
    for created in ("vllm:time_to_first_token_seconds_created", "vllm:request_success_created",
                    "vllm:num_preemptions_created", "vllm:iteration_tokens_total_created"):
        assert (samples.metric == created).any()


def test_histograms_are_cumulative_and_counters_monotone(day, samples) -> None:
    buckets = samples[samples.metric.str.endswith("_bucket")].copy()
    buckets["le_v"] = buckets["le"].map(lambda s: np.inf if s == "+Inf" else float(s))
    buckets["family"] = buckets.metric.str.removesuffix("_bucket")
    buckets = buckets.sort_values(["family", "instance", "model_name", "ts", "le_v"])
    grouped = buckets.groupby(["family", "instance", "model_name", "ts"], sort=False).value
    assert (grouped.diff().fillna(0) >= 0).all()  # monotone in le
    inf = buckets[buckets["le"] == "+Inf"].set_index(["family", "instance", "model_name", "ts"]).value
    counts = samples[samples.metric.str.endswith("_count")].copy()
    counts["family"] = counts.metric.str.removesuffix("_count")
    counts = counts.set_index(["family", "instance", "model_name", "ts"]).value
    assert inf.sort_index().equals(counts.sort_index())  # +Inf == _count
    restarted = f"10.0.0.{day.config['restarts'][0]['replica'] + 1}:8000"
    crash = pd.Timestamp(day.config["restarts"][0]["crash"])
    cumulative = samples[samples.metric.str.endswith(("_bucket", "_count", "_sum", "_total"))]
    cumulative = cumulative.sort_values(["metric", "instance", "model_name", "le", "finished_reason", "ts"])
    drops = cumulative.groupby(["metric", "instance", "model_name", "le", "finished_reason"], dropna=False,
                               sort=False).value.diff() < 0
    dropped = cumulative[drops]
    assert len(dropped) > 0 and set(dropped.instance) == {restarted}  # only the restart resets counters
    assert (dropped.ts > crash).all() and dropped.ts.nunique() == 1


def _cumulative_from_records(rec: pd.DataFrame, obs_col: str, value_col: str, les: list[str],
                             scrapes: pd.Series, created: pd.Series) -> np.ndarray:
    """Count of observations in (created, scrape] with value <= le, per scrape and le."""
    obs = rec[obs_col].to_numpy()
    out = np.zeros((len(scrapes), len(les)))
    for k, le in enumerate(les):
        bound = np.inf if le == "+Inf" else float(le)
        t = np.sort(obs[rec[value_col].to_numpy() <= bound])
        out[:, k] = (np.searchsorted(t, scrapes.to_numpy(), side="right")
                     - np.searchsorted(t, created.to_numpy(), side="right"))
    return out


@pytest.mark.parametrize("family,obs_col,value_col,finished_only", [
    ("vllm:time_to_first_token_seconds", "first_token", "ttft_s", False),
    ("vllm:request_time_per_output_token_seconds", "finish", "tpot_s", True),
    ("vllm:e2e_request_latency_seconds", "finish", "e2e_s", True),
    ("vllm:request_queue_time_seconds", "finish", "queue_s", True),
    ("vllm:request_prompt_tokens", "finish", "prompt_tokens", True),
    ("vllm:request_generation_tokens", "finish", "output_tokens", True),
])
def test_histograms_equal_the_records(day, samples, family, obs_col, value_col, finished_only) -> None:
    """Every cumulative bucket at every scrape equals the records observed by then in that process."""
    rec = day.records
    if finished_only:
        rec = rec[rec.finished_reason.notna() & ~rec.lost]
    else:
        rec = rec[rec.first_token.notna()]
    checked = 0
    for (instance, model), part in samples[samples.metric == f"{family}_bucket"].groupby(["instance", "model_name"]):
        replica = int(instance.split(".")[3].split(":")[0]) - 1
        wide = part.pivot(index="ts", columns="le", values="value")
        les = list(wide.columns)
        created = samples[(samples.metric == f"{family}_created") & (samples.instance == instance)
                          & (samples.model_name == model)].set_index("ts").value.reindex(wide.index)
        mine = rec[(rec.replica == replica) & (rec.path == SERVED[model])]
        expected = _cumulative_from_records(mine, obs_col, value_col, les, pd.Series(wide.index),
                                            pd.to_datetime(created.to_numpy(), unit="s", utc=True).to_series())
        np.testing.assert_array_equal(wide.to_numpy(), expected)
        checked += int(expected[-1, -1])
    assert checked > 1000


def test_counters_and_step_histograms_add_up(day, samples) -> None:
    """Every generated token is a first token (TTFT) or an inter-token gap (ITL), per process and path;
    request_success counts the finished records; prompt_tokens counts prompts at their first token."""
    last = samples.ts.max()
    at_end = samples[samples.ts == last].set_index(["metric", "instance", "model_name", "finished_reason"]).value
    rec = day.records
    restarted = day.config["restarts"][0]["replica"]
    ready = pd.Timestamp(day.config["restarts"][0]["ready"])
    for r in range(4):
        inst = f"10.0.0.{r + 1}:8000"
        since = ready if r == restarted else pd.Timestamp.min.tz_localize("UTC")
        mine = rec[(rec.replica == r)]
        for model, path in SERVED.items():
            gen = at_end[("vllm:generation_tokens_total", inst, model, None)]
            itl = at_end[("vllm:inter_token_latency_seconds_count", inst, model, None)]
            ttft = at_end[("vllm:time_to_first_token_seconds_count", inst, model, None)]
            assert gen == itl + ttft and itl > 0
            p = mine[mine.path == path]
            done = p[p.finished_reason.notna() & ~p.lost & (p.finish > since) & (p.finish <= last)]
            for reason in ("stop", "length"):
                assert at_end[("vllm:request_success_total", inst, model, reason)] == (done.finished_reason == reason).sum()
            assert at_end[("vllm:request_success_total", inst, model, "abort")] == 0  # a crash reports nothing
            first = p[p.first_token.notna() & (p.first_token > since) & (p.first_token <= last)]
            assert at_end[("vllm:prompt_tokens_total", inst, model, None)] == first.prompt_tokens.sum()


def test_itl_telescopes_to_decode_time() -> None:
    """Per request the inter-token gaps sum to its decode time, preemption gaps included."""
    tr = scale_traffic(generate_trace(2, hours=0.5, start=NOON, warmup_s=0), 1.6)
    run = run_fleet(tr, FleetConfig(replicas=2), seed=2, drain=True)
    d = run_arrays(run)
    assert d["preemptions"].sum() > 50
    itl_sum = sum(c.itl_sum.sum() for c in run.counters)
    itl_n = sum(c.itl.sum() for c in run.counters)
    decode = np.nansum(d["decode_s"])
    assert itl_sum == pytest.approx(decode, rel=1e-6, abs=1e-3)
    assert itl_n == (d["output_tokens"] - 1).sum()


def test_window_shares_from_the_cube_equal_true_shares(day) -> None:
    """Histogram-based breach shares per 5-min window (thresholds on bucket bounds) are exact."""
    ws = Workspace(":memory:")
    report = load.load_frame(ws, day.metrics_frame, "sim")
    assert report.status == "loaded", report.errors
    assert report.engine == "vllm-v1" and set(SERVED) <= set(report.paths) and report.resets > 0
    cube = cube_frame(ws, ensure_cube(ws, window_s=300))
    ws.close()
    assert {"llama-3.1-8b-interactive", "llama-3.1-8b-batch"} <= set(cube[cube.signal == "ttft"].path)
    truth = true_shares(day.records, 300, PROMISES, start=_export_start(day))
    restart, gap = day.config["restarts"][0], day.config["scrape_gaps"][0]
    dirty = [(pd.Timestamp(restart["crash"]) - pd.Timedelta("30s"), pd.Timestamp(restart["ready"]) + pd.Timedelta("30s")),
             (pd.Timestamp(gap["start"]) - pd.Timedelta("30s"), pd.Timestamp(gap["end"]) + pd.Timedelta("30s"))]
    compared = 0
    for signal, col, n_col in (("ttft", "ttft_breached", "first_tokens"), ("tpot", "tpot_breached", "finished")):
        part = cube[cube.signal == signal]
        for (w, model), g in part.groupby(["window_start", "path"]):
            w = pd.Timestamp(w, tz="UTC")
            if any(w < hi and w + pd.Timedelta("300s") > lo for lo, hi in dirty):
                continue
            path = SERVED[model]
            threshold = PROMISES[path][0 if signal == "ttft" else 1]
            count = g[g.stat == "count"].value.iloc[0]
            within = g[(g.stat == "increase") & np.isclose(g["le"], threshold)].value.iloc[0]
            row = truth[(truth.window_start == w) & (truth.path == path)]
            n_true, breached_true = (row[n_col].iloc[0], row[col].iloc[0]) if len(row) else (0, 0)
            assert (count, count - within) == (n_true, breached_true), (signal, w, model)
            compared += count > 0
    assert compared > 50


def test_conservation(day) -> None:
    rec = day.records
    arrived = len(rec)
    finished = rec.finished_reason.isin(["stop", "length"]).sum()
    lost = rec.lost.sum()
    in_flight = rec.finished_reason.isna().sum()
    assert finished + lost + in_flight == arrived and lost > 0 and in_flight > 0
    assert (rec[rec.lost].finished_reason == "abort").all()
    assert rec[rec.finished_reason.isna()].finish.isna().all()
    end = pd.Timestamp(day.config["export_end"])
    assert (rec[rec.finished_reason.isna()].arrival <= end).all()
    drained = run_scenario(generate_trace(11, hours=0.5, start=NOON, warmup_s=0), replicas=3)
    assert drained.finished_reason.isin(["stop", "length"]).all() and not drained.lost.any()


def test_restart_resets_counters_and_changes_created(day, samples) -> None:
    restart = day.config["restarts"][0]
    inst = f"10.0.0.{restart['replica'] + 1}:8000"
    crash, ready = pd.Timestamp(restart["crash"]), pd.Timestamp(restart["ready"])
    mine = samples[samples.instance == inst]
    assert not ((mine.ts > crash) & (mine.ts < ready)).any()  # down: nothing scraped
    created = mine[mine.metric == "vllm:time_to_first_token_seconds_created"].drop_duplicates("ts")
    values = created.set_index("ts").value
    assert values[values.index < crash].nunique() == 1 and values[values.index > ready].nunique() == 1
    assert values[values.index > ready].iloc[0] == pytest.approx(ready.timestamp())
    start = mine[mine.metric == "process_start_time_seconds"].set_index("ts").value
    assert start[start.index > ready].iloc[0] > start[start.index < crash].iloc[0]
    count = mine[(mine.metric == "vllm:time_to_first_token_seconds_count")
                 & (mine.model_name == "llama-3.1-8b-interactive")].set_index("ts").value
    assert count[count.index > ready].iloc[0] < count[count.index < crash].iloc[-1]
    lost = day.records[day.records.lost]
    assert (lost.replica == restart["replica"]).all()
    assert (lost.finish == crash.floor("us")).all()
    others = samples[(samples.instance != inst) & (samples.ts > crash) & (samples.ts < ready)]
    assert len(others) > 0  # the rest of the fleet kept serving


def test_scrape_gap_is_a_gap(day, samples) -> None:
    gap = day.config["scrape_gaps"][0]
    start, end = pd.Timestamp(gap["start"]), pd.Timestamp(gap["end"])
    times = pd.DatetimeIndex(np.sort(samples.ts.unique())).as_unit("ns")
    assert not ((times >= start) & (times < end)).any()
    steps = np.diff(times.asi8) / 1e9
    assert (steps[steps != 15] > (end - start).total_seconds()).all() and (steps != 15).sum() == 1
    assert times.min() == _export_start(day)  # the warm-up is not scraped
    assert times.max() == pd.Timestamp(day.config["export_end"])


def test_per_request_latencies_follow_vllm_definitions(day) -> None:
    rec = day.records[day.records.finished_reason.notna() & ~day.records.lost]
    n = rec.output_tokens.to_numpy()

    def seconds(later: pd.Series, earlier: pd.Series) -> np.ndarray:
        return (later - earlier).to_numpy().astype("timedelta64[us]").astype(np.int64) / 1e6

    decode = seconds(rec.finish, rec.first_token)
    expected_tpot = np.where(n > 1, decode / np.maximum(n - 1, 1), 0.0)
    np.testing.assert_array_equal(rec.tpot_s.to_numpy(), expected_tpot)  # bit for bit
    np.testing.assert_array_equal(rec.ttft_s.to_numpy(), seconds(rec.first_token, rec.arrival))
    np.testing.assert_array_equal(rec.e2e_s.to_numpy(), seconds(rec.finish, rec.arrival))
    assert (rec.queue_s >= 0).all() and (rec.scheduled >= rec.arrival).all()
    assert (rec.first_token > rec.scheduled).all() and (rec.finish >= rec.first_token).all()
    assert (rec[n == 1].tpot_s == 0).all() and (n == 1).any()
    inter = rec[rec.path == "interactive"]
    assert 0.005 < inter.tpot_s.median() < 0.05  # an 8B model on an H100: ~10-30 ms per token
    assert 0.03 < inter.ttft_s.median() < 0.5


@pytest.mark.slow
def test_more_replicas_never_worse() -> None:
    trace = scale_traffic(generate_trace(21, hours=1.0, start=NOON, warmup_s=0), 1.5)
    shares = {}
    for n in (2, 3, 4, 6):
        rec = run_scenario(trace, replicas=n, seed=21)
        s = true_shares(rec, None, PROMISES).set_index("path")
        shares[n] = s.ttft_share
    table = pd.DataFrame(shares)
    assert table.loc["interactive", 2] > 0.2  # two replicas drown
    for path in ("interactive", "batch"):
        row = table.loc[path].to_numpy()
        assert (np.diff(row) <= 0).all(), table


def test_stretches_match_step_by_step_with_a_crash() -> None:
    tr = scale_traffic(generate_trace(3, hours=0.3, warmup_s=0, start=NOON), 1.4)
    ev = Events(restarts=(default_events(0.3, 2).restarts[0],))
    runs = [run_fleet(tr, FleetConfig(replicas=2, step=StepTime(noise_sigma=0.0), bulk=bulk), ev, seed=1,
                      drain=True) for bulk in (True, False)]
    a, b = (run_arrays(x) for x in runs)
    assert a["preemptions"].sum() > 100 and a["lost"].sum() > 0
    for key in ("first_token_us", "finish_us", "scheduled_us"):
        assert np.abs(a[key] - b[key]).max() <= 1
    for key in ("output_tokens", "preemptions", "reason", "replica"):
        assert np.array_equal(a[key], b[key])
    for name in ("itl", "gen_tokens", "iter", "preemptions", "gauges"):
        assert np.array_equal(np.array([getattr(c, name) for c in runs[0].counters]),
                              np.array([getattr(c, name) for c in runs[1].counters])), name


def test_a_long_export_is_written_piece_by_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A month is written in pieces (whole replicas of samples, slices of requests): the files hold
    what one piece writes, the counts and the true shares add up, and the README says what it is."""
    from app.simulator import sample

    args = {"seed": 3, "hours": 0.5, "replicas": 3}
    whole = sample.write_sample(tmp_path / "whole", **args)
    monkeypatch.setattr(sample, "METRICS_PIECE_ROWS", 10)  # a piece per replica
    monkeypatch.setattr(sample, "RECORDS_PIECE_ROWS", 500)
    pieces = sample.write_sample(tmp_path / "pieces", **args)
    skip = {"wall_seconds", "sim_seconds", "metrics_bytes", "requests_bytes"}
    assert {k: v for k, v in pieces.items() if k not in skip} == {k: v for k, v in whole.items() if k not in skip}
    assert pieces["requests"] > 2 * 500
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "pieces" / "metrics.parquet").metadata.num_row_groups == 3
    for name in ("metrics.parquet", "requests.parquet"):
        a, b = (pd.read_parquet(tmp_path / d / name) for d in ("whole", "pieces"))
        pd.testing.assert_frame_equal(a.astype({c: str for c in ("metric", "labels") if c in a}),
                                      b.astype({c: str for c in ("metric", "labels") if c in b}))
    readme = [re.sub(r"[0-9.]+ MB", "", (tmp_path / d / "README.md").read_text()) for d in ("whole", "pieces")]
    assert readme[0] == readme[1]  # the same but for the file sizes
    assert "0.5 simulated hours of a 3-replica" in (tmp_path / "whole" / "README.md").read_text()
    bare = sample.write_sample(tmp_path / "pieces", **args, records=False)
    assert bare["requests_bytes"] is None and bare["true_shares"] == whole["true_shares"]
    assert not (tmp_path / "pieces" / "requests.parquet").exists()
    assert "not written" in (tmp_path / "pieces" / "README.md").read_text()


def test_long_exports_default_to_a_minute_scrape_and_no_cap() -> None:
    from app.simulator.sample import MAX_SAMPLE_BYTES, default_max_bytes, default_scrape_interval

    assert (default_scrape_interval(24), default_max_bytes(24)) == (15.0, MAX_SAMPLE_BYTES)
    assert (default_scrape_interval(720), default_max_bytes(720)) == (60.0, None)


def test_config_rejects_a_kv_cache_smaller_than_a_sequence() -> None:
    with pytest.raises(ValueError, match="max_model_len"):
        EngineConfig(num_gpu_blocks=1000)
    with pytest.raises(ValueError, match="router"):
        FleetConfig(router="fastest")
    with pytest.raises(ValueError):
        scale_traffic(generate_trace(1, hours=0.1), 0)


def test_cli_writes_a_sample(tmp_path: Path) -> None:
    out = tmp_path / "sample"
    assert simulate_main(["--seed", "3", "--out", str(out), "--hours", "0.5", "--replicas", "2"]) == 0
    assert {p.name for p in out.iterdir()} == {"metrics.parquet", "requests.parquet", "simulation.json", "README.md"}
    meta = json.loads((out / "simulation.json").read_text())
    assert meta["seed"] == 3 and meta["fleet"]["replicas"] == 2 and meta["scrape_interval_s"] == 15
    table = pd.read_parquet(out / "metrics.parquet")
    assert list(table.columns) == ["timestamp", "metric", "labels", "value"]
    assert str(table.timestamp.dtype) == "datetime64[ms, UTC]"
    assert isinstance(json.loads(table.labels.iloc[0]), dict)
    records = pd.read_parquet(out / "requests.parquet")
    assert len(records) == meta["requests"] and records.finished_reason.notna().mean() > 0.95
    readme = (out / "README.md").read_text()
    assert "python -m app.simulator --seed 3" in readme and "requests.parquet" in readme
    assert metrics_table(pd.DataFrame({"metric": [], "labels": [], "ts": [], "value": []})).num_rows == 0


def test_context_multiplier_changes_the_physics() -> None:
    """Longer prompts hold more KV: the same arrivals wait longer for it and take longer to prefill."""
    base = generate_trace(8, hours=0.5, start=NOON, warmup_s=0)
    calm = run_scenario(base, replicas=3, seed=8)
    longer = run_scenario(scenario_trace(base, m=1.5), replicas=3, seed=8)
    assert (longer.id.to_numpy() == calm.id.to_numpy()).all()
    assert longer.queue_s.mean() > 1.5 * calm.queue_s.mean()
    assert longer.ttft_s.quantile(0.9) > calm.ttft_s.quantile(0.9)


def test_traffic_spec_validation_of_lengths() -> None:
    spec = TrafficSpec(max_model_len=8192)
    tr = generate_trace(1, hours=0.5, spec=spec)
    assert (tr.prompt_tokens + tr.output_tokens <= 8192).all()
    assert tr.prompt_tokens.max() <= 8192 - 64


@pytest.mark.parametrize("sigma", [None, 0.0])
def test_without_metrics_the_requests_are_the_same(sigma: float | None) -> None:
    """The economics twin runs without the histogram bookkeeping: every request time is unchanged.
    With a deterministic step time (the twin's) it also does not cut a decode stretch at an arrival
    that cannot be admitted before the stretch ends: times then differ only by the rounding of a
    stretch's time in one piece instead of two (at most 1 us, for a few requests)."""
    tr = scale_traffic(generate_trace(5, hours=0.3, warmup_s=0, start=NOON), 1.4)
    config = FleetConfig(replicas=2)
    if sigma is not None:
        config = replace(config, step=replace(config.step, noise_sigma=sigma))
    on, off = (run_arrays(run_fleet(tr, config, seed=2, drain=True, metrics=m)) for m in (True, False))
    assert on["preemptions"].sum() > 0
    for key in ("output_tokens", "preemptions", "reason", "replica"):
        assert np.array_equal(on[key], off[key]), key
    for key in ("first_token_us", "finish_us", "scheduled_us"):
        diff = np.abs(on[key] - off[key])
        if sigma is None:
            assert diff.max() == 0, key
        else:
            assert diff.max() <= 1, key
            assert (diff > 0).mean() < 0.01, key

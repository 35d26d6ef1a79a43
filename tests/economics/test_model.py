"""The capacity model fit, the demand reconstruction, pricing and saved scenario sets (fast, no replay)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from app.economics.decide import decision, money, saved
from app.economics.model.capacity import Assumptions, EngineEvidence, Source, fit_model
from app.economics.model.demand import LengthDistribution, _spread_gaps
from app.economics.predict.calibration import TwinView
from app.economics.predict.scenarios import Analysis, Observed, Prediction, residuals
from app.store import Workspace

TRUE = {"a": 0.009, "b": 1.2e-4, "c": 5e-5, "d": 6e-8, "e": 1.3e-9}
KV = 56000.0
NO_CONFIG = pd.DataFrame(columns=["replica", "kv_tokens", "block_size", "source"])
CONFIG = pd.DataFrame({"replica": ["r0"], "kv_tokens": [KV], "block_size": [16.0], "source": ["vllm:cache_config_info"]})


def _intervals(n: int = 400, seed: int = 3, dt: float = 15.0, with_steps: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scrape intervals whose mean step time follows the model exactly, each interval on its own
    replica (so its 5-minute window, which gives the attention pairs per prefill token, is its own)."""
    rng = np.random.default_rng(seed)
    batch = rng.uniform(2, 60, n)
    prefill = rng.uniform(0, 400, n)  # prefill tokens per step
    kv = rng.uniform(0.05, 0.95, n)
    pairs_per_token = rng.uniform(100, 3000, n)
    step = (TRUE["a"] + TRUE["b"] * batch + TRUE["c"] * prefill + TRUE["d"] * kv * KV
            + TRUE["e"] * prefill * pairs_per_token)
    steps = dt / step
    ts = pd.Timestamp("2026-11-17 00:00:15")
    replicas = [f"r{i}" for i in range(n)]
    intervals = pd.DataFrame({
        "replica": replicas, "ts": ts, "dt_s": dt, "itl_count": batch * steps, "itl_sum": batch * steps * step,
        "generation_tokens": batch * steps, "prompt_tokens": prefill * steps,
        "steps": steps if with_steps else np.nan, "preemptions": 0.0, "ttft_count": 10.0, "ttft_sum": 2.0,
        "queue_count": 10.0, "queue_sum": 0.5, "running": np.ceil(batch), "running_before": np.floor(batch),
        "waiting": np.where(np.arange(n) % 50 == 0, 3.0, 0.0), "waiting_before": 0.0, "kv_usage": kv,
        "kv_before": kv, "resets": 0})
    windows = pd.DataFrame({"window_start": pd.Timestamp("2026-11-17"), "replica": replicas,
                            "prompt_sum": 1000.0, "prompt_sq_sum": 2000.0 * pairs_per_token})
    return intervals, windows


def _evidence(kv_config: pd.DataFrame = NO_CONFIG, steps: pd.DataFrame | None = None,
              top: float | None = 20000.0) -> EngineEvidence:
    return EngineEvidence(kv_config=kv_config, step_token_bounds=steps if steps is not None else
                          pd.DataFrame(columns=["le", "steps"]), length_top_bound=top)


@pytest.mark.parametrize("with_steps", [False, True])
def test_fit_recovers_the_step_law_from_short_intervals(with_steps: bool) -> None:
    """From the mean inter-token latency (every export); a step count, when exported, changes nothing."""
    intervals, windows = _intervals(with_steps=with_steps)
    m = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    got = [m.step_base_s, m.step_per_seq_s, m.step_per_prefill_token_s, m.step_per_context_token_s,
           m.step_per_prefill_pair_s]
    assert got == pytest.approx(list(TRUE.values()), rel=1e-6)
    assert m.fit.r2 == pytest.approx(1.0) and m.fit.windows == 400
    assert m.step_basis.startswith("mean inter-token latency") and "squared" not in m.step_basis
    assert m.step_per_seq_sq_s == 0.0 and m.step_per_seq_sq_until == 0.0
    assert m.sources["step_per_seq_sq_until"].kind == "fitted"  # every parameter says where it came from
    assert m.sources["step_base_s"].kind == "fitted"
    assert m.kv_tokens == KV and m.sources["kv_tokens"] == Source("engine config", "vllm:cache_config_info")
    assert m.sources["block_size"].kind == "engine config"
    assert m.saturation_observed and any("waiting" in e for e in m.saturation_evidence)
    assert m.prefill_tokens_per_s == pytest.approx(1 / 5e-5)
    assert m.flags == []


def test_a_prompt_token_the_prefix_cache_served_costs_no_prefill() -> None:
    """An export with prefix-cache hits: vllm:prompt_tokens_total counts every prompt token, and the
    step law is per token computed. 60 % of each interval's prompt tokens hit the cache on top of the
    computed ones the law was built with, so read without the hits the per-token cost would be 40 %
    of the true one; with them it is the true one, and the share is said, measured."""
    intervals, windows = _intervals()
    computed = intervals["prompt_tokens"]
    served = intervals.assign(prompt_tokens=computed / 0.4, cached_tokens=computed / 0.4 * 0.6)
    m = fit_model(served, windows, _evidence(CONFIG), Assumptions())
    assert m.step_per_prefill_token_s == pytest.approx(TRUE["c"], rel=1e-6)
    assert m.prefix_cached_share == pytest.approx(0.6)
    assert m.sources["prefix_cache"].kind == "measured" and "60.0%" in m.sources["prefix_cache"].detail
    blind = fit_model(served.drop(columns="cached_tokens"), windows, _evidence(CONFIG), Assumptions())
    assert blind.step_per_prefill_token_s == pytest.approx(0.4 * TRUE["c"], rel=1e-6)
    assert math.isnan(blind.prefix_cached_share) and blind.sources["prefix_cache"].kind == "assumed"
    assert "faster prefill" in blind.sources["prefix_cache"].detail


def test_the_api_servers_part_of_ttft_is_measured_where_prefill_time_is_exported() -> None:
    """Mean TTFT 200 ms (10 first tokens, 2 s per interval), mean queue time 50 ms, mean prefill
    (scheduled to first token) 120 ms: 30 ms outside the engine. Without the prefill histogram it
    cannot be told from the prefill: 0, assumed."""
    intervals, windows = _intervals()
    with_prefill = intervals.assign(prefill_count=10.0, prefill_sum=1.2)
    m = fit_model(with_prefill, windows, _evidence(CONFIG), Assumptions())
    assert m.frontend_s == pytest.approx(0.2 - 0.05 - 0.12)
    assert m.sources["frontend_s"].kind == "measured" and "30.0 ms" in m.sources["frontend_s"].detail
    m0 = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    assert m0.frontend_s == 0.0 and m0.sources["frontend_s"].kind == "assumed"


def test_a_batch_that_grows_less_efficient_is_fitted_only_when_the_data_shows_it() -> None:
    intervals, windows = _intervals()
    batch = intervals["itl_sum"] / intervals["dt_s"]
    step = intervals["itl_sum"] / intervals["itl_count"] + 2e-6 * batch ** 2  # 7 ms more at batch 60
    steps = intervals["dt_s"] / step
    prefill_per_step = intervals["prompt_tokens"] / (intervals["dt_s"] / (intervals["itl_sum"] / intervals["itl_count"]))
    intervals = intervals.assign(itl_count=batch * steps, itl_sum=batch * steps * step,
                                 prompt_tokens=prefill_per_step * steps)
    m = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    assert m.step_per_seq_sq_s == pytest.approx(2e-6, rel=1e-6) and "squared" in m.step_basis
    # the batches the fit saw reach u; up to u the law is the data's, past u the squared term goes on
    # along its tangent at u
    u = m.step_per_seq_sq_until
    assert u == m.fit.batch_range[1] and m.sources["step_per_seq_sq_until"].kind == "fitted"
    assert m.step_time(u) - m.step_time(0) == pytest.approx(TRUE["b"] * u + 2e-6 * u * u, rel=1e-6)
    assert m.step_time(3 * u) - m.step_time(0) == pytest.approx(TRUE["b"] * 3 * u + 2e-6 * u * 5 * u, rel=1e-6)


def test_a_squared_term_that_takes_the_per_sequence_cost_s_place_is_not_kept() -> None:
    """A step law with no cost per sequence but a steep curvature: with the squared term the least
    squares leave the per-sequence cost at a few per cent of the linear law's, so the term took that
    cost's place rather than adding to it (``KEPT_BESIDE``); the law stays linear, as on the real
    engine where such a term came from batches of 1 to 15 and, carried to 32, doubled the step."""
    intervals, windows = _intervals()
    batch = intervals["itl_sum"] / intervals["dt_s"]
    base = intervals["itl_sum"] / intervals["itl_count"] - TRUE["b"] * batch  # the law without its per-sequence cost
    step = base + 4e-6 * batch ** 2
    steps = intervals["dt_s"] / step
    prefill_per_step = intervals["prompt_tokens"] / (intervals["dt_s"] / (intervals["itl_sum"] / intervals["itl_count"]))
    intervals = intervals.assign(itl_count=batch * steps, itl_sum=batch * steps * step,
                                 prompt_tokens=prefill_per_step * steps)
    m = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    assert m.step_per_seq_sq_s == 0.0 and m.step_per_seq_sq_until == 0.0 and "squared" not in m.step_basis
    assert m.step_per_seq_s > 0


def test_engine_facts_given_override_what_the_data_says() -> None:
    intervals, windows = _intervals()
    given = Assumptions(max_num_seqs=64, max_num_batched_tokens=2048, kv_cache_tokens=90000, max_model_len=8192,
                        block_size=32, router="random")
    m = fit_model(intervals, windows, _evidence(CONFIG), given)
    assert (m.max_num_seqs, m.max_num_batched_tokens, m.kv_tokens, m.max_model_len, m.block_size, m.router) == (
        64, 2048, 90000, 8192, 32, "random")
    assert {k: m.sources[k].kind for k in GIVEN} == dict.fromkeys(GIVEN, "given")
    # the context cost per step at a full cache is what the data measured, whatever the capacity
    assert m.step_per_context_token_s * 90000 == pytest.approx(TRUE["d"] * KV, rel=1e-6)


GIVEN = ("max_num_seqs", "max_num_batched_tokens", "kv_tokens", "max_model_len", "block_size", "router")


def test_engine_facts_read_from_the_data_or_assumed_with_their_reason() -> None:
    intervals, windows = _intervals()
    # iteration_tokens_total: every step within 2048 tokens, some above 1024 (cumulative buckets)
    steps = pd.DataFrame({"le": [512.0, 1024.0, 2048.0, 4096.0, np.inf], "steps": [600.0, 900.0, 1000.0, 1000.0,
                                                                                   1000.0]})
    m = fit_model(intervals, windows, _evidence(steps=steps, top=20000.0), Assumptions())
    assert (m.max_num_batched_tokens, m.sources["max_num_batched_tokens"].kind) == (2048, "fitted")
    assert "(1024, 2048]" in m.sources["max_num_batched_tokens"].detail
    # vLLM's length buckets stop at the largest 1-2-5 value <= max_model_len: 20000 -> [20000, 50000)
    assert (m.max_model_len, m.sources["max_model_len"].kind) == (32768, "assumed")
    assert "[20000, 50000)" in m.sources["max_model_len"].detail
    assert _evidence(top=100000.0) and fit_model(intervals, windows, _evidence(top=100000.0),
                                                 Assumptions()).max_model_len == 131072
    # no engine config: the KV capacity is left to the fit by simulation
    assert math.isnan(m.kv_tokens) and m.sources["kv_tokens"].kind == "fitted"
    assert m.sources["block_size"] == Source("assumed", "vLLM's default block size")
    assert (m.max_num_seqs, m.sources["max_num_seqs"].kind) == (256, "assumed")
    assert (m.router, m.sources["router"].kind) == ("least_outstanding", "assumed")
    # without iteration_tokens_total the budget is vLLM's default, said to be assumed
    bare = fit_model(intervals, windows, _evidence(), Assumptions())
    assert (bare.max_num_batched_tokens, bare.sources["max_num_batched_tokens"].kind) == (8192, "assumed")


def test_a_queue_that_formed_with_room_in_the_cache_shows_the_batch_cap() -> None:
    intervals, windows = _intervals()
    capped = intervals.index[:5]
    intervals.loc[capped, ["running", "waiting", "kv_usage"]] = [70.0, 4.0, 0.5]
    m = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    assert (m.max_num_seqs, m.sources["max_num_seqs"].kind) == (70, "fitted")


def test_what_cannot_be_identified_is_flagged_never_raised() -> None:
    intervals, windows = _intervals(5)
    intervals["kv_usage"] = intervals["kv_before"] = np.nan
    m = fit_model(intervals, windows, _evidence(), Assumptions())
    assert m.sources["step_base_s"].kind == "assumed" and m.step_base_s > 0
    assert any("scrape intervals of a replica decoding" in f for f in m.flags)
    assert any("kv_cache_usage_perc" in f and "--kv-cache-tokens" in f for f in m.flags)
    empty = fit_model(intervals.iloc[:0], windows.iloc[:0], _evidence(top=None), Assumptions())
    assert empty.flags and empty.max_model_len == 32768


def test_no_saturation_is_said_so() -> None:
    intervals, windows = _intervals()
    intervals["waiting"] = 0.0
    intervals["kv_usage"] = intervals["kv_before"] = 0.5
    m = fit_model(intervals, windows, _evidence(CONFIG), Assumptions())
    assert not m.saturation_observed and m.saturation_evidence == []


def test_an_unknown_source_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="source 'guessed'"):
        Source("guessed")


def test_length_distribution_keeps_bucket_shares_and_fits_the_shape() -> None:
    rng = np.random.default_rng(1)
    true = np.clip(np.rint(rng.lognormal(np.log(650), 0.7, 200_000)), 1, 32768)
    bounds = np.array([1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000], dtype=float)
    le = np.concatenate([bounds, [np.inf]])
    cum = np.array([(true <= b).sum() for b in bounds] + [len(true)], dtype=float)
    dist = LengthDistribution.fit(le, cum, len(true), float(true.sum()), 32768)
    assert dist.mu == pytest.approx(np.log(650), abs=0.02) and dist.sigma == pytest.approx(0.7, abs=0.02)
    draws = dist.sample(200_000, np.random.default_rng(2))
    got = np.array([(draws <= b).mean() for b in bounds])
    assert got == pytest.approx(cum[:-1] / len(true), abs=0.005)
    assert np.percentile(draws, [50, 90]) == pytest.approx(np.percentile(true, [50, 90]), rel=0.03)


def test_a_max_tokens_cap_stays_at_the_bottom_of_its_bucket() -> None:
    """Outputs cut at max_tokens = 1024 pile up at the bottom of the (1000, 2000] bucket; the smooth
    fitted shape would spread them over it (about 10 % too many tokens here). The within-bucket spread
    is set so that the mean is the histogram's ``_sum`` / ``_count``."""
    rng = np.random.default_rng(4)
    true = np.minimum(np.rint(rng.lognormal(np.log(500), 0.7, 200_000)), 1024)
    bounds = np.array([1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000], dtype=float)
    le = np.concatenate([bounds, [np.inf]])
    cum = np.array([(true <= b).sum() for b in bounds] + [len(true)], dtype=float)
    dist = LengthDistribution.fit(le, cum, len(true), float(true.sum()), 32768)
    assert dist.spread < 0.9
    draws = dist.sample(200_000, np.random.default_rng(5))
    assert draws.mean() == pytest.approx(true.mean(), rel=0.01)
    assert np.array([(draws <= b).mean() for b in bounds]) == pytest.approx(cum[:-1] / len(true), abs=0.005)
    smooth = LengthDistribution.fit(le, cum, len(true), float("nan"), 32768)  # no _sum: the fitted shape
    assert smooth.spread == 1.0 and smooth.sample(200_000, np.random.default_rng(5)).mean() > 1.05 * true.mean()


def test_a_scrape_gap_spreads_its_first_tokens_back() -> None:
    grid = pd.date_range("2026-11-17", periods=6, freq="60s")
    observed = pd.Series([10.0, 12.0, 30.0, 11.0], index=grid[[0, 1, 4, 5]])
    counts, gaps = _spread_gaps(grid, observed)
    assert counts.tolist() == [10, 12, 10, 10, 10, 11] and gaps == 1


def _view(ttft: float, tpot: float, joint: float, queue_s: float) -> TwinView:
    return TwinView(itl_mean_s=0.02, prefill_mean_s=0.1, kv_by_window=np.zeros(1), kv_tokens_by_window=np.zeros(1),
                    running_mean=8.0, running_peak=20.0, waiting_mean=0.5, queue_mean_s={"chat": queue_s},
                    ttft_share={"chat": ttft}, tpot_share={"chat": tpot}, joint_share={"chat": joint}, dispersion=None)


def test_the_residual_step_by_hand() -> None:
    """Two seeds against the histograms: TTFT 5 % observed and 7 % / 9 % twin (mean 8 %: 60 % off, 3 pp
    beyond the draw's noise of 2 sqrt(0.05 * 0.95 / 10000 + 0.0002 / 2) = 2.05 pp); TPOT 0.4 % observed
    and 0.5 % twin, below the 1 % floor: 0.1 pp off is 10 % of the floor, within the noise; the twin's
    joint 7.5 % inside the observed bounds [6, 9] %: no residual."""
    obs = Observed(replicas=4, requests={"chat": 10_000.0}, ttft={"chat": 0.05}, tpot={"chat": 0.004},
                   joint_low={"chat": 0.06}, joint_high={"chat": 0.09})
    targets = SimpleNamespace(queue_mean_s={"chat": 0.2})
    (path, r), = residuals(obs, targets, [_view(0.07, 0.005, 0.07, 0.1), _view(0.09, 0.005, 0.08, 0.3)]).items()
    assert path == "chat"
    assert (r.ttft_predicted, r.ttft_observed, r.ttft) == pytest.approx((0.08, 0.05, 0.6))
    assert r.ttft_noise == pytest.approx(2 * math.sqrt(0.05 * 0.95 / 10_000 + 0.0002 / 2))
    assert (r.tpot_predicted, r.tpot) == pytest.approx((0.005, 0.1))
    assert r.tpot_noise == pytest.approx(2 * math.sqrt(0.004 * 0.996 / 10_000))  # the seeds agree: no spread
    assert (r.joint, r.joint_predicted) == (0.0, pytest.approx(0.075))
    assert (r.queue_mean_s_observed, r.queue_mean_s_predicted) == pytest.approx((0.2, 0.2))
    assert not r.within_noise("ttft") and r.within_noise("tpot") and not r.within_noise("joint")
    assert [r.of(m) for m in ("ttft", "tpot", "joint")] == pytest.approx([0.6, 0.1, 0.0])
    # the JSON the scenarios document carries, with the keys it always had
    assert list(r.as_json()) == ["ttft", "ttft_predicted", "ttft_observed", "ttft_noise", "tpot", "tpot_predicted",
                                 "tpot_observed", "tpot_noise", "joint", "joint_predicted", "queue_mean_s_observed",
                                 "queue_mean_s_predicted"]


def _analysis(requests: dict[str, float], hours: float = 24.0) -> Analysis:
    class _Demand:
        duration_s = hours * 3600
        notes: list[str] = []

    obs = Observed(replicas=4, requests=requests, ttft={}, tpot={}, joint_low={}, joint_high={})
    return Analysis(model=None, demand=_Demand(), observed=obs, thresholds={})  # type: ignore[arg-type]


def _pred(n: int, path: str, share: float) -> Prediction:
    return Prediction(replicas=n, traffic=1.0, context=1.0, path=path, requests=0, ttft_share=share,
                      tpot_share=0.0, breach_share=share, breach_share_low=share * 0.8,
                      breach_share_high=share * 1.2, extrapolated=False, reasons=[], seeds=[])


def test_pricing_split_cheapest_and_break_even() -> None:
    an = _analysis({"chat": 24_000, "batch": 8_000})  # 1000 and 333.3 requests per hour
    preds = [_pred(3, "chat", 0.10), _pred(3, "batch", 0.05), _pred(4, "chat", 0.02), _pred(4, "batch", 0.01),
             _pred(5, "chat", 0.015), _pred(5, "batch", 0.01)]
    prices = money.Prices(replica_hour=4.0, breach={"chat": 0.05, "batch": 0.01}, horizon_hours=100)
    rows = decision.price_rows(an, preds, prices)
    r3 = {r["path"]: r for r in rows if r["replicas"] == 3}
    assert r3["chat"]["requests"] == pytest.approx(100_000)
    assert r3["chat"]["headroom_cost"] == pytest.approx(1200 * 0.75)  # split by requests 3:1
    assert r3["chat"]["breach_cost"] == pytest.approx(100_000 * 0.10 * 0.05)
    totals = decision.fleet_totals(rows)
    assert [t["total_cost"] for t in totals] == pytest.approx([1200 + 500 + 16.6666666667,
                                                               1600 + 100 + 3.3333333333,
                                                               2000 + 75 + 3.3333333333])
    (best,) = decision.cheapest(totals)
    # at the low ends of the intervals 3 replicas would win ($1613 < $1683): the data does not decide
    assert (best["replicas"], best["replicas_if_low"], best["replicas_if_high"]) == (4, 3, 4)
    assert not best["determined_by_data"]
    be = decision.break_even(rows, prices, 4, 1.0, 1.0)
    # the 5th replica costs $400 and removes 500 chat breaches; batch saves nothing
    assert be["chat"] == pytest.approx(400 / 500)
    assert be["batch"] is None
    # a grid with a gap (3, 5): the break-even of the cheapest is for its next size, two replicas more
    gap = [r for r in rows if r["replicas"] != 4]
    assert decision.next_size(gap, 3, 1.0, 1.0) == 5 and decision.next_size(gap, 5, 1.0, 1.0) is None
    be = decision.break_even(gap, prices, 3, 1.0, 1.0)
    # two replicas cost $800; chat loses 8,500 breaches, batch 1,333 (4 pp of 33,333) saved at $0.01
    assert be["chat"] == pytest.approx((800 - 0.04 * 100_000 / 3 * 0.01) / (100_000 * (0.10 - 0.015)))
    equal = decision.price_rows(an, preds, prices, split="equal")
    assert {r["headroom_cost"] for r in equal if r["replicas"] == 3} == {600.0}


def test_saved_sets_round_trip(tmp_path: object) -> None:
    doc = {"scenarios": [], "fleet": [{"replicas": 4, "traffic": 1.0, "context": 1.0, "total_cost": 10.0,
                                       "breach_cost": 2.0, "headroom_cost": 8.0}]}
    other = {"scenarios": [], "fleet": [{"replicas": 4, "traffic": 1.0, "context": 1.0, "total_cost": 12.5,
                                         "breach_cost": 4.5, "headroom_cost": 8.0}]}
    with Workspace(":memory:") as ws:
        saved.save(ws, "monday", {"replicas": [4]}, doc)
        saved.save(ws, "tuesday", {"replicas": [4]}, other)
        text = saved.export_json(ws)
        assert saved.names(ws) == ["monday", "tuesday"]
        (row,) = saved.compare(saved.get(ws, "monday"), saved.get(ws, "tuesday"))
        assert row["difference"] == 2.5
        saved.delete(ws, "monday")
        assert saved.names(ws) == ["tuesday"]
    with Workspace(":memory:") as ws2:
        assert saved.import_json(ws2, text) == ["monday", "tuesday"]
        assert saved.get(ws2, "monday")["document"] == json.loads(json.dumps(doc))
        with pytest.raises(ValueError, match="not a scenario-set export"):
            saved.import_json(ws2, '{"sets": {}}')
        with pytest.raises(ValueError, match="no saved scenario set"):
            saved.get(ws2, "friday")

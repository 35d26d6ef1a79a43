"""The capacity model fit, the demand reconstruction, pricing and saved scenario sets (fast, no replay)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from app.economics import decision, money, saved
from app.economics.capacity import Assumptions, fit_from_windows
from app.economics.demand import LengthDistribution, _spread_gaps
from app.economics.scenarios import Analysis, Observed, Prediction
from app.store import Workspace

TRUE = {"a": 0.009, "b": 1.2e-4, "c": 5e-5, "d": 6e-8, "e": 1.3e-9}
KV = 56000.0


def _windows(n_windows: int = 400, seed: int = 3, window_s: int = 300) -> pd.DataFrame:
    """Replica windows whose step time follows the model exactly."""
    rng = np.random.default_rng(seed)
    batch = rng.uniform(2, 60, n_windows)
    prefill_per_step = rng.uniform(0, 400, n_windows)
    kv = rng.uniform(0.05, 0.95, n_windows)
    pairs_per_step = rng.uniform(0, 2e6, n_windows)
    step = (TRUE["a"] + TRUE["b"] * batch + TRUE["c"] * prefill_per_step + TRUE["d"] * kv * KV
            + TRUE["e"] * pairs_per_step)
    steps = window_s / step
    return pd.DataFrame({
        "window_start": pd.date_range("2026-11-17", periods=n_windows, freq=f"{window_s}s"),
        "replica": "r0", "generation_tokens": batch * steps, "prompt_tokens": prefill_per_step * steps,
        "steps": steps, "running_min": np.floor(batch), "running_mean": batch, "running_max": np.ceil(batch),
        "waiting_mean": 0.0, "waiting_max": np.where(np.arange(n_windows) % 50 == 0, 3.0, 0.0),
        "kv_mean": kv, "kv_max": np.minimum(kv + 0.03, 1.0), "preemptions": 0.0, "finished": 100.0,
        "prompt_count": 100.0, "prompt_sum": 1e5, "generation_count": 100.0, "generation_sum": 3e4,
        "prompt_sq_sum": pairs_per_step * steps * 2, "resets": 0.0,
    })


def test_fit_recovers_the_step_time_model() -> None:
    kv_config = pd.DataFrame({"replica": ["r0"], "kv_tokens": [KV], "block_size": [16.0],
                              "source": ["vllm:cache_config_info"]})
    m = fit_from_windows(_windows(), kv_config, Assumptions())
    got = [m.step_base_s, m.step_per_seq_s, m.step_per_prefill_token_s, m.step_per_context_token_s,
           m.step_per_prefill_pair_s]
    assert got == pytest.approx(list(TRUE.values()), rel=1e-6)
    assert m.fit.r2 == pytest.approx(1.0)
    assert m.kv_tokens == KV and m.kv_source.startswith("vllm:cache_config_info")
    assert m.saturation_observed and any("waiting" in e for e in m.saturation_evidence)
    assert m.prefill_tokens_per_s == pytest.approx(1 / 5e-5)


def test_kv_capacity_by_littles_law_without_engine_config() -> None:
    frame = _windows()
    # tokens held = running x (mean prompt + half the mean output) = B x (1000 + 150)
    frame["kv_mean"] = frame["running_mean"] * 1150 / KV
    m = fit_from_windows(frame, pd.DataFrame(columns=["replica", "kv_tokens", "block_size", "source"]),
                         Assumptions())
    assert m.kv_tokens == pytest.approx(KV)
    assert "Little" in m.kv_source


def test_no_saturation_is_said_so() -> None:
    frame = _windows().assign(waiting_max=0.0, kv_max=0.5)
    kv_config = pd.DataFrame({"replica": ["r0"], "kv_tokens": [KV], "block_size": [16.0], "source": ["x"]})
    m = fit_from_windows(frame, kv_config, Assumptions())
    assert not m.saturation_observed and m.saturation_evidence == []


def test_too_few_busy_windows_is_a_clear_error() -> None:
    frame = _windows(5)
    with pytest.raises(ValueError, match="busy replica windows"):
        fit_from_windows(frame, pd.DataFrame({"replica": ["r0"], "kv_tokens": [KV], "block_size": [16.0],
                                              "source": ["x"]}), Assumptions())


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


def test_a_scrape_gap_spreads_its_first_tokens_back() -> None:
    grid = pd.date_range("2026-11-17", periods=6, freq="60s")
    observed = pd.Series([10.0, 12.0, 30.0, 11.0], index=grid[[0, 1, 4, 5]])
    counts, gaps = _spread_gaps(grid, observed)
    assert counts.tolist() == [10, 12, 10, 10, 10, 11] and gaps == 1


def _analysis(requests: dict[str, float], hours: float = 24.0) -> Analysis:
    class _Demand:
        duration_s = hours * 3600
        notes: list[str] = []

    obs = Observed(replicas=4, requests=requests, ttft={}, tpot={}, joint_low={}, joint_high={},
                   ttft_mean_s={}, tpot_mean_s={})
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

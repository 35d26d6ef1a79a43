"""Queueing (docs/methods.md#queueing) and the decision arithmetic (docs/methods.md#decision), exactly."""

from __future__ import annotations

import numpy as np
import pytest

from app.economics.check import curve, queueing
from app.economics.decide import money

REL = 1e-9


def test_tv_4_1_arrival_variability() -> None:
    counts = [9, 22, 12, 18, 25, 8, 14, 20, 11, 11]
    assert queueing.index_of_dispersion(counts) == pytest.approx(2.2962962962962963, rel=REL)


def test_tv_4_2_service_variability_from_buckets() -> None:
    m1, m2, cs2 = queueing.bucket_moments([0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0],
                                          [40, 180, 520, 760, 900, 975, 1000])
    assert (m1, m2, cs2) == pytest.approx((0.564, 0.4530166666666667, 0.42415078047717286), rel=REL)


def test_tv_4_3_kingman() -> None:
    k = queueing.kingman_terms(1.5, 0.53, 2.2962962962962963, 0.42415078047717286)
    assert k["rho"] == pytest.approx(0.795, rel=REL)
    assert k["wait_s"] == pytest.approx(2.795757014142686, rel=REL)
    assert queueing.kingman_terms(1.5, 0.53, 1, 1)["wait_s"] == pytest.approx(2.0553658536585373, rel=REL)


def test_tv_4_4_and_4_5_erlang_c() -> None:
    assert queueing.erlang_c(2, 1.5) == pytest.approx(0.6428571428571429, rel=REL)
    assert queueing.erlang_c_wait(2, 3, 2) == pytest.approx(0.6428571428571429, rel=REL)
    assert queueing.erlang_c_tail(2, 3, 2, 0.5) == pytest.approx(0.38991256695812154, rel=REL)
    assert queueing.erlang_c_tail(2, 3, 2, 1.0) == pytest.approx(0.23649392646735581, rel=REL)
    factor = (2.2962962962962963 + 0.42415078047717286) / 2
    assert queueing.allen_cunneen_wait(2, 3, 2, 2.2962962962962963, 0.42415078047717286) == pytest.approx(
        0.6428571428571429 * factor, rel=REL)
    assert queueing.allen_cunneen_wait(2, 3, 2, 2.2962962962962963, 0.42415078047717286) == pytest.approx(
        0.8744294175343293, rel=REL)
    assert queueing.erlang_c(8, 7) == pytest.approx(0.6353160175364295, rel=REL)
    assert queueing.erlang_c_wait(8, 14, 2) == pytest.approx(0.31765800876821476, rel=REL)
    assert queueing.erlang_c_tail(8, 14, 2, 0.5) == pytest.approx(0.23371970149856794, rel=REL)
    assert queueing.erlang_c_tail(8, 14, 2, 1.0) == pytest.approx(0.08598067317804949, rel=REL)
    assert queueing.allen_cunneen_wait(8, 14, 2, 2.2962962962962963, 0.42415078047717286) == pytest.approx(
        0.43208590068358543, rel=REL)


# -- TV-7.1 ------------------------------------------------------------------------------------------
REQUESTS = np.array([36000, 43200, 50400, 57600, 64800, 72000, 54000, 46800], dtype=float)
SHARES = np.array([0.004, 0.006, 0.005, 0.012, 0.030, 0.080, 0.010, 0.007])
N_OBS, HOURS, WINDOW_S = 4, 8, 3600
PRICES = money.Prices(replica_hour=4.0, breach={"chat": 0.05}, horizon_hours=HOURS)


def _tv71():
    load = REQUESTS / WINDOW_S / N_OBS
    fitted = curve.fit(load, SHARES, REQUESTS)
    return fitted, load


def test_tv_7_1_isotonic_fit() -> None:
    fitted, load = _tv71()
    assert load.tolist() == [2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 3.75, 3.25]
    assert fitted.x.tolist() == [2.5, 3.0, 3.25, 3.5, 3.75, 4.0, 4.5, 5.0]
    assert fitted.y == pytest.approx([0.004, 0.005974358974358974, 0.005974358974358974, 0.005974358974358974,
                                      0.01, 0.012, 0.03, 0.08], rel=REL)


@pytest.mark.parametrize(("k", "point", "low", "high", "capacity", "total", "total_low", "total_high"), [
    (3, 0.0566870925684485, 0.0566870925684485, 0.4777040417209909, 96, 1300.033846153846, 1300.033846153846,
     10242.433846153848),
    (4, 0.023347457627118644, 0.023347457627118644, 0.023347457627118644, 128, 623.9000000000001,
     623.9000000000001, 623.9000000000001),
    (5, 0.006605475880052152, 0.005859713168187745, 0.006605475880052152, 160, 300.3003076923077,
     284.4603076923077, 300.3003076923077),
    (6, 0.004725047080979284, 0.003064030131826742, 0.004725047080979284, 192, 292.36, 257.08, 292.36),
])
def test_tv_7_1_decision_table(k: int, point: float, low: float, high: float, capacity: float, total: float,
                               total_low: float, total_high: float) -> None:
    fitted, load = _tv71()
    sc = curve.scenario(fitted, load, np.full(8, N_OBS), REQUESTS, k)
    assert (sc.share, sc.share_low, sc.share_high) == pytest.approx((point, low, high), rel=REL)
    assert money.headroom_cost(k, PRICES) == capacity
    r = REQUESTS.sum()
    assert r == 424800
    for share, want in ((sc.share, total), (sc.share_low, total_low), (sc.share_high, total_high)):
        got = money.path_cost(r, share, PRICES.breach["chat"], money.headroom_cost(k, PRICES))["total_cost"]
        assert got == pytest.approx(want, rel=REL)


def test_tv_7_1_decision() -> None:
    fitted, load = _tv71()
    r = REQUESTS.sum()
    totals = []
    for k in (3, 4, 5, 6):
        sc = curve.scenario(fitted, load, np.full(8, N_OBS), REQUESTS, k)
        totals.append((k, money.path_cost(r, sc.share, 0.05, money.headroom_cost(k, PRICES))["total_cost"]))
    assert money.cheapest(totals) == (6, pytest.approx(292.36, rel=REL))
    s5 = curve.scenario(fitted, load, np.full(8, N_OBS), REQUESTS, 5).share
    s6 = curve.scenario(fitted, load, np.full(8, N_OBS), REQUESTS, 6).share
    # 5 -> 6 adds $32 of capacity and removes $39.94 of breach cost
    assert money.headroom_cost(6, PRICES) - money.headroom_cost(5, PRICES) == 32
    assert r * (s5 - s6) * 0.05 == pytest.approx(39.9403076923077, rel=1e-6)
    # so the break-even price of a breach for the 6th replica is below $0.05
    assert money.break_even_breach_price(r, s5, s6, PRICES) == pytest.approx(32 / (r * (s5 - s6)), rel=REL)
    assert money.break_even_breach_price(r, s5, s6, PRICES) < 0.05


def test_split_and_cost_per_kept_request() -> None:
    assert money.split_by_requests(100.0, {"a": 3, "b": 1}) == {"a": 75.0, "b": 25.0}
    assert money.cost_per_kept_request(90.0, 1000, 0.1) == pytest.approx(0.1)
    assert money.cost_per_kept_request(90.0, 1000, 1.0) is None
    assert money.Prices.from_gpu(2.5, 8, {"a": 0.1}).replica_hour == 20.0
    with pytest.raises(ValueError):
        money.Prices(replica_hour=-1, breach={})

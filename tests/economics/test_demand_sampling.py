"""``LengthDistribution.sample``: the compiled bucket draw equals numpy's comparison matrix it replaced,
on window shares with zero, repeated and NaN cumulative values; the compiled length inside the bucket
equals the formulation through scipy's ``lognorm.ppf`` bit for bit (buckets where the fit puts no
mass, a spread of 1 and not, window shares and whole-range shares)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.economics.model.demand import Demand, LengthDistribution, PathDemand, _buckets_below, synthesize


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), windows=st.integers(1, 30), buckets=st.integers(1, 12),
       n=st.integers(0, 400), zeros=st.booleans(), nan=st.booleans())
def test_the_compiled_bucket_count_is_the_comparison_matrix(seed: int, windows: int, buckets: int, n: int,
                                                             zeros: bool, nan: bool) -> None:
    rng = np.random.default_rng(seed)
    shares = rng.dirichlet(np.ones(buckets), size=windows)
    if zeros:
        shares[:, rng.integers(0, buckets)] = 0.0
    cum = np.cumsum(shares, axis=1)
    if nan:
        cum[rng.integers(0, windows)] = np.nan
    row = rng.integers(-2, windows + 2, size=n).clip(0, windows - 1)
    u = rng.uniform(size=n)
    u[: n // 10] = cum[row[: n // 10], 0] if n else u[:0]  # draws equal to a cumulative share
    last = buckets - 1
    want = np.minimum((u[:, None] > cum[row]).sum(axis=1), last)
    got = _buckets_below(u, cum, row, last)
    assert got.dtype == np.int32 and np.array_equal(got, want)  # a bucket index; a month is ~20 M of them


def _lengths_through_scipy(d: LengthDistribution, n: int, rng: np.random.Generator,
                           windows: np.ndarray | None) -> np.ndarray:
    """The draw as numpy and scipy write it: a bucket, then ``lognorm.ppf`` of a share inside it."""
    from scipy import stats

    if windows is not None and d.local_shares is not None:
        u = rng.uniform(size=n)
        bucket = _buckets_below(u, np.cumsum(d.local_shares, axis=1), windows, len(d.shares) - 1)
    else:
        bucket = rng.choice(len(d.shares), size=n, p=d.shares)
    lower_e, upper_e = d._edges()
    dist = stats.lognorm(s=d.sigma, scale=math.exp(d.mu))
    lower, upper = lower_e[bucket], upper_e[bucket]
    lo_cdf, hi_cdf = dist.cdf(lower_e)[bucket], dist.cdf(upper_e)[bucket]
    flat = hi_cdf - lo_cdf < 1e-12
    v = rng.uniform(size=n)
    x = np.where(flat, lower + v * (upper - lower), dist.ppf(lo_cdf + v * np.where(flat, 0, hi_cdf - lo_cdf)))
    if d.spread != 1.0:
        x = np.minimum(lower + d.spread * (x - lower), upper)
    return np.clip(np.rint(x), 1, d.max_len).astype(np.int64)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), buckets=st.integers(1, 10), windows=st.sampled_from([None, 1, 7]),
       mu=st.floats(0.0, 9.0), sigma=st.floats(0.05, 2.5), spread=st.sampled_from([1.0, 0.4, 1.3, 2.0]),
       n=st.integers(0, 3000))
def test_the_compiled_length_draw_is_scipys(seed: int, buckets: int, windows: int | None, mu: float, sigma: float,
                                            spread: float, n: int) -> None:
    rng = np.random.default_rng(seed)
    bounds = np.unique(np.round(np.exp(rng.uniform(0, 10, size=buckets - 1))))
    d = LengthDistribution(bounds=bounds, shares=rng.dirichlet(np.ones(len(bounds) + 1)), mu=mu, sigma=sigma,
                           count=1.0, mean_observed=float("nan"), max_len=int(rng.integers(2, 40000)),
                           spread=spread)
    rows = None
    if windows is not None:
        d.local_shares = rng.dirichlet(np.ones(len(bounds) + 1), size=windows)
        rows = rng.integers(0, windows, size=n)
    got = d.sample(n, np.random.default_rng([seed, 1]), windows=rows)
    want = _lengths_through_scipy(d, n, np.random.default_rng([seed, 1]), rows)
    assert got.dtype == np.int64 and np.array_equal(got, want)


@pytest.mark.parametrize("traffic, copies", [(1.0, 1), (0.5, 1), (2.0, 2), (2.5, 3)])
def test_each_request_belongs_to_one_copy_of_the_observed_users(traffic: float, copies: int) -> None:
    """``stream``: at traffic x2 every window's requests are two copies of its observed count; at x2.5
    two whole copies and a thinned third; the copies' windows hold the observed count each."""
    lengths = LengthDistribution.assumed(300.0, 4096)
    demand = Demand(origin=0.0, window_s=60, replicas=np.ones(3), paths=[PathDemand(
        name="chat", window_start=np.arange(3) * 60.0, requests=np.array([10.0, 40.0, 25.0]), ttft_mean_s=np.zeros(3),
        prompt=lengths, output=LengthDistribution.assumed(50.0, 4096))])
    reqs = synthesize(demand, traffic=traffic, seed=4)
    stream = reqs["stream"]
    assert set(np.unique(stream)) == set(range(copies))
    window = reqs["arrival_s"] // 60
    for s in range(int(traffic)):  # every whole copy has each window's observed count
        counts = np.bincount(window[stream == s].astype(int), minlength=3)
        assert counts.tolist() == [10, 40, 25]

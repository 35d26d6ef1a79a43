"""The bucket draw of ``LengthDistribution.sample``: the compiled count equals numpy's comparison
matrix it replaced, on window shares with zero, repeated and NaN cumulative values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.economics.demand import _buckets_below


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

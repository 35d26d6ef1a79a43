"""The observed demand, reconstructed from the metrics, and synthesised again for a scenario.

vLLM exports no arrival counter. Demand per path and window comes from the TTFT ``_count``
increases (first tokens), shifted back by the mean TTFT of the time they came (finish-time counters
lag more). The window is the export's own scrape interval where it is 5 s (``demand_window_s``: a
5 s scrape resolves a 30 s burst that a per-minute rate would smooth away), else a minute. A scrape gap puts all its first tokens into the window after it; they are spread back
evenly over the gap. Prompt and output lengths come from the ``request_prompt_tokens`` and
``request_generation_tokens`` histograms: a lognormal is fitted to each path's bucket counts
(interval-censored maximum likelihood), and a request's length is drawn by picking a bucket with the
bucket shares observed around when the request finished (5-minute blocks: a burst of long prompts
stays where it was) and then a value inside it from the fitted shape (uniform sampling inside
buckets was 25 % off at high N' in a prototype). The open top bucket takes the fitted tail, cut at
``max_model_len``; its mean is reported against the one the histogram ``_sum`` implies.

Assumptions (stated in the scenario output): arrivals are Poisson inside a window; prompt and output
lengths are independent; within a 5-minute block a path's length mix is stationary.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from numba import njit
from scipy import optimize, special

from app import sql
from app.cube import ensure_cube
from app.store import Workspace

DEMAND_WINDOW_S = 60  # the demand window (and a pushdown's: its increase() windows are minutes)
# a finer window, at the export's own scrape interval: a 5 s scrape resolves a 30 s burst that a
# per-minute Poisson rate would spread over its minute (a real vLLM engine's burst: the twin's 99th-
# percentile batch 17 per minute against 31 observed, 29 per 5 s). At 15 s scrapes the minute did
# better on the simulated fleets (an autoscaler replayed on f2-rag-4x: +1 % against +28 % of the
# true breach share), so finer windows are kept to where they were shown to help
FINE_DEMAND_WINDOWS_S = (5,)
MAX_DEMAND_WINDOWS = 50_000  # beyond this many windows (a week at 15 s) the demand is read per minute
LENGTH_BLOCK_S = 300  # length mixes are pooled over 5 minutes (lengths are observed at finish)
# the signals the demand queries read: its cube holds only these (at a window of the scrape interval a
# full cube has a row per sample; these are about a fifth of a vLLM export's series)
DEMAND_SIGNALS = ("ttft", "prompt_tokens_total", "generation_tokens_total", "prompt_tokens", "generation_tokens",
                  "prefix_cache_hits_total", "prompt_tokens_cached_total")
DEMAND_BUCKETS = ("prompt_tokens", "generation_tokens")  # of the TTFT histogram the demand reads count and sum
# the counters of the prefix cache's share per window (``cached_share_by_window``): its cube holds these only
PREFIX_SIGNALS = ("prompt_tokens_total", "prefix_cache_queries_total", "prefix_cache_hits_total",
                  "prompt_tokens_cached_total")
DEFAULT_THINK_S = 30.0  # a person reads an answer and writes the next message: the metrics do not show it
ASSUMED_MEAN = {"prompt_tokens": 1000.0, "generation_tokens": 250.0}  # without histogram or counter
SAMPLE_CHUNK = 1 << 18  # requests whose lengths are drawn at once (a dozen temporaries each)


@dataclass
class LengthDistribution:
    """Lengths (tokens) of one path: bucket bounds with their observed shares, and a fitted lognormal."""

    bounds: np.ndarray  # finite upper bounds, ascending
    shares: np.ndarray  # share of requests per bucket, the last entry is the open top bucket
    mu: float
    sigma: float
    count: float
    mean_observed: float  # _sum / _count
    max_len: int
    local_shares: np.ndarray | None = None  # [window, bucket] shares where and when they were observed
    # where inside its bucket a length sits: lower bound + spread x (the fitted shape's offset); the
    # spread is set so that the mean equals ``_sum / _count`` (a max_tokens cap piles outputs at the
    # bottom of their bucket, which the smooth shape would spread over it)
    spread: float = 1.0

    @classmethod
    def fit(cls, le: np.ndarray, cumulative: np.ndarray, count: float, total: float, max_len: int,
            min_len: int = 1) -> LengthDistribution:
        order = np.argsort(le)
        le, cumulative = np.asarray(le, float)[order], np.asarray(cumulative, float)[order]
        finite = np.isfinite(le)
        bounds, cum = le[finite], cumulative[finite]
        n_total = cumulative[~finite].max() if (~finite).any() else count
        per_bucket = np.diff(np.concatenate([[0.0], cum, [n_total]]))
        per_bucket = np.maximum(per_bucket, 0)
        if n_total <= 0:
            raise ValueError("length histogram without observations")
        edges = np.concatenate([[min_len - 0.5], bounds + 0.5, [np.inf]])
        mean = total / count if count > 0 else float("nan")

        def nll(theta: np.ndarray) -> float:
            mu, log_sigma = theta
            sigma = math.exp(log_sigma)
            cdf = special.ndtr((np.log(np.maximum(edges, 1e-9)) - mu) / sigma)
            p = np.maximum(np.diff(cdf), 1e-300)
            return float(-(per_bucket * np.log(p)).sum())

        start = np.array([math.log(max(mean, 2.0)) if math.isfinite(mean) else 5.0, math.log(0.8)])
        res = optimize.minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-9})
        out = cls(bounds=bounds, shares=per_bucket / per_bucket.sum(), mu=float(res.x[0]),
                  sigma=float(math.exp(res.x[1])), count=float(n_total), mean_observed=mean, max_len=max_len)
        out.spread = out._spread_for_mean()
        return out

    @classmethod
    def assumed(cls, mean: float, max_len: int, sigma: float = 0.8) -> LengthDistribution:
        """Lengths when the export has no length histogram: a lognormal of the given mean (from the
        token counters) and an assumed spread."""
        mean = min(max(mean, 1.0), max_len / 2)
        return cls(bounds=np.zeros(0), shares=np.ones(1), mu=math.log(mean) - sigma * sigma / 2, sigma=sigma,
                   count=0.0, mean_observed=mean, max_len=max_len)

    def _edges(self) -> tuple[np.ndarray, np.ndarray]:
        lower = np.concatenate([[0.5], self.bounds + 0.5])
        upper = np.maximum(np.concatenate([self.bounds + 0.5, [self.max_len + 0.5]]), lower + 1e-6)
        return lower, upper

    def _cdf(self, x: np.ndarray, scale: float) -> np.ndarray:
        """The fitted lognormal's CDF at ``x`` (scale ``exp(mu)``): what ``scipy.stats.lognorm(s=sigma,
        scale=scale).cdf`` computes at positive ``x``, operation for operation, without importing
        scipy.stats (most of the import every replay worker makes before its first run)."""
        with np.errstate(divide="ignore"):
            return special.ndtr(np.log(x / scale) / self.sigma)

    def _spread_for_mean(self) -> float:
        """The within-bucket spread whose mean length is the observed mean (1 when the histogram has
        no usable ``_sum``): the mean is linear in the spread, from each bucket's lower bound and the
        fitted lognormal's mean inside the bucket."""
        if not math.isfinite(self.mean_observed) or self.mean_observed <= 0:
            return 1.0
        lower, upper = self._edges()
        s, mu = self.sigma, self.mu
        a, b = special.ndtr((np.log(lower) - mu) / s), special.ndtr((np.log(upper) - mu) / s)
        pa = special.ndtr((np.log(lower) - mu - s * s) / s)
        pb = special.ndtr((np.log(upper) - mu - s * s) / s)
        mass = b - a
        with np.errstate(invalid="ignore", divide="ignore"):
            inside = np.where(mass > 1e-12, math.exp(mu + s * s / 2) * (pb - pa) / mass, (lower + upper) / 2)
        inside = np.clip(inside, lower, upper)
        base = float((self.shares * lower).sum())
        offset = float((self.shares * (inside - lower)).sum())
        if offset <= 0:
            return 1.0
        return float(np.clip((self.mean_observed - base) / offset, 0.0, 2.0))

    def sample(self, n: int, rng: np.random.Generator, windows: np.ndarray | None = None) -> np.ndarray:
        """``n`` lengths: a bucket by the observed shares (of each request's window when ``windows``
        is given and window shares are known, else of the whole range), then the fitted shape inside it."""
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if windows is not None and self.local_shares is not None:
            cum = np.cumsum(self.local_shares, axis=1)  # per window, not per request: a month is millions
            inside = windows.min() >= 0 and windows.max() < len(self.local_shares)
            row = windows if inside else np.clip(windows, 0, len(self.local_shares) - 1)
            u = rng.uniform(size=n)
            bucket = _buckets_below(u, cum, row, len(self.shares) - 1)
            del u, row
        else:
            bucket = rng.choice(len(self.shares), size=n, p=self.shares)
        lower, upper = self._edges()
        scale = math.exp(self.mu)
        # the fit's CDF at each bucket's edges, once per bucket rather than once per request
        lo_cdf, hi_cdf = self._cdf(lower, scale), self._cdf(upper, scale)
        u = rng.uniform(size=n)
        out = np.empty(n, dtype=np.int64)
        for a in range(0, n, SAMPLE_CHUNK):  # a chunk at a time
            part = slice(a, a + SAMPLE_CHUNK)
            # the fit's quantile at each request's share inside its bucket: what ``dist.ppf`` computes
            # for 0 < q < 1, exp(sigma * ndtri(q)) * scale, without scipy's per-call checks and copies
            x = special.ndtri(_shares_in_buckets(bucket[part], u[part], lo_cdf, hi_cdf))
            x *= self.sigma
            np.exp(x, out=x)
            x *= scale
            out[part] = _lengths_in_buckets(bucket[part], u[part], x, lower, upper, lo_cdf, hi_cdf, self.spread,
                                            self.max_len)
        return out


@njit(cache=True)
def _shares_in_buckets(bucket: np.ndarray, v: np.ndarray, lo_cdf: np.ndarray, hi_cdf: np.ndarray) -> np.ndarray:
    """Per request the fit's CDF at its draw ``v`` inside its bucket (the bucket's lower CDF where the
    fit puts no mass inside it)."""
    q = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        b = bucket[i]
        mass = hi_cdf[b] - lo_cdf[b]
        q[i] = lo_cdf[b] + v[i] * (0.0 if mass < 1e-12 else mass)
    return q


@njit(cache=True)
def _lengths_in_buckets(bucket: np.ndarray, v: np.ndarray, quantile: np.ndarray, lower: np.ndarray,
                        upper: np.ndarray, lo_cdf: np.ndarray, hi_cdf: np.ndarray, spread: float,
                        max_len: int) -> np.ndarray:
    """Per request its length: the fit's quantile, or uniform inside the bucket where the fit puts no
    mass there, spread about the bucket's lower bound, rounded and kept within 1..``max_len``."""
    out = np.empty(v.shape[0], dtype=np.int64)
    for i in range(v.shape[0]):
        b = bucket[i]
        lo, hi = lower[b], upper[b]
        x = lo + v[i] * (hi - lo) if hi_cdf[b] - lo_cdf[b] < 1e-12 else quantile[i]
        if spread != 1.0:
            x = min(lo + spread * (x - lo), hi)
        out[i] = int(min(max(np.rint(x), 1.0), float(max_len)))
    return out


@njit(cache=True)
def _buckets_below(u: np.ndarray, cum: np.ndarray, row: np.ndarray, last: int) -> np.ndarray:
    """Per request the number of its window's cumulative shares below its uniform draw (its bucket),
    at most ``last``: what ``(u[:, None] > cum[row]).sum(axis=1)`` counts, without the [requests,
    buckets] matrix."""
    out = np.empty(u.shape[0], dtype=np.int32)
    for i in range(u.shape[0]):
        c = 0
        for x in cum[row[i]]:
            if u[i] > x:
                c += 1
        out[i] = min(c, last)
    return out


@dataclass
class PrefixSplit:
    """One path's cached share split for the replay: ``shared_tokens`` (whole KV blocks) every request
    starts with, serving ``shared_share`` of the prompt tokens; the rest of the observed
    ``cached_share`` is conversation history (``conversation_share`` of the cached tokens, from
    ``conversation_source``: "given" or "assumed"), drawn as follow-up turns (``followup_share`` of the
    requests wish to continue a conversation; fitted) sent ``think_s`` (mean) after the previous answer,
    whose length is estimated as ``ttft_s`` + output tokens x ``tpot_s`` (the observed means).
    ``twin_cached_share``: what the twin at the observed N and router served (the check)."""

    cached_share: float
    conversation_share: float
    conversation_source: str
    conversation_detail: str
    shared_tokens: int
    shared_share: float
    followup_share: float = 0.0
    think_s: float = DEFAULT_THINK_S
    ttft_s: float = 0.0
    tpot_s: float = 0.0
    twin_cached_share: float = math.nan
    followup_source: str = ""
    # "given" (--think-time), "assumed" (DEFAULT_THINK_S), "fitted" (on the computed prompt tokens per
    # minute) or "bound" (fitted as an upper bound, where the export has no cached tokens per window)
    think_source: str = "assumed"
    # per block of ``followup_block_s`` from ``followup_origin`` (unix seconds), a factor on
    # ``followup_share`` (None: none): fitted so that the twin computes the prompt tokens per minute
    # the export's counters say the engine computed (app.economics.predict.conversations)
    followup_by_block: np.ndarray | None = field(default=None, repr=False)
    followup_origin: float = math.nan
    followup_block_s: float = 0.0

    @property
    def conversations(self) -> bool:
        """Whether the replay draws conversations for this path."""
        return self.followup_share > 0

    def factor_at(self, origin: float, arrival: np.ndarray) -> np.ndarray | None:
        """The factor on ``followup_share`` of requests arriving ``arrival`` seconds after ``origin``
        (1 outside the fitted blocks), or None where there is none."""
        if self.followup_by_block is None or not self.followup_block_s > 0:
            return None
        at = np.floor((np.asarray(arrival, dtype=float) + (origin - self.followup_origin)) / self.followup_block_s)
        inside = (at >= 0) & (at < len(self.followup_by_block))
        out = np.ones(len(at))
        out[inside] = self.followup_by_block[at[inside].astype(np.int64)]
        return out

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        factors = out.pop("followup_by_block")
        out["followup_by_block"] = None if factors is None else {
            "blocks": len(factors), "block_s": self.followup_block_s, "low": float(np.min(factors)),
            "high": float(np.max(factors))}
        return out


@dataclass
class PathDemand:
    name: str
    window_start: np.ndarray  # unix seconds of each demand window
    requests: np.ndarray  # first tokens per window, gaps spread back
    ttft_mean_s: np.ndarray
    prompt: LengthDistribution
    output: LengthDistribution
    # the share of prompt tokens the prefix cache served at the observed N (NaN: not exported)
    cached_share: float = math.nan
    # per window, the prompt tokens and those the prefix cache served (None: not exported): how the
    # computed prompt tokens move over time, which the conversations' think time is fitted on
    prompt_tokens: np.ndarray | None = None
    cached_tokens: np.ndarray | None = None
    # what that share is made of, for the replay (app.economics.model.conversations; None: a shared
    # prefix alone, or nothing cached)
    prefix: PrefixSplit | None = None


@dataclass
class Demand:
    """Observed demand of every path on a common grid of ``window_s``."""

    origin: float  # unix seconds of the first window start
    window_s: int
    paths: list[PathDemand]
    replicas: np.ndarray  # replicas reporting per window (max over paths)
    notes: list[str] = field(default_factory=list)
    flags: list[tuple[str, str]] = field(default_factory=list)  # (path, what the export lacks)

    @property
    def duration_s(self) -> float:
        return float(len(self.replicas) * self.window_s)

    def span(self, first: int, stop: int) -> Demand:
        """The demand of windows ``first`` .. ``stop - 1`` only (its origin moves with it)."""
        def cut(dist: LengthDistribution) -> LengthDistribution:
            local = dist.local_shares[first:stop] if dist.local_shares is not None else None
            return replace(dist, local_shares=local)

        def part(a: np.ndarray | None) -> np.ndarray | None:
            return a[first:stop] if a is not None else None

        paths = [replace(p, window_start=p.window_start[first:stop], requests=p.requests[first:stop],
                         ttft_mean_s=p.ttft_mean_s[first:stop], prompt=cut(p.prompt), output=cut(p.output),
                         prompt_tokens=part(p.prompt_tokens), cached_tokens=part(p.cached_tokens))
                 for p in self.paths]
        return Demand(origin=self.origin + first * self.window_s, window_s=self.window_s, paths=paths,
                      replicas=self.replicas[first:stop], notes=list(self.notes), flags=list(self.flags))

    def busiest_span(self, hours: float) -> tuple[int, int]:
        """(first, stop) window indexes of the ``hours`` with the most requests (the whole range when it
        is shorter)."""
        n = int(round(hours * 3600 / self.window_s))
        total = sum(p.requests for p in self.paths)
        if n >= len(total):
            return 0, len(total)
        sums = np.convolve(total, np.ones(n), mode="valid")
        first = int(np.argmax(sums))
        return first, first + n


def _spread_gaps(grid: pd.DatetimeIndex, observed: pd.Series) -> tuple[np.ndarray, int]:
    """Counts on ``grid``; a run of missing windows shares evenly the count of the window after it."""
    values = observed.reindex(grid)
    out = values.to_numpy(dtype=float, na_value=np.nan).copy()
    gaps, run = 0, 0
    for i in range(len(out)):
        if np.isnan(out[i]):
            run += 1
            continue
        if run:
            share = out[i] / (run + 1)
            out[i - run:i + 1] = share
            gaps += 1
        run = 0
    out[np.isnan(out)] = 0.0
    return out, gaps


def _bucket_shares(buckets: pd.DataFrame, grid: pd.DatetimeIndex, block: int = 1) -> np.ndarray:
    """Per window, the share of its observations in each bucket [window, bucket], pooled over blocks
    of ``block`` windows. A window without counts (a gap) takes the shares of the next window that has
    some (the one its observations were added to)."""
    if buckets.empty:
        return np.ones((len(grid), 1))
    bounds = np.sort(buckets["le"].unique())
    table = buckets.pivot_table(index="window_start", columns="le", values="requests", aggfunc="sum")
    table = table.reindex(index=grid, columns=bounds).fillna(0.0).clip(lower=0.0)
    counts = table.to_numpy()
    if block > 1:
        group = np.arange(len(grid)) // block
        pooled = np.zeros((group.max() + 1, counts.shape[1]))
        np.add.at(pooled, group, counts)
        counts = pooled[group]
    totals = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, totals, out=np.full_like(counts, np.nan), where=totals > 0)
    return pd.DataFrame(shares).bfill().ffill().fillna(1.0 / len(bounds)).to_numpy()


def demand_window_s(scrape_interval_s: float | None, duration_s: float, live: bool = False) -> int:
    """The demand window for an export: its scrape interval rounded up to one of
    ``FINE_DEMAND_WINDOWS_S``, else a minute (a longer scrape interval, more than
    ``MAX_DEMAND_WINDOWS`` windows, or a pushdown's windows)."""
    if live or not scrape_interval_s or not math.isfinite(scrape_interval_s):
        return DEMAND_WINDOW_S
    for w in FINE_DEMAND_WINDOWS_S:
        if w >= scrape_interval_s * 0.99 and duration_s / w <= MAX_DEMAND_WINDOWS:
            return w
    return DEMAND_WINDOW_S


def export_window_s(ws: Workspace, dataset_ids: list[int]) -> int:
    """``demand_window_s`` of these datasets: the coarsest scrape interval among them, over their range."""
    d = ws.datasets()
    d = d[d["dataset_id"].isin([int(i) for i in dataset_ids])]
    if d.empty:
        return DEMAND_WINDOW_S
    intervals = d["scrape_interval_s"].dropna()
    duration = (d["t_max"].max() - d["t_min"].min()).total_seconds() if d["t_min"].notna().any() else 0.0
    return demand_window_s(float(intervals.max()) if len(intervals) else None, duration,
                           live=bool((d["format"] == "live").any()))


def observed_demand(ws: Workspace, dataset_ids: list[int], path_labels: list[str],
                    max_model_len: int = 32768, window_s: int | None = None) -> Demand:
    """Reconstruct per-path demand of ``dataset_ids`` on a grid of ``window_s`` (default: the export's
    own resolution, ``export_window_s``)."""
    window_s = int(window_s or export_window_s(ws, dataset_ids))
    cube_id = ensure_cube(ws, dataset_ids, window_s, path_labels, signals=DEMAND_SIGNALS,
                          buckets=DEMAND_BUCKETS)
    windows = sql.df(ws.cursor(), "demand__path_windows", cube_id=cube_id)
    if windows.empty:
        raise ValueError("no TTFT histogram: the demand per window cannot be reconstructed")
    start, end = windows["window_start"].min(), windows["window_start"].max()
    lengths = sql.df(ws.cursor(), "demand__length_buckets", cube_id=cube_id, start_ts=start.to_pydatetime(),
                     end_ts=(end + pd.Timedelta(seconds=window_s)).to_pydatetime())
    grid = pd.date_range(start, end, freq=f"{window_s}s")
    def window_buckets(signal: str) -> pd.DataFrame:
        return sql.df(ws.cursor(), "demand__window_buckets", cube_id=cube_id, signal=signal)

    length_buckets = {s: window_buckets(s) for s in ("prompt_tokens", "generation_tokens")}
    paths, notes = [], []
    flags: list[tuple[str, str]] = []
    replicas = np.zeros(len(grid))
    for name, part in windows.groupby("path", sort=True):
        part = part.set_index("window_start")
        counts, gaps = _spread_gaps(grid, part["requests"])
        if gaps:
            notes.append(f"{name}: {gaps} scrape gap(s): their first tokens were spread back over the gap")
        ttft = part["ttft_mean_s"].reindex(grid).ffill().fillna(0).to_numpy()
        replicas = np.maximum(replicas, part["replicas"].reindex(grid).fillna(0).to_numpy())
        dists = {}
        for signal in ("prompt_tokens", "generation_tokens"):
            b = lengths[(lengths["path"] == name) & (lengths["signal"] == signal)]
            if b.empty or not b["cumulative"].max() > 0:
                # no length histogram: the token counter's mean per request, an assumed spread
                tokens, requests = float(part[signal].sum()), float(part["requests"].sum())
                mean = tokens / requests if requests > 0 and tokens > 0 else ASSUMED_MEAN[signal]
                dists[signal] = LengthDistribution.assumed(mean, max_model_len)
                how = "the token counter's mean" if requests > 0 and tokens > 0 else "an assumed mean"
                flags.append((str(name), f"{name}: no vllm:request_{signal.split('_')[0]}_tokens histogram: "
                              f"lengths are a lognormal of {how} ({mean:,.0f} tokens) and an assumed spread; "
                              "export the length histograms"))
                continue
            dists[signal] = LengthDistribution.fit(b["le"].to_numpy(), b["cumulative"].to_numpy(),
                                                   float(b["total_count"].iloc[0]), float(b["total_sum"].iloc[0]),
                                                   max_model_len)
            bw = length_buckets[signal]
            local = _bucket_shares(bw[bw["path"] == name], grid, block=max(1, LENGTH_BLOCK_S // window_s))
            dists[signal].local_shares = local if local.shape[1] == len(dists[signal].shares) else None
        prompt_total = float(part["prompt_tokens"].sum())
        cached = part["cached_tokens"].dropna()
        cached_share = (float(cached.sum()) / prompt_total if len(cached) and prompt_total > 0 else math.nan)
        per_window = {}
        if math.isfinite(cached_share):
            per_window = {k: part[k].reindex(grid).to_numpy(dtype=float) for k in ("prompt_tokens", "cached_tokens")}
        paths.append(PathDemand(name=str(name),
                                window_start=grid.to_numpy().astype("datetime64[s]").astype(float),
                                requests=counts, ttft_mean_s=ttft, prompt=dists["prompt_tokens"],
                                output=dists["generation_tokens"], cached_share=cached_share, **per_window))
    # a restart or a gap leaves windows with no replica reporting: carry the count across them
    replicas = pd.Series(replicas).replace(0, np.nan).ffill().bfill().to_numpy()
    return Demand(origin=float(grid[0].timestamp()), window_s=window_s, paths=paths,
                  replicas=replicas, notes=notes, flags=flags)


def cached_share_by_window(ws: Workspace, dataset_ids: list[int], path_labels: list[str],
                           window_s: int = DEMAND_WINDOW_S) -> pd.DataFrame:
    """Per window of ``window_s`` and path, the share of prompt tokens the prefix cache served, read from
    the export's counters (``demand__cached_share_by_window``) on a cube of ``PREFIX_SIGNALS`` only
    (built once per datasets, window and path mapping). No row for a path without a prompt-token or
    prefix-cache counter; ``cached_tokens`` null where the path exports no prefix-cache counter."""
    cube_id = ensure_cube(ws, dataset_ids, window_s, path_labels, signals=PREFIX_SIGNALS)
    return sql.df(ws.cursor(), "demand__cached_share_by_window", cube_id=cube_id)


def cached_share_totals(windows: pd.DataFrame) -> pd.DataFrame:
    """Per path over the range of ``cached_share_by_window``'s rows: the prompt and cached tokens of the
    windows that export both and their ratio (the exact share: token-weighted, not a mean of window
    shares), the cache's lookups and hits and their ratio, and the windows the share is read from. A
    path without prefix-cache counter has ``cached_share`` NaN and no window."""
    both = windows["prompt_tokens"].notna() & windows["cached_tokens"].notna()
    lookups = windows["queries"].notna() & windows["hits"].notna()
    parts = windows.assign(prompt_tokens=windows["prompt_tokens"].where(both),
                           cached_tokens=windows["cached_tokens"].where(both),
                           queries=windows["queries"].where(lookups), hits=windows["hits"].where(lookups))
    g = parts.groupby("path", sort=True)
    out = pd.DataFrame({c: g[c].sum(min_count=1) for c in ("prompt_tokens", "cached_tokens", "queries", "hits")})
    out["windows"] = g["cached_tokens"].count()
    out["cached_share"] = (out["cached_tokens"] / out["prompt_tokens"]).where(out["prompt_tokens"] > 0)
    out["hit_rate"] = (out["hits"] / out["queries"]).where(out["queries"] > 0)
    cols = ["path", "prompt_tokens", "cached_tokens", "cached_share", "queries", "hits", "hit_rate", "windows"]
    return out.reset_index()[cols] if len(out) else pd.DataFrame(columns=cols)


def shared_prefix(prompt: np.ndarray, share: float, block: int) -> tuple[int, np.ndarray]:
    """A prefix every request of a path shares (a system prompt), as long as it must be for a prefix
    cache to serve ``share`` of the prompt tokens: vLLM serves whole KV blocks only, and at least a
    prompt's last token is computed, so a request holds min(S, its prompt less one, in whole blocks)
    of it. (S, a whole number of blocks; each request's cached prefix.) The served share grows with S:
    the S whose share is nearest ``share`` is taken (0: nothing shared)."""
    cap = ((np.asarray(prompt, dtype=np.int64) - 1) // block) * block
    if not share > 0 or len(cap) == 0 or cap.max() < block:
        return 0, np.zeros(len(cap), dtype=np.int64)
    total = float(np.sum(prompt))
    ordered = np.sort(cap)
    below = np.concatenate([[0], np.cumsum(ordered)])  # sum of the caps below index k
    sizes = np.arange(block, ordered[-1] + block, block, dtype=np.int64)
    k = np.searchsorted(ordered, sizes, side="left")  # requests whose cap is below S
    served = (below[k] + sizes * (len(ordered) - k)) / total
    size = int(sizes[np.argmin(np.abs(served - share))])
    return size, np.minimum(cap, size)


def synthesize(demand: Demand, traffic: float = 1.0, context: float = 1.0, seed: int = 0,
               max_model_len: int = 32768) -> dict[str, np.ndarray]:
    """Requests of a scenario: arrival (seconds from ``demand.origin``), path index, prompt and output
    tokens, and ``stream``, the copy of the observed users a request belongs to. The observed count of a window is kept at g = 1; g != 1 scales it by binomial thinning or
    whole copies plus thinning. Arrival times are uniform inside the window (Poisson given the
    count). Arrival = first token - TTFT, the window's mean TTFT interpolated in time, so a burst whose
    first tokens queued for minutes is moved back to when it arrived."""
    rng = np.random.default_rng([seed, 7])
    parts = []
    for k, p in enumerate(demand.paths):
        base = np.rint(p.requests).astype(np.int64)
        whole, frac = int(math.floor(traffic)), traffic - math.floor(traffic)
        n = base * whole + rng.binomial(base, frac) if frac > 0 else base * whole
        total = int(n.sum())
        # a month at traffic x1.5 is ~20 M requests: the window index is int32, the temporaries go as
        # soon as they are used and the arrival is computed in place (the same values)
        idx = np.repeat(np.arange(len(n), dtype=np.int32), n)
        arrival = idx.astype(np.float64)
        arrival *= demand.window_s  # whole numbers: exact, as the integer product was
        arrival += rng.uniform(0, demand.window_s, total)  # the first token
        # FCFS drains a queue in arrival order, so the requests whose first token comes at t waited about
        # the same: shift by the window mean TTFT interpolated between window centres (sampling each
        # request's TTFT inside its wide bucket instead made bursts noisier than they were)
        centers = (np.arange(len(n)) + 0.5) * demand.window_s
        arrival -= np.interp(arrival, centers, p.ttft_mean_s)
        # lengths are observed at finish: a request takes the length mix of the window it ended in
        prompt = p.prompt.sample(total, rng, windows=idx)
        if context != 1.0:
            prompt = np.rint(prompt * context)
        # every request must fit the twin's longest sequence, or it would wait for ever
        prompt = np.clip(prompt, 1, max(1, max_model_len - 64)).astype(np.int64)
        output = p.output.sample(total, rng, windows=idx)
        del idx
        output = np.maximum(np.minimum(output, max_model_len - prompt), 1)
        # which copy of the observed users a request is (0 .. whole - 1, then the thinned part): the
        # replay draws each copy's conversations apart, so that twice the users hold conversations as
        # the observed ones did (drawn from one stream twice as dense, more requests would find a
        # conversation to continue)
        first_of_window = np.repeat(np.cumsum(n) - n, n)
        rank = np.arange(total, dtype=np.int64) - first_of_window
        del first_of_window
        per_copy = np.repeat(np.maximum(base, 1), n)
        stream = np.minimum(rank // per_copy, whole).astype(np.int16)
        del rank, per_copy
        parts.append({"arrival_s": arrival, "path": np.full(total, k, dtype=np.int8), "prompt_tokens": prompt,
                      "output_tokens": output, "stream": stream})
        del arrival, prompt, output  # held by parts alone, so the merge below lets them go
    keys = list(parts[0])
    merged = {}
    for key in keys:  # column by column, each path's piece let go once merged (a month is ~20 M requests)
        merged[key] = np.concatenate([d.pop(key) for d in parts])
    order = np.argsort(merged["arrival_s"], kind="stable")
    for key in keys:
        merged[key] = merged[key][order]
    return merged

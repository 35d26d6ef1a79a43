"""The capacity model of one replica, read from the metrics every vLLM export holds.

What the model needs and where each value comes from (its *source*, shown with it everywhere):

- **engine facts** (``max_num_seqs``, ``max_num_batched_tokens``, KV capacity, ``max_model_len``, block
  size): ``given`` (a flag or the dashboard: the user knows their launch flags, and vLLM prints the
  KV size at start-up, "GPU KV cache size: N tokens"), else ``engine config`` (``cache_config_info``:
  GPU blocks x block size), else ``fitted`` from what the data shows (the largest steps in
  ``iteration_tokens_total``; a waiting queue that formed while the KV cache had room means the batch
  cap bound), else ``assumed`` (vLLM's default, stated). Without ``cache_config_info`` the KV capacity
  is fitted by simulation (:mod:`app.economics.predict.calibration`): the tokens a running request holds are
  not the mean prompt of finished requests (long requests stay longer, so they fill more of the
  running set), so the twin replays the observed demand and the capacity is the one at which its KV
  occupancy matches ``kv_cache_usage_perc`` window by window.
- **step time**: a continuous-batching engine runs steps; each step emits one token per decoding
  request and prefills up to the token budget. Per scrape interval (query
  ``capacity__scrape_intervals``; short intervals see a steady batch), the mean step time is
  ``a + b B + b2 B^2 + c P + d' u + e Q`` with B the decoding sequences per step, P the prefill
  tokens per step, u the KV usage (d' = d x KV tokens: the context every step reads) and Q the
  prefill attention pairs per step (b2 stays 0 unless the batch visibly grows less efficient). The
  mean step is the mean inter-token latency (ITL ``_sum``/``_count``: every decoding request's gap is
  the step it waited for; idle time between requests is not in it) and B = ITL ``_sum`` / interval
  (the time-averaged number of decoding requests). The coefficients by non-negative least squares
  (a term beyond the fixed, per-sequence and per-prefill-token parts only where it cuts the law's
  error on held-out stretches of time by ``CURVATURE_GAIN``); the overall level of the decode and
  prefill parts is then calibrated on the twin at the observed fleet size (``calibrated``).
  ``iteration_tokens_total``, when exported, bounds ``max_num_batched_tokens``.
- **saturation**: whether the data ever shows a full KV cache, a queue or preemptions. If it never
  does, the capacity is only a lower bound, and scenarios that need more are flagged.

A model that cannot be identified never stops the analysis: it is fitted as far as the data allows,
each gap is an ``assumed`` value with a ``flags`` entry naming the series or flag that would fix it,
and the scenarios built on it are flagged with a wide interval.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from app import sql
from app.cube import FIT_BUCKETS, FIT_SIGNALS, FIT_WINDOW_S, REPLICA_LABELS, ensure_cube
from app.engine.config import StepTime
from app.store import Workspace

KV_FULL = 0.95
MIN_INTERVALS = 10
CURVATURE_GAIN = 0.02  # a term beyond the core must cut the step law's held-out RMSE by 2 %
# and the batch-squared term must leave the per-sequence cost at least this share of the core law's
KEPT_BESIDE = 0.1
HELD_OUT_FOLDS = 5  # contiguous blocks of scrape intervals, each predicted by a law fitted on the rest

# vLLM's defaults, used when neither the user nor the data says otherwise
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_MODEL_LEN = 32768
DEFAULT_ROUTER = "least_outstanding"
COMMON_MAX_MODEL_LENS = (32768, 131072, 65536, 16384, 8192, 4096, 2048, 262144)
SOURCES = ("given", "engine config", "measured", "fitted", "calibrated", "assumed")  # measured: counted exactly
VLLM_KV_HINT = ("pass --kv-cache-tokens N (vLLM prints 'GPU KV cache size: N tokens' at start-up) or export "
                "vllm:cache_config_info")


@dataclass
class Assumptions:
    """Engine facts the user gives (None: read from the data, else vLLM's default) and what the
    metrics cannot show; each is used by the replay and can be changed by the user."""

    max_num_seqs: int | None = None  # --max-num-seqs
    max_num_batched_tokens: int | None = None  # chunked-prefill token budget per step
    kv_cache_tokens: int | None = None  # the engine's KV capacity (vLLM logs "GPU KV cache size")
    max_model_len: int | None = None
    block_size: int | None = None  # KV block size in tokens
    router: str | None = None  # least_outstanding | round_robin | random | power_of_two | prefix_aware
    lengths_independent: bool = True  # prompt and output lengths drawn independently per path
    arrivals_within_window: str = "poisson"  # arrivals inside a demand window
    tpot_scale: float = 1.0  # calibration factor on the decode step time (1 = none)
    prefill_scale: float = 1.0  # calibration factor on the prefill time (1 = none)
    # what the twin's prefix cache serves (app.economics.model.conversations): "shared" (a path's
    # observed cached share, as a prefix every request of the path shares: a system prompt, whose hit
    # rate no replica count changes), "conversation" (that share split between such a prefix and
    # conversations whose follow-up turns resend their history, cached where they ran) or "off" (every
    # prompt token computed: vLLM with --no-enable-prefix-caching). None: "conversation" where the
    # export shows cache hits
    prefix_cache: str | None = None
    # the share of the cached tokens that are conversation history, per path ("*": every path without
    # its own); None: the least the prompt lengths allow (conversations.split_cached)
    conversation_share: dict[str, float] | None = None
    think_s: float | None = None  # mean seconds from an answer to the next turn (None: DEFAULT_THINK_S)
    # the prefix-aware router keeps a turn home unless that replica holds more than this many
    # outstanding requests above the least loaded (None: FleetConfig's default)
    affinity_margin: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def given(self) -> dict[str, Any]:
        """The engine facts the user gave (the replay's cache key holds these)."""
        return {k: v for k, v in asdict(self).items() if k in GIVEN_FIELDS and v is not None}


GIVEN_FIELDS = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len", "block_size",
                "router", "prefix_cache", "conversation_share", "think_s", "affinity_margin")
PREFIX_CASES = ("shared", "conversation", "off")  # Assumptions.prefix_cache


@dataclass
class Source:
    """Where a parameter's value came from: one of ``SOURCES``, and how, in words."""

    kind: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SOURCES:
            raise ValueError(f"source {self.kind!r}: expected one of {', '.join(SOURCES)}")


@dataclass
class FitQuality:
    windows: int
    r2: float
    rmse_s: float
    batch_range: tuple[float, float]
    data: str


@dataclass
class ReplicaModel:
    """One replica: step time (s) = base + per_seq x decoding seqs + per_prefill_token x prefill tokens
    + per_context_token x KV tokens held + per_prefill_pair x (chunk x preceding tokens, summed over
    a prefill: p^2 / 2 for a prompt of p tokens); KV capacity in tokens; the engine limits."""

    step_base_s: float
    step_per_seq_s: float
    step_per_prefill_token_s: float
    step_per_context_token_s: float
    step_per_prefill_pair_s: float
    kv_tokens: float
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    fit: FitQuality
    saturation_observed: bool
    saturation_evidence: list[str] = field(default_factory=list)
    observed: dict[str, float] = field(default_factory=dict)
    assumptions: Assumptions = field(default_factory=Assumptions)
    notes: list[str] = field(default_factory=list)
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    router: str = DEFAULT_ROUTER
    sources: dict[str, Source] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # what could not be identified, and what would fix it
    step_basis: str = ""  # which series the step time was fitted on
    step_per_seq_sq_s: float = 0.0  # a batch that grows less efficient: per decoding sequence squared
    # the batch up to which that term holds: the largest the fit saw (its batch range's top); past it the
    # law goes on along the term's tangent, since the data says nothing of its curvature there (0: no term)
    step_per_seq_sq_until: float = 0.0
    # the part of TTFT outside the engine's queue and prefill time (its mean), shown, not replayed: on
    # vLLM V1 it holds the wait for the step under way (a request is queued between steps), which the
    # twin's queue already counts, besides the API server's own time
    frontend_s: float = 0.0
    # the share of prompt tokens the prefix cache served over the range (NaN: no prefix-cache counter)
    prefix_cached_share: float = math.nan

    @property
    def kv_source(self) -> str:
        src = self.sources.get("kv_tokens")
        return f"{src.kind}: {src.detail}" if src else ""

    @property
    def prefill_tokens_per_s(self) -> float:
        c = self.step_per_prefill_token_s * self.assumptions.prefill_scale
        return 1.0 / c if c > 0 else float("inf")

    def step_time(self, decoding: float, prefill_tokens: float = 0.0, context_tokens: float = 0.0) -> float:
        """One step (s) of the calibrated model the twin runs."""
        a = self.assumptions
        return ((self.step_base_s + self.step_per_seq_s * decoding + self.step_per_seq_sq_s * self._squared(decoding)
                 + self.step_per_context_token_s * context_tokens) * a.tpot_scale
                + self.step_per_prefill_token_s * prefill_tokens * a.prefill_scale)

    def _squared(self, decoding: float) -> float:
        """What the batch-squared term multiplies: decoding squared, on its tangent past
        ``step_per_seq_sq_until`` (as the engines do: ``StepTime.per_decode_seq_sq_until``)."""
        u = self.step_per_seq_sq_until
        return decoding ** 2 if u <= 0 or decoding <= u else u * (2 * decoding - u)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["prefill_tokens_per_s"] = self.prefill_tokens_per_s
        out["kv_source"] = self.kv_source
        out["step_time_s_at"] = {str(b): self.step_time(b, 0, 0) for b in (1, 8, 32, 64, 128)}
        out["sources"] = {k: {"value": parameter_value(self, k), **asdict(s)} for k, s in self.sources.items()}
        return out


# the quantities a source is kept for, with the attribute holding each one's value
PARAMETERS = {
    "kv_tokens": "kv_tokens", "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
    "max_model_len": "max_model_len", "block_size": "block_size", "router": "router",
    "step_base_s": "step_base_s", "step_per_seq_s": "step_per_seq_s", "step_per_seq_sq_s": "step_per_seq_sq_s",
    "step_per_seq_sq_until": "step_per_seq_sq_until",
    "step_per_prefill_token_s": "step_per_prefill_token_s", "step_per_context_token_s": "step_per_context_token_s",
    "step_per_prefill_pair_s": "step_per_prefill_pair_s", "tpot_scale": "assumptions.tpot_scale",
    "prefill_scale": "assumptions.prefill_scale", "frontend_s": "frontend_s", "prefix_cache": "prefix_cached_share",
}


def parameter_value(model: ReplicaModel, name: str) -> Any:
    obj: Any = model
    for part in PARAMETERS[name].split("."):
        obj = getattr(obj, part)
    return obj


def scrape_intervals(ws: Workspace, dataset_ids: list[int]) -> pd.DataFrame:
    """The rows of ``capacity__scrape_intervals`` (per replica and scrape) of ``dataset_ids``."""
    with ws.transaction() as con:
        sql.materialize(con, "signals__series", "capacity_series", dataset_ids=[int(i) for i in dataset_ids],
                        path_labels=REPLICA_LABELS)
        frame = sql.df(con, "capacity__scrape_intervals", dataset_ids=[int(i) for i in dataset_ids])
        con.execute("drop table capacity_series")
    return frame


def replica_windows(ws: Workspace, dataset_ids: list[int], window_s: int = FIT_WINDOW_S) -> pd.DataFrame:
    cube_id = ensure_cube(ws, dataset_ids, window_s, REPLICA_LABELS, signals=FIT_SIGNALS, buckets=FIT_BUCKETS)
    return sql.df(ws.cursor(), "capacity__replica_windows", cube_id=cube_id)


@dataclass
class EngineEvidence:
    """What the export says about the engine besides the step time: its config series, the largest
    steps, and the length histograms' top bounds."""

    kv_config: pd.DataFrame
    step_token_bounds: pd.DataFrame  # le, steps: the iteration-tokens histogram over the whole range
    length_top_bound: float | None  # the largest finite bound of the prompt/generation-length histograms
    # the bucket top that holds the longest prompt (inf: the open top bucket; None: no prompt histogram)
    prompt_top: float | None = None


def _top_filled(buckets: pd.DataFrame) -> float | None:
    """The upper bound of the lowest cumulative bucket that holds every observation."""
    if buckets.empty or not buckets["observations"].max() > 0:
        return None
    b = buckets.sort_values("le")
    return float(b[b["observations"] >= float(b["observations"].max()) - 0.5]["le"].iloc[0])


def engine_evidence(ws: Workspace, dataset_ids: list[int]) -> EngineEvidence:
    cube_id = ensure_cube(ws, dataset_ids, FIT_WINDOW_S, REPLICA_LABELS, signals=FIT_SIGNALS, buckets=FIT_BUCKETS)
    buckets = sql.df(ws.cursor(), "capacity__step_token_buckets", cube_id=cube_id)
    steps = buckets[buckets["signal"] == "iteration_tokens"][["le", "observations"]]
    lengths = buckets[buckets["signal"].isin(["prompt_tokens", "generation_tokens"]) & np.isfinite(buckets["le"])]
    return EngineEvidence(
        kv_config=sql.df(ws.cursor(), "capacity__kv_config", dataset_ids=list(dataset_ids)),
        step_token_bounds=steps.rename(columns={"observations": "steps"}).reset_index(drop=True),
        length_top_bound=float(lengths["le"].max()) if len(lengths) else None,
        prompt_top=_top_filled(buckets[buckets["signal"] == "prompt_tokens"]))


# -- engine facts -----------------------------------------------------------------------------------------
def _kv_capacity(evidence: EngineEvidence, a: Assumptions, flags: list[str]) -> tuple[float, Source, int, Source]:
    """KV tokens and block size with their sources. Without a given value or a config series the KV
    capacity is left to the fit by simulation (a provisional value, source ``fitted``)."""
    cfg = evidence.kv_config
    block = cfg["block_size"].dropna() if not cfg.empty else pd.Series(dtype=float)
    if a.block_size is not None:
        block_size, block_src = int(a.block_size), Source("given", "--block-size")
    elif len(block):
        block_size, block_src = int(block.iloc[0]), Source("engine config", f"{cfg['source'].iloc[0]} block_size")
    else:
        block_size, block_src = DEFAULT_BLOCK_SIZE, Source("assumed", "vLLM's default block size")
    if a.kv_cache_tokens is not None:
        return float(a.kv_cache_tokens), Source("given", "--kv-cache-tokens"), block_size, block_src
    if not cfg.empty:
        spread = ""
        if cfg["kv_tokens"].nunique() > 1:
            spread = f"; replicas differ ({cfg['kv_tokens'].min():,.0f}-{cfg['kv_tokens'].max():,.0f}): median used"
            flags.append("replicas export different KV capacities (cache_config_info): the twin's replicas are "
                         "identical, at the median")
        return (float(cfg["kv_tokens"].median()), Source("engine config", f"{cfg['source'].iloc[0]}{spread}"),
                block_size, block_src)
    return math.nan, Source("fitted", "pending: fit by simulation to kv_cache_usage_perc"), block_size, block_src


def _max_num_batched_tokens(evidence: EngineEvidence, a: Assumptions, running_max: float = 0.0
                            ) -> tuple[int, Source]:
    """The chunked-prefill token budget: given, else the top of the iteration-tokens histogram's
    largest steps where that histogram can show it, else vLLM's default (assumed).

    vLLM V1 observes ``iteration_tokens_total`` per batch of outputs the API server takes in: the
    tokens generated plus the *whole* prompt of each request whose prefill ends there (a prompt
    prefilled in three chunks is counted once, at its last), and not at all for a step that only
    prefilled chunks. So its "iterations" exceed the budget by up to a prompt; only where the longest
    prompts and the batch together stay below the largest iterations (they cannot explain them) does
    the top bucket bound the budget."""
    if a.max_num_batched_tokens is not None:
        return int(a.max_num_batched_tokens), Source("given", "--max-num-batched-tokens")
    steps = evidence.step_token_bounds
    why = "the data cannot show it without iteration_tokens_total"
    if len(steps) and steps["steps"].sum() > 0:
        # cumulative buckets: the largest step falls in the first bucket that holds every step
        steps = steps.sort_values("le")
        total = float(steps["steps"].max())
        full = steps[steps["steps"] >= total - 0.5]
        top = float(full["le"].iloc[0])
        below = steps[steps["le"] < top]["le"]
        lower = float(below.iloc[-1]) if len(below) else 0.0
        prompts = evidence.prompt_top
        explained = prompts is not None and (not math.isfinite(prompts) or lower < prompts + running_max)
        if math.isfinite(top) and not explained:
            return int(top), Source("fitted", f"iteration_tokens_total: the largest steps hold ({lower:g}, {top:g}] "
                                    "tokens; the budget is taken at the bucket's top")
        if math.isfinite(top):
            longest = f"up to {prompts:g} tokens" if math.isfinite(prompts) else "in the open top bucket"
            why = (f"iteration_tokens_total's largest iterations hold ({lower:g}, {top:g}] tokens, which one whole "
                   f"prompt (here {longest}) and the batch account for: vLLM V1 counts a prompt whole in the "
                   "iteration its prefill ends, so these iterations are not steps of the budget")
    return DEFAULT_MAX_NUM_BATCHED_TOKENS, Source(
        "assumed", f"vLLM's default for an online server; pass --max-num-batched-tokens ({why})")


def _max_model_len(evidence: EngineEvidence, a: Assumptions) -> tuple[int, Source]:
    if a.max_model_len is not None:
        return int(a.max_model_len), Source("given", "--max-model-len")
    top = evidence.length_top_bound
    if top is None:
        return DEFAULT_MAX_MODEL_LEN, Source("assumed", "no length histogram to bracket it")
    # vLLM's length buckets are 1, 2, 5, 10, ... up to max_model_len: it lies in [top, the next value)
    upper = next(v for v in (2 * top, 2.5 * top, 5 * top) if str(int(v))[0] in "125" and v > top)
    pick = next((v for v in COMMON_MAX_MODEL_LENS if top <= v < upper), int(top))
    return int(pick), Source("assumed", f"the length histograms' buckets end at {top:g}, so max_model_len is in "
                             f"[{top:g}, {upper:g}); pass --max-model-len")


def _max_num_seqs(intervals: pd.DataFrame, a: Assumptions, kv_full: float = 0.9) -> tuple[int, Source, list[str]]:
    notes: list[str] = []
    running_max = float(intervals["running"].max()) if len(intervals) and intervals["running"].notna().any() else 0.0
    if a.max_num_seqs is not None:
        if running_max > a.max_num_seqs:
            notes.append(f"the running gauge reached {running_max:.0f}, above --max-num-seqs {a.max_num_seqs}")
        return int(a.max_num_seqs), Source("given", "--max-num-seqs"), notes
    if len(intervals) and running_max > 0:
        capped = intervals[(intervals["running"] >= running_max) & (intervals["waiting"].fillna(0) > 0)
                           & (intervals["kv_usage"].fillna(1.0) < kv_full)]
        if len(capped) >= 3:
            return int(running_max), Source(
                "fitted", f"requests waited while {running_max:.0f} ran and the KV cache had room "
                f"({len(capped)} scrapes): the batch cap"), notes
    if running_max > DEFAULT_MAX_NUM_SEQS:
        return int(running_max), Source("fitted", "the running gauge's maximum (above vLLM's default)"), notes
    return DEFAULT_MAX_NUM_SEQS, Source(
        "assumed", f"vLLM's default; the running gauge never reached it (max {running_max:.0f}), so the cap did "
        "not bind in the data; pass --max-num-seqs"), notes


# -- step time ---------------------------------------------------------------------------------------------
def steady_intervals(intervals: pd.DataFrame) -> pd.DataFrame:
    """Scrape intervals without a restart and without a scrape gap (at most 1.5 typical intervals)."""
    if intervals.empty:
        return intervals
    typical = float(intervals["dt_s"].median())
    return intervals[(intervals["resets"] == 0) & (intervals["dt_s"] <= 1.5 * typical)]


def busy_intervals(intervals: pd.DataFrame) -> pd.DataFrame:
    """Steady scrape intervals of a replica that decoded throughout: running at both ends, tokens and
    inter-token gaps in between, no preemption (its gap is not a step)."""
    steady = steady_intervals(intervals)
    ok = ((steady["running"] >= 1) & (steady["running_before"] >= 1) & (steady["itl_count"] > 0)
          & (steady["itl_sum"] > 0) & (steady["generation_tokens"] > 0) & (steady["preemptions"].fillna(0) == 0))
    return steady[ok.fillna(False)]


def computed_prompt_tokens(intervals: pd.DataFrame) -> np.ndarray:
    """Per scrape interval, the prompt tokens the engine prefilled: every prompt token less those the
    prefix cache served (``cached_tokens``; where the export has no prefix-cache counter, none)."""
    prompt = intervals["prompt_tokens"].fillna(0).to_numpy(float)
    if "cached_tokens" not in intervals:
        return prompt
    return np.maximum(prompt - intervals["cached_tokens"].fillna(0).to_numpy(float), 0.0)


def frontend_source(intervals: pd.DataFrame) -> tuple[float, Source]:
    """The mean time a request spends outside the engine's queue and prefill (the API server: parsing,
    tokenization, the hops to the engine core and back): mean TTFT less mean queue time less mean
    prefill time, where all three histograms are exported."""
    steady = steady_intervals(intervals)
    need = ("ttft_sum", "ttft_count", "queue_sum", "queue_count", "prefill_sum", "prefill_count")
    if steady.empty or any(c not in steady for c in need) or not (steady["prefill_count"].fillna(0) > 0).any():
        return 0.0, Source("assumed", "0: without the prefill-time histogram the front end cannot be told from "
                           "the prefill, and the calibration of the prefill on TTFT minus queue time holds it")
    sums = {c: float(steady[c].fillna(0).sum()) for c in need}
    if min(sums["ttft_count"], sums["queue_count"], sums["prefill_count"]) <= 0:
        return 0.0, Source("assumed", "0: no request finished in the steady scrape intervals")
    ttft, queue = sums["ttft_sum"] / sums["ttft_count"], sums["queue_sum"] / sums["queue_count"]
    prefill = sums["prefill_sum"] / sums["prefill_count"]
    front = max(ttft - queue - prefill, 0.0)
    return front, Source("measured", f"{1000 * front:.1f} ms: mean TTFT {1000 * ttft:.1f} ms less mean queue time "
                         f"{1000 * queue:.1f} ms less mean prefill time {1000 * prefill:.1f} ms; shown, not "
                         "replayed (it holds the wait for the step under way, which the twin's queue counts)")


def prefix_cache_source(intervals: pd.DataFrame) -> tuple[float, Source]:
    """The share of prompt tokens the prefix cache served over the range, and where it came from."""
    steady = steady_intervals(intervals)
    if steady.empty or "cached_tokens" not in steady or steady["cached_tokens"].isna().all():
        return math.nan, Source("assumed", "no prefix-cache counter in the export (vllm:prefix_cache_hits_total "
                                "or vllm:prompt_tokens_cached_total): the fit assumed no prefix caching, so a "
                                "cache's hits, if any, show as a faster prefill per token")
    ok = steady[steady["cached_tokens"].notna()]
    prompt = float(ok["prompt_tokens"].fillna(0).sum())
    share = float(ok["cached_tokens"].sum()) / prompt if prompt > 0 else 0.0
    return share, Source("measured", f"{share:.1%} of prompt tokens served from the prefix cache "
                         "(vllm:prefix_cache_hits_total over vllm:prompt_tokens_total); the step law is "
                         "fitted on the tokens computed")


def _pairs_per_prefill_token(intervals: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Per interval, the attention pairs a prefilled token costs: sum p^2 / (2 sum p) of the prompts
    of its replica's 5-minute window (length histograms are per window, not per scrape)."""
    if windows.empty or "prompt_sq_sum" not in windows:
        return np.zeros(len(intervals))
    w = windows[["window_start", "replica", "prompt_sq_sum", "prompt_sum"]].copy()
    w["ratio"] = w["prompt_sq_sum"] / (2 * w["prompt_sum"]).where(w["prompt_sum"] > 0)
    keys = intervals[["replica", "ts"]].copy()
    keys["window_start"] = (keys["ts"] - pd.Timedelta(microseconds=1)).dt.floor(f"{FIT_WINDOW_S}s")
    merged = keys.merge(w[["window_start", "replica", "ratio"]], on=["window_start", "replica"], how="left")
    overall = float(np.nansum(w["prompt_sq_sum"]) / max(2 * np.nansum(w["prompt_sum"]), 1e-9))
    return merged["ratio"].fillna(overall).to_numpy(dtype=float)


def _nnls(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative least squares on columns brought to a common scale (so the solver weighs them
    alike); a column of zeros gets a zero coefficient. (coefficients, residuals)."""
    norm = np.maximum(np.abs(design).max(axis=0), 1e-12)
    scaled, _ = nnls(design / norm, y)
    coef = scaled / norm
    return coef, y - design @ coef


def _nnls_subset(columns: list[np.ndarray], kept: list[int], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_nnls`` on the ``kept`` columns only; the others' coefficients are 0."""
    design = np.column_stack([c if k in kept else np.zeros(len(y)) for k, c in enumerate(columns)])
    return _nnls(design, y)


def _held_out_rmse(columns: list[np.ndarray], kept: list[int], y: np.ndarray) -> float:
    """The RMSE of ``_nnls_subset`` on intervals it was not fitted on: the rows in ``HELD_OUT_FOLDS``
    contiguous blocks of time, each predicted by the law fitted on the others (a term that fits the
    noise of some stretch does not carry to the next)."""
    n = len(y)
    fold = np.arange(n) * HELD_OUT_FOLDS // max(n, 1)
    design = np.column_stack([c if j in kept else np.zeros(n) for j, c in enumerate(columns)])
    errors = np.zeros(n)
    for k in range(HELD_OUT_FOLDS):
        test = fold == k
        if not test.any() or test.all():
            continue
        coef, _ = _nnls(design[~test], y[~test])
        errors[test] = y[test] - design[test] @ coef
    return float(np.sqrt((errors ** 2).mean()))


def fit_step_time(intervals: pd.DataFrame, windows: pd.DataFrame, flags: list[str]
                  ) -> tuple[np.ndarray, FitQuality, str]:
    """(a, b, c, d', e, b2) of the mean step time per busy scrape interval, the fit quality, and the
    basis (b2: per decoding request squared, 0 unless the data shows a batch growing less efficient)."""
    busy = busy_intervals(intervals)
    if len(busy) < MIN_INTERVALS:
        flags.append(f"only {len(busy)} scrape intervals of a replica decoding throughout: the step-time law "
                     "is assumed (vLLM on one H100, scaled to the observed inter-token latency); export "
                     "vllm:num_requests_running and the inter-token-latency histogram of a busier period")
        d = StepTime()
        coef = np.array([d.base_s, d.per_decode_seq_s, d.per_prefill_token_s, 0.0, d.per_prefill_pair_s, 0.0])
        return coef, FitQuality(len(busy), math.nan, math.nan, (math.nan, math.nan), "no busy intervals"), "assumed"
    dt = busy["dt_s"].to_numpy(float)
    # the mean step a decoding request waited for (its inter-token gap; idle time between requests is
    # not in it), against the time-averaged number of decoding requests. A step count from
    # iteration_tokens_total is not used here: it counts prefill-only steps too, which no decoding
    # request waited for, and so reads the batch low (it bounds the token budget instead)
    step_s = (busy["itl_sum"] / busy["itl_count"]).to_numpy(float)
    steps = dt / step_s
    decoding = busy["itl_sum"].to_numpy(float) / dt
    basis = "mean inter-token latency per scrape interval against the running batch and prefill tokens"
    # a prompt token the prefix cache served costs no prefill: the law is per token computed
    prefill = computed_prompt_tokens(busy) / steps
    pairs = prefill * _pairs_per_prefill_token(busy, windows)
    kv = ((busy["kv_usage"] + busy["kv_before"]) / 2).fillna(0).to_numpy(float)
    columns = [np.ones(len(busy)), decoding, prefill, kv, pairs, decoding ** 2]
    # the law's core first: a fixed part per step, a part per decoding request and per prefilled token.
    # The KV tokens a step reads, the attention pairs of a prefill (p^2 / 2 for a prompt of p tokens)
    # and a batch that grows less efficient are further terms, each kept only where it cuts the law's
    # error on held-out stretches of time by CURVATURE_GAIN: per scrape interval they move with the core's (KV held with the batch,
    # pairs per step with prefill tokens per step), so a term free to enter can take a core term's
    # place and fit the noise instead (a pair term took the prefill cost's place on a real vLLM
    # engine, and made its long prompts twice as slow as they were)
    kept = [0, 1, 2]
    coef, resid = _nnls_subset(columns, kept, step_s)
    extras = {3: "the KV tokens held", 4: "the prefill's attention pairs", 5: "the batch squared"}
    # a batch that grows less efficient grows from a cost per sequence: a squared term that leaves
    # less than KEPT_BESIDE of it has taken the per-sequence cost's place, not added to it (on a real
    # vLLM engine it left none, on batches of 1 to 15; carried to vLLM's 32 it put 114 ms per step
    # where the engine took 51)
    for column, what in extras.items():
        if not columns[column].any():
            continue
        tried, tried_resid = _nnls_subset(columns, kept + [column], step_s)
        if column == 5 and tried[1] < KEPT_BESIDE * coef[1]:
            continue
        if tried[column] > 0 and _held_out_rmse(columns, kept + [column], step_s) < (
                (1 - CURVATURE_GAIN) * _held_out_rmse(columns, kept, step_s) - 1e-9):  # 1 ns: a law already exact
            coef, resid = tried, tried_resid
            kept.append(column)
            basis += f", with a term in {what}"
    r2 = 1 - float((resid ** 2).sum()) / max(float(((step_s - step_s.mean()) ** 2).sum()), 1e-30)
    if coef[0] <= 0:
        flags.append("the step-time fit found no fixed cost per step (a term the data cannot separate): the "
                     "law is fitted but weakly identified")
    quality = FitQuality(windows=len(busy), r2=r2, rmse_s=float(np.sqrt((resid ** 2).mean())),
                         batch_range=(float(np.percentile(decoding, 1)), float(np.percentile(decoding, 99))),
                         data=f"{len(busy)} busy scrape intervals of {busy['replica'].nunique()} replicas")
    return coef, quality, basis


def _saturation(intervals: pd.DataFrame) -> list[str]:
    out = []
    if intervals.empty:
        return out
    kv_max = np.fmax(intervals["kv_usage"].to_numpy(float), intervals["kv_before"].to_numpy(float))
    if (kv_max >= KV_FULL).any():
        out.append(f"KV cache >= {KV_FULL:.0%} full at {(kv_max >= KV_FULL).sum()} scrapes")
    if (intervals["preemptions"].fillna(0) > 0).any():
        out.append(f"{int(intervals['preemptions'].fillna(0).sum())} preemptions")
    if (intervals["waiting"].fillna(0) > 0).any():
        out.append(f"requests waiting at {(intervals['waiting'].fillna(0) > 0).sum()} scrapes")
    return out


def fit_model(intervals: pd.DataFrame, windows: pd.DataFrame, evidence: EngineEvidence,
              assumptions: Assumptions) -> ReplicaModel:
    """The fit itself, on the rows of ``capacity__scrape_intervals`` and ``capacity__replica_windows``
    (a plain function tests call). Never raises on what the data lacks: see ``flags``."""
    flags: list[str] = []
    sources: dict[str, Source] = {}
    kv_tokens, sources["kv_tokens"], block_size, sources["block_size"] = _kv_capacity(evidence, assumptions, flags)
    running_max = float(intervals["running"].max()) if len(intervals) and intervals["running"].notna().any() else 0.0
    mnbt, sources["max_num_batched_tokens"] = _max_num_batched_tokens(evidence, assumptions, running_max)
    max_len, sources["max_model_len"] = _max_model_len(evidence, assumptions)
    max_seqs, sources["max_num_seqs"], notes = _max_num_seqs(intervals, assumptions)
    router = assumptions.router or DEFAULT_ROUTER
    sources["router"] = (Source("given", "--router") if assumptions.router else
                         Source("assumed", "the metrics do not show how requests are routed; pass --router"))
    if intervals.empty or intervals["kv_usage"].isna().all():
        if math.isnan(kv_tokens):
            flags.append("no KV-usage gauge (vllm:kv_cache_usage_perc): the KV capacity cannot be fitted; "
                         + VLLM_KV_HINT)
    coef, quality, basis = fit_step_time(intervals, windows, flags)
    cached_share, sources["prefix_cache"] = prefix_cache_source(intervals)
    frontend_s, sources["frontend_s"] = frontend_source(intervals)
    step_source = Source("assumed" if basis == "assumed" else "fitted", basis if basis != "assumed" else
                         "vLLM-on-H100 defaults, scaled by the calibration")
    for name in ("step_base_s", "step_per_seq_s", "step_per_seq_sq_s", "step_per_prefill_token_s",
                 "step_per_context_token_s", "step_per_prefill_pair_s"):
        sources[name] = step_source
    sources["step_per_seq_sq_until"] = (
        Source("fitted", f"the largest batch the step-time fit saw (99th percentile of {quality.data}'s mean "
               "decoding batch); past it the batch-squared term goes on along its tangent") if coef[5] > 0 else
        Source(step_source.kind, "0: the law has no batch-squared term"))
    observed = {
        "running_max": float(intervals["running"].max()) if len(intervals) else math.nan,
        "kv_max": float(intervals["kv_usage"].max()) if len(intervals) and intervals["kv_usage"].notna().any()
        else math.nan,
        "replicas": int(intervals["replica"].nunique()) if len(intervals) else 0,
        "intervals": len(intervals),
        # d' is the context cost at a full cache; d (per token) needs the KV capacity
        "context_cost_at_full_cache_s": float(coef[3]),
    }
    saturation = _saturation(intervals)
    per_context = coef[3] / kv_tokens if math.isfinite(kv_tokens) and kv_tokens > 0 else 0.0
    return ReplicaModel(
        step_base_s=float(coef[0]), step_per_seq_s=float(coef[1]), step_per_prefill_token_s=float(coef[2]),
        step_per_context_token_s=float(per_context), step_per_prefill_pair_s=float(coef[4]),
        kv_tokens=kv_tokens,
        max_num_seqs=max_seqs, max_num_batched_tokens=mnbt, block_size=block_size, fit=quality,
        saturation_observed=bool(saturation), saturation_evidence=saturation, observed=observed,
        assumptions=assumptions, notes=notes, max_model_len=max_len, router=router, sources=sources,
        flags=flags, step_basis=basis, step_per_seq_sq_s=float(coef[5]),
        step_per_seq_sq_until=float(quality.batch_range[1]) if coef[5] > 0 else 0.0, frontend_s=float(frontend_s),
        prefix_cached_share=float(cached_share))


def set_kv_tokens(model: ReplicaModel, kv_tokens: float) -> None:
    """Put the KV capacity in (the fit by simulation's result), keeping the context cost per step at a
    full cache that the step-time fit measured."""
    full_cost = model.observed.get("context_cost_at_full_cache_s", 0.0)
    model.kv_tokens = float(kv_tokens)
    model.step_per_context_token_s = full_cost / kv_tokens if kv_tokens > 0 else 0.0

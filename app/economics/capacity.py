"""The capacity model of one replica, fitted from the metrics the fleet already exports (vLLM first).

Per replica and window (queries ``capacity__replica_windows``, ``capacity__kv_config``):

- **step time**: a continuous-batching engine runs steps; each step emits one token per decoding
  request and prefills up to a token budget. Over a busy window of length T with G generated
  tokens, P prefilled tokens and a mean running batch B, the number of steps is n = G / B (or the
  count of ``vllm:iteration_tokens_total`` when exported), and
  the mean step time ``T / n = a + b (G / n) + c (P / n) + d K`` with K the KV tokens held (the
  context every step reads); a, b, c, d come from non-negative least squares over busy windows;
- **prefill throughput** = 1 / c tokens per second of step time;
- **KV capacity** in tokens: ``cache_config_info`` (GPU blocks x block size) when exported, else
  Little's law on the KV gauge: tokens held = running x (mean prompt + half the mean output);
- **saturation**: whether the data ever shows a full KV cache, a queue or preemptions. If it
  never does, the capacity is only a lower bound, and scenarios that need more are flagged.

Settings the metrics cannot show (max_num_seqs when no gauge exports it, the chunked-prefill token
budget, the router, independence of prompt and output lengths) are ``Assumptions``, stated and settable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from app import sql
from app.cube import ensure_cube
from app.store import Workspace

REPLICA_LABELS = ["instance", "engine"]
FIT_WINDOW_S = 300
KV_FULL = 0.95


@dataclass
class Assumptions:
    """What the metrics cannot show; each is used by the replay and can be changed by the user."""

    max_num_seqs: int = 256  # vLLM's default batch cap (a gauge like NIM's num_request_max overrides it)
    max_num_batched_tokens: int = 8192  # chunked-prefill token budget per step (vLLM V1 default)
    block_size: int = 16  # KV block size in tokens, when cache_config_info does not say
    router: str = "least_outstanding"  # least_outstanding | round_robin | random
    lengths_independent: bool = True  # prompt and output lengths drawn independently per path
    arrivals_within_window: str = "poisson"  # arrivals inside a demand window
    tpot_scale: float = 1.0  # calibration factor on the step time (1 = none)
    prefill_scale: float = 1.0  # calibration factor on the prefill time (1 = none)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    a prefill: p^2 / 2 for a prompt of p tokens); KV capacity in tokens."""

    step_base_s: float
    step_per_seq_s: float
    step_per_prefill_token_s: float
    step_per_context_token_s: float
    step_per_prefill_pair_s: float
    kv_tokens: float
    kv_source: str
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    fit: FitQuality
    saturation_observed: bool
    saturation_evidence: list[str] = field(default_factory=list)
    observed: dict[str, float] = field(default_factory=dict)
    assumptions: Assumptions = field(default_factory=Assumptions)
    notes: list[str] = field(default_factory=list)

    @property
    def prefill_tokens_per_s(self) -> float:
        return 1.0 / self.step_per_prefill_token_s if self.step_per_prefill_token_s > 0 else float("inf")

    def step_time(self, decoding: float, prefill_tokens: float = 0.0, context_tokens: float = 0.0) -> float:
        return (self.step_base_s + self.step_per_seq_s * decoding + self.step_per_prefill_token_s * prefill_tokens
                + self.step_per_context_token_s * context_tokens)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["prefill_tokens_per_s"] = self.prefill_tokens_per_s
        out["step_time_s_at"] = {str(b): self.step_time(b, 0, 0) for b in (1, 8, 32, 64, 128)}
        return out


def replica_windows(ws: Workspace, dataset_ids: list[int], window_s: int = FIT_WINDOW_S) -> pd.DataFrame:
    cube_id = ensure_cube(ws, dataset_ids, window_s, REPLICA_LABELS)
    return sql.df(ws.cursor(), "capacity__replica_windows", cube_id=cube_id)


def fit_replica(ws: Workspace, dataset_ids: list[int], assumptions: Assumptions | None = None,
                window_s: int = FIT_WINDOW_S) -> ReplicaModel:
    """Fit the replica model on every replica's windows of ``dataset_ids``."""
    assumptions = assumptions or Assumptions()
    frame = replica_windows(ws, dataset_ids, window_s)
    kv_config = sql.df(ws.cursor(), "capacity__kv_config", dataset_ids=list(dataset_ids))
    return fit_from_windows(frame, kv_config, assumptions, window_s)


def _kv_capacity(frame: pd.DataFrame, kv_config: pd.DataFrame, assumptions: Assumptions) -> tuple[float, str, int]:
    if not kv_config.empty:
        block = kv_config["block_size"].dropna()
        return (float(kv_config["kv_tokens"].median()), f"{kv_config['source'].iloc[0]} (engine config)",
                int(block.iloc[0]) if len(block) else assumptions.block_size)
    usable = frame[(frame["kv_mean"] > 0.05) & (frame["running_mean"] > 0) & (frame["prompt_count"] > 0)
                   & (frame["generation_count"] > 0)]
    if usable.empty:
        raise ValueError("cannot size the KV cache: no cache_config_info and no window with KV usage, "
                         "running requests and token histograms")
    held = usable["running_mean"] * (usable["prompt_sum"] / usable["prompt_count"]
                                     + 0.5 * usable["generation_sum"] / usable["generation_count"])
    return float((held / usable["kv_mean"]).median()), "Little's law on kv_cache_usage_perc", assumptions.block_size


def fit_from_windows(frame: pd.DataFrame, kv_config: pd.DataFrame, assumptions: Assumptions,
                     window_s: int = FIT_WINDOW_S) -> ReplicaModel:
    """The fit itself, on the rows of ``capacity__replica_windows`` (a plain function tests call)."""
    if frame.empty:
        raise ValueError("no replica windows: the capacity model needs running, token and latency metrics")
    frame = frame.fillna({"resets": 0})
    kv_tokens, kv_source, block_size = _kv_capacity(frame, kv_config, assumptions)
    busy = frame[(frame["running_min"] >= 1) & (frame["generation_tokens"] > 0) & (frame["resets"] == 0)
                 & frame["running_mean"].notna()].copy()
    if len(busy) < 10:
        raise ValueError(f"only {len(busy)} busy replica windows (running >= 1 throughout): too few to fit "
                         "the step time")
    # steps per window: the iteration-tokens histogram's count when exported, else tokens / batch
    steps = busy["steps"].where(busy["steps"] > 0, busy["generation_tokens"] / busy["running_mean"])
    step_s = window_s / steps  # mean step time of the window
    design = np.column_stack([
        np.ones(len(busy)),
        busy["generation_tokens"] / steps,  # decoding sequences per step
        busy["prompt_tokens"].fillna(0) / steps,  # prefill tokens per step
        busy["kv_mean"].fillna(0) * kv_tokens,  # context tokens held (read every step)
        busy["prompt_sq_sum"].fillna(0) / 2 / steps,  # prefill attention pairs per step (sum p^2 / 2)
    ])
    coef, _ = nnls(design, step_s.to_numpy())
    fitted = design @ coef
    resid = step_s.to_numpy() - fitted
    r2 = 1 - float((resid**2).sum()) / max(float(((step_s - step_s.mean()) ** 2).sum()), 1e-30)
    saturation = []
    if (frame["kv_max"] >= KV_FULL).any():
        saturation.append(f"KV cache >= {KV_FULL:.0%} full in {(frame['kv_max'] >= KV_FULL).sum()} replica-windows of {window_s} s")
    if (frame["preemptions"].fillna(0) > 0).any():
        saturation.append(f"{int(frame['preemptions'].fillna(0).sum())} preemptions")
    if (frame["waiting_max"].fillna(0) > 0).any():
        saturation.append(f"requests waiting in {(frame['waiting_max'].fillna(0) > 0).sum()} replica-windows of {window_s} s")
    observed = {
        "running_max": float(frame["running_max"].max()),
        "kv_max": float(frame["kv_max"].max()) if frame["kv_max"].notna().any() else float("nan"),
        "replicas": int(frame["replica"].nunique()),
        "windows": len(frame),
    }
    max_seqs = assumptions.max_num_seqs
    notes = []
    if observed["running_max"] > max_seqs:
        max_seqs = int(observed["running_max"])
        notes.append(f"max_num_seqs raised to the observed running maximum {max_seqs}")
    return ReplicaModel(
        step_base_s=float(coef[0]),
        step_per_seq_s=float(coef[1]),
        step_per_prefill_token_s=float(coef[2]),
        step_per_context_token_s=float(coef[3]),
        step_per_prefill_pair_s=float(coef[4]),
        kv_tokens=kv_tokens,
        kv_source=kv_source,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=assumptions.max_num_batched_tokens,
        block_size=block_size,
        fit=FitQuality(windows=len(busy), r2=r2, rmse_s=float(np.sqrt((resid**2).mean())),
                       batch_range=(float(busy["running_mean"].min()), float(busy["running_mean"].max())),
                       data=f"{len(busy)} busy {window_s} s windows of {observed['replicas']} replicas"),
        saturation_observed=bool(saturation),
        saturation_evidence=saturation,
        observed=observed,
        assumptions=assumptions,
        notes=notes,
    )

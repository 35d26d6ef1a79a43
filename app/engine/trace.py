"""What a trace is: requests sorted by arrival, each with its path, prompt and output lengths, and the
paths it was drawn for. The engines run a trace; the simulator draws synthetic ones
(:mod:`app.simulator.traffic`) and the economics builds one from the observed demand
(:mod:`app.economics.run.replay`). The two default paths are the bundled sample's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Conversations:
    """What a path's requests share, so that vLLM's prefix cache has something to hit: a system prompt
    every request starts with, and conversations whose every turn resends the turns before it (and
    the answers the engine gave) before its new message, as a chat client sends it. The defaults share
    nothing (one turn, no system prompt). The real-engine harness's trace
    (:mod:`app.bench.realengine.trace`) and the simulator's (:mod:`app.simulator.traffic`) draw the
    follow-up turns alike (:func:`app.simulator.traffic.draw_followups`).

    When a follow-up is sent differs: the real-engine driver waits for the answer, then ``think_s``
    (closed loop); the simulator draws its trace before any engine runs (open loop), so a follow-up
    arrives ``read_s_per_token`` x the previous answer's tokens + ``think_s`` after the previous turn
    arrived — the user reads the answer as it streams (at a reading pace slower than the stream), then
    writes. The real-engine driver ignores ``read_s_per_token``."""

    system_tokens: int = 0
    turns_mean: float = 1.0  # turns per conversation: 1 + a geometric number of follow-ups
    think_s_mean: float = 8.0  # exponential
    followup_median: float = 80.0  # tokens of a follow-up message (lognormal)
    followup_sigma: float = 0.6
    read_s_per_token: float = 0.0  # the open-loop trace's wait for the answer (see above)

    @property
    def shares(self) -> bool:
        return self.system_tokens > 0 or self.turns_mean > 1.0


NO_SHARING = Conversations()


@dataclass(frozen=True)
class PathSpec:
    """One traffic path. Rates are requests/s for the whole fleet at the daily mean; on a path whose
    ``conversations`` have follow-up turns, ``mean_rate`` counts the conversations (their first turns)
    and the follow-ups come on top. ``prompt_*`` draw a first turn's own text: a system prompt
    (``conversations.system_tokens``) comes before it."""

    name: str
    served_name: str  # model_name label of the path's request-level series
    mean_rate: float
    peak_to_trough: float  # diurnal ratio of the highest to the lowest rate
    peak_hour_utc: float
    prompt_median: float
    prompt_sigma: float  # lognormal sigma of the prompt body
    long_share: float = 0.0  # share of prompts from a log-uniform long-context tail
    long_min: int = 8000
    long_max: int = 30000
    output_median: float = 250.0
    output_sigma: float = 0.7
    max_tokens: int = 1024  # a longer draw stops here with finished_reason "length"
    one_token_share: float = 0.0  # requests asking for max_tokens=1 (classification-style calls)
    bursty: bool = False
    conversations: Conversations = NO_SHARING


INTERACTIVE = PathSpec(
    name="interactive", served_name="llama-3.1-8b-interactive", mean_rate=4.6, peak_to_trough=2.8,
    peak_hour_utc=15.0, prompt_median=750, prompt_sigma=0.7, output_median=280, output_sigma=0.7,
    max_tokens=1024, one_token_share=0.005, bursty=True,
)
BATCH = PathSpec(
    name="batch", served_name="llama-3.1-8b-batch", mean_rate=0.8, peak_to_trough=1.3,
    peak_hour_utc=11.0, prompt_median=3500, prompt_sigma=0.45, long_share=0.12, long_min=8000,
    long_max=30000, output_median=700, output_sigma=0.5, max_tokens=1536,
)


@dataclass(frozen=True)
class Burst:
    """Interactive rate x ``multiplier`` during [start_s, start_s + duration_s) (trace seconds)."""

    start_s: float
    duration_s: float
    multiplier: float


@dataclass(frozen=True)
class TrafficSpec:
    paths: tuple[PathSpec, ...] = (INTERACTIVE, BATCH)
    max_model_len: int = 32768
    bursts_per_day: float = 4.0
    burst_minutes: tuple[float, float] = (2.0, 10.0)
    burst_multiplier: tuple[float, float] = (2.0, 4.0)
    burst_hours_utc: tuple[float, float] = (7.0, 21.0)  # bursts land in the busy part of the day


@dataclass
class Trace:
    """Requests sorted by arrival. ``arrival_s`` counts from ``origin`` (Unix seconds); the first
    ``warmup_s`` seconds precede the export (the fleet is already busy when scraping starts).

    What requests share, for the prefix cache (:mod:`app.engine.prefix`; None: nothing is shared, and
    the engines run as without a cache): ``prefix_group`` (int64, -1: none) and ``prefix_tokens``
    (int32), the shared prefix every request of a group starts with (a path's system prompt);
    ``conversation`` (int64, -1: none) and ``history_tokens`` (int32), the conversation a request is a
    turn of and how many tokens after the shared prefix repeat its earlier turns (their messages and
    the engine's answers). A prompt is prefix_tokens + history_tokens + the turn's new tokens.

    When follow-ups are sent (closed loop, :mod:`app.engine.closed`; None: every request at its
    ``arrival_s``): ``follows`` (int64, -1: none), the earlier request whose answer a request waits
    for, and ``gap_s`` (float64), how long after that answer it is sent. Such a request's
    ``arrival_s`` is where an open-loop trace would have put it; the engines send it at the finish of
    the request it follows + its gap, as a chat client does whose user reads the answer, then writes.
    """

    origin: float
    duration_s: float
    warmup_s: float
    arrival_s: np.ndarray  # float64
    path: np.ndarray  # int8, index into spec.paths
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64, tokens the request will generate
    hits_max: np.ndarray  # bool, output stopped by max_tokens or max_model_len ("length")
    request_id: np.ndarray  # int64
    spec: TrafficSpec = field(default_factory=TrafficSpec)
    bursts: tuple[Burst, ...] = ()
    seed: int = 0
    traffic_multiplier: float = 1.0
    context_multiplier: float = 1.0
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    conversation: np.ndarray | None = None
    history_tokens: np.ndarray | None = None
    follows: np.ndarray | None = None
    gap_s: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def path_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.spec.paths)

    def to_frame(self) -> pd.DataFrame:
        """One row per request: id, path, arrival (UTC), prompt_tokens, output_tokens, hits_max."""
        names = np.array(self.path_names, dtype=object)
        return pd.DataFrame({
            "id": self.request_id,
            "path": names[self.path],
            "arrival": pd.to_datetime(self.origin + self.arrival_s, unit="s", utc=True),
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "hits_max": self.hits_max,
        })

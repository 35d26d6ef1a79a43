"""Fleet policies the simulator and the twin replay: an autoscaler, admission control with early
rejection, client retries with backoff and a server-wide budget; and the arithmetic of their outcomes.

Plain frozen dataclasses (times in seconds), read by the Python reference loop
(:mod:`app.engine.policy_fleet`) and its compiled copy (:mod:`app.engine.twin_policy`), which
make the same decisions at the same times. A policy is a scenario input the operator chooses, never a
fitted or simulated fleet's setting, so it may reach the twin.

Decisions (both loops):

- the autoscaler looks every ``period_s`` at its signal, averaged over the ready replicas: the
  requests waiting (queued, not yet running) or running per replica. Scale out by ``out_step`` when
  the signal has been ``>= scale_out_at`` for ``out_for_s``; scale in by one when it has been
  ``<= scale_in_at`` for ``in_for_s``; no action within ``cooldown_s`` of the last. A new replica is
  paid from the decision and serves ``cold_start_s`` later (minutes for a pod that pulls and loads
  weights; seconds for an engine woken from vLLM's sleep mode). Scale-in drains the newest ready
  replica: it takes no new request, finishes what it holds, then stops; a scale-out while one drains
  takes it back at once (it is still loaded). Between ``min_replicas`` and ``max_replicas``.
- admission: a request routed to a replica whose queue already holds ``max(1, floor(k x running))``
  requests is rejected at once (HTTP 429): it is a broken promise, counted as a breach.
- retries: a rejected request is retried by its client, up to ``attempts`` attempts in all, after
  ``backoff_s x multiplier^(attempt-1) x (1 - jitter + jitter x U)``; with a budget, the server allows
  at most ``budget_per_minute`` retries per clock minute and fails the rest; with a ratio, retries stay
  below ``ratio`` x the first attempts so far (the SRE book's 10 % retry ratio). A retry is a new
  request with the whole prompt again.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SIGNALS = ("waiting", "running")
REASON_REJECTED = 3  # a request rejected at admission (the engines' reasons are 0 stop, 1 length, 2 abort)


@dataclass(frozen=True)
class Autoscaler:
    signal: str = "waiting"
    scale_out_at: float = 4.0
    scale_in_at: float = 0.5
    out_for_s: float = 120.0
    in_for_s: float = 600.0
    out_step: int = 1
    cold_start_s: float = 300.0
    cooldown_s: float = 300.0
    min_replicas: int = 1
    max_replicas: int = 8
    start_replicas: int | None = None  # default min_replicas
    period_s: float = 15.0

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise ValueError(f"signal {self.signal!r}: expected one of {', '.join(SIGNALS)}")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"replicas: need 1 <= min_replicas ({self.min_replicas}) <= max_replicas "
                             f"({self.max_replicas})")
        start = self.start
        if not self.min_replicas <= start <= self.max_replicas:
            raise ValueError(f"start_replicas {start}: outside [{self.min_replicas}, {self.max_replicas}]")
        if self.scale_in_at >= self.scale_out_at:
            raise ValueError(f"scale_in_at ({self.scale_in_at}) must be below scale_out_at ({self.scale_out_at})")
        if self.period_s <= 0 or self.out_step < 1:
            raise ValueError("period_s must be > 0 and out_step >= 1")
        for name in ("out_for_s", "in_for_s", "cold_start_s", "cooldown_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    @property
    def start(self) -> int:
        return self.min_replicas if self.start_replicas is None else self.start_replicas


@dataclass(frozen=True)
class Admission:
    queue_factor: float  # k: a replica queues at most max(1, floor(k x running)) requests

    def __post_init__(self) -> None:
        if not self.queue_factor >= 0:
            raise ValueError(f"queue_factor {self.queue_factor}: must be >= 0")


@dataclass(frozen=True)
class Retry:
    attempts: int = 3  # in all, the first included (the SRE book's per-request cap)
    backoff_s: float = 1.0
    multiplier: float = 2.0
    jitter: float = 1.0  # 1: full jitter, U(0, backoff); 0: none
    budget_per_minute: float | None = None  # server-wide retries per clock minute (None: no budget)
    ratio: float | None = None  # retries at most this share of the first attempts so far (SRE book: 0.1)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.backoff_s < 0 or self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff_s >= 0, multiplier >= 1, 0 <= jitter <= 1")
        if self.budget_per_minute is not None and self.budget_per_minute < 0:
            raise ValueError("budget_per_minute must be >= 0")
        if self.ratio is not None and self.ratio < 0:
            raise ValueError("ratio must be >= 0")


@dataclass(frozen=True)
class Policy:
    """What a fleet does beside serving: any of the three (None: not used)."""

    autoscaler: Autoscaler | None = None
    admission: Admission | None = None
    retry: Retry | None = None

    def __post_init__(self) -> None:
        if self.retry is not None and self.admission is None:
            raise ValueError("retries follow rejections: a retry policy needs an admission policy")

    def pool(self, replicas: int) -> int:
        """Replicas the run holds: the autoscaler's maximum, or the fleet's."""
        return self.autoscaler.max_replicas if self.autoscaler else replicas

    def start(self, replicas: int) -> int:
        return self.autoscaler.start if self.autoscaler else replicas

    def capacity(self, requests: int) -> int:
        """Request rows a run may create: the trace's, and every retry it may add."""
        return requests * (self.retry.attempts if self.retry else 1)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def backoff(retry: Retry, attempt: int, u: float) -> float:
    """Delay before attempt ``attempt + 1`` after attempt ``attempt`` was rejected (u in [0, 1)).
    A loop of products, not ``**``: the same operations in both loops."""
    d = retry.backoff_s
    for _ in range(attempt - 1):
        d *= retry.multiplier
    return d * ((1.0 - retry.jitter) + retry.jitter * u)


def expected_attempts(p: float, attempts: int) -> float:
    """Attempts per request when each attempt is rejected independently with probability p and a
    request is tried at most ``attempts`` times: sum of p^i, i < attempts (docs/methods.md#retries)."""
    return float(sum(p ** i for i in range(attempts)))


def client_throttle(requests: float, accepts: float, k: float = 2.0) -> float:
    """Client-side adaptive throttling: the probability of rejecting locally,
    max(0, (requests - K x accepts) / (requests + 1)) (SRE book, "Handling Overload")."""
    return max(0.0, (requests - k * accepts) / (requests + 1))


def layered_attempts(attempts_per_layer: int, layers: int) -> int:
    """Attempts on the lowest layer when every one of ``layers`` layers tries ``attempts_per_layer`` times."""
    return attempts_per_layer ** layers


def saturated_queue_wait(queue_length: float, service_s: float, servers: float) -> float:
    """Little's law at saturation (throughput servers / service time): W_q = L_q x S / c."""
    return queue_length * service_s / servers


def uniform_floats(seed: int, n: int) -> np.ndarray:
    """The first ``n`` values of ``random.Random(seed).random()``, from the same Mersenne Twister
    words (numpy's MT19937 started from that state), for the compiled loop."""
    words = random.Random(seed).getstate()[1]
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": np.array(words[:624], dtype=np.uint32),
                                                        "pos": int(words[624])}}
    raw = bits.random_raw(2 * n) if n else np.zeros(0, dtype=np.uint64)
    a, b = raw[0::2] >> np.uint64(5), raw[1::2] >> np.uint64(6)
    return (a.astype(np.float64) * 67108864.0 + b.astype(np.float64)) / 9007199254740992.0


ROUTER_SEED = (31, 17)  # the router's stream: Random(seed * 31 + 17), as the static fleet's
RETRY_SEED = (31, 19)  # the clients' backoff jitter: Random(seed * 31 + 19)


@dataclass
class Timeline:
    """The autoscaler's view after each decision at ``t`` (seconds since the trace origin):
    replicas paid for (starting, ready or draining), ready, and its signal."""

    t: np.ndarray
    provisioned: np.ndarray
    ready: np.ndarray
    signal: np.ndarray
    start: int  # paid for from t = 0 to the first decision

    def replica_seconds(self, lo: float, hi: float) -> float:
        """Replica-seconds paid in [lo, hi): the count after a decision holds until the next one."""
        edges = np.concatenate([[0.0], self.t])
        counts = np.concatenate([[self.start], self.provisioned]).astype(float)
        ends = np.concatenate([self.t, [math.inf]])
        overlap = np.clip(np.minimum(ends, hi) - np.maximum(edges, lo), 0.0, None)
        return float((overlap * counts).sum())


def user_outcomes(origin: np.ndarray, attempt: np.ndarray, arrival_s: np.ndarray, first_s: np.ndarray,
                  finish_s: np.ndarray, gen: np.ndarray, reason: np.ndarray, path: np.ndarray
                  ) -> dict[str, np.ndarray]:
    """Per user request (a trace request and its retries): its path, first arrival, whether it was
    rejected in the end, its TTFT as the user saw it (from the first attempt's arrival to the first
    token of the attempt that was served, backoff included), TPOT of that attempt, and attempts made.
    Times in seconds; NaN where there is none."""
    n_user = int(origin.max()) + 1 if len(origin) else 0
    attempts = np.bincount(origin, minlength=n_user)
    last = np.full(n_user, -1, dtype=np.int64)
    # the attempt with the highest number is the last (ids grow with attempts)
    order = np.lexsort((attempt, origin))
    last[origin[order]] = order
    first_arrival = np.full(n_user, np.nan)
    firsts = attempt == 1
    first_arrival[origin[firsts]] = arrival_s[firsts]
    lr = reason[last]
    served = lr != REASON_REJECTED
    ttft = np.where(served, first_s[last] - first_arrival, np.nan)
    n_out = gen[last]
    tpot = np.where(served & (n_out > 1), (finish_s[last] - first_s[last]) / np.maximum(n_out - 1, 1), 0.0)
    return {"path": path[last], "arrival_s": first_arrival, "rejected": ~served, "ttft_s": ttft, "tpot_s": tpot,
            "attempts": attempts, "finish_s": finish_s[last]}

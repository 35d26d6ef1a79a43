"""What a simulated fleet is made of: engine limits, the step-time model, the fleet, and events.

Every number is a plain, frozen dataclass field so a configuration can be printed, compared and
written into ``data/sample/README.md``. Times are seconds, sizes tokens unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# the routers that ignore what a request shares with others (the ones the calibration chooses among)
ROUTERS = ("least_outstanding", "round_robin", "random", "power_of_two")
# a router that sends a conversation's turn where its previous turn ran (app/engine/router.py)
PREFIX_ROUTERS = ("prefix_aware",)
ALL_ROUTERS = ROUTERS + PREFIX_ROUTERS
DEFAULT_AFFINITY_MARGIN = 16  # outstanding requests (FleetConfig.affinity_margin)


@dataclass(frozen=True)
class EngineConfig:
    """One vLLM V1 engine (one replica = one GPU, one engine core, ``engine="0"``).

    ``num_gpu_blocks`` is deliberately small for an H100 (3,500 blocks x 16 tokens = 56k tokens,
    about 7 GiB of Llama-3.1-8B KV at 128 KiB/token, as with ``--gpu-memory-utilization 0.33`` on a
    GPU shared with other services): with the ~28k blocks of a dedicated H100 the fleet would need
    millions of requests a day before memory, the resource the economics hinge on, ever binds.
    """

    model: str = "llama-3.1-8b"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192  # per-step token budget of chunked prefill
    block_size: int = 16  # tokens per KV block
    num_gpu_blocks: int = 3500
    max_model_len: int = 32768
    gpu_memory_utilization: float = 0.33
    # vLLM's --scheduler-reserve-full-isl (default on in current V1): admit a waiting request only
    # when KV blocks for its whole prompt (+ tokens already generated, after a preemption) are free,
    # not just its first chunk; without it long prompts are admitted, then preempt themselves
    reserve_full_prompt: bool = True
    # share of the KV blocks an admission must leave free (vLLM V0's scheduler kept a 1 % watermark;
    # V1 keeps none): the twin assumes 0, the accuracy harness's fleets vary it
    admission_watermark: float = 0.0
    # vLLM's automatic prefix caching (on by default in V1; the economics sets it from
    # cache_config_info's enable_prefix_caching): it acts only on a trace whose requests say what
    # they share (``Trace.prefix_group``/``conversation``: app/engine/prefix.py); off, or on a trace
    # that says nothing, every prompt token is prefilled and held per request
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        # vLLM refuses to start when one max_model_len sequence does not fit in the KV cache
        if self.num_gpu_blocks * self.block_size < self.max_model_len:
            raise ValueError(f"KV cache of {self.num_gpu_blocks * self.block_size} tokens is smaller than "
                             f"max_model_len {self.max_model_len}")

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


@dataclass(frozen=True)
class StepTime:
    """Duration of one engine step (one forward pass of the whole batch), Llama-3.1-8B on one H100.

    ``step = base + per_decode_seq * decode_seqs + per_decode_seq_sq * decode_seqs^2
    + per_prefill_token * prefill_tokens + per_context_token * context_tokens
    + per_prefill_pair * prefill_attention_pairs``, times a lognormal noise factor. The quadratic
    batch term is 0 here; the accuracy harness gives some of its fleets one, and the twin keeps one
    where its fit finds it, up to the batches the fit saw (``per_decode_seq_sq_until``; linear, on
    the tangent, past them). ``context_tokens`` are the KV tokens the step reads (decode
    contexts plus prefill chunks with what precedes them); ``prefill_attention_pairs`` is
    chunk x (tokens before it + chunk / 2), the quadratic attention work that makes a 30k-token
    prompt cost ~2 s rather than ~1.5 s. Resulting figures: a decode step takes ~11 ms at batch 8,
    ~25 ms at batch 100 and ~45 ms at batch 256; prefill runs at ~18k tokens/s for short prompts.
    """

    base_s: float = 0.009  # weights read (~16 GB at ~3 TB/s) + scheduler/launch overhead
    per_decode_seq_s: float = 1.2e-4  # sampling, per-sequence compute at large batch
    per_decode_seq_sq_s: float = 0.0  # a batch that grows less efficient (per decoding sequence squared)
    # the batch u up to which the squared term holds (0: at every batch); beyond it the term grows on
    # its tangent at u, u x (2n - u): a law fitted on batches up to u says nothing of its curvature past
    per_decode_seq_sq_until: float = 0.0
    per_prefill_token_s: float = 5.0e-5  # ~16 GFLOP/token at ~350 TFLOP/s effective
    per_context_token_s: float = 6.0e-8  # 128 KiB of KV per token read at ~2.2 TB/s
    per_prefill_pair_s: float = 1.3e-9  # ~0.5 MFLOP per (query, key) pair over 32 layers
    noise_sigma: float = 0.03  # lognormal sigma of a step's duration (one draw per step or stretch)
    frontend_s: float = 0.002  # API server: request parsing before the engine sees the request
    frontend_per_token_s: float = 2.0e-7  # tokenization, per prompt token


@dataclass(frozen=True)
class Restart:
    """A replica's process dies at ``at_s`` (seconds after the export start) and is ready again
    ``down_s`` later. The process is relaunched ``relaunch_s`` after the crash (its
    ``process_start_time_seconds``); metrics are recreated when the engine is ready (``_created``)."""

    replica: int
    at_s: float
    down_s: float = 240.0
    relaunch_s: float = 20.0


@dataclass(frozen=True)
class ScrapeGap:
    """Prometheus stored no scrape of any replica in [start_s, start_s + duration_s) (seconds after the
    export start)."""

    start_s: float
    duration_s: float


@dataclass(frozen=True)
class Events:
    restarts: tuple[Restart, ...] = ()
    scrape_gaps: tuple[ScrapeGap, ...] = ()


NO_EVENTS = Events()


@dataclass(frozen=True)
class FleetConfig:
    """The fleet: ``replicas`` identical engines behind one router. ``affinity_margin`` (requests):
    the prefix-aware router keeps a conversation's turn on the replica of its previous turn unless
    that replica holds more than this many outstanding requests above the least loaded one."""

    replicas: int = 4
    router: str = "least_outstanding"
    engine: EngineConfig = field(default_factory=EngineConfig)
    step: StepTime = field(default_factory=StepTime)
    scrape_interval_s: float = 15.0
    bulk: bool = True  # advance decode-only stretches in one event (False: one event per step, for tests)
    affinity_margin: int = DEFAULT_AFFINITY_MARGIN

    def __post_init__(self) -> None:
        if self.router not in ALL_ROUTERS:
            raise ValueError(f"router {self.router!r}: expected one of {', '.join(ALL_ROUTERS)}")
        if self.replicas < 1:
            raise ValueError("replicas must be >= 1")
        if self.affinity_margin < 0:
            raise ValueError("affinity_margin must be >= 0")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

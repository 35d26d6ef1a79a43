"""Scenario replay: the observed demand, scaled, through N' modelled replicas.

The twin is the project's request- and step-level engine (``app.engine``: router, FCFS admission
under the KV limit, chunked prefill with a per-step token budget, preemption, backlog carried from
one window to the next) run with the parameters fitted from the operator's metrics
(:mod:`app.economics.model.capacity`) on requests synthesised from the observed demand
(:mod:`app.economics.model.demand`). Each scenario runs with several seeds; the spread is part of the
interval. Shares follow vLLM's observation times: TTFT by first token, TPOT and the joint promise by
finish, like the histograms the observed shares come from.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from app.economics.model import conversations
from app.economics.model.capacity import ReplicaModel
from app.economics.model.demand import Demand, PrefixSplit, shared_prefix, synthesize
from app.economics.run import compiled
from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.fleet import FleetRun
from app.engine.outcomes import NO_TIME, run_arrays
from app.engine.trace import PathSpec, Trace, TrafficSpec
from app.engine.twin_fleet import Counting, Simulated, run_fleet_compiled, simulate

WARMUP_S = 900.0  # the fleet is already busy when the export starts: replay the first quarter hour before it


@dataclass(frozen=True)
class Thresholds:
    """A path's promise in seconds (None = not part of the promise)."""

    ttft_s: float | None
    tpot_s: float | None


@dataclass
class RunShares:
    """Breach counts of one replay run per path: over everything, and per window (for calibration)."""

    requests: dict[str, int]
    ttft: dict[str, float]
    tpot: dict[str, float]
    joint: dict[str, float]
    windows: dict[str, dict[str, np.ndarray]]  # path -> {"ttft_breached", "first_tokens", ...} per window
    sim_seconds: float
    backlog_s: float = 0.0  # the longest the fleet held as many requests waiting as running (``backlog_seconds``)
    # per path, of the requests with a first token in the export's range: the share of their prompt
    # tokens the twin's prefix cache served (NaN: not counted; 0 without a cache at work)
    cached: dict[str, float] = field(default_factory=dict)


def twin_max_model_len(model: ReplicaModel) -> int:
    """The longest sequence the twin admits: ``max_model_len``, but never more than the KV cache holds
    (vLLM refuses to start otherwise; a fit that puts the KV capacity below ``max_model_len`` is
    flagged by the analysis, and the twin caps lengths instead of refusing)."""
    longest = max(MIN_TWIN_LEN, min(model.max_model_len, _twin_kv(model)))
    return int(longest // model.block_size * model.block_size)


UNBOUNDED_KV_TOKENS = 50_000_000  # the twin's KV capacity while it is being fitted (never binds)
MIN_TWIN_LEN = 256


def _twin_kv(model: ReplicaModel) -> float:
    """The twin's KV capacity: the model's, or unbounded while it is still being fitted."""
    return model.kv_tokens if math.isfinite(model.kv_tokens) and model.kv_tokens > 0 else UNBOUNDED_KV_TOKENS


def twin_config(model: ReplicaModel, replicas: int, gauge_s: float = 60.0) -> FleetConfig:
    """The twin fleet of ``model``; ``gauge_s``: the grid its gauges are sampled on (the demand's
    window, so that calibration compares them window by window)."""
    a = model.assumptions
    kv = _twin_kv(model)
    engine = EngineConfig(
        model="twin",
        max_num_seqs=model.max_num_seqs,
        max_num_batched_tokens=model.max_num_batched_tokens,
        block_size=model.block_size,
        num_gpu_blocks=max(twin_max_model_len(model) // model.block_size, int(kv // model.block_size)),
        max_model_len=twin_max_model_len(model),
        prefix_caching=prefix_caching(model),
    )
    step = StepTime(
        base_s=model.step_base_s * a.tpot_scale,
        per_decode_seq_s=model.step_per_seq_s * a.tpot_scale,
        per_decode_seq_sq_s=model.step_per_seq_sq_s * a.tpot_scale,
        per_decode_seq_sq_until=model.step_per_seq_sq_until,
        per_prefill_token_s=model.step_per_prefill_token_s * a.prefill_scale,
        per_context_token_s=model.step_per_context_token_s * a.tpot_scale,
        per_prefill_pair_s=model.step_per_prefill_pair_s * a.prefill_scale,
        noise_sigma=0.0,
        frontend_s=0.0,
        frontend_per_token_s=0.0,
    )
    margin = {} if a.affinity_margin is None else {"affinity_margin": int(a.affinity_margin)}
    return FleetConfig(replicas=replicas, router=model.router, engine=engine, step=step, scrape_interval_s=gauge_s,
                       **margin)


def prefix_caching(model: ReplicaModel) -> bool:
    """Whether the twin's engines cache prefixes: where the export shows the cache serving prompt
    tokens, unless the scenario turns it off (``Assumptions.prefix_cache``)."""
    case = model.assumptions.prefix_cache
    return case != "off" and math.isfinite(model.prefix_cached_share) and model.prefix_cached_share > 0


def prefix_arrays(model: ReplicaModel, demand: Demand, requests: Mapping[str, np.ndarray], seed: int = 0
                  ) -> dict[str, np.ndarray]:
    """What a scenario's requests share for the prefix cache (``Trace.prefix_group``, ``prefix_tokens``,
    and with conversations ``conversation``, ``history_tokens``, ``follows``, ``gap_s``), per path whose export shows the cache
    serving a share of its prompt tokens; none where caching is off.

    - a path split into a shared prefix and conversations (``PathDemand.prefix``, the "conversation"
      case: :mod:`app.economics.model.conversations`): every request starts with the prefix of
      ``shared_tokens`` (at most its prompt less its last token, in whole blocks), and the requests are
      chained into conversations (``turns``, the draws of ``seed``) whose turns resend their history,
      each copy of the observed users (``stream``: at traffic x2, two) apart; a later turn is sent in
      closed loop (``follows``, ``gap_s``: :mod:`app.engine.closed`), its gap after the answer the twin
      gives to the turn before it, as a chat's user waits for the answer;
    - otherwise (the "shared" case, or a path not split): a prefix every request of the path starts
      with (``shared_prefix``: whole KV blocks) that would serve the whole observed share. A shared
      prefix's hit rate is the same at any replica count (each replica caches it once)."""
    if not prefix_caching(model):
        return {}
    n = len(requests["path"])
    block = model.block_size
    group = np.full(n, -1, dtype=np.int64)
    tokens = np.zeros(n, dtype=np.int32)
    conv = np.full(n, -1, dtype=np.int64)
    history = np.zeros(n, dtype=np.int32)
    follows = np.full(n, -1, dtype=np.int64)
    gap = np.zeros(n)
    shared_only = model.assumptions.prefix_cache == "shared"
    for k, p in enumerate(demand.paths):
        if not (math.isfinite(p.cached_share) and p.cached_share > 0):
            continue
        mine = np.flatnonzero(requests["path"] == k)
        prompt = requests["prompt_tokens"][mine]
        split = None if shared_only else p.prefix
        if split is None:
            _, held = shared_prefix(prompt, p.cached_share, block)
        else:
            held = np.minimum((np.asarray(prompt, dtype=np.int64) - 1) // block * block, split.shared_tokens)
        group[mine] = np.where(held > 0, k, -1)
        tokens[mine] = held
        if split is not None and split.conversations:
            rng = conversations.chain_rng(seed, k)
            streams = requests["stream"][mine] if "stream" in requests else np.zeros(len(mine), dtype=np.int16)
            for s in np.unique(streams):  # each copy of the observed users holds its own conversations
                part = np.flatnonzero(streams == s)
                ids = mine[part]
                t = conversations.turns(requests["arrival_s"][ids], prompt[part], requests["output_tokens"][ids],
                                        held[part], split, block, rng, demand.origin)
                turn = t.conversation >= 0
                conv[ids[turn]] = ids[t.conversation[turn]]  # a conversation is named by its first turn's request
                history[ids] = t.history
                later = t.previous >= 0
                follows[ids[later]] = ids[t.previous[later]]
                gap[ids[later]] = t.gap_s[later]
    out = {"prefix_group": group, "prefix_tokens": tokens} if (group >= 0).any() else {}
    if (conv >= 0).any():
        out |= {"prefix_group": group, "prefix_tokens": tokens, "conversation": conv, "history_tokens": history,
                "follows": follows, "gap_s": gap}
    return out


# the fields of a ``PrefixSplit`` that :func:`prefix_arrays` does not read: what the split says of
# itself (its sources, the shares it was split into) and its check (``twin_cached_share``, set by the
# residual while its session is open). Every other field, and any field added later, is in the key.
SPLIT_NOT_DRAWN = frozenset({"cached_share", "conversation_share", "conversation_source", "conversation_detail",
                             "shared_share", "twin_cached_share", "followup_source", "think_source"})


def _keyed(value: Any) -> Hashable:
    """A value as a key compares it: a float by its bits (a NaN equals itself), an array by its dtype,
    shape and a digest of its bytes (the per-minute factors: the fit moves them in place)."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return ("array", data.dtype.str, data.shape, hashlib.blake2b(data.tobytes(), digest_size=16).hexdigest())
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value).hex()
    raise TypeError(f"prefix_key: no key for a {type(value).__name__}")


def split_key(split: PrefixSplit) -> tuple[tuple[str, Hashable], ...]:
    """Every field of ``split`` that draws the prefix arrays (all but ``SPLIT_NOT_DRAWN``), by name."""
    return tuple((f.name, _keyed(getattr(split, f.name))) for f in fields(split) if f.name not in SPLIT_NOT_DRAWN)


def prefix_inputs(demand: Demand) -> tuple[Hashable, ...]:
    """What :func:`prefix_arrays` reads of ``demand`` besides the requests: the origin (the per-minute
    follow-up factors are placed from it) and per path its name, its cached share (None where the cache
    served nothing) and its split (:func:`split_key`; None: no split)."""
    paths = []
    for p in demand.paths:
        cached = _keyed(p.cached_share) if math.isfinite(p.cached_share) and p.cached_share > 0 else None
        paths.append((p.name, cached, None if p.prefix is None else split_key(p.prefix)))
    return (_keyed(demand.origin), tuple(paths))


def prefix_key(model: ReplicaModel, demand: Demand) -> tuple[Hashable, ...]:
    """Everything :func:`prefix_arrays` reads besides the requests and the seed: runs of the same
    requests and seed whose keys are equal have the same prefix arrays (a grid's N', routers and
    sensitivity variants; the residual's scales and remedies). Of the model: whether it caches, the
    prefix case (the "shared" case reads no split) and the block size; of the demand:
    :func:`prefix_inputs`."""
    if not prefix_caching(model):
        return ()
    shared_only = model.assumptions.prefix_cache == "shared"
    origin, paths = prefix_inputs(demand)
    if shared_only:
        return (model.block_size, True, tuple((name, cached) for name, cached, _ in paths))
    return (model.block_size, False, origin, paths)


# a request's prefix arrays with conversations: group, conversation and follows (int64), tokens and
# history (int32), gap (float64)
PREFIX_BYTES = 40


@dataclass
class RequestSet:
    """The requests :func:`demand_requests` made for ``seed`` (at a traffic, context and longest
    sequence the holder keys them by), with the prefix arrays of the last :func:`prefix_key` they were
    replayed under: the runs that replay one set share both (drawing the conversations of a month's
    requests takes seconds, as making them does). Pass it as the ``requests`` of a replay of the same
    seed; a run under another key draws the arrays again."""

    requests: dict[str, np.ndarray]
    seed: int
    key: tuple[Any, ...] | None = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def prefix(self, model: ReplicaModel, demand: Demand) -> dict[str, np.ndarray]:
        """``prefix_arrays(model, demand, self.requests, self.seed)``, drawn once per key."""
        key = prefix_key(model, demand)
        if key != self.key:
            self.arrays, self.key = prefix_arrays(model, demand, self.requests, self.seed), key
        return self.arrays

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.requests.values()) + sum(v.nbytes for v in self.arrays.values())


Requests = Mapping[str, np.ndarray] | RequestSet  # a replay's requests, as made or with their prefix arrays


def _trace(demand: Demand, requests: Mapping[str, np.ndarray], seed: int, max_model_len: int,
           prefix: Mapping[str, np.ndarray] | None = None) -> Trace:
    specs = tuple(PathSpec(name=p.name, served_name=p.name, mean_rate=0.0, peak_to_trough=1.0, peak_hour_utc=0.0,
                           prompt_median=1.0, prompt_sigma=0.0) for p in demand.paths)
    arrival = requests["arrival_s"] + WARMUP_S
    keep = arrival >= 0
    n = int(keep.sum())
    # a month at traffic x1.5 is tens of millions of requests: the columns are shared, not copied,
    # when every request is kept (always for demand_requests' own), and hits_max is one broadcast False
    every = n == len(arrival)

    def kept(a: np.ndarray) -> np.ndarray:
        return a if every else a[keep]

    prefix = dict(prefix or {})
    if "follows" in prefix and not every:  # request indices: renumbered, a turn whose previous is dropped follows none
        f = prefix["follows"]
        index = np.cumsum(keep) - 1
        prefix["follows"] = np.where((f >= 0) & keep[np.maximum(f, 0)], index[np.maximum(f, 0)], -1)

    return Trace(origin=demand.origin - WARMUP_S, duration_s=demand.duration_s + WARMUP_S, warmup_s=WARMUP_S,
                 arrival_s=kept(arrival), path=kept(requests["path"]), prompt_tokens=kept(requests["prompt_tokens"]),
                 output_tokens=kept(requests["output_tokens"]), hits_max=np.broadcast_to(np.False_, (n,)),
                 request_id=np.arange(n, dtype=np.int64), spec=TrafficSpec(paths=specs, max_model_len=max_model_len),
                 seed=seed, **{k: kept(v) for k, v in prefix.items()})


def trace_of(demand: Demand, requests: Mapping[str, np.ndarray], seed: int, max_model_len: int,
             model: ReplicaModel | None = None) -> Trace:
    """The twin's trace of a scenario's requests (``demand_requests``, or requests a policy changed):
    times moved by the warm-up, requests before the replay's start dropped; with ``model``, the
    shared prefixes its prefix cache serves (``prefix_arrays``)."""
    return _trace(demand, requests, seed, max_model_len,
                  prefix_arrays(model, demand, requests, seed) if model is not None else None)


def _with_warmup(demand: Demand, reqs: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Prepend the first WARMUP_S of demand before the export starts (a stationary start). ``reqs``
    (``synthesize``'s, sorted by arrival) is emptied: a month's columns are let go one by one."""
    first = reqs["arrival_s"] < WARMUP_S
    early = {k: v[first] for k, v in reqs.items()}
    early["arrival_s"] = early["arrival_s"] - WARMUP_S
    # both parts are sorted, so the stable sort of their concatenation (the early ones first among
    # equal times) puts each early request before the first later one not earlier than it
    at = np.searchsorted(reqs["arrival_s"], early["arrival_s"], side="left")
    return {k: np.insert(reqs.pop(k), at, early[k]) for k in list(reqs)}


def outcomes(run: object) -> dict[str, np.ndarray]:
    """Per-request outcomes of a twin run: times in seconds since the trace origin (NaN if never)."""
    d = run_arrays(run)  # type: ignore[arg-type]
    for key in ("first_token", "finish"):
        us = d[f"{key}_us"]
        d[key] = np.where(us == NO_TIME, np.nan, us / 1e6)
    return d


def demand_requests(demand: Demand, traffic: float = 1.0, context: float = 1.0, seed: int = 0,
                    max_model_len: int = 32768) -> dict[str, np.ndarray]:
    """The requests a replay of ``demand`` at this traffic and context replays, for ``seed``."""
    return _with_warmup(demand, synthesize(demand, traffic, context, seed, max_model_len), seed)


def run_twin(model: ReplicaModel, demand: Demand, replicas: int, traffic: float = 1.0, context: float = 1.0,
             seed: int = 0, requests: Requests | None = None) -> tuple[FleetRun, dict[str, np.ndarray]]:
    """One twin run of a scenario: the fleet run (its per-minute gauges) and the per-request outcomes.
    ``requests``: ``demand_requests`` of the same arguments, when the caller has them already (the
    runs of a grid at several N' replay the same requests), or a :class:`RequestSet` of them (which
    keeps their prefix arrays too)."""
    compiled.ready(compiled.FLEET)
    run = run_fleet_compiled(_twin_trace(model, demand, traffic, context, seed, requests),
                             twin_config(model, replicas, demand.window_s), seed=seed)
    return run, outcomes(run)


def _twin_trace(model: ReplicaModel, demand: Demand, traffic: float, context: float, seed: int,
                requests: Requests | None) -> Trace:
    max_len = twin_max_model_len(model)
    if isinstance(requests, RequestSet):
        if requests.seed != seed:
            raise ValueError(f"a run of seed {seed} given the requests of seed {requests.seed}")
        return _trace(demand, requests.requests, seed, max_len, requests.prefix(model, demand))
    reqs = requests if requests is not None else demand_requests(demand, traffic, context, seed, max_len)
    return _trace(demand, reqs, seed, max_len, prefix_arrays(model, demand, reqs, seed))


def in_export(demand: Demand, t: np.ndarray) -> np.ndarray:
    """Twin times (seconds since the twin's origin) that fall inside the export's range."""
    return (t >= WARMUP_S) & (t < WARMUP_S + demand.duration_s)


def replay(model: ReplicaModel, demand: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
           traffic: float = 1.0, context: float = 1.0, seed: int = 0,
           requests: Requests | None = None) -> RunShares:
    """One replay run of a scenario, reduced to its breach shares: :func:`shares_of` of the run's
    outcomes, counted by the compiled engine as each request finishes (no row per request: a month of
    demand is tens of millions of requests)."""
    trace, sim = simulate_twin(model, demand, replicas, thresholds, seed, traffic, context, requests, view=False)
    first = int(round(WARMUP_S / demand.window_s))
    return shares_of_counts(sim, trace.path_names, thresholds,
                            (first + 1, first + 1 + int(round(demand.duration_s / demand.window_s))),
                            float(demand.window_s))


def backlog_seconds(gauges: np.ndarray, gauge_s: float, first: int, stop: int) -> float:
    """The longest stretch (s) of gauge points ``first`` .. ``stop - 1`` at which the fleet held a
    request waiting per replica or more: a queue that never empties is demand above what the replicas
    admit, a backlog that grows for as long as it lasts. There a breach share answers the capacity
    steeply (a few per cent less capacity is a longer wait for every request behind it)."""
    waiting = gauges[:, first:stop, 1].sum(axis=0)
    backed = waiting >= max(gauges.shape[0], 1)
    longest = run = 0
    for b in backed:
        run = run + 1 if b else 0
        longest = max(longest, run)
    return float(longest * gauge_s)


def shares_of_counts(sim: Simulated, names: Sequence[str], thresholds: Mapping[str, Thresholds],
                     export_points: tuple[int, int] | None = None, gauge_s: float = 60.0) -> RunShares:
    """:func:`shares_of` of a counted run (``breach_counts`` of its rows); with ``export_points``, the
    gauge points of the export's range, its ``backlog_s`` too."""
    assert sim.counts is not None, "a counted run (simulate_twin)"
    totals, windows = sim.counts.totals, sim.counts.windows
    nan = math.nan
    out = RunShares(requests={}, ttft={}, tpot={}, joint={}, windows={}, sim_seconds=sim.sim_seconds,
                    backlog_s=backlog_seconds(sim.gauges, gauge_s, *export_points) if export_points else 0.0)
    for k, name in enumerate(names):
        if thresholds.get(name) is None:
            continue
        first, ttft_b, done, tpot_b, joint_b, prompt, cached = (int(x) for x in totals[k])
        out.requests[name] = first
        out.cached[name] = cached / prompt if prompt else nan
        out.ttft[name] = ttft_b / first if first else nan
        out.tpot[name] = tpot_b / done if done else nan
        out.joint[name] = joint_b / done if done else nan
        out.windows[name] = {"first_tokens": windows[k, 0], "ttft_breached": windows[k, 1].astype(float),
                             "finished": windows[k, 2], "joint_breached": windows[k, 3].astype(float)}
    return out


def simulate_twin(model: ReplicaModel, demand: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
                  seed: int = 0, traffic: float = 1.0, context: float = 1.0,
                  requests: Requests | None = None, view: bool = True) -> tuple[Trace, Simulated]:
    """The compiled run of a scenario (``requests`` as in :func:`run_twin`), counted over the export's
    range as it runs (``twin_fleet.Counting``: breaches by ``thresholds`` per window, and with
    ``view`` what ``calibration.twin_view`` reads per minute), for a caller that reduces the counts
    itself."""
    trace = _twin_trace(model, demand, traffic, context, seed, requests)
    names = trace.path_names
    n_windows = int(round(demand.duration_s / demand.window_s))
    counting = Counting(
        ttft_s=np.array([_th(thresholds, n, "ttft_s") for n in names], dtype=float),
        tpot_s=np.array([_th(thresholds, n, "tpot_s") for n in names], dtype=float),
        t_lo=WARMUP_S, t_hi=WARMUP_S + demand.duration_s, window_s=float(demand.window_s), n_windows=n_windows,
        origin=float(demand.origin), view_window_s=float(demand.window_s), n_view=n_windows if view else 0)
    compiled.ready(compiled.FLEET)
    return trace, simulate(trace, twin_config(model, replicas, demand.window_s), seed=seed, counting=counting)


def _th(thresholds: Mapping[str, Thresholds], name: str, key: str) -> float:
    th = thresholds.get(name)
    value = getattr(th, key) if th is not None else None
    return math.nan if value is None else float(value)


def shares_of(d: Mapping[str, np.ndarray], demand: Demand, names: Sequence[str],
              thresholds: Mapping[str, Thresholds], sim_seconds: float = 0.0) -> RunShares:
    """Per path over the export's range, and per window: first tokens and TTFT breaches (by first-token
    time), finished requests and joint breaches (by finish time), as the histograms observe them."""
    out = RunShares(requests={}, ttft={}, tpot={}, joint={}, windows={}, sim_seconds=sim_seconds)
    n_windows = int(round(demand.duration_s / demand.window_s))
    for k, name in enumerate(names):
        th = thresholds.get(name)
        if th is None:
            continue
        is_path = d["path"] == k
        first = is_path & ~np.isnan(d["first_token"]) & in_export(demand, d["first_token"])
        done = is_path & d["finished"] & in_export(demand, d["finish"])
        ttft_b = d["ttft_s"] > th.ttft_s if th.ttft_s is not None else np.zeros(len(d["ttft_s"]), bool)
        tpot_b = d["tpot_s"] > th.tpot_s if th.tpot_s is not None else np.zeros(len(d["tpot_s"]), bool)
        joint_b = ttft_b | tpot_b
        out.requests[name] = int(first.sum())
        if "cached_tokens" in d:
            prompt = float(d["prompt_tokens"][first].sum())
            out.cached[name] = float(d["cached_tokens"][first].sum()) / prompt if prompt else math.nan
        out.ttft[name] = float(ttft_b[first].mean()) if first.any() else math.nan
        out.tpot[name] = float(tpot_b[done].mean()) if done.any() else math.nan
        out.joint[name] = float(joint_b[done].mean()) if done.any() else math.nan
        wf = ((d["first_token"][first] - WARMUP_S) // demand.window_s).astype(int)
        wd = ((d["finish"][done] - WARMUP_S) // demand.window_s).astype(int)
        out.windows[name] = {
            "first_tokens": np.bincount(wf, minlength=n_windows)[:n_windows],
            "ttft_breached": np.bincount(wf, weights=ttft_b[first], minlength=n_windows)[:n_windows],
            "finished": np.bincount(wd, minlength=n_windows)[:n_windows],
            "joint_breached": np.bincount(wd, weights=joint_b[done], minlength=n_windows)[:n_windows],
        }
    return out

"""Each path's cached share split for the replay (:mod:`app.economics.model.conversations`), and the
follow-up share fitted so that the twin at the observed fleet size and router serves the observed
share.

Two steps of the analysis (:func:`app.economics.predict.scenarios.analyse`):

1. :func:`split` (before the calibration, no twin run): per path with cache hits, the shared prefix and
   the conversation share (given, or the least the prompt lengths allow), and a first follow-up share
   from arithmetic: the history the conversations hold, if every turn found its history where it left
   it, is the observed conversation part divided by the chance a follow-up lands on its previous
   turn's replica under the fleet's router (1 at one replica or under prefix-aware routing, else
   1/N: load-based routing sends a turn where the load is least, wherever its history is).
2. :func:`refine` (on the calibrated twin): the twin replays the calibration's span at the observed N
   and router, and the follow-up share moves until the twin's served share meets the observed one
   (history is also evicted, and a follow-up may arrive while its previous turn is still running).
   What the twin serves at the end is the check, stated with the split.

The think time (unless given) is fitted on how the computed prompt tokens move over time. The total
share cannot tell a long think time from a short one: fewer follow-ups sent sooner serve as many
tokens as more sent later. But they serve them at different times. A conversation ready long after
its answer cannot soak up a burst: the burst's requests find few conversations to continue, start
new ones, and compute their whole prompts, where the engine's users were continuing theirs. The
export's counters say, per window, how many prompt tokens the engine computed (prompt tokens less
those the cache served), and the twin at the observed N says the same of its replay; of the think
times at which the twin serves the observed share, the one whose computed tokens per minute follow
the export's closest is kept (on the real engine's prefix run: 7.5 s, the trace's users think 8 s).
Then, per minute, a factor on the follow-up share is moved until the twin computes, minute by minute,
about the prompt tokens the engine did: a minute whose users went on with their conversations more
than the average did is one where the engine computed less.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from app.economics.model import conversations as conv
from app.economics.model.capacity import ReplicaModel
from app.economics.model.demand import DEFAULT_THINK_S, Demand, PrefixSplit
from app.economics.run.replay import (
    WARMUP_S,
    Thresholds,
    demand_requests,
    prefix_caching,
    run_twin,
    shares_of_counts,
    simulate_twin,
    twin_max_model_len,
)

SPLIT_SEED = 1000  # the requests the split and the follow-up share are fitted on (the residual's first seed)
HELD_OUT_SEED = 1001  # requests the fit did not see: a fitted think time or per-minute factor must hold on them
MIN_GAIN = 0.10  # ... by bringing the computed tokens per minute this much closer (relative), or it is dropped
ROUNDS = 4  # twin runs at most to meet the observed share
TOLERANCE_ABS = 0.005  # the twin's served share meets the observed within 0.5 pp
TOLERANCE_REL = 0.02  # or 2 % of it
FALLBACK_TPOT_S = 0.05  # a turn's decode per token when the export has no inter-token latency
MIN_THINK_S = 1.0  # the think time is not fitted below this
THINK_STEP = 2 ** -0.5  # the think times tried below the longest that serves the observed share
THINK_PATIENCE = 2  # tried times past the best before the search stops
COMPUTED_BLOCK_S = 60  # the computed prompt tokens are compared per minute (or per demand window if longer)
FOLLOW_ROUNDS = 5  # twin runs that move the follow-up share per minute
FOLLOW_FACTOR_RANGE = (0.2, 3.0)  # the per-minute factor on the follow-up share stays within this


def home_chance(router: str, replicas: int) -> float:
    """The chance a follow-up turn lands on the replica of its previous turn: 1 at one replica or under
    prefix-aware routing, else 1/N (a load-based router does not know where the history is)."""
    return 1.0 if replicas <= 1 or router == "prefix_aware" else 1.0 / replicas


def given_share(model: ReplicaModel, path: str) -> float | None:
    """The conversation share the user gave for ``path`` (its own, else every path's), or None."""
    given = model.assumptions.conversation_share or {}
    value = given.get(path, given.get("*"))
    return None if value is None else float(value)


def _close(twin: float, observed: float) -> bool:
    return math.isfinite(twin) and abs(twin - observed) <= max(TOLERANCE_ABS, TOLERANCE_REL * observed)


def _set(demand: Demand, span: Demand, k: int, value: PrefixSplit | None) -> None:
    demand.paths[k].prefix = value
    span.paths[k].prefix = value


def split(model: ReplicaModel, demand: Demand, span: Demand, replicas: int, itl_mean_s: float | None) -> None:
    """Step 1: set each path's ``PathDemand.prefix`` (of ``demand`` and of its calibration ``span``):
    the split of its observed cached share and the arithmetic's follow-up share. None where the cache
    served nothing, where it is off, or in the "shared" case (a shared prefix alone)."""
    case = model.assumptions.prefix_cache
    if not prefix_caching(model) or case == "shared":
        for k in range(len(demand.paths)):
            _set(demand, span, k, None)
        return
    block = model.block_size
    reqs = demand_requests(span, 1.0, 1.0, SPLIT_SEED, twin_max_model_len(model))
    think = model.assumptions.think_s if model.assumptions.think_s is not None else DEFAULT_THINK_S
    tpot = itl_mean_s if itl_mean_s is not None and math.isfinite(itl_mean_s) and itl_mean_s > 0 else FALLBACK_TPOT_S
    for k, p in enumerate(demand.paths):
        if not (math.isfinite(p.cached_share) and p.cached_share > 0):
            _set(demand, span, k, None)
            continue
        mine = reqs["path"] == k
        prompt, output, arrival = reqs["prompt_tokens"][mine], reqs["output_tokens"][mine], reqs["arrival_s"][mine]
        size, served, share, kind, detail = conv.split_cached(prompt, p.cached_share, block, given_share(model, p.name))
        weight = float(p.requests.sum())
        ttft = float(np.dot(p.ttft_mean_s, p.requests) / weight) if weight > 0 else 0.0
        s = PrefixSplit(cached_share=p.cached_share, conversation_share=share, conversation_source=kind,
                        conversation_detail=detail, shared_tokens=size, shared_share=served, think_s=float(think),
                        ttft_s=ttft, tpot_s=float(tpot))
        if share > 0:
            held = np.minimum((prompt - 1) // block * block, size)
            chance = home_chance(model.router, replicas)
            target = (p.cached_share - served) / chance
            f, ideal = conv.followup_for(target, arrival, prompt, output, held, s, block, SPLIT_SEED, k,
                                          origin=span.origin)
            s.followup_share = f
            s.followup_source = (f"arithmetic: conversations holding {ideal:.1%} of the prompt tokens as history, "
                                 f"{chance:.0%} of follow-ups landing where their history is under {model.router} "
                                 f"at {replicas} replica{'s' if replicas != 1 else ''}")
        _set(demand, span, k, s)


def _twin_shares(model: ReplicaModel, span: Demand, replicas: int, thresholds: Mapping[str, Thresholds]
                 ) -> dict[str, float]:
    _, sim = simulate_twin(model, span, replicas, thresholds, seed=SPLIT_SEED, view=False)
    return shares_of_counts(sim, [p.name for p in span.paths], thresholds).cached


def refine(model: ReplicaModel, demand: Demand, span: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
           say: Callable[[str], None] = lambda _m: None) -> None:
    """Step 2: fit each split path's conversations on the twin replaying ``span`` at the observed
    ``replicas``, and keep what the twin served (``twin_cached_share``).

    - think time (unless given): history waits in the cache for its next turn, where newer blocks may
      evict it first. Where even every request that can continue a conversation (a follow-up share of
      1) leaves the twin's cache short of the observed share, the history must come back sooner than
      assumed: the think time halves (down to ``MIN_THINK_S``) until the twin reaches it. From there
      down (steps of ``THINK_STEP``), each think time's follow-up share is fitted and the twin's
      computed prompt tokens per minute are compared with the export's (:func:`_computed_misfit`):
      the closest is kept (the module's docstring says why).
    - follow-up share: moved (at most ``ROUNDS`` twin runs) so that the twin's share meets the observed,
      the history the conversations hold scaled each time by how far the twin's history fell short or over."""
    block = model.block_size
    paths = [k for k, p in enumerate(span.paths) if p.prefix is not None and p.prefix.conversations]
    if not paths:
        return
    say(f"fitting the conversations: the twin at {replicas} replica{'s' if replicas != 1 else ''} serves the "
        "observed cached share")
    reqs = demand_requests(span, 1.0, 1.0, SPLIT_SEED, twin_max_model_len(model))

    def arrays(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = span.paths[k].prefix
        assert s is not None
        mine = reqs["path"] == k
        prompt = reqs["prompt_tokens"][mine]
        return (reqs["arrival_s"][mine], prompt, reqs["output_tokens"][mine],
                np.minimum((prompt - 1) // block * block, s.shared_tokens))

    splits = {k: span.paths[k].prefix for k in paths}
    searched: dict[int, str] = {}
    if model.assumptions.think_s is None:
        halved = _fit_think(model, span, replicas, thresholds, splits)
        searched = _search_think(model, demand, span, replicas, thresholds, splits, arrays, halved)
    else:
        _fit_followups(model, span, replicas, thresholds, splits, arrays)
    by_block = _follow_blocks(model, demand, span, replicas, thresholds, splits, arrays)
    for k, s in splits.items():
        assert s is not None
        s.followup_source = (f"fitted: the twin at {replicas} replica{'s' if replicas != 1 else ''} under "
                             f"{model.router} serves {100 * s.twin_cached_share:.1f} % of the prompt tokens against "
                             f"{100 * s.cached_share:.1f} % observed{searched.get(k, '')}{by_block.get(k, '')}")
        if k not in searched:  # _search_think set it: "fitted" (per minute) or "bound" (an upper bound)
            s.think_source = "given" if model.assumptions.think_s is not None else "assumed"
        demand.paths[k].prefix = s


def _fit_followups(model: ReplicaModel, span: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
                   splits: Mapping[int, PrefixSplit | None],
                   arrays: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """Move each path's follow-up share (at most ``ROUNDS`` twin runs, at its current think time) until
    the twin's served share meets the observed; ``twin_cached_share`` is what the last run served."""
    block = model.block_size
    ideal: dict[int, float] = {}
    for _ in range(ROUNDS):
        got = _twin_shares(model, span, replicas, thresholds)
        moved = False
        for k, s in splits.items():
            assert s is not None
            twin = got.get(span.paths[k].name, math.nan)
            s.twin_cached_share = twin
            if _close(twin, s.cached_share) or not math.isfinite(twin):
                continue
            arrival, prompt, output, held = arrays(k)
            if k not in ideal:
                ideal[k] = _ideal_at(s, arrival, prompt, output, held, block, k, span.origin)
            # the history the twin served against what the conversations hold, scaled to the observed
            history_twin = twin - s.shared_share
            want = s.cached_share - s.shared_share
            target = ideal[k] * (want / history_twin if history_twin > 0 else 2.0)
            if s.followup_share >= 1.0 and target > ideal[k]:
                continue  # every request that can continue a conversation already does
            f, ideal[k] = conv.followup_for(target, arrival, prompt, output, held, s, block, SPLIT_SEED, k,
                                             origin=span.origin)
            if abs(f - s.followup_share) > 1e-6:
                s.followup_share = f
                moved = True
        if not moved:
            break


def _search_think(model: ReplicaModel, demand: Demand, span: Demand, replicas: int,
                  thresholds: Mapping[str, Thresholds],
                  splits: Mapping[int, PrefixSplit | None],
                  arrays: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                  halved: set[int]) -> dict[int, str]:
    """From each path's longest think time that serves the observed share down (``THINK_STEP`` at a
    time, to ``MIN_THINK_S``), fit the follow-up share and measure :func:`_computed_misfit`; keep each
    path's best (stopping ``THINK_PATIENCE`` steps past it). Per path: how its think time was fitted,
    for the split's statement."""
    tried: dict[int, list[tuple[float, float, float, float]]] = {k: [] for k in splits}  # think, f, misfit, served
    active = set(splits)
    while active:
        _fit_followups(model, span, replicas, thresholds, splits, arrays)
        misfit = _computed_misfit(model, demand, span, replicas)
        for k in sorted(active):
            s = splits[k]
            assert s is not None
            # a think time counts only where its follow-up share serves the observed share (shorter is not
            # always more: a follow-up sent before its previous answer is out finds no history cached)
            served = _close(s.twin_cached_share, s.cached_share)
            tried[k].append((s.think_s, s.followup_share, misfit.get(k, math.nan) if served else math.nan,
                             s.twin_cached_share))
            values = [m for _, _, m, _ in tried[k]]
            found = bool(np.isfinite(values).any())
            best = int(np.nanargmin(values)) if found else 0
            if k not in misfit or (found and len(values) - 1 - best >= THINK_PATIENCE) \
                    or s.think_s * THINK_STEP < MIN_THINK_S:
                active.discard(k)
                s.think_s, s.followup_share, _, s.twin_cached_share = tried[k][best]
            else:
                s.think_s *= THINK_STEP
    # a shorter think time than the halving's must hold on requests the search did not see
    chosen = {k: (s.think_s, s.followup_share, s.twin_cached_share) for k, s in splits.items() if s is not None}
    moved = [k for k in chosen if tried[k] and chosen[k][0] != tried[k][0][0]]
    rejected: set[int] = set()
    if moved:
        held = _held_out(model, demand, span, replicas, splits, {
            "plain": lambda k, s: _put_state(s, tried[k][0]), "fitted": lambda k, s: _put_state(s, chosen[k])})
        rejected = {k for k in moved if not _better(held, k)}
        for k in rejected:
            tried[k] = [tried[k][0]]  # as if no shorter one had served: the halving's upper bound
    for k, s in splits.items():
        assert s is not None
        _put_state(s, tried[k][0] if k in rejected else chosen[k])
    notes: dict[int, str] = {}
    for k, rows in tried.items():
        s = splits[k]
        assert s is not None
        s.think_source = "fitted"
        if k in rejected or not np.isfinite([m for _, _, m, _ in rows]).any():
            s.think_source = "bound"
            why = ("a shorter one followed the export's computed tokens per minute closer on the requests it was "
                   "fitted on but not, by 10 %, on a second draw" if k in rejected else
                   "the export has no cached tokens per window to fit it closer" if len(rows) == 1 else
                   "no shorter one served the observed share, so the computed tokens per minute could not choose")
            notes[k] = (f"; the think time fitted, an upper bound: at {s.think_s:.3g} s the cache holds enough "
                        f"history" + (f" (halved from {DEFAULT_THINK_S:g} s, at which it could not)" if k in halved
                                      else "") + f"; {why}")
            continue
        others = ", ".join(f"{t:.3g} s {100 * m:.0f} %" for t, _, m, _ in rows if t != s.think_s and math.isfinite(m))
        best = min(m for _, _, m, _ in rows if math.isfinite(m))
        notes[k] = (f"; the think time fitted, {s.think_s:.3g} s: of those at which the twin serves the observed "
                    f"share, the one whose computed prompt tokens per minute follow the export's closest (their "
                    f"RMS difference {100 * best:.0f} % of the export's mean" + (f"; {others}" if others else "")
                    + ")")
    return notes


def _put_state(s: PrefixSplit, state: tuple[float, ...]) -> None:
    s.think_s, s.followup_share = state[0], state[1]
    s.twin_cached_share = state[-1]


def _put_factors(s: PrefixSplit, factors: np.ndarray | None, state: tuple[float, float] | None) -> None:
    s.followup_by_block = factors
    if state is not None:
        s.followup_share, s.twin_cached_share = state


def _block_s(demand: Demand) -> float:
    per = max(1, int(round(max(COMPUTED_BLOCK_S, demand.window_s) / demand.window_s)))
    return float(per * demand.window_s)


def _computed_blocks(model: ReplicaModel, demand: Demand, span: Demand, replicas: int, seed: int = SPLIT_SEED
                     ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per path with per-window prefix-cache counters, the blocks of ``_block_s`` (counted from
    ``demand``'s origin) that lie whole in ``span`` with every window known: (their index, the
    prompt tokens the twin computed in them — prompt less cached, by first token, at the observed N
    on ``span`` — and those the export's counters say the engine computed)."""
    _, out = run_twin(model, span, replicas, seed=seed)
    block_s = _block_s(demand)
    per = int(round(block_s / span.window_s))
    shift = span.origin - demand.origin  # the span's start, from the demand's
    first = int(round(shift / span.window_s))
    n_windows = len(span.replicas)
    t = out["first_token"] - WARMUP_S
    seen = np.isfinite(t) & (t >= 0) & (t < n_windows * span.window_s)
    at = np.floor((t[seen] + shift) / block_s).astype(np.int64)
    computed = (out["prompt_tokens"] - out["cached_tokens"]).astype(float)[seen]
    paths = out["path"][seen]
    group = (first + np.arange(n_windows)) // per
    lo, n_blocks = int(group[0]), int(group[-1]) + 1
    result: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for k, p in enumerate(span.paths):
        if p.prompt_tokens is None or p.cached_tokens is None:
            continue
        observed = p.prompt_tokens - p.cached_tokens
        known = np.isfinite(observed)
        obs = np.bincount(group[known], weights=observed[known], minlength=n_blocks)
        whole = np.bincount(group, weights=known.astype(float), minlength=n_blocks) == per
        twin = np.bincount(at[paths == k], weights=computed[paths == k], minlength=n_blocks)[:n_blocks]
        idx = np.flatnonzero(whole)
        idx = idx[idx >= lo]
        result[k] = (idx, twin[idx], obs[idx])
    return result


def _misfit(blocks: tuple[np.ndarray, np.ndarray, np.ndarray]) -> float:
    """The RMS difference of the twin's computed prompt tokens per block from the export's, relative to
    the export's mean per block (NaN: fewer than two blocks, or nothing computed)."""
    _, twin, obs = blocks
    if len(obs) < 2 or not obs.mean() > 0:
        return math.nan
    return float(np.sqrt(np.mean((twin - obs) ** 2)) / obs.mean())


def _computed_misfit(model: ReplicaModel, demand: Demand, span: Demand, replicas: int, seed: int = SPLIT_SEED
                     ) -> dict[int, float]:
    """Per path with per-window prefix-cache counters: :func:`_misfit` of :func:`_computed_blocks`."""
    return {k: _misfit(b) for k, b in _computed_blocks(model, demand, span, replicas, seed).items()}


def _held_out(model: ReplicaModel, demand: Demand, span: Demand, replicas: int,
              splits: Mapping[int, PrefixSplit | None], states: Mapping[str, Callable[[int, PrefixSplit], None]]
              ) -> dict[str, dict[int, float]]:
    """:func:`_computed_misfit` on the held-out draw (``HELD_OUT_SEED``: requests the fit did not see) of
    each named state, set on every split by its setter."""
    out = {}
    for name, put in states.items():
        for k, s in splits.items():
            assert s is not None
            put(k, s)
        out[name] = _computed_misfit(model, demand, span, replicas, HELD_OUT_SEED)
    return out


def _better(held: Mapping[str, Mapping[int, float]], k: int) -> bool:
    """Whether the fitted state beats the plain one on the held-out draw by ``MIN_GAIN`` at least."""
    base, fitted = held["plain"].get(k, math.nan), held["fitted"].get(k, math.nan)
    return math.isfinite(base) and math.isfinite(fitted) and fitted <= (1 - MIN_GAIN) * base


def _follow_blocks(model: ReplicaModel, demand: Demand, span: Demand, replicas: int,
                   thresholds: Mapping[str, Thresholds], splits: Mapping[int, PrefixSplit | None],
                   arrays: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> dict[int, str]:
    """Per block of a minute, a factor on each path's follow-up share, moved (``FOLLOW_ROUNDS`` twin
    runs) by how many more prompt tokens the twin computed in that block than the export says the
    engine did (a block that computed too much needs more of its requests to go on with a
    conversation), the total share refitted after each move (:func:`_fit_followups`). Kept where it
    brings the twin closer with the total share still served; per path, how it moved, for the split's
    statement."""
    block_s = _block_s(demand)
    n_blocks = -(-len(demand.replicas) * demand.window_s // int(block_s))
    start: dict[int, float] = {}
    initial: dict[int, tuple[float, float]] = {}  # each path's follow-up share and served share before
    for s in splits.values():
        assert s is not None
        s.followup_by_block, s.followup_origin, s.followup_block_s = np.ones(n_blocks), demand.origin, block_s
    best: dict[int, tuple[float, np.ndarray, float, float]] = {}
    for round_ in range(FOLLOW_ROUNDS + 1):
        blocks = _computed_blocks(model, demand, span, replicas)
        for k, s in splits.items():
            assert s is not None and s.followup_by_block is not None
            if k not in blocks:
                continue
            misfit = _misfit(blocks[k])
            if round_ == 0:
                start[k] = misfit
                initial[k] = (s.followup_share, s.twin_cached_share)
            held = round_ == 0 or _close(s.twin_cached_share, s.cached_share)  # the total share still served
            if math.isfinite(misfit) and held and (k not in best or misfit < best[k][0]):
                best[k] = (misfit, s.followup_by_block.copy(), s.followup_share, s.twin_cached_share)
            if round_ < FOLLOW_ROUNDS:
                idx, twin, obs = blocks[k]
                ratio = np.where(obs > 0, twin / np.maximum(obs, 1.0), 1.0)
                s.followup_by_block[idx] = np.clip(s.followup_by_block[idx] * ratio, *FOLLOW_FACTOR_RANGE)
        if round_ < FOLLOW_ROUNDS:
            _fit_followups(model, span, replicas, thresholds, splits, arrays)
    candidates = {k for k in best if best[k][0] < start.get(k, math.nan)}
    if candidates:  # the factors must hold on requests they were not fitted on
        held = _held_out(model, demand, span, replicas, splits, {
            "plain": lambda k, s: _put_factors(s, None, initial.get(k)),
            "fitted": lambda k, s: _put_factors(s, best[k][1], best[k][2:]) if k in candidates
            else _put_factors(s, None, initial.get(k))})
        candidates = {k for k in candidates if _better(held, k)}
    notes: dict[int, str] = {}
    for k, s in splits.items():
        assert s is not None
        if k not in candidates:
            s.followup_by_block = None
            if k in initial:
                s.followup_share, s.twin_cached_share = initial[k]
            continue
        misfit, factors, s.followup_share, s.twin_cached_share = best[k]
        s.followup_by_block = factors
        notes[k] = (f"; per minute, the follow-up share moved x{factors.min():.2g} to x{factors.max():.2g} so that the "
                    f"twin computes the prompt tokens the export says the engine did (their RMS difference "
                    f"{100 * start[k]:.0f} % -> {100 * misfit:.0f} % of the export's mean per minute; on a second "
                    f"draw {100 * held['plain'][k]:.0f} % -> {100 * held['fitted'][k]:.0f} %)")
    return notes


def _fit_think(model: ReplicaModel, span: Demand, replicas: int, thresholds: Mapping[str, Thresholds],
               splits: Mapping[int, PrefixSplit | None]) -> set[int]:
    """Halve the think time of each path whose twin cannot reach its observed share with every request
    that can continue a conversation doing so; the paths whose think time moved. The follow-up shares
    are left at 1 for :func:`refine` to fit."""
    moved: set[int] = set()
    for s in splits.values():
        assert s is not None
        s.followup_share = 1.0
    while True:
        got = _twin_shares(model, span, replicas, thresholds)
        short = [k for k, s in splits.items() if s is not None and s.think_s / 2 >= MIN_THINK_S
                 and got.get(span.paths[k].name, math.nan) < s.cached_share - max(TOLERANCE_ABS,
                                                                                 TOLERANCE_REL * s.cached_share)]
        if not short:
            return moved
        for k in short:
            s = splits[k]
            assert s is not None
            s.think_s /= 2
            moved.add(k)


def _ideal_at(s: PrefixSplit, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, held: np.ndarray,
              block: int, k: int, origin: float) -> float:
    """The history share the split's conversations hold at its follow-up share (every turn at home)."""
    c, h = conv.chain(arrival, prompt, output, held, s, block, conv.chain_rng(SPLIT_SEED, k), origin)
    total = float(np.sum(prompt))
    return float(conv.history_hits(held, np.where(c >= 0, h, 0), block).sum()) / total if total > 0 else 0.0


def check(demand: Demand, views_cached: list[dict[str, float]]) -> None:
    """What the twin at the observed N served in the residual's runs (their mean per path), kept with
    each split as its check."""
    for p in demand.paths:
        if p.prefix is None:
            continue
        values = [v[p.name] for v in views_cached if math.isfinite(v.get(p.name, math.nan))]
        if values:
            p.prefix.twin_cached_share = float(np.mean(values))

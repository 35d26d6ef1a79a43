"""What a path's cached prompt tokens are made of, and the conversations the replay draws for them.

The prefix-cache counters (``vllm:prefix_cache_hits_total``) give one number per path: the share of
prompt tokens the cache served at the observed fleet size N and router. Two kinds of sharing make it,
and they answer a change of N' differently (issue 41's three cases):

- **shared**: a prefix every request of the path starts with (a system prompt). Each replica caches
  it once, so its hit rate is the same at any N' and under any router.
- **conversation**: a follow-up turn resends the earlier turns and the answers to them. They are
  cached where the previous turn ran; under load-based routing a follow-up lands on another replica
  with probability (N'-1)/N' and computes its history again.
- **prefix-aware routing**: a follow-up goes to the replica of its previous turn unless that one is
  loaded beyond a margin (:mod:`app.engine.router`), so the conversation part holds as N' grows.

The metrics cannot split the sum, so the split is an assumption (:class:`PrefixSplit`), given per path
or for every path (``Assumptions.conversation_share``: the share of the cached tokens that are
conversation history), and otherwise **as little conversation as the prompt lengths allow**
(:func:`split_cached`): a prefix every request starts with is no longer than the path's short prompts
(the ``SHORT_PROMPT_QUANTILE`` of its prompt lengths, in whole KV blocks), so what such a prefix cannot
serve of the observed share is history. That default is the conservative end for what prefix-aware
routing is worth (it assumes the most of the hits are ones no router changes); on the real engine's
prefix run (a 256-token system prompt, conversations of 2.5 turns) it is the true split.

The replay draws the conversations from the synthesized requests themselves (:func:`chain`), so the
per-window counts and the length histograms stay those observed: a turn is followed by another with
chance ``followup_share`` (so a conversation has 1 / (1 - that) turns on average, at any traffic), ready
once its answer is out (estimated from the observed TTFT and TPOT) and an exponential think time has
passed; in arrival order, a request continues the conversation ready earliest whose whole history its
prompt holds — the previous turn's prompt and answer — so that the long prompts of the histogram are
the late turns, as they are in a chat; one that holds none starts a conversation, and a conversation
no request continues within one mean think time of being ready has ended. ``followup_share`` is fitted so that the twin at
the observed N and router serves the observed share (``app.economics.predict.conversations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from app.economics.model.demand import PrefixSplit, shared_prefix

SHORT_PROMPT_QUANTILE = 0.01  # a prefix every request starts with is no longer than the path's shortest prompts
CHAIN_SEED = 41  # the conversations' own random stream (a request set's draws stay those without them)
MIN_PATIENCE_S = 1.0  # a conversation waits at least this long past ready for its next turn (think time 0)
LOOKAHEAD = 32  # a follow-up looks among this many of the earliest-ready conversations for one it can hold


def short_prompt_prefix(prompt: np.ndarray, block: int, quantile: float = SHORT_PROMPT_QUANTILE) -> int:
    """The longest prefix (whole blocks of ``block`` tokens) a cache can serve to the path's short
    prompts (their ``quantile``): a request computes at least its last token."""
    if len(prompt) == 0:
        return 0
    short = float(np.quantile(np.asarray(prompt, dtype=float), quantile))
    return int(max(short - 1, 0) // block * block)


def served_share(prompt: np.ndarray, size: int, block: int) -> float:
    """The share of ``prompt``'s tokens a prefix of ``size`` tokens every request starts with serves
    (each request holds it up to its prompt less one, in whole blocks)."""
    p = np.asarray(prompt, dtype=np.int64)
    total = float(p.sum())
    if total <= 0 or size <= 0:
        return 0.0
    return float(np.minimum((p - 1) // block * block, size).sum()) / total


def split_cached(prompt: np.ndarray, cached_share: float, block: int, conversation_share: float | None
                 ) -> tuple[int, float, float, str, str]:
    """The shared prefix and the conversation share of a path whose cache served ``cached_share`` of
    ``prompt``'s tokens: (shared prefix tokens, the share of prompt tokens it serves, conversation
    share of the cached tokens, its source, in words). ``conversation_share`` given: the prefix serves
    the rest (the size nearest, :func:`~app.economics.model.demand.shared_prefix`); None: the longest
    prefix the short prompts allow, conversation the rest (none when that prefix serves it all)."""
    if not cached_share > 0:
        return 0, 0.0, 0.0, "assumed", "the cache served no prompt token"
    if conversation_share is not None:
        if not 0.0 <= conversation_share <= 1.0:
            raise ValueError(f"conversation share {conversation_share}: expected a share of the cached tokens in [0, 1]")
        size, _ = shared_prefix(prompt, (1.0 - conversation_share) * cached_share, block)
        served = served_share(prompt, size, block)
        conv = max(0.0, 1.0 - served / cached_share)
        return size, served, conv, "given", (
            f"{conversation_share:.0%} of the cached tokens are conversation history as given (--conversation-share); "
            f"a prefix of {size:,} tokens every request starts with serves {served:.1%} of the prompt tokens")
    bound = short_prompt_prefix(prompt, block)
    served = served_share(prompt, bound, block)
    if served >= cached_share:
        size, _ = shared_prefix(prompt, cached_share, block)
        served = served_share(prompt, size, block)
        return size, served, 0.0, "assumed", (
            f"every cached token a shared prefix: a prefix of {size:,} tokens every request starts with (its "
            f"short prompts, the {SHORT_PROMPT_QUANTILE:.0%} quantile, allow {bound:,}) serves the observed "
            f"{cached_share:.1%}; the least conversation the prompt lengths allow, so prefix-aware routing is "
            "worth nothing unless conversations are assumed (--conversation-share)")
    conv = 1.0 - served / cached_share
    return bound, served, conv, "assumed", (
        f"the least conversation the prompt lengths allow: a prefix every request starts with is no longer "
        f"than its short prompts (the {SHORT_PROMPT_QUANTILE:.0%} quantile, in whole blocks: {bound:,} tokens) "
        f"and serves {served:.1%} of the prompt tokens; the rest of the observed {cached_share:.1%} "
        f"({conv:.0%} of the cached tokens) is taken as conversation history (set --conversation-share)")


@njit(cache=True)
def _sift_down(t: np.ndarray, idx: np.ndarray, size: int) -> None:
    k = 0
    while True:
        left = 2 * k + 1
        if left >= size:
            return
        c = left
        if left + 1 < size and t[left + 1] < t[left]:
            c = left + 1
        if t[c] >= t[k]:
            return
        t[k], t[c] = t[c], t[k]
        idx[k], idx[c] = idx[c], idx[k]
        k = c


@njit(cache=True)
def _pop(t: np.ndarray, idx: np.ndarray, size: int) -> int:
    size -= 1
    t[0], idx[0] = t[size], idx[size]
    _sift_down(t, idx, size)
    return size


@njit(cache=True)
def _push(t: np.ndarray, idx: np.ndarray, size: int, when: float, i: int) -> int:
    k = size
    t[k], idx[k] = when, i
    while k > 0:
        parent = (k - 1) // 2
        if t[parent] <= t[k]:
            break
        t[k], t[parent] = t[parent], t[k]
        idx[k], idx[parent] = idx[parent], idx[k]
        k = parent
    return size + 1


@njit(cache=True)
def _chain(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, held: np.ndarray, ready: np.ndarray,
           wish: np.ndarray, follow: float, patience: float, block: int, lookahead: int, conv: np.ndarray,
           history: np.ndarray, previous: np.ndarray) -> None:
    """Requests in arrival order: ``conv[i]`` the first turn's index of i's conversation, ``history[i]``
    the tokens after the shared prefix that repeat its earlier turns (0: a first turn), ``previous[i]``
    its conversation's turn before it (-1: a first turn). Request i's
    conversation goes on after it when ``wish[i] < follow``, from ``ready[i]`` on. A request continues,
    among the ``lookahead`` conversations ready earliest, the longest whose whole history its prompt
    holds (with the same shared prefix, and a block of history at least): its prompt is mostly history,
    as a late turn's is; a request that holds none starts a conversation."""
    n = arrival.shape[0]
    heap_t = np.empty(n)
    heap_i = np.empty(n, dtype=np.int64)
    aside_t = np.empty(lookahead)
    aside_i = np.empty(lookahead, dtype=np.int64)
    size = 0
    for i in range(n):
        a = arrival[i]
        while size > 0 and heap_t[0] < a - patience:  # conversations that ended
            size = _pop(heap_t, heap_i, size)
        conv[i] = i
        history[i] = 0
        previous[i] = -1
        if size > 0:
            tried = 0
            best = -1
            while size > 0 and heap_t[0] <= a and tried < lookahead:
                aside_t[tried] = heap_t[0]
                aside_i[tried] = heap_i[0]
                size = _pop(heap_t, heap_i, size)
                j = aside_i[tried]
                # the conversation so far is j's prompt and answer; a cache holds all of it but the
                # answer's last token (whose KV is never computed)
                h = prompt[j] + output[j] - 1 - held[j]
                if held[j] == held[i] and prompt[i] >= prompt[j] + output[j] and h >= block and h > history[i]:
                    best = tried
                    history[i] = h
                tried += 1
            for x in range(tried):
                if x == best:
                    conv[i] = conv[aside_i[x]]
                    previous[i] = aside_i[x]
                else:
                    size = _push(heap_t, heap_i, size, aside_t[x], aside_i[x])
        if wish[i] < follow:
            size = _push(heap_t, heap_i, size, ready[i], i)


@dataclass(frozen=True)
class Turns:
    """One path's requests as conversations (:func:`turns`): per request its conversation (the index of
    its first turn; -1 for a request no later turn continues and that continues none), its history
    tokens after the shared prefix, the turn before it (-1: none) and its gap: how long after that
    turn's answer (as estimated, ``PrefixSplit.ttft_s`` + output x ``tpot_s``) it arrives, which a
    closed-loop replay keeps after the answer the twin gives (``Trace.gap_s``; 0 for a first turn)."""

    conversation: np.ndarray
    history: np.ndarray
    previous: np.ndarray
    gap_s: np.ndarray


def chain(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, held: np.ndarray, split: PrefixSplit,
          block: int, rng: np.random.Generator, origin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`turns`' (conversation, history)."""
    t = turns(arrival, prompt, output, held, split, block, rng, origin)
    return t.conversation, t.history


def turns(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, held: np.ndarray, split: PrefixSplit,
          block: int, rng: np.random.Generator, origin: float = 0.0) -> Turns:
    """One path's requests (sorted by arrival, seconds after ``origin``, unix seconds) as conversations
    (:class:`Turns`). Where the split has a factor per block on its follow-up share
    (``PrefixSplit.factor_at``), a request wishes to go on with ``followup_share`` x its block's factor."""
    n = len(arrival)
    wish = rng.random(n)
    factor = split.factor_at(origin, arrival)
    if factor is not None:  # wish < f x factor, as wish / factor < f (the same draws)
        with np.errstate(divide="ignore"):
            wish = np.where(factor > 0, wish / factor, np.inf)
    think = rng.exponential(split.think_s, n) if split.think_s > 0 else np.zeros(n)
    a = np.asarray(arrival, dtype=float)
    answered = a + split.ttft_s + np.asarray(output, dtype=float) * split.tpot_s
    conv = np.empty(n, dtype=np.int64)
    history = np.empty(n, dtype=np.int64)
    previous = np.empty(n, dtype=np.int64)
    _chain(a, np.asarray(prompt, dtype=np.int64), np.asarray(output, dtype=np.int64),
           np.asarray(held, dtype=np.int64), answered + think, wish, float(split.followup_share),
           max(float(split.think_s), MIN_PATIENCE_S), int(block), LOOKAHEAD, conv, history, previous)
    count = np.bincount(conv, minlength=n)
    conv = np.where(count[conv] > 1, conv, -1)
    on = previous >= 0
    gap = np.zeros(n)
    gap[on] = a[on] - answered[previous[on]]
    return Turns(conversation=conv, history=history.astype(np.int32), previous=previous, gap_s=gap)


def history_hits(held: np.ndarray, history: np.ndarray, block: int) -> np.ndarray:
    """The history tokens a turn's first scheduling can hit where its conversation is cached whole: the
    leading blocks of its shared prefix and history, less the shared prefix (whole blocks)."""
    held = np.asarray(held, dtype=np.int64)
    return (held + np.asarray(history, dtype=np.int64)) // block * block - held


def chain_rng(seed: int, path: int) -> np.random.Generator:
    """The conversations' draws of one path of a replay of ``seed`` (their own stream)."""
    return np.random.default_rng([seed, CHAIN_SEED, path])


def followup_for(target: float, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, held: np.ndarray,
                 split: PrefixSplit, block: int, seed: int, path: int, steps: int = 14, origin: float = 0.0
                 ) -> tuple[float, float]:
    """The ``followup_share`` whose conversations hold ``target`` of ``prompt``'s tokens as history a
    cache keeping every conversation where it ran would serve (bisection, on the same draws): (share,
    the history share it gives; the most, at 1, when even that is below ``target``)."""
    total = float(np.sum(prompt))
    if total <= 0 or not target > 0:
        return 0.0, 0.0

    def ideal(f: float) -> float:
        conv, history = chain(arrival, prompt, output, held, replace(split, followup_share=f), block,
                              chain_rng(seed, path), origin)
        return float(history_hits(held, np.where(conv >= 0, history, 0), block).sum()) / total

    top = ideal(1.0)
    if top <= target:
        return 1.0, top
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if ideal(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi, ideal(hi)


def conversation_shares(text_items: Sequence[str]) -> dict[str, float]:
    """``PATH=SHARE`` (or ``SHARE``: every path without its own) → {path or "*": share}, each in [0, 1]."""
    out: dict[str, float] = {}
    for item in text_items:
        path, sep, value = item.rpartition("=")
        try:
            share = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
        except ValueError:
            raise ValueError(f"conversation share {item!r}: expected PATH=SHARE or SHARE, e.g. chat=0.6") from None
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"conversation share {item!r}: a share of the cached tokens in [0, 1]")
        out[path if sep else "*"] = share
    return out

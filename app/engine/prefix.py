"""What vLLM V1's automatic prefix caching does, as the engines model it, and the block keys of a trace.

vLLM (``vllm/v1/core``: ``kv_cache_manager.py``, ``block_pool.py``, ``single_type_kv_cache_manager.py``,
``kv_cache_utils.py``) caches a KV block once it is full, under a hash of its tokens and of every token
before it (a chain). The engines (:mod:`app.engine.replica`, and compiled :mod:`app.engine.twin_engine`)
follow it block for block:

- lookup: a waiting request (new, or preempted: ``num_computed_tokens == 0``) hits the longest run of
  leading cached blocks, at most ``(tokens - 1) // block_size`` of them, so that at least its last
  token is computed (and, on its first scheduling, no further than what the trace says repeats:
  ``prefix_tokens + history_tokens``, a cap that binds only on a trace whose turns do not repeat
  their earlier turns whole). Its prefill starts after the hit and computes only the rest, in chunks
  as before.
- blocks: a block is held (reference count >= 1), free and cached, or free and empty. The free
  queue (``FreeKVCacheBlockQueue``) holds every free block; allocation takes the block at its head
  and evicts the key it cached; a request releases its blocks (finish or preemption) in reverse order
  onto the tail, so its last blocks are evicted first (least recently used among unreferenced
  blocks); a hit on an unreferenced cached block takes it out of the queue. The free-block count (and
  so admission, preemption and the ``kv_cache_usage_perc`` gauge) counts a block shared by several
  requests once; admission under ``scheduler_reserve_full_isl`` reserves only the blocks not hit, plus
  the unreferenced hit blocks it takes out of the queue.
- counters: ``prefix_cache_queries``/``hits`` count, per request scheduled for the first time, its
  prompt tokens and the tokens hit (a preempted request's re-prefill is not counted, as vLLM counts it
  apart); a request's ``cached_tokens`` are its hit tokens at that first scheduling.

Block identity. There are no tokens in a trace, so a block's content is named by a key: block j of a
request (tokens [j B, (j + 1) B), B = ``block_size``) is the shared prefix group's block j when the block
lies inside the group's prefix ((j + 1) B <= prefix_tokens), else the conversation's block j (the same
key in every turn: a later turn's prompt repeats this turn's prompt and answer), else the request's
own block j (which only its own recompute after a preemption can hit).

What is simplified against vLLM, and why no hit of the traces modelled here changes:

- vLLM caches a block of generated tokens the step it fills; the engines register a request's
  prompt blocks when their prefill chunk is allocated (as vLLM does) but its blocks of generated
  tokens when it releases them (finish or preemption). Only the same conversation's next turn or the
  request's own re-prefill can hit those keys, and both come after the release: a request holds
  its blocks until it finishes and re-prefills only after its preemption released them, and turns of
  one conversation never overlap in time (the next is sent after the answer). Registering at release
  keeps a decode stretch's closed form (no per-step work), and the eviction order is the same: a held
  block is never in the free queue, whether it is registered or not.
- vLLM does not deduplicate: a block computed while an identical one is cached is cached too. Here
  the first copy keeps the key, and a request stops registering at its first block whose key is
  already cached (its later blocks stay unkeyed, so a request's keyed blocks are always its leading
  ones). It happens to a prompt that is a shared prefix a whole number of blocks long (its last
  block is recomputed while cached), or to two requests of one group prefilling the same prefix
  blocks at once, chunk by chunk, which the order of vLLM's scheduler (running requests allocate,
  and cache, before waiting ones look up) makes rare. The copy it drops holds the same tokens as the
  one kept: it could only serve a hit after that one was evicted.
- a block's key is its position and its owner (group, conversation, request), not a hash of tokens:
  two groups never share a block, and a conversation's turns are consistent by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.trace import Trace

# a key is entity << KEY_SHIFT | block index: entities are dense (groups, then conversations, then
# requests), block indices stay below 2**24 (a 16-token block would need a 268M-token sequence)
KEY_SHIFT = 24


@dataclass(frozen=True)
class PrefixKeys:
    """Per request of a trace: the entity of its shared prefix's blocks (-1: none) and how many full
    blocks the prefix covers; the entity of its other blocks (its conversation, or itself); the most
    blocks its first scheduling may hit; its conversation as a dense index (-1: none)."""

    prefix_entity: np.ndarray  # int64
    prefix_blocks: np.ndarray  # int64
    entity: np.ndarray  # int64
    first_cap: np.ndarray  # int64
    conversation: np.ndarray  # int64
    n_conversations: int


def _array(values: np.ndarray | None, n: int, fill: int, name: str) -> np.ndarray:
    if values is None:
        return np.full(n, fill, dtype=np.int64)
    a = np.asarray(values)
    if a.shape != (n,):
        raise ValueError(f"trace.{name}: {a.shape[0] if a.ndim == 1 else a.shape} values for {n} requests")
    return a.astype(np.int64)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def prefix_keys(trace: Trace, block_size: int) -> PrefixKeys | None:
    """The block keys of ``trace``'s requests (None: the trace says nothing is shared). Raises a
    ValueError naming the first request whose fields are inconsistent."""
    arrays = (trace.prefix_group, trace.prefix_tokens, trace.conversation, trace.history_tokens)
    if all(a is None for a in arrays):
        return None
    n = len(trace)
    group = _array(trace.prefix_group, n, -1, "prefix_group")
    prefix = _array(trace.prefix_tokens, n, 0, "prefix_tokens")
    conv = _array(trace.conversation, n, -1, "conversation")
    history = _array(trace.history_tokens, n, 0, "history_tokens")
    prompt = np.asarray(trace.prompt_tokens, dtype=np.int64)
    prefix = np.where(group >= 0, prefix, 0)
    history = np.where(conv >= 0, history, 0)
    for bad, what in ((prefix < 0, "prefix_tokens < 0"), (history < 0, "history_tokens < 0"),
                      (prefix + history > prompt, "prefix_tokens + history_tokens > prompt_tokens")):
        if bad.any():
            i = _first_bad(bad)
            raise ValueError(f"trace request {i} (id {int(trace.request_id[i])}): {what} "
                             f"(prompt {prompt[i]}, prefix {prefix[i]}, history {history[i]})")
    groups, g_index = np.unique(group, return_inverse=True)
    convs, c_index = np.unique(conv, return_inverse=True)
    g_dense = np.where(group >= 0, g_index - int((groups < 0).sum()), -1)
    c_dense = np.where(conv >= 0, c_index - int((convs < 0).sum()), -1)
    n_groups, n_conv = int((groups >= 0).sum()), int((convs >= 0).sum())
    if n_conv:  # every turn of a conversation starts with the same shared prefix
        order = np.lexsort((np.arange(n), c_dense))
        order = order[c_dense[order] >= 0]
        c, g, p = c_dense[order], g_dense[order], prefix[order]
        same = c[1:] == c[:-1]
        bad = same & ((g[1:] != g[:-1]) | (p[1:] != p[:-1]))
        if bad.any():
            i = int(order[_first_bad(bad) + 1])
            raise ValueError(f"trace request {i} (id {int(trace.request_id[i])}): a turn of conversation "
                             f"{int(conv[i])} with another shared prefix than its earlier turns")
    rows = np.arange(n, dtype=np.int64)
    own = n_groups + n_conv + rows
    return PrefixKeys(prefix_entity=np.where(g_dense >= 0, g_dense, -1).astype(np.int64),
                      prefix_blocks=(prefix // block_size).astype(np.int64),
                      entity=np.where(c_dense >= 0, n_groups + c_dense, own).astype(np.int64),
                      first_cap=((prefix + history) // block_size).astype(np.int64),
                      conversation=c_dense.astype(np.int64), n_conversations=n_conv)

"""The compiled core of the twin: the step-level engine of :mod:`app.engine.replica`, compiled with
numba, and what its two fleet loops share — the finish heap, the router, a replica's reset, reading the
gauges, draining. The loops are two drivers on it: the static fleet (:mod:`app.engine.twin_fleet`, the
economics grid) and the fleet under a policy (:mod:`app.engine.twin_policy`). The configuration is the
one the economics replay runs: no step-level metrics, a deterministic step time (no noise), no
front-end delay, no restart, drained to the end.

Why a second implementation: the economics grid replays weeks of demand per scenario and seed, and
the Python engine costs about 0.08 s per simulated replica-hour. This one follows it statement by
statement — the same scheduler, stretches, preemptions, prefix cache and router, the same
floating-point operations in the same order — so its request times are bit-identical
(``tests/engine/test_twin_engine.py`` holds it to that on a grid of scenarios, engines and routers,
``tests/engine/test_prefix_cache.py`` with the prefix cache at work). The Python engine stays the
reference and the simulator (the bundled sample, the accuracy harness's truth, step-level metrics); a
change of mechanics goes there first, then here.

Layout: one structured array of request rows (a row per request, or in a counted run a ring of rows
that the requests in flight hold: see :func:`app.engine.twin_fleet.simulate`; the replica's queues are
doubly linked lists through ``nxt``/``prv``: a request is in exactly one of inbox, waiting, running;
the requests in prefill are a second list through ``pf_nxt``/``pf_prv``, in admission order as the
Python dict keeps them), one of replicas, and per replica a binary heap of (finish step, request id,
q) rows and a row of ``kc``, its prefix cache (blocks, their free queue and a key table: see
:func:`_cache_reset`). Python's dicts and deques become these lists; their iteration orders are kept
where a float sum or a choice depends on them.

The functions without a leading underscore are what the drivers call: :func:`enqueue` (a request
arrives at a replica), :func:`advance` (every replica's events up to a time), :func:`route`,
:func:`read_gauges`, :func:`reset`, :func:`drain`, :func:`new_cache`, and the heap (:func:`heap_push`,
:func:`heap_pop`), which the policy driver also keeps its retries in.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.engine import stretch
from app.engine.config import ALL_ROUTERS, FleetConfig
from app.engine.prefix import KEY_SHIFT
from app.engine.trace import Trace

INF = math.inf
IDLE, WAKE, STRETCH, STEP = 0, 1, 2, 3
REASON_STOP, REASON_LENGTH = 0, 1
LEAST_OUTSTANDING, ROUND_ROBIN, RANDOM, POWER_OF_TWO, PREFIX_AWARE = range(5)
ROUTER_CODES = {name: code for code, name in enumerate(ALL_ROUTERS)}
# a replica's state in a fleet loop (the static loop keeps every replica READY): only a READY replica
# takes requests; a DRAINING one finishes what it holds
OFF, STARTING, READY, DRAINING = 0, 1, 2, 3

# flags of a request: decoding, skipped by the last step, followed by a request that waits for its
# answer (closed loop, app.engine.closed: its finish is put in the release buffer)
DEC, LAG, FOLLOWED = 1, 2, 4

# what a request's next (re)prefill computes, the Python engine's ``to_prefill``, is always prompt + gen
# when it is read, and its ``last_tok`` feeds only the ITL histogram: neither is kept (a month of
# demand is tens of millions of these rows)
REQUEST = np.dtype([
    ("arrival", "f8"), ("sched", "f8"), ("first", "f8"), ("finish", "f8"), ("lag", "f8"),
    ("ran", "i4"), ("prompt", "i4"), ("target", "i4"), ("gen", "i4"), ("q", "i4"), ("pf", "i4"), ("npre", "i4"),
    ("nxt", "i4"), ("prv", "i4"), ("pf_nxt", "i4"), ("pf_prv", "i4"),
    ("replica", "i2"), ("path", "i2"), ("reason", "i1"), ("flags", "i1"), ("hits_max", "i1"),
    ("id", "i8"),  # the request a row holds (-1: none); a counted run reuses the rows of finished ones
    # the prefix cache (app.engine.prefix): the entities of the request's blocks, the blocks of its shared
    # prefix, the most its first scheduling may hit, its keyed leading blocks (~c: no more to register),
    # and the tokens hit at its first scheduling
    ("pent", "i8"), ("cent", "i8"), ("npb", "i4"), ("cap", "i4"), ("chain", "i4"), ("cached", "i4"),
])

REPLICA = np.dtype([
    ("T", "f8"), ("plan_end", "f8"), ("s_A", "f8"), ("s_delta", "f8"), ("s_f", "f8"), ("st_dur", "f8"),
    ("g_kv", "f8"),
    ("S", "i8"), ("used", "i8"), ("plan", "i8"), ("k", "i8"), ("s_n", "i8"), ("sum_q", "i8"),
    ("n_run", "i8"), ("n_wait", "i8"), ("n_inbox", "i8"), ("n_dec", "i8"), ("n_pf", "i8"), ("n_lag", "i8"),
    ("run_head", "i8"), ("run_tail", "i8"), ("wait_head", "i8"), ("wait_tail", "i8"),
    ("in_head", "i8"), ("in_tail", "i8"), ("pf_head", "i8"), ("pf_tail", "i8"),
    ("heap_n", "i8"), ("st_ndec", "i8"), ("st_npf", "i8"), ("g_run", "i8"), ("g_wait", "i8"),
    # the prefix cache: the free queue's ends, the held blocks without a key, the keys evicted
    ("fq_head", "i8"), ("fq_tail", "i8"), ("n_anon", "i8"), ("evictions", "i8"),
], align=True)

# engine limits, in an int64 array: block size, blocks, max_num_seqs, token budget, reserve full prompt,
# blocks an admission leaves free, the row mask (request id & mask is its row: -1 when every request
# has a row of its own, ring size - 1 in a counted run), whether the prefix cache works, the size of
# its key table, and the prefix-aware router's margin; step-time coefficients in a float64 array
BS, NB, MAX_SEQS, BUDGET, RESERVE_FULL, WM, MASK, CACHING, TSIZE, MARGIN = range(10)
# then the release buffer (closed loop): how many rows finished with FOLLOWED since the fleet loop
# last emptied it, then room for RELEASE_ROOM of them (one step finishes at most its batch)
REL_N, REL0 = 10, 11
A, B, B2, C, D, E, B2U = range(7)

# How the event loop's functions are compiled. error_model="numpy": no zero-divisor check on integer
# // and % (no divisor here can be 0; float arithmetic is IEEE either way, so results do not change).
# _nrt=False: no reference counting. numba increfs and decrefs every array argument of every call
# (atomic operations), and the loop makes a dozen calls of ten arrays per event: half of its time,
# measured with perf. These functions allocate nothing and return no array (the finish heap grows
# in grown_heap, called by the loop's entry points, which keep reference counting), so the caller's
# references keep every array alive. numba's own library compiles such helpers the same way.
# forceinline: LLVM inlines them into the entry points; called, each passed its ten arrays as
# seventy scalar arguments (the rest of the loop's time). CALLED: the two largest, run at most once
# per step, stay calls (inlined at each call site they made the cold compile longer for no
# measurable gain).
LOOP = {"cache": True, "error_model": "numpy", "_nrt": False, "forceinline": True}
CALLED = {**LOOP, "forceinline": False}


# -- linked lists ------------------------------------------------------------------------------------
@njit(**LOOP)
def _unlink(rq, i, head, tail):
    """Remove request i from the list (head, tail) through nxt/prv; return the new (head, tail)."""
    p, n = rq[i].prv, rq[i].nxt
    if p >= 0:
        rq[p].nxt = n
    else:
        head = n
    if n >= 0:
        rq[n].prv = p
    else:
        tail = p
    rq[i].prv = -1
    rq[i].nxt = -1
    return head, tail


@njit(**LOOP)
def _link(rq, i, p, n):
    """Request i between p and n (-1: the list's end) in a list through nxt/prv."""
    rq[i].prv = p
    rq[i].nxt = n
    if p >= 0:
        rq[p].nxt = i
    if n >= 0:
        rq[n].prv = i


@njit(**LOOP)
def _push_back(rq, i, head, tail):
    _link(rq, i, tail, -1)
    return (head if tail >= 0 else i), i


@njit(**LOOP)
def _push_front(rq, i, head, tail):
    _link(rq, i, -1, head)
    return i, (tail if head >= 0 else i)


# -- step time ---------------------------------------------------------------------------------------
@njit(**LOOP)
def _sq(fp, n):
    """The batch-squared term of a step of n decoding requests: on its tangent past fp[B2U]
    (StepTime.per_decode_seq_sq_until; the reference engine's Replica._sq, the same arithmetic)."""
    if n <= fp[B2U]:
        return fp[B2] * n * n
    return fp[B2] * fp[B2U] * (2 * n - fp[B2U])


@njit(**LOOP)
def _pf_add(rq, rp, r, i, comp):
    rq[i].pf = comp
    rq[i].pf_nxt = -1
    rq[i].pf_prv = rp[r].pf_tail
    if rp[r].pf_tail >= 0:
        rq[rp[r].pf_tail].pf_nxt = i
    else:
        rp[r].pf_head = i
    rp[r].pf_tail = i
    rp[r].n_pf += 1


@njit(**LOOP)
def _pf_del(rq, rp, r, i):
    p, n = rq[i].pf_prv, rq[i].pf_nxt
    if p >= 0:
        rq[p].pf_nxt = n
    if n >= 0:
        rq[n].pf_prv = p
    if rp[r].pf_head == i:
        rp[r].pf_head = n
    if rp[r].pf_tail == i:
        rp[r].pf_tail = p
    rq[i].pf = -1
    rp[r].n_pf -= 1


# -- one binary heap: the rows of h[r], ordered as Python orders tuples of their columns ------------
# The engine's finish heaps (one per replica, int64 rows (finish step, request id, q); an entry whose
# row holds another request, or the request with another q, is stale) and the policy driver's retries
# and the static fleet's released follow-ups in closed loop (one heap of float rows (arrival, request
# row or trace index, 0) each). Three columns: a constant the loops unroll.
HEAP_COLUMNS = 3


@njit(**LOOP)
def _before(h, r, x, y):
    for c in range(HEAP_COLUMNS):
        if h[r, x, c] != h[r, y, c]:
            return h[r, x, c] < h[r, y, c]
    return False


@njit(**LOOP)
def _swap(h, r, x, y):
    for c in range(HEAP_COLUMNS):
        t = h[r, x, c]
        h[r, x, c] = h[r, y, c]
        h[r, y, c] = t


@njit(**LOOP)
def heap_push(h, r, n):
    """Heap r holds n rows and a new one written at row n: sift it up to its place."""
    while n > 0:
        parent = (n - 1) >> 1
        if _before(h, r, n, parent):
            _swap(h, r, n, parent)
            n = parent
        else:
            break


@njit(**LOOP)
def heap_pop(h, r, n):
    """Remove the top of heap r of n rows (the caller reads it first)."""
    n -= 1
    if n > 0:
        _swap(h, r, 0, n)
        x = 0
        while True:
            left = 2 * x + 1
            if left >= n:
                break
            best = left
            if left + 1 < n and _before(h, r, left + 1, left):
                best = left + 1
            if _before(h, r, best, x):
                _swap(h, r, best, x)
                x = best
            else:
                break


@njit(cache=True, error_model="numpy")
def grown_heap(h):
    """The finish heaps in an array of twice the rows (the loop stopped because one may overflow)."""
    bigger = np.empty((h.shape[0], 2 * h.shape[1], HEAP_COLUMNS), dtype=np.int64)
    bigger[:, : h.shape[1]] = h
    return bigger


@njit(**LOOP)
def _finish_push(h, rp, r, fs, i, q):
    """A decoder's finish onto replica r's heap (the caller has made room: see :func:`process`)."""
    n = rp[r].heap_n
    h[r, n, 0] = fs
    h[r, n, 1] = i
    h[r, n, 2] = q
    rp[r].heap_n = n + 1
    heap_push(h, r, n)


@njit(**LOOP)
def _finish_pop(h, rp, r):
    heap_pop(h, r, rp[r].heap_n)
    rp[r].heap_n -= 1


# -- the prefix cache (app.engine.prefix; the Python engine's _lookup, _take, _allocate, _register,
# _release) ------------------------------------------------------------------------------------------
# Per replica, a row of ``kc`` (int64): for each of the NB blocks its key (-1: none) at [0, NB), its
# references at [NB, 2 NB), its free-queue links (next, previous; -1: none) at [2 NB, 3 NB) and
# [3 NB, 4 NB); a stack of the held blocks without a key at [4 NB, 5 NB) (``n_anon`` of them: they are
# interchangeable, so which one a release returns does not matter); and the key table: TSIZE keys
# (-1: empty) at [5 NB, 5 NB + TSIZE) and their blocks after them, open addressing with linear probing.
@njit(**LOOP)
def _slot(key, tsize):
    x = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the high bits are mixed
    return np.int64(x >> np.uint64(32)) & (tsize - 1)


@njit(**LOOP)
def _kv_find(kc, ip, r, key):
    """The block cached under ``key`` on replica r, or -1."""
    t = ip[TSIZE]
    base = 5 * ip[NB]
    s = _slot(key, t)
    while True:
        k = kc[r, base + s]
        if k == key:
            return kc[r, base + t + s]
        if k < 0:
            return np.int64(-1)
        s = (s + 1) & (t - 1)


@njit(**LOOP)
def _kv_insert(kc, ip, r, key, b):
    t = ip[TSIZE]
    base = 5 * ip[NB]
    s = _slot(key, t)
    while kc[r, base + s] >= 0:
        s = (s + 1) & (t - 1)
    kc[r, base + s] = key
    kc[r, base + t + s] = b


@njit(**LOOP)
def _kv_delete(kc, ip, r, key):
    """Remove ``key`` (it is in the table), shifting back the keys probed past it."""
    t = ip[TSIZE]
    m = t - 1
    base = 5 * ip[NB]
    s = _slot(key, t)
    while kc[r, base + s] != key:
        s = (s + 1) & m
    j = s
    while True:
        j = (j + 1) & m
        k = kc[r, base + j]
        if k < 0:
            break
        home = _slot(k, t)
        # the key at j may fill the hole at s unless its home lies cyclically in (s, j]
        if (j > s and (home <= s or home > j)) or (j < s and home <= s and home > j):
            kc[r, base + s] = k
            kc[r, base + t + s] = kc[r, base + t + j]
            s = j
    kc[r, base + s] = -1


@njit(**LOOP)
def _fq_append(kc, rp, ip, r, b):
    nb = ip[NB]
    tail = rp[r].fq_tail
    kc[r, 2 * nb + b] = -1
    kc[r, 3 * nb + b] = tail
    if tail >= 0:
        kc[r, 2 * nb + tail] = b
    else:
        rp[r].fq_head = b
    rp[r].fq_tail = b


@njit(**LOOP)
def _fq_remove(kc, rp, ip, r, b):
    nb = ip[NB]
    p, n = kc[r, 3 * nb + b], kc[r, 2 * nb + b]
    if p >= 0:
        kc[r, 2 * nb + p] = n
    else:
        rp[r].fq_head = n
    if n >= 0:
        kc[r, 3 * nb + n] = p
    else:
        rp[r].fq_tail = p


@njit(**LOOP)
def _key(rq, i, j):
    """The key of request i's block j: its shared prefix's, else its conversation's or its own."""
    return ((rq[i].pent if j < rq[i].npb else rq[i].cent) << KEY_SHIFT) | j


@njit(**LOOP)
def _lookup(rq, kc, ip, r, i, tot):
    """Request i's hit when admitted to compute ``tot`` tokens: (leading cached blocks, how many of them
    are unreferenced). Changes nothing."""
    nb = ip[NB]
    most = (tot - 1) // ip[BS]
    if rq[i].sched != rq[i].sched and rq[i].cap < most:  # NaN: never scheduled
        most = rq[i].cap
    hit = 0
    ev = 0
    while hit < most:
        b = _kv_find(kc, ip, r, _key(rq, i, hit))
        if b < 0:
            break
        if kc[r, nb + b] == 0:
            ev += 1
        hit += 1
    return hit, ev


@njit(**LOOP)
def _take(rq, kc, rp, ip, r, i, hit):
    nb = ip[NB]
    for j in range(hit):
        b = _kv_find(kc, ip, r, _key(rq, i, j))
        if kc[r, nb + b] == 0:
            _fq_remove(kc, rp, ip, r, b)
        kc[r, nb + b] += 1
    rq[i].chain = hit


@njit(**LOOP)
def _allocate(kc, rp, ip, r, n):
    nb = ip[NB]
    for _ in range(n):
        b = rp[r].fq_head
        nxt = kc[r, 2 * nb + b]
        rp[r].fq_head = nxt
        if nxt >= 0:
            kc[r, 3 * nb + nxt] = -1
        else:
            rp[r].fq_tail = -1
        key = kc[r, b]
        if key >= 0:
            _kv_delete(kc, ip, r, key)
            kc[r, b] = -1
            rp[r].evictions += 1
        kc[r, 4 * nb + rp[r].n_anon] = b
        rp[r].n_anon += 1


@njit(**LOOP)
def _register(rq, kc, rp, ip, r, i, full):
    c = np.int64(rq[i].chain)
    if c < 0 or c >= full:
        return
    nb = ip[NB]
    while c < full:
        key = _key(rq, i, c)
        if _kv_find(kc, ip, r, key) >= 0:
            rq[i].chain = ~c
            return
        rp[r].n_anon -= 1
        b = kc[r, 4 * nb + rp[r].n_anon]
        kc[r, b] = key
        kc[r, nb + b] = 1
        _kv_insert(kc, ip, r, key, b)
        c += 1
    rq[i].chain = c


@njit(**CALLED)
def _release(rq, kc, rp, ip, r, i, blocks, computed):
    """Request i releases its blocks (``Replica._release``); returns the blocks that became free."""
    _register(rq, kc, rp, ip, r, i, computed // ip[BS])
    nb = ip[NB]
    c = np.int64(rq[i].chain)
    if c < 0:
        c = ~c
    freed = 0
    for j in range(blocks - 1, -1, -1):
        if j < c:
            b = _kv_find(kc, ip, r, _key(rq, i, j))
            ref = kc[r, nb + b] - 1
            kc[r, nb + b] = ref
            if ref:
                continue
        else:
            rp[r].n_anon -= 1
            b = kc[r, 4 * nb + rp[r].n_anon]
        _fq_append(kc, rp, ip, r, b)
        freed += 1
    rq[i].chain = 0
    return freed


@njit(**LOOP)
def _cache_reset(kc, rp, ip, r):
    """Replica r's cache empty: every block free, in order, without a key."""
    if not ip[CACHING]:
        return
    nb, t = ip[NB], ip[TSIZE]
    for b in range(nb):
        kc[r, b] = -1
        kc[r, nb + b] = 0
        kc[r, 2 * nb + b] = b + 1 if b + 1 < nb else -1
        kc[r, 3 * nb + b] = b - 1
    for s in range(t):
        kc[r, 5 * nb + s] = -1
    rp[r].fq_head = 0
    rp[r].fq_tail = nb - 1
    rp[r].n_anon = 0


# -- decoders ----------------------------------------------------------------------------------------
@njit(**LOOP)
def _drop_decoder(rq, rp, ncls, ip, r, i, q):
    ncls[r, (q - 1) % ip[BS]] -= 1
    rp[r].sum_q -= q


@njit(**LOOP)
def _add_decoder(rq, rp, ncls, h, ip, r, i, q):
    if rq[i].flags & DEC == 0:
        rp[r].n_dec += 1
    rq[i].flags |= DEC
    rq[i].q = q
    ncls[r, (q - 1) % ip[BS]] += 1
    rp[r].sum_q += q
    _finish_push(h, rp, r, rq[i].target + rq[i].prompt - q, rq[i].id, q)


@njit(**LOOP)
def _lag_pop(rq, rp, r, i, default):
    """lag.pop(i, default)."""
    if rq[i].flags & LAG:
        rq[i].flags &= ~LAG
        rp[r].n_lag -= 1
        return rq[i].lag
    return default


@njit(**LOOP)
def _finish(rq, rp, kc, ip, r, i, t, computed):
    """Request i finishes at t holding the KV of ``computed`` tokens: its blocks are released."""
    rp[r].run_head, rp[r].run_tail = _unlink(rq, i, rp[r].run_head, rp[r].run_tail)
    rp[r].n_run -= 1
    _lag_pop(rq, rp, r, i, 0.0)
    blocks = -(-computed // ip[BS])
    rp[r].used -= _release(rq, kc, rp, ip, r, i, blocks, computed) if ip[CACHING] else blocks
    rq[i].finish = t
    rq[i].gen = rq[i].target
    rq[i].reason = REASON_LENGTH if rq[i].hits_max else REASON_STOP
    if rq[i].flags & FOLLOWED:
        k = ip[REL_N]
        if REL0 + k < ip.shape[0]:  # past the room the loop raises (ip[REL_N] counts them all)
            ip[REL0 + k] = i
        ip[REL_N] = k + 1


@njit(**LOOP)
def _pop_finishes(rq, rp, ncls, kc, h, ip, r):
    S = rp[r].S
    while rp[r].heap_n > 0 and h[r, 0, 0] <= S:
        fs, j, q = h[r, 0, 0], h[r, 0, 1], h[r, 0, 2]
        _finish_pop(h, rp, r)
        i = j & ip[MASK]
        if not (rq[i].id == j and rq[i].flags & DEC and rq[i].q == q) or fs != S:
            continue
        rq[i].flags &= ~DEC
        rp[r].n_dec -= 1
        _drop_decoder(rq, rp, ncls, ip, r, i, q)
        _finish(rq, rp, kc, ip, r, i, rp[r].T, S + q - 1)


@njit(**LOOP)
def _set_gauges(rp, ip, r):
    rp[r].g_run = rp[r].n_run
    rp[r].g_wait = rp[r].n_wait
    rp[r].g_kv = rp[r].used / ip[NB]


# -- stretch arithmetic (step j lasts f * (A + delta * j)) -------------------------------------------
@njit(**LOOP)
def _tau(rp, r, k):
    return rp[r].s_f * (k * rp[r].s_A + rp[r].s_delta * k * (k - 1) * 0.5)


_step_count = njit(**LOOP)(stretch.step_count)


@njit(**LOOP)
def _first_tau_at_least(rp, r, y):
    return _step_count(rp[r].s_f, rp[r].s_A, rp[r].s_delta, y, False)


@njit(**LOOP)
def _steps_ending_by(rp, r, y):
    return _step_count(rp[r].s_f, rp[r].s_A, rp[r].s_delta, y, True)


@njit(**LOOP)
def _cum(rp, prefix, ip, r, k):
    bs = ip[BS]
    return (k // bs) * rp[r].s_n + prefix[r, k % bs]


# -- planning ----------------------------------------------------------------------------------------
@njit(**LOOP)
def _plan(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r):
    T = rp[r].T
    while rp[r].n_inbox > 0 and rq[rp[r].in_head].arrival <= T:
        i = rp[r].in_head
        rp[r].in_head, rp[r].in_tail = _unlink(rq, i, rp[r].in_head, rp[r].in_tail)
        rp[r].n_inbox -= 1
        rp[r].wait_head, rp[r].wait_tail = _push_back(rq, i, rp[r].wait_head, rp[r].wait_tail)
        rp[r].n_wait += 1
    if rp[r].n_run == 0 and rp[r].n_wait == 0:
        if rp[r].n_inbox > 0:
            rp[r].plan = WAKE
            rp[r].plan_end = rq[rp[r].in_head].arrival
        else:
            rp[r].plan = IDLE
            rp[r].plan_end = INF
        return
    if rp[r].n_pf > 0 or rp[r].n_lag > 0 or rp[r].n_dec == 0:
        _schedule_step(rq, rp, ncls, kc, st_dec, st_pf, ip, fp, r)
        return
    bs = ip[BS]
    if rp[r].n_wait > 0 and rp[r].n_run < ip[MAX_SEQS]:
        head = rp[r].wait_head
        room = ip[BUDGET] - rp[r].n_dec
        first = rq[head].prompt + rq[head].gen
        if ip[CACHING]:
            hit, ev = _lookup(rq, kc, ip, r, head, first)
            comp = hit * bs
            if not ip[RESERVE_FULL] and first - comp > room:
                first = comp + room
            need = -(-first // bs) - hit + ev
        else:
            if not ip[RESERVE_FULL] and first > room:
                first = room
            need = -(-first // bs)
        if need <= ip[NB] - rp[r].used - ip[WM]:
            _schedule_step(rq, rp, ncls, kc, st_dec, st_pf, ip, fp, r)
            return
    _plan_stretch(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r)


@njit(**LOOP)
def _plan_stretch(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r):
    S, bs = rp[r].S, ip[BS]
    while rp[r].heap_n > 0:
        fs, j, q = h[r, 0, 0], h[r, 0, 1], h[r, 0, 2]
        i = j & ip[MASK]
        if (rq[i].id == j and rq[i].flags & DEC and rq[i].q == q) and fs >= S:
            break
        _finish_pop(h, rp, r)
    n = rp[r].n_dec
    k = h[r, 0, 0] - S
    # classes (-S) mod bs, (-S - 1) mod bs, ... wrapping: ncls read backwards from (-S) mod bs
    start = (-S) % bs
    prefix[r, 0] = 0
    acc = 0
    c = start
    for x in range(bs):
        acc += ncls[r, c]
        prefix[r, x + 1] = acc
        c = c - 1 if c > 0 else bs - 1
    free = ip[NB] - rp[r].used
    cycles, rest = free // n, free % n
    # bisect_right(prefix, rest, 1, bs + 1) - 1
    lo, hi = 1, bs + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if rest < prefix[r, mid]:
            hi = mid
        else:
            lo = mid + 1
    k_kv = cycles * bs + (lo - 1)
    if k_kv == 0:
        _schedule_step(rq, rp, ncls, kc, st_dec, st_pf, ip, fp, r)
        return
    if k_kv < k:
        k = k_kv
    rp[r].s_n = n
    rp[r].s_A = fp[A] + fp[B] * n + _sq(fp, n) + fp[D] * (n * S + rp[r].sum_q)
    rp[r].s_delta = fp[D] * n
    rp[r].s_f = 1.0
    if rp[r].n_inbox > 0:
        k_in = _first_tau_at_least(rp, r, rq[rp[r].in_head].arrival - rp[r].T)
        if k_in < k:
            k = k_in
    rp[r].k = max(k, 1)
    rp[r].plan = STRETCH
    rp[r].plan_end = rp[r].T + _tau(rp, r, rp[r].k)


@njit(**LOOP)
def _apply_stretch(rq, rp, ncls, kc, h, prefix, ip, r, k):
    n_blocks = _cum(rp, prefix, ip, r, k)
    if ip[CACHING]:
        _allocate(kc, rp, ip, r, n_blocks)
    rp[r].used += n_blocks
    T0 = rp[r].T
    rp[r].S = rp[r].S + k
    rp[r].T = T0 + _tau(rp, r, k)
    _pop_finishes(rq, rp, ncls, kc, h, ip, r)
    _set_gauges(rp, ip, r)


# -- detailed steps ----------------------------------------------------------------------------------
@njit(**CALLED)
def _schedule_step(rq, rp, ncls, kc, st_dec, st_pf, ip, fp, r):
    T, S, bs = rp[r].T, rp[r].S, ip[BS]
    budget = ip[BUDGET]
    free = ip[NB] - rp[r].used
    n_dec = rp[r].n_dec
    npf = 0
    preempted = 0
    pf_tokens = 0
    pf_blocks = 0
    i = rp[r].pf_head
    while i >= 0:
        comp = rq[i].pf
        rem = (rq[i].prompt + rq[i].gen) - comp
        pf_tokens += rem
        pf_blocks += -(-(comp + rem) // bs) + (comp // -bs)
        i = rq[i].pf_nxt
    dec_blocks = ncls[r, (-S) % bs]
    if n_dec + pf_tokens <= budget and dec_blocks + pf_blocks <= free:
        all_dec = True
        i = rp[r].pf_head
        while i >= 0:
            comp = rq[i].pf
            st_pf[r, npf, 0] = i
            st_pf[r, npf, 1] = (rq[i].prompt + rq[i].gen) - comp
            st_pf[r, npf, 2] = comp
            npf += 1
            i = rq[i].pf_nxt
        budget -= n_dec + pf_tokens
        free -= dec_blocks + pf_blocks
        n_dec_sched = n_dec
        dec_ctx = n_dec * S + rp[r].sum_q
        if ip[CACHING]:
            _allocate(kc, rp, ip, r, dec_blocks + pf_blocks)
            for x in range(npf):
                i = st_pf[r, x, 0]
                _register(rq, kc, rp, ip, r, i, (rq[i].prompt + rq[i].gen) // bs)
    else:
        all_dec = False
        # vLLM's RUNNING pass in admission order, preempting from the tail when KV runs out
        need_cls = (-S) % bs
        n_dec_sched = 0
        dec_ctx = 0
        i = rp[r].run_head
        while i >= 0 and budget > 0:
            is_dec = rq[i].flags & DEC
            if is_dec:
                q = rq[i].q
                ntok = 1
                nblk = 1 if (q - 1) % bs == need_cls else 0
                comp = 0
            else:
                comp = rq[i].pf
                rem = (rq[i].prompt + rq[i].gen) - comp
                ntok = rem if rem < budget else budget
                nblk = -(-(comp + ntok) // bs) + (comp // -bs)
            free, n_pre, kept = _make_room(rq, rp, ncls, kc, ip, r, i, nblk, free)
            preempted += n_pre
            if not kept:
                break
            free -= nblk
            budget -= ntok
            if ip[CACHING]:
                _allocate(kc, rp, ip, r, nblk)
                if not is_dec:
                    _register(rq, kc, rp, ip, r, i, (comp + ntok) // bs)
            if is_dec:
                st_dec[r, n_dec_sched] = i
                n_dec_sched += 1
                dec_ctx += S + rq[i].q
            else:
                st_pf[r, npf, 0] = i
                st_pf[r, npf, 1] = ntok
                st_pf[r, npf, 2] = comp
                npf += 1
            i = rq[i].nxt
    if not preempted:
        max_seqs, reserve_full, wm, caching = ip[MAX_SEQS], ip[RESERVE_FULL], ip[WM], ip[CACHING]
        hit = 0  # without the cache: no hit
        ev = 0
        comp = 0
        while rp[r].n_wait > 0 and budget > 0 and rp[r].n_run < max_seqs:
            i = rp[r].wait_head
            tot = (rq[i].prompt + rq[i].gen)
            if caching:
                hit, ev = _lookup(rq, kc, ip, r, i, tot)
                comp = hit * bs
            rest = tot - comp
            ntok = rest if rest < budget else budget
            nblk = -(-(comp + ntok) // bs) - hit
            if ((-(-tot // bs) - hit) if reserve_full else nblk) + ev > free - wm:
                break
            rp[r].wait_head, rp[r].wait_tail = _unlink(rq, i, rp[r].wait_head, rp[r].wait_tail)
            rp[r].n_wait -= 1
            rp[r].run_head, rp[r].run_tail = _push_back(rq, i, rp[r].run_head, rp[r].run_tail)
            rp[r].n_run += 1
            _pf_add(rq, rp, r, i, comp)
            if rq[i].sched != rq[i].sched:  # NaN: first time scheduled
                rq[i].sched = T
                rq[i].cached = comp
            if caching:
                _take(rq, kc, rp, ip, r, i, hit)
                _allocate(kc, rp, ip, r, nblk)
                _register(rq, kc, rp, ip, r, i, (comp + ntok) // bs)
            st_pf[r, npf, 0] = i
            st_pf[r, npf, 1] = ntok
            st_pf[r, npf, 2] = comp
            npf += 1
            budget -= ntok
            free -= nblk + ev
    rp[r].used = ip[NB] - free
    pf_tok = 0
    pf_ctx = 0
    pairs = 0.0
    for x in range(npf):
        ntok, comp = st_pf[r, x, 1], st_pf[r, x, 2]
        pf_tok += ntok
        pf_ctx += comp + ntok
        pairs += ntok * (comp + ntok * 0.5)
    if n_dec_sched == 0 and pf_tok == 0:
        dur = 1e-3
    else:
        dur = 1.0 * (fp[A] + fp[B] * n_dec_sched + _sq(fp, n_dec_sched)
                     + fp[C] * pf_tok + fp[D] * (dec_ctx + pf_ctx) + fp[E] * pairs)
    rp[r].st_ndec = -1 if all_dec else n_dec_sched
    rp[r].st_npf = npf
    rp[r].st_dur = dur
    rp[r].plan = STEP
    rp[r].plan_end = T + dur


@njit(**LOOP)
def _make_room(rq, rp, ncls, kc, ip, r, i, need, free):
    """Preempt from the tail of the running list until ``need`` blocks are free or request i itself
    was preempted: (free blocks, preemptions, whether i still runs)."""
    n = 0
    while need > free:
        victim = rp[r].run_tail
        free += _preempt(rq, rp, ncls, kc, ip, r, victim)
        n += 1
        if victim == i:
            return free, n, False
    return free, n, True


@njit(**CALLED)
def _preempt(rq, rp, ncls, kc, ip, r, i):
    """Free request i's blocks and put it at the front of the waiting queue; return the blocks that
    became free."""
    bs = ip[BS]
    rp[r].run_head, rp[r].run_tail = _unlink(rq, i, rp[r].run_head, rp[r].run_tail)
    rp[r].n_run -= 1
    if rq[i].flags & DEC:
        q = rq[i].q
        rq[i].flags &= ~DEC
        rp[r].n_dec -= 1
        hh = rp[r].S + q
        comp = hh - 1
        _drop_decoder(rq, rp, ncls, ip, r, i, q)
        rq[i].gen = hh - rq[i].prompt
        _lag_pop(rq, rp, r, i, 0.0)
    else:
        comp = np.int64(rq[i].pf)
        _pf_del(rq, rp, r, i)
    blocks = -(-comp // bs)
    rq[i].npre += 1
    rp[r].wait_head, rp[r].wait_tail = _push_front(rq, i, rp[r].wait_head, rp[r].wait_tail)
    rp[r].n_wait += 1
    if ip[CACHING]:
        return _release(rq, kc, rp, ip, r, i, blocks, comp)
    return blocks


@njit(**LOOP)
def _complete_step(rq, rp, ncls, kc, h, st_dec, st_pf, ip, r):
    T1 = rp[r].plan_end
    S1 = rp[r].S + 1
    if rp[r].st_ndec < 0:  # every decoder ran: lag.clear()
        if rp[r].n_lag > 0:
            i = rp[r].run_head
            while i >= 0:
                rq[i].flags &= ~LAG
                i = rq[i].nxt
            rp[r].n_lag = 0
    else:
        stamp = rp[r].S
        for x in range(rp[r].st_ndec):
            i = st_dec[r, x]
            rq[i].ran = stamp
            _lag_pop(rq, rp, r, i, 0.0)
        # decoders the step skipped keep their token count (q shifts) and remember their last token time
        t_last = rp[r].T
        i = rp[r].run_head
        while i >= 0:
            if rq[i].flags & DEC and rq[i].ran != stamp:
                q = rq[i].q
                _drop_decoder(rq, rp, ncls, ip, r, i, q)
                _add_decoder(rq, rp, ncls, h, ip, r, i, q - 1)
                if rq[i].flags & LAG == 0:
                    rq[i].flags |= LAG
                    rq[i].lag = t_last
                    rp[r].n_lag += 1
            i = rq[i].nxt
    _complete_prefills(rq, rp, ncls, kc, h, st_pf, ip, r, T1, S1)
    rp[r].S = S1
    rp[r].T = T1
    _pop_finishes(rq, rp, ncls, kc, h, ip, r)
    _set_gauges(rp, ip, r)


@njit(**LOOP)
def _complete_prefills(rq, rp, ncls, kc, h, st_pf, ip, r, T1, S1):
    for x in range(rp[r].st_npf):
        i, ntok, comp = st_pf[r, x, 0], st_pf[r, x, 1], st_pf[r, x, 2]
        done = comp + ntok
        if done < (rq[i].prompt + rq[i].gen):
            rq[i].pf = done
            continue
        _pf_del(rq, rp, r, i)
        g_old = rq[i].gen
        if g_old == 0:
            rq[i].first = T1
        rq[i].gen = g_old + 1
        if g_old + 1 >= rq[i].target:
            _finish(rq, rp, kc, ip, r, i, T1, rq[i].prompt + g_old)
        else:
            _add_decoder(rq, rp, ncls, h, ip, r, i, rq[i].prompt + g_old + 1 - S1)


@njit(**LOOP)
def process(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r):
    """Replica r's planned event, and its next plan; False (nothing done) when the event is a step
    whose pushes could overflow the finish heap: the caller grows it (:func:`grown_heap`) and calls
    again."""
    plan = rp[r].plan
    if plan == STRETCH:
        _apply_stretch(rq, rp, ncls, kc, h, prefix, ip, r, rp[r].k)
    elif plan == STEP:  # the only event that pushes onto the finish heap: at most one row per running request
        if rp[r].heap_n + ip[MAX_SEQS] >= h.shape[1]:
            return False
        _complete_step(rq, rp, ncls, kc, h, st_dec, st_pf, ip, r)
    elif plan == WAKE:
        rp[r].T = rp[r].plan_end
    _plan(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r)
    return True


@njit(**LOOP)
def enqueue(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r, i):
    """Request row i arrives at replica r (at its arrival: every replica has been advanced to it)."""
    t_eng = rq[i].arrival
    rq[i].replica = r
    # engine arrivals come in order (no front-end delay): the inbox is first in, first out
    rp[r].in_head, rp[r].in_tail = _push_back(rq, i, rp[r].in_head, rp[r].in_tail)
    rp[r].n_inbox += 1
    plan = rp[r].plan
    if plan == IDLE or (plan == WAKE and t_eng < rp[r].plan_end):
        rp[r].plan = WAKE
        rp[r].plan_end = t_eng
    elif plan == STRETCH and not (rp[r].n_wait > 0 or rp[r].n_run >= ip[MAX_SEQS]):
        k_cut = _first_tau_at_least(rp, r, t_eng - rp[r].T)
        if k_cut < rp[r].k:
            if k_cut == 0:
                _plan(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r)
            else:
                rp[r].k = k_cut
                rp[r].plan_end = rp[r].T + _tau(rp, r, k_cut)


@njit(**LOOP)
def advance(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, x):
    """Every replica's events up to time x; False when one stopped for a larger heap (see :func:`process`)."""
    for r in range(rp.shape[0]):
        while rp[r].plan_end <= x:
            if not process(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r):
                return False
    return True


@njit(**LOOP)
def _peek_gauges(rp, prefix, ip, r, t, out, g):
    out[r, g, 0] = rp[r].g_run
    out[r, g, 1] = rp[r].g_wait
    out[r, g, 2] = rp[r].g_kv
    if rp[r].plan == STRETCH and t > rp[r].T:
        m = _steps_ending_by(rp, r, t - rp[r].T)
        if m > 0:
            out[r, g, 0] = rp[r].n_run
            out[r, g, 1] = rp[r].n_wait
            out[r, g, 2] = (rp[r].used + _cum(rp, prefix, ip, r, m)) / ip[NB]


@njit(**LOOP)
def read_gauges(rp, prefix, ip, state, t, out, g):
    """The gauges (running, waiting, KV usage 0-1) of every replica that serves (ready or draining) at
    grid point g, time t, as a scrape reads them; the others' stay 0."""
    for r in range(rp.shape[0]):
        if state[r] == READY or state[r] == DRAINING:
            _peek_gauges(rp, prefix, ip, r, t, out, g)


# -- the router ------------------------------------------------------------------------------------
@njit(**LOOP)
def outstanding(rp, r):
    return rp[r].n_inbox + rp[r].n_wait + rp[r].n_run


@njit(**LOOP)
def _position(state, start, k, n_ready):
    """The k-th READY replica from ``start`` (``n_ready`` of them are READY; -1: none)."""
    n = state.shape[0]
    if n_ready == n:  # every replica is: no search
        r = start + k
        return r if r < n else r - n
    for off in range(n):
        r = start + off if start + off < n else start + off - n
        if state[r] == READY:
            if k == 0:
                return r
            k -= 1
    return -1


@njit(**LOOP)
def route(rp, state, n_ready, router, start, ia, ib, previous, margin):
    """The replica a request goes to among the READY ones (``n_ready`` of them), searched from the
    rotating start ``start`` (``app.engine.router.choose``): least outstanding (the first of the least
    loaded), round robin (the first), random (the ``ia``-th), power of two (the less loaded of the
    ``ia``-th and the ``ib``-th, the first at a tie; ``ib`` < 0: the ``ia``-th) or prefix aware
    (``previous``, the replica of the conversation's previous turn, when it is READY and at most
    ``margin`` above the least loaded; else least outstanding). The driver draws ``ia`` and ``ib`` its
    own way."""
    if router == LEAST_OUTSTANDING or router == PREFIX_AWARE:
        n = rp.shape[0]
        best, least = -1, 1 << 62
        for off in range(n):
            r = start + off if start + off < n else start + off - n
            if state[r] == READY:
                load = outstanding(rp, r)
                if load < least:
                    best, least = r, load
        if (router == PREFIX_AWARE and previous >= 0 and state[previous] == READY
                and outstanding(rp, previous) - least <= margin):
            return previous
        return best
    a = _position(state, start, ia, n_ready)
    if ib < 0:
        return a
    b = _position(state, start, ib, n_ready)
    return a if outstanding(rp, a) <= outstanding(rp, b) else b


# -- a replica's life --------------------------------------------------------------------------------
@njit(**LOOP)
def reset(rp, blank, ncls, kc, ip, r, t):
    """Replica r starts a fresh engine at time t (``Replica.reset``): its row as ``blank[0]`` (a
    :func:`new_replicas` row) at t, its prefix cache empty; its queues are empty (it drained, or never
    ran)."""
    rp[r] = blank[0]
    rp[r].T = t
    for c in range(ncls.shape[1]):
        ncls[r, c] = 0
    _cache_reset(kc, rp, ip, r)


@njit(cache=True, error_model="numpy")
def drain(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp):
    """Every replica's events until each is idle (the run is drained); the finish heaps, grown if a
    step needed it."""
    for r in range(rp.shape[0]):
        while rp[r].plan_end < INF:
            if not process(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r):
                h = grown_heap(h)
    return h


def unsupported(trace: Trace, config: FleetConfig) -> str | None:
    """Why the compiled engine cannot run this configuration (None: it can)."""
    st = config.step
    if st.noise_sigma != 0:
        return "noisy step times"
    if st.frontend_s != 0 or st.frontend_per_token_s != 0:
        return "a front-end delay"
    if not config.bulk:
        return "step-by-step mode"
    if len(trace.arrival_s) > 1 and bool(np.any(np.diff(trace.arrival_s) < 0)):
        return "arrivals out of order"
    return None


def free_rows(n: int) -> np.ndarray:
    """``n`` request rows holding no request."""
    rq = np.zeros(n, dtype=REQUEST)
    rq["id"] = -1
    return rq


# the finish heap's first rows per replica: one per decoder, and the stale rows of skipped steps
HEAP_ROWS = 1024
# a replica row's references to request rows (its lists' ends)
HEADS = ("run_head", "run_tail", "wait_head", "wait_tail", "in_head", "in_tail", "pf_head", "pf_tail")


def new_cache(n_rep: int, ip: np.ndarray) -> np.ndarray:
    """The prefix caches of ``n_rep`` fresh replicas (one row each: see :func:`_cache_reset`), or a
    one-column array of zeros when caching is off (``ip[CACHING]`` 0: no block is ever looked up)."""
    if not ip[CACHING]:
        return np.zeros((n_rep, 1), dtype=np.int64)
    nb, t = int(ip[NB]), int(ip[TSIZE])
    kc = np.empty((n_rep, 5 * nb + 2 * t), dtype=np.int64)
    kc[:, :nb] = -1
    kc[:, nb:2 * nb] = 0
    kc[:, 2 * nb:3 * nb] = np.append(np.arange(1, nb), -1)
    kc[:, 3 * nb:4 * nb] = np.arange(-1, nb - 1)
    kc[:, 4 * nb:5 * nb] = 0
    kc[:, 5 * nb:] = -1
    return kc


def new_replicas(n_rep: int, ip: np.ndarray | None = None) -> np.ndarray:
    """``n_rep`` idle replicas (with ``ip``, their free queues hold every block, for :func:`new_cache`)."""
    rp = np.zeros(n_rep, dtype=REPLICA)
    rp["plan"] = IDLE
    rp["plan_end"] = INF
    for name in HEADS:
        rp[name] = -1
    rp["fq_head"] = 0 if ip is not None and ip[CACHING] else -1
    rp["fq_tail"] = ip[NB] - 1 if ip is not None and ip[CACHING] else -1
    return rp


def release_room(config: FleetConfig) -> int:
    """The release buffer's rows: the most requests one step of a replica finishes (its batch), twice."""
    return 2 * config.engine.max_num_seqs + 2


def engine_arrays(config: FleetConfig, mask: int = -1, caching: bool = False, closed: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The engine's limits (``ip``, with the row ``mask``, whether the prefix cache works and with
    ``closed`` the release buffer) and step-time coefficients (``fp``)."""
    eng, st = config.engine, config.step
    table = 1 << max(1, (2 * eng.num_gpu_blocks - 1).bit_length())  # at most half full: short probes
    ip = np.array([eng.block_size, eng.num_gpu_blocks, eng.max_num_seqs, eng.max_num_batched_tokens,
                   int(eng.reserve_full_prompt), int(eng.admission_watermark * eng.num_gpu_blocks), mask,
                   int(caching), table, config.affinity_margin, 0],
                  dtype=np.int64)
    if closed:
        ip = np.concatenate([ip, np.full(release_room(config), -1, dtype=np.int64)])
    fp = np.array([st.base_s, st.per_decode_seq_s, st.per_decode_seq_sq_s, st.per_prefill_token_s,
                   st.per_context_token_s, st.per_prefill_pair_s,
                   st.per_decode_seq_sq_until if st.per_decode_seq_sq_until > 0 else np.inf], dtype=np.float64)
    return ip, fp



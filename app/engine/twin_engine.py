"""The step-level engine of :mod:`app.engine.replica` and the fleet loop of :mod:`app.engine.fleet`,
compiled with numba, in the configuration the economics replay runs them: no step-level metrics, a
deterministic step time (no noise), no front-end delay, no restart, drained to the end.

Why a second implementation: the economics grid replays weeks of demand per scenario and seed, and
the Python engine costs about 0.08 s per simulated replica-hour. This one follows it statement by
statement — the same scheduler, stretches, preemptions and router, the same floating-point
operations in the same order — so its request times are bit-identical (``tests/test_twin_engine.py``
holds it to that on a grid of scenarios, engines and all four routers). The Python engine stays the
reference and the simulator (the bundled sample, the accuracy harness's truth, step-level metrics);
a change of mechanics goes there first, then here.

Layout: one structured array of request rows (a row per request, or in a counted run a ring of rows
that the requests in flight hold: see :func:`simulate`; the replica's queues are doubly linked lists through
``nxt``/``prv``: a request is in exactly one of inbox, waiting, running; the requests in prefill are
a second list through ``pf_nxt``/``pf_prv``, in admission order as the Python dict keeps them), one
of replicas, and per replica a binary heap of (finish step, request id, q) rows. Python's dicts and
deques become these lists; their iteration orders are kept where a float sum or a choice depends on
them.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.engine import stretch
from app.engine.config import NO_EVENTS, FleetConfig
from app.engine.fleet import MODEL_LOAD_S, PROCESS_LEAD_S, Epoch, FleetRun
from app.engine.trace import Trace

INF = math.inf
IDLE, WAKE, STRETCH, STEP = 0, 1, 2, 3
REASON_STOP, REASON_LENGTH = 0, 1
ROUTER_CODES = {"least_outstanding": 0, "round_robin": 1, "random": 2, "power_of_two": 3}

# flags of a request
DEC, LAG = 1, 2

# what a request's next (re)prefill computes, the Python engine's ``to_prefill``, is always prompt + gen
# when it is read, and its ``last_tok`` feeds only the ITL histogram: neither is kept (a month of
# demand is tens of millions of these rows)
REQUEST = np.dtype([
    ("arrival", "f8"), ("sched", "f8"), ("first", "f8"), ("finish", "f8"), ("lag", "f8"),
    ("ran", "i4"), ("prompt", "i4"), ("target", "i4"), ("gen", "i4"), ("q", "i4"), ("pf", "i4"), ("npre", "i4"),
    ("nxt", "i4"), ("prv", "i4"), ("pf_nxt", "i4"), ("pf_prv", "i4"),
    ("replica", "i2"), ("path", "i2"), ("reason", "i1"), ("flags", "i1"), ("hits_max", "i1"),
    ("id", "i8"),  # the request a row holds (-1: none); a counted run reuses the rows of finished ones
])

REPLICA = np.dtype([
    ("T", "f8"), ("plan_end", "f8"), ("s_A", "f8"), ("s_delta", "f8"), ("s_f", "f8"), ("st_dur", "f8"),
    ("g_kv", "f8"),
    ("S", "i8"), ("used", "i8"), ("plan", "i8"), ("k", "i8"), ("s_n", "i8"), ("sum_q", "i8"),
    ("n_run", "i8"), ("n_wait", "i8"), ("n_inbox", "i8"), ("n_dec", "i8"), ("n_pf", "i8"), ("n_lag", "i8"),
    ("run_head", "i8"), ("run_tail", "i8"), ("wait_head", "i8"), ("wait_tail", "i8"),
    ("in_head", "i8"), ("in_tail", "i8"), ("pf_head", "i8"), ("pf_tail", "i8"),
    ("heap_n", "i8"), ("st_ndec", "i8"), ("st_npf", "i8"), ("g_run", "i8"), ("g_wait", "i8"),
], align=True)

# engine limits, in an int64 array: block size, blocks, max_num_seqs, token budget, reserve full prompt,
# blocks an admission leaves free, and the row mask (request id & mask is its row: -1 when every request
# has a row of its own, ring size - 1 in a counted run); step-time coefficients in a float64 array
BS, NB, MAX_SEQS, BUDGET, RESERVE_FULL, WM, MASK = range(7)
A, B, B2, C, D, E = range(6)

# How the event loop's functions are compiled. error_model="numpy": no zero-divisor check on integer
# // and % (no divisor here can be 0; float arithmetic is IEEE either way, so results do not change).
# _nrt=False: no reference counting. numba increfs and decrefs every array argument of every call
# (atomic operations), and the loop makes a dozen calls of ten arrays per event: half of its time,
# measured with perf. These functions allocate nothing and return no array (the finish heap grows
# in _grown_heap, called by the loop's entry points, which keep reference counting), so the caller's
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
def _push_back(rq, i, head, tail):
    rq[i].nxt = -1
    rq[i].prv = tail
    if tail >= 0:
        rq[tail].nxt = i
    else:
        head = i
    return head, i


@njit(**LOOP)
def _push_front(rq, i, head, tail):
    rq[i].prv = -1
    rq[i].nxt = head
    if head >= 0:
        rq[head].prv = i
    else:
        tail = i
    return i, tail


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
    else:
        rp[r].pf_head = n
    if n >= 0:
        rq[n].pf_prv = p
    else:
        rp[r].pf_tail = p
    rq[i].pf = -1
    rp[r].n_pf -= 1


# -- the finish heap: rows (finish step, request id, q), ordered as Python orders the tuples ---------
# (an entry whose row holds another request, or the request with another q, is stale)
@njit(**LOOP)
def _less(h, r, x, y):
    if h[r, x, 0] != h[r, y, 0]:
        return h[r, x, 0] < h[r, y, 0]
    if h[r, x, 1] != h[r, y, 1]:
        return h[r, x, 1] < h[r, y, 1]
    return h[r, x, 2] < h[r, y, 2]


@njit(**LOOP)
def _swap(h, r, x, y):
    for c in range(3):
        t = h[r, x, c]
        h[r, x, c] = h[r, y, c]
        h[r, y, c] = t


@njit(**LOOP)
def _heap_push(h, rp, r, fs, i, q):
    """Push a row (the caller has made room: see :func:`_process`)."""
    n = rp[r].heap_n
    h[r, n, 0] = fs
    h[r, n, 1] = i
    h[r, n, 2] = q
    rp[r].heap_n = n + 1
    while n > 0:
        parent = (n - 1) >> 1
        if _less(h, r, n, parent):
            _swap(h, r, n, parent)
            n = parent
        else:
            break


@njit(cache=True, error_model="numpy")
def _grown_heap(h):
    """The finish heaps in an array of twice the rows (the loop stopped because one may overflow)."""
    bigger = np.empty((h.shape[0], 2 * h.shape[1], 3), dtype=np.int64)
    bigger[:, : h.shape[1]] = h
    return bigger


@njit(**LOOP)
def _heap_pop(h, rp, r):
    n = rp[r].heap_n - 1
    rp[r].heap_n = n
    if n > 0:
        _swap(h, r, 0, n)
        x = 0
        while True:
            left = 2 * x + 1
            if left >= n:
                break
            best = left
            if left + 1 < n and _less(h, r, left + 1, left):
                best = left + 1
            if _less(h, r, best, x):
                _swap(h, r, best, x)
                x = best
            else:
                break


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
    _heap_push(h, rp, r, rq[i].target + rq[i].prompt - q, rq[i].id, q)


@njit(**LOOP)
def _lag_pop(rq, rp, r, i, default):
    """lag.pop(i, default)."""
    if rq[i].flags & LAG:
        rq[i].flags &= ~LAG
        rp[r].n_lag -= 1
        return rq[i].lag
    return default


@njit(**LOOP)
def _finish(rq, rp, r, i, t, blocks):
    rp[r].run_head, rp[r].run_tail = _unlink(rq, i, rp[r].run_head, rp[r].run_tail)
    rp[r].n_run -= 1
    _lag_pop(rq, rp, r, i, 0.0)
    rp[r].used -= blocks
    rq[i].finish = t
    rq[i].gen = rq[i].target
    rq[i].reason = REASON_LENGTH if rq[i].hits_max else REASON_STOP


@njit(**LOOP)
def _pop_finishes(rq, rp, ncls, h, ip, r):
    S = rp[r].S
    bs = ip[BS]
    while rp[r].heap_n > 0 and h[r, 0, 0] <= S:
        fs, j, q = h[r, 0, 0], h[r, 0, 1], h[r, 0, 2]
        _heap_pop(h, rp, r)
        i = j & ip[MASK]
        if not (rq[i].id == j and rq[i].flags & DEC and rq[i].q == q) or fs != S:
            continue
        rq[i].flags &= ~DEC
        rp[r].n_dec -= 1
        _drop_decoder(rq, rp, ncls, ip, r, i, q)
        _finish(rq, rp, r, i, rp[r].T, -(-(S + q - 1) // bs))


@njit(**LOOP)
def _set_gauges(rp, ip, r):
    rp[r].g_run = rp[r].n_run
    rp[r].g_wait = rp[r].n_wait
    rp[r].g_kv = rp[r].used / ip[NB]


# -- stretch arithmetic (step j lasts f * (A + delta * j)) -------------------------------------------
@njit(**LOOP)
def _tau(rp, r, k):
    return rp[r].s_f * (k * rp[r].s_A + rp[r].s_delta * k * (k - 1) * 0.5)


_first_steps = njit(**LOOP)(stretch.first_tau_at_least)
_steps_by = njit(**LOOP)(stretch.steps_ending_by)


@njit(**LOOP)
def _first_tau_at_least(rp, r, y):
    return _first_steps(rp[r].s_f, rp[r].s_A, rp[r].s_delta, y)


@njit(**LOOP)
def _steps_ending_by(rp, r, y):
    return _steps_by(rp[r].s_f, rp[r].s_A, rp[r].s_delta, y)


@njit(**LOOP)
def _cum(rp, prefix, ip, r, k):
    bs = ip[BS]
    return (k // bs) * rp[r].s_n + prefix[r, k % bs]


# -- planning ----------------------------------------------------------------------------------------
@njit(**LOOP)
def _plan(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
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
        _schedule_step(rq, rp, ncls, st_dec, st_pf, ip, fp, r)
        return
    bs = ip[BS]
    if rp[r].n_wait > 0 and rp[r].n_run < ip[MAX_SEQS]:
        head = rp[r].wait_head
        room = ip[BUDGET] - rp[r].n_dec
        first = rq[head].prompt + rq[head].gen
        if not ip[RESERVE_FULL] and first > room:
            first = room
        if -(-first // bs) <= ip[NB] - rp[r].used - ip[WM]:
            _schedule_step(rq, rp, ncls, st_dec, st_pf, ip, fp, r)
            return
    _plan_stretch(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r)


@njit(**LOOP)
def _plan_stretch(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
    S, bs = rp[r].S, ip[BS]
    while rp[r].heap_n > 0:
        fs, j, q = h[r, 0, 0], h[r, 0, 1], h[r, 0, 2]
        i = j & ip[MASK]
        if (rq[i].id == j and rq[i].flags & DEC and rq[i].q == q) and fs >= S:
            break
        _heap_pop(h, rp, r)
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
        _schedule_step(rq, rp, ncls, st_dec, st_pf, ip, fp, r)
        return
    if k_kv < k:
        k = k_kv
    rp[r].s_n = n
    rp[r].s_A = fp[A] + fp[B] * n + fp[B2] * n * n + fp[D] * (n * S + rp[r].sum_q)
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
def _apply_stretch(rq, rp, ncls, h, prefix, ip, r, k):
    rp[r].used += _cum(rp, prefix, ip, r, k)
    T0 = rp[r].T
    rp[r].S = rp[r].S + k
    rp[r].T = T0 + _tau(rp, r, k)
    _pop_finishes(rq, rp, ncls, h, ip, r)
    _set_gauges(rp, ip, r)


# -- detailed steps ----------------------------------------------------------------------------------
@njit(**CALLED)
def _schedule_step(rq, rp, ncls, st_dec, st_pf, ip, fp, r):
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
            ok = True
            while nblk > free:
                victim = rp[r].run_tail
                free += _preempt(rq, rp, ncls, ip, r, victim)
                preempted += 1
                if victim == i:
                    ok = False
                    break
            if not ok:
                break
            free -= nblk
            budget -= ntok
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
        max_seqs, reserve_full, wm = ip[MAX_SEQS], ip[RESERVE_FULL], ip[WM]
        while rp[r].n_wait > 0 and budget > 0 and rp[r].n_run < max_seqs:
            i = rp[r].wait_head
            tot = (rq[i].prompt + rq[i].gen)
            ntok = tot if tot < budget else budget
            nblk = -(-ntok // bs)
            if (-(-tot // bs) if reserve_full else nblk) > free - wm:
                break
            rp[r].wait_head, rp[r].wait_tail = _unlink(rq, i, rp[r].wait_head, rp[r].wait_tail)
            rp[r].n_wait -= 1
            rp[r].run_head, rp[r].run_tail = _push_back(rq, i, rp[r].run_head, rp[r].run_tail)
            rp[r].n_run += 1
            _pf_add(rq, rp, r, i, 0)
            if rq[i].sched != rq[i].sched:  # NaN: first time scheduled
                rq[i].sched = T
            st_pf[r, npf, 0] = i
            st_pf[r, npf, 1] = ntok
            st_pf[r, npf, 2] = 0
            npf += 1
            budget -= ntok
            free -= nblk
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
        dur = 1.0 * (fp[A] + fp[B] * n_dec_sched + fp[B2] * n_dec_sched * n_dec_sched
                     + fp[C] * pf_tok + fp[D] * (dec_ctx + pf_ctx) + fp[E] * pairs)
    rp[r].st_ndec = -1 if all_dec else n_dec_sched
    rp[r].st_npf = npf
    rp[r].st_dur = dur
    rp[r].plan = STEP
    rp[r].plan_end = T + dur


@njit(**CALLED)
def _preempt(rq, rp, ncls, ip, r, i):
    """Free request i's blocks and put it at the front of the waiting queue; return the blocks."""
    bs = ip[BS]
    rp[r].run_head, rp[r].run_tail = _unlink(rq, i, rp[r].run_head, rp[r].run_tail)
    rp[r].n_run -= 1
    if rq[i].flags & DEC:
        q = rq[i].q
        rq[i].flags &= ~DEC
        rp[r].n_dec -= 1
        hh = rp[r].S + q
        blocks = -(-(hh - 1) // bs)
        _drop_decoder(rq, rp, ncls, ip, r, i, q)
        rq[i].gen = hh - rq[i].prompt
        _lag_pop(rq, rp, r, i, 0.0)
    else:
        comp = rq[i].pf
        _pf_del(rq, rp, r, i)
        blocks = -(-comp // bs)
    rq[i].npre += 1
    rp[r].wait_head, rp[r].wait_tail = _push_front(rq, i, rp[r].wait_head, rp[r].wait_tail)
    rp[r].n_wait += 1
    return blocks


@njit(**LOOP)
def _complete_step(rq, rp, ncls, h, st_dec, st_pf, ip, r):
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
    _complete_prefills(rq, rp, ncls, h, st_pf, ip, r, T1, S1)
    rp[r].S = S1
    rp[r].T = T1
    _pop_finishes(rq, rp, ncls, h, ip, r)
    _set_gauges(rp, ip, r)


@njit(**LOOP)
def _complete_prefills(rq, rp, ncls, h, st_pf, ip, r, T1, S1):
    bs = ip[BS]
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
            _finish(rq, rp, r, i, T1, -(-(rq[i].prompt + g_old) // bs))
        else:
            _add_decoder(rq, rp, ncls, h, ip, r, i, rq[i].prompt + g_old + 1 - S1)


@njit(**LOOP)
def _process(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
    """Replica r's planned event, and its next plan; False (nothing done) when the event is a step
    whose pushes could overflow the finish heap: the caller grows it (:func:`_grown_heap`) and calls
    again."""
    plan = rp[r].plan
    if plan == STRETCH:
        _apply_stretch(rq, rp, ncls, h, prefix, ip, r, rp[r].k)
    elif plan == STEP:  # the only event that pushes onto the finish heap: at most one row per running request
        if rp[r].heap_n + ip[MAX_SEQS] >= h.shape[1]:
            return False
        _complete_step(rq, rp, ncls, h, st_dec, st_pf, ip, r)
    elif plan == WAKE:
        rp[r].T = rp[r].plan_end
    _plan(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r)
    return True


@njit(**LOOP)
def _enqueue(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r, i):
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
                _plan(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r)
            else:
                rp[r].k = k_cut
                rp[r].plan_end = rp[r].T + _tau(rp, r, k_cut)


@njit(**LOOP)
def _advance(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, x):
    """Every replica's events up to time x; False when one stopped for a larger heap (see :func:`_process`)."""
    for r in range(rp.shape[0]):
        while rp[r].plan_end <= x:
            if not _process(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
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
def _new_row(rq, s, i, arrival, prompt, target, path, hits_max):
    """Row ``s`` holds request ``i`` of the trace, as it is before its arrival (the Python engine's
    engine arrival, operation for operation: + frontend_s + per token x prompt, both 0 here)."""
    rq[s].arrival = arrival[i] + 0.0
    rq[s].sched = np.nan
    rq[s].first = np.nan
    rq[s].finish = np.nan
    rq[s].lag = np.nan
    rq[s].prompt = prompt[i]
    rq[s].target = target[i]
    rq[s].path = path[i]
    rq[s].hits_max = hits_max[i]
    rq[s].gen = 0
    rq[s].q = 0
    rq[s].npre = 0
    rq[s].flags = 0
    rq[s].ran = -1
    rq[s].reason = -1
    rq[s].replica = -1
    rq[s].pf = -1
    rq[s].nxt = -1
    rq[s].prv = -1
    rq[s].pf_nxt = -1
    rq[s].pf_prv = -1
    rq[s].id = i


@njit(cache=True, error_model="numpy")
def _run(rq, arrival, prompt, target, path, hits_max, rp, ncls, prefix, h, st_dec, st_pf, gauges, ip, fp, router,
         pick_a, pick_b, dt, horizon, at, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts):
    """The fleet loop of ``fleet.run_fleet`` without restarts, drained: route each request at its
    arrival (every replica advanced to that time first), read the gauges at each grid point.

    Request i takes row ``i & ip[MASK]``. In a counted run (a ring of rows) a finished request's row
    is counted (``_count_row``) when a later request takes it; when the row's request is still in
    the engine, the loop returns ``(h, False)`` with its place in ``at`` (request, grid point, next
    router start) for the caller to enlarge the ring and call again. ``(h, True)``: drained."""
    n_rep, n_grid = rp.shape[0], gauges.shape[1] - 1
    gi, nxt = at[1], at[2]
    n = arrival.shape[0]
    for i in range(at[0], n + 1):
        tau = arrival[i] + 0.0 if i < n else horizon
        while gi < n_grid and gi * dt <= tau:
            tg = gi * dt
            while not _advance(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, tg):
                h = _grown_heap(h)
            for r in range(n_rep):
                _peek_gauges(rp, prefix, ip, r, tg, gauges, gi)
            gi += 1
        while not _advance(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, tau):
            h = _grown_heap(h)
        if i == n:
            break
        s = i & ip[MASK]
        if rq[s].id >= 0:  # a counted run's ring: the row of an earlier request
            if rq[s].reason < 0:
                at[0], at[1], at[2] = i, gi, nxt
                return h, False
            _count_row(rq, s, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts)
        _new_row(rq, s, i, arrival, prompt, target, path, hits_max)
        start = nxt
        nxt = (start + 1) % n_rep
        if router == 0:  # least outstanding: the first of the least loaded in rotating order
            best, least = -1, 1 << 62
            for off in range(n_rep):
                r = start + off if start + off < n_rep else start + off - n_rep
                load = rp[r].n_inbox + rp[r].n_wait + rp[r].n_run
                if load < least:
                    best, least = r, load
            choice = best
        elif router == 1:  # round robin
            choice = start
        elif router == 2:  # random
            choice = (start + pick_a[i]) % n_rep
        elif n_rep == 1:  # power of two, one replica
            choice = start
        else:
            a = (start + pick_a[i]) % n_rep
            b = (start + pick_b[i]) % n_rep
            la = rp[a].n_inbox + rp[a].n_wait + rp[a].n_run
            lb = rp[b].n_inbox + rp[b].n_wait + rp[b].n_run
            choice = a if la <= lb else b
        _enqueue(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, choice, s)
    for r in range(n_rep):
        while rp[r].plan_end < INF:
            if not _process(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
                h = _grown_heap(h)
    at[0], at[1], at[2] = n, gi, nxt
    return h, True


# -- the router's random draws -----------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _randbelow(raw, pos, n):
    """Python's ``Random._randbelow(n)`` on the raw 32-bit stream from ``pos``: (value, next pos), or
    (-1, pos) when the stream runs out."""
    k = 0
    x = n
    while x > 0:
        k += 1
        x >>= 1
    while pos < raw.shape[0]:
        v = np.int64(raw[pos] >> np.uint64(32 - k))
        pos += 1
        if v < n:
            return v, pos
    return -1, pos


@njit(cache=True, error_model="numpy")
def _draw(raw, pos, start, router, n_rep, pick_a, pick_b):
    """Draw requests start.. as ``Router.choose`` does (``randrange(n)``; ``sample(order, 2)``) until
    the stream runs out: (first request not drawn, its stream position)."""
    for i in range(start, pick_a.shape[0]):
        p0 = pos
        if router == 2:
            v, pos = _randbelow(raw, pos, n_rep)
            if v < 0:
                return i, p0
            pick_a[i] = v
        elif n_rep > 1:
            j0, pos = _randbelow(raw, pos, n_rep)
            if j0 < 0:
                return i, p0
            if n_rep <= 21:  # sample's pool method: the second draw is among the n - 1 left
                j1, pos = _randbelow(raw, pos, n_rep - 1)
                if j1 < 0:
                    return i, p0
                pick_b[i] = n_rep - 1 if j1 == j0 else j1
            else:  # its set method: redraw until different
                j1 = j0
                while j1 == j0:
                    j1, pos = _randbelow(raw, pos, n_rep)
                    if j1 < 0:
                        return i, p0
                pick_b[i] = j1
            pick_a[i] = j0
    return pick_a.shape[0], pos


def _router_picks(router: str, n_rep: int, n_req: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``Router.choose`` draws for each request (random: ``randrange``; power of two:
    ``sample(order, 2)``), from the same Mersenne Twister stream as ``random.Random(seed)``: numpy's
    MT19937 started from its state yields the same 32-bit words."""
    code = ROUTER_CODES[router]
    if code < 2 or n_req == 0 or (code == 3 and n_rep == 1):  # no draw: _run never reads them
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    pick_a = np.zeros(n_req, dtype=np.int64)
    pick_b = np.zeros(n_req, dtype=np.int64)
    words = random.Random(seed).getstate()[1]
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": np.array(words[:624], dtype=np.uint32),
                                                        "pos": int(words[624])}}
    raw = np.empty(0, dtype=np.uint64)
    done = pos = 0
    while done < n_req:
        raw = np.concatenate([raw[pos:], bits.random_raw(2 * (n_req - done) + 1024)])
        done, pos = _draw(raw, 0, done, code, n_rep, pick_a, pick_b)
    return pick_a, pick_b


@dataclass
class TwinRequests:
    """Per-request outcomes of a compiled run, in the fields ``records.run_arrays`` reads."""

    arrival: np.ndarray
    eng_arrival: np.ndarray
    sched_t: np.ndarray
    first_t: np.ndarray
    finish_t: np.ndarray
    replica: np.ndarray
    path: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    npre: np.ndarray
    reason: np.ndarray
    lost: np.ndarray

    @property
    def n(self) -> int:
        return len(self.arrival)


@dataclass
class TwinCounters:
    """The gauges a scrape at each grid point reads (running, waiting, KV usage 0-1), as in
    ``StepCounters.gauges``; the compiled engine keeps no step-level histogram."""

    gauges: np.ndarray


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


@dataclass(frozen=True)
class Counting:
    """What a counted run counts (the arguments of :func:`breach_counts` and :func:`view_counts`):
    per path thresholds (NaN: not promised), the range [t_lo, t_hi), the breach windows and the
    view's windows (``view_counts``' origin, width and count; none: no view counted)."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    t_lo: float
    t_hi: float
    window_s: float
    n_windows: int
    origin: float
    view_window_s: float
    n_view: int


@dataclass
class Counts:
    """A counted run's counts: ``breach_counts``' (totals, windows) and ``view_counts``' (per_path,
    decode, counts)."""

    totals: np.ndarray
    windows: np.ndarray
    per_path: np.ndarray
    decode: np.ndarray
    counts: np.ndarray


@dataclass
class Simulated:
    """A compiled run: the request rows (``REQUEST``; None in a counted run, which keeps its
    ``counts`` instead), the gauges per replica and grid point, its wall time, and how many times a
    counted run enlarged its ring of rows."""

    rows: np.ndarray | None
    gauges: np.ndarray
    sim_seconds: float
    counts: Counts | None = None
    enlarged: int = 0


# a counted run's first ring of rows: a replica holds at most max_num_seqs requests running plus its
# queue, so 65,536 rows (about 6 MB) hold the requests in flight at once on any fleet short of an
# overload; a ring that meets a request still in flight doubles
RING_ROWS = 1 << 16
# the finish heap's first rows per replica: one per decoder, and the stale rows of skipped steps
HEAP_ROWS = 1024
_HEADS = ("run_head", "run_tail", "wait_head", "wait_tail", "in_head", "in_tail", "pf_head", "pf_tail")


def free_rows(n: int) -> np.ndarray:
    """``n`` request rows holding no request."""
    rq = np.zeros(n, dtype=REQUEST)
    rq["id"] = -1
    return rq


def new_replicas(n_rep: int) -> np.ndarray:
    """``n_rep`` idle replicas."""
    rp = np.zeros(n_rep, dtype=REPLICA)
    rp["plan"] = IDLE
    rp["plan_end"] = INF
    for name in _HEADS:
        rp[name] = -1
    return rp


def engine_arrays(config: FleetConfig, mask: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """The engine's limits (``ip``, with the row ``mask``) and step-time coefficients (``fp``)."""
    eng, st = config.engine, config.step
    ip = np.array([eng.block_size, eng.num_gpu_blocks, eng.max_num_seqs, eng.max_num_batched_tokens,
                   int(eng.reserve_full_prompt), int(eng.admission_watermark * eng.num_gpu_blocks), mask],
                  dtype=np.int64)
    fp = np.array([st.base_s, st.per_decode_seq_s, st.per_decode_seq_sq_s, st.per_prefill_token_s,
                   st.per_context_token_s, st.per_prefill_pair_s], dtype=np.float64)
    return ip, fp


def _enlarged(rq: np.ndarray, rp: np.ndarray, st_dec: np.ndarray, st_pf: np.ndarray, ip: np.ndarray,
              sink: tuple[np.ndarray, ...]) -> np.ndarray:
    """A counted run's ring, twice as large: the finished requests counted, the others moved to row
    ``id & (size - 1)`` and every reference to a row (the lists, the planned step) moved with them."""
    _count_rows(rq, True, *sink)
    size = 2 * len(rq)
    held = rq["id"] >= 0
    row = np.where(held, rq["id"] & (size - 1), -1)  # old row -> new row

    def moved(v: np.ndarray) -> np.ndarray:
        return np.where(v >= 0, row[np.maximum(v, 0)], -1)

    out = free_rows(size)
    rows = rq[held]
    for name in ("nxt", "prv", "pf_nxt", "pf_prv"):
        rows[name] = moved(rows[name])
    out[row[held]] = rows
    for name in _HEADS:
        rp[name] = moved(rp[name])
    for r in np.flatnonzero(rp["plan"] == STEP):  # the step a replica has planned runs these rows
        n_dec, n_pf = int(rp["st_ndec"][r]), int(rp["st_npf"][r])
        if n_dec > 0:
            st_dec[r, :n_dec] = moved(st_dec[r, :n_dec])
        if n_pf > 0:
            st_pf[r, :n_pf, 0] = moved(st_pf[r, :n_pf, 0])
    ip[MASK] = size - 1
    return out


def simulate(trace: Trace, config: FleetConfig, seed: int = 0, counting: Counting | None = None,
             ring_rows: int = RING_ROWS, heap_rows: int = HEAP_ROWS) -> Simulated:
    """Run ``trace`` on the fleet, compiled (see :func:`unsupported` for what it does not model).

    With ``counting``, the run keeps no row per request: its rows are a ring (``ring_rows``, a power
    of two, doubled when it meets a request still in flight) and each finished request is counted
    as ``breach_counts`` and ``view_counts`` count it when its row is taken again, so a month of
    demand holds the requests in flight, not tens of millions of rows. The counts are those of the
    full run's rows: the same requests, times and integer sums. ``heap_rows``: the finish heap's first
    rows per replica (it doubles when a step could fill it)."""
    why = unsupported(trace, config)
    if why is not None:
        raise ValueError(f"the compiled twin engine does not model {why}")
    wall = time.perf_counter()
    eng = config.engine
    dt = config.scrape_interval_s
    n_grid = int(math.floor(trace.duration_s / dt + 1e-9)) + 1
    n_rep = config.replicas
    n = len(trace.arrival_s)
    if counting is None:
        rq = free_rows(n)
        ip, fp = engine_arrays(config)
        c = Counting(np.zeros(1), np.zeros(1), 0.0, 0.0, 1.0, 1, 0.0, 1.0, 1)  # never counted into
    else:
        if ring_rows < 2 or ring_rows & (ring_rows - 1):
            raise ValueError(f"ring_rows must be a power of two of at least 2, not {ring_rows}")
        rq = free_rows(ring_rows)
        ip, fp = engine_arrays(config, ring_rows - 1)
        c = counting
    n_paths = len(c.ttft_s)
    counts = Counts(totals=np.zeros((n_paths, 5), dtype=np.int64),
                    windows=np.zeros((n_paths, 4, c.n_windows), dtype=np.int64),
                    per_path=np.zeros((n_paths, 4), dtype=np.int64), decode=np.zeros(2, dtype=np.int64),
                    counts=np.zeros((c.n_view, n_rep), dtype=np.int64))
    sink = (np.array([c.t_lo, c.t_hi, c.window_s, c.origin, c.view_window_s], dtype=np.float64),
            np.asarray(c.ttft_s, dtype=np.float64), np.asarray(c.tpot_s, dtype=np.float64), counts.totals,
            counts.windows, counts.per_path, counts.decode, counts.counts)
    rp = new_replicas(n_rep)
    bs = eng.block_size
    pick_a, pick_b = _router_picks(config.router, n_rep, n, seed * 31 + 17)
    gauges = np.zeros((n_rep, n_grid + 1, 3))
    ncls, prefix = np.zeros((n_rep, bs), dtype=np.int64), np.zeros((n_rep, bs + 1), dtype=np.int64)
    h = np.empty((n_rep, max(heap_rows, 1), 3), dtype=np.int64)
    st_dec = np.empty((n_rep, eng.max_num_seqs + 1), dtype=np.int64)
    st_pf = np.empty((n_rep, eng.max_num_seqs + 1, 3), dtype=np.int64)
    at = np.zeros(3, dtype=np.int64)
    enlarged = 0
    while True:
        h, done = _run(rq, trace.arrival_s, trace.prompt_tokens, trace.output_tokens, trace.path, trace.hits_max,
                       rp, ncls, prefix, h, st_dec, st_pf, gauges, ip, fp, ROUTER_CODES[config.router], pick_a,
                       pick_b, float(dt), float(trace.duration_s), at, *sink)
        if done:
            break
        rq = _enlarged(rq, rp, st_dec, st_pf, ip, sink)
        enlarged += 1
    if counting is None:
        return Simulated(rows=rq, gauges=gauges, sim_seconds=time.perf_counter() - wall)
    _count_rows(rq, False, *sink)
    return Simulated(rows=None, gauges=gauges, sim_seconds=time.perf_counter() - wall, counts=counts,
                     enlarged=enlarged)


def run_fleet_compiled(trace: Trace, config: FleetConfig, seed: int = 0) -> FleetRun:
    """``fleet.run_fleet(trace, config, seed=seed, drain=True, metrics=False)`` for the twin's
    configuration (see :func:`unsupported`), compiled: the same requests, times and gauges."""
    sim = simulate(trace, config, seed)
    rq = sim.rows
    n, n_rep = len(rq), config.replicas
    reqs = TwinRequests(arrival=np.asarray(trace.arrival_s, dtype=float), eng_arrival=rq["arrival"],
                        sched_t=rq["sched"], first_t=rq["first"], finish_t=rq["finish"],
                        replica=rq["replica"].astype(np.int64), path=rq["path"].astype(np.int64),
                        prompt=rq["prompt"].astype(np.int64), gen=rq["gen"].astype(np.int64),
                        npre=rq["npre"].astype(np.int64), reason=rq["reason"].astype(np.int64),
                        lost=np.zeros(n, dtype=bool))
    epochs = [[Epoch(r, -PROCESS_LEAD_S + 37.0 * r, -PROCESS_LEAD_S + 37.0 * r + MODEL_LOAD_S)] for r in range(n_rep)]
    run = FleetRun(trace=trace, config=config, events=NO_EVENTS, seed=seed, reqs=reqs,  # type: ignore[arg-type]
                   counters=[TwinCounters(sim.gauges[r]) for r in range(n_rep)],  # type: ignore[misc]
                   epochs=epochs, grid_dt=config.scrape_interval_s, n_grid=sim.gauges.shape[1] - 1, drained=True)
    run.sim_seconds = sim.sim_seconds
    return run


@njit(**LOOP)
def _counted_finish_us(rq, i, t_lo, t_hi):
    """Request i's finish in whole microseconds when it finished in [t_lo, t_hi), else -1."""
    if rq[i].reason < 0:
        return np.int64(-1)
    finish_us = np.int64(np.rint(rq[i].finish * 1e6))
    t = finish_us / 1e6
    return finish_us if t >= t_lo and t < t_hi else np.int64(-1)


@njit(**LOOP)
def _breach_row(rq, i, ttft_s, tpot_s, t_lo, t_hi, window_s, totals, windows):
    """Row i into :func:`breach_counts`' counts."""
    first = rq[i].first
    if first != first:
        return
    n_windows = windows.shape[2]
    p = rq[i].path
    arrival_us = np.int64(np.rint(rq[i].arrival * 1e6))
    first_us = np.int64(np.rint(first * 1e6))
    ttft_b = ttft_s[p] == ttft_s[p] and (first_us - arrival_us) / 1_000_000 > ttft_s[p]
    t = first_us / 1e6
    if t >= t_lo and t < t_hi:
        totals[p, 0] += 1
        w = int((t - t_lo) // window_s)
        if ttft_b:
            totals[p, 1] += 1
        if w < n_windows:
            windows[p, 0, w] += 1
            if ttft_b:
                windows[p, 1, w] += 1
    finish_us = _counted_finish_us(rq, i, t_lo, t_hi)
    if finish_us < 0:
        return
    t = finish_us / 1e6
    n_out = rq[i].gen
    tpot = ((finish_us - first_us) / 1_000_000) / max(n_out - 1, 1) if n_out > 1 else 0.0
    tpot_b = tpot_s[p] == tpot_s[p] and tpot > tpot_s[p]
    totals[p, 2] += 1
    if tpot_b:
        totals[p, 3] += 1
    if tpot_b or ttft_b:
        totals[p, 4] += 1
    w = int((t - t_lo) // window_s)
    if w < n_windows:
        windows[p, 2, w] += 1
        if tpot_b or ttft_b:
            windows[p, 3, w] += 1


@njit(cache=True, error_model="numpy")
def breach_counts(rq, ttft_s, tpot_s, t_lo, t_hi, window_s, n_windows):
    """Per path (thresholds ``ttft_s``/``tpot_s``, NaN = not promised) and window of ``window_s`` from
    ``t_lo``: first tokens and TTFT breaches by first-token time, finished requests and joint
    breaches by finish time, for times in [t_lo, t_hi). Times, TTFT and TPOT are computed as
    ``records.run_arrays`` computes them (whole microseconds), so the counts are those of its arrays.
    Returns (per path: first tokens, TTFT breaches, finished, TPOT breaches, joint breaches;
    per path and window: first tokens, TTFT breaches, finished, joint breaches)."""
    n_paths = ttft_s.shape[0]
    totals = np.zeros((n_paths, 5), dtype=np.int64)
    windows = np.zeros((n_paths, 4, n_windows), dtype=np.int64)
    for i in range(rq.shape[0]):
        _breach_row(rq, i, ttft_s, tpot_s, t_lo, t_hi, window_s, totals, windows)
    return totals, windows


@njit(**LOOP)
def _view_row(rq, i, t_lo, t_hi, window_s, origin, per_path, decode, counts):
    """Row i into :func:`view_counts`' counts."""
    first = rq[i].first
    if first != first:
        return
    n_windows = counts.shape[0]
    p = rq[i].path
    first_us = np.int64(np.rint(first * 1e6))
    t = first_us / 1e6
    if t >= t_lo and t < t_hi:
        per_path[p, 0] += 1
        per_path[p, 1] += first_us - np.int64(np.rint(rq[i].arrival * 1e6))
        m = int(math.ceil(((t - t_lo + origin) - origin) / window_s - 1e-9)) - 1
        m = min(max(m, 0), n_windows - 1)
        counts[m, rq[i].replica] += 1
    finish_us = _counted_finish_us(rq, i, t_lo, t_hi)
    if finish_us < 0:
        return
    per_path[p, 2] += 1
    per_path[p, 3] += np.int64(np.rint(rq[i].sched * 1e6)) - np.int64(np.rint(rq[i].arrival * 1e6))
    decode[0] += finish_us - first_us
    decode[1] += max(rq[i].gen - 1, 0)


@njit(cache=True, error_model="numpy")
def view_counts(rq, t_lo, t_hi, window_s, origin, n_windows, n_rep, n_paths):
    """What :func:`app.economics.calibration.twin_view` reads of a run, in whole microseconds as
    ``records.run_arrays`` computes them, so that its means are those of the per-request arrays up
    to the order of a float sum. Requests whose first token (finish) falls in [t_lo, t_hi): per path
    (first tokens, sum of TTFT µs, finished, sum of queue µs), over every path (sum of decode µs,
    sum of output tokens - 1), and first tokens per window of ``window_s`` (right-closed, from
    ``t_lo``, clipped to the range as ``calibration._minute`` clips) and replica."""
    per_path = np.zeros((n_paths, 4), dtype=np.int64)
    decode = np.zeros(2, dtype=np.int64)
    counts = np.zeros((n_windows, n_rep), dtype=np.int64)
    for i in range(rq.shape[0]):
        _view_row(rq, i, t_lo, t_hi, window_s, origin, per_path, decode, counts)
    return per_path, decode, counts


# sink_f: what a counted run counts in (t_lo, t_hi, breach window_s, view origin, view window_s)
T_LO, T_HI, WINDOW, ORIGIN, VIEW_WINDOW = range(5)


@njit(**LOOP)
def _count_row(rq, s, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts):
    """Row s into a counted run's counts (``breach_counts`` and ``view_counts`` of one row); the row
    is free after."""
    _breach_row(rq, s, ttft_s, tpot_s, sink_f[T_LO], sink_f[T_HI], sink_f[WINDOW], totals, windows)
    if counts.shape[0] > 0:  # no view windows: the breaches alone (a grid's replay)
        _view_row(rq, s, sink_f[T_LO], sink_f[T_HI], sink_f[VIEW_WINDOW], sink_f[ORIGIN], per_path, decode, counts)
    rq[s].id = -1


@njit(cache=True, error_model="numpy")
def _count_rows(rq, finished_only, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts):
    """Every held row (``finished_only``: of a finished request) into the counts."""
    for s in range(rq.shape[0]):
        if rq[s].id >= 0 and (rq[s].reason >= 0 or not finished_only):
            _count_row(rq, s, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts)

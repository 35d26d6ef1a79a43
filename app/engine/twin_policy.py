"""The policy fleet loop of :mod:`app.engine.policy_fleet`, compiled with numba on the twin's engine
(:mod:`app.engine.twin_engine`): the same autoscaler decisions, rejections, retries and routing,
statement by statement, so its request rows are bit-identical to the Python loop's on the twin's
configuration (``tests/test_policy_replay.py``). A change of policy mechanics goes to the Python loop
first, then here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.engine.config import FleetConfig
from app.engine.policy import REASON_REJECTED, RETRY_SEED, ROUTER_SEED, Policy, Timeline, uniform_floats
from app.engine.trace import Trace
from app.engine.twin_engine import (
    IDLE,
    INF,
    LOOP,
    REQUEST,
    ROUTER_CODES,
    _advance,
    _enqueue,
    _grown_heap,
    _peek_gauges,
    _process,
    engine_arrays,
    new_replicas,
    unsupported,
)

OFF, STARTING, READY, DRAINING = 0, 1, 2, 3
# autoscaler parameters in a float64 array (NaN scale_out_at: no autoscaler)
SIG_RUNNING, OUT_AT, IN_AT, OUT_FOR, IN_FOR, OUT_STEP, COLD, COOL, MIN_R, MAX_R, PERIOD = range(11)
# retry parameters (attempts 0: no retry; budget, ratio NaN: none)
ATTEMPTS, BACKOFF, MULT, JITTER, BUDGET, RATIO = range(6)


@njit(**LOOP)
def _outstanding(rp, r):
    return rp[r].n_inbox + rp[r].n_wait + rp[r].n_run


@njit(**LOOP)
def _choose(rp, state, router, start, u1, u2):
    n = rp.shape[0]
    m = 0
    for off in range(n):
        if state[(start + off) % n] == READY:
            m += 1
    if router == 0:
        best, least = -1, 1 << 62
        for off in range(n):
            r = (start + off) % n
            if state[r] == READY:
                load = _outstanding(rp, r)
                if load < least:
                    best, least = r, load
        return best
    if router == 1:
        ia = 0
    elif router == 2:
        ia = int(u1 * m)
    elif m == 1:
        ia = 0
    else:
        ia = int(u1 * m)
    ib = -1
    if router == 3 and m > 1:
        ib = int(u2 * (m - 1))
        if ib >= ia:
            ib += 1
    a = b = -1
    k = 0
    for off in range(n):
        r = (start + off) % n
        if state[r] == READY:
            if k == ia:
                a = r
            if k == ib:
                b = r
            k += 1
    if b < 0:
        return a
    return a if _outstanding(rp, a) <= _outstanding(rp, b) else b


@njit(**LOOP)
def _reset(rp, ncls, h, r, t):
    """Replica.reset(t): a fresh engine (its queues are empty: it was drained or never ran)."""
    rp[r].S = 0
    rp[r].T = t
    rp[r].used = 0
    rp[r].n_dec = 0
    rp[r].n_lag = 0
    rp[r].sum_q = 0
    rp[r].heap_n = 0
    rp[r].plan = IDLE
    rp[r].plan_end = INF
    rp[r].g_run = 0
    rp[r].g_wait = 0
    rp[r].g_kv = 0.0
    rp[r].k = 0
    rp[r].s_A = 0.0
    rp[r].s_delta = 0.0
    rp[r].s_f = 0.0
    rp[r].s_n = 0
    for c in range(ncls.shape[1]):
        ncls[r, c] = 0


@njit(**LOOP)
def _hless(ht, hi, x, y):
    if ht[x] != ht[y]:
        return ht[x] < ht[y]
    return hi[x] < hi[y]


@njit(**LOOP)
def _hswap(ht, hi, x, y):
    t, i = ht[x], hi[x]
    ht[x], hi[x] = ht[y], hi[y]
    ht[y], hi[y] = t, i


@njit(**LOOP)
def _hpush(ht, hi, n, t, i):
    ht[n], hi[n] = t, i
    while n > 0:
        p = (n - 1) >> 1
        if _hless(ht, hi, n, p):
            _hswap(ht, hi, n, p)
            n = p
        else:
            break


@njit(**LOOP)
def _hpop(ht, hi, n):
    """Remove the top of a heap of n rows (the caller reads it first)."""
    n -= 1
    if n > 0:
        _hswap(ht, hi, 0, n)
        x = 0
        while True:
            left = 2 * x + 1
            if left >= n:
                break
            best = left
            if left + 1 < n and _hless(ht, hi, left + 1, left):
                best = left + 1
            if _hless(ht, hi, best, x):
                _hswap(ht, hi, best, x)
                x = best
            else:
                break


@njit(cache=True, error_model="numpy")
def _run_policy(rq, n_trace, rp, ncls, prefix, h, st_dec, st_pf, gauges, ip, fp, router, u_route, u_retry,
                dt, horizon, state, au, k_adm, ry, origin, attempt, tl, counts):
    n_rep, n_grid = rp.shape[0], gauges.shape[1] - 1
    auto = au[OUT_AT] == au[OUT_AT]
    period = au[PERIOD] if auto else INF
    n_ticks = int(math.floor(horizon / period + 1e-9)) if auto else 0
    ready_at = np.full(n_rep, INF)
    above_since = np.nan
    below_since = np.nan
    last_action = -INF
    ht = np.empty(rq.shape[0], dtype=np.float64)
    hi = np.empty(rq.shape[0], dtype=np.int64)
    hn = 0
    n_rows = n_trace
    budget_minute = -1
    budget_used = 0
    retries_made = 0
    refused = 0
    pos_route = 0
    pos_retry = 0
    gi = 1
    ti = 1
    nxt = 0
    i_trace = 0
    while True:
        last = not (i_trace < n_trace or hn > 0)
        if last:
            tau = horizon
            i = -1
        elif hn > 0 and (i_trace >= n_trace or ht[0] < rq[i_trace].arrival):
            tau, i = ht[0], hi[0]
            _hpop(ht, hi, hn)
            hn -= 1
        else:
            tau, i = rq[i_trace].arrival, i_trace
            i_trace += 1
        # run_until(tau)
        while True:
            tg = gi * dt if gi < n_grid else INF
            rr = np.argmin(ready_at)
            tr = ready_at[rr]
            tp = ti * period if ti <= n_ticks else INF
            t = min(tg, tr, tp)
            if t > tau:
                break
            while not _advance(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, t):
                h = _grown_heap(h)
            if tg == t:
                for r in range(n_rep):
                    if state[r] == READY or state[r] == DRAINING:
                        _peek_gauges(rp, prefix, ip, r, t, gauges, gi)
                gi += 1
            elif tr == t:
                ready_at[rr] = INF
                state[rr] = READY
                _reset(rp, ncls, h, rr, t)
            else:
                # an autoscaler decision
                for r in range(n_rep):
                    if state[r] == DRAINING and _outstanding(rp, r) == 0:
                        state[r] = OFF
                total = 0
                n_ready = 0
                last_ready = -1
                starting = 0
                for r in range(n_rep):
                    if state[r] == READY:
                        n_ready += 1
                        last_ready = r
                        if au[SIG_RUNNING] > 0:
                            total += rp[r].n_run
                        else:
                            total += rp[r].n_inbox + rp[r].n_wait
                    elif state[r] == STARTING:
                        starting += 1
                signal = total / n_ready
                if signal >= au[OUT_AT]:
                    below_since = np.nan
                    if above_since != above_since:
                        above_since = t
                elif signal <= au[IN_AT]:
                    above_since = np.nan
                    if below_since != below_since:
                        below_since = t
                else:
                    above_since = np.nan
                    below_since = np.nan
                can_act = t - last_action >= au[COOL]
                wanted = n_ready + starting
                max_r = int(au[MAX_R])
                if above_since == above_since and t - above_since >= au[OUT_FOR] and can_act and wanted < max_r:
                    for _ in range(min(int(au[OUT_STEP]), max_r - wanted)):
                        back = -1
                        for r in range(n_rep):
                            if state[r] == DRAINING:
                                back = r
                                break
                        if back >= 0:
                            state[back] = READY
                        else:
                            for r in range(n_rep):
                                if state[r] == OFF:
                                    state[r] = STARTING
                                    ready_at[r] = t + au[COLD]
                                    break
                    last_action = t
                    above_since = np.nan
                elif (below_since == below_since and t - below_since >= au[IN_FOR] and can_act
                      and starting == 0 and n_ready > int(au[MIN_R])):
                    state[last_ready] = DRAINING
                    last_action = t
                    below_since = np.nan
                prov = 0
                rdy = 0
                for r in range(n_rep):
                    if state[r] != OFF:
                        prov += 1
                    if state[r] == READY:
                        rdy += 1
                tl[ti - 1, 0] = t
                tl[ti - 1, 1] = prov
                tl[ti - 1, 2] = rdy
                tl[ti - 1, 3] = signal
                ti += 1
        while not _advance(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, tau):
            h = _grown_heap(h)
        if last:
            break
        start = nxt
        u1 = 0.0
        u2 = 0.0
        if router == 2 or router == 3:
            u1 = u_route[pos_route]
            pos_route += 1
            if router == 3:
                u2 = u_route[pos_route]
                pos_route += 1
        r = _choose(rp, state, router, start, u1, u2)
        nxt = (r + 1) % n_rep
        if k_adm == k_adm:
            cap = int(k_adm * rp[r].n_run)
            if rp[r].n_inbox + rp[r].n_wait >= (cap if cap > 1 else 1):
                rq[i].replica = r
                rq[i].reason = REASON_REJECTED
                rq[i].finish = tau
                if ry[ATTEMPTS] > 0 and attempt[i] < ry[ATTEMPTS]:
                    minute = int(tau // 60.0)
                    if minute != budget_minute:
                        budget_minute = minute
                        budget_used = 0
                    if ((ry[BUDGET] != ry[BUDGET] or budget_used < ry[BUDGET])
                            and (ry[RATIO] != ry[RATIO] or retries_made < ry[RATIO] * i_trace)):
                        budget_used += 1
                        retries_made += 1
                        d = ry[BACKOFF]
                        for _ in range(attempt[i] - 1):
                            d *= ry[MULT]
                        t_retry = tau + d * ((1.0 - ry[JITTER]) + ry[JITTER] * u_retry[pos_retry])
                        pos_retry += 1
                        j = n_rows
                        n_rows += 1
                        rq[j].arrival = t_retry
                        rq[j].prompt = rq[i].prompt
                        rq[j].target = rq[i].target
                        rq[j].path = rq[i].path
                        rq[j].hits_max = rq[i].hits_max
                        origin[j] = origin[i]
                        attempt[j] = attempt[i] + 1
                        _hpush(ht, hi, hn, t_retry, j)
                        hn += 1
                    else:
                        refused += 1
                continue
        _enqueue(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r, i)
    for r in range(n_rep):
        while rp[r].plan_end < INF:
            if not _process(rq, rp, ncls, h, prefix, st_dec, st_pf, ip, fp, r):
                h = _grown_heap(h)
    counts[0] = n_rows
    counts[1] = refused
    counts[2] = ti - 1


@dataclass
class PolicySimulated:
    """A compiled policy run: the request rows (``REQUEST``) with each row's user request and attempt,
    the gauges per replica and grid point, the autoscaler's timeline, its wall time."""

    rows: np.ndarray
    origin: np.ndarray
    attempt: np.ndarray
    gauges: np.ndarray
    timeline: Timeline | None
    retries_refused: int
    sim_seconds: float


def _arrays(policy: Policy) -> tuple[np.ndarray, float, np.ndarray]:
    au = np.full(11, np.nan)
    a = policy.autoscaler
    if a is not None:
        au[:] = [1.0 if a.signal == "running" else 0.0, a.scale_out_at, a.scale_in_at, a.out_for_s, a.in_for_s,
                 a.out_step, a.cold_start_s, a.cooldown_s, a.min_replicas, a.max_replicas, a.period_s]
    k = policy.admission.queue_factor if policy.admission else math.nan
    ry = np.array([0.0, 0.0, 1.0, 0.0, np.nan, np.nan])
    if policy.retry is not None:
        rt = policy.retry
        ry[:] = [rt.attempts, rt.backoff_s, rt.multiplier, rt.jitter,
                 np.nan if rt.budget_per_minute is None else rt.budget_per_minute,
                 np.nan if rt.ratio is None else rt.ratio]
    return au, float(k), ry


def simulate_policy(trace: Trace, config: FleetConfig, policy: Policy, seed: int = 0) -> PolicySimulated:
    """Run ``trace`` on the fleet under ``policy``, compiled (the twin's configuration: see
    ``twin_engine.unsupported``)."""
    why = unsupported(trace, config)
    if why is not None:
        raise ValueError(f"the compiled twin engine does not model {why}")
    wall = time.perf_counter()
    eng, st = config.engine, config.step
    dt = config.scrape_interval_s
    n_grid = int(math.floor(trace.duration_s / dt + 1e-9)) + 1
    n_rep = policy.pool(config.replicas)
    n = len(trace.arrival_s)
    cap = policy.capacity(n)
    rq = np.zeros(cap, dtype=REQUEST)
    rq["arrival"][:n] = trace.arrival_s + st.frontend_s + st.frontend_per_token_s * np.asarray(trace.prompt_tokens)
    for name in ("sched", "first", "finish", "lag"):
        rq[name] = np.nan
    rq["prompt"][:n] = trace.prompt_tokens
    rq["target"][:n] = trace.output_tokens
    rq["path"][:n] = trace.path
    rq["hits_max"][:n] = trace.hits_max
    for name in ("ran", "reason", "replica", "pf", "nxt", "prv", "pf_nxt", "pf_prv"):
        rq[name] = -1
    rq["id"] = np.arange(cap)  # every request and retry has a row of its own
    rp = new_replicas(n_rep)
    bs = eng.block_size
    ip, fp = engine_arrays(config)
    code = ROUTER_CODES[config.router]
    u_route = uniform_floats(seed * ROUTER_SEED[0] + ROUTER_SEED[1], 2 * cap if code >= 2 else 0)
    u_retry = uniform_floats(seed * RETRY_SEED[0] + RETRY_SEED[1], cap - n if policy.retry else 0)
    if len(u_retry) == 0:
        u_retry = np.zeros(1)
    if len(u_route) == 0:
        u_route = np.zeros(1)
    state = np.array([READY if r < policy.start(config.replicas) else OFF for r in range(n_rep)], dtype=np.int64)
    au, k, ry = _arrays(policy)
    n_ticks = int(math.floor(trace.duration_s / policy.autoscaler.period_s + 1e-9)) if policy.autoscaler else 0
    tl = np.zeros((max(n_ticks, 1), 4))
    origin = np.zeros(cap, dtype=np.int64)
    origin[:n] = np.arange(n)
    attempt = np.ones(cap, dtype=np.int64)
    counts = np.zeros(3, dtype=np.int64)
    gauges = np.zeros((n_rep, n_grid + 1, 3))
    _run_policy(rq, n, rp, np.zeros((n_rep, bs), dtype=np.int64), np.zeros((n_rep, bs + 1), dtype=np.int64),
                np.empty((n_rep, 1024, 3), dtype=np.int64), np.empty((n_rep, eng.max_num_seqs + 1), dtype=np.int64),
                np.empty((n_rep, eng.max_num_seqs + 1, 3), dtype=np.int64), gauges, ip, fp, code, u_route, u_retry,
                float(dt), float(trace.duration_s), state, au, k, ry, origin, attempt, tl, counts)
    rows = int(counts[0])
    timeline = None
    if policy.autoscaler is not None:
        m = int(counts[2])
        timeline = Timeline(t=tl[:m, 0].copy(), provisioned=tl[:m, 1].astype(np.int64),
                            ready=tl[:m, 2].astype(np.int64), signal=tl[:m, 3].copy(),
                            start=policy.autoscaler.start)
    return PolicySimulated(rows=rq[:rows], origin=origin[:rows], attempt=attempt[:rows], gauges=gauges,
                           timeline=timeline, retries_refused=int(counts[1]), sim_seconds=time.perf_counter() - wall)

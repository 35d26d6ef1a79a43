"""The policy fleet loop of :mod:`app.engine.policy_fleet` on the compiled core
(:mod:`app.engine.twin_engine`): the same autoscaler decisions, rejections, retries and routing,
statement by statement, so its request rows are bit-identical to the Python loop's on the twin's
configuration (``tests/engine/test_policy_replay.py``). A change of policy mechanics goes to the Python loop
first, then here.

The loop (:func:`_run_policy`) takes the next arrival — a trace request, or a retry from the core's
heap — runs every event before it (grid points, replicas becoming ready, autoscaler decisions:
:func:`_decide`), routes the request among the ready replicas, and rejects it (:func:`_queue_full`,
then :func:`_retry`) or enqueues it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.engine.config import FleetConfig
from app.engine.policy import REASON_REJECTED, RETRY_SEED, ROUTER_SEED, Policy, Timeline, uniform_floats
from app.engine.prefix import prefix_keys
from app.engine.trace import Trace
from app.engine.twin_engine import (
    CALLED,
    DRAINING,
    HEAP_COLUMNS,
    HEAP_ROWS,
    INF,
    LOOP,
    MARGIN,
    OFF,
    POWER_OF_TWO,
    RANDOM,
    READY,
    REQUEST,
    ROUTER_CODES,
    STARTING,
    advance,
    drain,
    engine_arrays,
    enqueue,
    grown_heap,
    heap_pop,
    heap_push,
    new_cache,
    new_replicas,
    outstanding,
    read_gauges,
    reset,
    route,
    unsupported,
)

# autoscaler parameters in a float64 array (NaN scale_out_at: no autoscaler)
SIG_RUNNING, OUT_AT, IN_AT, OUT_FOR, IN_FOR, OUT_STEP, COLD, COOL, MIN_R, MAX_R, PERIOD = range(11)
# retry parameters (attempts 0: no retry; budget, ratio NaN: none)
ATTEMPTS, BACKOFF, MULT, JITTER, BUDGET, RATIO = range(6)
# the autoscaler's memory between decisions (a float64 array): since when its signal has been at or
# above scale_out_at, at or below scale_in_at (NaN: it is not), and the time of its last action
ABOVE, BELOW, LAST = range(3)
# the loop's counters (an int64 array): request rows in use, retries waiting, the retry budget's clock
# minute and the retries it allowed in it, retries made, rejections not retried, draws taken of the
# router's and the clients' streams
ROWS, WAITING, MINUTE, IN_MINUTE, MADE, REFUSED, ROUTE_DRAWS, RETRY_DRAWS = range(8)


@njit(**LOOP)
def _picks(state, router, u_route, ctr):
    """The router's draws for a request (``policy_fleet``: one uniform float for random, two for power
    of two, drawn whatever the replicas) as positions among the READY replicas for
    :func:`~app.engine.twin_engine.route` (random, one; power of two, two distinct ones), and how many
    replicas are READY."""
    u1 = 0.0
    u2 = 0.0
    if router == RANDOM or router == POWER_OF_TWO:
        u1 = u_route[ctr[ROUTE_DRAWS]]
        ctr[ROUTE_DRAWS] += 1
        if router == POWER_OF_TWO:
            u2 = u_route[ctr[ROUTE_DRAWS]]
            ctr[ROUTE_DRAWS] += 1
    m = 0
    for r in range(state.shape[0]):
        if state[r] == READY:
            m += 1
    if router == RANDOM:
        return int(u1 * m), -1, m
    if router != POWER_OF_TWO or m == 1:
        return 0, -1, m
    ia = int(u1 * m)
    ib = int(u2 * (m - 1))
    if ib >= ia:
        ib += 1
    return ia, ib, m


@njit(**LOOP)
def _scale_out_one(state, ready_at, ready_t):
    """One more replica: a draining one serves again at once (it is still loaded), else an OFF one
    starts, ready at ``ready_t``."""
    for r in range(state.shape[0]):
        if state[r] == DRAINING:
            state[r] = READY
            return
    for r in range(state.shape[0]):
        if state[r] == OFF:
            state[r] = STARTING
            ready_at[r] = ready_t
            return


@njit(**CALLED)
def _decide(rp, state, ready_at, au, memory, t, tl, row):
    """One autoscaler decision at time t (``policy_fleet``'s ``decide``), written to timeline row ``row``."""
    for r in range(state.shape[0]):
        if state[r] == DRAINING and outstanding(rp, r) == 0:
            state[r] = OFF
    total = 0
    n_ready = 0
    last_ready = -1
    starting = 0
    for r in range(state.shape[0]):
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
        memory[BELOW] = np.nan
        if memory[ABOVE] != memory[ABOVE]:
            memory[ABOVE] = t
    elif signal <= au[IN_AT]:
        memory[ABOVE] = np.nan
        if memory[BELOW] != memory[BELOW]:
            memory[BELOW] = t
    else:
        memory[ABOVE] = np.nan
        memory[BELOW] = np.nan
    can_act = t - memory[LAST] >= au[COOL]
    wanted = n_ready + starting
    max_r = int(au[MAX_R])
    above, below = memory[ABOVE], memory[BELOW]
    if above == above and t - above >= au[OUT_FOR] and can_act and wanted < max_r:
        for _ in range(min(int(au[OUT_STEP]), max_r - wanted)):
            _scale_out_one(state, ready_at, t + au[COLD])
        memory[LAST] = t
        memory[ABOVE] = np.nan
    elif (below == below and t - below >= au[IN_FOR] and can_act
          and starting == 0 and n_ready > int(au[MIN_R])):
        state[last_ready] = DRAINING
        memory[LAST] = t
        memory[BELOW] = np.nan
    provisioned = 0
    ready = 0
    for r in range(state.shape[0]):
        if state[r] != OFF:
            provisioned += 1
        if state[r] == READY:
            ready += 1
    tl[row, 0] = t
    tl[row, 1] = provisioned
    tl[row, 2] = ready
    tl[row, 3] = signal


@njit(**LOOP)
def _queue_full(rp, r, k_adm):
    """Admission control: replica r's queue holds ``max(1, floor(k x running))`` requests already."""
    cap = int(k_adm * rp[r].n_run)
    return rp[r].n_inbox + rp[r].n_wait >= (cap if cap > 1 else 1)


@njit(**LOOP)
def _retry(rq, i, tau, ry, u_retry, origin, attempt, conv, retries, ctr, i_trace):
    """Request row i, rejected at ``tau``: its client retries it (a new row, onto the retry heap) when
    it has attempts left and the budget and the ratio allow; a retry they refuse is counted."""
    if not (ry[ATTEMPTS] > 0 and attempt[i] < ry[ATTEMPTS]):
        return
    minute = int(tau // 60.0)
    if minute != ctr[MINUTE]:
        ctr[MINUTE] = minute
        ctr[IN_MINUTE] = 0
    if not ((ry[BUDGET] != ry[BUDGET] or ctr[IN_MINUTE] < ry[BUDGET])
            and (ry[RATIO] != ry[RATIO] or ctr[MADE] < ry[RATIO] * i_trace)):
        ctr[REFUSED] += 1
        return
    ctr[IN_MINUTE] += 1
    ctr[MADE] += 1
    d = ry[BACKOFF]
    for _ in range(attempt[i] - 1):
        d *= ry[MULT]
    t_retry = tau + d * ((1.0 - ry[JITTER]) + ry[JITTER] * u_retry[ctr[RETRY_DRAWS]])
    ctr[RETRY_DRAWS] += 1
    j = ctr[ROWS]
    ctr[ROWS] += 1
    rq[j].arrival = t_retry
    rq[j].prompt = rq[i].prompt
    rq[j].target = rq[i].target
    rq[j].path = rq[i].path
    rq[j].hits_max = rq[i].hits_max
    # the same tokens again: the same blocks (the rejected try cached none) and conversation
    rq[j].pent = rq[i].pent
    rq[j].npb = rq[i].npb
    rq[j].cent = rq[i].cent
    rq[j].cap = rq[i].cap
    if conv.shape[0] > 0:
        conv[j] = conv[i]
    origin[j] = origin[i]
    attempt[j] = attempt[i] + 1
    n = ctr[WAITING]
    retries[0, n, 0] = t_retry
    retries[0, n, 1] = j
    heap_push(retries, 0, n)
    ctr[WAITING] = n + 1


# nogil: a lane in the calling process replays on a thread (app.economics.run.executors.Lanes)
@njit(cache=True, error_model="numpy", nogil=True)
def _run_policy(rq, n_trace, rp, blank, ncls, kc, prefix, h, st_dec, st_pf, gauges, ip, fp, router, u_route,
                u_retry, dt, horizon, state, au, k_adm, ry, origin, attempt, conv, last_replica, tl, ctr):
    """The loop; returns the autoscaler's decisions (rows of ``tl``), the rest is in ``ctr``.
    ``conv``: each row's conversation (-1: none; empty when the trace has none); ``last_replica``: the
    replica of each conversation's latest turn."""
    n_rep, n_grid = rp.shape[0], gauges.shape[1] - 1
    auto = au[OUT_AT] == au[OUT_AT]
    period = au[PERIOD] if auto else INF
    n_ticks = int(math.floor(horizon / period + 1e-9)) if auto else 0
    ready_at = np.full(n_rep, INF)
    memory = np.array([np.nan, np.nan, -INF])
    retries = np.zeros((1, rq.shape[0], HEAP_COLUMNS))  # (arrival, row, 0), as heapq orders (arrival, row)
    gi = 1
    ti = 1
    nxt = 0
    i_trace = 0
    while True:
        last = not (i_trace < n_trace or ctr[WAITING] > 0)
        if last:
            tau, i = horizon, -1
        elif ctr[WAITING] > 0 and (i_trace >= n_trace or retries[0, 0, 0] < rq[i_trace].arrival):
            tau, i = retries[0, 0, 0], int(retries[0, 0, 1])
            heap_pop(retries, 0, ctr[WAITING])
            ctr[WAITING] -= 1
        else:
            tau, i = rq[i_trace].arrival, i_trace
            i_trace += 1
        # every event before tau, in time order (at a tie: grid point, replica ready, decision)
        while True:
            tg = gi * dt if gi < n_grid else INF
            rr = np.argmin(ready_at)
            tr = ready_at[rr]
            tp = ti * period if ti <= n_ticks else INF
            t = min(tg, tr, tp)
            if t > tau:
                break
            while not advance(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, t):
                h = grown_heap(h)
            if tg == t:
                read_gauges(rp, prefix, ip, state, t, gauges, gi)
                gi += 1
            elif tr == t:
                ready_at[rr] = INF
                state[rr] = READY
                reset(rp, blank, ncls, kc, ip, rr, t)
            else:
                _decide(rp, state, ready_at, au, memory, t, tl, ti - 1)
                ti += 1
        while not advance(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, tau):
            h = grown_heap(h)
        if last:
            break
        ia, ib, n_ready = _picks(state, router, u_route, ctr)
        c = conv[i] if conv.shape[0] > 0 else -1
        r = route(rp, state, n_ready, router, nxt, ia, ib, last_replica[c] if c >= 0 else -1, ip[MARGIN])
        nxt = (r + 1) % n_rep  # the next search starts after this one: round robin over the ready replicas
        if k_adm == k_adm and _queue_full(rp, r, k_adm):
            rq[i].replica = r
            rq[i].reason = REASON_REJECTED
            rq[i].finish = tau
            _retry(rq, i, tau, ry, u_retry, origin, attempt, conv, retries, ctr, i_trace)
            continue
        if c >= 0:
            last_replica[c] = r
        enqueue(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r, i)
    drain(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp)
    return ti - 1


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
    pk = prefix_keys(trace, eng.block_size)
    caching = eng.prefix_caching and pk is not None
    if caching:
        for name, values in (("pent", pk.prefix_entity), ("npb", pk.prefix_blocks), ("cent", pk.entity),
                             ("cap", pk.first_cap)):
            rq[name][:n] = values
    conv = np.full(cap if pk is not None else 0, -1, dtype=np.int64)
    if pk is not None:
        conv[:n] = pk.conversation
    last_replica = np.full(pk.n_conversations if pk is not None else 0, -1, dtype=np.int64)
    bs = eng.block_size
    ip, fp = engine_arrays(config, caching=caching)
    rp = new_replicas(n_rep, ip)
    code = ROUTER_CODES[config.router]
    u_route = uniform_floats(seed * ROUTER_SEED[0] + ROUTER_SEED[1],
                             2 * cap if code in (RANDOM, POWER_OF_TWO) else 0)
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
    ctr = np.zeros(8, dtype=np.int64)
    ctr[ROWS] = n
    ctr[MINUTE] = -1
    gauges = np.zeros((n_rep, n_grid + 1, 3))
    decisions = _run_policy(rq, n, rp, new_replicas(1, ip), np.zeros((n_rep, bs), dtype=np.int64),
                            new_cache(n_rep, ip), np.zeros((n_rep, bs + 1), dtype=np.int64),
                            np.empty((n_rep, HEAP_ROWS, HEAP_COLUMNS), dtype=np.int64),
                            np.empty((n_rep, eng.max_num_seqs + 1), dtype=np.int64),
                            np.empty((n_rep, eng.max_num_seqs + 1, 3), dtype=np.int64), gauges, ip, fp, code, u_route,
                            u_retry, float(dt), float(trace.duration_s), state, au, k, ry, origin, attempt, conv,
                            last_replica, tl, ctr)
    rows = int(ctr[ROWS])
    timeline = None
    if policy.autoscaler is not None:
        m = int(decisions)
        timeline = Timeline(t=tl[:m, 0].copy(), provisioned=tl[:m, 1].astype(np.int64),
                            ready=tl[:m, 2].astype(np.int64), signal=tl[:m, 3].copy(),
                            start=policy.autoscaler.start)
    return PolicySimulated(rows=rq[:rows], origin=origin[:rows], attempt=attempt[:rows], gauges=gauges,
                           timeline=timeline, retries_refused=int(ctr[REFUSED]), sim_seconds=time.perf_counter() - wall)

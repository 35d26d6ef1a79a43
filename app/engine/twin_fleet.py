"""The static fleet on the compiled core (:mod:`app.engine.twin_engine`): ``fleet.run_fleet`` without
restarts, drained, bit-identical to it on the twin's configuration — the economics grid's replay.

:func:`simulate` runs a trace and keeps a row per request, or, with a :class:`Counting`, counts each
finished request as it goes (:func:`breach_counts`, :func:`view_counts`) in a ring of rows, so that a
month of demand holds the requests in flight rather than tens of millions of rows;
:func:`run_fleet_compiled` gives the run as the Python fleet's ``FleetRun``. The router's random draws
are those of ``random.Random(seed * 31 + 17)``, as the Python fleet's (:func:`_router_picks`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.engine.closed import closed_loop
from app.engine.config import NO_EVENTS, FleetConfig
from app.engine.fleet import MODEL_LOAD_S, PROCESS_LEAD_S, Epoch, FleetRun
from app.engine.prefix import prefix_keys
from app.engine.trace import Trace
from app.engine.twin_engine import (
    FOLLOWED,
    HEADS,
    HEAP_COLUMNS,
    HEAP_ROWS,
    INF,
    LOOP,
    MARGIN,
    MASK,
    POWER_OF_TWO,
    RANDOM,
    READY,
    REL0,
    REL_N,
    ROUTER_CODES,
    STEP,
    advance,
    drain,
    engine_arrays,
    enqueue,
    free_rows,
    grown_heap,
    heap_pop,
    heap_push,
    new_cache,
    new_replicas,
    process,
    read_gauges,
    release_room,
    route,
    unsupported,
)


@njit(**LOOP)
def _new_row(rq, s, i, arrival, prompt, target, path, hits_max, keys):
    """Row ``s`` holds request ``i`` of the trace, as it is before its arrival (the Python engine's
    engine arrival, operation for operation: + frontend_s + per token x prompt, both 0 here), with its
    prefix-cache keys (``keys``: rows prefix entity, prefix blocks, entity, first cap; no column: no
    cache at work)."""
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
    rq[s].chain = 0
    rq[s].cached = 0
    if keys.shape[1] > 0:
        rq[s].pent = keys[0, i]
        rq[s].npb = keys[1, i]
        rq[s].cent = keys[2, i]
        rq[s].cap = keys[3, i]


@njit(**LOOP)
def _picks(router, n_rep, pick_a, pick_b, i):
    """Request i's draws for :func:`~app.engine.twin_engine.route` (``_router_picks``)."""
    if router == RANDOM:
        return pick_a[i], -1
    if router == POWER_OF_TWO and n_rep > 1:
        return pick_a[i], pick_b[i]
    return 0, -1


# nogil (here and in _run_closed): a grid's lane in the calling process runs its replays on a thread
# (app.economics.run.executors.Lanes) while the main thread hands the other lanes their jobs
@njit(cache=True, error_model="numpy", nogil=True)
def _run(rq, arrival, prompt, target, path, hits_max, keys, conv, last_replica, rp, ncls, kc, prefix, h, st_dec,
         st_pf, gauges, ip, fp, router, state, pick_a, pick_b, dt, horizon, at, sink_f, ttft_s, tpot_s, totals,
         windows, per_path, decode, counts):
    """The fleet loop of ``fleet.run_fleet`` without restarts, drained: route each request at its
    arrival (every replica advanced to that time first), read the gauges at each grid point. Every
    replica is READY in ``state``; the router's start rotates by one per request; ``last_replica``
    holds the replica of each conversation's latest turn (``conv``: request -> conversation, -1: none;
    empty when the trace has none).

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
            while not advance(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, tg):
                h = grown_heap(h)
            read_gauges(rp, prefix, ip, state, tg, gauges, gi)
            gi += 1
        while not advance(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, tau):
            h = grown_heap(h)
        if i == n:
            break
        s = i & ip[MASK]
        if rq[s].id >= 0:  # a counted run's ring: the row of an earlier request
            if rq[s].reason < 0:
                at[0], at[1], at[2] = i, gi, nxt
                return h, False
            _count_row(rq, s, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts)
        _new_row(rq, s, i, arrival, prompt, target, path, hits_max, keys)
        start = nxt
        nxt = (start + 1) % n_rep
        ia, ib = _picks(router, n_rep, pick_a, pick_b, i)
        c = conv[i] if conv.shape[0] > 0 else -1
        r = route(rp, state, n_rep, router, start, ia, ib, last_replica[c] if c >= 0 else -1, ip[MARGIN])
        if c >= 0:
            last_replica[c] = r
        enqueue(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r, s)
    h = drain(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp)
    at[0], at[1], at[2] = n, gi, nxt
    return h, True


# -- closed loop (app.engine.closed) -----------------------------------------------------------------
@njit(**LOOP)
def _ordered(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, x, follower, gap, pend, at):
    """The replicas' events up to x, the earliest first (the lower index at a tie), as the Python
    fleet's closed loop runs them: 0 when every replica's plan ends after x; 1 as soon as one released
    follow-ups (pushed on ``pend``, rows (send time, request, 0), its size in ``at[4]``: one may be
    sent before x); 2 when a
    replica stopped for a larger heap; 3 when a step finished more followed requests than the
    release buffer holds."""
    n_rep = rp.shape[0]
    while True:
        r, end = -1, INF
        for q in range(n_rep):
            if rp[q].plan_end < end:
                r, end = q, rp[q].plan_end
        if r < 0 or end > x:
            return 0
        ok = process(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r)
        n_rel = ip[REL_N]
        if n_rel > 0:
            if REL0 + n_rel > ip.shape[0]:
                return 3
            for k in range(n_rel):
                s = ip[REL0 + k]
                j = follower[rq[s].id]
                n = at[4]
                pend[0, n, 0] = rq[s].finish + gap[j]
                pend[0, n, 1] = j
                heap_push(pend, 0, n)
                at[4] = n + 1
            ip[REL_N] = 0
            return 1 if ok else 2
        if not ok:
            return 2


@njit(cache=True, error_model="numpy", nogil=True)
def _run_closed(rq, arrival, prompt, target, path, hits_max, keys, conv, last_replica, rp, ncls, kc, prefix, h,
                st_dec, st_pf, gauges, ip, fp, router, state, pick_a, pick_b, dt, at, follower, gap, scheduled, pend,
                sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts):
    """:func:`_run` with follow-ups in closed loop (``app.engine.closed``; the Python fleet's loop,
    drained): the next event is the earliest of the scheduled arrival ``scheduled[at[0]]``, the heap
    of released follow-ups (``pend``: rows (time, request, 0), as heapq orders (time, request); ``at[4]``
    of them) and the grid point
    ``at[1]`` (first at a tie); before it, the replicas' events run in time order, and a follow-up
    released on the way is considered at once. ``at``: scheduled position, grid point, router start,
    requests routed (the router's draws are the k-th routed request's), heap size. Returns (h, 0)
    drained, (h, 1) to enlarge the ring (as :func:`_run`), (h, 3) release buffer overflow."""
    n_rep, n_grid = rp.shape[0], gauges.shape[1] - 1
    n_sched = scheduled.shape[0]
    while True:
        p = at[0]
        if p < n_sched:
            i, t_a = scheduled[p], arrival[scheduled[p]] + 0.0
        else:
            i, t_a = arrival.shape[0], INF
        held = False
        if at[4] > 0 and (pend[0, 0, 0] < t_a or (pend[0, 0, 0] == t_a and pend[0, 0, 1] < i)):
            i, t_a, held = int(pend[0, 0, 1]), pend[0, 0, 0], True
        gi = at[1]
        tg = gi * dt if gi < n_grid else INF
        t = tg if tg < t_a else t_a
        status = _ordered(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, t, follower, gap, pend, at)
        if status == 2:
            h = grown_heap(h)
            continue
        if status == 3:
            return h, 3
        if status == 1:
            continue
        if t == INF:
            return h, 0
        if tg <= t_a:
            read_gauges(rp, prefix, ip, state, tg, gauges, gi)
            at[1] = gi + 1
            continue
        s = i & ip[MASK]
        if rq[s].id >= 0:  # a counted run's ring: the row of an earlier request
            if rq[s].reason < 0:
                return h, 1
            _count_row(rq, s, sink_f, ttft_s, tpot_s, totals, windows, per_path, decode, counts)
        _new_row(rq, s, i, arrival, prompt, target, path, hits_max, keys)
        if held:
            heap_pop(pend, 0, at[4])
            at[4] -= 1
            rq[s].arrival = t_a + 0.0
        else:
            at[0] = p + 1
        if follower[i] >= 0:
            rq[s].flags |= FOLLOWED
        start = at[2]
        at[2] = (start + 1) % n_rep
        ia, ib = _picks(router, n_rep, pick_a, pick_b, at[3])
        at[3] += 1
        c = conv[i] if conv.shape[0] > 0 else -1
        r = route(rp, state, n_rep, router, start, ia, ib, last_replica[c] if c >= 0 else -1, ip[MARGIN])
        if c >= 0:
            last_replica[c] = r
        enqueue(rq, rp, ncls, kc, h, prefix, st_dec, st_pf, ip, fp, r, s)


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
    """Draw requests start.. as ``router.sampled_positions`` does (``randrange(n)``; ``sample``) until
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
    """The positions the Python fleet draws for each request (random: ``randrange``; power of two:
    ``sample(order, 2)``), from the same Mersenne Twister stream as ``random.Random(seed)``: numpy's
    MT19937 started from its state yields the same 32-bit words."""
    code = ROUTER_CODES[router]
    if code not in (RANDOM, POWER_OF_TWO) or n_req == 0 or (code == POWER_OF_TWO and n_rep == 1):
        # no draw: _run never reads them
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
    cached: np.ndarray

    @property
    def n(self) -> int:
        return len(self.arrival)


@dataclass
class TwinCounters:
    """The gauges a scrape at each grid point reads (running, waiting, KV usage 0-1), as in
    ``StepCounters.gauges``; the compiled engine keeps no step-level histogram."""

    gauges: np.ndarray


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
    ``counts`` instead), the gauges per replica and grid point, its wall time, how many times a
    counted run enlarged its ring of rows, and the cached blocks each replica's allocations evicted."""

    rows: np.ndarray | None
    gauges: np.ndarray
    sim_seconds: float
    counts: Counts | None = None
    enlarged: int = 0
    evictions: np.ndarray | None = None


# a counted run's first ring of rows: a replica holds at most max_num_seqs requests running plus its
# queue, so 65,536 rows (about 6 MB) hold the requests in flight at once on any fleet short of an
# overload; a ring that meets a request still in flight doubles
RING_ROWS = 1 << 16


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
    for name in HEADS:
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
    pk = prefix_keys(trace, eng.block_size)
    loop = closed_loop(trace)
    caching = eng.prefix_caching and pk is not None
    keys = (np.stack([pk.prefix_entity, pk.prefix_blocks, pk.entity, pk.first_cap]) if caching
            else np.zeros((4, 0), dtype=np.int64))
    conv = pk.conversation if pk is not None else np.zeros(0, dtype=np.int64)
    last_replica = np.full(pk.n_conversations if pk is not None else 0, -1, dtype=np.int64)
    if counting is None:
        rq = free_rows(n)
        ip, fp = engine_arrays(config, caching=caching, closed=loop is not None)
        c = Counting(np.zeros(1), np.zeros(1), 0.0, 0.0, 1.0, 1, 0.0, 1.0, 1)  # never counted into
    else:
        if ring_rows < 2 or ring_rows & (ring_rows - 1):
            raise ValueError(f"ring_rows must be a power of two of at least 2, not {ring_rows}")
        rq = free_rows(ring_rows)
        ip, fp = engine_arrays(config, ring_rows - 1, caching, closed=loop is not None)
        c = counting
    n_paths = len(c.ttft_s)
    counts = Counts(totals=np.zeros((n_paths, TOTALS), dtype=np.int64),
                    windows=np.zeros((n_paths, 4, c.n_windows), dtype=np.int64),
                    per_path=np.zeros((n_paths, 4), dtype=np.int64), decode=np.zeros(2, dtype=np.int64),
                    counts=np.zeros((c.n_view, n_rep), dtype=np.int64))
    sink = (np.array([c.t_lo, c.t_hi, c.window_s, c.origin, c.view_window_s], dtype=np.float64),
            np.asarray(c.ttft_s, dtype=np.float64), np.asarray(c.tpot_s, dtype=np.float64), counts.totals,
            counts.windows, counts.per_path, counts.decode, counts.counts)
    rp = new_replicas(n_rep, ip)
    kc = new_cache(n_rep, ip)
    state = np.full(n_rep, READY, dtype=np.int64)
    bs = eng.block_size
    pick_a, pick_b = _router_picks(config.router, n_rep, n, seed * 31 + 17)
    gauges = np.zeros((n_rep, n_grid + 1, 3))
    ncls, prefix = np.zeros((n_rep, bs), dtype=np.int64), np.zeros((n_rep, bs + 1), dtype=np.int64)
    h = np.empty((n_rep, max(heap_rows, 1), HEAP_COLUMNS), dtype=np.int64)
    st_dec = np.empty((n_rep, eng.max_num_seqs + 1), dtype=np.int64)
    st_pf = np.empty((n_rep, eng.max_num_seqs + 1, 3), dtype=np.int64)
    enlarged = 0
    if loop is not None:
        at = np.zeros(5, dtype=np.int64)
        n_follow = n - len(loop.scheduled)
        pend = np.zeros((1, n_follow + 1, HEAP_COLUMNS))  # the released follow-ups: (send time, request, 0)
    else:
        at = np.zeros(3, dtype=np.int64)
    while True:
        if loop is None:
            h, done = _run(rq, trace.arrival_s, trace.prompt_tokens, trace.output_tokens, trace.path, trace.hits_max,
                           keys, conv, last_replica, rp, ncls, kc, prefix, h, st_dec, st_pf, gauges, ip, fp,
                           ROUTER_CODES[config.router], state, pick_a, pick_b, float(dt), float(trace.duration_s), at,
                           *sink)
        else:
            h, status = _run_closed(rq, trace.arrival_s, trace.prompt_tokens, trace.output_tokens, trace.path,
                                    trace.hits_max, keys, conv, last_replica, rp, ncls, kc, prefix, h, st_dec, st_pf,
                                    gauges, ip, fp, ROUTER_CODES[config.router], state, pick_a, pick_b, float(dt), at,
                                    loop.follower, loop.gap_s, loop.scheduled, pend, *sink)
            if status == 3:
                raise RuntimeError(f"the compiled twin's release buffer ({release_room(config)} rows) overflowed: "
                                   f"one step finished {int(ip[REL_N])} followed requests")
            done = status == 0
        if done:
            break
        rq = _enlarged(rq, rp, st_dec, st_pf, ip, sink)
        enlarged += 1
    evictions = rp["evictions"].copy()
    if counting is None:
        return Simulated(rows=rq, gauges=gauges, sim_seconds=time.perf_counter() - wall, evictions=evictions)
    _count_rows(rq, False, *sink)
    return Simulated(rows=None, gauges=gauges, sim_seconds=time.perf_counter() - wall, counts=counts,
                     enlarged=enlarged, evictions=evictions)


def run_fleet_compiled(trace: Trace, config: FleetConfig, seed: int = 0) -> FleetRun:
    """``fleet.run_fleet(trace, config, seed=seed, drain=True, metrics=False)`` for the twin's
    configuration (see :func:`unsupported`), compiled: the same requests, times and gauges."""
    sim = simulate(trace, config, seed)
    rq = sim.rows
    n, n_rep = len(rq), config.replicas
    # a follow-up sent in closed loop arrives when it is sent, not at its trace time
    sent = rq["arrival"] if trace.follows is not None else np.asarray(trace.arrival_s, dtype=float)
    reqs = TwinRequests(arrival=sent, eng_arrival=rq["arrival"],
                        sched_t=rq["sched"], first_t=rq["first"], finish_t=rq["finish"],
                        replica=rq["replica"].astype(np.int64), path=rq["path"].astype(np.int64),
                        prompt=rq["prompt"].astype(np.int64), gen=rq["gen"].astype(np.int64),
                        npre=rq["npre"].astype(np.int64), reason=rq["reason"].astype(np.int64),
                        lost=np.zeros(n, dtype=bool), cached=rq["cached"].astype(np.int64))
    epochs = [[Epoch(r, -PROCESS_LEAD_S + 37.0 * r, -PROCESS_LEAD_S + 37.0 * r + MODEL_LOAD_S)] for r in range(n_rep)]
    run = FleetRun(trace=trace, config=config, events=NO_EVENTS, seed=seed, reqs=reqs,  # type: ignore[arg-type]
                   counters=[TwinCounters(sim.gauges[r]) for r in range(n_rep)],  # type: ignore[misc]
                   epochs=epochs, grid_dt=config.scrape_interval_s, n_grid=sim.gauges.shape[1] - 1, drained=True)
    run.sim_seconds = sim.sim_seconds
    return run


@njit(**LOOP)
def _us(t):
    """Seconds as whole microseconds, rounded as ``outcomes.run_arrays`` rounds them."""
    return np.int64(np.rint(t * 1e6))


@njit(**LOOP)
def _counted_finish_us(rq, i, t_lo, t_hi):
    """Request i's finish in whole microseconds when it finished in [t_lo, t_hi), else -1."""
    if rq[i].reason < 0:
        return np.int64(-1)
    finish_us = _us(rq[i].finish)
    t = finish_us / 1e6
    return finish_us if t >= t_lo and t < t_hi else np.int64(-1)


# ``breach_counts``' totals per path: first tokens, TTFT breaches, finished, TPOT breaches, joint
# breaches, prompt tokens and cached tokens (of the requests counted by first token)
TOTALS = 7


@njit(**LOOP)
def _breach_row(rq, i, ttft_s, tpot_s, t_lo, t_hi, window_s, totals, windows):
    """Row i into :func:`breach_counts`' counts."""
    if rq[i].first != rq[i].first:  # no first token
        return
    n_windows = windows.shape[2]
    p = rq[i].path
    first_us = _us(rq[i].first)
    ttft_b = ttft_s[p] == ttft_s[p] and (first_us - _us(rq[i].arrival)) / 1_000_000 > ttft_s[p]
    t = first_us / 1e6
    if t >= t_lo and t < t_hi:
        totals[p, 0] += 1
        totals[p, 5] += rq[i].prompt
        totals[p, 6] += rq[i].cached
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
    Returns (per path: first tokens, TTFT breaches, finished, TPOT breaches, joint breaches, and of
    the requests counted by first token their prompt tokens and the tokens the prefix cache served;
    per path and window: first tokens, TTFT breaches, finished, joint breaches)."""
    n_paths = ttft_s.shape[0]
    totals = np.zeros((n_paths, TOTALS), dtype=np.int64)
    windows = np.zeros((n_paths, 4, n_windows), dtype=np.int64)
    for i in range(rq.shape[0]):
        _breach_row(rq, i, ttft_s, tpot_s, t_lo, t_hi, window_s, totals, windows)
    return totals, windows


@njit(**LOOP)
def _view_row(rq, i, t_lo, t_hi, window_s, origin, per_path, decode, counts):
    """Row i into :func:`view_counts`' counts."""
    if rq[i].first != rq[i].first:  # no first token
        return
    first_us = _us(rq[i].first)
    t = first_us / 1e6
    p = rq[i].path
    if t >= t_lo and t < t_hi:
        per_path[p, 0] += 1
        per_path[p, 1] += first_us - _us(rq[i].arrival)
        m = int(math.ceil(((t - t_lo + origin) - origin) / window_s - 1e-9)) - 1
        m = min(max(m, 0), counts.shape[0] - 1)
        counts[m, rq[i].replica] += 1
    finish_us = _counted_finish_us(rq, i, t_lo, t_hi)
    if finish_us < 0:
        return
    per_path[p, 2] += 1
    per_path[p, 3] += _us(rq[i].sched) - _us(rq[i].arrival)
    decode[0] += finish_us - first_us
    decode[1] += max(rq[i].gen - 1, 0)


@njit(cache=True, error_model="numpy")
def view_counts(rq, t_lo, t_hi, window_s, origin, n_windows, n_rep, n_paths):
    """What :func:`app.economics.predict.calibration.twin_view` reads of a run, in whole microseconds as
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

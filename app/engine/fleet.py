"""N engine replicas behind a router, driven by one global event loop.

Global events, in time order: arrivals (routed at once), scrape-grid points (gauges are read),
replica crashes and replicas becoming ready again. Before each of them every replica is advanced to
that time (:meth:`Replica.process` until its ``plan_end`` passes), so a router decision sees exactly
the requests that have finished by then.

A crash kills the engine process: its running, waiting and not-yet-admitted requests end as
``abort`` at the crash time in the per-request records, flagged ``lost`` — the metrics never count
them (a dead process reports nothing, and whatever it counted since the last scrape dies with it).
The client does not retry. The router skips a replica from its crash until it is ready again.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

import numpy as np

from app.engine.closed import closed_loop
from app.engine.config import NO_EVENTS, Events, FleetConfig
from app.engine.metrics_catalog import ITERATION_TOKEN_BUCKETS, ITL_BUCKETS
from app.engine.prefix import prefix_keys
from app.engine.replica import Replica, Requests, StepCounters
from app.engine.router import choose, sampled_positions
from app.engine.trace import Trace

PROCESS_LEAD_S = 900.0  # the day's processes started this long before the first simulated request
MODEL_LOAD_S = 75.0  # process start -> engine ready (metrics created)


@dataclass
class Epoch:
    """One life of a replica's process, in seconds since the trace origin."""

    replica: int
    process_start: float  # process_start_time_seconds
    created: float  # engine ready: metrics children created (their ``_created``)
    end: float = math.inf  # crash time


@dataclass
class FleetRun:
    """Everything a run produced: per-request outcomes, per-grid step counters, process lives."""

    trace: Trace
    config: FleetConfig
    events: Events
    seed: int
    reqs: Requests
    counters: list[StepCounters]
    epochs: list[list[Epoch]]
    grid_dt: float
    n_grid: int  # grid points 0..n_grid-1 at t = g * grid_dt; index n_grid collects later observations
    drained: bool
    sim_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def grid_times(self) -> np.ndarray:
        return np.arange(self.n_grid) * self.grid_dt

    def scraped(self, replica: int) -> np.ndarray:
        """Which grid points Prometheus stored for a replica: within the export, outside scrape gaps,
        while the replica was up (from engine ready to crash)."""
        t = self.grid_times()
        ok = t >= self.trace.warmup_s - 1e-9
        for gap in self.events.scrape_gaps:
            g0 = self.trace.warmup_s + gap.start_s
            ok &= ~((t >= g0) & (t < g0 + gap.duration_s))
        up = np.zeros(len(t), dtype=bool)
        for ep in self.epochs[replica]:
            up |= (t >= ep.created) & (t < ep.end)
        return ok & up


def run_fleet(trace: Trace, config: FleetConfig, events: Events = NO_EVENTS, seed: int = 0,
              drain: bool = False, metrics: bool = True) -> FleetRun:
    """Simulate ``trace`` on the fleet. Without ``drain`` the run stops at the end of the trace
    (requests still in flight have no finish); with it, replicas run until every request is done.
    Without ``metrics`` the ITL and iteration-token histograms of decode stretches stay empty (the
    request records are the same)."""
    import time

    wall = time.perf_counter()
    dt = config.scrape_interval_s
    horizon = trace.duration_s
    n_grid = int(math.floor(horizon / dt + 1e-9)) + 1
    n_paths = len(trace.spec.paths)
    keys = prefix_keys(trace, config.engine.block_size)
    reqs = Requests(trace.arrival_s, trace.path, trace.prompt_tokens, trace.output_tokens, trace.hits_max,
                    config.step, keys)
    counters = [StepCounters(n_grid + 1, n_paths, list(ITL_BUCKETS), list(ITERATION_TOKEN_BUCKETS))
                for _ in range(config.replicas)]
    reps = [Replica(r, config.engine, config.step, reqs, counters[r], 0.0, dt,
                    seed=seed * 1_000_003 + 7919 * r + 1, bulk=config.bulk, metrics=metrics)
            for r in range(config.replicas)]
    epochs = []
    for r in range(config.replicas):
        start = -PROCESS_LEAD_S + 37.0 * r  # a rollout restarted the replicas a little apart
        epochs.append([Epoch(r, start, start + MODEL_LOAD_S)])
    specials: list[tuple[float, int, int]] = []  # (time, kind 0 crash / 1 ready, replica)
    for rs in events.restarts:
        if not 0 <= rs.replica < config.replicas:
            raise ValueError(f"restart of replica {rs.replica}: the fleet has {config.replicas}")
        if rs.down_s < dt:
            raise ValueError(f"restart of replica {rs.replica}: down {rs.down_s} s, shorter than a scrape interval")
        t_crash = trace.warmup_s + rs.at_s
        specials += [(t_crash, 0, rs.replica), (t_crash + rs.down_s, 1, rs.replica)]
    specials.sort()
    draw = sampled_positions(random.Random(seed * 31 + 17))
    nxt = 0  # the router's rotating start: one further per request

    def advance(x: float) -> None:
        for rep in reps:
            while rep.plan_end <= x:
                rep.process()

    gi, si = 1, 0

    def run_until(tau: float) -> None:
        nonlocal gi, si
        while True:
            tg = gi * dt if gi < n_grid else math.inf
            ts = specials[si][0] if si < len(specials) else math.inf
            t = tg if tg <= ts else ts
            if t > tau:
                break
            advance(t)
            if tg <= ts:
                for r, rep in enumerate(reps):
                    counters[r].gauges[gi] = rep.peek_gauges(t) if rep.up else (0, 0, 0.0)
                gi += 1
            else:
                _, kind, r = specials[si]
                rep = reps[r]
                if kind == 0:
                    rep.crash(t)
                    epochs[r][-1].end = t
                else:
                    crash_t = epochs[r][-1].end
                    relaunch = next(x.relaunch_s for x in events.restarts
                                    if x.replica == r and abs(trace.warmup_s + x.at_s - crash_t) < 1e-6)
                    epochs[r].append(Epoch(r, crash_t + relaunch, t))
                    rep.reset(t)
                    rep.up = True
                si += 1
        advance(tau)

    arrival = reqs.arrival
    # the replica of each conversation's latest turn (the prefix-aware router's memory)
    conv = keys.conversation.tolist() if keys is not None else None
    last_replica = [-1] * (keys.n_conversations if keys is not None else 0)

    def send(i: int, tau: float) -> None:
        nonlocal nxt
        start, nxt = nxt, (nxt + 1) % config.replicas
        c = conv[i] if conv is not None else -1
        r = choose(config.router, reps, start, draw, last_replica[c] if c >= 0 else -1, config.affinity_margin)
        if c >= 0:
            last_replica[c] = r
        reps[r].enqueue(i, tau)

    loop = closed_loop(trace)
    if loop is None:
        for i in range(reqs.n):
            tau = arrival[i]
            run_until(tau)
            send(i, tau)
        run_until(horizon)
        if drain:
            for rep in reps:
                while rep.plan_end < math.inf:
                    rep.process()
    else:
        # app.engine.closed: one loop over the scheduled arrivals, the released follow-ups, the grid,
        # the restarts and the replicas' events in time order
        reqs.follower = follower = loop.follower.tolist()
        gap = loop.gap_s.tolist()
        scheduled = loop.scheduled.tolist()
        pending: list[tuple[float, int]] = []  # (send time, request)
        front, per_token = config.step.frontend_s, config.step.frontend_per_token_s
        limit = math.inf if drain else horizon  # not drained: nothing is sent, nothing runs, after the end
        p = 0

        def released() -> bool:
            """Queue the follow-ups of the requests that finished since the last call."""
            for i in reqs.released:
                heapq.heappush(pending, (reqs.finish_t[i] + gap[follower[i]], follower[i]))
            some = bool(reqs.released)
            reqs.released.clear()
            return some

        def ordered(x: float) -> bool:
            """The replicas' events up to x, the earliest first (the lower index at a tie); False as
            soon as one releases a follow-up, which may be sent before x."""
            while True:
                r, end = min(enumerate(rep.plan_end for rep in reps), key=lambda e: e[1])
                if end > x or end == math.inf:
                    return True
                reps[r].process()
                if released():
                    return False

        while True:
            nxt_s = (arrival[scheduled[p]], scheduled[p]) if p < len(scheduled) else (math.inf, reqs.n)
            t_a, i = min(nxt_s, pending[0]) if pending else nxt_s
            if t_a > limit:
                t_a = math.inf
            tg = gi * dt if gi < n_grid else math.inf
            ts = specials[si][0] if si < len(specials) and specials[si][0] <= horizon else math.inf
            t = min(tg, ts, t_a)
            if not ordered(min(t, limit)):
                continue
            if t == math.inf:
                break
            if tg <= ts and tg <= t_a:
                for r, rep in enumerate(reps):
                    counters[r].gauges[gi] = rep.peek_gauges(t) if rep.up else (0, 0, 0.0)
                gi += 1
            elif ts <= t_a:
                run_until(ts)  # the restarts at ts (every replica is there: it handles only those)
                released()  # a crash's lost requests release their follow-ups
            else:
                if p < len(scheduled) and i == scheduled[p]:
                    p += 1
                else:
                    heapq.heappop(pending)
                    arrival[i] = t_a
                    reqs.eng_arrival[i] = t_a + front + per_token * reqs.prompt[i]
                send(i, t_a)
    run = FleetRun(trace=trace, config=config, events=events, seed=seed, reqs=reqs, counters=counters,
                   epochs=epochs, grid_dt=dt, n_grid=n_grid, drained=drain)
    run.sim_seconds = time.perf_counter() - wall
    return run

"""The fleet loop of :mod:`app.engine.fleet` with a policy (:mod:`app.engine.policy`): an
autoscaler that starts and drains replicas, admission control that rejects at the door, client
retries that come back as new requests. The Python reference: the simulator runs it for the truth
(noisy steps, front-end delay and all the engine's mechanics), and the compiled copy
(:mod:`app.engine.twin_policy`) makes the same decisions bit for bit on the twin's configuration.

Events in time order: arrivals (trace requests and retries; at a tie the trace's first), scrape-grid
points, replicas becoming ready, autoscaler decisions (at a tie in that order). Random draws: the
router searches the ready replicas from the one after its last choice (so round robin stays round
over a changing set) and draws one (random) or two (power of two) uniform floats per routed request,
from ``Random(seed * 31 + 17)``; the clients' backoff one per retry, from ``Random(seed * 31 + 19)``.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from dataclasses import dataclass, field

import numpy as np

from app.engine.config import NO_EVENTS, FleetConfig
from app.engine.fleet import MODEL_LOAD_S, PROCESS_LEAD_S, Epoch, FleetRun
from app.engine.metrics_catalog import ITERATION_TOKEN_BUCKETS, ITL_BUCKETS
from app.engine.policy import REASON_REJECTED, RETRY_SEED, ROUTER_SEED, Policy, Timeline, backoff
from app.engine.prefix import prefix_keys
from app.engine.replica import Replica, Requests, StepCounters
from app.engine.router import choose, uniform_positions
from app.engine.trace import Trace

OFF, STARTING, READY, DRAINING = 0, 1, 2, 3


@dataclass
class PolicyRun(FleetRun):
    """A fleet run with a policy: also each request row's user request (``origin``: its trace row)
    and attempt number, and the autoscaler's timeline (None without one)."""

    origin: list[int] = field(default_factory=list)
    attempt: list[int] = field(default_factory=list)
    timeline: Timeline | None = None
    retries_refused: int = 0  # rejections not retried: the budget was spent (attempts left)


def _append(reqs: Requests, i: int, t: float, frontend_s: float, frontend_per_token_s: float) -> int:
    """A retry of request ``i`` arriving at ``t``: a new row with the same prompt and length."""
    j = reqs.n
    reqs.n += 1
    reqs.arrival.append(t)
    reqs.path.append(reqs.path[i])
    reqs.prompt.append(reqs.prompt[i])
    reqs.target.append(reqs.target[i])
    reqs.hits_max.append(reqs.hits_max[i])
    reqs.eng_arrival.append(t + frontend_s + frontend_per_token_s * reqs.prompt[i])
    reqs.replica.append(-1)
    for name in ("sched_t", "first_t", "finish_t", "last_tok"):
        getattr(reqs, name).append(math.nan)
    reqs.gen.append(0)
    reqs.to_prefill.append(reqs.prompt[i])
    reqs.npre.append(0)
    reqs.reason.append(-1)
    reqs.lost.append(False)
    reqs.cached.append(0)
    if reqs.keys is not None:  # the same tokens again: the same blocks (the rejected try cached none)
        for name in ("prefix_entity", "prefix_blocks", "entity", "first_cap", "conversation"):
            values = getattr(reqs, name)
            values.append(values[i])
        reqs.chain.append(0)
    return j


def run_policy_fleet(trace: Trace, config: FleetConfig, policy: Policy, seed: int = 0,
                     metrics: bool = False) -> PolicyRun:
    """Simulate ``trace`` on the fleet under ``policy``, drained to the end (every request finishes
    or is rejected). ``config.replicas`` is the fleet's size when there is no autoscaler."""
    wall = time.perf_counter()
    dt = config.scrape_interval_s
    horizon = trace.duration_s
    n_grid = int(math.floor(horizon / dt + 1e-9)) + 1
    n_paths = len(trace.spec.paths)
    pool = policy.pool(config.replicas)
    keys = prefix_keys(trace, config.engine.block_size)
    reqs = Requests(trace.arrival_s, trace.path, trace.prompt_tokens, trace.output_tokens, trace.hits_max,
                    config.step, keys)
    # the replica of each conversation's latest turn (the prefix-aware router's memory)
    last_replica = [-1] * (keys.n_conversations if keys is not None else 0)
    counters = [StepCounters(n_grid + 1, n_paths, list(ITL_BUCKETS), list(ITERATION_TOKEN_BUCKETS))
                for _ in range(pool)]
    reps = [Replica(r, config.engine, config.step, reqs, counters[r], 0.0, dt,
                    seed=seed * 1_000_003 + 7919 * r + 1, bulk=config.bulk, metrics=metrics)
            for r in range(pool)]
    state = [READY if r < policy.start(config.replicas) else OFF for r in range(pool)]
    for r, rep in enumerate(reps):
        rep.up = state[r] == READY
    ready_at = [math.inf] * pool
    epochs = [[Epoch(r, -PROCESS_LEAD_S + 37.0 * r, -PROCESS_LEAD_S + 37.0 * r + MODEL_LOAD_S)] for r in range(pool)]
    rng_route = random.Random(seed * ROUTER_SEED[0] + ROUTER_SEED[1])
    rng_retry = random.Random(seed * RETRY_SEED[0] + RETRY_SEED[1])
    auto, adm, rty = policy.autoscaler, policy.admission, policy.retry
    period = auto.period_s if auto else math.inf
    n_ticks = int(math.floor(horizon / period + 1e-9)) if auto else 0
    tl_t, tl_prov, tl_ready, tl_sig = [], [], [], []
    above_since = below_since = math.nan
    last_action = -math.inf
    origin = list(range(reqs.n))
    attempt = [1] * reqs.n
    retries: list[tuple[float, int]] = []  # (arrival, row)
    budget_minute, budget_used = -1, 0
    retries_made = 0  # against the ratio: retries so far over first attempts routed so far (i_trace)
    refused = 0

    def advance(x: float) -> None:
        for rep in reps:
            while rep.plan_end <= x:
                rep.process()

    def decide(t: float) -> None:
        nonlocal above_since, below_since, last_action
        for r in range(pool):
            if state[r] == DRAINING and reps[r].outstanding() == 0:
                state[r] = OFF
        ready = [r for r in range(pool) if state[r] == READY]
        total = 0
        for r in ready:
            rep = reps[r]
            total += len(rep.running) if auto.signal == "running" else len(rep.inbox) + len(rep.waiting)
        signal = total / len(ready)
        if signal >= auto.scale_out_at:
            below_since = math.nan
            if above_since != above_since:
                above_since = t
        elif signal <= auto.scale_in_at:
            above_since = math.nan
            if below_since != below_since:
                below_since = t
        else:
            above_since = below_since = math.nan
        can_act = t - last_action >= auto.cooldown_s
        starting = sum(1 for s in state if s == STARTING)
        wanted = len(ready) + starting
        if above_since == above_since and t - above_since >= auto.out_for_s and can_act and wanted < auto.max_replicas:
            for _ in range(min(auto.out_step, auto.max_replicas - wanted)):
                back = next((r for r in range(pool) if state[r] == DRAINING), -1)
                if back >= 0:  # still loaded: it serves again at once
                    state[back] = READY
                    reps[back].up = True
                else:
                    r = next(r for r in range(pool) if state[r] == OFF)
                    state[r] = STARTING
                    ready_at[r] = t + auto.cold_start_s
            last_action = t
            above_since = math.nan
        elif (below_since == below_since and t - below_since >= auto.in_for_s and can_act
              and starting == 0 and len(ready) > auto.min_replicas):
            r = ready[-1]
            state[r] = DRAINING
            reps[r].up = False
            last_action = t
            below_since = math.nan
        tl_t.append(t)
        tl_prov.append(sum(1 for s in state if s != OFF))
        tl_ready.append(sum(1 for s in state if s == READY))
        tl_sig.append(signal)

    gi, ti = 1, 1

    def run_until(tau: float) -> None:
        nonlocal gi, ti
        while True:
            tg = gi * dt if gi < n_grid else math.inf
            tr = min(ready_at)
            tp = ti * period if ti <= n_ticks else math.inf
            t = min(tg, tr, tp)
            if t > tau:
                break
            advance(t)
            if tg == t:
                for r, rep in enumerate(reps):
                    counters[r].gauges[gi] = rep.peek_gauges(t) if state[r] in (READY, DRAINING) else (0, 0, 0.0)
                gi += 1
            elif tr == t:
                r = ready_at.index(tr)
                ready_at[r] = math.inf
                state[r] = READY
                epochs[r].append(Epoch(r, t - auto.cold_start_s, t))
                reps[r].reset(t)
                reps[r].up = True
            else:
                decide(t)
                ti += 1
        advance(tau)

    arrival = reqs.arrival
    n_trace = reqs.n
    nxt = 0
    i_trace = 0
    while i_trace < n_trace or retries:
        if retries and (i_trace >= n_trace or retries[0][0] < arrival[i_trace]):
            tau, i = heapq.heappop(retries)
        else:
            tau, i = arrival[i_trace], i_trace
            i_trace += 1
        run_until(tau)
        start = nxt
        u1 = u2 = 0.0
        if config.router in ("random", "power_of_two"):
            u1 = rng_route.random()
            if config.router == "power_of_two":
                u2 = rng_route.random()
        c = reqs.conversation[i] if keys is not None else -1
        r = choose(config.router, reps, start, uniform_positions(u1, u2), last_replica[c] if c >= 0 else -1,
                   config.affinity_margin)
        nxt = (r + 1) % pool  # the next search starts after this one: round robin over the ready replicas
        rep = reps[r]
        if adm is not None:
            cap = int(adm.queue_factor * len(rep.running))
            if len(rep.inbox) + len(rep.waiting) >= (cap if cap > 1 else 1):
                reqs.replica[i] = r
                reqs.reason[i] = REASON_REJECTED
                reqs.finish_t[i] = tau
                if rty is not None and attempt[i] < rty.attempts:
                    minute = int(tau // 60.0)
                    if minute != budget_minute:
                        budget_minute, budget_used = minute, 0
                    if ((rty.budget_per_minute is None or budget_used < rty.budget_per_minute)
                            and (rty.ratio is None or retries_made < rty.ratio * i_trace)):
                        budget_used += 1
                        retries_made += 1
                        t_retry = tau + backoff(rty, attempt[i], rng_retry.random())
                        j = _append(reqs, i, t_retry, config.step.frontend_s, config.step.frontend_per_token_s)
                        origin.append(origin[i])
                        attempt.append(attempt[i] + 1)
                        heapq.heappush(retries, (t_retry, j))
                    else:
                        refused += 1
                continue
        if c >= 0:
            last_replica[c] = r
        rep.enqueue(i, tau)
    run_until(horizon)
    for rep in reps:
        while rep.plan_end < math.inf:
            rep.process()
    timeline = None
    if auto:
        timeline = Timeline(t=np.array(tl_t), provisioned=np.array(tl_prov, dtype=np.int64),
                            ready=np.array(tl_ready, dtype=np.int64), signal=np.array(tl_sig), start=auto.start)
    run = PolicyRun(trace=trace, config=config, events=NO_EVENTS, seed=seed, reqs=reqs, counters=counters,
                    epochs=epochs, grid_dt=dt, n_grid=n_grid, drained=True, origin=origin, attempt=attempt,
                    timeline=timeline, retries_refused=refused)
    run.sim_seconds = time.perf_counter() - wall
    return run

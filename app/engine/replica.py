"""One vLLM-V1-like engine replica, advanced event by event rather than step by step.

This is the step-level engine, in one place. Who runs it: the simulator (the bundled sample, and the
truth of the tests and of the accuracy harness, whose fleets vary its mechanics — step noise, front-end
delay, restarts, KV pools, batch laws — through ``EngineConfig``/``FleetConfig``); and, through its
compiled copy :mod:`app.engine.twin_engine` (bit-identical on the twin's configuration, tested),
the economics replay. The twin is configured by ``app.economics.run.replay.twin_config`` from the fitted
model alone, so a truth fleet's mechanics never reach it.

Scheduler (vLLM V1 ``Scheduler.schedule``, FCFS policy; automatic prefix caching as
:mod:`app.engine.prefix` describes, when ``EngineConfig.prefix_caching`` is on and the trace says what
its requests share: a waiting request then starts its prefill after the blocks it hits, and the counts
of blocks below are of distinct blocks):

1. RUNNING requests in admission order each ask for their next tokens: 1 for a decoding request, the
   rest of the prompt (capped by what is left of ``max_num_batched_tokens``) for a request still in
   prefill. KV blocks are allocated as tokens are computed (a request holds ceil(tokens / 16)
   blocks). When the pool cannot supply a block, the most recently admitted running request is
   preempted: its blocks are freed, it goes to the FRONT of the waiting queue and will recompute
   prompt + generated tokens as a fresh prefill. If it was the requester itself, the pass stops.
2. Only if nothing was preempted, WAITING requests are admitted in FCFS order while a batch slot
   (``max_num_seqs``), token budget and free KV blocks for the whole prompt remain
   (``scheduler_reserve_full_isl``, on by default; only the first chunk's blocks are allocated
   now); the first that does not fit blocks the queue.
3. Prefix cache: blocks come from the head of a free queue (evicting what they cached), go back to
   its tail when released; a decode stretch takes its blocks from the head in one go, so the cache's
   work stays proportional to the blocks allocated, not to the steps.

Step duration: :class:`app.engine.config.StepTime`.

Why it is fast: between events the batch is constant, so every decoding request gains one token per
step and the step time grows linearly with the step index (each step adds one token of context per
request). Such a *stretch* of k steps is advanced in closed form: a request's token count is
``S + q`` (``S`` = the replica's step counter, ``q`` fixed while it decodes), finishes sit in a heap
keyed by step number, KV block demand comes from counts of requests per ``q mod 16`` class, and the
inter-token-latency histogram gets the stretch's k step times, counted per bucket arithmetically.
Steps that admit, prefill, preempt or follow a skipped decode are simulated one by one. The
economics twin (no metrics, deterministic step time) also lets a stretch run past an arrival that
cannot be admitted before it ends anyway (a non-empty waiting queue, or a full batch).
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict, deque
from itertools import accumulate

import numpy as np

from app.engine import stretch
from app.engine.config import EngineConfig, StepTime
from app.engine.prefix import KEY_SHIFT, PrefixKeys

INF = math.inf
NAN = math.nan

# plan kinds: what the replica is doing until ``plan_end``
IDLE, WAKE, STRETCH, STEP = 0, 1, 2, 3

REASON_STOP, REASON_LENGTH, REASON_ABORT = 0, 1, 2


class Requests:
    """Per-request inputs and outcomes shared by the replicas, as Python lists (fast scalar access).

    Times are seconds since the trace origin; NaN until the event happens.
    """

    def __init__(self, arrival: np.ndarray, path: np.ndarray, prompt: np.ndarray, target: np.ndarray,
                 hits_max: np.ndarray, step: StepTime, keys: PrefixKeys | None = None):
        n = len(arrival)
        self.n = n
        self.arrival = arrival.tolist()
        self.path = path.tolist()
        self.prompt = prompt.tolist()
        self.target = target.tolist()
        self.hits_max = hits_max.tolist()
        self.eng_arrival = (arrival + step.frontend_s + step.frontend_per_token_s * prompt).tolist()
        self.replica = [-1] * n
        self.sched_t = [NAN] * n  # first time scheduled (vLLM's scheduled_ts)
        self.first_t = [NAN] * n
        self.finish_t = [NAN] * n
        self.gen = [0] * n  # tokens generated (materialised at preemption, crash and finish)
        self.to_prefill = prompt.tolist()  # tokens the next (re)prefill computes: prompt + gen
        self.npre = [0] * n
        self.reason = [-1] * n  # -1 in flight, else REASON_*
        self.lost = [False] * n  # in flight when its replica crashed: the engine never reported it
        self.last_tok = [NAN] * n  # last token time of a preempted request
        self.cached = [0] * n  # prompt tokens hit in the prefix cache at the first scheduling
        # the prefix cache's block keys (app.engine.prefix; None: nothing shared, no cache at work)
        self.keys = keys
        if keys is not None:
            self.prefix_entity = keys.prefix_entity.tolist()
            self.prefix_blocks = keys.prefix_blocks.tolist()
            self.entity = keys.entity.tolist()
            self.first_cap = keys.first_cap.tolist()
            self.conversation = keys.conversation.tolist()
            # leading blocks a request holds under their keys (~c: c of them, and no more to register)
            self.chain = [0] * n
        # closed loop (app.engine.closed): the request that follows each (None: none does), and the
        # finished ones whose follower the fleet has not sent yet, in finish order
        self.follower: list[int] | None = None
        self.released: list[int] = []


class StepCounters:
    """Step-level observations of one replica per scrape-grid interval (index g holds what happened in
    (grid[g-1], grid[g]]): inter-token latencies and generated tokens per path, tokens per step,
    preemptions, prefix-cache queries and hits (tokens, of requests scheduled for the first time: the
    step that scheduled them ended in the interval), and the gauges a scrape at grid[g] reads."""

    def __init__(self, n_grid: int, n_paths: int, itl_bounds: list[float], iter_bounds: list[float]):
        self.itl_bounds = itl_bounds
        self.iter_bounds = iter_bounds
        self.itl = np.zeros((n_grid, n_paths, len(itl_bounds) + 1))
        self.itl_sum = np.zeros((n_grid, n_paths))
        self.gen_tokens = np.zeros((n_grid, n_paths))
        self.iter = np.zeros((n_grid, len(iter_bounds) + 1))
        self.iter_sum = np.zeros(n_grid)
        self.preemptions = np.zeros(n_grid)
        self.prefix_queries = np.zeros(n_grid)
        self.prefix_hits = np.zeros(n_grid)
        self.gauges = np.zeros((n_grid, 3))  # running, waiting, kv usage (0-1)


class Replica:
    """One engine. The fleet calls :meth:`enqueue` at routing time and :meth:`process` whenever global
    time reaches :attr:`plan_end`; everything else is internal."""

    def __init__(self, index: int, engine: EngineConfig, step: StepTime, reqs: Requests,
                 counters: StepCounters, grid0: float, grid_dt: float, seed: int, bulk: bool = True,
                 metrics: bool = True):
        self.index = index
        # without metrics a stretch of decode steps is applied at once, not counted scrape by scrape
        # into the ITL and iteration histograms (the economics twin reads only the request times)
        self.metrics = metrics
        self.keep_stretch = not metrics and step.noise_sigma == 0
        self.reqs = reqs
        self.counters = counters
        self.grid0, self.grid_dt = grid0, grid_dt
        self.n_grid = counters.gauges.shape[0]
        self.bs = engine.block_size
        self.nb = engine.num_gpu_blocks
        self.max_seqs = engine.max_num_seqs
        self.budget = engine.max_num_batched_tokens
        self.reserve_full = engine.reserve_full_prompt
        self.wm = int(engine.admission_watermark * engine.num_gpu_blocks)  # blocks an admission leaves free
        self.a, self.b, self.b2 = step.base_s, step.per_decode_seq_s, step.per_decode_seq_sq_s
        self.b2u = step.per_decode_seq_sq_until if step.per_decode_seq_sq_until > 0 else math.inf
        self.c, self.d, self.e = step.per_prefill_token_s, step.per_context_token_s, step.per_prefill_pair_s
        self.sigma = step.noise_sigma
        self.rng = random.Random(seed)
        self.bulk = bulk
        self.up = True
        # the prefix cache works only when the trace says what requests share (app.engine.prefix)
        self.caching = engine.prefix_caching and reqs.keys is not None
        self.evictions = 0  # cached blocks whose key allocation evicted (since the start)
        self.reset(0.0)

    # -- state ---------------------------------------------------------------------------------------
    def reset(self, t: float) -> None:
        """A fresh engine at time ``t`` (start, or ready after a restart)."""
        self.S = 0  # steps executed
        self.T = t  # end of the last executed step (or wake time)
        self.used = 0  # KV blocks allocated
        self.running: dict[int, None] = {}  # admission order; popitem() = most recently admitted
        self.waiting: deque[int] = deque()
        self.inbox: list[tuple[float, int]] = []  # (engine arrival, id) sorted, not yet seen by the scheduler
        self.dec: dict[int, int] = {}  # decoding request -> q (its token count is S + q)
        self.ncls = [0] * self.bs  # decoding requests per class (q - 1) mod block_size
        self.ndec_path = [0] * self.counters.itl.shape[1]
        self.sum_q = 0
        self.pf: dict[int, int] = {}  # running request in prefill -> tokens computed
        self.heap: list[tuple[int, int, int]] = []  # (finish step, id, q at push)
        self.lag: dict[int, float] = {}  # decoding requests skipped by the last step -> last token time
        self.plan = IDLE
        self.plan_end = INF
        self.gauges = (0, 0, 0.0)
        # stretch parameters
        self.k = 0
        self.s_A = self.s_delta = self.s_f = 0.0
        self.s_prefix: list[int] = []
        self.s_n = 0
        # detailed step outcome, applied at plan_end
        self.st_dec: list[int] | None = None
        self.st_pf: list[tuple[int, int, int]] = []
        self.st_dur = 0.0
        self.st_tokens = 0
        self.st_preempt = 0
        if self.caching:
            # key -> references of the cached block (0: it is in the free queue); the free queue in
            # order, head first: a cached block's key, or a negative token for an empty block
            self.kv_ref: dict[int, int] = {}
            self.freeq: OrderedDict[int, None] = OrderedDict.fromkeys(range(-1, -self.nb - 1, -1))
            self.empty_token = -self.nb - 1

    def outstanding(self) -> int:
        """Requests routed here and not finished (what a least-outstanding router counts)."""
        return len(self.inbox) + len(self.waiting) + len(self.running)

    def _grid_index(self, t: float) -> int:
        g = math.ceil((t - self.grid0) / self.grid_dt - 1e-9)
        return 0 if g < 0 else (g if g < self.n_grid else self.n_grid - 1)

    def _sq(self, n: int) -> float:
        """The batch-squared term of a step of ``n`` decoding requests (``StepTime.per_decode_seq_sq_until``)."""
        return self.b2 * n * n if n <= self.b2u else self.b2 * self.b2u * (2 * n - self.b2u)

    def _noise(self) -> float:
        return self.rng.lognormvariate(0.0, self.sigma) if self.sigma > 0 else 1.0

    # -- entry points --------------------------------------------------------------------------------
    def enqueue(self, i: int, now: float) -> None:
        """Request ``i`` routed here at ``now``; the engine sees it at its engine arrival time."""
        t_eng = self.reqs.eng_arrival[i]
        self.reqs.replica[i] = self.index
        # tokenization time differs per prompt, so engine arrivals can overtake each other
        insort(self.inbox, (t_eng, i))
        if self.plan == IDLE or (self.plan == WAKE and t_eng < self.plan_end):
            self.plan, self.plan_end = WAKE, t_eng
        elif self.plan == STRETCH and not (self.keep_stretch and (self.waiting or len(self.running) >= self.max_seqs)):
            # steps that start before the engine sees the request were decided without it.
            # keep_stretch: a request that joins a waiting queue (whose head could not be admitted)
            # or finds the batch full is not admitted before the stretch ends anyway, so the stretch
            # stands (otherwise it is cut: the scraped waiting gauge counts the request, and a
            # noisy step time draws its noise per stretch)
            k_cut = self._first_tau_at_least(t_eng - self.T)
            if k_cut < self.k:
                if k_cut == 0:
                    self._plan()
                else:
                    self.k = k_cut
                    self.plan_end = self.T + self._tau(k_cut)

    def process(self) -> None:
        """Global time reached ``plan_end``: apply the plan and make the next one."""
        if self.plan == STRETCH:
            self._apply_stretch(self.k)
        elif self.plan == STEP:
            self._complete_step()
        elif self.plan == WAKE:
            self.T = self.plan_end
        self._plan()

    def peek_gauges(self, t: float) -> tuple[int, int, float]:
        """running, waiting, KV usage as the last step that ended at or before ``t`` left them."""
        if self.plan == STRETCH and t > self.T:
            m = self._steps_ending_by(t - self.T)
            if m > 0:
                return len(self.running), len(self.waiting), (self.used + self._cum(m)) / self.nb
        return self.gauges

    def crash(self, t: float) -> list[int]:
        """The process dies at ``t``: apply the steps that ended before it, return the lost requests."""
        if self.plan == STRETCH and t > self.T:
            m = min(self._steps_ending_by(t - self.T), self.k)
            if m > 0:
                self._apply_stretch(m)
        reqs = self.reqs
        lost = list(self.running) + list(self.waiting) + [i for _, i in self.inbox]
        for i in lost:
            q = self.dec.get(i)
            if q is not None:
                reqs.gen[i] = self.S + q - reqs.prompt[i]
            reqs.finish_t[i] = t
            reqs.reason[i] = REASON_ABORT
            reqs.lost[i] = True
            if reqs.follower is not None and reqs.follower[i] >= 0:
                reqs.released.append(i)
        self.up = False
        self.reset(t)
        return lost

    # -- stretch arithmetic --------------------------------------------------------------------------
    # step j of a stretch lasts f * (A + delta * j); tau(k) = time of its first k steps
    def _tau(self, k: int) -> float:
        return self.s_f * (k * self.s_A + self.s_delta * k * (k - 1) * 0.5)

    def _first_tau_at_least(self, y: float) -> int:
        """Smallest k >= 0 with tau(k) >= y (= number of steps that start before T + y)."""
        return stretch.first_tau_at_least(self.s_f, self.s_A, self.s_delta, y)

    def _steps_ending_by(self, y: float) -> int:
        """Largest m >= 0 with tau(m) <= y (= number of steps that end by T + y)."""
        return stretch.steps_ending_by(self.s_f, self.s_A, self.s_delta, y)

    def _cum(self, k: int) -> int:
        """KV blocks the first k steps of the stretch allocate."""
        return (k // self.bs) * self.s_n + self.s_prefix[k % self.bs]

    # -- planning ------------------------------------------------------------------------------------
    def _plan(self) -> None:
        reqs = self.reqs
        T = self.T
        inbox, waiting = self.inbox, self.waiting
        while inbox and inbox[0][0] <= T:
            waiting.append(inbox.pop(0)[1])
        if not self.running and not waiting:
            if inbox:
                self.plan, self.plan_end = WAKE, inbox[0][0]
            else:
                self.plan, self.plan_end = IDLE, INF
            return
        if self.pf or self.lag or not self.dec:
            self._schedule_step()
            return
        if waiting and len(self.running) < self.max_seqs:
            head = waiting[0]
            room = self.budget - len(self.dec)
            first = reqs.to_prefill[head]
            if self.caching:
                # what _schedule_step's admission asks of the head, its hit deducted
                h, ev = self._lookup(head, first)
                comp = h * self.bs
                if not self.reserve_full and first - comp > room:
                    first = comp + room
                need = -(-first // self.bs) - h + ev
            else:
                if not self.reserve_full and first > room:
                    first = room
                need = -(-first // self.bs)
            if need <= self.nb - self.used - self.wm:
                self._schedule_step()
                return
        self._plan_stretch()

    def _plan_stretch(self) -> None:
        """All running requests decode and nothing can be admitted: plan k identical-shape steps."""
        S, bs = self.S, self.bs
        heap, dec = self.heap, self.dec
        while heap:
            fs, i, q = heap[0]
            if dec.get(i) == q and fs >= S:
                break
            heapq.heappop(heap)
        n = len(dec)
        k = heap[0][0] - S
        # KV: step j allocates one block per request of class (-(S + j)) mod bs
        # classes (-S) mod bs, (-S - 1) mod bs, ...: ncls read backwards from (-S) mod bs, wrapping
        ncls = self.ncls
        start = (-S) % bs
        prefix = [0, *accumulate(ncls[start::-1] + ncls[:start:-1])]
        free = self.nb - self.used
        cycles, rest = divmod(free, n)
        r = bisect_right(prefix, rest, 1, bs + 1) - 1
        k_kv = cycles * bs + r
        if k_kv == 0:
            self._schedule_step()  # the next step preempts
            return
        if k_kv < k:
            k = k_kv
        self.s_prefix, self.s_n = prefix, n
        self.s_A = self.a + self.b * n + self._sq(n) + self.d * (n * S + self.sum_q)
        self.s_delta = self.d * n
        self.s_f = self._noise()
        if self.inbox:
            k_in = self._first_tau_at_least(self.inbox[0][0] - self.T)
            if k_in < k:
                k = k_in
        if not self.bulk:
            k = 1
        self.k = max(k, 1)
        self.plan = STRETCH
        self.plan_end = self.T + self._tau(self.k)

    def _apply_stretch(self, k: int) -> None:
        """Execute the first k steps of the planned stretch."""
        c = self.counters
        T0, S0 = self.T, self.S
        A, dl, f = self.s_A, self.s_delta, self.s_f
        bounds = c.itl_bounds
        nb_itl = len(bounds)
        npath = self.ndec_path
        n = self.s_n
        ib = bisect_left(c.iter_bounds, n)
        j = 0 if self.metrics else k
        while j < k:
            g = self._grid_index(T0 + self._tau(j + 1))
            grid_t = self.grid0 + g * self.grid_dt
            m = k if g == self.n_grid - 1 else min(k, self._steps_ending_by(grid_t - T0))
            if m <= j:
                m = j + 1
            cnt = m - j
            # step durations f*(A + dl*x) for x in [j, m): count them per ITL bucket
            v_lo, v_hi = f * (A + dl * j), f * (A + dl * (m - 1))
            b_lo, b_hi = bisect_left(bounds, v_lo), bisect_left(bounds, v_hi)
            if b_lo == b_hi:
                per_bucket = ((b_lo, cnt),)
            else:
                per_bucket = []
                done = j
                for b in range(b_lo, b_hi):
                    # steps x with f*(A + dl*x) <= bounds[b]
                    upto = min(m, max(done, math.floor((bounds[b] / f - A) / dl + 1e-9) + 1)) if dl > 0 else m
                    if upto > done:
                        per_bucket.append((b, upto - done))
                        done = upto
                if m > done:
                    per_bucket.append((b_hi if b_hi <= nb_itl else nb_itl, m - done))
            total_time = f * (cnt * A + dl * (j + m - 1) * cnt * 0.5)
            for p, np_ in enumerate(npath):
                if np_:
                    for b, cb in per_bucket:
                        c.itl[g, p, b] += np_ * cb
                    c.itl_sum[g, p] += np_ * total_time
                    c.gen_tokens[g, p] += np_ * cnt
            c.iter[g, ib] += cnt
            c.iter_sum[g] += n * cnt
            j = m
        if self.caching:
            self._allocate(self._cum(k))
        self.used += self._cum(k)
        self.S = S0 + k
        self.T = T0 + self._tau(k)
        self._pop_finishes()
        self.gauges = (len(self.running), len(self.waiting), self.used / self.nb)

    # -- prefix cache (app.engine.prefix) ------------------------------------------------------------
    def _key(self, i: int, j: int) -> int:
        """The key of request i's block j: its shared prefix's, else its conversation's or its own."""
        reqs = self.reqs
        return ((reqs.prefix_entity[i] if j < reqs.prefix_blocks[i] else reqs.entity[i]) << KEY_SHIFT) | j

    def _lookup(self, i: int, tot: int) -> tuple[int, int]:
        """Request i's hit when it is admitted to compute ``tot`` tokens: its leading cached blocks (at
        most (tot - 1) // block_size, and on its first scheduling at most its ``first_cap``) and how
        many of them no request holds (they leave the free queue). Changes nothing."""
        reqs = self.reqs
        most = (tot - 1) // self.bs
        if reqs.sched_t[i] != reqs.sched_t[i] and reqs.first_cap[i] < most:  # NaN: never scheduled
            most = reqs.first_cap[i]
        kv_ref = self.kv_ref
        h = ev = 0
        while h < most:
            ref = kv_ref.get(self._key(i, h))
            if ref is None:
                break
            if ref == 0:
                ev += 1
            h += 1
        return h, ev

    def _take(self, i: int, h: int) -> None:
        """Request i holds its h hit blocks: one more reference each; an unreferenced one leaves the
        free queue."""
        kv_ref, freeq = self.kv_ref, self.freeq
        for j in range(h):
            key = self._key(i, j)
            ref = kv_ref[key]
            if ref == 0:
                del freeq[key]
            kv_ref[key] = ref + 1
        self.reqs.chain[i] = h

    def _allocate(self, n: int) -> None:
        """n blocks from the free queue's head; a cached one loses its key (evicted)."""
        freeq, kv_ref = self.freeq, self.kv_ref
        for _ in range(n):
            key = freeq.popitem(last=False)[0]
            if key >= 0:
                del kv_ref[key]
                self.evictions += 1

    def _register(self, i: int, full: int) -> None:
        """Request i's blocks below ``full`` cached under their keys, from its first unkeyed one; a key
        already cached stops it for good (the first copy keeps the key; app.engine.prefix)."""
        reqs = self.reqs
        c = reqs.chain[i]
        if c < 0 or c >= full:
            return
        kv_ref = self.kv_ref
        while c < full:
            key = self._key(i, c)
            if key in kv_ref:
                reqs.chain[i] = ~c
                return
            kv_ref[key] = 1
            c += 1
        reqs.chain[i] = c

    def _release(self, i: int, blocks: int, computed: int) -> int:
        """Request i releases its ``blocks`` (holding ``computed`` tokens' KV; finish or preemption): its
        full blocks of generated tokens are cached first, then every block goes, last first, onto the
        free queue's tail unless another request still holds it. Returns the blocks that became free."""
        self._register(i, computed // self.bs)
        reqs = self.reqs
        c = reqs.chain[i]
        if c < 0:
            c = ~c
        kv_ref, freeq = self.kv_ref, self.freeq
        freed = 0
        for j in range(blocks - 1, -1, -1):
            if j < c:
                key = self._key(i, j)
                ref = kv_ref[key] - 1
                kv_ref[key] = ref
                if ref:
                    continue
                freeq[key] = None
            else:
                freeq[self.empty_token] = None
                self.empty_token -= 1
            freed += 1
        reqs.chain[i] = 0
        return freed

    # -- detailed steps ------------------------------------------------------------------------------
    def _schedule_step(self) -> None:
        """Schedule one step at T (admissions and preemptions happen now), apply it at plan_end."""
        reqs = self.reqs
        T, S, bs = self.T, self.S, self.bs
        budget = self.budget
        free = self.nb - self.used
        dec, pf, running = self.dec, self.pf, self.running
        to_prefill = reqs.to_prefill
        n_dec = len(dec)
        sched_pf: list[tuple[int, int, int]] = []
        preempted = 0
        # fast path: every running request gets all it asks for, so admission order is irrelevant
        pf_tokens = pf_blocks = 0
        for i, comp in pf.items():
            rem = to_prefill[i] - comp
            pf_tokens += rem
            pf_blocks += -(-(comp + rem) // bs) + (comp // -bs)
        dec_blocks = self.ncls[(-S) % bs]
        if n_dec + pf_tokens <= budget and dec_blocks + pf_blocks <= free:
            sched_dec = None  # all decoders
            for i, comp in pf.items():
                sched_pf.append((i, to_prefill[i] - comp, comp))
            budget -= n_dec + pf_tokens
            free -= dec_blocks + pf_blocks
            n_dec_sched = n_dec
            dec_ctx = n_dec * S + self.sum_q
            if self.caching:
                self._allocate(dec_blocks + pf_blocks)
                for i, _, _ in sched_pf:
                    self._register(i, to_prefill[i] // bs)
        else:
            sched_dec, budget, free, preempted = self._schedule_running_ordered(sched_pf, budget, free)
            n_dec_sched = len(sched_dec)
            dec_ctx = sum(S + dec[i] for i in sched_dec)
        queried: list[tuple[int, int]] = []  # (prompt tokens, tokens hit) of requests scheduled first now
        if not preempted:
            waiting, sched_t = self.waiting, reqs.sched_t
            max_seqs, reserve_full, wm, caching = self.max_seqs, self.reserve_full, self.wm, self.caching
            h = ev = comp = 0  # without the cache: no hit
            while waiting and budget > 0 and len(running) < max_seqs:
                i = waiting[0]
                tot = to_prefill[i]
                if caching:
                    h, ev = self._lookup(i, tot)
                    comp = h * bs
                rest = tot - comp
                ntok = rest if rest < budget else budget
                nblk = -(-(comp + ntok) // bs) - h
                # the whole prompt's blocks (or the chunk's), those hit deducted, plus the hit blocks
                # that leave the free queue
                if (-(-tot // bs) - h if reserve_full else nblk) + ev > free - wm:
                    break
                waiting.popleft()
                running[i] = None
                pf[i] = comp
                if sched_t[i] != sched_t[i]:  # NaN: first time scheduled
                    sched_t[i] = T
                    if caching:
                        reqs.cached[i] = comp
                        queried.append((tot, comp))
                if caching:
                    self._take(i, h)
                    self._allocate(nblk)
                    self._register(i, (comp + ntok) // bs)
                sched_pf.append((i, ntok, comp))
                budget -= ntok
                free -= nblk + ev
        self.used = self.nb - free
        pf_tok = pf_ctx = 0
        pairs = 0.0
        for _, ntok, comp in sched_pf:
            pf_tok += ntok
            pf_ctx += comp + ntok
            pairs += ntok * (comp + ntok * 0.5)
        if n_dec_sched == 0 and pf_tok == 0:
            dur = 1e-3  # an empty step (everything preempted): the engine loops and reschedules
        else:
            dur = self._noise() * (self.a + self.b * n_dec_sched + self._sq(n_dec_sched)
                                   + self.c * pf_tok
                                   + self.d * (dec_ctx + pf_ctx) + self.e * pairs)
        self.st_dec, self.st_pf, self.st_dur = sched_dec, sched_pf, dur
        self.st_tokens, self.st_preempt = n_dec_sched + pf_tok, preempted
        self.plan, self.plan_end = STEP, T + dur
        if queried:  # vLLM publishes the scheduler's counters with the step's output
            g = self._grid_index(T + dur)
            c = self.counters
            for tot, hit in queried:
                c.prefix_queries[g] += tot
                c.prefix_hits[g] += hit

    def _schedule_running_ordered(self, sched_pf: list[tuple[int, int, int]], budget: int,
                                  free: int) -> tuple[list[int], int, int, int]:
        """vLLM's RUNNING pass in admission order, preempting from the tail when KV runs out."""
        reqs = self.reqs
        S, bs = self.S, self.bs
        dec, pf, running = self.dec, self.pf, self.running
        need_cls = (-S) % bs
        sched_dec: list[int] = []
        preempted = 0
        for i in list(running):
            if i not in running or budget <= 0:
                break  # preempted (the tail) or no budget left
            q = dec.get(i)
            if q is not None:
                ntok = 1
                nblk = 1 if (q - 1) % bs == need_cls else 0
                comp = 0
            else:
                comp = pf[i]
                rem = reqs.to_prefill[i] - comp
                ntok = rem if rem < budget else budget
                nblk = -(-(comp + ntok) // bs) + (comp // -bs)
            ok = True
            while nblk > free:
                victim = next(reversed(running))
                free += self._preempt(victim)
                preempted += 1
                if victim == i:
                    ok = False
                    break
            if not ok:
                break
            free -= nblk
            budget -= ntok
            if self.caching:
                self._allocate(nblk)
                if q is None:
                    self._register(i, (comp + ntok) // bs)
            if q is not None:
                sched_dec.append(i)
            else:
                sched_pf.append((i, ntok, comp))
        return sched_dec, budget, free, preempted

    def _preempt(self, i: int) -> int:
        """Free request i's blocks and put it at the front of the waiting queue; return the blocks that
        became free (with the prefix cache, not those another running request still holds)."""
        reqs = self.reqs
        del self.running[i]
        q = self.dec.pop(i, None)
        if q is not None:
            h = self.S + q
            comp = h - 1  # tokens whose KV is computed (the last sampled one has none yet)
            self._drop_decoder(i, q)
            reqs.gen[i] = h - reqs.prompt[i]
            reqs.last_tok[i] = self.lag.pop(i, self.T)
        else:
            comp = self.pf.pop(i)
        blocks = -(-comp // self.bs)
        reqs.to_prefill[i] = reqs.prompt[i] + reqs.gen[i]
        reqs.npre[i] += 1
        self.waiting.appendleft(i)
        return self._release(i, blocks, comp) if self.caching else blocks

    def _drop_decoder(self, i: int, q: int) -> None:
        self.ncls[(q - 1) % self.bs] -= 1
        self.sum_q -= q
        self.ndec_path[self.reqs.path[i]] -= 1

    def _add_decoder(self, i: int, q: int) -> None:
        self.dec[i] = q
        self.ncls[(q - 1) % self.bs] += 1
        self.sum_q += q
        self.ndec_path[self.reqs.path[i]] += 1
        r = self.reqs
        heapq.heappush(self.heap, (r.target[i] + r.prompt[i] - q, i, q))

    def _complete_step(self) -> None:
        """Apply the scheduled step at its end time: tokens, first tokens, finishes, observations."""
        if not self.metrics:
            self._complete_step_times_only()
            return
        reqs, c = self.reqs, self.counters
        T0 = self.T
        T1 = self.plan_end
        dur = self.st_dur
        S1 = self.S + 1
        g = self._grid_index(T1)
        bounds = c.itl_bounds
        lag = self.lag
        path = reqs.path
        itl_g, itl_sum_g, gen_g = c.itl[g], c.itl_sum[g], c.gen_tokens[g]
        synced = list(self.ndec_path)
        if self.st_dec is None:  # every decoder ran
            for i, t_last in lag.items():
                p = path[i]
                synced[p] -= 1
                v = T1 - t_last
                itl_g[p, bisect_left(bounds, v)] += 1
                itl_sum_g[p] += v
                gen_g[p] += 1
            lag.clear()
        else:
            ran = set(self.st_dec)
            synced = [0] * len(synced)
            for i in self.st_dec:
                p = path[i]
                t_last = lag.pop(i, None)
                if t_last is None:
                    synced[p] += 1
                else:
                    v = T1 - t_last
                    itl_g[p, bisect_left(bounds, v)] += 1
                    itl_sum_g[p] += v
                    gen_g[p] += 1
            self._keep_skipped(ran, T0)
        b_dur = bisect_left(bounds, dur)
        for p, cnt in enumerate(synced):
            if cnt:
                itl_g[p, b_dur] += cnt
                itl_sum_g[p] += cnt * dur
                gen_g[p] += cnt
        # vLLM V1's iteration_tokens_total: per step that emitted tokens, the tokens generated plus the
        # whole prompt of each request whose first prefill ends in it (not the step's prefill chunks)
        iteration = self.st_tokens - sum(ntok for _, ntok, _ in self.st_pf)  # one token per decoder
        for i, g_old in self._complete_prefills(T1, S1):
            p = path[i]
            if g_old:  # the token after a preemption's re-prefill: an inter-token gap
                v = T1 - reqs.last_tok[i]
                itl_g[p, bisect_left(bounds, v)] += 1
                itl_sum_g[p] += v
            else:
                iteration += reqs.prompt[i]
            iteration += 1
            gen_g[p] += 1
        if iteration:
            c.iter[g, bisect_left(c.iter_bounds, iteration)] += 1
            c.iter_sum[g] += iteration
        if self.st_preempt:
            c.preemptions[g] += self.st_preempt
        self.S, self.T = S1, T1
        self._pop_finishes()
        self.gauges = (len(self.running), len(self.waiting), self.used / self.nb)

    def _keep_skipped(self, ran: set[int], t_last: float) -> None:
        """Decoders the step skipped keep their token count (q shifts so that S + q stays constant)
        and remember their last token time."""
        dec, lag = self.dec, self.lag
        for i in [i for i in dec if i not in ran]:
            q = dec[i]
            self._drop_decoder(i, q)
            self._add_decoder(i, q - 1)
            lag.setdefault(i, t_last)

    def _complete_step_times_only(self) -> None:
        """:meth:`_complete_step` without the step-level histograms (``metrics=False``): the same
        request times, tokens and finishes; about a tenth of a replay's time goes to those counters."""
        T1 = self.plan_end
        S1 = self.S + 1
        lag = self.lag
        if self.st_dec is None:  # every decoder ran
            lag.clear()
        else:
            ran = set(self.st_dec)
            for i in self.st_dec:
                lag.pop(i, None)
            self._keep_skipped(ran, self.T)
        self._complete_prefills(T1, S1)
        self.S, self.T = S1, T1
        self._pop_finishes()
        self.gauges = (len(self.running), len(self.waiting), self.used / self.nb)

    def _complete_prefills(self, T1: float, S1: int) -> list[tuple[int, int]]:
        """The step's prefill chunks: a request whose prefill completes produces a token (its first, or
        its next after a preemption) and finishes or decodes on. Returns (request, tokens before) of those."""
        reqs = self.reqs
        prompt, target, to_prefill, gen, pf = reqs.prompt, reqs.target, reqs.to_prefill, reqs.gen, self.pf
        produced = []
        for i, ntok, comp in self.st_pf:
            done = comp + ntok
            if done < to_prefill[i]:
                pf[i] = done
                continue
            del pf[i]
            g_old = gen[i]
            if g_old == 0:
                reqs.first_t[i] = T1
            gen[i] = g_old + 1
            if g_old + 1 >= target[i]:
                self._finish(i, T1, prompt[i] + g_old)
            else:
                self._add_decoder(i, prompt[i] + g_old + 1 - S1)
            produced.append((i, g_old))
        return produced

    def _pop_finishes(self) -> None:
        """Finish the decoding requests whose last token came out of the step just executed."""
        heap, dec, S = self.heap, self.dec, self.S
        while heap and heap[0][0] <= S:
            fs, i, q = heapq.heappop(heap)
            if dec.get(i) != q or fs != S:
                continue
            del dec[i]
            self._drop_decoder(i, q)
            self._finish(i, self.T, S + q - 1)

    def _finish(self, i: int, t: float, computed: int) -> None:
        """Request i finishes at t holding the KV of ``computed`` tokens: its blocks are released."""
        reqs = self.reqs
        self.running.pop(i, None)
        self.lag.pop(i, None)
        blocks = -(-computed // self.bs)
        self.used -= self._release(i, blocks, computed) if self.caching else blocks
        reqs.finish_t[i] = t
        reqs.gen[i] = reqs.target[i]
        reqs.reason[i] = REASON_LENGTH if reqs.hits_max[i] else REASON_STOP
        if reqs.follower is not None and reqs.follower[i] >= 0:
            reqs.released.append(i)

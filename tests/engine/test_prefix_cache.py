"""vLLM's automatic prefix caching in the step-level engines (app/engine/prefix.py): a case worked by
hand, the Python reference against the compiled twin bit for bit with the cache at work, the hit rates
that routing and replica counts give, and the exporter's families."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.engine.config import ALL_ROUTERS, EngineConfig, Events, FleetConfig, Restart, StepTime
from app.engine.fleet import run_fleet
from app.engine.outcomes import NO_TIME, run_arrays
from app.engine.policy import Admission, Autoscaler, Policy, Retry
from app.engine.policy_fleet import run_policy_fleet
from app.engine.prefix import prefix_keys
from app.engine.replica import Replica, Requests, StepCounters
from app.engine.trace import PathSpec, Trace, TrafficSpec
from app.engine.twin_fleet import Counting, Simulated, breach_counts, run_fleet_compiled, simulate
from app.engine.twin_policy import simulate_policy
from app.simulator.metrics import build_metrics_frame
from tests.support.prefix_trace import shared_trace

# a step lasts 0.1 s plus 0.01 s per prefill token: a TTFT shows the tokens prefilled
HAND_STEP = StepTime(base_s=0.1, per_decode_seq_s=0.0, per_prefill_token_s=0.01, per_context_token_s=0.0,
                     per_prefill_pair_s=0.0, noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)
HAND_ENGINE = EngineConfig(block_size=4, num_gpu_blocks=12, max_model_len=48, max_num_seqs=4,
                           max_num_batched_tokens=64, prefix_caching=True)
ONE_PATH = TrafficSpec(paths=(PathSpec(name="chat", served_name="chat", mean_rate=0.0, peak_to_trough=1.0,
                                       peak_hour_utc=0.0, prompt_median=10.0, prompt_sigma=0.0),),
                       max_model_len=48)


def _hand_trace() -> Trace:
    n = 5
    return Trace(origin=0.0, duration_s=5.0, warmup_s=0.0,
                 arrival_s=np.array([0.0, 0.05, 2.0, 3.0, 4.0]), path=np.zeros(n, dtype=np.int8),
                 prompt_tokens=np.array([10, 9, 16, 34, 9], dtype=np.int64),
                 output_tokens=np.array([3, 6, 2, 1, 1], dtype=np.int64), hits_max=np.zeros(n, dtype=bool),
                 request_id=np.arange(n, dtype=np.int64), spec=ONE_PATH,
                 prefix_group=np.array([0, 0, 0, -1, 0]), prefix_tokens=np.array([8, 8, 8, 0, 8], dtype=np.int32),
                 conversation=np.array([7, -1, 7, -1, -1]), history_tokens=np.array([0, 0, 5, 0, 0], dtype=np.int32))


def test_a_small_case_worked_by_hand() -> None:
    """Block size 4, a pool of 12 blocks, one replica; A, B, E share an 8-token system prompt (group
    blocks g0, g1); A and C are turns 1 and 2 of a conversation (C repeats A's 2 new tokens and 3
    answers: history 5); D shares nothing. The free queue is written head first; eK are empty blocks.

    - A (t 0, prompt 10, out 3): nothing cached. 3 blocks from the head; its prefill registers the full
      blocks g0, g1 (block 2 holds tokens 8-9, partial). Step 0.1 + 10 x 0.01 = 0.2: first token 0.2.
    - B (arrives 0.05, prompt 9, out 6) waits for A's step; at 0.2 it hits g0, g1 (held by A: shared,
      nothing leaves the free queue), prefills 1 token: needs ceil(9/4) - 2 = 1 block. Used blocks:
      g0, g1, A's block 2, B's block 2 = 4, not 6. Step 0.1 + 0.01: first token 0.31, TTFT 0.26.
    - A finishes at 0.41 holding 12 computed tokens: its block 2 (tokens 8-11, now full) is registered
      as the conversation's c2, and released last-first: c2 goes free, g1 and g0 stay (B holds them).
      The scrape at 0.35 reads 4 of 12 blocks (both running).
    - B decodes to 14 computed tokens (one more block, from the head), finishes at 0.81, registers its
      block 2 (b2) and frees [b3 (partial, empty), b2, g1, g0] onto the tail.
      Queue: [e6..e12, c2, b3, b2, g1, g0].
    - C (t 2, prompt 16 = 8 + 5 + 3): hits g0, g1, c2 (12 tokens, all three taken out of the queue),
      prefills 4 tokens (0.14: first token 2.14), registers c3; a decode step needs one block more.
      Released at 2.24: queue [e8..e12, b3, b2, c4, c3, c2, g1, g0].
    - D (t 3, prompt 34, out 1) shares nothing: 9 blocks from the head: e8..e12, b3, b2 (evicted),
      c4, c3 (evicted): 2 evictions. Its first token ends it at 3.44; it frees its 9 blocks last-first
      behind [c2, g1, g0].
    - E (t 4, prompt 9): the system prompt survived at the tail: hits g0, g1 (taken out of the queue),
      its 1 new block comes from the head: c2, evicted (3 evictions in all). Prefill 1 token: TTFT 0.11.

    Queries (prompt tokens at first scheduling) 10 + 9 + 16 + 34 + 9 = 78; hits 0 + 8 + 12 + 0 + 8 = 28.
    """
    trace = _hand_trace()
    config = FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35)
    ref = run_fleet(trace, config, drain=True)
    d = run_arrays(ref)
    assert d["cached_tokens"].tolist() == [0, 8, 12, 0, 8]
    assert d["ttft_s"] == pytest.approx([0.2, 0.26, 0.14, 0.44, 0.11], abs=1e-6)
    assert d["e2e_s"] == pytest.approx([0.41, 0.76, 0.24, 0.44, 0.11], abs=1e-6)
    c = ref.counters[0]
    assert (c.prefix_queries.sum(), c.prefix_hits.sum()) == (78, 28)
    # the step that scheduled B ended at 0.31: the scrape at 0.35 (grid point 1) counts B's query
    assert (c.prefix_queries[1], c.prefix_hits[1]) == (10 + 9, 8)
    assert c.gauges[1].tolist() == [2, 0, 4 / 12]  # A and B running, 4 distinct blocks
    # the compiled twin: the same times, hits, gauges and evictions
    fast = run_fleet_compiled(trace, config)
    e = run_arrays(fast)
    for f in ("first_token_us", "finish_us", "cached_tokens", "scheduled_us"):
        assert np.array_equal(d[f], e[f]), f
    assert np.array_equal(c.gauges, fast.counters[0].gauges)
    assert int(simulate(trace, config).evictions[0]) == 3


def test_the_reference_replica_keeps_its_books() -> None:
    """The hand case's replica after the run: every block free, none referenced, the queue as the
    docstring above leaves it (E's release: [D's 9 blocks, e(E's block 2), g1, g0] behind nothing)."""
    trace = _hand_trace()
    keys = prefix_keys(trace, 4)
    reqs = Requests(trace.arrival_s, trace.path, trace.prompt_tokens, trace.output_tokens, trace.hits_max,
                    HAND_STEP, keys)
    rep = Replica(0, HAND_ENGINE, HAND_STEP, reqs, StepCounters(20, 1, [1.0], [1.0]), 0.0, 0.35, seed=1)
    for i in range(reqs.n):
        while rep.plan_end <= reqs.arrival[i]:
            rep.process()
        rep.enqueue(i, reqs.arrival[i])
    while rep.plan_end < float("inf"):
        rep.process()
    assert rep.used == 0 and len(rep.freeq) == 12
    assert all(v == 0 for v in rep.kv_ref.values()) and set(rep.kv_ref) == {k for k in rep.freeq if k >= 0}
    assert rep.evictions == 3
    # what is cached at the end: D's 8 full blocks and the system prompt's 2 (E's own block 2 was partial)
    queue = list(rep.freeq)
    assert [k >= 0 for k in queue] == [False] + [True] * 8 + [False, True, True]
    g0 = (keys.prefix_entity[0] << 24) | 0
    assert queue[-1] == g0 and queue[-2] == g0 | 1


def test_caching_on_a_trace_that_shares_nothing_changes_nothing() -> None:
    """The interface's promise: without prefix arrays (or with the cache off) the engines run as before."""
    trace = _hand_trace()
    for name in ("prefix_group", "prefix_tokens", "conversation", "history_tokens"):
        setattr(trace, name, None)
    on = FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35)
    off = FleetConfig(replicas=1, engine=EngineConfig(**{**HAND_ENGINE.__dict__, "prefix_caching": False}),
                      step=HAND_STEP, scrape_interval_s=0.35)
    a, b = run_arrays(run_fleet(trace, on, drain=True)), run_arrays(run_fleet(trace, off, drain=True))
    for f in ("first_token_us", "finish_us", "scheduled_us", "cached_tokens"):
        assert np.array_equal(a[f], b[f]), f
    assert a["cached_tokens"].sum() == 0
    # without the cache every prompt token is prefilled: B's TTFT is 0.1 + 9 x 0.01 after A's step
    assert a["ttft_s"][1] == pytest.approx(0.2 + 0.19 - 0.05, abs=1e-6)


def test_inconsistent_prefix_fields_are_refused() -> None:
    trace = _hand_trace()
    trace.history_tokens = np.array([0, 0, 9, 0, 0], dtype=np.int32)  # 8 + 9 > 16
    with pytest.raises(ValueError, match=r"trace request 2 \(id 2\): prefix_tokens \+ history_tokens > prompt"):
        prefix_keys(trace, 4)
    trace = _hand_trace()
    trace.prefix_tokens = np.array([8, 8, 4, 0, 8], dtype=np.int32)
    with pytest.raises(ValueError, match="conversation 7 with another shared prefix"):
        prefix_keys(trace, 4)


# -- the Python reference against the compiled twin, the cache at work ---------------------------------
DETERMINISTIC = StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0)
FIELDS = ("arrival_us", "scheduled_us", "first_token_us", "finish_us", "replica", "output_tokens", "preemptions",
          "reason", "cached_tokens", "ttft_s", "tpot_s", "queue_s")
ENGINES = {
    "default pool": EngineConfig(prefix_caching=True, num_gpu_blocks=2100),
    # the batch path's 1,200-token system prompt spans two chunks: its blocks are registered chunk by
    # chunk, and requests prefilling it at once keep unkeyed copies
    "chunks, no reservation, watermark": EngineConfig(prefix_caching=True, num_gpu_blocks=2100,
                                                      max_num_batched_tokens=1024, max_num_seqs=48,
                                                      reserve_full_prompt=False, admission_watermark=0.02),
}


@pytest.fixture(scope="module")
def busy_trace() -> Trace:
    """Half an hour on two replicas with a tight pool: queues, preemptions, evictions; some requests
    share nothing, some are the 640-token (40-block) system prompt alone."""
    return shared_trace(4, 1800.0, conversations=1500, singles=4000, batch=1200, chat_system=640,
                        plain_share=0.1, repeat_share=0.05)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("router", list(ALL_ROUTERS))
def test_the_compiled_engine_equals_the_python_one_with_the_cache(busy_trace: Trace, engine: str,
                                                                    router: str) -> None:
    config = FleetConfig(replicas=2, router=router, engine=ENGINES[engine], step=DETERMINISTIC,
                         scrape_interval_s=60.0, affinity_margin=4)
    ref = run_fleet(busy_trace, config, seed=5, drain=True, metrics=False)
    fast = run_fleet_compiled(busy_trace, config, seed=5)
    a, b = run_arrays(ref), run_arrays(fast)
    for f in FIELDS:
        assert np.array_equal(a[f], b[f], equal_nan=True), f"{router}, {engine}: {f} differs"
    for r in range(2):
        assert np.array_equal(ref.counters[r].gauges, fast.counters[r].gauges), f"gauges of replica {r}"
    assert a["finished"].all()
    # the run exercises what it claims: hits, preemptions (their re-prefills hit their own blocks) and
    # evictions
    assert a["cached_tokens"].sum() > 0.3 * a["prompt_tokens"].sum()
    assert a["preemptions"].sum() > 20
    assert simulate(busy_trace, config, seed=5).evictions.min() > 10_000


def test_a_decode_stretch_takes_its_blocks_as_its_steps_would() -> None:
    """The Python engine's closed-form decode stretches against one event per step, the cache at
    work, with a replica's crash (its cache dies with it): the same hits and outcomes, times within
    the microsecond of a stretch's rounding."""
    tr = shared_trace(6, 900.0, conversations=700, singles=2000, batch=500)
    ev = Events(restarts=(Restart(replica=1, at_s=400.0, down_s=120.0),))
    engine = EngineConfig(prefix_caching=True, num_gpu_blocks=2100)
    runs = [run_fleet(tr, FleetConfig(replicas=2, engine=engine, step=DETERMINISTIC, bulk=bulk), ev, seed=1,
                      drain=True) for bulk in (True, False)]
    a, b = (run_arrays(x) for x in runs)
    assert a["preemptions"].sum() > 10 and a["lost"].sum() > 0 and a["cached_tokens"].sum() > 0
    for key in ("first_token_us", "finish_us", "scheduled_us"):
        assert np.abs(a[key] - b[key]).max() <= 1
    for key in ("output_tokens", "preemptions", "reason", "replica", "cached_tokens"):
        assert np.array_equal(a[key], b[key]), key
    for name in ("gauges", "prefix_queries", "prefix_hits"):
        assert np.array_equal(np.array([getattr(c, name) for c in runs[0].counters]),
                              np.array([getattr(c, name) for c in runs[1].counters])), name
    # the counters count every request at its first scheduling, the crashed replica's included
    scheduled = a["scheduled_us"] != NO_TIME
    assert sum(c.prefix_queries.sum() for c in runs[0].counters) == a["prompt_tokens"][scheduled].sum()
    assert sum(c.prefix_hits.sum() for c in runs[0].counters) == a["cached_tokens"].sum()


POLICIES = {
    "autoscaler, prefix aware": ("prefix_aware", Policy(autoscaler=Autoscaler(
        min_replicas=1, max_replicas=5, start_replicas=2, scale_out_at=2, out_for_s=60, cold_start_s=120,
        cooldown_s=120, in_for_s=300))),
    "admission and retries, least outstanding": ("least_outstanding", Policy(admission=Admission(0.5),
                                                                             retry=Retry(attempts=3))),
    "everything, power of two": ("power_of_two", Policy(
        autoscaler=Autoscaler(min_replicas=1, max_replicas=4, scale_out_at=3, out_for_s=30, cold_start_s=10,
                              cooldown_s=60, in_for_s=120), admission=Admission(1.0), retry=Retry())),
    "admission, prefix aware": ("prefix_aware", Policy(admission=Admission(0.5), retry=Retry(attempts=2))),
    "autoscaler on the running batch, round robin": ("round_robin", Policy(autoscaler=Autoscaler(
        signal="running", scale_out_at=9, scale_in_at=6, min_replicas=2, max_replicas=4, out_for_s=30,
        in_for_s=120, cold_start_s=5, cooldown_s=60))),
    "autoscaler, random": ("random", Policy(autoscaler=Autoscaler(
        min_replicas=1, max_replicas=4, start_replicas=2, scale_out_at=2, out_for_s=60, cold_start_s=60,
        cooldown_s=120, in_for_s=300))),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_the_compiled_policy_loop_equals_the_python_one_with_the_cache(busy_trace: Trace, name: str) -> None:
    router, policy = POLICIES[name]
    config = FleetConfig(replicas=2, router=router, engine=ENGINES["default pool"], step=DETERMINISTIC,
                         scrape_interval_s=60.0, affinity_margin=4)
    ref = run_policy_fleet(busy_trace, config, policy, seed=5)
    fast = simulate_policy(busy_trace, config, policy, seed=5)
    rows = fast.rows
    assert len(rows) == ref.reqs.n
    for mine, theirs in (("sched", "sched_t"), ("first", "first_t"), ("finish", "finish_t")):
        assert np.array_equal(rows[mine], np.array(getattr(ref.reqs, theirs)), equal_nan=True), f"{name}: {mine}"
    for mine, theirs in (("replica", "replica"), ("reason", "reason"), ("gen", "gen"), ("npre", "npre"),
                         ("cached", "cached")):
        assert np.array_equal(rows[mine], np.array(getattr(ref.reqs, theirs))), f"{name}: {mine}"
    for r in range(len(ref.counters)):
        assert np.array_equal(ref.counters[r].gauges, fast.gauges[r]), f"{name}: gauges of replica {r}"
    assert rows["cached"].sum() > 0
    if policy.autoscaler:
        assert fast.timeline.provisioned.max() > policy.autoscaler.start
    if policy.retry:
        assert fast.attempt.max() >= 2


# -- what the replica count and the routing do to the hit rate -----------------------------------------
def _hit_rate(rows: np.ndarray, mask: np.ndarray) -> float:
    """Prefix-cache hits / queries (tokens) of the requests in ``mask``, as vLLM's two counters give it
    (every request here is scheduled once: no preemption at this load)."""
    return float(rows["cached"][mask].sum() / rows["prompt"][mask].sum())


def test_a_shared_system_prompt_is_hit_whatever_the_replica_count() -> None:
    """One-shot requests behind a 600-token system prompt (37 full blocks: 592 tokens), least
    outstanding routing: each replica computes the prompt once, for its first request, and hits it
    for every later one. So at most N requests miss, and the hit rate at N replicas is within
    (N - 1) x 592 tokens / all prompt tokens of one replica's."""
    trace = shared_trace(2, 3600.0, conversations=0, singles=6000, batch=0, chat_system=600)
    hits = {}
    for n in (1, 2, 4, 8):
        config = FleetConfig(replicas=n, engine=EngineConfig(prefix_caching=True), step=DETERMINISTIC,
                             scrape_interval_s=60.0)
        rows = simulate(trace, config, seed=1).rows
        missed = rows["cached"] < 592
        assert 1 <= missed.sum() <= n, (n, missed.sum())
        assert len(np.unique(rows["replica"][missed])) == missed.sum()  # one per replica
        hits[n] = int(rows["cached"].sum())
        assert 0 <= hits[1] - hits[n] <= (n - 1) * 592
    assert hits[1] == 592 * (len(trace) - 1)
    # the hit rate (hits / prompt tokens), 0.58 here, moves by less than 0.1 % from 1 to 8 replicas
    assert (hits[1] - hits[8]) / trace.prompt_tokens.sum() < 0.001


@pytest.fixture(scope="module")
def conversations() -> tuple[Trace, np.ndarray]:
    """500 conversations of 3 to 8 turns over an hour, no system prompt, 5 s + Exp(15 s) between turns:
    light enough that one replica's cache keeps nearly every history until the next turn. And each
    request's previous turn (-1: a first turn)."""
    trace = shared_trace(8, 3600.0, conversations=500, singles=0, batch=0, chat_system=0, turns=(3, 8),
                         think_s=15.0, min_think_s=5.0)
    n = len(trace)
    order = np.lexsort((np.arange(n), trace.conversation))
    previous = np.full(n, -1)
    same = trace.conversation[order[1:]] == trace.conversation[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    return trace, previous


def _conversation_run(trace: Trace, replicas: int, router: str) -> np.ndarray:
    config = FleetConfig(replicas=replicas, router=router, engine=EngineConfig(prefix_caching=True),
                         step=DETERMINISTIC, scrape_interval_s=60.0)
    return simulate(trace, config, seed=1).rows


def test_conversations_lose_their_cache_as_one_over_n_under_load_based_routing(conversations) -> None:
    """A second turn can hit only its first turn's blocks, which are on one replica. Least-outstanding
    routing does not know conversations, and the think time between turns decorrelates the load it
    sees, so the second turn lands on the first turn's replica with probability 1/N: the second turns'
    hit rate at N replicas is 1/N of one replica's, give or take 4 binomial standard deviations of that
    share (sqrt((1/N)(1 - 1/N)/n) over n second turns) and the few histories one replica evicts
    (1 - its hit efficiency, 2 % here). Later turns fall slower than 1/N: one that lands elsewhere may
    still find an older turn's blocks there (at N = 4 about 0.48 of one replica's, not 0.25)."""
    trace, previous = conversations
    second = (previous >= 0) & (previous[np.maximum(previous, 0)] < 0)
    follow = previous >= 0
    n2 = int(second.sum())
    one = _conversation_run(trace, 1, "least_outstanding")
    hits_max = (np.minimum(trace.prompt_tokens - 1, trace.history_tokens) // 16 * 16)[second].sum()
    efficiency = one["cached"][second].sum() / hits_max
    assert efficiency > 0.97
    base, base_all = _hit_rate(one, second), _hit_rate(one, follow)
    for n in (2, 4, 8):
        rows = _conversation_run(trace, n, "least_outstanding")
        landed = float((rows["replica"][second] == rows["replica"][previous[second]]).mean())
        sigma = np.sqrt((1 / n) * (1 - 1 / n) / n2)
        assert abs(landed - 1 / n) <= 4 * sigma, (n, landed)
        ratio = _hit_rate(rows, second) / base
        assert 1 / n - 4 * sigma <= ratio <= (1 / n + 4 * sigma) / efficiency, (n, ratio)
        assert 1 / n < _hit_rate(rows, follow) / base_all < 1.0


def test_prefix_aware_routing_holds_the_conversations_hit_rate(conversations) -> None:
    """The same conversations behind the prefix-aware router: every turn goes where its previous turn
    ran (the margin is never exceeded at this load), so the follow-up turns' hit rate stays at least
    one replica's (98 % of it: more replicas, more cache, fewer histories evicted), at every N."""
    trace, previous = conversations
    follow = previous >= 0
    base = _hit_rate(_conversation_run(trace, 1, "prefix_aware"), follow)
    for n in (2, 4, 8):
        rows = _conversation_run(trace, n, "prefix_aware")
        assert (rows["replica"][follow] == rows["replica"][previous[follow]]).all()
        assert _hit_rate(rows, follow) >= 0.98 * base
        # and the load stays spread: the conversations' first turns go least outstanding
        assert np.bincount(rows["replica"], minlength=n).min() > 0.5 * len(trace) / n


# -- the exporter's families ------------------------------------------------------------------------------
def _last(frame, metric: str, **labels: str) -> float:
    """The series' value at the last scrape (one series must match)."""
    rows = frame[frame["metric"].astype(str) == metric]
    keep = [all(json.loads(lab).get(k) == v for k, v in labels.items()) for lab in rows["labels"].astype(str)]
    rows = rows[keep]
    assert rows["labels"].nunique() == 1, (metric, labels, rows["labels"].unique())
    return float(rows.sort_values("ts")["value"].iloc[-1])


def test_the_exporter_writes_the_prefix_cache_families_as_vllm_does() -> None:
    """The hand case exported (it ends by 4.11 s; the last scrape is at 4.9 s). Totals by hand: queries
    78 and hits 28 (engine-level); per request at its first token: cached 0 + 8 + 12 + 0 + 8 = 28;
    by source, computed = prompt - cached: 10 + 1 + 4 + 34 + 1 = 50, and as vLLM counts them, a prompt
    hit but for its last token (B and E: 8 of 9) counts that token as a hit as well: 0 + 9 + 12 + 0 + 9
    = 30. The labels are a real vLLM 0.32 engine's (engine, model_name; source), plus the scrape's
    instance and job."""
    trace = _hand_trace()
    run = run_fleet(trace, FleetConfig(replicas=1, engine=HAND_ENGINE, step=HAND_STEP, scrape_interval_s=0.35),
                    drain=True)
    frame = build_metrics_frame(run)
    base = {"engine": "0", "instance": "10.0.0.1:8000", "job": "vllm"}
    assert _last(frame, "vllm:prefix_cache_queries_total", **base, model_name=HAND_ENGINE.model) == 78
    assert _last(frame, "vllm:prefix_cache_hits_total", **base, model_name=HAND_ENGINE.model) == 28
    assert _last(frame, "vllm:prompt_tokens_cached_total", **base, model_name="chat") == 28
    by_source = {s: _last(frame, "vllm:prompt_tokens_by_source_total", **base, model_name="chat", source=s)
                 for s in ("local_compute", "local_cache_hit", "external_kv_transfer")}
    assert by_source == {"local_compute": 50, "local_cache_hit": 30, "external_kv_transfer": 0}
    assert _last(frame, "vllm:prompt_tokens_total", **base, model_name="chat") == 78
    names = set(frame["metric"].astype(str))
    for family in ("prefix_cache_queries", "prefix_cache_hits", "prompt_tokens_cached", "prompt_tokens_by_source"):
        assert {f"vllm:{family}_total", f"vllm:{family}_created"} <= names
    info = json.loads(frame[frame["metric"].astype(str) == "vllm:cache_config_info"]["labels"].iloc[0])
    assert (info["enable_prefix_caching"], info["block_size"]) == ("True", "4")
    label_keys = {m: set(json.loads(lab)) for m, lab in zip(frame["metric"].astype(str), frame["labels"].astype(str),
                                                            strict=True)}
    assert label_keys["vllm:prefix_cache_queries_total"] == {"engine", "model_name", "instance", "job"}
    assert label_keys["vllm:prompt_tokens_by_source_total"] == {"engine", "model_name", "source", "instance", "job"}


def test_without_the_cache_the_export_has_none_of_its_families() -> None:
    """An engine with prefix caching off: cache_config_info says so and no family of the cache is
    written (the exports of every configuration before it stay as they were)."""
    trace = _hand_trace()
    engine = EngineConfig(**{**HAND_ENGINE.__dict__, "prefix_caching": False})
    frame = build_metrics_frame(run_fleet(trace, FleetConfig(replicas=1, engine=engine, step=HAND_STEP,
                                                             scrape_interval_s=0.35), drain=True))
    names = set(frame["metric"].astype(str))
    assert not {n for n in names if "prefix_cache" in n or "prompt_tokens_cached" in n or "by_source" in n}
    info = json.loads(frame[frame["metric"].astype(str) == "vllm:cache_config_info"]["labels"].iloc[0])
    assert info["enable_prefix_caching"] == "False"


def counted_and_full(trace: Trace, config: FleetConfig) -> tuple[Simulated, Simulated, np.ndarray, np.ndarray]:
    """The run of ``trace`` (seed 5) that keeps every row, a counted run whose ring starts at 4 rows, and
    the full run's breaches by minute as the counted run counts them (TTFT 0.3 s / TPOT 30 ms on the first
    path, TTFT 3 s on the second): (full, counted, totals, windows)."""
    minutes = int(trace.duration_s // 60)
    ttft, tpot = np.array([0.3, 3.0]), np.array([0.03, np.nan])
    counting = Counting(ttft_s=ttft, tpot_s=tpot, t_lo=0.0, t_hi=trace.duration_s, window_s=60.0, n_windows=minutes,
                        origin=0.0, view_window_s=60.0, n_view=minutes)
    full = simulate(trace, config, seed=5)
    totals, windows = breach_counts(full.rows, ttft, tpot, 0.0, trace.duration_s, 60.0, minutes)
    return full, simulate(trace, config, seed=5, counting=counting, ring_rows=4), totals, windows


def test_a_counted_run_with_the_cache_counts_the_full_runs_rows() -> None:
    """A counted run (a ring of rows that grows, started at 4) with the cache at work: rows move, the
    caches hold blocks, not rows, so the breaches counted are those of the run that keeps every row."""
    trace = shared_trace(6, 900.0, conversations=700, singles=2000, batch=500)
    config = FleetConfig(replicas=2, router="prefix_aware", engine=ENGINES["default pool"], step=DETERMINISTIC,
                         scrape_interval_s=60.0)
    full, got, totals, windows = counted_and_full(trace, config)
    assert got.enlarged > 3
    assert np.array_equal(got.counts.totals, totals) and np.array_equal(got.counts.windows, windows)
    assert np.array_equal(got.gauges, full.gauges) and np.array_equal(got.evictions, full.evictions)
    assert totals[:, 1].sum() > 0 and full.rows["cached"].sum() > 0

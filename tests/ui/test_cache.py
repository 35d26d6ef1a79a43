"""The replayed scenarios shared by every session of a process (``app.ui.cache.ReplayStore``): only what it
lacks is replayed, all at once; a scenario another session is replaying is waited for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from app.ui import cache as ui_cache
from app.ui import economics as economics_view


def _recording_replay(calls: list[list[tuple[int, float, float]]]) -> Callable:
    """A replay for ``ReplayStore``: notes what it is asked for and keeps one fake prediction each."""
    def replay(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        calls.append(list(missing))
        for s in missing:
            keep(s, [SimpleNamespace(replicas=s[0], share=0.1 * s[0])])
    return replay


def test_the_replay_store_replays_only_what_it_lacks_all_at_once() -> None:
    """A run asks the replay once, for every scenario the store lacks (in the run's order, a repeat
    once); what it holds comes back as copies; past ``max_entries`` the least recently used goes."""
    calls: list[list[tuple[int, float, float]]] = []
    replay = _recording_replay(calls)
    store = ui_cache.ReplayStore(max_entries=4)
    first = store.replayed("ws", "key", [(2, 1, 1), (3, 1, 1), (2, 1, 1)], replay)
    assert calls == [[(2, 1.0, 1.0), (3, 1.0, 1.0)]]
    assert [r.predictions[0].replicas for r in first] == [2, 3, 2]
    assert first[0].computed_at == first[1].computed_at
    first[0].predictions[0].share = 99.0  # a caller's change stays its own
    again = store.replayed("ws", "key", [(3, 1.0, 1.0), (4, 1.0, 1.0), (2, 1.0, 1.0)], replay)
    assert calls[1] == [(4, 1.0, 1.0)]
    assert [r.predictions[0].share for r in again] == pytest.approx([0.3, 0.4, 0.2])
    assert again[0].computed_at == first[1].computed_at  # held: from the cache
    store.replayed("ws", "other key", [(2, 1.0, 1.0)], replay)  # another replay key is another scenario
    assert calls[2] == [(2, 1.0, 1.0)]
    store.replayed("ws", "key", [(5, 1.0, 1.0)], replay)  # five held: (3, 1, 1) was used least recently
    store.replayed("ws", "key", [(3, 1.0, 1.0), (2, 1.0, 1.0)], replay)
    assert calls[-1] == [(3, 1.0, 1.0)]


def _blocking_replay(calls: list[list[tuple[int, float, float]]], started: threading.Event,
                     release: threading.Event, stop_after: int | None = None) -> Callable:
    """A replay that says it started, waits to be released, then keeps its scenarios (or the first
    ``stop_after`` of them and raises, as a stopped script does)."""
    def replay(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        calls.append(list(missing))
        started.set()
        assert release.wait(10)
        for i, s in enumerate(missing):
            if stop_after is not None and i == stop_after:
                raise ValueError("stopped")
            keep(s, [SimpleNamespace(replicas=s[0])])
    return replay


def _in_thread(store: ui_cache.ReplayStore, grid: list[tuple[int, float, float]], replay: Callable,
               out: dict[str, object]) -> threading.Thread:
    def run() -> None:
        try:
            out["result"] = store.replayed("ws", "key", grid, replay)
        except ValueError as exc:
            out["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_two_runs_at_once_replay_each_scenario_once() -> None:
    """Two sessions asking for overlapping grids at the same moment: the second waits for what the
    first is replaying (saying how many, as the page's bar does) and replays only the rest."""
    store = ui_cache.ReplayStore()
    store.WAIT_POLL_S = 0.01
    first_calls: list[list[tuple[int, float, float]]] = []
    started, release, first = threading.Event(), threading.Event(), {}
    thread = _in_thread(store, [(2, 1.0, 1.0), (3, 1.0, 1.0)],
                        _blocking_replay(first_calls, started, release), first)
    assert started.wait(10)
    second_calls: list[list[tuple[int, float, float]]] = []
    waits: list[int] = []
    shown: list[tuple[float, str]] = []
    progress = economics_view.ReplayProgress(lambda done, text: shown.append((done, text)))

    def on_wait(left: int) -> None:
        waits.append(left)
        progress.waiting(left)
        release.set()  # the first run finishes once the second is seen waiting

    second = store.replayed("ws", "key", [(3, 1.0, 1.0), (4, 1.0, 1.0)], _recording_replay(second_calls),
                             on_wait=on_wait)
    thread.join(10)
    assert first_calls == [[(2, 1.0, 1.0), (3, 1.0, 1.0)]] and second_calls == [[(4, 1.0, 1.0)]]
    assert waits and set(waits) == {1}
    assert shown and shown[0] == (0.0, "waiting for 1 scenario another session is replaying")
    assert [r.predictions[0].replicas for r in second] == [3, 4]
    assert [r.predictions[0].replicas for r in first["result"]] == [2, 3]
    assert not store._running


def test_a_run_waited_for_that_stops_leaves_its_scenarios_to_the_waiting_run() -> None:
    """The first session is stopped after one scenario: the run waiting for both holds that one and
    replays the other itself."""
    store = ui_cache.ReplayStore()
    store.WAIT_POLL_S = 0.01
    first_calls: list[list[tuple[int, float, float]]] = []
    started, release, first = threading.Event(), threading.Event(), {}
    thread = _in_thread(store, [(2, 1.0, 1.0), (3, 1.0, 1.0)],
                        _blocking_replay(first_calls, started, release, stop_after=1), first)
    assert started.wait(10)
    calls: list[list[tuple[int, float, float]]] = []
    again = store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], _recording_replay(calls),
                           on_wait=lambda _left: release.set())
    thread.join(10)
    assert isinstance(first["error"], ValueError)
    assert calls == [[(3, 1.0, 1.0)]] and [r.predictions[0].replicas for r in again] == [2, 3]
    assert not store._running


def test_a_replay_stopped_part_way_keeps_the_scenarios_it_finished() -> None:
    """Streamlit stops a script at its next call when the user moves on; an error stops it too: the
    scenarios whose runs were all in stay held, the next run replays only the others."""
    def stopped_after_one(missing: list[tuple[int, float, float]], keep: Callable) -> None:
        keep(missing[0], [SimpleNamespace(replicas=missing[0][0])])
        raise ValueError("stopped")

    store = ui_cache.ReplayStore()
    with pytest.raises(ValueError, match="stopped"):
        store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], stopped_after_one)
    calls: list[list[tuple[int, float, float]]] = []
    again = store.replayed("ws", "key", [(2, 1.0, 1.0), (3, 1.0, 1.0)], _recording_replay(calls))
    assert calls == [[(3, 1.0, 1.0)]] and [r.predictions[0].replicas for r in again] == [2, 3]
    with pytest.raises(RuntimeError, match=r"without scenarios \[\(4, 1.0, 1.0\)\]"):
        store.replayed("ws", "key", [(4, 1.0, 1.0)], lambda _missing, _keep: None)

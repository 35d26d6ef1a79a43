"""The Streamlit caches, kept deliberately small and keyed by plain values.

- The workspace is one per process (``st.cache_resource``); every query runs on its own cursor.
- A cube is found by its spec (datasets, window, path labels, rules) and referred to by a
  ``CubeRef`` (its id, from a sequence and never reused, and its spec's key): results cached by a
  ``CubeRef`` are never those of another cube. Threshold, price and scenario changes never reach ``cube``.
- Promise results are cached by (cube, promises, range): a threshold change re-runs only the
  small query on the cube.
- Replays are held per scenario (``ReplayStore`` below, one per process), keyed by
  ``ScenarioInputs.replay_key`` (canonical JSON of datasets, path mapping, TTFT/TPOT per path,
  assumptions, seeds) plus (N', traffic, context); the scenarios a run lacks are replayed together.
  Prices are not in the key: pricing is arithmetic on the cached predictions.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

from app.cube import cube_key, ensure_cube
from app.economics.check.crosscheck import CURVE_WINDOW_S
from app.economics.decide import policy_file, routing
from app.economics.decide.inputs import ScenarioInputs
from app.economics.decide.policies import PolicyPrediction
from app.economics.model import demand
from app.economics.predict.scenarios import Analysis, Prediction, Scenario
from app.promise.screen import ScreenTables
from app.promise.screen import evaluate as evaluate_screen
from app.promise.shares import time_range
from app.records import exact_joint_shares
from app.store import Workspace, default_db_path
from app.tail import attribution
from app.tail import report as tail_report
from app.tail import signals as tail_signals
from app.tail import twin as tail_twin
from app.tail.twin import TwinAttribution
from app.ui import data
from app.ui import tail as tail_view
from app.ui.promise import to_promises
from app.ui.session import Settings


# -- the replayed scenarios, shared by every session of this process ----------------------------------
class Replayed(NamedTuple):
    """A scenario's predictions and when they were computed (Unix time): older than the click = cached."""

    predictions: list[Prediction]
    computed_at: float  # when the replay call that computed it started


class ReplayStore:
    """The replayed scenarios of this server process, per (workspace, replay key, scenario), the least
    recently used dropped past ``max_entries``. A run replays only the scenarios it does not hold, all
    of them in one executor call: the runs of every N' at one (traffic, context, seed) share one
    synthesized request set on one worker, and the cores stay busy to the last run (one call per
    scenario made each synthesize its set again and left a core idle whenever a scenario had a
    single run). A scenario another session is replaying is waited for, not replayed again beside it
    (two sessions of a team's dashboard that ask at once would each get half the cores). Prices are
    not in the key: pricing is arithmetic on the predictions."""

    WAIT_POLL_S = 0.5  # how often a run waiting for another's scenarios reports (Streamlit stops it there)

    def __init__(self, max_entries: int = 512) -> None:
        self.max_entries = max_entries
        self._held: OrderedDict[tuple[str, str, Scenario], Replayed] = OrderedDict()
        self._running: dict[tuple[str, str, Scenario], threading.Event] = {}
        self._lock = threading.Lock()

    def replayed(self, db: str, replay_key: str, grid: Sequence[Scenario],
                 replay: Callable[[list[Scenario], Callable[[Scenario, list[Prediction]], None]], Any],
                 on_wait: Callable[[int], None] | None = None) -> list[Replayed]:
        """Each scenario of ``grid`` (in its order). ``replay(missing, keep)`` is called for those
        neither held nor being replayed by another run, and calls ``keep(scenario, predictions)`` as
        each is done: a replay stopped part-way (an exception, or Streamlit stopping the script) keeps
        what it finished. Those another run is replaying are waited for (``on_wait(how many)`` every
        ``WAIT_POLL_S``); any it did not finish are then replayed here. The predictions returned are
        copies (a caller may change its own)."""
        wanted = [(int(n), float(g), float(m)) for n, g, m in grid]
        key = {s: (db, replay_key, s) for s in wanted}
        got: dict[Scenario, Replayed] = {}
        while True:
            with self._lock:
                for s in wanted:
                    if s not in got and key[s] in self._held:
                        got[s] = self._held[key[s]]
                todo = [s for s in dict.fromkeys(wanted) if s not in got]
                theirs = [self._running[key[s]] for s in todo if key[s] in self._running]
                mine = {s: threading.Event() for s in todo if key[s] not in self._running}
                for s, running in mine.items():
                    self._running[key[s]] = running
            if mine:
                self._replay_own(key, mine, replay, got)
            if not theirs:
                break
            while not all(e.wait(self.WAIT_POLL_S) for e in theirs):
                if on_wait is not None:
                    on_wait(sum(not e.is_set() for e in theirs))
        with self._lock:
            out = []
            for s in wanted:
                if key[s] in self._held:
                    self._held.move_to_end(key[s])
                out.append(got[s]._replace(predictions=copy.deepcopy(got[s].predictions)))
            while len(self._held) > self.max_entries:
                self._held.popitem(last=False)
        return out

    def _replay_own(self, key: Mapping[Scenario, tuple[str, str, Scenario]], mine: dict[Scenario, threading.Event],
                    replay: Callable[[list[Scenario], Callable[[Scenario, list[Prediction]], None]], Any],
                    got: dict[Scenario, Replayed]) -> None:
        """Replay ``mine`` (marked as running by this run, each with its event), hold each as it is
        done, and whatever happens release them to the runs waiting for them."""
        started = time.time()

        def release(s: Scenario) -> None:  # under the lock; an entry another run made since is left alone
            if self._running.get(key[s]) is mine[s]:
                del self._running[key[s]]
            mine[s].set()

        def keep(s: Scenario, predictions: list[Prediction]) -> None:
            got[s] = Replayed(predictions, started)
            with self._lock:
                self._held[key[s]] = got[s]
                release(s)

        try:
            replay(list(mine), keep)
        finally:
            with self._lock:
                for s in mine:
                    release(s)
        if lost := [s for s in mine if s not in got]:
            raise RuntimeError(f"the replay returned without scenarios {lost}")


@st.cache_resource(show_spinner="Opening the workspace (an empty one loads the bundled sample day first: "
                               "under a minute)…", on_release=lambda ws: ws.close())
def workspace(path: str | None = None) -> Workspace:
    ws = Workspace(path or default_db_path())
    data.ensure_sample_loaded(ws)
    return ws


class CubeRef(NamedTuple):
    id: int
    key: str
    window_s: int
    datasets: tuple[int, ...]


@st.cache_data(max_entries=16, show_spinner="Building the cube (once per datasets, window and path mapping)…")
def cube(db: str, dataset_ids: tuple[int, ...], window_s: int, path_labels: tuple[str, ...],
         rules: tuple[tuple[str, str], ...]) -> CubeRef:
    """The cube of this spec (``rules`` is in the key so a new mapping builds a new cube)."""
    cube_id = ensure_cube(workspace(db), list(dataset_ids), window_s, list(path_labels))
    return CubeRef(cube_id, cube_key(dataset_ids, window_s, path_labels, rules), window_s, dataset_ids)


def current_cube(db: str, settings: Settings | None = None) -> CubeRef | None:
    """The cube of a session's choices (its datasets and window; ``settings``: its ``SessionSettings``,
    None the workspace-wide ones) and the shared path mapping; None without data."""
    ws = workspace(db)
    settings = settings or ws
    ids = data.active_datasets(ws, settings)
    if not ids:
        return None
    return cube(db, tuple(ids), data.window_seconds(settings), tuple(ws.path_labels()),
                tuple(ws.path_rules()))


@st.cache_data(max_entries=32, show_spinner=False)
def requests_per_window(db: str, ref: CubeRef) -> pd.DataFrame:
    return data.requests_per_window(workspace(db), ref.id)


@st.cache_data(max_entries=32, show_spinner=False)
def data_health(db: str, ref: CubeRef) -> pd.DataFrame:
    return data.data_health(workspace(db), ref.id)


@st.cache_data(max_entries=32, show_spinner=False)
def request_paths(db: str, ref: CubeRef) -> list[str]:
    return data.request_paths(workspace(db), ref.id)


@st.cache_data(max_entries=32, show_spinner=False)
def bucket_bounds(db: str, ref: CubeRef) -> dict[str, list[float]]:
    return data.bucket_bounds(workspace(db), ref.id)


@st.cache_data(max_entries=64, show_spinner=False)
def promise_tables(db: str, ref: CubeRef, promises: tuple[tuple, ...], start: datetime, end: datetime,
                   include_failed: bool) -> ScreenTables:
    """Shares per path over the range and per step, and the burn alerts of a promise, at the screen's
    resolution (``app.promise.screen``: lookups in the cube's running totals)."""
    return evaluate_screen(workspace(db), ref.id, ref.window_s, to_promises(promises), start, end,
                           include_failed=include_failed)


def shares(db: str, ref: CubeRef, promises: tuple[tuple, ...], start: datetime, end: datetime,
           include_failed: bool, by_window: bool = False) -> pd.DataFrame:
    tables = promise_tables(db, ref, promises, start, end, include_failed)
    return tables.windows if by_window else tables.paths


def alerts(db: str, ref: CubeRef, promises: tuple[tuple, ...], start: datetime, end: datetime,
           include_failed: bool) -> pd.DataFrame:
    return promise_tables(db, ref, promises, start, end, include_failed).alerts


def promise_step(db: str, ref: CubeRef, promises: tuple[tuple, ...], start: datetime, end: datetime,
                 include_failed: bool) -> int:
    """The step (seconds) of the per-window tables: the cube window, or coarser on a long range."""
    return promise_tables(db, ref, promises, start, end, include_failed).step_s


@st.cache_data(max_entries=64, show_spinner=False)
def exact_joint(db: str, dataset_ids: tuple[int, ...], promises: tuple[tuple, ...], start: datetime,
                end: datetime, include_failed: bool) -> dict[str, float]:
    return exact_joint_shares(workspace(db), list(dataset_ids), to_promises(promises), start, end,
                              include_failed=include_failed)


@st.cache_data(max_entries=8, show_spinner=False)
def analysis(db: str, replay_key: str) -> Analysis:
    """Fit, demand and the replay at the observed N, once per replay key (seconds to minutes)."""
    return ScenarioInputs.from_replay_key(replay_key).analyse(workspace(db))


@st.cache_resource
def _replays() -> ReplayStore:
    return ReplayStore()


def scenarios(db: str, replay_key: str, grid: Sequence[Scenario],
              on_run: Callable[[int, int, str], None] | None = None,
              on_wait: Callable[[int], None] | None = None) -> list[Replayed]:
    """The predictions of each scenario of ``grid``, replayed together for those not yet held
    (``seeds`` replays each, plus the sensitivity envelope when flagged); those another session is
    replaying are waited for (``on_wait``: how many are left)."""
    inputs = ScenarioInputs.from_replay_key(replay_key)
    return _replays().replayed(db, replay_key, grid, lambda missing, keep: inputs.predict(
        analysis(db, replay_key), missing, on_run=on_run, on_scenario=keep), on_wait=on_wait)


@st.cache_data(max_entries=16, show_spinner="Reading the prefix-cache counters (once per datasets and path mapping)…")
def cached_share(db: str, dataset_ids: tuple[int, ...], window_s: int, path_labels: tuple[str, ...],
                 rules: tuple[tuple[str, str], ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The share of prompt tokens the prefix cache served, per window and path and over the range
    (``demand.cached_share_by_window`` and ``cached_share_totals``), read on a cube of the four counters
    alone (``rules`` is in the key so a new mapping reads a new cube)."""
    windows = demand.cached_share_by_window(workspace(db), list(dataset_ids), list(path_labels), window_s)
    return windows, demand.cached_share_totals(windows)


@st.cache_data(max_entries=16, show_spinner=False)
def cross_check(db: str, replay_key: str, replicas: tuple[int, ...], traffic: tuple[float, ...]) -> dict[str, Any]:
    """The empirical load–response curve per path (``crosscheck.load_response``) on the 5-minute cube of
    the replayed datasets, read at every (N', traffic): queries on the cube, no replay."""
    inputs = replace(ScenarioInputs.from_replay_key(replay_key), replicas=replicas, traffic=traffic)
    ref = cube(db, inputs.datasets, CURVE_WINDOW_S, inputs.path_labels, inputs.rules)
    return inputs.cross_check(workspace(db), curve_cube=ref.id)


@st.cache_data(max_entries=16, show_spinner="Reading where the tail lives (attribution and signals)…")
def tail_document(db: str, ref: CubeRef, promises: tuple[tuple, ...], start: datetime, end: datetime,
                  names: tuple[str, ...]) -> dict[str, Any]:
    """``headroom tail``'s document on a cube (no twin): queries on the cube and arithmetic on windows."""
    return tail_report.build(workspace(db), ref.id, ref.window_s, to_promises(promises), list(names), start, end)


@st.cache_data(max_entries=32, show_spinner=False)
def tail_quantiles(db: str, ref: CubeRef, quantile: float) -> pd.DataFrame:
    """A quantile of each latency histogram per window over the cube's whole range."""
    ws = workspace(db)
    start, end = time_range(ws, ref.id, None, None)
    return tail_view.window_quantiles(ws, ref.id, start, end, quantile)


@st.cache_data(max_entries=8, show_spinner="Replaying the observed demand at N, 2N and 4N through the twin…")
def twin_attribution(db: str, replay_key: str) -> list[TwinAttribution]:
    """The twin attribution of an Economics run (its analysis, cached by the same key); unpriced."""
    inputs = ScenarioInputs.from_replay_key(replay_key)
    return tail_twin.attribute(analysis(db, replay_key), None, seeds=inputs.seeds)


@st.cache_data(max_entries=16, show_spinner=False)
def tail_attribution_windows(db: str, ref: CubeRef, promises: tuple[tuple, ...]) -> pd.DataFrame:
    """The per-window attribution (``app.tail.attribution``) over the cube's whole range."""
    ws = workspace(db)
    start, end = time_range(ws, ref.id, None, None)
    return attribution.attribute(ws, ref.id, to_promises(promises), start, end).ttft_windows


@st.cache_data(max_entries=16, show_spinner=False)
def tail_signal_windows(db: str, ref: CubeRef, promises: tuple[tuple, ...], scope: str) -> pd.DataFrame:
    """Per window: the signals and the breach share of ``scope`` (``app.tail.signals``)."""
    return tail_signals.analyse(workspace(db), ref.id, ref.window_s, to_promises(promises), scope=scope).windows


@st.cache_data(max_entries=32, show_spinner=False)
def policy_rows(db: str, replay_key: str, policy_json: str, observed_replicas: int) -> list[PolicyPrediction]:
    """The policy rows of a policy mapping (canonical JSON), replayed once per replay key and policy:
    prices are not part of the key, so a price change re-prices them."""
    ps = policy_file.parse(json.loads(policy_json), "policy inputs", observed_replicas)
    inputs = ScenarioInputs.from_replay_key(replay_key)
    return inputs.policy_rows(analysis(db, replay_key), ps)


@st.cache_data(max_entries=16, show_spinner=False)
def routed_scenarios(db: str, replay_key: str, router: str, grid: tuple[Scenario, ...]) -> dict[Scenario, list[Prediction]]:
    """Scenarios replayed under another router than the analysis' (the routing row's prefix-aware side),
    once per replay key, router and grid: the same fit, calibration and requests."""
    inputs = ScenarioInputs.from_replay_key(replay_key)
    return inputs.predict(routing.routed(analysis(db, replay_key), router), list(grid))


def routing_rows(db: str, replay_key: str, inputs: ScenarioInputs, predictions: Sequence[Prediction]
                 ) -> routing.RoutingPredictions:
    """The routing row of a run (``ScenarioInputs.routing_rows``): the analysis' own router from the
    replayed scenarios (``scenarios``, which holds the grid's), the other from ``routed_scenarios``."""
    fitted = analysis(db, replay_key)

    def run(a: Analysis, wanted: list[Scenario]) -> dict[Scenario, list[Prediction]]:
        if a.model.router == fitted.model.router:
            return {s: r.predictions for s, r in zip(wanted, scenarios(db, replay_key, wanted), strict=True)}
        return routed_scenarios(db, replay_key, a.model.router, tuple(wanted))

    return inputs.routing_rows(fitted, predictions, run=run)

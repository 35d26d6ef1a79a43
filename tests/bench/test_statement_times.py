"""Where a load's time goes, by named query: ``app.sql.statement_times`` on a real load, the bench's
``statements`` summary of hand-made times, and ``Steps`` timing the analyse's progress messages."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from app import sql
from app.bench.measure import Steps, statements
from app.load import load_file
from app.store import Workspace

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "metrics.parquet"


def test_a_load_counts_each_named_query_it_runs_and_nothing_outside_the_context() -> None:
    with Workspace(":memory:") as ws:
        with sql.statement_times() as times:
            t0 = time.perf_counter()
            assert load_file(ws, SAMPLE).status == "loaded"
            wall = time.perf_counter() - t0
        # the load's statements that go through app.sql, once each for one file
        for name in ("ingest__staged_series", "ingest__insert_series", "ingest__insert_samples",
                     "ingest__insert_families", "ingest__dataset_stats"):
            assert times[name][0] == 1, name
        assert all(calls >= 1 and seconds > 0 for calls, seconds in times.values())
        assert sum(seconds for _, seconds in times.values()) <= wall
        seen = {name: list(v) for name, v in times.items()}
        sql.rows(ws.con, "ingest__dataset_stats", dataset_id=1)  # after the context: not counted
        assert times == seen
        # another thread's statements are not this context's
        with sql.statement_times() as mine:
            thread = threading.Thread(target=lambda: sql.rows(ws.cursor(), "ingest__dataset_stats", dataset_id=1))
            thread.start()
            thread.join()
            assert mine == {}
            sql.rows(ws.con, "ingest__dataset_stats", dataset_id=1)
        assert list(mine) == ["ingest__dataset_stats"] and mine["ingest__dataset_stats"][0] == 1


def test_statements_ranks_the_queries_and_gives_the_rest_and_the_time_outside() -> None:
    times = {"a": [1, 3.0], "b": [2, 0.5], "c": [4, 1.0], "d": [1, 0.25]}
    assert statements(times, 6.0, top=2) == [
        {"query": "a", "calls": 1, "s": 3.0}, {"query": "c", "calls": 4, "s": 1.0},
        {"query": "the other 2 named queries", "calls": 3, "s": 0.75},
        {"query": "outside the named queries", "calls": None, "s": 1.25}]  # 6.0 - 4.75
    assert statements({}, 0.5) == [{"query": "outside the named queries", "calls": None, "s": 0.5}]


def test_steps_time_each_message_until_the_next_and_pass_it_on() -> None:
    said: list[str] = []
    steps = Steps(said.append)
    time.sleep(0.02)
    steps("  fitting\n")
    time.sleep(0.05)
    steps("replaying")
    time.sleep(0.01)
    done = steps.done()
    assert said == ["  fitting\n", "replaying"]
    assert [s["step"] for s in done] == ["before the first message", "fitting", "replaying"]
    assert done[0]["s"] >= 0.02 and done[1]["s"] >= 0.05 and done[2]["s"] >= 0.01

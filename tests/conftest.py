"""Shared fixtures: an in-memory workspace and a tiny way to load hand-written samples."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from app.economics import compiled
from app.load import load_frame
from app.store import Workspace

# real /metrics captures from public repositories, copied unchanged (see their SOURCES.md)
REAL_CAPTURES = Path(__file__).resolve().parent / "fixtures" / "real"

# an hour boundary, so windows of 1 min to 1 h start at t = 0
T0 = 1_700_000_000 - 1_700_000_000 % 3600
IN_CI = os.environ.get("CI") == "true"
# The files that take longest, longest first (seconds per file, fresh-clone CI run of 2026-12-03 on
# 2 cores): with ``--dist loadfile`` each file runs whole on one worker, and xdist would otherwise
# send files with many tests first, leaving these few-test, long files to the end, one worker busy
# with them while the other has nothing left (longest first: 1,083 s a worker instead of 1,022 and
# 1,144 on that run's times). Files not listed keep their order after these.
LONGEST_FIRST = (
    "test_sessions_load.py",  # 213
    "test_bench.py",  # 163
    "test_bad_inputs.py",  # 153
    "test_pushdown_live.py",  # 152
    "test_ray_grid.py",  # 134
    "test_browser.py",  # 109
    "test_twin_engine.py",  # 106
    "test_simulator.py",  # 102
    "test_crash_safety.py",  # 99
    "test_browser_corpus.py",  # 91
    "test_economics_accuracy.py",  # 89
    "test_pages.py",  # 62
    "test_cube.py",  # 57
    "test_cube_sparse.py",  # 55
    "test_ingest_text.py",  # 48
)


def pytest_configure(config: pytest.Config) -> None:
    """The replay engines compiled once for the whole run, beside the collection (a fresh checkout has
    no numba cache: each process would compile them, about a minute for both): the controller (or the
    one process without xdist) starts ``app.economics.compiled``, whose locks make the workers' first
    replay of each engine wait for it and then load the cache."""
    if not hasattr(config, "workerinput"):
        compiled.start_ahead()
    if hasattr(config.option, "loadscopereorder"):  # xdist: the files in the order collected (LONGEST_FIRST)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in its order; the tests within a file keep theirs."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def ts(seconds: float) -> datetime:
    """T0 + seconds as a naive UTC datetime (how DuckDB returns TIMESTAMP)."""
    return datetime.fromtimestamp(T0 + seconds, tz=UTC).replace(tzinfo=None)


def samples(metric: str, labels: dict[str, str], points: Sequence[tuple[float, float]]) -> list[dict]:
    """Rows for ``app.load.load_frame``: ``points`` are (seconds after T0, value)."""
    return [{"metric": metric, "labels": dict(labels), "ts": T0 + t, "value": float(v)} for t, v in points]


def histogram(family: str, labels: dict[str, str], les: Sequence[str],
              scrapes: Sequence[tuple[float, Sequence[float], float]]) -> list[dict]:
    """Rows of a classic histogram: each scrape is (t, cumulative bucket counts per le, sum)."""
    rows: list[dict] = []
    for t, counts, total in scrapes:
        for le, c in zip(les, counts, strict=True):
            rows += samples(f"{family}_bucket", {**labels, "le": le}, [(t, c)])
        rows += samples(f"{family}_count", labels, [(t, counts[-1])])
        rows += samples(f"{family}_sum", labels, [(t, total)])
    return rows


@pytest.fixture
def ws() -> Iterator[Workspace]:
    w = Workspace(":memory:")
    yield w
    w.close()


def load(ws: Workspace, rows: list[dict], name: str = "fixture") -> int:
    report = load_frame(ws, pd.DataFrame(rows), name)
    assert report.status == "loaded", report.errors
    return report.dataset_id

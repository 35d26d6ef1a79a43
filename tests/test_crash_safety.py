"""Crash safety: ``headroom load`` and the dashboard killed with SIGKILL in the middle of a load.

After every kill the workspace opens, everything saved before the load (datasets, the path mapping,
a promise, a saved scenario set) is intact, and the interrupted dataset is absent or whole: each
dataset's ``n_samples`` equals its rows in ``samples``, and no sample, series or cube belongs to a
dataset that is not there. The big file is the benchmark fleet (``app.bench.data``), large enough
that a kill at a random moment lands in the load (reading, the cube of its summary, the commit or
DuckDB's checkpoint after it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.bench.data import write_fleet_parquet
from app.economics import saved
from app.load import load_file
from app.store import Workspace

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
KILLS = 20
BIG_SAMPLES = 600_000
PROMISE = {"llama-3.1-8b-interactive": {"ttft_s": 0.5, "tpot_s": 0.03, "target": 0.99}}
SMALL = ROOT / "tests" / "fixtures" / "real" / "vllm-v0-opt125m-datadog.prom"


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), "HEADROOM_DB": ""}


def _prepare(db: Path) -> dict:
    """The workspace before any kill: one dataset, a path mapping, a promise, a saved scenario set."""
    with Workspace(db) as ws:
        report = load_file(ws, SMALL)
        assert report.status == "loaded", report.errors
        ws.set_paths(["__model__"], [("facebook/.*", "opt")])
        ws.set_setting("promises", PROMISE)
        saved.save(ws, "before the crash", {"datasets": [report.dataset_id]}, {"scenarios": [{"replicas": 3}]})
        return _state(ws)


def _state(ws: Workspace) -> dict:
    return {
        "datasets": ws.con.execute("select dataset_id, name, digest, n_series, n_samples from datasets "
                                   "where name != 'big-01.parquet' order by 1").fetchall(),
        "paths": (ws.path_labels(), ws.path_rules()),
        "promise": ws.get_setting("promises"),
        "saved": {name: saved.get(ws, name)["document"] for name in saved.names(ws)},
    }


def _check(db: Path, before: dict) -> str:
    """Open the workspace after a kill and hold it to the module's promise; returns what the big load left."""
    with Workspace(db) as ws:
        assert _state(ws) == before
        counts = ws.con.execute(
            "select d.name, d.n_samples, (select count(*) from samples as p where p.dataset_id = d.dataset_id) "
            "from datasets as d order by d.dataset_id").fetchall()
        for name, n_samples, rows in counts:
            assert n_samples == rows, f"dataset {name}: {n_samples} in datasets, {rows} samples"
        orphans = ws.con.execute(
            "select (select count(*) from samples where dataset_id not in (select dataset_id from datasets)), "
            "(select count(*) from series where series_id not in (select series_id from samples)), "
            "(select count(*) from cube_index where not list_has_all((select list(dataset_id) from datasets), "
            "cast(spec->'datasets' as integer[])))").fetchone()
        assert orphans == (0, 0, 0), orphans
        big = [c for c in counts if c[0] == "big-01.parquet"]
        if big:  # the load had committed: remove it so that the next run loads again
            ws.delete_dataset(ws.con.execute("select dataset_id from datasets where name = 'big-01.parquet'"
                                             ).fetchone()[0])
            return "whole"
        return "absent"


def test_headroom_load_killed_at_random_points_leaves_the_workspace_whole(tmp_path: Path) -> None:
    big = Path(write_fleet_parquet(tmp_path / "big", BIG_SAMPLES, stem="big").paths[0])
    db = tmp_path / "workspace.duckdb"
    before = _prepare(db)
    cmd = [sys.executable, "-m", "app", "load", str(big), "--db", str(db), "--format", "json"]
    # one load to the end gives the span the kills are spread over
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), check=True, capture_output=True, timeout=300)
    span = time.monotonic() - t0
    assert _check(db, before) == "whole"
    rng = random.Random(16)
    outcomes = []
    for _ in range(KILLS):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        delay = rng.uniform(0.15, 1.0) * span
        try:
            proc.wait(timeout=delay)
            finished = True
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            finished = False
        outcomes.append((round(delay, 2), finished, _check(db, before)))
    print(f"load span {span:.1f} s; (delay s, finished before the kill, big dataset after):", outcomes)
    killed = [o for o in outcomes if not o[1]]
    assert len(killed) >= KILLS // 2, outcomes  # most kills must land inside the load
    assert {o[2] for o in killed} <= {"absent", "whole"}

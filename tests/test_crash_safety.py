"""Crash safety: ``headroom load`` and the dashboard killed with SIGKILL in the middle of a load.

After every kill the workspace opens, everything saved before the load (datasets, the path mapping,
a promise, a saved scenario set) is intact, and the interrupted dataset is absent or whole: each
dataset's ``n_samples`` equals its rows in ``samples``, and no sample, series or cube belongs to a
dataset that is not there. The big file is the benchmark fleet (``app.bench.generate``), large enough
that a kill at a random moment lands in the load (reading, the cube of its summary, the commit or
DuckDB's checkpoint after it).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.bench.generate import write_fleet_parquet
from app.economics.decide import saved
from app.load import load_file
from app.store import Workspace
from tests.support.servers import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
KILLS = 20
DASHBOARD_KILLS = 3
BIG_SAMPLES = 500_000
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
                                   "where name not in ('big-01.parquet', 'bundled sample') order by 1").fetchall(),
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


def _wait_for_open(proc: subprocess.Popen, wal: Path) -> float:
    """Poll until the process has opened the workspace for writing (its WAL appears: the connect
    refreshes the signal map) or has ended; the moment it did (monotonic seconds)."""
    while not wal.exists() and proc.poll() is None:
        time.sleep(0.01)
    return time.monotonic()


def test_headroom_load_killed_at_random_points_leaves_the_workspace_whole(tmp_path: Path) -> None:
    big = Path(write_fleet_parquet(tmp_path / "big", BIG_SAMPLES, stem="big").paths[0])
    db = tmp_path / "workspace.duckdb"
    wal = db.with_name(db.name + ".wal")
    before = _prepare(db)
    assert not wal.exists()  # closed cleanly: checkpointed
    cmd = [sys.executable, "-m", "app", "load", str(big), "--db", str(db), "--format", "json"]
    # one load to the end gives the span the kills are spread over: from the workspace's opening (after
    # Python's imports) to the process' end
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    opened = _wait_for_open(proc, wal)
    assert proc.wait(timeout=300) == 0
    span = time.monotonic() - opened
    assert _check(db, before) == "whole"
    rng = random.Random(16)
    outcomes = []
    for _ in range(KILLS):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _wait_for_open(proc, wal)
        delay = rng.uniform(0.0, 1.1) * span
        try:
            proc.wait(timeout=delay)
            finished = True
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            finished = False
        outcomes.append((round(delay, 2), finished, wal.exists(), _check(db, before)))
    print(f"load span {span:.1f} s after the workspace opens; (kill delay s, finished before the kill, WAL left, "
          "big dataset after):", outcomes)
    killed = [o for o in outcomes if not o[1]]
    assert len(killed) >= KILLS // 2, outcomes  # most kills must land inside the load
    assert {o[3] for o in killed} <= {"absent", "whole"}


async def _open_session(port: int, timeout_s: float = 60.0) -> None:
    """What a browser tab does first: open Streamlit's websocket and ask for a run of the page, which
    opens the workspace (an empty one loads the bundled sample day)."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ws = await websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"])
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_script_hash = ""
    await ws.send(msg.SerializeToString())
    # the connection is left open: the server is killed under it


def test_the_dashboard_killed_while_it_loads_the_sample_on_first_start(tmp_path: Path) -> None:
    db = tmp_path / "workspace.duckdb"
    with Workspace(db) as ws:  # saved before the first start: a mapping, a promise, a set (no dataset yet)
        ws.set_paths(["__model__"], [(".*interactive.*", "chat")])
        ws.set_setting("promises", PROMISE)
        saved.save(ws, "before the crash", {"datasets": []}, {"scenarios": [{"replicas": 3}]})
        before = _state(ws)
    rng = random.Random(7)
    outcomes = []
    for _ in range(DASHBOARD_KILLS):
        port = free_port()
        env = {**_env(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
        proc = subprocess.Popen([sys.executable, "-m", "app", "dashboard", "--db", str(db), "--port", str(port)],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            asyncio.run(_open_session(port))
            size0 = db.stat().st_size
            # the load has begun once the workspace grows (or its WAL appears); kill a random moment later
            deadline = time.monotonic() + 60
            while db.stat().st_size == size0 and not db.with_name(db.name + ".wal").exists():
                assert time.monotonic() < deadline, "the dashboard never started loading the sample"
                time.sleep(0.05)
            time.sleep(rng.uniform(0.2, 4.0))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        with Workspace(db) as ws:
            assert _state(ws) == before
            rows = ws.con.execute(
                "select d.name, d.n_samples, (select count(*) from samples as p where p.dataset_id = d.dataset_id) "
                "from datasets as d").fetchall()
            assert all(n == m for _, n, m in rows), rows
            assert ws.con.execute("select count(*) from samples where dataset_id not in "
                                  "(select dataset_id from datasets)").fetchone()[0] == 0
            outcomes.append("whole" if rows else "absent")
            for dataset_id in ws.dataset_ids():  # loaded to the end before the kill: start empty again
                ws.delete_dataset(dataset_id)
    print("the sample after each dashboard kill:", outcomes)

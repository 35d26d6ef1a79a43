"""The promise tables on the bench's 30-day, 10-path cube, to check that a change to the promise
queries leaves them exactly as they were, and to time ``promise.evaluate`` there.

    python -m tests.support.promise_tables dump BEFORE.pkl        # on the old code
    python -m tests.support.promise_tables dump AFTER.pkl         # on the new code
    python -m tests.support.promise_tables compare BEFORE.pkl AFTER.pkl
    python -m tests.support.promise_tables time --runs 15

The cube is the one ``headroom bench --only interaction`` builds (``app.bench.generate.cube_rows``),
written once to ``--db`` and reused. ``dump`` evaluates a fixed list of promise sets (the bench's
first changes, every signal with a lower target, per-path promises without failed requests) and
keeps each set's ``evaluate`` tables and ``shares`` over the range and by window; ``compare``
requires the same values, dtypes and row order (exact, no tolerance). ``time`` prints the median
wall and CPU time of ``evaluate`` over the bench's sequence of promises, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from app.bench import generate
from app.bench.suites import WINDOW_S
from app.cube import store_rows
from app.promise import shares as pm
from app.store import Workspace

DEFAULT_DB = Path("/tmp/headroom-promise-tables.duckdb")


def workspace(db: Path) -> Workspace:
    """The bench's interaction workspace at ``db`` (built on first use: about a minute)."""
    if not db.exists():
        table = generate.cube_rows(30, 10, WINDOW_S)
        ws = Workspace(str(db))
        ws.con.register("bench_cube", table)
        store_rows(ws.con, 1, "bench_cube", WINDOW_S)
        ws.con.unregister("bench_cube")
        spec = {"datasets": [], "window_s": WINDOW_S, "path_labels": ["model_name"], "rules": []}
        ws.con.execute("insert into cube_index (cube_key, cube_id, spec) values ('bench', 1, $s)",
                       {"s": json.dumps(spec)})
        ws.close()
    ws = Workspace(str(db))
    ws.con.execute("set enable_progress_bar = false")
    return ws


def promise_sets() -> list[tuple[list[pm.Promise], bool]]:
    """(promises, include_failed) pairs that reach every branch of the share and alert arithmetic."""
    sets = [([pm.Promise(ttft_s=0.25 + 0.05 * i, tpot_s=0.04 + 0.002 * i, target=0.99)], True) for i in range(4)]
    sets.append(([pm.Promise(ttft_s=0.3, tpot_s=0.05, e2e_s=8.0, queue_s=0.1, target=0.95)], True))
    sets.append(([pm.Promise(path=p, ttft_s=0.2 + 0.1 * k, tpot_s=0.03, target=0.999)
                  for k, p in enumerate(generate.PATHS[:3])], False))
    return sets


def dump(ws: Workspace, out: Path) -> None:
    start, end = pm.time_range(ws, 1, None, None)
    tables: list[dict[str, pd.DataFrame]] = []
    for promises, include_failed in promise_sets():
        t = pm.evaluate(ws, 1, WINDOW_S, promises, start, end, include_failed=include_failed)
        tables.append({"paths": t.paths, "windows": t.windows, "alerts": t.alerts,
                       "shares": pm.shares(ws, 1, promises, start, end, include_failed=include_failed),
                       "shares_by_window": pm.shares(ws, 1, promises, start, end, by_window=True,
                                                     include_failed=include_failed)})
    with out.open("wb") as fh:
        pickle.dump(tables, fh)
    rows = sum(len(f) for t in tables for f in t.values())
    print(f"{out}: {len(tables)} promise sets, {rows:,} rows")


def compare(a: Path, b: Path) -> int:
    with a.open("rb") as fa, b.open("rb") as fb:
        left, right = pickle.load(fa), pickle.load(fb)
    if len(left) != len(right):
        print(f"{len(left)} promise sets against {len(right)}")
        return 1
    for i, (x, y) in enumerate(zip(left, right, strict=True)):
        for name in x:
            try:
                pd.testing.assert_frame_equal(x[name], y[name], check_exact=True)
            except AssertionError as exc:
                print(f"promise set {i}, {name}: {exc}")
                return 1
    print(f"identical: {len(left)} promise sets x {len(left[0])} tables")
    return 0


def timing(ws: Workspace, runs: int) -> dict[str, Any]:
    start, end = pm.time_range(ws, 1, None, None)
    wall, cpu = [], []
    for i in range(runs):
        promises = [pm.Promise(ttft_s=0.25 + 0.05 * i, tpot_s=0.04 + 0.002 * i, target=0.99)]
        c0, t0 = time.process_time(), time.perf_counter()
        pm.evaluate(ws, 1, WINDOW_S, promises, start, end)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"median_ms": round(statistics.median(wall) * 1000, 1), "min_ms": round(min(wall) * 1000, 1),
            "cpu_median_ms": round(statistics.median(cpu) * 1000, 1), "runs": runs,
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=DEFAULT_DB)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dump").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    sub.add_parser("time").add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    if args.cmd == "compare":
        return compare(args.a, args.b)
    ws = workspace(args.db)
    try:
        if args.cmd == "dump":
            dump(ws, args.out)
        else:
            print(json.dumps(timing(ws, args.runs)))
    finally:
        ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

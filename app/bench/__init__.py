"""``headroom bench``: Headroom against what users would otherwise use, measured in the same run.

Every benchmark generates its data deterministically (:mod:`app.bench.data`) at the chosen size and
measures a pair — Headroom and a reference — in the same run, checking that the pair agrees where it
must:

- ``text_ingest``: Headroom's DuckDB parser against ``prometheus_client``'s on the same text
  exposition (the same samples, asserted);
- ``parquet_load``, ``cube_build``: long-format Parquet into a workspace, and the cube built from it,
  against the floor ``select count(*), sum(value)`` over the same Parquet, at three sizes (the growth
  exponent comes from these; the cube is timed from scratch); ``parquet_to_cube``: the load (which
  keeps a file's 5-minute cube) + the first cube after it against a straightforward pandas cube
  (:mod:`app.bench.reference`; the cubes asserted identical);
- ``promql_cube``: the cube build against the PromQL range queries giving the same rows, on the same
  samples backfilled into Prometheus (where ``prometheus`` and ``promtool`` are installed);
- ``promise_change``, ``price_change``: what a threshold or a price change costs on a month-long,
  ten-path cube with its scenario replays cached;
- ``scenario_replay``, ``scenario_grid``: the economics replay in seconds per simulated replica-hour,
  and a 10-scenario grid over a day of 4-replica demand, sequential and on every core;
  ``scenario_grid_ray`` (with ``ray``, an address as ``headroom scenarios --ray`` takes it): the same
  grid on a Ray cluster against the local pool (the same predictions, asserted).

``run("small")`` takes under a minute (a test keeps it working); ``run("full")`` runs the sizes of
the benchmarks issue (1 M text lines; 1 M, 10 M and 100 M samples; a 30-day cube; a simulated day).
Timings are wall-clock, best of the runs (medians for the interactions); the JSON keeps every run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.bench import render, suites
from app.bench.measure import Result, machine

BENCHMARKS = ("text_ingest", "cube", "replay", "interaction")


def run(size: str = "small", only: Sequence[str] | None = None, workdir: str | Path | None = None,
        log: Callable[[str], None] | None = None, promql: bool = True, ray: str | None = None) -> dict[str, Any]:
    """Run the benchmarks of ``size`` (``small`` or ``full``) and return the document of
    :func:`app.bench.render.document`. ``only`` picks among :data:`BENCHMARKS`; ``workdir`` keeps the
    generated data (default: a temporary directory, removed afterwards); ``ray``: a Ray cluster the
    replay benchmark also runs its grid on."""
    if size not in suites.SIZES:
        raise ValueError(f"size {size!r}: expected one of {', '.join(suites.SIZES)}")
    chosen = list(only) if only else list(BENCHMARKS)
    unknown = [b for b in chosen if b not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    say = log or (lambda _msg: None)
    spec = suites.SIZES[size]
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="headroom-bench-")) if own_dir else Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    info = machine()
    t0 = time.perf_counter()
    results: list[Result] = []
    try:
        if "text_ingest" in chosen:
            say("== text exposition ingest")
            results += suites.text_ingest(spec, root, say)
        if "cube" in chosen:
            say("== cube builds")
            results += suites.cube_builds(spec, root, say, promql=promql)
        analysis, predictions = None, []
        if "replay" in chosen or "interaction" in chosen:
            say("== scenario replay")
            replay_results, analysis, predictions = suites.scenario_replay(
                spec if "replay" in chosen else _replay_for_interaction(spec), root, say,
                ray_address=ray if "replay" in chosen else None)
            if "replay" in chosen:
                results += replay_results
        if "interaction" in chosen:
            say("== interaction")
            results += suites.interaction(spec, root, say, analysis, predictions)
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    return render.document(info, results, suites.growth_exponent(results), size, time.perf_counter() - t0)


def _replay_for_interaction(spec: suites.Size) -> suites.Size:
    """The interaction benchmark needs cached predictions, not the replay timings: a short day will do."""
    from dataclasses import replace

    return replace(spec, replay_hours=min(spec.replay_hours, 0.5), repeat=1)


__all__ = ["BENCHMARKS", "run"]

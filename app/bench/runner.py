"""``headroom bench``'s runner: the benchmarks of a size, in order, into one document (see :mod:`app.bench`)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app import provenance
from app.bench import document, suites
from app.bench.measure import Result, machine

BENCHMARKS = ("text_ingest", "cube", "replay", "interaction", "month", "month15")


def run(size: str = "small", only: Sequence[str] | None = None, workdir: str | Path | None = None,
        log: Callable[[str], None] | None = None, promql: bool = True, ray: str | None = None) -> dict[str, Any]:
    """Run the benchmarks of ``size`` (``small`` or ``full``) and return the document of
    :func:`app.bench.document.document`. ``only`` picks among :data:`BENCHMARKS`; ``workdir`` keeps the
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
    flags = f" --only {','.join(chosen)}" if only else ""
    origin = provenance.record(f"headroom bench --size {size}{flags}" + (" --ray ADDRESS" if ray else ""))
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
        if "month" in chosen:
            say(f"== economics at month scale ({spec.month_hours:g} h of {spec.month_replicas} replicas)")
            try:
                results += suites.economics_month(spec, root, say)
            except RuntimeError as exc:  # e.g. its process killed for memory: the other rows still count
                if size == "small":
                    raise
                say(f"  economics_month failed, no row: {exc}")
        if "month15" in chosen:
            say(f"== economics at month scale, scraped every 15 s ({spec.month15_hours:g} h of "
                f"{spec.month15_replicas} replicas)")
            try:
                results += suites.economics_month_15s(spec, root, say)
            except RuntimeError as exc:
                if size == "small":
                    raise
                say(f"  economics_month_15s failed, no row: {exc}")
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    return document.document(info, results, suites.growth_exponent(results), size, time.perf_counter() - t0,
                           origin)


def _replay_for_interaction(spec: suites.Size) -> suites.Size:
    """The interaction benchmark needs cached predictions, not the replay timings: a short day will do."""
    return replace(spec, replay_hours=min(spec.replay_hours, 0.5), repeat=1)


__all__ = ["BENCHMARKS", "run"]

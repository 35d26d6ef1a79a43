"""Timing helpers: best-of-N in this process, one task in a fresh child process (its own peak RSS),
and a description of the machine.

Other jobs may share the cores, so every figure is the best of its runs and the JSON keeps all runs
(their spread is the noise). Pairs (Headroom and its reference) are always measured in the same run.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Result:
    """One row of the benchmark table. ``seconds`` is per ``unit`` (``"run"`` unless stated: the
    scenario replay reports seconds per simulated replica-hour)."""

    name: str
    samples: int | None
    seconds: float
    reference: str | None = None
    reference_seconds: float | None = None
    peak_rss_mb: float | None = None
    unit: str = "run"
    runs: list[float] = field(default_factory=list)
    reference_runs: list[float] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """reference_seconds / seconds: above 1, Headroom is faster."""
        if self.reference_seconds is None or not self.seconds:
            return None
        return self.reference_seconds / self.seconds

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = None if self.ratio is None else float(f"{self.ratio:.4g}")  # 4 significant digits
        for key in ("seconds", "reference_seconds"):
            if out[key] is not None:
                out[key] = round(out[key], 6)
        out["runs"] = [round(x, 6) for x in self.runs]
        out["reference_runs"] = [round(x, 6) for x in self.reference_runs]
        if out["peak_rss_mb"] is not None:
            out["peak_rss_mb"] = round(out["peak_rss_mb"], 1)
        order = ["name", "samples", "seconds", "reference", "reference_seconds", "ratio", "peak_rss_mb", "unit",
                 "runs", "reference_runs", "detail"]
        return {k: out[k] for k in order}


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[list[float], Any]:
    """Wall-clock seconds of ``repeat`` calls of ``fn`` and the last call's value."""
    runs, value = [], None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        value = fn()
        runs.append(time.perf_counter() - t0)
    return runs, value


def statements(times: dict[str, list[float]], total_s: float, top: int = 8) -> list[dict[str, Any]]:
    """Where a call of ``total_s`` seconds went, by named query (``app.sql.statement_times``): the
    ``top`` queries by seconds (``query``, ``calls``, ``s``), then the other named queries together and
    the time outside every named query (Python, DDL, transaction control, the readers' own checks)."""
    ranked = sorted(times.items(), key=lambda kv: -kv[1][1])
    out = [{"query": name, "calls": int(calls), "s": round(seconds, 4)} for name, (calls, seconds) in ranked[:top]]
    rest = ranked[top:]
    if rest:
        out.append({"query": f"the other {len(rest)} named queries", "calls": int(sum(c for _, (c, _s) in rest)),
                    "s": round(sum(s for _, (_c, s) in rest), 4)})
    named = sum(s for _, (_c, s) in ranked)
    out.append({"query": "outside the named queries", "calls": None, "s": round(max(total_s - named, 0.0), 4)})
    return out


class Steps:
    """A progress callback that times the steps it announces: each message starts a step that lasts
    until the next message (or :meth:`done`), and is passed on to ``say``."""

    def __init__(self, say: Callable[[str], None] = lambda _m: None) -> None:
        self._say = say
        self._steps: list[dict[str, Any]] = []
        self._started = time.perf_counter()
        self._current = "before the first message"

    def __call__(self, message: str) -> None:
        self._close()
        self._current = message.strip()
        self._say(message)

    def _close(self) -> None:
        now = time.perf_counter()
        self._steps.append({"step": self._current, "s": round(now - self._started, 3)})
        self._started = now

    def done(self) -> list[dict[str, Any]]:
        """The steps so far, in order, with their seconds (a step that took no measurable time is left out)."""
        self._close()
        steps, self._steps = [s for s in self._steps if s["s"] > 0.0005], []
        return steps


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (the JSON keeps the name ``peak_rss_mb``):
    ``VmHWM`` of ``/proc/self/status`` (the high-water mark of this program's memory; ``getrusage``'s
    ``ru_maxrss`` would also count the parent's memory at the fork that started this process), else
    ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS, so that the next
    :func:`peak_rss_mb` is the peak of what runs from now on (Linux: ``/proc/self/clear_refs``);
    False where that is not possible (the peak then stays the process's)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _status_kb(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class ChildMemory:
    """Samples, on a thread, the memory of this process's child processes (a pool's workers): the
    highest ``VmHWM`` of any child, and the highest sum of this process's and its children's RSS seen
    at one instant (every ``interval_s``; growth in a child's last interval before it exits is
    missed). Use as a context manager."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.child_peak_mb = 0.0
        self.tree_peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _children(self) -> list[int]:
        me = os.getpid()
        out = []
        for task in Path(f"/proc/{me}/task").glob("*/children"):
            try:
                out += [int(x) for x in task.read_text().split()]
            except (OSError, ValueError):
                continue
        return out

    def _watch(self) -> None:
        while not self._stop.is_set():
            total = _status_kb(os.getpid(), "VmRSS") or 0
            for pid in self._children():
                total += _status_kb(pid, "VmRSS") or 0
                self.child_peak_mb = max(self.child_peak_mb, (_status_kb(pid, "VmHWM") or 0) / 1024)
            self.tree_peak_mb = max(self.tree_peak_mb, total / 1024)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> ChildMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def child(task: dict[str, Any], workdir: Path, timeout_s: float = 7200,
          log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one task of :mod:`app.bench.worker` in a fresh Python process and return its JSON answer
    (it measures its own time and peak RSS, so neither includes this process). ``log`` receives the
    task's progress lines (its stderr) as they come."""
    env = dict(os.environ)
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(tmp)  # DuckDB spills under the bench's own directory
    errors: list[str] = []
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.bench.worker", json.dumps(task)], stdout=out,
                                stderr=subprocess.PIPE, text=True, env=env,
                                cwd=str(Path(__file__).resolve().parents[2]))
        assert proc.stderr is not None
        deadline = time.monotonic() + timeout_s
        for line in proc.stderr:  # until the task closes it (exits)
            errors.append(line.rstrip("\n"))
            if log is not None and line.startswith("  "):
                log(line.rstrip("\n"))
            if time.monotonic() > deadline:
                proc.kill()
                break
        code = proc.wait()
        out.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("{")]
    if code != 0 or not lines:
        tail = errors[-5:]
        raise RuntimeError(f"bench task {task.get('task')} failed (exit {code}): " + " | ".join(tail))
    return json.loads(lines[-1])


def machine() -> dict[str, Any]:
    """Cores, memory, Python and DuckDB versions (and pandas, for the reference)."""
    import duckdb
    import pandas as pd

    mem_gb = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cores": os.cpu_count(), "memory_gb": mem_gb, "python": platform.python_version(),
            "duckdb": duckdb.__version__, "pandas": pd.__version__, "platform": platform.platform(),
            "load_average_at_start": None if load is None else round(load, 2)}


def profile(fn: Callable[[], Any], repeat: int = 3, top: int = 8) -> list[dict[str, Any]]:
    """Where a call's time goes: ``fn`` run ``repeat`` times under cProfile, the ``top`` functions of
    Headroom (``app/``) and of the libraries it calls by cumulative time, milliseconds per call."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeat):
        fn()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = []
    root = str(Path(__file__).resolve().parents[2])
    for (file, line, name), (_, _, _, cumulative, _) in stats.items():
        if file.startswith(root):
            where = f"{Path(file).resolve().relative_to(root)}:{name}"
        elif "site-packages" in file:
            where = f"{file.split('site-packages/')[1].split('/')[0]}:{name}"
        else:
            continue
        rows.append({"function": where, "line": line, "ms": round(cumulative / repeat * 1000, 2)})
    rows.sort(key=lambda r: -r["ms"])
    return rows[1:top + 1]  # the first is fn itself

"""One run of the real engine: a trace through N replicas, scraped by Prometheus, exported.

A run directory holds ``run.json`` (what was run, where and when), ``trace.jsonl`` (the requests),
``requests.jsonl`` (the driver's per-request truth), ``export.json`` (the ``query_range`` JSON),
``export.dump`` (``promtool tsdb dump``), ``steps-<core>.csv`` (the engine's per-step log) and the
replicas' and Prometheus' logs.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from app.bench.realengine import fleet as fl
from app.bench.realengine.trace import TraceSpec, generate

SETTLE_S = 12.0  # scrapes before the first request and after the last: the export's baselines
# a run waits until the cores it will hold are idle (busy below this share over QUIET_SAMPLE_S): work
# pinned to a core the run leaves free slowed a replica's steps by 1-3 %, work on its own core halved it
QUIET_BUSY = 0.15
QUIET_SAMPLE_S = 10.0
QUIET_WAIT_S = 3600.0
# while a run goes on this file says which cores it holds ("all" or "one"), so that other jobs on the
# machine can hold their heavy work (two replicas take every core; one leaves a core to share)
BUSY_FILE = Path(os.environ.get("HEADROOM_ENGINE_BUSY_FILE", "/tmp/headroom-engine-busy"))


def _cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat."""
    out = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            out.append((sum(v) - idle, sum(v)))
    return out


class LoadMonitor:
    """The machine's load while a run goes on: each CPU's busy share and the load average, sampled
    every few seconds. A replica's speed depends on what else the machine runs (two cores that share
    a physical core or a memory bus slow each other), so every run says how quiet the machine was."""

    def __init__(self, every_s: float = 5.0):
        self.every_s, self.samples, self._stop = every_s, [], threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        last = _cpu_times()
        while not self._stop.wait(self.every_s):
            now = _cpu_times()
            busy = [(b1 - b0) / max(t1 - t0, 1) for (b0, t0), (b1, t1) in zip(last, now, strict=False)]
            self.samples.append({"t": time.time(), "busy": busy, "load1": os.getloadavg()[0]})
            last = now

    def __enter__(self) -> LoadMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def summary(self) -> dict:
        if not self.samples:
            return {}
        busy = list(zip(*[s["busy"] for s in self.samples], strict=False))
        return {"cpu_busy_mean": [round(sum(b) / len(b), 3) for b in busy],
                "cpu_busy_max": [round(max(b), 3) for b in busy],
                "load1_max": round(max(s["load1"] for s in self.samples), 2), "samples": len(self.samples)}


def wait_for_quiet(cores: list[int], say=lambda _m: None, timeout_s: float = QUIET_WAIT_S) -> float:
    """Wait until each of ``cores`` is idle (busy below ``QUIET_BUSY`` over ``QUIET_SAMPLE_S``): another
    job's tests or builds there would slow the replicas, and the truth would be that job's, not the
    engine's. The seconds waited."""
    t0 = time.monotonic()
    told = False
    while time.monotonic() - t0 < timeout_s:
        before = _cpu_times()
        time.sleep(QUIET_SAMPLE_S)
        after = _cpu_times()
        busy = [(after[c][0] - before[c][0]) / max(after[c][1] - before[c][1], 1) for c in cores]
        if max(busy) < QUIET_BUSY:
            break
        if not told:
            say(f"waiting for idle cores {cores} (busy {', '.join(f'{100 * b:.0f} %' for b in busy)})")
            told = True
    return time.monotonic() - t0


@dataclass
class RunSpec:
    name: str
    replicas: int = 1
    traffic: float = 1.0
    context: float = 1.0
    scrape_s: int = 5
    trace: TraceSpec = field(default_factory=TraceSpec)
    flags: fl.EngineFlags = field(default_factory=fl.EngineFlags)
    repeat: int = 0  # a repeat of the same scenario (the truth's own noise)
    router: str = "least_outstanding"  # the driver's: or "sticky" (a conversation stays on its replica)

    def as_json(self) -> dict:
        d = asdict(self)
        d["trace"] = self.trace.as_json()
        return d


def machine() -> dict:
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "python": platform.python_version(),
            "system": platform.platform()}


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(spec: RunSpec, model_dir: Path, out: Path, say=lambda _m: None) -> Path:
    """Run ``spec`` on the real engine into ``out`` (created); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cores = os.sched_getaffinity(0)
    if spec.replicas > len(cores):
        raise fl.HarnessError(f"{spec.replicas} replicas need {spec.replicas} cores; this machine lends "
                              f"{len(cores)}")
    replica_cores = sorted(cores)[:spec.replicas]
    free = sorted(set(cores) - set(replica_cores))
    helper_core = free[0] if free else None  # the driver and Prometheus; None: they share the replicas'
    trace = generate(spec.trace, spec.traffic, spec.context, spec.flags.max_model_len)
    trace.write_jsonl(out / "trace.jsonl")
    (out / "spec.json").write_text(json.dumps(spec.trace.as_json()))
    say(f"{spec.name}: {len(trace)} requests over {spec.trace.duration_s:.0f} s through {spec.replicas} "
        f"replica(s) on cores {replica_cores}")
    meta = {"spec": spec.as_json(), "machine": machine(), "commit": commit(), "vllm": fl.VLLM_VERSION,
            "cores": {"replicas": replica_cores, "driver_and_prometheus": helper_core}}
    meta["waited_for_quiet_s"] = round(wait_for_quiet(replica_cores, say), 1)
    BUSY_FILE.write_text(f"{'one' if helper_core is not None else 'all'} {spec.name}\n")
    try:
        return _run(spec, model_dir, out, say, meta, replica_cores, helper_core)
    finally:
        BUSY_FILE.unlink(missing_ok=True)


def _run(spec: RunSpec, model_dir: Path, out: Path, say, meta: dict, replica_cores: list[int],
         helper_core: int | None) -> Path:
    fleet = fl.start_fleet(model_dir, replica_cores, spec.flags, out)
    prom = None
    monitor = LoadMonitor()
    try:
        prom = fl.start_prometheus([r.url.removeprefix("http://") for r in fleet.replicas], spec.scrape_s, out,
                                   core=helper_core)
        time.sleep(SETTLE_S)
        start = time.time() + 1.0
        argv = [sys.executable, "-m", "app.bench.realengine.driver", str(out / "trace.jsonl"),
                str(out / "requests.jsonl"), "--model", spec.flags.served_model_name, "--spec",
                str(out / "spec.json"), "--start-at", f"{start:.6f}", "--router", spec.router,
                "--max-model-len", str(spec.flags.max_model_len)]
        for r in fleet.replicas:
            argv += ["--url", r.url]
        if helper_core is not None:
            argv = ["taskset", "-c", str(helper_core), *argv]
        with monitor:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise fl.HarnessError(f"the driver failed:\n{done.stderr[-3000:]}")
        meta["driver"] = json.loads(done.stdout.strip().splitlines()[-1])
        meta["machine_load"] = monitor.summary()
        time.sleep(SETTLE_S)
        end = time.time()
        meta["window_unix"] = [start - SETTLE_S, end]
        fl.export_query_range(prom, start - SETTLE_S, end, spec.scrape_s, out / "export.json")
        for r in fleet.replicas:  # each replica's /metrics at the end: a capture of the engine's families
            fl.capture_metrics(r.url, out / f"metrics-{r.core}.prom")
    finally:
        if prom is not None:
            prom.stop()
        fleet.stop()
    fl.export_tsdb_dump(prom.data, meta["window_unix"][0] - 1, meta["window_unix"][1] + 1, out / "export.dump")
    year = datetime.now(UTC).year
    for r in fleet.replicas:
        rows = fl.step_log(r.log, year)
        with (out / f"steps-{r.core}.csv").open("w", newline="") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
    meta["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    (out / "run.json").write_text(json.dumps(meta, indent=1))
    say(f"{spec.name}: done, {meta['driver']['errors']} errors, {meta['driver']['sent_late']} sent late")
    return out

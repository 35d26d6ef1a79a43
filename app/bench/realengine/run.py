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
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from app.bench.realengine import fleet as fl
from app.bench.realengine.trace import TraceSpec, generate

SETTLE_S = 12.0  # scrapes before the first request and after the last: the export's baselines


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
    fleet = fl.start_fleet(model_dir, replica_cores, spec.flags, out)
    prom = None
    try:
        prom = fl.start_prometheus([r.url.removeprefix("http://") for r in fleet.replicas], spec.scrape_s, out,
                                   core=helper_core)
        time.sleep(SETTLE_S)
        start = time.time() + 1.0
        argv = [sys.executable, "-m", "app.bench.realengine.driver", str(out / "trace.jsonl"),
                str(out / "requests.jsonl"), "--model", spec.flags.served_model_name, "--spec",
                str(out / "spec.json"), "--start-at", f"{start:.6f}"]
        for r in fleet.replicas:
            argv += ["--url", r.url]
        if helper_core is not None:
            argv = ["taskset", "-c", str(helper_core), *argv]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise fl.HarnessError(f"the driver failed:\n{done.stderr[-3000:]}")
        meta["driver"] = json.loads(done.stdout.strip().splitlines()[-1])
        time.sleep(SETTLE_S)
        end = time.time()
        meta["window_unix"] = [start - SETTLE_S, end]
        fl.export_query_range(prom, start - SETTLE_S, end, spec.scrape_s, out / "export.json")
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

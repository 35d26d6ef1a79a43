"""The Ray executor: a scenario grid's runs fanned out as Ray tasks over an existing cluster
(``pip install 'headroom-slo[ray]'``; ``headroom scenarios --ray ADDRESS``).

Ray is an optional extra, so this module imports it only when it runs (:func:`_import_ray`):
importing Headroom, or choosing the local pool, never needs it. The driver connects with
``ray.init(address)`` — ``HOST:PORT`` (the head's GCS port, from a machine of the cluster), ``auto``
(a cluster already running here, or the one a Ray job runs in; never a new one) or
``ray://HOST:10001`` (Ray Client, from outside the cluster) — and ships the ``app`` package of this
process to the workers as a runtime environment (``py_modules``), so that they run the driver's code,
not whichever Headroom the cluster's image holds; the workers need Headroom's dependencies
(DuckDB, NumPy, pandas, PyArrow, SciPy) and the driver's Ray and Python minor versions.

The fitted analysis is put in the object store once (``ray.put``) and fetched by each worker
process once; each task returns one run, and results are yielded as tasks complete. So is the driver's
numba cache of the engines (:func:`app.economics.run.compiled.cache_files`, about 7 MB): a worker whose
unpacked copy of ``app`` has no cache yet installs it and loads the engines instead of compiling them
(about half a minute of CPU per worker); on a machine unlike the driver's, numba compiles as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from app.economics.run import compiled
from app.economics.run.executors import Affinity, ExecutorError, RunFn

INSTALL_HINT = "pip install 'headroom-slo[ray]'"
# the package the workers import: this process's own app/ (in a wheel install it holds the bundled
# sample and the queries too, which no run reads)
APP_DIR = Path(__file__).resolve().parents[2]  # app/economics/run/ray_executor.py -> app/
EXCLUDES = ["__pycache__", "*.pyc", "/data", "/queries"]  # gitignore patterns, relative to APP_DIR
# what a Ray Client connection raises when the head's server process for it exited at start (before,
# or after, the head saw it running)
CLIENT_SERVER_FAILED = ("Starting Ray client server failed", "Proxy failed to Connect to backend")
CONNECT_ATTEMPTS = 2


def _import_ray() -> ModuleType:
    """Ray, imported here rather than at the top of the module: it is an optional dependency."""
    try:
        import ray
    except ImportError as exc:
        raise ExecutorError(f"running on Ray needs the ray extra: {INSTALL_HINT}") from exc
    return ray


def runtime_env() -> dict[str, Any]:
    """The runtime environment of the driver's connection: the workers import this ``app``."""
    return {"py_modules": [str(APP_DIR)], "excludes": list(EXCLUDES)}


# per worker process: the context of the call it serves (by object id) and that call's cache
_LOADED: dict[str, tuple[Any, dict[Any, Any]]] = {}


def _run_task(fn: RunFn, boxed: list[Any], job: Any) -> Any:
    """One run in a Ray worker. ``boxed`` holds the object references of the context and of the
    driver's engine cache inside a list, so that Ray does not resolve them for every task: the worker
    fetches them once per call, installs the cache where it has none and keeps the context."""
    ray = _import_ray()
    ref, engines = boxed
    key = ref.hex()
    if key not in _LOADED:
        _LOADED.clear()  # a new grid: the previous one's analysis and synthesized requests go
        compiled.install_cache(ray.get(engines))
        _LOADED[key] = (ray.get(ref), {})
    context, cache = _LOADED[key]
    return fn(context, job, cache)


class RayCluster:
    """The jobs as Ray tasks (one CPU each) on the cluster at ``address``. Connects for the call and
    disconnects after it, unless this process was already connected (then its connection, and its
    runtime environment, are used as they are)."""

    def __init__(self, address: str) -> None:
        if not address:
            raise ExecutorError("a Ray address is needed: HOST:PORT, auto, or ray://HOST:10001")
        _import_ray()  # a missing extra is said before anything runs
        self.address = address

    def describe(self) -> str:
        return f"the Ray cluster at {self.address}"

    def _connect(self, ray: ModuleType, say: Callable[[str], None] | None) -> None:
        """``ray.init`` on the address, with this process's ``app`` as the runtime environment. A Ray
        Client connection whose server on the head failed to start is tried again: the head starts a
        new server process for each connection. A failed ``ray.init`` leaves Ray's global state half
        set (a later ``ray.init`` in this process then fails on an assertion), so it is shut down."""
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                ray.init(address=self.address, runtime_env=runtime_env(), log_to_driver=False,
                         logging_level=logging.WARNING)
                return
            except (ConnectionError, RuntimeError, ValueError) as exc:
                ray.shutdown()
                if attempt < CONNECT_ATTEMPTS and any(m in str(exc) for m in CLIENT_SERVER_FAILED):
                    if say:
                        say(f"the Ray Client server at {self.address} failed to start (attempt {attempt} of "
                            f"{CONNECT_ATTEMPTS}; its log is ray_client_server_<port>.err on the head): trying again")
                    continue
                raise ExecutorError(f"cannot use the Ray cluster at {self.address}: {exc}") from exc

    def run(self, fn: RunFn, context: Any, jobs: Sequence[Hashable],
            say: Callable[[str], None] | None = None, affinity: Affinity | None = None) -> Iterator[tuple[Any, Any]]:
        # ``affinity`` is not used: Ray places the tasks (a worker's cache still serves the jobs it gets)
        ray = _import_ray()
        connected_here = not ray.is_initialized()
        if connected_here:
            self._connect(ray, say)
        try:
            if say:
                nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
                cpus = ray.cluster_resources().get("CPU", 0.0)
                say(f"{len(jobs)} runs on {self.describe()}: {cpus:g} CPUs on {nodes} node"
                    f"{'s' if nodes != 1 else ''} (Ray {ray.__version__})")
            boxed = [ray.put(context), ray.put(compiled.cache_files())]  # once per cluster and worker process
            task = ray.remote(num_cpus=1)(_run_task)
            pending = {task.remote(fn, boxed, job): job for job in jobs}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            if connected_here:
                ray.shutdown()

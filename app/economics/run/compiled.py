"""The twin's compiled engines, compiled once per machine by one process at a time.

numba compiles the engines on their first call (about half a minute each on 2 cores) and keeps the
machine code in its cache beside their source. Processes that start together (a grid's workers, the
test suite's, a new dashboard's first grid) would each compile them. :func:`ready` runs an engine on a
few requests of the replay's own argument types under an exclusive lock on a file: the first process
compiles it and writes the cache, the others wait for it and then load the cache (a second or two).
Each engine has its own lock, so a grid (the fleet engine) never waits for the policy engine's
compile. ``python -m app.economics.run.compiled`` does both ahead, the fleet engine first: ``headroom
dashboard`` starts it beside the server, so that a new install's first grid finds its engine compiled.

numba keys its cache by the source's content (SHA-256) and the machine's CPU, not by the source's path,
so the files are valid for another copy of the same code on a like machine: :func:`cache_files` reads
them, and :func:`install_cache` puts them where that copy's functions look (a Ray worker's unpacked
``py_modules``, which would otherwise compile the engines again, about half a minute per worker).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from app.economics.model import demand
from app.engine import twin_engine, twin_fleet, twin_policy
from app.engine.config import EngineConfig, FleetConfig, StepTime
from app.engine.policy import Policy
from app.engine.trace import PathSpec, Trace, TrafficSpec
from app.engine.twin_fleet import Counting, simulate
from app.engine.twin_policy import simulate_policy

try:
    import fcntl
except ImportError:  # not POSIX: each process compiles on its own, as numba does
    fcntl = None  # type: ignore[assignment]

FLEET, POLICY = "fleet", "policy"  # twin_fleet.simulate (plain and counted); twin_policy.simulate_policy
_ready: set[str] = set()


def lock_path(engine: str = FLEET) -> Path:
    """The lock of this copy of an engine (numba's cache is per source file, so is the lock)."""
    where = hashlib.sha1(str(Path(twin_engine.__file__).resolve()).encode()).hexdigest()[:12]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"headroom-compile-{uid}-{where}-{engine}.lock"


def ready(engine: str = FLEET) -> None:
    """The engine compiled in this process: loaded from numba's cache, compiled into it if it has
    none, or after the process that is compiling it now has written it. Once per process."""
    if engine in _ready:
        return
    if fcntl is None:
        _warm_current(engine)
    else:
        with lock_path(engine).open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                _warm_current(engine)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
    _ready.add(engine)


def _warm_current(engine: str) -> None:
    """Warm ``engine`` from a cache of these sources: a stale one forgotten first, what it compiled
    stamped after."""
    digest = sources_digest()
    forget_stale(_cache_locations(), digest)
    _WARM[engine]()
    forget_stale(_cache_locations(), digest)


STAMP = "headroom-sources.sha256"  # beside each cache directory's indexes: the sources they were compiled from


def sources_digest() -> str:
    """SHA-256 of the sources of every module of :data:`CACHED_MODULES`, together."""
    h = hashlib.sha256()
    for module in CACHED_MODULES:
        h.update(Path(str(module.__file__)).read_bytes())
    return h.hexdigest()


def forget_stale(locations: dict[str, tuple[Path, str]], digest: str) -> int:
    """Remove the cache indexes in each directory of ``locations`` (:func:`_cache_locations`) that
    were compiled from other sources than ``digest`` names, and stamp the directory with it; numba then
    compiles those functions again. numba checks only the source file of the function it loads, but
    the event loops in twin_fleet and twin_policy inline twin_engine's functions: after twin_engine
    alone changes (an upgrade, an edit), numba would load loops that still run the old engine. Returns
    the number of indexes removed."""
    removed = 0
    for folder in {folder for folder, _ in locations.values()}:
        stamp = folder / STAMP
        try:
            if stamp.is_file() and stamp.read_text().strip() == digest:
                continue
            if not stamp.is_file() and not any(stamp.parent.glob("*.nbi")):  # nothing compiled yet: stamp it
                stamp.parent.mkdir(parents=True, exist_ok=True)
                _write_whole(stamp, digest.encode())
                continue
            indexes = {index for f, index in locations.values() if f == folder}
            for index in indexes:
                if (folder / index).exists():
                    (folder / index).unlink()
                    removed += 1
            if folder.is_dir():
                _write_whole(stamp, digest.encode())
        except OSError:  # a cache directory this process cannot write: numba's own checks, as before
            continue
    return removed


def start_ahead() -> subprocess.Popen:
    """:func:`ready` for both engines in a process of its own, left to run beside the caller."""
    return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def compiling(engine: str = FLEET) -> bool:
    """Whether another process holds the engine's lock now (compiling it, or loading the cache)."""
    path = lock_path(engine)
    if engine in _ready or fcntl is None or not path.exists():
        return False
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


# the modules whose functions numba caches (the compiled core, its two drivers, and the demand's bucket
# arithmetic)
CACHED_MODULES = (twin_engine, twin_fleet, twin_policy, demand)


def _cache_locations() -> dict[str, tuple[Path, str]]:
    """Where numba caches each cached function of :data:`CACHED_MODULES` in this process, by
    ``module:name``: its cache directory and its index file's name. numba's attributes for these are
    not public, so a numba without them gives none, and each process compiles as it would anyway."""
    found: dict[str, tuple[Path, str]] = {}
    for module in CACHED_MODULES:
        for name, value in vars(module).items():
            cache = getattr(value, "_cache", None)
            folder, index = getattr(cache, "_cache_path", None), getattr(getattr(cache, "_cache_file", None),
                                                                         "_index_name", None)
            # a function bound to two names (an alias) is one cache
            if isinstance(folder, str) and isinstance(index, str) and (Path(folder), index) not in found.values():
                found[f"{module.__name__}:{name}"] = (Path(folder), index)
    return found


def cache_files() -> dict[str, dict[str, bytes]]:
    """This process's numba cache of the cached functions: for each (``module:name``) with an index,
    the index and its data files by file name. Empty where nothing is compiled yet."""
    shipped: dict[str, dict[str, bytes]] = {}
    for key, (folder, index) in _cache_locations().items():
        if not (folder / index).is_file():
            continue
        files = [folder / index, *folder.glob(f"{index.removesuffix('.nbi')}.*.nbc")]
        try:
            shipped[key] = {f.name: f.read_bytes() for f in files}
        except OSError:  # written or removed by a compiling process as we read: that function compiles
            continue
    return shipped


def install_cache(shipped: dict[str, dict[str, bytes]]) -> int:
    """Write the files :func:`cache_files` read into this process's cache of the same functions, for
    each function whose cache here has no index yet (one that has keeps its own: numba adds to it what
    this machine compiles). Each file is written whole and renamed into place, so a process loading the
    cache beside this one never reads half a file. Returns the number of functions installed."""
    installed = 0
    here = _cache_locations()
    for key, files in shipped.items():
        if key not in here:
            continue
        folder, index = here[key]
        if (folder / index).exists():
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in sorted(files, key=lambda n: n.endswith(".nbi")):  # the index last
                _write_whole(folder / name, files[name])
            if not (folder / STAMP).exists():  # a copy of the driver's code: compiled from these sources
                _write_whole(folder / STAMP, sources_digest().encode())
        except OSError:  # a cache directory this process cannot write: numba compiles, as without it
            continue
        installed += 1
    return installed


def _write_whole(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file in its directory, renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _requests() -> Trace:
    """40 requests with the argument types of the replay's calls (``replay._trace``: int8 paths, int64
    tokens, a broadcast ``hits_max``): a call of other types would compile another specialization (a
    test holds them to one each)."""
    n = 40
    return Trace(origin=0.0, duration_s=120.0, warmup_s=0.0, arrival_s=np.linspace(0.0, 100.0, n),
                 path=np.zeros(n, dtype=np.int8), prompt_tokens=np.full(n, 200, dtype=np.int64),
                 output_tokens=np.full(n, 30, dtype=np.int64), hits_max=np.broadcast_to(np.False_, (n,)),
                 request_id=np.arange(n, dtype=np.int64),
                 spec=TrafficSpec(paths=(PathSpec(name="p", served_name="p", mean_rate=0.0, peak_to_trough=1.0,
                                                  peak_hour_utc=0.0, prompt_median=1.0, prompt_sigma=0.0),),
                                  max_model_len=4096))


def _configs() -> list[FleetConfig]:
    """2 replicas behind each router (the random ones draw their picks in a compiled function)."""
    return [FleetConfig(replicas=2, router=router, engine=EngineConfig(),
                        step=StepTime(noise_sigma=0.0, frontend_s=0.0, frontend_per_token_s=0.0),
                        scrape_interval_s=60.0) for router in twin_engine.ROUTER_CODES]


def _warm_fleet() -> None:
    """The fleet engine behind each router, plain and counted (float thresholds, as the replay's)."""
    trace = _requests()
    counting = Counting(ttft_s=np.array([0.5]), tpot_s=np.array([0.05]), t_lo=0.0, t_hi=120.0, window_s=60.0,
                        n_windows=2, origin=0.0, view_window_s=60.0, n_view=2)
    for config in _configs():
        simulate(trace, config)
        simulate(trace, config, counting=counting)


def _warm_policy() -> None:
    """The policy engine behind each router."""
    trace = _requests()
    for config in _configs():
        simulate_policy(trace, config, Policy())


_WARM = {FLEET: _warm_fleet, POLICY: _warm_policy}

if __name__ == "__main__":
    ready(FLEET)  # first: a grid waits for this one only
    ready(POLICY)

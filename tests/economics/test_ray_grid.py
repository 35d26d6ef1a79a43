"""The scenario grid on Ray: a local Ray head, started by the test on 127.0.0.1, gives the local
pool's predictions seed for seed — through ``scenarios.grid`` (Ray Client, ``ray://``) and through
``headroom scenarios --ray HOST:PORT`` (the head's GCS port) — and without Ray installed ``--ray``
says how to install it while importing Headroom never needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from app import cli, load
from app.economics.predict import scenarios
from app.economics.run.executors import ExecutorError, LocalProcesses
from app.economics.run.ray_executor import INSTALL_HINT, RayCluster
from app.promise.shares import Promise
from app.store import Workspace
from tests.conftest import IN_CI
from tests.support.cli_run import run_cli, simulated_export
from tests.support.paths import ROOT
from tests.support.servers import free_port

PATHS = ("llama-3.1-8b-interactive", "llama-3.1-8b-batch")
PROMISES = [Promise(path=PATHS[0], ttft_s=0.5, tpot_s=0.05), Promise(path=PATHS[1], ttft_s=5.0, tpot_s=0.1)]
PROMISE_ARGS = ["--promise", f"{PATHS[0]}=0.5/0.05", "--promise", f"{PATHS[1]}=5/0.1"]
REPLICAS, TRAFFIC, SEEDS = [2, 3], [1.0, 1.25], 2  # 4 scenarios, 2 seeds (and the envelope where flagged)
# Ray's Unix sockets live under its temp dir: <dir>/session_<date>_<pid>/sockets/plasma_store must stay
# within 107 bytes, which leaves the dir itself about 45
RAY_TEMP_MAX = 45
# Ray turns 127.0.0.1 into this machine's interface address unless it runs as one machine (the flag is
# read when ray is imported, in the head and in this process): every connection stays on loopback
SINGLE_MACHINE = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
RETRIED = "the Ray Client server at ray://"  # how the grid says a connection was tried again


def _need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        reason = f"ray not installed ({INSTALL_HINT}, or pip install -e '.[test,ray]')"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}; the Ray grid tests must run in CI")
        pytest.skip(reason)


@dataclass
class RayHead:
    gcs: str  # HOST:PORT of the head's GCS, as `ray start` prints it
    client: str  # ray://HOST:PORT of its Ray Client server
    temp: Path  # its --temp-dir

    def logs(self) -> str:
        """The end of each non-empty ``*.err`` log of the head's session, for a failure's message."""
        parts = [f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                 for p in sorted((self.temp / "session_latest" / "logs").glob("*.err")) if p.stat().st_size]
        return "\n".join(["the head's error logs:", *parts]) if parts else "the head's error logs are empty"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    """``ray start --head --block`` on 127.0.0.1 (free GCS and client ports, 2 CPUs, no dashboard),
    its session files in a temporary directory under $TMPDIR; SIGTERM (then SIGKILL to its process
    group, which holds only what it started) at teardown."""
    _need_ray()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SINGLE_MACHINE.items():
            mp.setenv(k, v)
        if "ray" in sys.modules:  # ray is optional: imported here, once the test knows it is installed
            from ray._private import ray_constants

            assert not ray_constants.ENABLE_RAY_CLUSTER, "ray was imported before the test could keep it on loopback"
        temp = tempfile.mkdtemp(prefix="ray-")
        if len(temp) > RAY_TEMP_MAX:
            os.rmdir(temp)
            temp = tempfile.mkdtemp(prefix="hr-ray-", dir="/tmp")
        gcs, client = free_port(), free_port()
        log_path = Path(temp) / "head.log"
        with log_path.open("wb") as log:
            head = subprocess.Popen(
                [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                 "--node-ip-address=127.0.0.1", f"--port={gcs}", f"--ray-client-server-port={client}",
                 "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **SINGLE_MACHINE})
        try:
            deadline = time.monotonic() + 120
            while "Ray runtime started" not in log_path.read_text(errors="replace"):
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"ray start --head did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
                time.sleep(0.5)
            yield RayHead(gcs=f"127.0.0.1:{gcs}", client=f"ray://127.0.0.1:{client}", temp=Path(temp))
        finally:
            head.send_signal(signal.SIGTERM)  # `ray start --block` drains and stops the processes it started
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(head.pid, signal.SIGKILL)  # anything of its own process group still running
            except ProcessLookupError:
                pass
            head.wait(timeout=10)
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated_export(tmp_path_factory.mktemp("ray-grid") / "metrics.parquet", hours=1.0)


def _rows(predictions: list[scenarios.Prediction]) -> list[str]:
    """Each prediction as the exact text of its fields (repr round-trips floats; NaN equals NaN)."""
    return [repr(asdict(p)) for p in predictions]


@pytest.mark.slow
def test_the_grid_on_ray_equals_the_local_pool_seed_for_seed(ray_head: RayHead, export: Path) -> None:
    with Workspace(":memory:") as ws:
        report = load.load_file(ws, export)
        analysis = scenarios.analyse(ws, [report.dataset_id], PROMISES, ws.path_labels())
    t0 = time.perf_counter()
    local = scenarios.grid(analysis, REPLICAS, TRAFFIC, seeds=SEEDS, executor=LocalProcesses(2))
    local_s = time.perf_counter() - t0
    said: list[str] = []
    t0 = time.perf_counter()
    try:
        on_ray = scenarios.grid(analysis, REPLICAS, TRAFFIC, seeds=SEEDS, progress=said.append,
                                executor=RayCluster(ray_head.client))
    except ExecutorError as exc:
        pytest.fail(f"{exc}\n{ray_head.logs()}")
    ray_s = time.perf_counter() - t0
    said = [m for m in said if not m.startswith(RETRIED)]  # a Ray Client server that failed to start, said
    jobs = sum(len(scenarios._jobs(analysis, n, g, 1.0, SEEDS)) for n in REPLICAS for g in TRAFFIC)
    print(f"\n{jobs} runs of {len(REPLICAS) * len(TRAFFIC)} scenarios: local pool (2 processes) {local_s:.1f} s, "
          f"Ray (local head, 2 CPUs, Ray Client) {ray_s:.1f} s")
    assert _rows(on_ray) == _rows(local)
    assert [(p.replicas, p.traffic, p.path) for p in on_ray] == [
        (n, g, path) for g in TRAFFIC for n in REPLICAS for path in analysis.thresholds]
    assert all(len(p.seeds) == SEEDS for p in on_ray)
    # the cluster is said for each pass, then every run as it completes; a scenario whose fleet
    # queues a backlog the plan did not foresee adds its two envelope runs to the total, in a second
    # pass (``run_scenarios``), so the total grows and the last message counts every run made
    assert said[0].startswith(f"{jobs} runs on the Ray cluster at {ray_head.client}: 2 CPUs on 1 node")
    passes = [m for m in said if " runs on the Ray cluster at " in m]
    counts = [m.split(" runs:")[0].split("/") for m in said if m not in passes]
    done, totals = [int(d) for d, _ in counts], [int(t) for _, t in counts]
    assert done == list(range(1, len(done) + 1))
    assert totals == sorted(totals) and totals[0] == jobs and totals[-1] == len(done)
    assert len(done) == sum(int(m.split(" ")[0]) for m in passes)
    # a second pass only for scenarios the twin found backlogged, which say so in their flags
    backlogged = {(p.replicas, p.traffic) for p in on_ray if any("backlog" in f for f in p.flags)}
    assert len(passes) == 1 or (backlogged and int(passes[1].split(" ")[0]) <= 2 * len(backlogged))


class _FailingRay:
    """A stand-in for the ``ray`` module whose ``init`` raises the given errors in turn, then connects;
    it records the calls (a real head fails this way only by chance: its server process for the
    connection exits, and a real failed connection costs 30 to 60 s)."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = list(errors), []

    def init(self, **kwargs: object) -> None:
        self.calls.append("init")
        if self.errors:
            raise self.errors.pop(0)

    def shutdown(self) -> None:
        self.calls.append("shutdown")


# what Ray Client raises when the head's server process for the connection exited at start
SERVER_DIED = ConnectionAbortedError("Initialization failure from server:\nRuntimeError: Starting Ray client server "
                                     "failed. See ray_client_server_23000.err for detailed logs.")


def test_a_ray_client_server_that_failed_to_start_is_tried_again_after_a_shutdown() -> None:
    _need_ray()
    said: list[str] = []
    ray = _FailingRay(SERVER_DIED)
    RayCluster("ray://head:10001")._connect(ray, said.append)  # type: ignore[arg-type]
    # a failed ray.init leaves Ray's state half set: without the shutdown the next init fails on an assertion
    assert ray.calls == ["init", "shutdown", "init"]
    assert said == ["the Ray Client server at ray://head:10001 failed to start (attempt 1 of 2; its log is "
                    "ray_client_server_<port>.err on the head): trying again"]
    ray = _FailingRay(SERVER_DIED, SERVER_DIED)
    with pytest.raises(ExecutorError, match="^cannot use the Ray cluster at ray://head:10001: Initialization failure"):
        RayCluster("ray://head:10001")._connect(ray, None)  # type: ignore[arg-type]
    assert ray.calls == ["init", "shutdown", "init", "shutdown"]
    # any other failure is said at once, and leaves the process able to connect again
    ray = _FailingRay(ConnectionError("ray client connection timeout"))
    with pytest.raises(ExecutorError, match="^cannot use the Ray cluster at ray://head:10001: ray client connection "
                                            "timeout$"):
        RayCluster("ray://head:10001")._connect(ray, said.append)  # type: ignore[arg-type]
    assert ray.calls == ["init", "shutdown"] and len(said) == 1


@pytest.mark.slow
def test_headroom_scenarios_with_ray_prints_what_the_local_pool_prints(
        ray_head: RayHead, export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["scenarios", str(export), "--replicas", "2:3", "--traffic", "1.0,1.25", "--replica-hour-price", "4",
            "--breach-price", "0.05", *PROMISE_ARGS, "--seeds", str(SEEDS), "--horizon-hours", "10", "--format", "json"]
    monkeypatch.delenv(cli.RAY_ADDRESS_ENV, raising=False)
    code, local_out, err = run_cli(argv)
    assert code == 0, err
    t0 = time.perf_counter()
    code, ray_out, err = run_cli([*argv, "--ray", ray_head.gcs])
    print(f"\nheadroom scenarios --ray {ray_head.gcs}: {time.perf_counter() - t0:.1f} s (fit included)")
    assert code == 0, f"{err}\n{ray_head.logs()}"
    assert f"on the Ray cluster at {ray_head.gcs}: 2 CPUs on 1 node" in err
    local_doc, ray_doc = json.loads(local_out), json.loads(ray_out)
    assert ray_doc["scenarios"] == local_doc["scenarios"] and len(ray_doc["scenarios"]) == 8
    assert ray_doc == local_doc


@pytest.mark.slow
def test_headroom_bench_times_the_grid_on_ray_against_the_local_pool(ray_head: RayHead, tmp_path: Path) -> None:
    code, out, err = run_cli(["bench", "--size", "small", "--only", "replay", "--ray", ray_head.gcs, "--format", "json",
                          "--quiet", "--workdir", str(tmp_path)])
    assert code == 0, f"{err}\n{ray_head.logs()}"
    rows = {r["name"]: r for r in json.loads(out)["results"]}
    assert set(rows) == {"scenario_replay", "scenario_grid", "scenario_grid_ray"}
    on_ray = rows["scenario_grid_ray"]
    # against the grid on a process per core (scenario_grid itself may run in one process)
    assert on_ray["reference"] == "local_pool"
    assert round(on_ray["reference_seconds"], 3) == rows["scenario_grid"]["detail"]["every_core_s"]
    assert on_ray["detail"]["same_predictions"] and on_ray["detail"]["address"] == ray_head.gcs
    print(f"\nbench: the {on_ray['samples']}-scenario grid on Ray {on_ray['seconds']:.1f} s, "
          f"local pool {on_ray['reference_seconds']:.1f} s")


def test_the_ray_address_comes_from_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = cli.build_parser()
    base = ["scenarios", "x.parquet", "--replicas", "2"]
    monkeypatch.delenv(cli.RAY_ADDRESS_ENV, raising=False)
    assert cli._ray_address(parser.parse_args(base)) is None
    assert cli._ray_address(parser.parse_args([*base, "--ray", "auto"])) == "auto"
    monkeypatch.setenv(cli.RAY_ADDRESS_ENV, "ray://head:10001")
    assert cli._ray_address(parser.parse_args(base)) == "ray://head:10001"
    assert cli._ray_address(parser.parse_args([*base, "--ray", "10.0.0.5:6379"])) == "10.0.0.5:6379"
    assert cli._ray_address(parser.parse_args([*base, "--ray", ""])) is None


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is absent
    code, out, err = run_cli(["scenarios", "never-read.parquet", "--replicas", "2", "--replica-hour-price", "1",
                          *PROMISE_ARGS, "--ray", "auto"])
    assert code == 2 and out == ""
    assert err == f"headroom scenarios: --ray auto: running on Ray needs the ray extra: {INSTALL_HINT}\n"
    code, out, err = run_cli(["bench", "--only", "replay", "--ray", "auto"])
    assert code == 2 and out == "" and INSTALL_HINT in err


def test_importing_headroom_never_imports_ray() -> None:
    probe = ("import sys; import app.cli, app.economics.predict.scenarios, app.economics.run.ray_executor, app.ui.economics, app.ui.scenario_sets; "
             "assert 'ray' not in sys.modules, 'ray imported'")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

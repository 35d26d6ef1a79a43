"""Servers the tests start (a dashboard, Streamlit, VictoriaMetrics): started with their output in a log,
waited for until they answer, stopped however the test ends."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from app.bench.servers import free_port, stop
from tests.conftest import IN_CI
from tests.support import export_formats as ef


def answers(url: str, body: bytes | None = None) -> bool:
    """Whether ``url`` answers 200 now (and, with ``body``, with that body)."""
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status == 200 and (body is None or resp.read() == body)
    except OSError:
        return False


@contextmanager
def running(argv: Sequence[str], log_path: Path, ready_url: str, ready_body: bytes | None = None,
            timeout_s: float = 60, **popen: Any) -> Iterator[subprocess.Popen]:
    """Run ``argv`` (output to ``log_path``) until the block ends; first wait until ``ready_url`` answers,
    else raise with the log's end."""
    log = log_path.open("wb")
    proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, **popen)
    try:
        deadline = time.monotonic() + timeout_s
        while not answers(ready_url, ready_body):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not become ready:\n" + log_path.read_text()[-3000:])
            time.sleep(0.1)
        yield proc
    finally:
        stop(proc)
        log.close()


def need_prometheus() -> None:
    """Skip without Debian's ``prometheus`` and ``promtool``; fail so under ``CI=true``."""
    missing = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed (apt-get install prometheus)"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}; the live-Prometheus tests must run in CI")
        pytest.skip(reason)


@contextmanager
def prometheus(tmp: Path, openmetrics: Path) -> Iterator[str]:
    """A ``prometheus`` on 127.0.0.1 serving ``openmetrics`` (an OpenMetrics file, backfilled with
    ``promtool tsdb create-blocks-from openmetrics``) and scraping nothing; its URL."""
    data = tmp / "data"
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data)],
                   check=True, capture_output=True, timeout=120)
    cfg = tmp / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 15s\n")  # no scrape jobs: it only serves the backfill
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={data}",
                  "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                 tmp / "prometheus.log", url + "/-/ready", timeout_s=30):
        yield url


@contextmanager
def victoria_metrics(tmp: Path, frame: pd.DataFrame | None = None, jsonl: bytes | None = None) -> Iterator[str]:
    """A VictoriaMetrics (Debian's ``victoria-metrics``) on 127.0.0.1 holding ``frame`` (or the JSON lines
    ``jsonl`` as they are), imported through its ``/api/v1/import`` and flushed; its URL. Skips without
    the binary, fails so under ``CI=true``."""
    if shutil.which("victoria-metrics") is None:
        reason = "victoria-metrics not installed (apt-get install victoria-metrics)"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}; the VictoriaMetrics tests must run in CI")
        pytest.skip(reason)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["victoria-metrics", f"-storageDataPath={tmp / 'data'}", "-retentionPeriod=100y",
                  f"-httpListenAddr=127.0.0.1:{port}", "-search.latencyOffset=0s"], tmp / "vm.log", url + "/health",
                 timeout_s=30):
        body = jsonl if frame is None else ef.write_vm_jsonl(frame, tmp / "fleet.jsonl").read_bytes()
        with urllib.request.urlopen(urllib.request.Request(url + "/api/v1/import", data=body, method="POST"),
                                    timeout=60) as resp:
            assert resp.status == 204
        with urllib.request.urlopen(url + "/internal/force_flush", timeout=30) as resp:
            assert resp.status == 200
        yield url

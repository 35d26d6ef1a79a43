"""The servers the benchmarks and harnesses start (the dashboard, Prometheus, VictoriaMetrics, vLLM): a
free loopback port, whether a URL answers, a process started with its output in a log and waited for
until it answers, stopped however the block ends. The tests' servers take their port and stop from here."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A loopback TCP port nothing listens on now (bound, then released): a server started next can take
    it, a client finds it closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen, timeout_s: float = 10) -> None:
    """Terminate ``proc``; killed if it has not ended ``timeout_s`` later."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextmanager
def running(argv: Sequence[str], log_path: Path, ready_url: str, what: str, timeout_s: float = 120,
            stop_s: float = 20, append: bool = False, **popen: Any) -> Iterator[subprocess.Popen]:
    """Run ``argv`` (its output to ``log_path``, appended to with ``append``) until the block ends; first
    wait until ``ready_url`` answers, else raise saying ``what`` did not start and where its log is."""
    log = log_path.open("ab" if append else "wb")
    proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, **popen)
    try:
        deadline = time.monotonic() + timeout_s
        while not answers(ready_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start; its log: {log_path}")
            time.sleep(0.2)
        yield proc
    finally:
        stop(proc, stop_s)
        log.close()

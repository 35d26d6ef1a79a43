"""Servers the tests start (a dashboard, Streamlit, VictoriaMetrics): started with their output in a log,
waited for until they answer, stopped however the test ends."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()

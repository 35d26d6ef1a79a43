"""Where and when a measurement was taken: the commit, the date and the machine.

The benchmark and accuracy documents carry this record so that the pages generated from them
(``headroom docs bench``, ``headroom docs accuracy``) say which code and which machine their figures
came from; a figure without it cannot be compared with another.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def cpu_model() -> str | None:
    """The processor's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def record(command: str) -> dict[str, Any]:
    """The provenance of a run of ``command``: commit (and whether the tree had uncommitted changes),
    the UTC time it started, and the machine (CPU model, cores, memory, Python, OS)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "command": command,
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gb": memory_gb(),
                    "python": platform.python_version(), "platform": platform.platform()},
    }

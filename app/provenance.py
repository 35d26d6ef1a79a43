"""Where and when a measurement was taken: the commit, the date and the machine.

The benchmark and accuracy documents carry this record so that the pages generated from them
(``headroom docs bench``, ``headroom docs accuracy``) say which code and which machine their figures
came from; a figure without it cannot be compared with another.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str, root: Path = ROOT) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
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


def record(command: str, root: Path = ROOT, started: datetime | None = None) -> dict[str, Any]:
    """The provenance of a run of ``command``: commit of the tree at ``root`` (and whether it had
    uncommitted changes), the UTC time it started (default: now), and the machine (CPU model, cores,
    memory, Python, OS)."""
    commit = _git("rev-parse", "HEAD", root=root)
    status = _git("status", "--porcelain", "--untracked-files=no", root=root)
    return {
        "command": command,
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "date": (started or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gb": memory_gb(),
                    "python": platform.python_version(), "platform": platform.platform()},
    }


def stamp(path: Path, command: str, root: Path, finished: datetime | None = None) -> dict[str, Any]:
    """Give a JSON document written by an older commit's tool, which kept no provenance, the record of
    the tree at ``root`` that ran it on this machine: started ``total_seconds`` (the document's) before
    ``finished`` (default: the file's modification time). A document that has one is refused: its own
    record is the better witness."""
    doc = json.loads(path.read_text())
    if doc.get("provenance"):
        raise ValueError(f"{path} already says where it came from (commit {doc['provenance'].get('commit')})")
    end = finished or datetime.fromtimestamp(path.stat().st_mtime, UTC)
    prov = record(command, root, end - timedelta(seconds=float(doc.get("total_seconds") or 0)))
    if prov["commit"] is None:
        raise ValueError(f"{root} is not a git tree: its commit cannot be read")
    doc["provenance"] = prov
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return prov


def main(argv: list[str] | None = None) -> int:
    """``python -m app.provenance FILE.json --tree DIR --command CMD``: :func:`stamp`."""
    p = argparse.ArgumentParser(prog="python -m app.provenance", description=(
        "give a JSON document an older commit's tool wrote the provenance of the tree that ran it"))
    p.add_argument("file", type=Path, help="the JSON document the older tool wrote")
    p.add_argument("--tree", type=Path, required=True, help="the git work tree whose code wrote it")
    p.add_argument("--command", required=True, help="the command that wrote it, as it was run")
    args = p.parse_args(argv)
    try:
        prov = stamp(args.file, args.command, args.tree)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"python -m app.provenance: {exc}\n")
        return 1
    sys.stdout.write(f"{args.file}: commit {prov['commit']}, started {prov['date']}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

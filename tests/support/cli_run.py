"""The CLI run in this process, its exit code and its two streams as text; and a small simulated
export for the CLI tests that need one."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from app import cli
from app.engine.config import Events
from app.simulator import simulate_day
from app.simulator.sample import write_metrics_parquet


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``headroom ARGV``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def simulated_export(path: Path, hours: float) -> Path:
    """A quiet ``hours`` of 2 replicas (seed 3, 15 s scrapes) written as the bundled sample's Parquet."""
    res = simulate_day(seed=3, replicas=2, hours=hours, scrape_interval_s=15.0, events=Events())
    write_metrics_parquet(res.metrics_frame, path)
    return path

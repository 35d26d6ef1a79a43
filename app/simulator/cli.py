"""``headroom simulate``: write the bundled sample (or any simulated day) to a directory."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.engine.config import Events
from app.simulator.sample import MAX_SAMPLE_BYTES, write_sample


def build_parser(prog: str = "headroom simulate") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Simulate a vLLM fleet and write its metrics export (metrics.parquet), per-request records "
        "(requests.parquet), simulation.json and a README. Deterministic for a seed: the default seed and "
        "directory regenerate the bundled sample byte for byte.",
        epilog="examples:\n"
        "  # regenerate the bundled sample\n"
        "  headroom simulate --seed 7 --out data/sample\n\n"
        "  # a month of 8 replicas, metrics only\n"
        "  headroom simulate --hours 720 --replicas 8 --no-records --out /tmp/month")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7, the bundled sample)")
    p.add_argument("--out", default="data/sample", help="output directory (default data/sample)")
    p.add_argument("--hours", type=float, default=24.0, help="hours of export (default 24)")
    p.add_argument("--replicas", type=int, default=4, help="replicas (default 4)")
    p.add_argument("--scrape-interval", type=float, default=None,
                   help="seconds between scrapes (default 15 up to 24 h, 60 beyond: Prometheus' default "
                   "scrape_interval; doubled until the export fits --max-mb)")
    p.add_argument("--max-mb", type=float, default=None,
                   help=f"size cap of metrics.parquet (default {MAX_SAMPLE_BYTES / 2**20:g} up to 24 h, none beyond)")
    p.add_argument("--no-events", action="store_true", help="no replica restart and no scrape gap")
    p.add_argument("--no-records", action="store_true",
                   help="do not write requests.parquet (the true shares are still computed)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    summary = write_sample(args.out, seed=args.seed, hours=args.hours, replicas=args.replicas,
                           scrape_interval_s=args.scrape_interval,
                           max_bytes="default" if args.max_mb is None else int(args.max_mb * 2**20),
                           events=Events() if args.no_events else None, records=not args.no_records,
                           progress=None if args.quiet else _progress)
    out = sys.stdout
    requests = "" if summary["requests_bytes"] is None else f", requests {summary['requests_bytes'] / 1e6:.1f} MB"
    out.write(f"wrote {args.out}: {summary['requests']:,} requests, {summary['samples']:,} samples of "
              f"{summary['series']:,} series every {summary['scrape_interval_s']:g} s "
              f"(metrics {summary['metrics_bytes'] / 1e6:.1f} MB{requests}) "
              f"in {summary['wall_seconds']:.0f} s\n")
    for row in summary["true_shares"]:
        out.write(f"  {row['path']:<12} TTFT breached {row['ttft_share']:.2%}  TPOT breached {row['tpot_share']:.2%}  "
                  f"joint {row['joint_share']:.2%}\n")
    return 0

"""``python -m app.docgen cli|bench|accuracy|accuracy-real-engine|accuracy-prefix-cache
[--from FILE.json] [--against FILE.json] [--out FILE.md]``: write a
generated page."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.docgen import accuracy, bench, cli_reference, real_engine


def _read(files: str) -> dict[str, Any]:
    """A document, or several runs of one bench command joined by '+' (:func:`app.docgen.bench.pooled`)."""
    docs = [json.loads(Path(f).read_text()) for f in files.split("+")]
    return bench.pooled(docs) if len(docs) > 1 else docs[0]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app.docgen", description=__doc__.splitlines()[0])
    p.add_argument("page", choices=["cli", "bench", "accuracy", "accuracy-real-engine", "accuracy-prefix-cache"])
    p.add_argument("--from", dest="source", help="the tool's JSON (bench, accuracy); for bench, accuracy and accuracy-prefix-cache, "
                   "several comma-separated: the first run's page, then each other run's rows with its provenance")
    p.add_argument("--against", help="bench: the same benchmarks run at an earlier commit on the same machine, set "
                   "beside the first run's rows; comma-separated, one per --from run in its order (empty: none)")
    p.add_argument("--out", help="the page to write (default: stdout)")
    return p


def render(args: argparse.Namespace) -> str:
    """The page ``args`` (of :func:`_parser`) ask for, its header naming the command that makes it.
    Raises OSError, ValueError or KeyError on a document it cannot read or combine."""
    out = f" --out {args.out}" if args.out else ""
    if args.page == "cli":
        return cli_reference.page(f"python -m app.docgen cli{out}")
    if ("+" in args.source or args.against) and args.page != "bench":
        raise ValueError("only the bench page pools runs with '+' and takes --against")
    first, *others = [_read(f) for f in args.source.split(",")]
    against = f" --against {args.against}" if args.against else ""
    command = f"python -m app.docgen {args.page} --from {args.source}{against}{out}"
    if others and args.page not in ("bench", "accuracy", "accuracy-prefix-cache"):
        raise ValueError("only the bench, accuracy and accuracy-prefix-cache pages take several runs")
    if args.page == "bench":
        bases = [_read(f) if f else None for f in (args.against or "").split(",")]
        if len(bases) > 1 + len(others):
            raise ValueError(f"--against names {len(bases)} runs to compare with, for {1 + len(others)} --from runs")
        return bench.page(first, command, others, bases)
    if args.page == "accuracy":
        return accuracy.page(first, command, others)
    if args.page == "accuracy-prefix-cache":
        return real_engine.prefix_page(first, command, others)
    return real_engine.page(first, command)


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.page != "cli" and not args.source:
        p.error(f"{args.page} needs --from FILE.json")
    try:
        text = render(args)
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"python -m app.docgen {args.page}: {exc}\n")
        return 1
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

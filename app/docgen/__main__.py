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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.docgen", description=__doc__.splitlines()[0])
    p.add_argument("page", choices=["cli", "bench", "accuracy", "accuracy-real-engine", "accuracy-prefix-cache"])
    p.add_argument("--from", dest="source", help="the tool's JSON (bench, accuracy); for bench, accuracy and accuracy-prefix-cache, "
                   "several comma-separated: the first run's page, then each other run's rows with its provenance")
    p.add_argument("--against", help="bench: the same benchmarks run at an earlier commit on the same machine, set "
                   "beside the first run's rows")
    p.add_argument("--out", help="the page to write (default: stdout)")
    args = p.parse_args(argv)
    if args.page != "cli" and not args.source:
        p.error(f"{args.page} needs --from FILE.json")
    out = f" --out {args.out}" if args.out else ""
    try:
        if args.page == "cli":
            text = cli_reference.page(f"python -m app.docgen cli{out}")
        else:
            if ("+" in args.source or args.against) and args.page != "bench":
                raise ValueError("only the bench page pools runs with '+' and takes --against")
            first, *others = [_read(f) for f in args.source.split(",")]
            against = f" --against {args.against}" if args.against else ""
            command = f"python -m app.docgen {args.page} --from {args.source}{against}{out}"
            if others and args.page not in ("bench", "accuracy", "accuracy-prefix-cache"):
                raise ValueError("only the bench, accuracy and accuracy-prefix-cache pages take several runs")
            if args.page == "bench":
                text = bench.page(first, command, others, _read(args.against) if args.against else None)
            elif args.page == "accuracy":
                text = accuracy.page(first, command, others)
            elif args.page == "accuracy-prefix-cache":
                text = real_engine.prefix_page(first, command, others)
            else:
                text = real_engine.page(first, command)
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

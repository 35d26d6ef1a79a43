"""``python -m app.bench.realengine``: the real-engine accuracy harness.

    python -m app.bench.realengine suite --workdir DIR [--only NAME,...] [--out FILE.json]
    python -m app.bench.realengine run NAME --workdir DIR
    python -m app.bench.realengine evaluate --workdir DIR [--out FILE.json]
    python -m app.bench.realengine prefix --workdir DIR [--only NAME,...] [--think-time S]
                                         [--conversation-share X] [--out FILE.json]
    python -m app.bench.realengine fixture RUN_DIR OUT_DIR

``suite`` mends the vLLM CPU install, builds the model (once, into DIR/model), runs every scenario not
yet in DIR/runs (about 13 minutes each: 35-40 s to start the replicas, the 12-minute trace, the
scrapes before and after), then fits Headroom on the observed run and writes the JSON the docs page
is rendered from (``python -m app.docgen accuracy-real-engine``). ``prefix`` runs the prefix-cache family
(``suite.PREFIX_SCENARIOS``, not yet in DIR/runs) and writes the JSON of its page (``python -m app.docgen
accuracy-prefix-cache``): every case fitted on the one-replica prefix run, among them the routing row
(load-based and prefix-aware routing) against the two-replica runs, least outstanding and sticky;
``--think-time`` and ``--conversation-share`` set the economics' assumptions of the same names. Running
needs the ``engine`` extra (``pip install -e '.[engine]'``), Debian's ``prometheus`` and
``libtcmalloc-minimal4``, and one core per replica; where every run is already in DIR/runs, ``prefix``
(like ``evaluate``) only evaluates, and needs none of them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from app.bench.realengine import compare, suite, truth
from app.bench.realengine import fleet as fl


def _say(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _model(workdir: Path) -> Path:
    model = workdir / "model"
    if not (model / "config.json").exists():
        _say(f"building the model into {model}")
        subprocess.run([sys.executable, "-m", "app.bench.realengine.model", str(model)], check=True)
    return model


def _evaluate(workdir: Path, out: Path | None, prefix: dict[str, Any] | None = None) -> int:
    """Fit and compare; ``prefix``: the prefix family's, with its assumptions (``think_s``,
    ``conversation_share``)."""
    runs = sorted((workdir / "runs").iterdir())
    result = (suite.evaluate_prefix(runs, say=_say, assumptions=prefix, out_path=str(out) if out else None)
              if prefix is not None
              else suite.evaluate(runs, say=_say))
    text = json.dumps(result, indent=1, default=float)
    if out:
        out.write_text(text + "\n")
        _say(f"wrote {out}")
    else:
        sys.stdout.write(text + "\n")
    return 0


def _fixture(run_dir: Path, out: Path) -> int:
    """What a test needs of a run, small enough to commit: its query_range export and per-request
    summary gzip-compressed, and its run.json (what ran, where, when) with the engine's step law."""
    out.mkdir(parents=True, exist_ok=True)
    with (run_dir / "export.json").open("rb") as src, gzip.open(out / "export.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    truth.write_csv(truth.read(run_dir / "requests.jsonl"), out / "requests.csv.gz")
    meta = json.loads((run_dir / "run.json").read_text())
    meta["step_truth"] = compare.step_truth(run_dir)
    (out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    _say(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.bench.realengine", description=__doc__.splitlines()[0],
                                epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    fix = sub.add_parser("fixture", help="a run's export and per-request summary, to commit as a test fixture")
    fix.add_argument("run_dir", type=Path)
    fix.add_argument("out_dir", type=Path)
    for name in ("suite", "run", "evaluate", "prefix"):
        q = sub.add_parser(name)
        q.add_argument("--workdir", type=Path, required=True)
        if name == "run":
            q.add_argument("name", choices=sorted(suite.SCENARIOS) + sorted(suite.PREFIX_SCENARIOS))
        if name in ("suite", "prefix"):
            q.add_argument("--only", help="comma-separated scenario names (default: all)")
        if name == "prefix":
            q.add_argument("--think-time", type=float, help="the economics' --think-time (default: its own)")
            q.add_argument("--conversation-share", type=float,
                           help="the economics' --conversation-share, for every path (default: its own)")
        if name != "run":
            q.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.command == "fixture":
        return _fixture(args.run_dir, args.out_dir)
    # a SIGTERM unwinds like an exception, so that the replicas and Prometheus are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.command == "evaluate":
            return _evaluate(args.workdir, args.out)
        family = suite.PREFIX_SCENARIOS if args.command == "prefix" else suite.SCENARIOS
        names = [args.name] if args.command == "run" else (args.only.split(",") if args.only else list(family))
        if any(not (args.workdir / "runs" / n / "run.json").exists() for n in names):
            fl.mend_install(_say)
            suite.run_all(args.workdir, names, _model(args.workdir), _say)
        else:  # nothing to run: no engine, no install to mend
            _say(f"{', '.join(names)}: already run")
        if args.command == "run":
            return 0
        prefix = {k: v for k, v in (("think_s", args.think_time), ("conversation_share", args.conversation_share))
                  if v is not None} if args.command == "prefix" else None
        return _evaluate(args.workdir, args.out, prefix)
    except fl.HarnessError as exc:
        _say(f"error: {exc}")
        return 2
    except ValueError as exc:  # a run missing or unreadable: said, not a traceback
        _say(f"error: {exc}")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""``headroom`` command line. Subcommands are thin: parse arguments, call ``app``, print.

Every subcommand with ``--format json`` prints a stable, documented JSON document (README, "CLI").
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.store import MEMORY, Workspace, default_db_path


def _workspace(args: argparse.Namespace) -> Workspace:
    return Workspace(args.db or default_db_path())


def _add_db(p: argparse.ArgumentParser, default_memory: bool = False) -> None:
    help_text = (
        "workspace DuckDB file (default: in memory for this command)" if default_memory
        else f"workspace DuckDB file (default: $HEADROOM_DB or {default_db_path()})"
    )
    p.add_argument("--db", default=MEMORY if default_memory else None, help=help_text)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# -- load --------------------------------------------------------------------------------------
def cmd_load(args: argparse.Namespace) -> int:
    with _workspace(args) as ws:
        if args.path_label:
            ws.set_paths(args.path_label, ws.path_rules())
        reports = ws.load_files(args.files)
    if args.format == "json":
        _write(json.dumps({"files": [r.as_json() for r in reports]}, indent=2, default=_json_default))
    else:
        _write(_load_text(reports))
    return 1 if any(r.status == "failed" for r in reports) else 0


def _load_text(reports: Sequence[Any]) -> str:
    out = []
    for r in reports:
        if r.status == "failed":
            out.append(f"FAILED  {r.file}")
            out.extend(f"  error: {e}" for e in r.errors)
            continue
        state = "loaded" if r.status == "loaded" else "already loaded (same bytes)"
        out.append(f"{state}  {r.file}  -> dataset {r.dataset!r}")
        fmt = r.format + (" (gzip)" if r.gzip else "")
        out.append(f"  format: {fmt}   engine: {r.engine or 'unknown'}")
        out.append(f"  series: {r.series}   samples: {r.samples}")
        interval = f"{r.scrape_interval_s:g} s" if r.scrape_interval_s else "n/a (one scrape)"
        out.append(f"  time range: {r.start} .. {r.end}   scrape interval: {interval}   time from: {r.time_source}")
        out.append(f"  signals: {', '.join(r.signals) or 'none'}")
        out.append(f"  paths: {', '.join(r.paths) or 'none'}")
        out.append(f"  counter resets: {r.resets}   non-monotone buckets repaired: {r.repairs}")
        if r.unknown_metrics:
            shown = ", ".join(r.unknown_metrics[:12])
            more = f" (+{len(r.unknown_metrics) - 12} more)" if len(r.unknown_metrics) > 12 else ""
            out.append(f"  unknown metrics kept ({len(r.unknown_metrics)}): {shown}{more}")
        out.extend(f"  note: {n}" for n in r.notes)
    return "\n".join(out)


# -- cube --------------------------------------------------------------------------------------
def cmd_cube(args: argparse.Namespace) -> int:
    from app.cube import cube_frame, ensure_cube, parse_window

    try:
        window_s = parse_window(args.window)
    except ValueError as exc:
        sys.stderr.write(f"headroom cube: {exc}\n")
        return 2
    with _workspace(args) as ws:
        reports = ws.load_files(args.files) if args.files else []
        for r in reports:
            if r.status == "failed":
                for e in r.errors:
                    sys.stderr.write(f"error: {e}\n")
        ids = sorted({r.dataset_id for r in reports if r.dataset_id is not None}) if args.files else ws.dataset_ids()
        labels = args.path_label or ws.path_labels()
        frame = cube_frame(ws, ensure_cube(ws, ids, window_s, labels)) if ids else None
    records = _cube_records(frame) if frame is not None else []
    if args.format == "json":
        _write(json.dumps(records, indent=1))
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["window_start", "path", "signal", "le", "stat", "value"],
                                lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
        _write(buf.getvalue())
    return 1 if any(r.status == "failed" for r in reports) else 0


def _cube_records(frame: Any) -> list[dict[str, Any]]:
    out = []
    for row in frame.itertuples(index=False):
        le = None if row.le is None or (isinstance(row.le, float) and math.isnan(row.le)) else row.le
        out.append({
            "window_start": row.window_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "path": row.path,
            "signal": row.signal if isinstance(row.signal, str) else None,
            "le": ("+Inf" if le == math.inf else le),
            "stat": row.stat,
            "value": None if row.value is None or math.isnan(row.value) else float(row.value),
        })
    return out


# -- report ----------------------------------------------------------------------------------------
def _promises(args: argparse.Namespace) -> list[Any]:
    """Promises from --preset [PATH=]NAME and --promise [PATH=]TTFT_S/TPOT_S[@TARGET] (later ones win per path)."""
    from app import promise as pm

    out: dict[str, pm.Promise] = {}
    for item in args.preset or []:
        path, _, name = item.rpartition("=")
        p = pm.preset_promise(name, path or pm.ALL_PATHS)
        out[p.path] = p
    for item in args.promise or []:
        p = pm.parse_promise(item)
        out[p.path] = p
    if not out:
        raise ValueError("no promise: give --promise PATH=TTFT_S/TPOT_S[@TARGET] or --preset NAME "
                         "(e.g. --preset mlperf-v5.1-llama3.1-8b-interactive)")
    return list(out.values())


def _load_for_analysis(ws: Workspace, files: Sequence[str]) -> tuple[list[int], list[Any]]:
    reports = ws.load_files(files) if files else []
    for r in reports:
        for e in r.errors:
            sys.stderr.write(f"error: {e}\n")
    ids = sorted({r.dataset_id for r in reports if r.dataset_id is not None}) if files else ws.dataset_ids()
    return ids, reports


def cmd_report(args: argparse.Namespace) -> int:
    from app import report
    from app.cube import ensure_cube, parse_window

    try:
        window_s = parse_window(args.window)
        promises = _promises(args)
        start, end = report.parse_time(args.start), report.parse_time(args.end)
    except ValueError as exc:
        sys.stderr.write(f"headroom report: {exc}\n")
        return 2
    with _workspace(args) as ws:
        ids, reports = _load_for_analysis(ws, args.files)
        if not ids:
            sys.stderr.write("headroom report: no dataset loaded\n")
            return 1
        labels = args.path_label or ws.path_labels()
        cube_id = ensure_cube(ws, ids, window_s, labels)
        from app.records import exact_joint_shares

        exact = exact_joint_shares(ws, ids, promises, start, end, include_failed=not args.exclude_failed)
        try:
            doc = report.build(ws, cube_id, window_s, promises, start, end,
                               include_failed=not args.exclude_failed, exact_joint=exact)
        except ValueError as exc:
            sys.stderr.write(f"headroom report: {exc}\n")
            return 1
    if args.format == "json":
        _write(json.dumps(doc, indent=2, default=_json_default))
    elif args.format == "csv":
        _write(report.to_csv(doc))
    else:
        _write(report.to_markdown(doc))
    return 1 if any(r.status == "failed" for r in reports) else 0


# -- dashboard -----------------------------------------------------------------------------------
def cmd_dashboard(args: argparse.Namespace) -> int:
    import os

    from streamlit.web import cli as stcli

    app_path = Path(__file__).resolve().parent / "streamlit_app.py"
    if args.db:
        os.environ["HEADROOM_DB"] = args.db
    sys.argv = ["streamlit", "run", str(app_path), "--server.port", str(args.port),
                "--server.headless", "true" if args.headless else "false",
                "--browser.gatherUsageStats", "false", *args.streamlit_args]
    return int(stcli.main() or 0)


# -- simulate ------------------------------------------------------------------------------------
def cmd_simulate(args: argparse.Namespace) -> int:
    from app.simulator.cli import main as simulate_main

    return int(simulate_main(args.sim_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headroom", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    pl = sub.add_parser("load", help="load metric exports into the workspace and summarise each file")
    pl.add_argument("files", nargs="+", help="export files (format detected from content; gzip ok)")
    pl.add_argument("--path-label", action="append", help="label(s) whose values name a path (default model_name)")
    pl.add_argument("--format", choices=["text", "json"], default="text")
    _add_db(pl)
    pl.set_defaults(func=cmd_load)

    pc = sub.add_parser("cube", help="print the cube: increases per window, path, signal and bucket")
    pc.add_argument("files", nargs="*", help="export files to load (default: every dataset of --db)")
    pc.add_argument("--window", default="5m", help="window length, 1m to 1d (default 5m)")
    pc.add_argument("--path-label", action="append", help="label(s) whose values name a path (default model_name)")
    pc.add_argument("--format", choices=["csv", "json"], default="csv")
    _add_db(pc, default_memory=True)
    pc.set_defaults(func=cmd_cube)

    pr = sub.add_parser("report", help="per-path breach shares of a promise, with bounds, budget and alerts")
    pr.add_argument("files", nargs="*", help="export files to load (default: every dataset of --db)")
    pr.add_argument("--promise", action="append",
                    help="[PATH=]TTFT_S/TPOT_S[@TARGET], e.g. chat=0.5/0.03@0.99; no PATH = every path")
    pr.add_argument("--preset", action="append", help="[PATH=]NAME of a preset in data/promise_presets.json")
    pr.add_argument("--path-label", action="append", help="label(s) whose values name a path (default model_name)")
    pr.add_argument("--window", default="5m", help="window length, 1m to 1d (default 5m)")
    pr.add_argument("--start", help="first window start, ISO-8601 or Unix seconds (default: start of data)")
    pr.add_argument("--end", help="end of the range (default: end of data)")
    pr.add_argument("--exclude-failed", action="store_true", help="do not count failed requests as breaches")
    pr.add_argument("--format", choices=["json", "markdown", "csv"], default="markdown")
    _add_db(pr, default_memory=True)
    pr.set_defaults(func=cmd_report)

    pd_ = sub.add_parser("dashboard", help="open the Streamlit dashboard (bundled sample if the workspace is empty)")
    pd_.add_argument("--port", type=int, default=8501)
    pd_.add_argument("--headless", action="store_true", help="do not open a browser")
    pd_.add_argument("streamlit_args", nargs=argparse.REMAINDER, help="passed to streamlit run")
    _add_db(pd_)
    pd_.set_defaults(func=cmd_dashboard)

    ps = sub.add_parser("simulate", help="run the fleet simulator (regenerates the bundled sample)",
                        add_help=False)
    ps.add_argument("sim_args", nargs=argparse.REMAINDER)
    ps.set_defaults(func=cmd_simulate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

"""``headroom`` command line. Subcommands are thin: parse arguments, call ``app``, print.

Each command imports the parts of Headroom it runs when it runs: the economics (scipy, numba), the
benchmarks and Streamlit would make every command, ``headroom load`` included, start 2 s slower.

Each subcommand is declared by an ``add_<command>`` beside its ``cmd_<command>``, from the option
groups several share (promise, range, paths, output, workspace, live store), each declared once.
Every subcommand with ``--format json`` prints a stable, documented JSON document (docs/cli/).
"""

from __future__ import annotations

import argparse
import csv
import getpass
import io
import math
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import load
from app.escape import csv_row, md, visible
from app.jsonable import dumps
from app.store import MEMORY, Workspace, default_db_path


def _workspace(args: argparse.Namespace) -> Workspace:
    return Workspace(args.db or default_db_path())


RAY_ADDRESS_ENV = "HEADROOM_RAY_ADDRESS"


def _ray_address(args: argparse.Namespace) -> str | None:
    """``--ray ADDRESS``, else ``$HEADROOM_RAY_ADDRESS``; empty (``--ray ''``) runs locally."""
    address = args.ray if args.ray is not None else os.environ.get(RAY_ADDRESS_ENV, "")
    return address.strip() or None


RAY_ADDRESSES = ("HOST:PORT of the head (GCS port, from inside the cluster), auto (a cluster already running here, "
                 "or the Ray job's), or ray://HOST:10001 (Ray Client, e.g. a port-forwarded KubeRay head)")

# -- the option groups several commands share: each declared once here -------------------------------
PATH_LABEL_HELP = "label(s) whose values name a path (default __model__: the engine's model label)"


def _command(sub: Any, name: str, help_text: str, description: str,
             examples: Sequence[tuple[str, str]]) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` says what it does (``description``) and shows ``examples``
    (what each does, the command line)."""
    epilog = "examples:\n" + "\n".join(f"  # {what}\n  {line}\n" for what, line in examples)
    return sub.add_parser(name, help=help_text, description=description, epilog=epilog.rstrip("\n"),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_files(p: argparse.ArgumentParser, help_text: str = "export files to load (default: every dataset of "
               "--db)", required: bool = False) -> None:
    p.add_argument("files", nargs="+" if required else "*", help=help_text)


def _add_paths(p: argparse.ArgumentParser, help_text: str = PATH_LABEL_HELP) -> None:
    p.add_argument("--path-label", action="append", help=help_text)


def _add_promise(p: argparse.ArgumentParser) -> None:
    p.add_argument("--promise", action="append",
                   help="[PATH=]TTFT_S/TPOT_S[@TARGET], e.g. chat=0.5/0.03@0.99; no PATH = every path")
    p.add_argument("--preset", action="append", help="[PATH=]NAME of a preset in data/promise_presets.json "
                   "(e.g. mlperf-v5.1-llama3.1-8b-interactive)")


def _add_range(p: argparse.ArgumentParser, start: str = "start of data", end: str = "end of data") -> None:
    p.add_argument("--start", help=f"first window start: ISO-8601, Unix seconds or relative, e.g. now-7d "
                   f"(default: {start})")
    p.add_argument("--end", help=f"end of the range (default: {end})")


def _add_window(p: argparse.ArgumentParser, default: str, why: str = "", help_text: str | None = None) -> None:
    p.add_argument("--window", default=default, help=help_text or f"window length, 1m to 1d (default {default}{why})")


def _add_output(p: argparse.ArgumentParser, choices: Sequence[str], default: str, help_text: str | None = None) -> None:
    p.add_argument("--format", choices=list(choices), default=default,
                   help=help_text or f"output format (default {default})")


def _add_db(p: argparse.ArgumentParser, default_memory: bool = False) -> None:
    help_text = (
        "workspace DuckDB file (default: in memory for this command)" if default_memory
        else "workspace DuckDB file (default: $HEADROOM_DB, else $XDG_DATA_HOME/headroom/workspace.duckdb)"
    )
    p.add_argument("--db", default=MEMORY if default_memory else None, help=help_text)


def _add_quiet(p: argparse.ArgumentParser, help_text: str = "no progress on stderr") -> None:
    p.add_argument("--quiet", action="store_true", help=help_text)


def _add_ray(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--ray", metavar="ADDRESS",
                   help=f"{what} (needs pip install 'headroom-slo[ray]'): {RAY_ADDRESSES}; default: "
                   f"${RAY_ADDRESS_ENV}; --ray '' ignores ${RAY_ADDRESS_ENV}")


def _write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# -- load --------------------------------------------------------------------------------------
def cmd_load(args: argparse.Namespace) -> int:
    with _workspace(args) as ws:
        if args.path_label:
            ws.set_paths(args.path_label, ws.path_rules())
        reports = load.load_files(ws, args.files)
    if args.format == "json":
        _write(dumps({"files": [r.as_json() for r in reports]}))
    else:
        _write(_load_text(reports))
    return 1 if any(r.status == "failed" for r in reports) else 0


def add_load(sub: Any) -> None:
    p = _command(sub, "load", "load metric exports into the workspace and summarise each file",
                 "Load each file as a dataset of the workspace (the format is detected from the content, gzip or "
                 "not) and print, per file: format, engine, series, samples, time range, scrape interval, signals, "
                 "paths, counter resets, repaired buckets, unknown metrics, notes and errors. Loading the same bytes "
                 "again is a no-op; a load is one transaction; one bad file never stops the others (exit 1 if any "
                 "failed).",
                 [("load the bundled sample into the default workspace", "headroom load data/sample/metrics.parquet"),
                  ("two exports into a named workspace, paths by model and instance, as JSON",
                   "headroom load a.prom b.json.gz --db fleet.duckdb --path-label __model__ --path-label instance "
                   "--format json")])
    _add_files(p, "export files (format detected from content; gzip ok)", required=True)
    _add_paths(p)
    _add_output(p, ["text", "json"], "text")
    _add_db(p)
    p.set_defaults(func=cmd_load)


def _load_text(reports: Sequence[Any]) -> str:
    out = []
    for r in reports:
        if r.status == "failed":
            out.append(f"FAILED  {visible(r.file)}")
            out.extend(f"  error: {visible(e)}" for e in r.errors)
            continue
        state = "loaded" if r.status == "loaded" else "already loaded (same bytes)"
        out.append(f"{state}  {visible(r.file)}  -> dataset {r.dataset!r}")
        fmt = r.format + (" (gzip)" if r.gzip else "")
        out.append(f"  format: {fmt}   engine: {r.engine or 'unknown'}")
        if r.format == "live":  # windows the store computed (app.live.pushdown), not samples
            out.append(f"  series: {r.series}   window values pulled: {r.samples}")
        else:
            out.append(f"  series: {r.series}   samples: {r.samples}")
        interval = (f"{r.scrape_interval_s:g} s" if r.scrape_interval_s else
                    "n/a (windows computed by the store)" if r.format == "live" else "n/a (one scrape)")
        out.append(f"  time range: {r.start} .. {r.end}   scrape interval: {interval}   time from: {r.time_source}")
        out.append(f"  signals: {', '.join(r.signals) or 'none'}")
        out.append(f"  paths: {', '.join(visible(p) for p in r.paths) or 'none'}")
        out.append(f"  counter resets: {r.resets}   non-monotone buckets repaired: {r.repairs}")
        if r.unknown_metrics:
            shown = ", ".join(visible(m) for m in r.unknown_metrics[:12])
            more = f" (+{len(r.unknown_metrics) - 12} more)" if len(r.unknown_metrics) > 12 else ""
            out.append(f"  unknown metrics kept ({len(r.unknown_metrics)}): {shown}{more}")
        out.extend(f"  note: {visible(n)}" for n in r.notes)
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
        reports = load.load_files(ws, args.files) if args.files else []
        for r in reports:  # stdout is the cube; what the load dropped, repaired or kept goes to stderr
            for e in r.errors:
                sys.stderr.write(f"error: {e}\n")
            for n in r.notes if r.status == "loaded" else ():
                sys.stderr.write(f"note: {r.file}: {n}\n")
        ids = sorted({r.dataset_id for r in reports if r.dataset_id is not None}) if args.files else ws.dataset_ids()
        labels = args.path_label or ws.path_labels()
        frame = cube_frame(ws, ensure_cube(ws, ids, window_s, labels)) if ids else None
    records = _cube_records(frame) if frame is not None else []
    if args.format == "json":
        _write(dumps(records, indent=1))
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["window_start", "path", "signal", "le", "stat", "value"],
                                lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow(csv_row(rec))
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


def add_cube(sub: Any) -> None:
    p = _command(sub, "cube", "print the cube: increases per window, path, signal and bucket",
                 "Print the cube the promise and the economics are computed from: per window (left-open, "
                 "right-closed), path, signal and bucket bound, the increase of every counter and bucket, a "
                 "histogram's count and sum, gauges' min/mean/max, replicas reporting, resets and repaired buckets.",
                 [("the bundled day's cube at 1-hour windows, as CSV",
                   "headroom cube data/sample/metrics.parquet --window 1h"),
                  ("the cube of a workspace's datasets as JSON", "headroom cube --db fleet.duckdb --format json")])
    _add_files(p)
    _add_window(p, "5m")
    _add_paths(p)
    _add_output(p, ["csv", "json"], "csv")
    _add_db(p, default_memory=True)
    p.set_defaults(func=cmd_cube)


# -- report ----------------------------------------------------------------------------------------
def _promises(args: argparse.Namespace) -> list[Any]:
    """Promises from --preset [PATH=]NAME and --promise [PATH=]TTFT_S/TPOT_S[@TARGET] (later ones win per path)."""
    from app.promise import shares as pm

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


def _load_for_analysis(ws: Workspace, files: Sequence[str], args: argparse.Namespace | None = None,
                       command: str = "") -> tuple[list[int], list[Any]]:
    """Load ``files`` (and, with ``--prometheus --pushdown``, pull the cube); the datasets to analyse
    (those loaded, else every dataset of the workspace) and the load reports."""
    reports = load.load_files(ws, files) if files else []
    for r in reports:
        for e in r.errors:
            sys.stderr.write(f"error: {e}\n")
    ids = sorted({r.dataset_id for r in reports if r.dataset_id is not None}) if files else ws.dataset_ids()
    if args is not None and getattr(args, "prometheus", None) and args.pushdown:
        pulled = _pull(ws, args, command)
        if pulled is None:
            return [], reports
        ids = sorted({*(ids if files else []), pulled.dataset_id})
        reports.append(pulled)
    return ids, reports


def _analysis_cube(ws: Workspace, args: argparse.Namespace, command: str, window_s: int,
                   loaded: tuple[list[int], list[Any]] | None = None
                   ) -> tuple[list[int], list[Any], list[str], int] | None:
    """Load (or pull) what ``args`` names (unless ``loaded`` already holds the datasets and load reports)
    and build its cube: (datasets, load reports, path labels, cube id), or None with the reason printed."""
    from app.cube import ensure_cube

    ids, reports = loaded if loaded is not None else _load_for_analysis(ws, args.files, args, command)
    if not ids:
        sys.stderr.write(f"headroom {command}: no dataset loaded\n")
        return None
    labels = list(args.path_label or ws.path_labels())
    try:
        return ids, reports, labels, ensure_cube(ws, ids, window_s, labels)
    except ValueError as exc:  # a live pull that cannot make this cube
        sys.stderr.write(f"headroom {command}: {exc}\n")
        return None


def cmd_report(args: argparse.Namespace) -> int:
    from app.cube import parse_window
    from app.promise import report

    try:
        window_s = parse_window(args.window)
        promises = _promises(args)
        start, end = report.parse_time(args.start), report.parse_time(args.end)
    except ValueError as exc:
        sys.stderr.write(f"headroom report: {exc}\n")
        return 2
    with _workspace(args) as ws:
        from app.records import exact_joint_shares, record_datasets

        loaded = _load_for_analysis(ws, args.files, args, "report")
        ids, reports = loaded
        with_records = record_datasets(ws, ids)
        if ids and len(with_records) == len(ids):  # a benchmark's records alone: every share exact from them
            doc = report.build_from_records(ws, with_records, window_s, promises, start, end,
                                            include_failed=not args.exclude_failed)
            return _write_report(doc, args.format, reports)
        opened = _analysis_cube(ws, args, "report", window_s, loaded)
        if opened is None:
            return 1
        ids, reports, labels, cube_id = opened

        # records cover warm-up and drain the metrics never saw: clamp them to the metric datasets' span
        lo, hi = ws.cursor().execute(
            "select min(t_min), max(t_max) from datasets where list_contains($ids, dataset_id) and n_series > 0",
            {"ids": ids}).fetchall()[0]
        r_start = max(start, lo) if start and lo else (lo or start)
        r_end = min(end, hi) if end and hi else (hi or end)
        exact = exact_joint_shares(ws, ids, promises, r_start, r_end, include_failed=not args.exclude_failed)
        try:
            doc = report.build(ws, cube_id, window_s, promises, start, end,
                               include_failed=not args.exclude_failed, exact_joint=exact)
        except ValueError as exc:
            sys.stderr.write(f"headroom report: {exc}\n")
            return 1
    return _write_report(doc, args.format, reports)


def _write_report(doc: dict[str, Any], fmt: str, reports: list[Any]) -> int:
    from app.promise import report

    if not doc["paths"]:
        sys.stderr.write("headroom report: no request-latency histogram (TTFT, TPOT, ITL, E2E or queue time) "
                         "and no per-request record in the data: nothing to check a promise against\n")
        return 1
    if fmt == "json":
        _write(dumps(doc))
    elif fmt == "csv":
        _write(report.to_csv(doc))
    else:
        _write(report.to_markdown(doc))
    return 1 if any(r.status == "failed" for r in reports) else 0


def add_report(sub: Any) -> None:
    p = _command(sub, "report", "per-path breach shares of a promise, with bounds, budget and alerts",
                 "The promise per path over a range: the share of requests breaching TTFT and TPOT (exact at a "
                 "bucket bound, else an interpolated estimate with its hard interval), the joint interval (exact "
                 "with per-request records beside the metrics), attainment against the target, the error budget "
                 "left and the burn-rate alert states at the end of the range. Exit 1 when the data holds no "
                 "request-latency histogram.",
                 [("the bundled day with its per-request records, two promises, as Markdown",
                   "headroom report data/sample/metrics.parquet data/sample/requests.parquet "
                   "--promise llama-3.1-8b-interactive=0.5/0.025 --promise llama-3.1-8b-batch=5/0.1"),
                  ("an MLPerf preset on every path, the last 7 days of a live Prometheus, as JSON",
                   "headroom report --prometheus http://prometheus:9090 --start now-7d "
                   "--preset mlperf-v5.1-llama3.1-8b-server --format json")])
    _add_files(p)
    _add_promise(p)
    _add_paths(p)
    _add_window(p, "5m")
    _add_range(p)
    p.add_argument("--exclude-failed", action="store_true", help="do not count failed requests as breaches")
    _add_output(p, ["json", "markdown", "csv"], "markdown")
    _add_db(p, default_memory=True)
    _add_store(p)
    p.set_defaults(func=lambda a: _with_live(a, "report", cmd_report))


# -- tail ------------------------------------------------------------------------------------------
def _with_e2e(promises: list[Any], items: Sequence[str]) -> list[Any]:
    """``--e2e [PATH=]SECONDS``: an end-to-end threshold on a path's promise (no PATH: every promise)."""
    from dataclasses import replace

    from app.promise import shares as pm

    e2e: dict[str, float] = {}
    for item in items:
        path, _, seconds = item.rpartition("=")
        try:
            e2e[path or pm.ALL_PATHS] = float(seconds)
        except ValueError:
            raise ValueError(f"--e2e {item!r}: expected [PATH=]SECONDS") from None
    out = []
    for p in promises:
        value = e2e.get(p.path, e2e.get(pm.ALL_PATHS))
        out.append(replace(p, e2e_s=value) if value is not None else p)
    return out


def cmd_tail(args: argparse.Namespace) -> int:
    from app.cube import parse_window
    from app.promise import report
    from app.tail import report as tail_report

    try:
        window_s = parse_window(args.window)
        promises = _with_e2e(_promises(args), args.e2e or [])
        start, end = report.parse_time(args.start), report.parse_time(args.end)
        prices = None
        if args.twin:
            from app.economics.decide.inputs import parse_breach_prices

            prices = parse_breach_prices(args.breach_price or [])
    except ValueError as exc:
        sys.stderr.write(f"headroom tail: {exc}\n")
        return 2
    with _workspace(args) as ws:
        opened = _analysis_cube(ws, args, "tail", window_s)
        if opened is None:
            return 1
        ids, reports, labels, cube_id = opened
        names = [r[0] for r in ws.cursor().execute(
            "select name from datasets where list_contains($ids, dataset_id) order by dataset_id", {"ids": ids}).fetchall()]
        twin_rows = None
        try:
            if args.twin:
                from app.economics.predict import scenarios
                from app.tail import twin

                progress = (lambda msg: sys.stderr.write(f"  {msg}\n")) if not args.quiet else None
                analysis = scenarios.analyse(ws, ids, promises, list(labels), observed_replicas=args.observed_replicas,
                                             seeds=args.seeds, progress=progress)
                twin_rows = twin.attribute(analysis, prices, args.horizon_hours, seeds=args.seeds, progress=progress)
            doc = tail_report.build(ws, cube_id, window_s, promises, names, start, end, twin_rows)
        except ValueError as exc:
            sys.stderr.write(f"headroom tail: {exc}\n")
            return 1
    if not doc["attribution"]:
        sys.stderr.write("headroom tail: no TTFT histogram with a promise in the data: nothing to attribute\n")
        return 1
    if args.format == "json":
        _write(dumps(doc))
    elif args.format == "csv":
        _write(tail_report.to_csv(doc))
    else:
        _write(tail_report.to_markdown(doc))
    return 1 if any(r.status == "failed" for r in reports) else 0


def add_tail(sub: Any) -> None:
    p = _command(sub, "tail", "where the tail lives: breaches queueing explains, what headroom can buy "
                 "down (--twin), and which signal leads breach, with a scaling rule",
                 "Where the tail lives, per path: the TTFT breaches queueing explains (from the queue, prefill and "
                 "TTFT histograms, with bounds); with --twin the breaches headroom can buy down (the fitted twin "
                 "replayed at N, 2N and 4N, per month and in dollars); and which signal predicts breach share, "
                 "from which level, with a scaling rule, for the fleet and for each path.",
                 [("the bundled day's attribution and signals, as Markdown",
                   "headroom tail data/sample/metrics.parquet --promise llama-3.1-8b-interactive=0.5/0.05 "
                   "--promise llama-3.1-8b-batch=5/0.1"),
                  ("with the twin and breach prices, as JSON",
                   "headroom tail data/sample/metrics.parquet --promise 0.5/0.05 --twin --breach-price 0.02 "
                   "--quiet --format json")])
    _add_files(p)
    _add_promise(p)
    _add_paths(p)
    p.add_argument("--e2e", action="append", help="[PATH=]SECONDS: an end-to-end threshold whose breaches are "
                   "attributed to queue, prefill and decode time")
    _add_window(p, "1m", ": leads of 0-15 minutes in minutes")
    _add_range(p)
    p.add_argument("--twin", action="store_true", help="also fit the twin and replay the observed demand at N, 2N "
                   "and 4N: the breaches capacity causes, per month and in dollars (about the time of headroom "
                   "scenarios' fit)")
    p.add_argument("--breach-price", action="append", help="with --twin: PATH=USD (or USD for every path)")
    p.add_argument("--horizon-hours", type=float, default=720.0, help="with --twin: hours of a month (default 720)")
    p.add_argument("--observed-replicas", type=int, help="with --twin: replicas behind the data (default: inferred)")
    p.add_argument("--seeds", type=int, default=3, help="with --twin: replay seeds (default 3)")
    _add_quiet(p)
    _add_output(p, ["json", "markdown", "csv"], "markdown")
    _add_db(p, default_memory=True)
    _add_store(p)
    p.set_defaults(func=lambda a: _with_live(a, "tail", cmd_tail))


# -- live stores -----------------------------------------------------------------------------------
def _add_store(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--prometheus", metavar="URL", required=required,
                   help="a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics) "
                   "to read the raw samples from instead of files")
    p.add_argument("--bearer-token-env", metavar="NAME", help="environment variable holding a bearer token "
                   "(default $HEADROOM_PROMETHEUS_TOKEN when set)")
    p.add_argument("--basic-auth-env", metavar="NAME", help="environment variable holding user:password "
                   "(default $HEADROOM_PROMETHEUS_BASIC_AUTH when set)")
    p.add_argument("--ask-token", action="store_true", help="prompt for a bearer token (not echoed)")
    p.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="an extra request header, e.g. 'X-Scope-OrgID: tenant' for Mimir or Cortex")
    p.add_argument("--ca-file", help="CA bundle to verify the store's TLS certificate with")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS (said on stderr)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take (default 30)")
    p.add_argument("--match", help="a label selector narrowing the series, e.g. '{job=\"vllm\"}'")
    p.add_argument("--chunk", help="time per query (default 1h of raw samples, 1d of pushdown windows)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--raw", action="store_true", help="read the raw samples and build the exact cube here (the "
                     "default)")
    how.add_argument("--pushdown", action="store_true", help="let the store compute the windows (PromQL increase() "
                   "and *_over_time at step = window, summed by the path labels): far less to pull, but counts are "
                   "increase()'s extrapolated ones (docs: Live stores, Pushdown and extrapolation); default: raw samples, exact")
    p.add_argument("--by", choices=["path", "series"], default="path", help="with --pushdown: sum in the store by "
                   "the path labels (default) or pull every series' windows (any path mapping later)")


def _store(args: argparse.Namespace) -> Any:
    from app.live import client as live

    env = dict(os.environ)
    if args.ask_token:
        env[live.TOKEN_ENV] = getpass.getpass("bearer token: ")
        args.bearer_token_env = None
    if args.insecure:
        sys.stderr.write(f"warning: TLS certificates of {args.prometheus} are NOT verified (--insecure)\n")
    return live.store_from_env(args.prometheus, env, token_env=args.bearer_token_env,
                               basic_env=args.basic_auth_env, extra_headers=args.header, timeout_s=args.timeout,
                               ca_file=args.ca_file, insecure=args.insecure)


def _fetch(args: argparse.Namespace, out: Path, command: str) -> int | None:
    """Fetch (start, end] of ``--prometheus`` into ``out``; the exit code on failure (printed), else None."""
    from app.live import client as live

    try:
        progress = (lambda msg: sys.stderr.write(f"  {msg}\n")) if not getattr(args, "quiet", False) else None
        n, _, _ = live.fetch(_store(args), args.start or "now-1d", args.end or "now", out, args.match,
                             args.chunk or "1h", progress)
    except (live.LiveError, ValueError) as exc:
        sys.stderr.write(f"headroom {command}: {exc}\n")
        return 1
    sys.stderr.write(f"  {n:,} samples written to {out}\n")
    return None


def cmd_fetch(args: argparse.Namespace) -> int:
    if args.discover:
        from app.live import client as live

        try:
            client = live.Client(_store(args))
            found = live.discover(client, live.parse_time(args.start or "now-1d"), live.parse_time(args.end or "now"),
                                  args.match)
        except (live.LiveError, ValueError) as exc:
            sys.stderr.write(f"headroom fetch: {exc}\n")
            return 1
        _write(dumps(found))
        return 0
    if args.pushdown:
        if args.out:
            sys.stderr.write("headroom fetch: --pushdown keeps the pulled cube in the workspace (--db FILE), not in "
                             "--out\n")
            return 2
        with _workspace(args) as ws:
            report = _pull(ws, args, "fetch")
        if report is None:
            return 1
        _write(dumps({"files": [report.as_json()]}) if args.format == "json" else _load_text([report]) + "\n")
        return 0
    if not args.out:
        sys.stderr.write("headroom fetch: give --out FILE.parquet, or --pushdown --db FILE (or --discover)\n")
        return 2
    failed = _fetch(args, Path(args.out), "fetch")
    return 0 if failed is None else failed


def add_fetch(sub: Any) -> None:
    p = _command(sub, "fetch", "read the raw serving samples of a live Prometheus-compatible store into a "
                 "long Parquet file (what headroom load reads)",
                 "Read a live Prometheus-compatible store (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics) "
                 "through its HTTP API: the raw samples of every known serving metric in (start, end], written as "
                 "the long Parquet file headroom load reads (the exact path), or, with --pushdown, the windows "
                 "the store computes by PromQL, kept in the workspace as a dataset of kind live. --discover "
                 "prints what the store holds for Headroom and fetches nothing.",
                 [("what the store holds over the last day",
                   "headroom fetch --prometheus http://prometheus:9090 --discover"),
                  ("a week of raw samples from Mimir, for one tenant",
                   "headroom fetch --prometheus http://mimir/prometheus --header 'X-Scope-OrgID: team-a' "
                   "--start now-7d --out week.parquet"),
                  ("a month of 5-minute windows computed by the store, into a workspace",
                   "headroom fetch --prometheus http://prometheus:9090 --start now-30d --pushdown --db fleet.duckdb")])
    _add_store(p, required=True)
    _add_range(p, "now-1d", "now")
    p.add_argument("--out", help="the Parquet file to write")
    p.add_argument("--discover", action="store_true", help="print (JSON) the engines, families and candidate path "
                   "labels the store holds in the range, and fetch nothing")
    _add_quiet(p, "no progress lines")
    _add_window(p, "5m", help_text="with --pushdown: the window the store computes (default 5m; a cube of it "
                "may use any multiple)")
    _add_paths(p, "with --pushdown --by path: label(s) the store sums by (default: the workspace's path labels, "
               "__model__ = the engine's model label)")
    _add_output(p, ["text", "json"], "text", "with --pushdown: the dataset's summary as text or JSON (as headroom "
                "load)")
    _add_db(p)
    p.set_defaults(func=cmd_fetch)


def _pull(ws: Workspace, args: argparse.Namespace, command: str) -> Any:
    """``--pushdown``: the cube pulled by PromQL into ``ws`` as a dataset of kind live; its report, or None
    (the error printed)."""
    from app.live import client as live
    from app.live import pushdown

    progress = (lambda msg: sys.stderr.write(f"  {msg}\n")) if not getattr(args, "quiet", False) else None
    try:
        # the capacity model reads every replica's series at 1-minute windows (the demand) and fits on each
        # scrape interval: scenarios pull per series at 1 m, with the scalar series (no bucket) raw
        scenarios = command == "scenarios"
        return pushdown.fetch_cube(ws, _store(args), args.start or "now-1d", args.end or "now",
                                   window="1m" if scenarios else getattr(args, "window", None) or "5m",
                                   path_labels=args.path_label,
                                   by="series" if scenarios else args.by, match=args.match, chunk=args.chunk or "1d",
                                   progress=progress, raw_scalars=scenarios)
    except (live.LiveError, ValueError) as exc:
        sys.stderr.write(f"headroom {command}: {exc}\n")
        return None


def _with_live(args: argparse.Namespace, command: str, run: Any) -> int:
    """Run ``run(args)`` on the files given plus, with ``--prometheus``, the raw samples fetched into a
    temporary export (the exact path: the cube is built locally)."""
    if not getattr(args, "prometheus", None) or args.pushdown:  # a pushdown pulls into the command's workspace
        return run(args)
    with tempfile.TemporaryDirectory(prefix="headroom-live-") as tmp:
        out = Path(tmp) / "live.parquet"
        failed = _fetch(args, out, command)
        if failed is not None:
            return failed
        args.files = [*args.files, str(out)]
        return run(args)


# -- rules -----------------------------------------------------------------------------------------
def cmd_rules(args: argparse.Namespace) -> int:
    from app.cube import ensure_cube
    from app.promise import rules
    from app.promise import shares as pm

    try:
        promises = _promises(args)
        rules.parse_duration(args.slo_window)
    except ValueError as exc:
        sys.stderr.write(f"headroom rules: {exc}\n")
        return 2
    bounds, engine, source = None, args.engine, "vLLM's default bucket bounds (no export given)"
    reports: list[Any] = []
    if args.files:
        with _workspace(args) as ws:
            ids, reports = _load_for_analysis(ws, args.files)
            if not ids:
                sys.stderr.write("headroom rules: no dataset loaded\n")
                return 1
            bounds = pm.bucket_bounds(ws, ensure_cube(ws, ids, 300, None))
            engine = engine or next((r.engine for r in reports if r.engine), None)
            source = "the bucket bounds of " + ", ".join(Path(f).name for f in args.files)
    label = args.path_label or rules.model_label(engine or "vllm")  # the engine's model label by default
    try:
        plan = rules.plan(promises, label, args.slo_window, engine or "vllm", bounds, args.allow_interpolated)
    except ValueError as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(f"headroom rules: {line}\n")
        return 1
    text = rules.to_yaml(plan, source)
    if args.out:
        Path(args.out).write_text(text)
        sys.stderr.write(f"wrote {args.out}: check it with promtool check rules {args.out}\n")
    else:
        _write(text)
    return 1 if any(r.status == "failed" for r in reports) else 0


def add_rules(sub: Any) -> None:
    p = _command(sub, "rules", "the promise as Prometheus recording rules and burn-rate alerts (YAML)",
                 "Write the promise as Prometheus rules: recording rules for each path's TTFT, TPOT and joint "
                 "breach ratio at the windows the SRE workbook's multiwindow alerts read, and those burn-rate "
                 "alerts. A threshold must be a bucket bound of the exports given (else of vLLM's default "
                 "buckets): one between bounds is refused with the bounds around it and the vLLM flag that would "
                 "make it one.",
                 [("rules for MLPerf's server preset on every path, checked against an export's buckets",
                   "headroom rules data/sample/metrics.parquet --preset mlperf-v5.1-llama3.1-8b-server "
                   "--allow-interpolated --out rules.yml"),
                  ("a 28-day SLO for one path, on vLLM's default buckets",
                   "headroom rules --promise chat=0.5/0.05@0.99 --slo-window 28d")])
    _add_files(p, "exports whose bucket bounds the thresholds must sit on (default: vLLM's default buckets)")
    _add_promise(p)
    p.add_argument("--path-label", help="the label whose values are the paths (default: the engine's model label, "
                   "model_name; model for Triton)")
    p.add_argument("--slo-window", default="30d", help="the SLO period the burn factors are for (default 30d)")
    p.add_argument("--engine", help="engine whose histogram names the rules read (default: the export's, else vllm)")
    p.add_argument("--allow-interpolated", action="store_true",
                   help="a threshold between bucket bounds reads the bound below (an upper bound of the ratio)")
    p.add_argument("--out", help="write the rules here (default: stdout)")
    _add_db(p, default_memory=True)
    p.set_defaults(func=cmd_rules)


# -- scenarios -------------------------------------------------------------------------------------
def _prices(args: argparse.Namespace) -> Any:
    from app.economics.decide.inputs import parse_breach_prices
    from app.economics.decide.money import Prices

    breach = parse_breach_prices(args.breach_price or [])
    if args.replica_hour_price is not None:
        return Prices(replica_hour=args.replica_hour_price, breach=breach, horizon_hours=args.horizon_hours)
    if args.gpu_hour_price is None or args.gpus_per_replica is None:
        raise ValueError("give --replica-hour-price USD, or --gpu-hour-price USD with --gpus-per-replica N")
    return Prices.from_gpu(args.gpu_hour_price, args.gpus_per_replica, breach, args.horizon_hours)


def _scenario_args(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario inputs the command line gives, checked before anything is loaded (the datasets,
    path labels and rules come from the workspace after the load)."""
    from app.economics.decide.inputs import ScenarioInputs, parse_multipliers, parse_replicas
    from app.economics.model.capacity import Assumptions
    from app.economics.model.conversations import conversation_shares

    for flag in ("kv_cache_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ValueError(f"--{flag.replace('_', '-')} {value}: must be a positive number of "
                             f"{'sequences' if flag == 'max_num_seqs' else 'tokens'}")
    parsed = {
        "promises": tuple(_promises(args)), "replicas": tuple(parse_replicas(args.replicas)),
        "traffic": tuple(parse_multipliers(args.traffic, "--traffic")),
        "context": tuple(parse_multipliers(args.context, "--context")), "seeds": args.seeds,
        "assumptions": Assumptions(max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                                   kv_cache_tokens=args.kv_cache_tokens, max_model_len=args.max_model_len,
                                   block_size=args.block_size, router=args.router,
                                   prefix_cache=args.prefix_cache,
                                   conversation_share=conversation_shares(args.conversation_share)
                                   if args.conversation_share else None,
                                   think_s=args.think_time, affinity_margin=args.affinity_margin),
        "observed_replicas": args.observed_replicas, "calibrate": args.calibrate, "prices": _prices(args),
        "split": args.cost_split, "routing": args.routing, "routing_replicas": args.routing_replicas,
        "routing_traffic": args.routing_traffic,
    }
    ScenarioInputs(datasets=(0,), path_labels=(), **parsed)  # the rest of its checks
    return parsed


def _policy_file(args: argparse.Namespace) -> Any:
    """The --policy file, parsed (its errors name the file and the key), or None."""
    from app.economics.decide import policy_file

    return policy_file.read(args.policy) if args.policy else None


def cmd_scenarios(args: argparse.Namespace) -> int:
    from app.economics.decide import saved, scenarios_text
    from app.economics.decide.inputs import ScenarioInputs
    from app.economics.run.executors import ExecutorError
    from app.economics.run.ray_executor import RayCluster

    try:
        address = _ray_address(args)
        executor = RayCluster(address) if address else None  # a missing ray extra is said before any work
    except ExecutorError as exc:
        sys.stderr.write(f"headroom scenarios: --ray {address}: {exc}\n")
        return 2
    try:
        if args.save and args.db == MEMORY:
            raise ValueError("--save needs --db FILE: the workspace the set is kept in")
        parsed = _scenario_args(args)
        policy_set = _policy_file(args)
    except ValueError as exc:
        sys.stderr.write(f"headroom scenarios: {exc}\n")
        return 2
    with _workspace(args) as ws:
        ids, reports = _load_for_analysis(ws, args.files, args, "scenarios")
        if not ids:
            sys.stderr.write("headroom scenarios: no dataset loaded\n")
            return 1
        inputs = ScenarioInputs(datasets=tuple(ids), path_labels=tuple(args.path_label or ws.path_labels()),
                                rules=tuple(ws.path_rules()), **parsed)
        progress = (lambda msg: sys.stderr.write(f"  {msg}\n")) if not args.quiet else None
        try:
            run = inputs.run(ws, executor=executor, progress=progress, policy_set=policy_set)
        except (ValueError, ExecutorError) as exc:
            sys.stderr.write(f"headroom scenarios: {exc}\n")
            return 1
        if args.save:
            saved.save(ws, args.save, inputs.saved(), run.document)
    if args.format == "json":
        _write(dumps(run.document))
    elif args.format == "csv":
        _write(scenarios_text.scenarios_csv(run.document))
    else:
        _write(scenarios_text.scenarios_markdown(run.document))
    return 1 if any(r.status == "failed" for r in reports) else 0


def add_scenarios(sub: Any) -> None:
    p = _command(sub, "scenarios", "headroom cost against breach cost for capacity scenarios",
                 "Fit a capacity model of one replica from the metrics, calibrate it so the observed fleet comes "
                 "out right, replay the observed demand through N' modelled replicas (traffic x g, context x m) "
                 "and weigh headroom cost (replica-hours x price) against breach cost (breached requests x the "
                 "price of one breach), per path and for the fleet: the cheapest N', break-even breach prices, "
                 "cost per kept request. Every parameter says where it came from; what the data cannot identify "
                 "is flagged, never refused.",
                 [("the bundled day, 3 to 8 replicas, two breach prices, as Markdown",
                   "headroom scenarios data/sample/metrics.parquet --replicas 3:8 --replica-hour-price 2.5 "
                   "--breach-price llama-3.1-8b-interactive=0.02 --breach-price llama-3.1-8b-batch=0.05 "
                   "--promise llama-3.1-8b-interactive=0.5/0.05 --promise llama-3.1-8b-batch=5/0.1"),
                  ("with the policies of a file beside the static rows, saved in a workspace",
                   "headroom scenarios data/sample/metrics.parquet --replicas 3:8 --replica-hour-price 2.5 "
                   "--breach-price 0.02 --promise 0.5/0.05 --policy data/policy-example.yaml --db ws.duckdb "
                   "--save day-1"),
                  ("a month's grid on a Ray cluster",
                   "headroom scenarios month.parquet --replicas 2:16 --traffic 0.75,1.0,1.25 --gpu-hour-price 2 "
                   "--gpus-per-replica 1 --breach-price 0.02 --promise chat=0.5/0.05 --ray ray://127.0.0.1:10001")])
    _add_files(p)
    p.add_argument("--replicas", required=True, help="replica counts: FROM:TO[:STEP] or a list, e.g. 2:12")
    p.add_argument("--traffic", default="1.0", help="traffic multipliers, e.g. 0.5,1.0,1.5 (default 1.0)")
    p.add_argument("--context", default="1.0", help="context-length multipliers, e.g. 1.0,1.5 (default 1.0)")
    p.add_argument("--gpu-hour-price", type=float, help="USD per GPU-hour (with --gpus-per-replica)")
    p.add_argument("--gpus-per-replica", type=float, help="GPUs per replica")
    p.add_argument("--replica-hour-price", type=float, help="USD per replica-hour (instead of the GPU prices)")
    p.add_argument("--breach-price", action="append", help="PATH=USD: price of one breached request of a path "
                   "(no PATH: every path)")
    _add_promise(p)
    p.add_argument("--horizon-hours", type=float, default=720.0, help="hours the decision covers (default 720)")
    p.add_argument("--observed-replicas", type=int, help="replicas behind the data (default: inferred)")
    p.add_argument("--cost-split", choices=["requests", "equal"], default="requests",
                   help="how a path's share of the fleet cost is set (default: by requests)")
    p.add_argument("--seeds", type=int, default=3, help="replay seeds per scenario (default 3)")
    p.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                   help="calibrate the twin at the observed fleet size: its mean inter-token latency and prefill "
                   "time equal the observed (default on; --no-calibrate runs the fitted law as it is)")
    engine = p.add_argument_group(
        "engine facts", "what you know of your engine overrides what is read from the data (shown as 'given')")
    engine.add_argument("--kv-cache-tokens", type=int,
                        help="KV capacity of one replica in tokens (vLLM prints it at start-up: 'GPU KV cache size: "
                        "N tokens'); default: vllm:cache_config_info, else fitted by simulation to "
                        "kv_cache_usage_perc")
    engine.add_argument("--max-model-len", type=int, help="--max-model-len of the engine (default: bracketed by "
                        "the length histograms' buckets)")
    engine.add_argument("--max-num-seqs", type=int, help="--max-num-seqs (default: read from the data when the cap "
                        "bound, else vLLM's 256)")
    engine.add_argument("--max-num-batched-tokens", type=int,
                        help="chunked-prefill token budget per step (default: from iteration_tokens_total, else "
                        "vLLM's 8192)")
    engine.add_argument("--block-size", type=int, help="KV block size in tokens (default: cache_config_info, else 16)")
    engine.add_argument("--router", choices=["least_outstanding", "round_robin", "random", "power_of_two",
                                             "prefix_aware"],
                        help="routing policy in front of the replicas (default: fitted on how work spreads over the "
                        "replicas, else least_outstanding, assumed); prefix_aware keeps a conversation's turns on "
                        "one replica")
    engine.add_argument("--prefix-cache", choices=["shared", "conversation", "off"],
                        help="the scenarios' prefix cache: 'conversation' splits each path's observed cached share "
                        "(vllm:prefix_cache_hits_total) between a prefix every request starts with (its hit rate "
                        "is the same at any N') and conversation history (cached where the previous turn ran: "
                        "under load-based routing (N'-1)/N' of follow-ups miss it); 'shared' takes it all for the "
                        "shared prefix; 'off' computes every prompt token (--no-enable-prefix-caching: what the "
                        "cache is worth). Default: conversation where the export shows cache hits")
    engine.add_argument("--conversation-share", action="append", metavar="[PATH=]SHARE",
                        help="the share of a path's cached tokens that are conversation history, 0 to 1 (no "
                        "PATH: every path); the metrics show only the sum. Default: the least the prompt lengths "
                        "allow (a prefix every request starts with is no longer than the path's 1 %% shortest "
                        "prompts)")
    engine.add_argument("--think-time", type=float, metavar="SECONDS",
                        help="mean time from an answer to the conversation's next turn (default 30, assumed)")
    engine.add_argument("--affinity-margin", type=int, metavar="N",
                        help="the prefix-aware router keeps a turn on its conversation's replica unless that one "
                        "holds more than N outstanding requests above the least loaded (default 16)")
    _add_paths(p)
    _add_ray(p, "run the scenario replays on a Ray cluster instead of local processes ($HEADROOM_WORKERS, "
             "default every core)")
    _add_quiet(p)
    p.add_argument("--policy", metavar="FILE.yaml", help="policy rows beside the static scenarios: autoscaler, "
                   "admission, retry and degradation (schema: docs, Policies replayed through the twin)")
    p.add_argument("--routing", action=argparse.BooleanOptionalAction, default=True,
                   help="the routing row: load-based against prefix-aware routing replayed at every replica count "
                   "of the grid, priced at one N' (default on where the export shows prefix-cache hits; the "
                   "document says why it is not priced otherwise)")
    p.add_argument("--routing-replicas", type=int, metavar="N",
                   help="the routing row's N' (default: the smallest meeting every path's promise under load-based "
                   "routing, else the observed replica count)")
    p.add_argument("--routing-traffic", type=float, metavar="G",
                   help="the routing row's traffic multiplier (default 1.0 when --traffic has it, else its first)")
    p.add_argument("--save", metavar="NAME", help="save this scenario set in the workspace under NAME")
    _add_output(p, ["json", "markdown", "csv"], "markdown")
    _add_db(p, default_memory=True)
    _add_store(p)
    _add_range(p, "now-1d (with --prometheus)", "now")
    p.set_defaults(func=lambda a: _with_live(a, "scenarios", cmd_scenarios))


# -- saved scenario sets --------------------------------------------------------------------------
def cmd_saved(args: argparse.Namespace) -> int:
    from app.economics.decide import saved

    with _workspace(args) as ws:
        try:
            if args.action == "list":
                rows = [{"name": n, "saved_at": saved.get(ws, n)["saved_at"]} for n in saved.names(ws)]
                _write(dumps(rows) if args.format == "json" else
                       "\n".join(f"{r['name']}\t{r['saved_at']}" for r in rows) or "no saved scenario set")
            elif args.action == "show":
                _write(dumps(saved.get(ws, _one(args))["document"]))
            elif args.action == "export":
                _write(saved.export_json(ws, args.names or None))
            elif args.action == "import":
                imported = [n for f in args.names for n in saved.import_json(ws, Path(f).read_text())]
                _write("imported: " + ", ".join(imported))
            elif args.action == "delete":
                saved.delete(ws, _one(args))
            elif args.action == "compare":
                if len(args.names) != 2:
                    raise ValueError("compare takes two saved set names")
                rows = saved.compare(saved.get(ws, args.names[0]), saved.get(ws, args.names[1]))
                _write(dumps(rows) if args.format == "json" else _compare_text(args.names, rows))
        except (ValueError, OSError) as exc:
            sys.stderr.write(f"headroom saved: {exc}\n")
            return 1
    return 0


def _one(args: argparse.Namespace) -> str:
    if len(args.names) != 1:
        raise ValueError(f"{args.action} takes one saved set name")
    return args.names[0]


def _compare_text(names: Sequence[str], rows: list[dict[str, Any]]) -> str:
    usd = lambda x: "n/a" if x is None else f"${x:,.0f}"  # noqa: E731
    out = [f"| replicas | traffic | context | total {md(names[0])} | total {md(names[1])} | difference |",
           "|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {r['replicas']} | x{r['traffic']:g} | x{r['context']:g} | {usd(r['total_cost_a'])} | "
            f"{usd(r['total_cost_b'])} | {usd(r['difference'])} |" for r in rows]
    return "\n".join(out)


def add_saved(sub: Any) -> None:
    p = _command(sub, "saved", "saved scenario sets: list, show, compare, export, import, delete",
                 "Named scenario sets kept in a workspace (headroom scenarios ... --save NAME --db FILE, or the "
                 "dashboard's Economics page): list them, show one's document, compare two sets' fleet totals "
                 "side by side, export them as JSON, import such a file, delete one.",
                 [("the sets of a workspace", "headroom saved list --db ws.duckdb"),
                  ("two sets side by side", "headroom saved compare day-1 day-2 --db ws.duckdb"),
                  ("every set to a file, and into another workspace",
                   "headroom saved export --db ws.duckdb > sets.json && headroom saved import sets.json --db other.duckdb")])
    p.add_argument("action", choices=["list", "show", "compare", "export", "import", "delete"])
    p.add_argument("names", nargs="*", help="set names (import: JSON files written by export)")
    _add_output(p, ["text", "json"], "text")
    _add_db(p)
    p.set_defaults(func=cmd_saved)


# -- bench ---------------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    from app.bench import document, runner
    from app.economics.run.executors import ExecutorError
    from app.economics.run.ray_executor import RayCluster

    only = [b.strip() for b in args.only.split(",") if b.strip()] if args.only else None
    log = None if args.quiet else (lambda msg: (sys.stderr.write(msg + "\n"), sys.stderr.flush()))
    address = _ray_address(args)
    try:
        if address:
            RayCluster(address)  # a missing ray extra is said before any benchmark runs
    except ExecutorError as exc:
        sys.stderr.write(f"headroom bench: --ray {address}: {exc}\n")
        return 2
    try:
        doc = runner.run(args.size, only=only, workdir=args.workdir, log=log, promql=not args.no_prometheus,
                        ray=address)
    except ValueError as exc:
        sys.stderr.write(f"headroom bench: {exc}\n")
        return 2
    except ExecutorError as exc:
        sys.stderr.write(f"headroom bench: {exc}\n")
        return 1
    _write(document.to_json(doc) if args.format == "json" else document.to_table(doc))
    return 0


def add_bench(sub: Any) -> None:
    p = _command(sub, "bench", "benchmarks against prometheus_client, pandas, a bare scan and Prometheus, "
                 "on generated data (docs: Benchmarks)",
                 "Generate data deterministically and time Headroom against what users would otherwise use, in "
                 "the same run, each pair checked to agree: the text parser against prometheus_client, the load "
                 "and cube build against a bare scan and pandas, the cube against PromQL, the replay against the "
                 "Python engine, promise and price changes, and a month of 8 replicas. The JSON carries the "
                 "commit, machine and date it ran on (python -m app.docgen bench renders it as the docs' page).",
                 [("the small size, under a minute", "headroom bench"),
                  ("the full size as JSON, keeping the generated data for a rerun",
                   "headroom bench --size full --format json --workdir /tmp/bench > bench.json"),
                  ("only the replay and the interactions", "headroom bench --only replay,interaction")])
    p.add_argument("--size", choices=["small", "full"], default="small",
                   help="small: under a minute; full: 1 M text lines, 1/10/100 M samples, a 30-day cube, a day replay")
    _add_output(p, ["table", "json"], "table")
    p.add_argument("--only", help="comma-separated subset of: text_ingest, cube, replay, interaction, month, month15")
    p.add_argument("--workdir", help="keep the generated data here (default: a temporary directory, removed)")
    p.add_argument("--no-prometheus", action="store_true", help="skip the PromQL comparison")
    _add_ray(p, "also run the replay benchmark's grid on a Ray cluster, against the local pool")
    _add_quiet(p)
    p.set_defaults(func=cmd_bench)


# -- dashboard -----------------------------------------------------------------------------------
DEFAULT_HOST = "127.0.0.1"  # loopback: a team reaches it through an authenticating proxy (docs/deployment.md)
DEFAULT_MAX_UPLOAD_MB = 1024  # week-long exports are large; Streamlit's own default is 200


def dashboard_argv(args: argparse.Namespace) -> list[str]:
    """The ``streamlit run`` command line of ``headroom dashboard``: loopback unless ``--host``, XSRF
    protection on, uploads bounded by ``--max-upload-mb``. Refuses extra arguments that turn XSRF off."""
    extra = list(args.streamlit_args or [])
    if extra[:1] == ["--"]:  # `headroom dashboard -- --server.option value`: options for streamlit run
        extra = extra[1:]
    joined = " ".join(extra).replace("=", " ").lower()
    if re.search(r"--server\.enablexsrfprotection\s+(false|0|no)\b", joined):
        raise ValueError("--server.enableXsrfProtection false is refused: XSRF protection stays on "
                         "(uploads and form posts would accept requests forged by other sites)")
    if args.max_upload_mb < 1:
        raise ValueError(f"--max-upload-mb {args.max_upload_mb}: must be at least 1")
    app_path = Path(__file__).resolve().parent / "streamlit_app.py"
    # Always headless: Streamlit's first non-headless start asks for an e-mail address on stdin,
    # which blocks a terminal and kills a non-interactive start. No file watcher: it serves editing
    # the app's source, and after every script run it resolves the path of each imported module
    # (numba, scipy, pandas...), a sixth of the server's CPU when sessions interact.
    return ["streamlit", "run", str(app_path), "--server.port", str(args.port), "--server.address", args.host,
            "--server.enableXsrfProtection", "true", "--server.maxUploadSize", str(args.max_upload_mb),
            "--server.headless", "true", "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false", *extra]


def cmd_dashboard(args: argparse.Namespace) -> int:
    from streamlit.web import cli as stcli

    from app.economics.run import compiled

    try:
        argv = dashboard_argv(args)
    except ValueError as exc:
        sys.stderr.write(f"headroom dashboard: {exc}\n")
        return 2
    if args.db:
        os.environ["HEADROOM_DB"] = args.db
    # the replay engines compiled beside the server (the fleet engine first: about half a minute the
    # first time on a machine, the policy engine as long again), so that the first grid finds its
    # engine in numba's cache
    compiled.start_ahead()
    sys.argv = argv
    if args.open_browser:  # once the server has had a moment to start
        import threading
        import webbrowser

        host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0", "::", "") else args.host
        threading.Timer(2.0, webbrowser.open, args=(f"http://{host}:{args.port}",)).start()
    return int(stcli.main() or 0)


def add_dashboard(sub: Any) -> None:
    p = _command(sub, "dashboard", "open the Streamlit dashboard (bundled sample if the workspace is empty)",
                 "Serve the Streamlit dashboard on the workspace and print its URL. An empty workspace loads the "
                 "bundled sample. It listens on 127.0.0.1 (this machine only) unless --host names another "
                 "address; XSRF protection stays on. Options after -- go to streamlit run.",
                 [("the bundled sample in its own workspace",
                   "HEADROOM_DB=.headroom-sample.duckdb headroom dashboard"),
                  ("a team's workspace behind a reverse proxy on this machine",
                   "headroom dashboard --db /srv/headroom/workspace.duckdb -- --server.enableCORS true "
                   "--server.allowedHosts headroom.example.com")])
    p.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; 0.0.0.0 or :: for "
                   "every interface: put an authenticating reverse proxy in front, docs: Team deployment)")
    p.add_argument("--max-upload-mb", type=int, default=DEFAULT_MAX_UPLOAD_MB,
                   help=f"largest file the Data page accepts, in MB (default {DEFAULT_MAX_UPLOAD_MB})")
    p.add_argument("--open-browser", action="store_true", help="open the dashboard in the default browser")
    p.add_argument("streamlit_args", nargs=argparse.REMAINDER, help="after --: options passed to streamlit run "
                   "(e.g. -- --server.baseUrlPath headroom)")
    _add_db(p)
    p.set_defaults(func=cmd_dashboard)


def add_simulate(sub: Any) -> None:
    """Listed for ``headroom --help``; ``app.simulator.cli`` parses its flags (see :func:`main`)."""
    sub.add_parser("simulate", help="run the fleet simulator (regenerates the bundled sample: "
                   "headroom simulate --seed 7 --out data/sample)", add_help=False)


COMMANDS = (add_load, add_cube, add_report, add_tail, add_fetch, add_rules, add_scenarios, add_saved, add_bench,
            add_dashboard, add_simulate)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headroom", description=__doc__.splitlines()[0],
                                epilog="headroom COMMAND --help says what a command does, with examples.")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["simulate"]:  # the simulator parses its own flags (including --help)
        from app.simulator.cli import main as simulate_main

        return int(simulate_main(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

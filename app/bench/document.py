"""The benchmark document as a table (for people) or JSON (for machines; shape in docs/cli/bench.md)."""

from __future__ import annotations

from typing import Any

from app.bench.measure import Result
from app.jsonable import dumps

GOALS = {
    ("text_ingest", "prometheus_client"): "≥ 15× and ≥ 1.5 M lines/s",
    ("parquet_load", "bare_scan"): "(ingest; the floor is a count/sum scan)",
    ("cube_build", "bare_scan"): "≤ 2× the floor (ratio ≥ 0.5); ≤ 4 GB RSS at 100 M",
    ("parquet_to_cube", "pandas"): "(retired: the storage write is the floor; the 15 s month is the scale)",
    ("promql_cube", "promql"): "ratio ≥ 1",
    ("promise_change", None): "≤ 100 ms",
    ("promise_change_browser", None): "≤ 1 s",
    ("price_change", None): "≤ 50 ms",
    ("scenario_replay", "python_engine"): "≤ 0.01 s per replica-hour on one core",
    ("scenario_grid", "sequential"): "10 scenarios ≤ 15 s on 2 cores",
    ("scenario_grid_ray", "local_pool"): "the same predictions",
    ("economics_month", "sequential"): "≤ 5 min on 2 cores; ≤ 4 GB peak RSS",
    ("economics_month_15s", "sequential"): "≤ 900 s on 2 cores; ≤ 8 GB peak RSS",
    ("economics_month_15s_pushdown", "file"): "the cube within the extrapolation difference; time beside the file's",
}


def document(machine: dict[str, Any], results: list[Result], growth: float | None, size: str,
             seconds: float, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The benchmark document; ``provenance`` (:func:`app.provenance.record`) says which commit ran on
    which machine, and when, for the generated benchmark page."""
    return {"machine": machine, "size": size, "results": [r.as_json() for r in results],
            "growth_exponent": growth, "total_seconds": round(seconds, 1), "provenance": provenance}


def to_json(doc: dict[str, Any]) -> str:
    return dumps(doc)


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:,.0f}{unit}"
    if x >= 1:
        return f"{x:.2f}{unit}"
    if x >= 0.01:
        return f"{x:.3f}{unit}"
    return f"{x:.2g}{unit}"


def seconds_cell(r: dict[str, Any], key: str) -> str:
    value = r[key]
    if value is None:
        return "–"
    if r["unit"] != "run":
        return f"{_num(value)} s/{r['unit']}"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def samples_cell(n: int | None) -> str:
    if n is None:
        return "–"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    if n >= 1000:
        return f"{n / 1e3:.0f} k"
    return str(n)


# what each goal checks, on a result of ``--size full`` (the sizes the goals are set for)
CHECKS = {
    "text_ingest": lambda r: r["ratio"] >= 15 and r["detail"]["lines_per_s"] >= 1.5e6,
    "cube_build": lambda r: r["ratio"] >= 0.5 and (r["samples"] < 50e6 or (r["peak_rss_mb"] or 0) <= 4096),
    "promql_cube": lambda r: r["ratio"] >= 1,
    "promise_change": lambda r: r["seconds"] <= 0.1,
    "price_change": lambda r: r["seconds"] <= 0.05,
    "scenario_replay": lambda r: r["seconds"] <= 0.01,
    "scenario_grid": lambda r: r["seconds"] <= 15,
    "economics_month": lambda r: r["seconds"] <= 300 and (r["peak_rss_mb"] or 0) <= 4096,
    "promise_change_browser": lambda r: r["seconds"] <= 1.0,
    "economics_month_15s": lambda r: r["seconds"] <= 900 and (r["peak_rss_mb"] or 0) <= 8192,
    # VictoriaMetrics counts a counter from the last sample before a window (no extrapolation): the
    # cubes differ only in each series' first window and in windows without a scrape (docs: Live
    # stores, Pushdown and extrapolation); a run before that count was kept has none
    "economics_month_15s_pushdown": lambda r: r["detail"].get("cube_cells_unexplained", -1) == 0,
}


def goal(r: dict[str, Any]) -> str:
    return GOALS.get((r["name"], r["reference"]), GOALS.get((r["name"], None), ""))


def goal_met(r: dict[str, Any], size: str) -> bool | None:
    """Whether ``r`` meets its goal; None where it has none, or the run was not of the full size."""
    check = CHECKS.get(r["name"])
    if check is None or size != "full" or not goal(r):
        return None
    return bool(check(r))


def note(r: dict[str, Any]) -> str:
    """What a result's detail adds to its row, in words."""
    out = []
    d = r["detail"]
    if r["name"] == "text_ingest":
        out.append(f"{d['lines_per_s'] / 1e6:.2f} M lines/s vs {d['reference_lines_per_s'] / 1e6:.3f} M; "
                   "same samples")
    if r["name"] == "parquet_to_cube":
        if d.get("cube_kept_by_load"):
            out.append(f"load {d['load_s']:.1f} s (keeps the 5-minute cube) + finding it "
                       f"{d['first_cube_s'] * 1000:.0f} ms")
        else:
            out.append(f"load {d['load_s']:.1f} s + cube {d.get('first_cube_s', d['cube_s']):.2f} s")
        out.append(f"cube built from scratch {d['cube_s']:.2f} s, {d['cube_only_ratio']:.0f}× pandas; same cube")
    if r["name"] == "promise_change":
        if "step_s" in d:
            out.append(f"{d['cube_rows'] / 1e6:.1f} M cube rows; {d['steps_per_path']:,} steps of "
                       f"{_duration(d['step_s'])} per path, each range two lookups; the first change "
                       f"{d['first_change_s']:.2f} s (builds the running totals); every window "
                       f"{d['every_window_median_ms']:.0f} ms; the same range rows")
        else:  # a document from before the screen's resolution
            out.append(f"{d['cube_rows'] / 1e6:.1f} M cube rows; as separate calls "
                       f"{d['separate_calls_median_ms']:.0f} ms (per path {d['shares_median_ms']:.0f}, "
                       f"per window {d['by_window_median_ms']:.0f}, alerts {d['alerts_median_ms']:.0f})")
    if r["name"] == "promise_change_browser":
        out.append(f"{d['days']:g} days x {d['paths']} paths in Chromium: the threshold typed to the chart "
                   f"redrawn, {len(r['runs'])} changes; the page's run on the server {d['server_median_ms']:.0f} ms "
                   f"(median); steps of {_duration(d['step_s'])}")
    if r["name"] == "price_change":
        out.append(f"{d['predictions']} cached predictions")
    if r["name"] == "scenario_grid":
        runs = (f" in {d['twin_runs']} twin runs ({d['envelope_runs']} of them the sensitivity envelope of "
                f"backlogged scenarios), {d['s_per_twin_run']:.2f} s each" if "twin_runs" in d else "")
        out.append(f"{d['scenarios']} scenarios, {d['replica_hours']:.0f} replica-hours, {d['processes']} processes"
                   + runs)
    if r["name"] == "scenario_grid_ray":
        out.append(f"{d['scenarios']} scenarios on the Ray cluster at {d['address']}, against "
                   f"{d['processes']} local processes; same predictions")
    if r["name"] in ("economics_month", "economics_month_15s"):
        out.append(f"{d['hours']:g} h x {d['replicas']} replicas, {samples_cell(d['requests'])} requests, "
                   f"{d['scrape_interval_s']:g} s scrape; load {d['load_s']:.1f} s ({d['load_peak_rss_mb']:,.0f} MiB), "
                   f"analyse {d['analyse_s']:.1f} s ({d['analyse_peak_rss_mb']:,.0f} MiB; residual workers "
                   f"{d['analyse_workers_peak_rss_mb']:,.0f} MiB; tree {d['analyse_tree_peak_rss_mb']:,.0f} MiB), grid "
                   f"{d['grid_s']:.1f} s ({d['scenarios']} scenarios x {d['seeds']} seeds, "
                   + (f"{d['twin_runs']} twin runs with {d['envelope_runs']} of the envelope, " if "twin_runs" in d else "")
                   + f"{d['replica_hours']:,.0f} replica-hours, {d['processes']} processes of "
                   f"{d['grid_workers_peak_rss_mb']:,.0f} MiB peak; tree {d['grid_tree_peak_rss_mb']:,.0f} MiB); "
                   f"generated in {d['generation_s']:.0f} s "
                   f"({d['generation_peak_rss_mb']:,.0f} MiB{', reused' if d['generation_reused'] else ''})")
        if d.get("demand_window_s"):
            out.append(demand_note(d))
    if r["name"] == "economics_month_15s_pushdown":
        out.append(f"pull {d['pull_s']:.1f} s ({samples_cell(d['pulled_rows'])} rows), analyse {d['analyse_s']:.1f} s, grid "
                   f"{d['grid_s']:.1f} s; imported into VictoriaMetrics in {d['import_s']:.0f} s"
                   f"{' (reused)' if d['import_reused'] else ''}"
                   + (f", its dates moved {d['shift_days']} days back (VictoriaMetrics refuses samples past its clock)"
                      if d.get("shift_days") else "")
                   + f"; 5-minute cube: {d['cube_cells_differ']:,} of "
                   f"{d['cube_cells']:,} cells differ from the file's, {d['cube_cells_differ_in_first_window']:,} of "
                   "them in a series' first window"
                   + (f", {d['cube_cells_differ_in_unscraped_window']:,} in windows without a scrape, "
                      if "cube_cells_unexplained" in d else "")
                   + (f"{d['cube_cells_differ_within_store_precision']:,} within VictoriaMetrics' storage precision "
                      "(12 significant digits of the counters behind them), "
                      if "cube_cells_differ_within_store_precision" in d else "")
                   + (f"{d['cube_cells_unexplained']:,} unexplained" if "cube_cells_unexplained" in d else ""))
    if r["name"] == "scenario_replay":
        out.append(f"{d['replicas']} replicas x {d['simulated_hours']:.2f} h ({d['requests']:,} requests) in "
                   f"{d['replay_s']:.2f} s; the twin run alone {d['twin_run_s']:.2f} s, the Python engine "
                   f"{d['python_engine_s']:.2f} s; same request times")
    if r["name"] == "cube_build":
        out.append(f"{d['cube_rows']:,} cube rows")
        if d.get("grouped_scan_s"):
            out.append(f"a bare group-by per series and window of the same samples: {d['grouped_scan_s']:.2f} s")
    return "; ".join(out)


def demand_note(d: dict[str, Any]) -> str:
    """Which window the month's demand was read at, and why."""
    every, window = d["scrape_interval_s"], d["demand_window_s"]
    fine = d.get("fine_demand_windows_s")
    if window > every and fine is not None and every not in fine:
        return (f"demand read per {window:g} s: a window of the scrape interval is taken only at "
                f"{', '.join(f'{w:g}' for w in fine)} s scrapes (at 15 s the minute replayed the simulated fleets "
                "better)")
    if window > every and d.get("windows_at_scrape_interval"):
        return (f"demand read per {window:g} s: at the {every:g} s scrape interval it would be "
                f"{d['windows_at_scrape_interval']:,} windows, above {d['max_demand_windows']:,} (memory)")
    return f"demand read per {window:g} s (the scrape interval)"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def cells(r: dict[str, Any]) -> dict[str, str]:
    """One result as the table's cells (the terminal table and the generated docs page)."""
    return {"benchmark": r["name"], "size": samples_cell(r["samples"]), "Headroom": seconds_cell(r, "seconds"),
            "reference": r["reference"] or "–", "reference time": seconds_cell(r, "reference_seconds"),
            "ratio": "–" if r["ratio"] is None else f"{r['ratio']:.3g}×",
            "peak RSS": "–" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:,.0f} MiB",
            "goal": goal(r), "note": note(r)}


RATIO_NOTE = ("ratio = reference time / Headroom time (above 1: Headroom is faster); best of the runs, "
              "medians for the interactions.")


def to_table(doc: dict[str, Any]) -> str:
    """A Markdown table: one row per result, then the growth exponent and the machine."""
    m = doc["machine"]
    head = ["benchmark", "size", "Headroom", "reference", "reference time", "ratio", "peak RSS", "goal", "note"]
    rows = [[cells(r)[h] for h in head] for r in doc["results"]]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["| " + " | ".join(str(h).ljust(w) for h, w in zip(head, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) + " |" for row in rows]
    growth = doc["growth_exponent"]
    lines.append("")
    lines.append(RATIO_NOTE)
    if growth is not None:
        lines.append(f"growth exponent of the cube build (time ∝ samples^k): k = {growth:.2f}")
    lines.append(f"machine: {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, DuckDB {m['duckdb']}, "
                 f"pandas {m['pandas']}; load average at start {m['load_average_at_start']}; "
                 f"size {doc['size']}, {doc['total_seconds']:.0f} s in all")
    return "\n".join(lines)

"""The benchmark page (docs/benchmarks.md) from ``headroom bench --format json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.bench import document
from app.docgen.tables import Column, generated_header, provenance_block, table

COMMAND = ("python -m app.docgen bench --from docs/data/bench.json,docs/data/bench-month15.json "
           "--out docs/benchmarks.md")

COLUMNS = [Column("benchmark"), Column("size", align="right"), Column("Headroom", align="right"),
           Column("reference"), Column("reference time", align="right"), Column("ratio", align="right"),
           Column("peak RSS", align="right"), Column("goal"),
           Column("goal met", value=lambda c: c["goal met"]), Column("note")]


def where_the_time_goes(doc: dict[str, Any]) -> list[str]:
    """Per result with a profile (the bench's cProfile of the call, per call) or a goal not met: where its
    time goes and, for a goal not met, what was tried (the row's ``tried``)."""
    out: list[str] = []
    for r in doc["results"]:
        d = r["detail"]
        met = document.goal_met(r, doc["size"])
        if not d.get("profile") and met is not False:
            continue
        out += ["", f"**{r['name']}**" + (" (goal not met)" if met is False else "") + ": where the time goes."]
        if d.get("profile"):
            out.append("")
            out += [f"- `{p['function']}`: {p['ms']:,.1f} ms per call (cumulative)" for p in d["profile"]]
        for phase in ("load", "pull", "analyse", "grid"):
            if f"{phase}_s" in d and r["name"].startswith("economics_month"):
                out.append(f"- {phase}: {d[phase + '_s']:,.1f} s, peak RSS {d.get(phase + '_peak_rss_mb', 0):,.0f} MiB")
        if met is False and d.get("tried"):
            out += ["", "Tried: " + "; ".join(d["tried"]) + "."]
    if out:
        out = ["", "## Where the time goes", *out]
    return out


def page(doc: dict[str, Any], command: str = COMMAND, also: Sequence[dict[str, Any]] = ()) -> str:
    """The page: where and when, the table of results with each goal and whether it was met, the cube
    build's growth exponent and the library versions; each run in ``also`` (a benchmark run on its own,
    e.g. ``--only month15``, too long to repeat with the rest) after it, with its own provenance."""
    text = _run(doc, command)
    for other in also:
        text += "\n" + _run(other, None)
    return text


def _run(doc: dict[str, Any], command: str | None) -> str:
    m = doc["machine"]
    size = doc["size"]
    rows = []
    for r in doc["results"]:
        met = document.goal_met(r, size)
        rows.append({**document.cells(r), "goal met": None if met is None else ("yes" if met else "**no**")})
    head = ([generated_header("Benchmarks", command)] if command is not None else
            [f"## Also measured: `{(doc.get('provenance') or {}).get('command', 'headroom bench')}`"])
    intro = ([f"`headroom bench --size {size}`: what each row measures, the reference it is timed against, and "
              "the JSON's fields are on the [bench command's page](cli/bench.md). The goals are set for `--size "
              "full`; a smaller run says whether each pair agrees and how the ratios stand, not whether a goal is "
              "met.", ""] if command is not None else [""])
    out = [*head, *intro, provenance_block(doc.get("provenance")), "",
           table(rows, COLUMNS), "", document.RATIO_NOTE]
    if doc.get("growth_exponent") is not None:
        out.append(f"Growth exponent of the cube build (time ∝ samples^k): k = {doc['growth_exponent']:.2f}.")
    out += where_the_time_goes(doc)
    out += ["", f"Versions: Python {m['python']}, DuckDB {m['duckdb']}, pandas {m['pandas']}; load average at the "
            f"start {m['load_average_at_start']}; {doc['total_seconds']:.0f} s in all.", "",
            "Read the figures of one run against each other, not across runs: the speed of a shared machine "
            "changes from hour to hour, and the ratios within a run (Headroom against its reference, measured "
            "side by side) are what hold.", ""]
    return "\n".join(out)

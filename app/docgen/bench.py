"""The benchmark page (docs/benchmarks.md) from ``headroom bench --format json``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from app.bench import document
from app.docgen.tables import Column, generated_header, provenance_block, table


def _runs(*names: str) -> str:
    """Runs of one command at one commit, pooled on the page ('+')."""
    return "+".join(f"docs/data/{name}.json" for name in names)


# the page's groups, each with the runs at fc9d294 it is compared with (none for the second and last):
# the full bench at 7af33f2, a later run of some rows at 5834be1, the replay and the month at eb7fef8,
# the replay rows at e2f23ba and the month at b12feb2, each taken in turn with fc9d294's, and the 15 s
# month
COMMAND = ("python -m app.docgen bench --from "
           + ",".join([_runs("bench", "bench-2", "bench-3", "bench-4"), _runs("bench-5834be1"),
                       _runs("bench-eb7fef8", "bench-eb7fef8-2"),
                       _runs(*(f"bench-replay-e2f23ba-{i}" for i in range(1, 9))),
                       _runs("bench-b12feb2-1", "bench-b12feb2-2"), _runs("bench-month15")])
           + " --against "
           + ",".join([_runs("bench-fc9d294", "bench-fc9d294-2", "bench-fc9d294-3", "bench-fc9d294-4"), "",
                       _runs("bench-fc9d294", "bench-fc9d294-5"),
                       _runs(*(f"bench-replay-fc9d294-{i}" for i in range(1, 9))),
                       _runs("bench-fc9d294-6", "bench-fc9d294-7"), ""])
           + " --out docs/benchmarks.md")

COLUMNS = [Column("benchmark"), Column("size", align="right"), Column("Headroom", align="right"),
           Column("reference"), Column("reference time", align="right"), Column("ratio", align="right"),
           Column("peak RSS", align="right"), Column("goal"),
           Column("goal met", value=lambda c: c["goal met"]), Column("note")]


def where_the_time_goes(doc: dict[str, Any]) -> list[str]:
    """Per result with a profile (the bench's cProfile of the call, per call), its statements (the named
    queries' seconds) or a goal not met: where its time goes and, for a goal not met, what was tried
    (the row's ``tried``)."""
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
        if d.get("statements"):
            out += _statement_lines(d["statements"], "by statement")
        for phase in ("load", "pull", "analyse", "grid"):
            if f"{phase}_s" in d and r["name"].startswith("economics_month"):
                out.append(f"- {phase}: {d[phase + '_s']:,.1f} s, peak RSS {d.get(phase + '_peak_rss_mb', 0):,.0f} MiB")
        if d.get("load_statements"):
            out += _statement_lines(d["load_statements"], "the load by statement")
        if d.get("analyse_steps"):
            out += ["", "the analyse by step (each from its progress message to the next):", ""]
            out += [f"- {_seconds(s['s'])}: {s['step']}" for s in d["analyse_steps"]]
        if d.get("analyse_statements"):
            out += _statement_lines(d["analyse_statements"], "the analyse by statement, the twin's runs outside")
        if met is False and d.get("tried"):
            out += ["", "Tried: " + "; ".join(d["tried"]) + "."]
        if not any(d.get(k) for k in ("profile", "tried", "statements")) and not any(
                f"{k}_s" in d for k in ("load", "pull")):
            out.append("- this run recorded no profile of it; its note in the table gives what it was measured against")
    if out:
        out = ["", "## Where the time goes", *out]
    return out


def _seconds(s: float) -> str:
    return f"{s * 1000:,.1f} ms" if s < 1 else f"{s:,.1f} s"


def _statement_lines(rows: Sequence[dict[str, Any]], what: str) -> list[str]:
    """``measure.statements``' rows: each named query's seconds and calls, then the rest."""
    out = ["", f"{what} (`app.sql.statement_times`: the named queries of `queries/`):", ""]
    for s in rows:
        name = s["query"] if s["calls"] is None or s["query"].startswith("the other ") else f"`{s['query']}`"
        calls = "" if s["calls"] is None else f" in {s['calls']:,} call{'' if s['calls'] == 1 else 's'}"
        out.append(f"- {name}: {_seconds(s['s'])}{calls}")
    return out


def page(doc: dict[str, Any], command: str = COMMAND, also: Sequence[dict[str, Any]] = (),
         against: Sequence[dict[str, Any] | None] = ()) -> str:
    """The page: where and when, the table of results with each goal and whether it was met, the cube
    build's growth exponent and the library versions; each run in ``also`` (a benchmark run on its own,
    e.g. ``--only month15``, too long to repeat with the rest) after it, with its own provenance. Each
    run, ``doc`` then those of ``also``, is set beside ``against`` at its position when that is given
    (the same benchmarks run at an earlier commit on the same machine: :func:`comparison`)."""
    text = ""
    for k, run in enumerate([doc, *also]):
        text += ("\n" if k else "") + _run(run, None if k else command)
        base = against[k] if k < len(against) else None
        if base is not None:
            of = (run.get("provenance") or {}).get("command", "headroom bench") if k else None
            text += "\n" + comparison(run, base, of)
    return text


def pooled(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one ``headroom bench`` command at one commit as one document: each row the best
    of the runs' figures (its time and, apart, its reference's; the ratio of the two), its runs all of
    theirs, ``pooled_seconds`` each run's figure; the provenance the first run's, with ``pooled``:
    every run's start. A later run may hold fewer of the benchmarks (a row is pooled over the runs that
    have it); runs of different commits, or a later run with a benchmark the first lacks, are refused."""
    if len(docs) == 1:
        return docs[0]
    first = docs[0]
    commits = {(d.get("provenance") or {}).get("commit") for d in docs}
    if len(commits) != 1 or None in commits:
        raise ValueError(f"runs pooled with '+' must come from one commit: {sorted(map(str, commits))}")
    keyed = [_keyed(d) for d in docs]
    for k in keyed[1:]:
        extra = [key[0] for key in k if key not in keyed[0]]
        if extra:
            raise ValueError(f"runs pooled with '+' hold benchmarks the first run lacks: {', '.join(extra)}")
    results = []
    for key in keyed[0]:
        same = [k[key] for k in keyed if key in k]
        best = min(same, key=lambda x: x["seconds"])
        row = {**best, "runs": [x for s in same for x in s["runs"]],
               "reference_runs": [x for s in same for x in s["reference_runs"]],
               "pooled_seconds": [s["seconds"] for s in same]}
        if best["reference_seconds"] is not None:
            row["reference_seconds"] = min(s["reference_seconds"] for s in same)
            row["ratio"] = float(f"{row['reference_seconds'] / row['seconds']:.4g}")
        results.append(row)
    prov = {**first["provenance"], "pooled": [d["provenance"]["date"] for d in docs]}
    growth = [d["growth_exponent"] for d in docs if d.get("growth_exponent") is not None]
    return {**first, "results": results, "provenance": prov, "growth_exponent": growth[0] if growth else None,
            "total_seconds": sum(d["total_seconds"] for d in docs)}


def _pooled_line(prov: dict[str, Any] | None) -> list[str]:
    dates = (prov or {}).get("pooled") or []
    return ["", f"The best of {len(dates)} runs of that command, started at {', '.join(dates)}."] if dates else []


def _keyed(doc: dict[str, Any]) -> dict[tuple[str, str | None, int], dict[str, Any]]:
    """Rows by (name, reference, k-th of that name): a size's row meets the same size's in another run."""
    seen: dict[tuple[str, str | None], int] = {}
    out = {}
    for r in doc["results"]:
        k = seen.get((r["name"], r["reference"]), 0)
        seen[(r["name"], r["reference"])] = k + 1
        out[(r["name"], r["reference"], k)] = r
    return out


def _spread(r: dict[str, Any]) -> str:
    runs = r.get("pooled_seconds") or [r["seconds"]]
    cell = document.seconds_cell({**r, "seconds": min(runs)}, "seconds")
    return cell if len(runs) == 1 else f"{cell} – {document.seconds_cell({**r, 'seconds': max(runs)}, 'seconds')}"


def _work_note(now: dict[str, Any], then: dict[str, Any], commit: str) -> str:
    """What a row's work was on each side: a month's phases, and a grid's twin runs and time per run."""
    d, b = now["detail"], then["detail"]
    out = []
    # a row whose time is its phases' sum (the months'): which of them moved
    phases = [k for k in ("load", "pull", "analyse", "grid") if f"{k}_s" in d and f"{k}_s" in b
              and now["name"].startswith("economics_month")]
    if phases:
        here = " / ".join(f"{d[k + '_s']:.0f}" for k in phases)
        there = " / ".join(f"{b[k + '_s']:.0f}" for k in phases)
        out.append(f"{' / '.join(phases)} {here} s here, {there} s there")
    if "twin_runs" in d:
        # the grid's own time per run: the whole row's for scenario_grid, the grid phase's for a month
        here_s, there_s = (d["grid_s"], b["grid_s"]) if "grid_s" in d and "grid_s" in b else (now["seconds"],
                                                                                              then["seconds"])
        least = b.get("twin_runs") or b["scenarios"] * b["seeds"]  # a run per seed at the least
        at_most = "" if "twin_runs" in b else "at most "
        out.append(f"the grid's {d['twin_runs']} twin runs here, {d['envelope_runs']} of them the sensitivity "
                   f"envelope of backlogged scenarios; {b.get('twin_runs', f'at least {least}')} at {commit}; per "
                   f"run {here_s / d['twin_runs']:.2f} s here, {at_most}{there_s / least:.2f} s there")
    return "; ".join(out)


def verdict(here: Sequence[float], there: Sequence[float]) -> str:
    """Whether a row is no slower than at the earlier commit, from the runs of each (alternating on one
    machine): ``yes`` when this commit's median is at most the other's; ``within the noise`` when it is
    above it but the two commits' runs overlap (this commit's fastest is no slower than the other's
    slowest: the machine's own variation covers the difference); else ``no``. One run a side has no
    spread to read a difference against: above is ``no``."""
    if statistics.median(here) <= statistics.median(there) * (1 + 1e-9):  # equal up to the float sum
        return "yes"
    if len(here) > 1 and len(there) > 1 and min(here) <= max(there):
        return "within the noise"
    return "no"


def taken_in_turn(here: Sequence[str], there: Sequence[str]) -> bool:
    """Whether two commits' runs were taken in turn, pair by pair: by their start times (ISO 8601, UTC),
    the k-th run here and the k-th there are next to each other when every run is sorted together."""
    ordered = sorted(list(here) + list(there))
    return all(abs(ordered.index(a) - ordered.index(b)) == 1 for a, b in zip(here, there, strict=False))


def comparison(doc: dict[str, Any], base: dict[str, Any], of: str | None = None) -> str:
    """``doc``'s rows beside the same benchmarks at an earlier commit (``base``, run on the same machine):
    each row's runs on both sides (their range), the change of the medians, whether it is no slower
    (:func:`verdict`) and how many of the alternating pairs of runs were slower here; ``of``: the command
    of an "also measured" run, named in the heading."""
    prov = base.get("provenance") or {}
    commit = (prov.get("commit") or "?")[:7]
    then = _keyed(base)
    rows, slower, noise = [], [], []
    for key, now in _keyed(doc).items():
        old = then.get(key)
        if old is None or old.get("unit") != now.get("unit"):
            continue
        here = now.get("pooled_seconds") or [now["seconds"]]
        there = old.get("pooled_seconds") or [old["seconds"]]
        change = statistics.median(here) / statistics.median(there) - 1
        said = verdict(here, there)
        if said == "no":
            slower.append(now["name"])
        elif said != "yes":
            noise.append(now["name"])
        pairs = list(zip(here, there, strict=False))
        paired = (f"{sum(a > b for a, b in pairs)} of {len(pairs)} pairs of runs slower here" if len(pairs) > 1
                  else "")
        rows.append({"benchmark": now["name"], "size": document.samples_cell(now["samples"]), "here": _spread(now),
                     "then": _spread(old), "change": f"{change:+.0%}",
                     "no slower": "**no**" if said == "no" else said,
                     "note": "; ".join(x for x in (paired, _work_note(now, old, commit)) if x)})
    columns = [Column("benchmark"), Column("size", align="right"), Column("this commit", key="here", align="right"),
               Column(commit, key="then", align="right"), Column("change of the medians", key="change", align="right"),
               Column("no slower", value=lambda c: c["no slower"]), Column("note")]
    here_dates = doc["provenance"].get("pooled") or [doc["provenance"].get("date", "")]
    then_dates = prov.get("pooled") or [prov.get("date", "")]
    runs_here, runs_then = len(here_dates), len(then_dates)
    taken = ("runs of the two commits alternating" if taken_in_turn(here_dates, then_dates) else
             "runs of the two commits not all taken in turn (see their start times)")
    out = [f"## Against `{commit}`" if of is None else f"## `{of}` against `{commit}`", "",
           f"The rows above beside the same benchmarks at commit `{commit}`, measured on the same machine, the "
           f"{taken} ({runs_here} here, {runs_then} there). Each cell is the range of "
           "the runs that have its row, which is how much the machine itself moves; the change is that of the "
           "medians. A row is no slower when its median is at most the other commit's; **within the noise** when "
           "it is above it but the two commits' runs overlap (the fastest here no slower than the slowest there: "
           "on this machine the difference cannot be told from its own variation); otherwise slower. The pairs "
           "are the runs of the two commits taken in turn. Rows at one commit only are left out.", "",
           provenance_block(prov), *_pooled_line(prov), "", table(rows, columns), "",
           f"{len(rows) - len(slower) - len(noise)} of {len(rows)} rows no slower than at `{commit}`"
           + (f"; within the noise: {', '.join(dict.fromkeys(noise))}" if noise else "")
           + (f"; slower: {', '.join(dict.fromkeys(slower))}." if slower else ".")]
    return "\n".join(out) + "\n"


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
    out = [*head, *intro, provenance_block(doc.get("provenance")), *_pooled_line(doc.get("provenance")), "",
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

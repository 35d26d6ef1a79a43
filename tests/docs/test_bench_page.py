"""The benchmark page's runs pooled with '+', set against an earlier commit's, and the provenance an
older commit's document is given (``python -m app.provenance``): hand-made documents, figures by hand."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app import provenance
from app.docgen import bench
from app.docgen.__main__ import main as docgen

MACHINE = {"cores": 2, "memory_gb": 23.5, "python": "3.11.7", "duckdb": "2.0.1", "pandas": "3.1.1",
           "load_average_at_start": 0.5}


def _row(name: str, seconds: float, reference: str | None = None, ref_s: float | None = None,
         samples: int | None = None, **detail: Any) -> dict[str, Any]:
    return {"name": name, "samples": samples, "seconds": seconds, "reference": reference,
            "reference_seconds": ref_s, "ratio": None if ref_s is None else ref_s / seconds, "peak_rss_mb": None,
            "unit": "run", "runs": [seconds], "reference_runs": [] if ref_s is None else [ref_s], "detail": detail}


def _doc(commit: str, date: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    prov = {"command": "headroom bench --size full", "commit": commit, "dirty": False, "date": date,
            "machine": {"cpu": "Test CPU", "cores": 2, "memory_gb": 23.5, "python": "3.11.7", "platform": "Linux"}}
    return {"machine": MACHINE, "size": "full", "results": rows, "growth_exponent": 0.8, "total_seconds": 100.0,
            "provenance": prov}


def _grid(seconds: float, **runs: int) -> dict[str, Any]:
    return _row("scenario_grid", seconds, "sequential", seconds, samples=10, scenarios=10, seeds=1,
                replica_hours=1262.0, processes=1, **runs)


def test_runs_pooled_keep_each_rows_best_and_every_run() -> None:
    a = _doc("c" * 40, "2026-12-06T01:00:00Z", [_row("cube_build", 2.0, "bare_scan", 0.5, 10),
                                                   _row("cube_build", 9.0, "bare_scan", 3.0, 100)])
    b = _doc("c" * 40, "2026-12-06T02:00:00Z", [_row("cube_build", 1.5, "bare_scan", 0.6, 10),
                                                   _row("cube_build", 10.0, "bare_scan", 2.0, 100)])
    both = bench.pooled([a, b])
    small, large = both["results"]
    assert (small["seconds"], small["reference_seconds"], small["ratio"]) == (1.5, 0.5, pytest.approx(1 / 3, rel=1e-3))
    assert (large["seconds"], large["reference_seconds"], large["ratio"]) == (9.0, 2.0, pytest.approx(2 / 9, rel=1e-3))
    assert small["runs"] == [2.0, 1.5] and small["pooled_seconds"] == [2.0, 1.5]
    assert both["provenance"]["pooled"] == ["2026-12-06T01:00:00Z", "2026-12-06T02:00:00Z"]
    assert both["total_seconds"] == 200.0


def test_runs_of_two_commits_or_of_other_rows_are_not_pooled() -> None:
    a = _doc("a" * 40, "2026-12-06T01:00:00Z", [_row("text_ingest", 1.0, lines_per_s=1.5e6, reference_lines_per_s=3e4)])
    with pytest.raises(ValueError, match="one commit"):
        bench.pooled([a, _doc("b" * 40, "2026-12-06T02:00:00Z", [_row("text_ingest", 1.0, lines_per_s=1.5e6, reference_lines_per_s=3e4)])])
    with pytest.raises(ValueError, match="benchmarks the first run lacks: cube_build"):
        bench.pooled([a, _doc("a" * 40, "2026-12-06T02:00:00Z", [_row("cube_build", 1.0)])])


def test_a_later_run_of_fewer_benchmarks_pools_the_rows_it_has() -> None:
    a = _doc("a" * 40, "2026-12-06T01:00:00Z", [_row("scenario_replay", 2.0), _row("economics_month", 300.0)])
    b = _doc("a" * 40, "2026-12-06T02:00:00Z", [_row("scenario_replay", 1.0)])
    replay, month = bench.pooled([a, b])["results"]
    assert (replay["seconds"], replay["pooled_seconds"]) == (1.0, [2.0, 1.0])
    assert (month["seconds"], month["pooled_seconds"]) == (300.0, [300.0])


def test_the_comparison_says_which_rows_are_no_slower_and_counts_the_twin_runs() -> None:
    now = bench.pooled([
        _doc("1" * 40, "2026-12-06T01:00:00Z", [_row("text_ingest", 0.90, lines_per_s=1.5e6, reference_lines_per_s=3e4), _grid(14.0, twin_runs=28, envelope_runs=18, s_per_twin_run=0.5)]),
        _doc("1" * 40, "2026-12-06T03:00:00Z", [_row("text_ingest", 0.80, lines_per_s=1.5e6, reference_lines_per_s=3e4), _grid(15.0, twin_runs=28, envelope_runs=18, s_per_twin_run=0.536)]),
    ])
    then = bench.pooled([
        _doc("f" * 40, "2026-12-06T02:00:00Z", [_row("text_ingest", 0.85, lines_per_s=1.5e6, reference_lines_per_s=3e4), _row("parquet_load", 2.0), _grid(3.0)]),
        _doc("f" * 40, "2026-12-06T04:00:00Z", [_row("text_ingest", 0.95, lines_per_s=1.5e6, reference_lines_per_s=3e4), _row("parquet_load", 2.0), _grid(3.5)]),
    ])
    text = bench.comparison(now, then)
    assert text.startswith("## Against `fffffff`")
    assert "(2 here, 2 there)" in text and "at commit `ffffffffff`" in text
    assert "The best of 2 runs of that command, started at 2026-12-06T02:00:00Z, 2026-12-06T04:00:00Z." in text
    # medians: 0.85 against 0.90 (-6 %), 14.5 against 3.25 (+346 %); parquet_load only there; the pairs
    # (0.90, 0.85) and (0.80, 0.95): one slower here
    assert ("| text_ingest | – | 800.0 ms – 900.0 ms | 850.0 ms – 950.0 ms | -6% | yes | 1 of 2 pairs of runs "
            "slower here |") in text
    assert "| scenario_grid | 10 | 14.00 s – 15.00 s | 3.00 s – 3.50 s | +346% | **no** | 2 of 2 pairs" in text
    # 28 runs here, at least 10 there (its bench did not count them): 0.50 s a run here, at most 0.30 there
    assert ("the grid's 28 twin runs here, 18 of them the sensitivity envelope of backlogged scenarios; at least "
            "10 at fffffff; per run 0.50 s here, at most 0.30 s there") in text
    assert "parquet_load" not in text
    assert text.rstrip().endswith("1 of 2 rows no slower than at `fffffff`; slower: scenario_grid.")


def test_a_row_above_the_other_commits_median_is_slower_only_beyond_the_runs_spread() -> None:
    assert bench.verdict([0.9, 1.2], [1.0, 1.1]) == "yes"  # medians 1.05 and 1.05
    assert bench.verdict([1.0, 1.3], [0.9, 1.1]) == "within the noise"  # 1.15 above 1.0; 1.0 within 0.9-1.1
    assert bench.verdict([1.2, 1.3], [0.9, 1.1]) == "no"  # the fastest here slower than the slowest there
    assert bench.verdict([1.0], [0.9]) == "no"  # one run a side: no spread to read it against
    assert bench.verdict([0.9], [1.0]) == "yes"
    now = bench.pooled([_doc("1" * 40, f"2026-12-06T0{h}:00:00Z", [_row("cube_build", s, "bare_scan", 0.5, 10)])
                        for h, s in ((1, 1.0), (3, 1.3))])
    then = bench.pooled([_doc("f" * 40, f"2026-12-06T0{h}:00:00Z", [_row("cube_build", s, "bare_scan", 0.5, 10)])
                         for h, s in ((2, 0.9), (4, 1.1))])
    text = bench.comparison(now, then)
    assert "| cube_build | 10 | 1.00 s – 1.30 s | 900.0 ms – 1.10 s | +15% | within the noise | 2 of 2 pairs" in text
    assert text.rstrip().endswith("0 of 1 rows no slower than at `fffffff`; within the noise: cube_build.")


def test_where_the_time_goes_lists_the_statements_and_the_analyses_steps() -> None:
    statements = [{"query": "ingest__insert_samples", "calls": 1, "s": 3.25}, {"query": "cube__build", "calls": 2, "s": 0.5},
                  {"query": "the other 7 named queries", "calls": 9, "s": 0.0421},
                  {"query": "outside the named queries", "calls": None, "s": 1.5}]
    steps = [{"step": "before the first message", "s": 12.0},
             {"step": "moving the prefill time within 5% to meet the observed TTFT share", "s": 58.6}]
    doc = _doc("1" * 40, "2026-12-06T01:00:00Z", [
        _row("cube_build", 5.0, "bare_scan", 0.5, 10, statements=statements),
        _row("economics_month", 400.0, "sequential", 500.0, 10, load_s=100.0, analyse_s=120.0, grid_s=180.0,
             load_statements=statements[:1], analyse_steps=steps, analyse_statements=statements[3:])])
    text = "\n".join(bench.where_the_time_goes(doc))
    assert ("**cube_build** (goal not met): where the time goes.\n\nby statement (`app.sql.statement_times`: the "
            "named queries of `queries/`):\n\n- `ingest__insert_samples`: 3.2 s in 1 call\n- `cube__build`: 500.0 ms "
            "in 2 calls\n- the other 7 named queries: 42.1 ms in 9 calls\n- outside the named queries: 1.5 s") in text
    assert "no profile" not in text
    assert "- analyse: 120.0 s" in text and "the load by statement" in text
    assert ("the analyse by step (each from its progress message to the next):\n\n- 12.0 s: before the first "
            "message\n- 58.6 s: moving the prefill time within 5% to meet the observed TTFT share") in text
    assert ("the analyse by statement, the twin's runs outside (`app.sql.statement_times`: the named queries "
            "of `queries/`):\n\n- outside the named queries: 1.5 s") in text


def test_a_month_rows_note_says_which_phase_moved_and_its_grids_runs() -> None:
    phases = {"load_s": 113.2, "analyse_s": 151.4, "grid_s": 222.3, "scenarios": 6, "seeds": 3}
    now = _doc("1" * 40, "2026-12-06T01:00:00Z", [_row("economics_month", 486.9, "sequential", 638.0, 185_192_288,
                                                         twin_runs=28, envelope_runs=10, **phases)])
    then = _doc("f" * 40, "2026-12-06T02:00:00Z", [_row("economics_month", 217.6, "sequential", 296.0, 185_192_288,
                                                          load_s=85.2, analyse_s=53.0, grid_s=79.5, scenarios=6, seeds=3)])
    text = bench.comparison(now, then)
    # 222.3 s over 28 runs here, 79.5 s over at least 18 there
    assert ("| economics_month | 185.2 M | 486.90 s | 217.60 s | +124% | **no** | load / analyse / grid 113 / 151 / "
            "222 s here, 85 / 53 / 80 s there; the grid's 28 twin runs here, 10 of them the sensitivity envelope of "
            "backlogged scenarios; at least 18 at fffffff; per run 7.94 s here, at most 4.42 s there |") in text


def test_the_generator_pools_and_compares_from_files(tmp_path: Path) -> None:
    files = {}
    for name, commit, date, s in (("a1", "1", "01", 0.9), ("a2", "1", "03", 0.8), ("b1", "f", "02", 0.85)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(_doc(commit * 40, f"2026-12-06T{date}:00:00Z", [_row("text_ingest", s, lines_per_s=1.5e6, reference_lines_per_s=3e4)])))
    out = tmp_path / "benchmarks.md"
    assert docgen(["bench", "--from", f"{files['a1']}+{files['a2']}", "--against", str(files["b1"]),
                   "--out", str(out)]) == 0
    text = out.read_text()
    assert f"--from {files['a1']}+{files['a2']} --against {files['b1']} --out {out}" in text
    assert "| text_ingest | – | 800.0 ms – 900.0 ms | 850.0 ms | +0% | yes |" in text  # medians 0.85 and 0.85
    assert docgen(["accuracy", "--from", f"{files['a1']}+{files['a2']}"]) == 1  # only the bench page pools


def _tree(tmp_path: Path) -> tuple[Path, str]:
    tree = tmp_path / "tree"
    tree.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "older"]):
        subprocess.run(["git", *args], cwd=tree, check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, check=True, capture_output=True, text=True)
    return tree, head.stdout.strip()


def test_an_older_commits_document_is_given_its_trees_provenance(tmp_path: Path) -> None:
    tree, head = _tree(tmp_path)
    doc = _doc("x", "y", [_row("text_ingest", 1.0, lines_per_s=1.5e6, reference_lines_per_s=3e4)])
    doc.pop("provenance")
    doc["total_seconds"] = 90.0
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    prov = provenance.stamp(path, "headroom bench --size full", tree, datetime(2026, 12, 6, 1, 30, tzinfo=UTC))
    assert (prov["commit"], prov["date"], prov["dirty"]) == (head, "2026-12-06T01:28:30Z", False)
    assert json.loads(path.read_text())["provenance"] == prov
    # stamped once: a document that says where it came from keeps it
    with pytest.raises(ValueError, match="already says where it came from"):
        provenance.stamp(path, "headroom bench", tree)
    assert provenance.main([str(path), "--tree", str(tree), "--command", "headroom bench"]) == 1


def test_a_document_is_not_stamped_from_a_directory_without_git(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # git looks for a repository in the parents too, and CI's temporary directory is inside the clone
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"results": [], "total_seconds": 1.0}))
    with pytest.raises(ValueError, match="not a git tree"):
        provenance.stamp(path, "headroom bench", tmp_path)


def test_an_also_measured_run_is_compared_with_its_own_earlier_runs(tmp_path: Path) -> None:
    """``--against`` names one comparison per ``--from`` run, in its order: the first run's may be empty."""
    files = {}
    for name, commit, date, s in (("main", "1", "01", 0.9), ("grid1", "2", "03", 6.0), ("grid2", "2", "05", 7.0),
                                  ("old1", "f", "02", 5.0), ("old2", "f", "04", 5.5)):
        files[name] = tmp_path / f"{name}.json"
        rows = [_row("text_ingest", s, lines_per_s=1.5e6, reference_lines_per_s=3e4)] if name == "main" else [_grid(s)]
        doc = _doc(commit * 40, f"2026-12-06T{date}:00:00Z", rows)
        doc["provenance"]["command"] = "headroom bench --size full --only replay"
        files[name].write_text(json.dumps(doc))
    out = tmp_path / "benchmarks.md"
    assert docgen(["bench", "--from", f"{files['main']},{files['grid1']}+{files['grid2']}", "--against",
                   f",{files['old1']}+{files['old2']}", "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Against" not in text  # the first run has none
    assert "## `headroom bench --size full --only replay` against `fffffff`" in text
    # medians 6.5 against 5.25; the fastest here (6.0) slower than the slowest there (5.5)
    assert "| scenario_grid | 10 | 6.00 s – 7.00 s | 5.00 s – 5.50 s | +24% | **no** | 2 of 2 pairs" in text
    assert docgen(["bench", "--from", str(files["main"]), "--against", f"{files['old1']},{files['old2']}"]) == 1


def test_runs_are_said_to_alternate_only_when_they_do() -> None:
    assert bench.taken_in_turn(["2026-12-06T01:00:00Z", "2026-12-06T03:00:00Z"],
                               ["2026-12-06T02:00:00Z", "2026-12-06T04:00:00Z"])
    assert bench.taken_in_turn(["2026-12-06T02:00:00Z", "2026-12-06T03:00:00Z"],  # pair by pair, either first
                               ["2026-12-06T01:00:00Z", "2026-12-06T04:00:00Z"])
    assert not bench.taken_in_turn(["2026-12-06T12:00:00Z", "2026-12-06T12:10:00Z"],
                                   ["2026-12-06T01:00:00Z", "2026-12-06T01:10:00Z"])
    now = bench.pooled([_doc("1" * 40, f"2026-12-06T12:{m}:00Z", [_grid(6.0)]) for m in ("00", "10")])
    then = bench.pooled([_doc("f" * 40, f"2026-12-06T01:{m}:00Z", [_grid(4.0)]) for m in ("00", "10")])
    assert "runs of the two commits not all taken in turn (see their start times) (2 here, 2 there)" in (
        bench.comparison(now, then))

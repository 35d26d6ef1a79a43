"""The bad-input corpus (``tests/bad_inputs/corpus.py``) through the CLI: every file is loaded in one
``headroom load`` beside a good one (the slow kinds each on its own beside it); each gets its expected
outcome (an error naming the file, and the line or series where it has one, or a note saying what was
kept and how), never a traceback, and the good file still loads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import cli
from tests.bad_inputs.corpus import Case, cases, good_file
from tests.bad_inputs.together import MAX_DECOMPRESSED, Together, loaded_together
from tests.support.paths import ROOT as REPO

CASES = cases()


def _load(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[list[dict], str]:
    rc = cli.main(["load", *map(str, paths), "--format", "json", "--db", ":memory:"])
    out, err = capsys.readouterr()
    files = json.loads(out)["files"]
    assert rc == (1 if any(f["status"] == "failed" for f in files) else 0)
    return files, err


@pytest.fixture(autouse=True)
def _small_gzip_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADROOM_DB", raising=False)
    monkeypatch.setenv("HEADROOM_MAX_DECOMPRESSED", MAX_DECOMPRESSED)  # the bomb case: 4 MiB


@pytest.fixture(scope="module")
def together(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Together:
    """One ``headroom load`` of every quick kind and the good file (the good one last), as a user drops
    a folder of exports: a bad file never loses the others."""
    done = loaded_together(tmp_path_factory, worker_id)
    assert list(done.reports) == done.names
    assert done.rc == (1 if any(f["status"] == "failed" for f in done.reports.values()) else 0)
    return done


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
                                  for c in CASES])
def test_bad_input_beside_a_good_file(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if case.slow:  # on its own beside the good file
        monkeypatch.chdir(tmp_path)  # files named as a user names them, so messages start with the name
        bad = case.write(Path("."))
        (bad_report, good_report), err = _load(capsys, bad, good_file(Path(".")))
    else:
        done = request.getfixturevalue("together")
        bad, good_report, err = Path(case.filename), done.good, done.stderr
        bad_report = done.reports[bad.name]
    assert "Traceback" not in err
    assert good_report["status"] == "loaded", good_report["errors"]
    assert good_report["samples"] == 24 and good_report["signals"] == ["running", "ttft"]
    assert bad_report["status"] == case.status, (bad_report["errors"], bad_report["notes"])
    if case.status == "failed":
        assert len(bad_report["errors"]) == 1
        message = bad_report["errors"][0]
        assert message.startswith(f"{bad.name}: "), message
        messages = [message]
    else:
        messages = bad_report["notes"]
        assert bad_report["samples"] > 0 or case.name == "metadata_only"
    if case.pattern is not None:
        assert any(re.search(case.pattern, m) for m in messages), messages


def test_the_cube_command_survives_and_warns(tmp_path: Path) -> None:
    """``headroom cube`` in a fresh process: a corrupt gzip and a file that gets a note, beside a good
    file: no traceback, the errors and notes on stderr with the file's name, the good file's cube kept."""
    by_name = {c.name: c for c in CASES}
    corrupt = by_name["corrupt_deflate"].write(tmp_path)
    negative = by_name["negative_bucket"].write(tmp_path)
    good = good_file(tmp_path)
    done = subprocess.run([sys.executable, "-m", "app", "cube", str(corrupt), str(negative), str(good),
                           "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    assert f"error: {corrupt}: gzip data is corrupt or truncated" in done.stderr
    assert re.search(rf"note: {re.escape(str(negative))}: dropped 1 sample", done.stderr), done.stderr
    records = json.loads(done.stdout)
    assert {r["signal"] for r in records} >= {"ttft", "running"}
    assert any(r["window_start"] == "2025-11-29T11:00:00Z" for r in records)

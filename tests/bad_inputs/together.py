"""The quick kinds of the bad-input corpus and the good file, loaded in one ``headroom load``: the CLI's
report of each file, which the CLI test (``tests/ingest/test_bad_inputs.py``) holds to each kind's
outcome and the browser test (``tests/browser/test_corpus.py``) to the Data page's words.

Under pytest-xdist the two tests run on different workers; the first to ask writes the files and
runs the load under a lock, in the run's shared temporary directory, and the other reads its report
(pytest-xdist's recipe for a session fixture made once: the files, the load and the report are the
same for both, and the load of 93 files is about half a minute on a loaded machine)."""

from __future__ import annotations

import fcntl
import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from app import cli
from tests.bad_inputs.corpus import Case, cases, good_file

MAX_DECOMPRESSED = str(4 << 20)  # the gzip bomb case: 4 MiB


def quick_cases() -> list[Case]:
    """The kinds loaded together, in the load's order (the slow ones load on their own)."""
    return [c for c in cases() if not c.slow]


@dataclass(frozen=True)
class Together:
    directory: Path  # the files, named as a user names them (the load ran here)
    names: list[str]  # in the load's order: the quick kinds, then the good file
    reports: dict[str, dict]  # each file's report in ``headroom load --format json``, by name
    rc: int
    stderr: str

    @property
    def good(self) -> dict:
        return self.reports[self.names[-1]]


def _make(directory: Path) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HEADROOM_DB", raising=False)
        mp.setenv("HEADROOM_MAX_DECOMPRESSED", MAX_DECOMPRESSED)
        mp.chdir(directory)  # bare names, so messages start with the file's name
        paths = [c.write(Path(".")) for c in quick_cases()] + [good_file(Path("."))]
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = cli.main(["load", *map(str, paths), "--format", "json", "--db", ":memory:"])
    return {"names": [p.name for p in paths], "files": json.loads(out.getvalue())["files"], "rc": rc,
            "stderr": err.getvalue()}


def loaded_together(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Together:
    """The corpus loaded once per test run (once per worker when not under pytest-xdist)."""
    root = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    directory, done = root / "bad-input-corpus", root / "bad-input-corpus.json"
    with (root / "bad-input-corpus.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                doc = _make(directory)
                tmp = done.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(doc))
                tmp.replace(done)
            doc = json.loads(done.read_text())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return Together(directory, doc["names"], {f["file"]: f for f in doc["files"]}, doc["rc"], doc["stderr"])

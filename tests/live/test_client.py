"""Reading a live store: every failure is one clear line within the timeout, and the credential never
appears in anything Headroom writes (a test HTTP server plays each fault)."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from app import cli
from app.live import client as live
from app.store import Workspace
from app.ui import data as data_view
from tests.support.cli_run import run_cli
from tests.support.fault_store import HANG, SECRET, StoreHandler
from tests.support.servers import free_port


@pytest.fixture(scope="module")
def server() -> str:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StoreHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    HANG.set()
    httpd.shutdown()


def _fetch(url: str, tmp: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, str, str, float]:
    monkeypatch.setenv(live.TOKEN_ENV, SECRET)
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["fetch", "--prometheus", url, "--start", "1795000000", "--end", "1795000060",
                       "--timeout", "2", "--out", str(tmp / "out.parquet"), "--quiet", *extra])
    return rc, out.getvalue(), err.getvalue(), time.monotonic() - t0


@pytest.mark.parametrize(("where", "expected"), [
    ("refused", r"connection refused"),
    ("hang", r"no answer within 2 s"),
    ("401", r"HTTP 401 unauthorized: check the credential"),
    ("403", r"HTTP 403 forbidden: .*X-Scope-OrgID"),
    ("500", r"HTTP 500 the store failed \(after 3 retries\)"),
    ("html", r"is not JSON: is this the store's API URL"),
    ("envelope", r"HTTP 422 the store refused the query — execution: query processing would load too many samples"),
])
def test_each_fault_is_one_line_within_the_timeout(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   where: str, expected: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" if where == "refused" else f"{server}/{where}"
    rc, out, err, took = _fetch(url, tmp_path, monkeypatch)
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("headroom fetch: "), err
    assert re.search(expected, lines[0]), lines[0]
    assert "Traceback" not in err and SECRET not in err
    assert took < 2 + 4  # the timeout holds (the retries' waits end with it)
    assert not (tmp_path / "out.parquet").exists() and not list(tmp_path.glob("*.partial"))


def test_a_429_is_retried_after_its_retry_after(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, _, err, took = _fetch(f"{server}/429", tmp_path, monkeypatch)
    # the first answer is 429 (Retry-After: 1 s), the retry succeeds
    assert rc == 0, err
    assert 1.0 <= took < 6
    assert StoreHandler.calls["429"] >= 2


def test_the_credential_is_sent_and_never_written(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, err, _ = _fetch(f"{server}/ok", tmp_path, monkeypatch, "--header", "X-Scope-OrgID: team-a")
    assert rc == 0, err
    assert SECRET not in out + err
    for path in tmp_path.rglob("*"):
        assert SECRET.encode() not in path.read_bytes(), path
    # what was written is the long format headroom load reads
    rc2, out2, err2 = _run_load(tmp_path / "out.parquet")
    assert rc2 == 0, err2
    report = json.loads(out2)["files"][0]
    assert report["status"] == "loaded" and report["samples"] == 4 and report["engine"] == "vllm-v1"
    assert SECRET not in out2 + err2
    assert repr(live.store_from_env("http://x:9090", {live.TOKEN_ENV: SECRET})).find(SECRET) == -1


def _run_load(path: Path) -> tuple[int, str, str]:
    return run_cli(["load", str(path), "--format", "json", "--db", ":memory:"])


def test_bad_arguments_are_refused_before_any_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for extra, expected in ((["--prometheus", "prometheus:9090"], "expected an http:// or https:// URL"),
                            (["--prometheus", "http://x:9", "--bearer-token-env", "NOPE_NOT_SET"], "$NOPE_NOT_SET is not set"),
                            (["--prometheus", "http://x:9", "--header", "no colon"], "expected 'Name: value'"),
                            (["--prometheus", "http://x:9", "--match", "job=vllm"], "expected a label selector")):
        monkeypatch.delenv("NOPE_NOT_SET", raising=False)
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            rc = cli.main(["fetch", *extra, "--start", "1795000000", "--end", "1795000060", "--timeout", "1",
                           "--out", str(tmp_path / "x.parquet"), "--quiet"])
        assert rc == 1 and expected in err.getvalue(), err.getvalue()


def test_relative_and_absolute_times() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert live.parse_time("now-7d", now) == datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    assert live.parse_time("now - 90m", now) == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    assert live.parse_time("2026-11-17T00:00:00Z") == datetime(2026, 11, 17, tzinfo=UTC)
    assert live.parse_time("1795000000") == datetime.fromtimestamp(1795000000, UTC)
    with pytest.raises(ValueError, match="expected ISO-8601"):
        live.parse_time("yesterday")


def test_the_data_pages_connect_reads_a_store_into_a_dataset(server: str) -> None:
    """What the Data page's Connect form runs: the store read with the token, loaded as a dataset;
    a failure is one line in a failed report, and neither holds the token."""
    lines: list[str] = []
    with Workspace(":memory:") as ws:
        report = data_view.fetch_live(ws, f"{server}/ok", SECRET, "team-a", "1795000000", "1795000060",
                                      progress=lines.append)
        assert report.status == "loaded", report.errors
        assert report.samples == 4 and report.paths == ["m"] and report.dataset.startswith(f"{server}/ok 20")
        assert lines and "4 samples" in lines[-1]
        failed = data_view.fetch_live(ws, f"{server}/401", SECRET, start="1795000000", end="1795000060",
                                      timeout_s=2)
        assert failed.status == "failed" and len(failed.errors) == 1 and "HTTP 401" in failed.errors[0]
        stored = ws.con.execute("select string_agg(summary, ' ') from datasets").fetchone()[0]
        assert SECRET not in stored + repr(report) + repr(failed)
        bad = data_view.fetch_live(ws, "prometheus:9090")
        assert bad.status == "failed" and "http:// or https://" in bad.errors[0]

"""The Data page's Connect (issue #14, Must show) against a store that fails in every way a real one does
— connection refused, never answering, 401, 403, 500, 429 with Retry-After (once, then answering; and
always), an HTML login page, a JSON error envelope — through AppTest: each gives one line on the page
naming the URL and what is wrong, within the timeout (never a hang or an exception box), and the token
appears in nothing the page shows, keeps in session state, or writes (the workspace, its WAL, temp files).
The fault server is ``tests/support/fault_store.py``'s, with two more answers."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import state
from tests.support.fault_store import SECRET, StoreHandler
from tests.support.pages import open_app
from tests.support.servers import free_port

TIMEOUT_S = 2
RUN_S = 30
STOP = threading.Event()


class _FaultHandler(StoreHandler):
    """``tests/support/fault_store.py``'s answers, and /busy (always 429, Retry-After: 1), /busyonce (429 once)."""

    busy_once = 0

    def do_GET(self) -> None:
        mode = self.path.split("/")[1]
        if mode == "busy" or (mode == "busyonce" and _FaultHandler.busy_once == 0):
            _FaultHandler.busy_once += mode == "busyonce"
            self._send(429, b'{"status":"error","errorType":"too_many","error":"slow down"}', {"Retry-After": "1"})
            return
        if mode == "hang":  # far longer than AppTest waits for a run: a timeout that did not hold fails the run
            STOP.wait(300)
            return
        super().do_GET()


@pytest.fixture(scope="module")
def store() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FaultHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    STOP.set()
    httpd.shutdown()


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temp files (the fetched Parquet, a load's copies) go here, to be searched for the token."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _read(at: AppTest, url: str, generation: int) -> None:
    at.text_input(key=state.LIVE_URL).set_value(url)
    at.text_input(key=f"{state.LIVE_TOKEN}-{generation}").set_value(SECRET)
    at.text_input(key=state.LIVE_START).set_value("1795000000")
    at.text_input(key=state.LIVE_END).set_value("1795000060")
    at.number_input(key=state.LIVE_TIMEOUT).set_value(TIMEOUT_S)
    # a run that outlasts RUN_S raises: the store's timeout (with the retries' waits) must end the read first
    at.button(key="FormSubmitter:connect_form-Read").click().run(timeout=RUN_S)


def _shown(at: AppTest) -> str:
    parts = [e.value for kind in ("error", "warning", "success", "info", "markdown", "caption", "text", "code")
             for e in getattr(at, kind)]
    parts += [w.value for w in at.text_input] + [d.value.to_csv() for d in at.dataframe]
    parts += [repr(at.session_state[k]) for k in at.session_state]
    return "\n".join(map(str, parts))


FAULTS = [  # (path, the words the one line must hold)
    ("refused", "connection refused"),
    ("hang", f"no answer within {TIMEOUT_S} s"),
    ("401", "HTTP 401 unauthorized: check the credential"),
    ("403", "HTTP 403 forbidden"),
    ("500", "HTTP 500 the store failed (after 3 retries)"),
    ("busy", "HTTP 429 too many requests (after retries)"),
    ("html", "is not JSON: is this the store's API URL"),
    ("envelope", "HTTP 422 the store refused the query — execution: query processing would load too many samples"),
]


@pytest.mark.slow  # eight reads, the slow ones waiting out the timeout and the retries: about 10 s
def test_each_fault_is_one_line_on_the_page_and_the_token_is_nowhere(store: str, scratch_tmp: Path,
                                                                      workspace_db: Path) -> None:
    at = open_app()
    for generation, (where, words) in enumerate(FAULTS):
        url = f"http://127.0.0.1:{free_port()}" if where == "refused" else f"{store}/{where}"
        _read(at, url, generation)
        assert not at.exception, (where, at.exception)
        errors = [e.value for e in at.error]
        assert len(errors) == 1, (where, errors)
        error = errors[0]
        assert "\n" not in error, error
        plain = error.replace("\\", "")  # the page escapes Markdown: compare the words as shown
        assert plain.startswith(f"**{url}** was not loaded: {url}"), (where, plain)
        assert words in plain, (where, plain)
        assert "Traceback" not in _shown(at)
        at.run()  # the next run draws a new, empty token field; the old one's value is dropped
        assert at.text_input(key=f"{state.LIVE_TOKEN}-{generation + 1}").value == ""
        assert SECRET not in _shown(at), where


def test_a_429_then_an_answer_loads_and_nothing_written_holds_the_token(store: str, scratch_tmp: Path,
                                                                         workspace_db: Path) -> None:
    at = open_app()
    _read(at, f"{store}/busyonce", 0)
    assert not at.exception, at.exception
    assert _FaultHandler.busy_once == 1  # one 429 (Retry-After: 1), retried, then the answer
    (done,) = [m.value for m in (*at.success, *at.warning, *at.error) if "busyonce" in m.value]
    assert "was not loaded" not in done and "4 samples" in done, done
    at.run()
    assert SECRET not in _shown(at)
    written = [p for p in (*workspace_db.parent.rglob("*"), *scratch_tmp.rglob("*")) if p.is_file()]
    assert any(p.name.startswith("workspace.duckdb") for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path

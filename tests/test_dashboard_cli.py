"""`headroom dashboard` starts without a terminal on a machine where Streamlit never ran (no
~/.streamlit): no e-mail prompt on stdin, the server answers and the URL is printed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_dashboard_starts_without_a_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    port = _free_port()
    log = tmp_path / "dashboard.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "dashboard", "--port", str(port),
                                 "--db", str(tmp_path / "ws.duckdb")],
                                cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).read() == b"ok":
                        break
                except OSError:
                    pass
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    text = log.read_text()
    assert f":{port}" in text and "Email" not in text, text

"""`headroom dashboard` starts without a terminal on a machine where Streamlit never ran (no
~/.streamlit): no e-mail prompt on stdin, the server answers and the URL is printed. It listens on
127.0.0.1 only unless ``--host`` says otherwise, keeps Streamlit's XSRF protection on and bounds uploads."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app import cli
from tests.support.servers import free_port, stop

ROOT = Path(__file__).resolve().parents[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.add(socket.inet_ntop(family, raw))
    return out


def _refused(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except OSError:
        return True


def test_dashboard_starts_without_a_terminal_on_loopback_with_xsrf(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    port = free_port()
    log = tmp_path / "dashboard.log"
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "dashboard", "--port", str(port),
                                 "--db", str(tmp_path / "ws.duckdb")],
                                cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if urllib.request.urlopen(f"{base}/_stcore/health", timeout=1).read() == b"ok":
                        break
                except OSError:
                    pass
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            # the listening socket is the loopback address, and nothing else answers on that port:
            # not the wildcard (0.0.0.0 / ::), not another loopback address, not this host's own address
            assert listening_addresses(port) == {"127.0.0.1"}, listening_addresses(port)
            assert _refused("127.0.0.2", port)
            assert _refused("::1", port)
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.connect(("192.0.2.1", 9))  # no packet is sent: it picks the outgoing interface
                    own = s.getsockname()[0]
            except OSError:
                own = "127.0.0.1"
            if not own.startswith("127."):
                assert _refused(own, port), own
            # XSRF protection: the page sets the token cookie, and an upload without the token is refused
            # (403 before the session is even looked up; with XSRF off it would be 400 "Invalid session_id")
            health = urllib.request.urlopen(f"{base}/_stcore/health", timeout=10)
            assert "_streamlit_xsrf=" in (health.headers.get("Set-Cookie") or ""), dict(health.headers)
            put = urllib.request.Request(f"{base}/_stcore/upload_file/some-session/some-file", data=b"x",
                                         method="PUT")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(put, timeout=10)
            assert refused.value.code == 403
        finally:
            stop(proc)
    text = log.read_text()
    assert f":{port}" in text and "Email" not in text, text


def _args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["dashboard", *argv])


def _option(argv: list[str], name: str) -> str:
    return argv[len(argv) - 1 - argv[::-1].index(name) + 1]


def test_the_server_options_of_headroom_dashboard() -> None:
    argv = cli.dashboard_argv(_args())
    assert _option(argv, "--server.address") == "127.0.0.1"
    assert _option(argv, "--server.enableXsrfProtection") == "true"
    assert _option(argv, "--server.maxUploadSize") == str(cli.DEFAULT_MAX_UPLOAD_MB) == "1024"
    assert _option(argv, "--server.fileWatcherType") == "none"  # no module rescan after every run
    argv = cli.dashboard_argv(_args("--host", "0.0.0.0", "--max-upload-mb", "50", "--port", "9000",
                                    "--", "--server.baseUrlPath", "headroom"))
    assert argv[-2:] == ["--server.baseUrlPath", "headroom"]
    assert (_option(argv, "--server.address"), _option(argv, "--server.maxUploadSize"),
            _option(argv, "--server.port")) == ("0.0.0.0", "50", "9000")


@pytest.mark.parametrize("extra", [["--", "--server.enableXsrfProtection", "false"],
                                   ["--", "--server.enableXsrfProtection=False"]])
def test_turning_xsrf_off_is_refused(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dashboard", *extra]) == 2
    assert "XSRF protection stays on" in capsys.readouterr().err


def test_a_zero_upload_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dashboard", "--max-upload-mb", "0"]) == 2
    assert "--max-upload-mb 0" in capsys.readouterr().err

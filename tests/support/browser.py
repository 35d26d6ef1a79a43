"""A real browser on the dashboard: Debian's /usr/bin/chromium driven by Playwright (never
``playwright install``), and ``streamlit run`` of the dashboard on a free loopback port with a scratch
workspace. Under CI=true a missing Chromium or Playwright fails the test instead of skipping it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.ui import data as data_view
from tests.conftest import IN_CI
from tests.support.pages import APP
from tests.support.paths import ROOT
from tests.support.servers import free_port, running

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SLOW = 180_000  # ms: the first replay on a loaded 2-core machine


def require_browser() -> None:
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is missing (pip install -e '.[test]')"
    if missing and IN_CI:
        pytest.fail(f"browser journey under CI=true: {missing}")
    if missing:
        pytest.skip(f"browser journey skipped outside CI: {missing}")


def scratch_dirs(root: Path) -> dict[str, Path]:
    """``root`` and, made inside it, the temporary, XDG config and XDG cache directories of a server and
    a browser (nothing of theirs lands in the user's home)."""
    dirs = {name: root / name for name in ("tmp", "xdg-config", "xdg-cache")}
    for d in dirs.values():
        d.mkdir()
    return {**dirs, "root": root}


def chromium(scratch: dict[str, Path]) -> dict[str, Any]:
    """The arguments of Playwright's ``chromium.launch`` (sync or async): Debian's Chromium, headless,
    its profile in ``scratch``."""
    return {"executable_path": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS,
            "env": {**os.environ, "XDG_CONFIG_HOME": str(scratch["xdg-config"]),
                    "XDG_CACHE_HOME": str(scratch["xdg-cache"])}}


@contextmanager
def serve(scratch: dict[str, Path], sample: Path | None) -> Iterator[str]:
    """``streamlit run`` of the dashboard on a free loopback port with the scratch workspace, on
    ``sample`` (None: the bundled day, as README's set-up command opens it); yields its URL."""
    env = {**os.environ, "HEADROOM_DB": str(scratch["root"] / "workspace.duckdb"), "TMPDIR": str(scratch["tmp"]),
           "XDG_CONFIG_HOME": str(scratch["xdg-config"]), "XDG_CACHE_HOME": str(scratch["xdg-cache"])}
    if sample is not None:
        env[data_view.SAMPLE_ENV] = str(sample)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true", "--server.port",
                  str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                 scratch["root"] / "streamlit.log", url + "/_stcore/health", b"ok", cwd=ROOT, env=env):
        yield url

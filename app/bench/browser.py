"""``promise_change_browser``: a promise change in the dashboard as a person sees it, timed in a real
browser: ``streamlit run`` of the dashboard on a workspace holding a month of ten paths, Chromium driven
by Playwright (Debian's /usr/bin/chromium, never ``playwright install``), from the threshold typed
(Enter) to the breach-share chart redrawn with the new shares.

Playwright is a test dependency: without it, or without Chromium, the row is left out and the bench
says why. The same drive is the browser test's (``tests/browser/test_month15.py``) on the 15 s month.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.bench.servers import free_port, running
from app.ui import data as data_view
from app.ui import state

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
APP = Path(__file__).resolve().parents[1] / "streamlit_app.py"
SLOW_MS = 600_000

# the breach-share chart's traces as a short signature: it changes when the shares drawn change (a
# trace's y is a typed array, a list, or plotly's base64 form)
CHART_SIGNATURE = """() => {
  const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
    g => g.layout && g.layout.title && String(g.layout.title.text || '').includes('Breach share per window'));
  if (!gd || !gd.data) return null;
  return gd.data.map(t => {
    const y = t.y;
    if (!y) return '';
    if (y.bdata) return y.bdata.length + ':' + y.bdata.slice(0, 48) + y.bdata.slice(-48);
    let s = 0, n = 0;
    for (const v of Array.from(y)) { n += 1; if (v === v && v !== null) s += Number(v); }
    return n + ':' + s;
  }).join('|');
}"""
SERVER_MS = re.compile(r"Last interaction: ([\d,]+) ms on the server")


def missing() -> str | None:
    """Why the browser row cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401  (a test dependency: imported only to say whether it is there)
    except ImportError:
        return "the playwright package is missing (pip install -e '.[test]')"
    return None


@contextmanager
def dashboard(db: Path, scratch: Path, sample: Path | None = None, timeout_s: float = 120) -> Iterator[str]:
    """``streamlit run`` of the dashboard on the workspace ``db`` (``sample``: the export an empty one
    opens on) on a free loopback port, until the block ends; its URL."""
    for name in ("tmp", "xdg-config", "xdg-cache"):
        (scratch / name).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HEADROOM_DB": str(db), "TMPDIR": str(scratch / "tmp"),
           "XDG_CONFIG_HOME": str(scratch / "xdg-config"), "XDG_CACHE_HOME": str(scratch / "xdg-cache")}
    if sample is not None:
        env[data_view.SAMPLE_ENV] = str(sample)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
                  "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
                  "false"], scratch / "streamlit.log", url + "/_stcore/health", "the dashboard", timeout_s,
                 cwd=str(APP.parents[1]), env=env):
        yield url


@contextmanager
def chromium(scratch: Path) -> Iterator[Any]:
    """A Playwright page in headless Chromium, 1400 x 2400."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                    env={**os.environ, "XDG_CONFIG_HOME": str(scratch / "xdg-config"),
                                         "XDG_CACHE_HOME": str(scratch / "xdg-cache")})
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 2400})
        finally:
            browser.close()


def wait_idle(page: Any, timeout_ms: float = SLOW_MS) -> None:
    """Until the app's script run is over (Streamlit's status widget gone)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


def server_ms(page: Any) -> float | None:
    """The sidebar's 'Last interaction: N ms on the server' of the run just over."""
    text = page.get_by_text(SERVER_MS).first.inner_text()
    m = SERVER_MS.search(text)
    return float(m.group(1).replace(",", "")) if m else None


def open_promise(page: Any, url: str, path: str) -> None:
    """The Promise page with its breach-share chart drawn."""
    from playwright.sync_api import expect

    page.goto(url)
    page.get_by_test_id("stSidebarNav").get_by_text("Promise", exact=True).click()
    expect(page.get_by_role("heading", name="Promise", exact=True)).to_be_visible(timeout=SLOW_MS)
    expect(page.locator(f".st-key-{state.promise_key(path, 'ttft_s')} input")).to_be_visible(timeout=SLOW_MS)
    page.wait_for_function(f"() => ({CHART_SIGNATURE})() !== null", timeout=SLOW_MS)
    wait_idle(page)


def promise_changes(page: Any, path: str, thresholds: Sequence[float],
                    log: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Type each TTFT threshold for ``path`` (Enter), timing until the breach-share chart's traces change
    (the chart redrawn with the new shares); then wait for the run to end and read its server time.
    (browser seconds per change, server milliseconds per change)."""
    box = page.locator(f".st-key-{state.promise_key(path, 'ttft_s')} input")
    seconds, server = [], []
    for value in thresholds:
        before = page.evaluate(CHART_SIGNATURE)
        box.fill(f"{value:g}")
        t0 = time.monotonic()
        box.press("Enter")
        page.wait_for_function(f"prev => ({CHART_SIGNATURE})() !== prev", arg=before, timeout=SLOW_MS)
        seconds.append(time.monotonic() - t0)
        wait_idle(page)
        ms = server_ms(page)
        server.append(ms if ms is not None else float("nan"))
        if log:
            log(f"TTFT {value:g} s: chart redrawn after {seconds[-1] * 1000:.0f} ms (server run {ms or 0:.0f} ms)")
    return {"seconds": seconds, "server_ms": server}


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")

"""The dashboard on the benchmarks' 15 s month in a real browser (Debian's /usr/bin/chromium driven by
Playwright), run where ``$HEADROOM_MONTH15`` names the export; the drive of a promise change is the
benchmark's (``app.bench.browser``)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from app.bench import browser as bench_browser
from app.ui import state
from tests.support.browser import chromium, require_browser, scratch_dirs, serve
from tests.support.pages import INTERACTIVE

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MONTH15_ENV = "HEADROOM_MONTH15"  # the 15 s month's metrics.parquet (headroom bench --only month15 --workdir DIR)


def test_the_15s_month_in_the_dashboard(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The dashboard on the bench's 15 s month (30 days of 8 replicas, about 740 M samples) as the workspace's
    first export: the Data page on it, a promise change on the Promise page (typed to the breach-share
    chart redrawn) and the Economics page's default grid (click to the cheapest N'). The seconds are
    printed (figures, not assertions). Runs where ``$HEADROOM_MONTH15`` names the export."""
    month = os.environ.get(MONTH15_ENV)
    if not month or not Path(month).is_file():
        pytest.skip(f"${MONTH15_ENV} names no export (headroom bench --only month15 --workdir DIR writes one)")
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    hour = 3_600_000
    scratch = scratch_dirs(tmp_path_factory.mktemp("month15"))
    with serve(scratch, Path(month)) as url, sync_playwright() as p:
        browser = p.chromium.launch(**chromium(scratch))
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        # the Data page: the workspace loads the month on its first open
        t0 = time.monotonic()
        page.goto(url)
        expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=hour)
        expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible(timeout=hour)
        bench_browser.wait_idle(page, hour)
        data_s = time.monotonic() - t0
        # the Promise page and a promise change on its first path
        t0 = time.monotonic()
        bench_browser.open_promise(page, url, INTERACTIVE)
        promise_s = time.monotonic() - t0
        changes = bench_browser.promise_changes(page, INTERACTIVE, (0.35, 0.5, 0.42, 1.0, 0.3))
        # the Economics page's default grid
        page.get_by_test_id("stSidebarNav").get_by_text("Economics", exact=True).click()
        expect(page.get_by_role("heading", name="Economics", exact=True)).to_be_visible(timeout=hour)
        expect(page.locator(f".st-key-{state.econ_key('replicas')} input")).to_have_value("2:8", timeout=hour)
        clicked = time.monotonic()
        page.get_by_role("button", name="Run scenarios").click()
        cheapest = page.get_by_test_id("stMetric").filter(has_text="Cheapest N'")
        expect(cheapest.get_by_test_id("stMetricValue")).to_have_text(re.compile(r"^[2-8]$"), timeout=4 * hour)
        grid_s = time.monotonic() - clicked
        browser.close()
    print(f"\nthe 15 s month in the dashboard: Data page {data_s:.1f} s (the load included); Promise page "
          f"{promise_s:.1f} s; a promise change to the chart redrawn: median "
          f"{1000 * bench_browser.median(changes['seconds']):.0f} ms over {len(changes['seconds'])} "
          f"(server {bench_browser.median(changes['server_ms']):.0f} ms); default grid, click to the cheapest N' "
          f"{grid_s:.1f} s")

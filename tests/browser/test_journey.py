"""A real browser journey: `streamlit run` on a free loopback port with a temporary workspace, driven by
Playwright through Debian's /usr/bin/chromium (never `playwright install`).

Data page on the sample (a 1-hour slice of the bundled day, the export an empty workspace opens on) →
upload a real /metrics capture and read its summary → Promise: change a threshold and see the share
move to the value computed from the raw samples → Economics: run two scenarios and see the cheapest N' →
Capacity model → Tail: the attribution, the rule, and the twin's attribution of the Economics run →
Scenario sets, with the Economics run saved. Each page's screenshot goes to docs/img/dashboard/, the
pictures of the docs' dashboard tour (HEADROOM_SCREENSHOTS=DIR writes them elsewhere).
One interaction at a time, each followed by an ``expect`` on its visible effect (environment recipes,
pitfall 12). Under CI=true a missing Chromium fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.ui import state
from tests.support.browser import SLOW, chromium, require_browser, scratch_dirs, serve
from tests.support.pages import INTERACTIVE, independent_ttft_share, make_slice
from tests.support.paths import REAL, ROOT

SHOTS = ROOT / "docs" / "img" / "dashboard"  # the docs' dashboard tour shows what this journey saw

pytestmark = [pytest.mark.browser, pytest.mark.slow]

UPLOAD = REAL / "vllm-v0-opt125m-datadog.prom"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return scratch_dirs(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def app_url(scratch: dict[str, Path]) -> Iterator[str]:
    require_browser()
    sample = scratch["sample"] = make_slice(scratch["root"] / "metrics-11h30-12h30.parquet")
    with serve(scratch, sample) as url:
        yield url


def test_journey_data_promise_economics(app_url: str, scratch: dict[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("HEADROOM_SCREENSHOTS") or SHOTS)
    shots.mkdir(parents=True, exist_ok=True)
    expected_share = independent_ttft_share(scratch["sample"], INTERACTIVE, "1.0")
    with sync_playwright() as p:
        browser = p.chromium.launch(**chromium(scratch))
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        nav = page.get_by_test_id("stSidebarNav")

        # 1. the Data page opens on the sample
        page.goto(app_url)
        expect(page.get_by_role("heading", name="Data", exact=True)).to_be_visible(timeout=SLOW)
        expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=SLOW)
        expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible(timeout=SLOW)
        expect(page.get_by_text(re.compile(r"Last interaction: [\d,]+ ms on the server"))).to_be_visible()

        # 2. upload a real vLLM /metrics capture: first the file, then the Load button
        page.locator('input[type="file"]').first.set_input_files(UPLOAD)
        chip = page.get_by_test_id("stFileChip")  # the chip shortens long names: "vllm-v...atadog.prom"
        expect(chip).to_have_count(1, timeout=SLOW)
        expect(chip).to_contain_text("12.8KB")
        page.get_by_text("Keep the bundled sample in my analysis").click()  # the journey goes on with its paths
        page.get_by_role("button", name="Load", exact=True).click()
        summary = page.get_by_test_id("stAlert").filter(has_text=UPLOAD.name)
        expect(summary).to_contain_text("loaded", timeout=SLOW)
        expect(summary).to_contain_text("vllm-v0")
        expect(summary).to_contain_text("facebook/opt-125m")
        expect(page.get_by_text("2: vllm-v0-opt125m-datadog.prom").first).to_be_visible(timeout=SLOW)
        expect(page.get_by_role("heading", name="Data health")).to_be_visible(timeout=SLOW)
        page.screenshot(path=str(shots / "1-data.png"))

        # 3. Promise: the interactive TTFT threshold from 0.5 s to 1 s moves the share
        nav.get_by_text("Promise", exact=True).click()
        expect(page.get_by_role("heading", name="Promise", exact=True)).to_be_visible(timeout=SLOW)
        headline = page.locator(f".st-key-{state.promise_key(INTERACTIVE, 'headline')}")
        expect(headline.get_by_test_id("stMetric").filter(has_text="TTFT > 0.5 s")).to_be_visible(timeout=SLOW)
        ttft = page.locator(f".st-key-{state.promise_key(INTERACTIVE, 'ttft_s')} input")
        ttft.fill("1.0")
        ttft.press("Enter")
        moved = headline.get_by_test_id("stMetric").filter(has_text="TTFT > 1 s")
        expect(moved.get_by_test_id("stMetricValue")).to_have_text(f"{100 * expected_share:.2f} %", timeout=SLOW)
        expect(page.get_by_text("Page when the 1 h and 5 min burn")).to_be_visible(timeout=SLOW)
        page.screenshot(path=str(shots / "2-promise.png"))
        # the report is built when its button is clicked, for the threshold just set
        with page.expect_download(timeout=SLOW) as download:
            page.get_by_role("button", name="Report (Markdown)").click()
        report_md = Path(download.value.path()).read_text()
        assert report_md.startswith("Datasets: ") and "Promise report " in report_md
        assert f"{100 * expected_share:.2f} %" in report_md

        # 4. Economics: two scenarios, one seed, then the cheapest N'
        nav.get_by_text("Economics", exact=True).click()
        expect(page.get_by_role("heading", name="Economics", exact=True)).to_be_visible(timeout=SLOW)
        replicas = page.locator(f".st-key-{state.econ_key('replicas')} input")
        replicas.fill("4:5")
        expect(replicas).to_have_value("4:5")
        page.get_by_role("button", name="Run scenarios").click()
        cheapest = page.get_by_test_id("stMetric").filter(has_text="Cheapest N'")
        expect(cheapest.get_by_test_id("stMetricValue")).to_have_text(re.compile(r"^[45]$"), timeout=SLOW)
        expect(page.get_by_text(re.compile(r"pricing took [\d.]+ ms"))).to_be_visible(timeout=SLOW)
        page.screenshot(path=str(shots / "3-economics.png"))
        page.get_by_label(re.compile("Save these results as a named set")).fill("journey 4-5")
        page.get_by_role("button", name="Save set").click()
        expect(page.get_by_text(re.compile(r"Saved journey 4-5: compare it"))).to_be_visible(timeout=SLOW)

        # 5. the capacity model behind the run
        nav.get_by_text("Capacity model", exact=True).click()
        expect(page.get_by_text("One replica, read from the metrics")).to_be_visible(timeout=SLOW)
        # each parameter with its source, and the residual at the observed fleet size
        expect(page.get_by_role("heading", name=re.compile(r"Residual at the observed N = \d"))).to_be_visible(
            timeout=SLOW)
        expect(page.get_by_text(re.compile("Source: \\*?given"))).to_be_visible(timeout=SLOW)
        expect(page.get_by_text("Isotonic fits of the per-window joint share")).to_be_visible(timeout=SLOW)
        # the sample exports no prefix-cache counter: said, with what the fit assumed, and no chart of zeros
        expect(page.get_by_text(re.compile("No prefix-cache counter for .* assumed no prefix caching"))).to_be_visible(
            timeout=SLOW)
        page.screenshot(path=str(shots / "4-capacity-model.png"))

        # 6. Tail: the attribution, the signals and the rule; then the twin of the Economics run
        nav.get_by_text("Tail", exact=True).click()
        expect(page.get_by_role("heading", name="Tail", exact=True)).to_be_visible(timeout=SLOW)
        expect(page.get_by_role("heading", name="Queue time against TTFT")).to_be_visible(timeout=SLOW)
        expect(page.get_by_text(re.compile(r"Recommended: scale out when (waiting|running)"))).to_be_visible(
            timeout=SLOW)
        page.get_by_role("button", name="Replay with ample replicas").click()
        expect(page.get_by_text(re.compile(r"^Intrinsic: the breaches the twin still shows"))).to_be_visible(
            timeout=SLOW)
        expect(page.get_by_test_id("stDownloadButton")).to_have_count(2, timeout=SLOW)
        page.screenshot(path=str(shots / "5-tail.png"), full_page=True)

        # 7. Scenario sets: the Economics run saved above, listed and compared
        nav.get_by_text("Scenario sets", exact=True).click()
        expect(page.get_by_role("heading", name="Scenario sets", exact=True)).to_be_visible(timeout=SLOW)
        expect(page.get_by_role("heading", name="Compare")).to_be_visible(timeout=SLOW)
        expect(page.get_by_role("button", name="Use the inputs of journey 4-5 on the Economics page")).to_be_visible(
            timeout=SLOW)
        page.screenshot(path=str(shots / "6-scenario-sets.png"))
        browser.close()


def test_the_default_grid_on_the_bundled_day(tmp_path_factory: pytest.TempPathFactory) -> None:
    """As README's set-up command opens it: the whole bundled day, the Economics page's default grid
    (N' 2…8, one seed) from the click to the cheapest N' on screen. The seconds are printed (a
    figure, not an assertion: timing belongs to the benchmarks)."""
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    scratch = scratch_dirs(tmp_path_factory.mktemp("bundled-day"))
    with serve(scratch, None) as url, sync_playwright() as p:
        browser = p.chromium.launch(**chromium(scratch))
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.goto(url)
        expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=SLOW)
        page.get_by_test_id("stSidebarNav").get_by_text("Economics", exact=True).click()
        expect(page.get_by_role("heading", name="Economics", exact=True)).to_be_visible(timeout=SLOW)
        expect(page.locator(f".st-key-{state.econ_key('replicas')} input")).to_have_value("2:8")
        clicked = time.monotonic()
        page.get_by_role("button", name="Run scenarios").click()
        cheapest = page.get_by_test_id("stMetric").filter(has_text="Cheapest N'")
        expect(cheapest.get_by_test_id("stMetricValue")).to_have_text(re.compile(r"^[2-8]$"), timeout=SLOW)
        seconds = time.monotonic() - clicked
        label = page.get_by_text(re.compile(r"7 scenarios, 7 replayed, in [\d.]+ s"))
        expect(label).to_be_visible(timeout=SLOW)
        print(f"\ndefault grid on the bundled day: {label.inner_text()}; click to the cheapest N' {seconds:.1f} s")
        browser.close()

"""Load: eight browser sessions at once on one `headroom dashboard` (its own workspace ``--db``, opening on a
1-hour slice of the bundled day), each uploading its own small export and changing promises at the same
time — the sample's interactive path (the same path in every session: shared storage would make them
overwrite each other) and its own file's path.

The eight are tabs of one browser context: the server tells sessions apart by their websocket and the
``?s=`` in their URL (no cookie but Streamlit's XSRF token, which the test checks), so eight tabs are eight
sessions to it, and one context lets Chromium parse and compile Streamlit's scripts once instead of
once per context (about a third of the test's CPU: 201 s against 295 s on 2 cores).

Each session must show no error, only its own file's path beside the sample's (no number from another
session's data), the numbers ``headroom report FILE --format json`` prints for its file, and — after a
reload of its tab — its own thresholds again. The server's memory per session (resident set size after
the eight, minus before, divided by eight) and the run time are printed.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from app import cli
from app.ui import data as data_view
from app.ui import promise as promise_view
from app.ui import state
from tests.support import small_export
from tests.support.browser import SLOW, chromium, require_browser, scratch_dirs
from tests.support.pages import BATCH, INTERACTIVE, make_slice
from tests.support.paths import ROOT
from tests.support.servers import free_port, running

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SESSIONS = 8
OWN_TTFT = [0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 0.25, 0.5]  # bucket bounds of small_export.TTFT_LES
SAMPLE_TTFT = [0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]  # bucket bounds of the sample's TTFT histogram


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def expected_metrics(export: Path, path: str, ttft_s: float) -> list[str]:
    """The headline metric values the Promise page shows for ``path``, from the CLI's JSON report."""
    promise = {**promise_view.default_promise(path), "ttft_s": ttft_s}
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["report", str(export), "--promise", f"{path}={ttft_s}/{promise['tpot_s']}@{promise['target']}",
                         "--format", "json"])
    assert code == 0
    (doc,) = [p for p in json.loads(out.getvalue())["paths"] if p["path"] == path]
    assert doc["ttft"]["exact"] and doc["tpot"]["exact"]  # bucket bounds: no interpolation to disagree on
    meets = {True: "yes", False: "no", None: "undetermined"}[doc["meets_target"]]
    j = doc["joint"]
    return [f"{100 * doc['ttft']['share']:.2f} %", f"{100 * doc['tpot']['share']:.2f} %",
            f"{100 * j['share_low']:.2f}–{100 * j['share_high']:.2f} %", meets]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    require_browser()
    scratch = scratch_dirs(tmp_path_factory.mktemp("sessions"))
    root = scratch["root"]
    sample = make_slice(root / "metrics-11h30-12h30.parquet")
    env = {**os.environ, data_view.SAMPLE_ENV: str(sample), "TMPDIR": str(root / "tmp"),
           "XDG_CONFIG_HOME": str(root / "xdg-config"), "XDG_CACHE_HOME": str(root / "xdg-cache")}
    env.pop("HEADROOM_DB", None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "app", "dashboard", "--port", str(port), "--db", str(root / "workspace.duckdb")],
                 root / "dashboard.log", url + "/_stcore/health", b"ok", cwd=ROOT, env=env,
                 stdin=subprocess.DEVNULL) as proc:
        yield {"url": url, "pid": proc.pid, "root": root, "scratch": scratch, "log": root / "dashboard.log"}


async def one_session(context, url: str, i: int, export: Path, path: str, expected: list[str],
                      opened: asyncio.Barrier, problems: list[str]) -> float:
    from playwright.async_api import expect

    page = await context.new_page()
    page.on("pageerror", lambda exc: problems.append(f"session {i}: page error {exc}"))
    started = time.monotonic()
    await page.goto(url)
    await expect(page.get_by_role("heading", name="Data", exact=True)).to_be_visible(timeout=SLOW)
    await expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=SLOW)
    await opened.wait()  # every session open before any upload: each starts on the sample alone

    await page.locator('input[type="file"]').first.set_input_files(export)
    await expect(page.get_by_test_id("stFileChip")).to_have_count(1, timeout=SLOW)
    await page.get_by_text("Keep the bundled sample in my analysis").click()  # its paths and its own
    await page.get_by_role("button", name="Load", exact=True).click()
    summary = page.get_by_test_id("stAlert").filter(has_text=export.name)
    await expect(summary).to_contain_text("loaded", timeout=SLOW)
    await expect(summary).to_contain_text(path)

    await page.get_by_test_id("stSidebarNav").get_by_text("Promise", exact=True).click()
    await expect(page.get_by_role("heading", name="Promise", exact=True)).to_be_visible(timeout=SLOW)
    own = page.locator(f".st-key-{state.promise_key(path, 'headline')}")
    sample = page.locator(f".st-key-{state.promise_key(INTERACTIVE, 'headline')}")
    await expect(own).to_be_visible(timeout=SLOW)
    for where, key, value in ((own, state.promise_key(path, "ttft_s"), OWN_TTFT[i]),
                              (sample, state.promise_key(INTERACTIVE, "ttft_s"), SAMPLE_TTFT[i])):
        box = page.locator(f".st-key-{key} input")
        await box.fill(str(value))
        await box.press("Enter")
        await expect(where.get_by_test_id("stMetric").filter(has_text=f"TTFT > {value:g} s")).to_be_visible(
            timeout=SLOW)
    await expect(own.get_by_test_id("stMetricValue")).to_have_text(expected, timeout=SLOW)

    async def only_own_paths() -> None:
        headlines = page.locator("[class*='st-key-promise_headline_']")
        await expect(headlines).to_have_count(3, timeout=SLOW)  # the sample's two paths and its own
        for key in (state.promise_key(p, "headline") for p in (INTERACTIVE, BATCH, path)):
            await expect(page.locator(f".st-key-{key}")).to_have_count(1)

    await only_own_paths()
    took = time.monotonic() - started

    # a reload of the tab keeps its session (the ?s= in the URL): its own thresholds, the same numbers
    assert "s=" in page.url, page.url
    await page.reload()
    await expect(page.get_by_role("heading", name="Promise", exact=True)).to_be_visible(timeout=SLOW)
    await expect(page.locator(f".st-key-{state.promise_key(path, 'ttft_s')} input")).to_have_value(
        f"{OWN_TTFT[i]:.3f}", timeout=SLOW)
    await expect(page.locator(f".st-key-{state.promise_key(INTERACTIVE, 'ttft_s')} input")).to_have_value(
        f"{SAMPLE_TTFT[i]:.3f}", timeout=SLOW)
    await expect(own.get_by_test_id("stMetricValue")).to_have_text(expected, timeout=SLOW)
    await only_own_paths()
    for text in await page.get_by_test_id("stException").all_inner_texts():
        problems.append(f"session {i}: {text[:300]}")
    await page.close()
    return took


def test_eight_sessions_at_once(server: dict, tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    paths = [f"team-{i}/model-{chr(97 + i)}" for i in range(SESSIONS)]
    exports = [small_export.write(tmp_path / f"session-{i}.prom", [paths[i]], seed=100 + i) for i in range(SESSIONS)]
    expected = [expected_metrics(exports[i], paths[i], OWN_TTFT[i]) for i in range(SESSIONS)]
    assert len({tuple(e) for e in expected}) > 1  # the files differ in their numbers, not only their names

    async def run() -> tuple[list[float], float, int, int]:
        problems: list[str] = []
        async with async_playwright() as p:
            browser = await p.chromium.launch(**chromium(server["scratch"]))
            context = await browser.new_context(viewport={"width": 1400, "height": 2000})
            context.set_default_timeout(SLOW)  # eight cube builds and uploads share two cores
            before = rss_kib(server["pid"])
            opened = asyncio.Barrier(SESSIONS)
            started = time.monotonic()
            took = await asyncio.gather(*[one_session(context, server["url"], i, exports[i], paths[i], expected[i],
                                                      opened, problems) for i in range(SESSIONS)])
            wall = time.monotonic() - started
            after = rss_kib(server["pid"])
            cookies = {c["name"] for c in await context.cookies()}
            await browser.close()
        assert cookies <= {"_streamlit_xsrf"}, cookies  # nothing of a session in the shared cookie jar
        assert not problems, problems
        return list(took), wall, before, after

    took, wall, before, after = asyncio.run(run())
    log = server["log"].read_text()
    assert "Traceback" not in log, log[-3000:]
    print(f"\n{SESSIONS} sessions at once: {wall:.1f} s wall (each upload + two promise changes "
          f"{min(took):.1f}–{max(took):.1f} s, then a reload); server RSS {before / 1024:.0f} MiB before, "
          f"{after / 1024:.0f} MiB after: {(after - before) / 1024 / SESSIONS:.1f} MiB per session "
          f"(the first session's share includes opening the workspace and loading the sample)")

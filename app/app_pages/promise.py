"""Promise: per path TTFT/TPOT thresholds and a target share (MLPerf presets or custom, kept in the
workspace), then the breach shares with honest bounds, the joint interval, attainment against the
target, the error budget, the per-window breach share and the burn-rate alerts.

Queries: the cube's per-window lists (``promise__window_lists``) as running totals, looked up at the
screen's resolution (``app.promise.screen``); ``promise__shares`` and ``promise__burn_alerts`` for the
download of every window; ``records__joint_shares`` (exact joint share when per-request records are
loaded).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

import streamlit as st

from app.escape import md
from app.promise import shares as pm
from app.ui import cache, charts, state, tables
from app.ui import economics as economics_view
from app.ui import promise as promise_view
from app.ui.page import open_page

page = open_page("Promise")
db, ws, mine, ref, paths = page.db, page.ws, page.mine, page.ref, page.paths

presets = pm.presets()
OPTIONS = [promise_view.CUSTOM, *presets]
stored = promise_view.stored_promises(mine, paths)
INPUTS = {  # field: (label, number_input options); the target is entered in percent
    "ttft_s": ("TTFT ≤ (s)", {"min_value": 0.0, "step": 0.05, "format": "%.3f"}),
    "tpot_s": ("TPOT ≤ (s)", {"min_value": 0.0, "step": 0.005, "format": "%.3f"}),
    "target": ("target (%)", {"min_value": 50.0, "max_value": 99.999, "step": 0.1, "format": "%.2f"}),
    "e2e_s": ("E2E ≤ (s, optional)", {"min_value": 0.0, "step": 1.0, "format": "%.3f"}),
    "queue_s": ("queue ≤ (s, optional)", {"min_value": 0.0, "step": 0.1, "format": "%.3f"}),
}
NUMBER_FIELDS = tuple(INPUTS)


def _values(path: str) -> dict:
    v = {f: st.session_state[state.promise_key(path, f)] for f in ("preset", *NUMBER_FIELDS)}
    v["target"] = None if v["target"] is None else v["target"] / 100
    return v


def _save(path: str) -> None:
    values = _values(path)
    try:
        promise_view.to_promises([promise_view.promise_tuple(path, values)])
    except (ValueError, TypeError) as exc:
        st.session_state[state.PROMISE_ERROR] = f"{path}: {exc} (the last valid promise is kept)"
        return
    st.session_state.pop(state.PROMISE_ERROR, None)
    current = mine.get_setting(promise_view.SETTING_PROMISES, {}) or {}
    mine.set_setting(promise_view.SETTING_PROMISES, {**current, path: values})


def _preset_chosen(path: str) -> None:
    name = st.session_state[state.promise_key(path, "preset")]
    if name != promise_view.CUSTOM:
        p = promise_view.preset_values(name)
        for f in ("ttft_s", "tpot_s"):
            st.session_state[state.promise_key(path, f)] = p[f]
        st.session_state[state.promise_key(path, "target")] = 100 * p["target"]
    _save(path)


def _edited(path: str) -> None:
    v = _values(path)
    name = v["preset"]
    if name != promise_view.CUSTOM:
        p = promise_view.preset_values(name)
        if any(v[f] != p[f] for f in ("ttft_s", "tpot_s", "target")):
            st.session_state[state.promise_key(path, "preset")] = promise_view.CUSTOM
    _save(path)


st.subheader("Promise per path")
st.caption("A request keeps the promise when every set threshold holds (and it did not fail). Presets: MLPerf "
           "Inference v5.1 latency constraints (`data/promise_presets.json`). The promises are yours: kept in the "
           "workspace under this tab's link, and no one else's view changes with them.")
for path in paths:
    values = stored[path]
    st.session_state.setdefault(state.promise_key(path, "preset"), values.get("preset") or promise_view.CUSTOM)
    for f in NUMBER_FIELDS:
        v = values.get(f)
        if v is not None and f == "target":
            v = 100 * v
        st.session_state.setdefault(state.promise_key(path, f), v)
    cols = st.columns([2.2, 1, 1, 1, 1, 1])
    cols[0].selectbox(f"**{md(path)}** — preset", OPTIONS, key=state.promise_key(path, "preset"),
                      on_change=_preset_chosen, args=(path,))
    for col, (f, (label, options)) in zip(cols[1:], INPUTS.items(), strict=True):
        col.number_input(label, **options, key=state.promise_key(path, f), on_change=_edited, args=(path,))
if state.PROMISE_ERROR in st.session_state:
    st.error(md(st.session_state[state.PROMISE_ERROR]))


def _quick_chosen(picks: dict[str, tuple[datetime, datetime]]) -> None:
    label = st.session_state.get(state.PROMISE_QUICK)
    if label in picks:
        st.session_state[state.PROMISE_RANGE] = picks[label]


def _range_dragged() -> None:
    st.session_state[state.PROMISE_QUICK] = None  # a range of one's own: no quick pick is lit


# -- range and options ---------------------------------------------------------------------------------
stored = promise_view.stored_promises(mine, paths)
promises = tuple(promise_view.promise_tuple(p, stored[p]) for p in paths)
c1, c2 = st.columns([3, 1])
windows = promise_view.window_labels(cache.requests_per_window(db, ref)["window_start"])
starts = list(windows)
picks = promise_view.quick_ranges(starts, ref.window_s)
chosen = st.session_state.get(state.PROMISE_RANGE)
if chosen is not None and not (isinstance(chosen, tuple) and set(chosen) <= windows.keys()):
    del st.session_state[state.PROMISE_RANGE]  # another cube: its windows differ
    st.session_state[state.PROMISE_QUICK] = None
if st.session_state.get(state.PROMISE_QUICK) not in picks:
    st.session_state[state.PROMISE_QUICK] = None
st.session_state.setdefault(state.PROMISE_RANGE, (starts[0], starts[-1]))
if picks:
    c1.segmented_control("Quick range (back from the end of the data)", list(picks), key=state.PROMISE_QUICK,
                         on_change=_quick_chosen, args=(picks,))
first, last = c1.select_slider("Windows (start of the first and of the last)", starts,
                               key=state.PROMISE_RANGE, format_func=windows.__getitem__,
                               on_change=_range_dragged)
include_failed = c2.toggle("Failed requests count as breaches", value=True, key=state.INCLUDE_FAILED)
start, end = first, last + timedelta(seconds=ref.window_s)

frame = cache.shares(db, ref, promises, start, end, include_failed)
exact = cache.exact_joint(db, ref.datasets, promises, start, end, include_failed)
summary, marginals = promise_view.promise_tables(frame, exact)
pct = st.column_config.NumberColumn(format="%.3f %%")
st.subheader("Breach shares")
for path, items in promise_view.headlines(summary, marginals).items():
    with st.container(key=state.promise_key(path, "headline")):
        st.markdown(f"**{md(path)}**")
        for col, (label, value, help_text) in zip(st.columns(len(items)), items, strict=True):
            col.metric(label, value, help=help_text)
tables.dataframe(summary, hide_index=True, key="promise_summary", column_config={
    **{c: pct for c in summary.columns if c.endswith("%")},
    "requests": st.column_config.NumberColumn(format="%d"), "failed": st.column_config.NumberColumn(format="%d")})
tables.dataframe(marginals, hide_index=True, key="promise_marginals",
             column_config={c: pct for c in marginals.columns if c.endswith("%")})
st.caption("Joint: the Fréchet interval [max of the lows, min(1, sum of the highs)] — two marginals do not "
           "identify it; the exact value needs per-request records (upload vllm bench / AIPerf / GenAI-Perf exports). "
           "Attainment = 1 − joint; *meets target* is undetermined when the interval straddles the target; "
           "budget remaining = 1 − joint high / (1 − target).")
if (marginals.get("basis") == "per token (ITL)").any():
    st.info("TPOT *per token*: the engine exports no per-request TPOT histogram, so the share is of inter-token "
            "gaps; the joint interval uses the request bound (docs/methods.md#tpot-basis).")
for note in promise_view.bound_notes(marginals, cache.bucket_bounds(db, ref)):
    st.info(md(note))
if (counts := promise_view.counts_note(ws, ref.id)) is not None:
    st.warning(md(counts))

# -- over time -----------------------------------------------------------------------------------------
st.subheader("Over time")
signal = st.segmented_control("Breach share of", ["joint", "ttft", "tpot", "e2e", "queue"], key=state.PROMISE_SIGNAL,
                              default="joint", format_func=lambda s: promise_view.SIGNAL_NAMES.get(s, s))
by_window = cache.shares(db, ref, promises, start, end, include_failed, by_window=True)
step_s = cache.promise_step(db, ref, promises, start, end, include_failed)
st.plotly_chart(charts.breach_share_by_window(by_window, step_s, signal or "joint"), key="share_chart",
                width="stretch")
alerts = cache.alerts(db, ref, promises, start, end, include_failed)
st.plotly_chart(charts.alert_states(alerts, step_s), key="alert_chart", width="stretch")
prices = promise_view.breach_prices(mine.get_setting(economics_view.SETTING_ECONOMICS, None), paths)
tables.dataframe(promise_view.alert_summary(alerts, step_s, prices), hide_index=True, key="alert_table")
st.caption(promise_view.resolution_note(ref.window_s, step_s))
st.download_button("Every window (CSV)", partial(promise_view.full_resolution_file, ws, ref.id, ref.window_s,
                                                 promise_view.to_promises(promises), start, end, include_failed),
                   file_name="headroom-promise-windows.csv", mime="text/csv", key="promise_windows_csv")
if prices is None:
    st.caption("Set a breach price on the Economics page (and run it) to see the budget's burn in dollars per hour "
               "beside the burn rate.")
else:
    st.caption("Burn in dollars per hour: the breached requests per hour (burn rate × (1 − target) × requests per "
               "hour) × the breach price entered on the Economics page; low–high: the joint interval's ends.")
st.caption("Page when the 1 h and 5 min burn both exceed 14.4 (2 % of a 30-day budget in 1 h), or 6 h and 30 min "
           "exceed 6; ticket when 3 d and 6 h exceed 1. *possible*: only the high end of the share interval burns "
           "that fast. Blank: the cube window is longer than the rule's short window.")

# -- the report, as headroom report prints it ---------------------------------------------------------
st.subheader("Download the report")
names = list(ws.datasets().set_index("dataset_id").reindex(list(ref.datasets))["name"].astype(str))
report_file = partial(promise_view.report_file, ws, ref.id, ref.window_s, promise_view.to_promises(promises), start,
                      end, include_failed, exact, names)
r1, r2 = st.columns(2)
r1.download_button("Report (Markdown)", partial(report_file, csv=False), file_name="headroom-report.md",
                   mime="text/markdown", key="report_markdown")
r2.download_button("Report (CSV)", partial(report_file, csv=True), file_name="headroom-report.csv", mime="text/csv",
                   key="report_csv")
st.caption("The text `headroom report --format markdown|csv` prints for these datasets, promises and range.")

# -- as Prometheus rules -------------------------------------------------------------------------------
st.subheader("As Prometheus rules")
engines = [e for e in ws.datasets().set_index("dataset_id").reindex(list(ref.datasets))["engine"] if isinstance(e, str)]
rules_yaml, rules_note = promise_view.rules_file(promise_view.to_promises(promises), ws.path_labels(),
                                                 ws.path_rules(), cache.bucket_bounds(db, ref),
                                                 engines[0] if engines else None)
if rules_yaml is None:
    st.warning(rules_note)
else:
    st.caption(rules_note)
    st.download_button("Download rules.yml", rules_yaml, file_name="headroom-rules.yml", mime="application/yaml",
                       key="rules_download")

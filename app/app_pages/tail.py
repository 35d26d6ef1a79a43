"""Tail: where the tail lives. TTFT, TPOT and e2e over time without averaging, queue time against TTFT,
KV occupancy, preemptions, running and waiting against breach share, the attribution (histograms, and
the twin when the Economics page has run), the signal table and the recommended scaling rule; the report
as Markdown and CSV (``headroom tail``'s text).

Queries: ``tail__phase_breaches``, ``tail__signal_windows``, ``tail__window_quantiles``, ``promise__shares``.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from app.escape import md
from app.tail import report as tail_report
from app.tail import signals
from app.ui import cache, state, tables
from app.ui import promise as promise_view
from app.ui import tail as tail_view
from app.ui.page import open_page

page = open_page("Tail")
db, ws, mine, ref, paths = page.db, page.ws, page.mine, page.ref, page.paths

stored = promise_view.stored_promises(mine, paths)
promises = tuple(promise_view.promise_tuple(p, stored[p]) for p in paths)
# signals are read at 1-minute resolution (leads of 0-15 minutes), whatever the window chosen elsewhere,
# unless the 1-minute cube is still to build over a month's samples (tail_view.default_window)
datasets = ws.datasets().set_index("dataset_id").reindex(list(ref.datasets))
samples = int(datasets["n_samples"].sum())
minute_cached = tail_view.minute_cube_cached(ws, ref.datasets)
opening = tail_view.default_window(samples, minute_cached)
window_s = st.segmented_control("Windows", tail_view.TAIL_WINDOWS, key=state.TAIL_WINDOW, default=opening,
                                format_func=lambda s: f"{s // 60} min") or opening
if (note := tail_view.window_note(window_s, samples, minute_cached)) is not None:
    st.info(note)
tail_cube = cache.cube(db, ref.datasets, window_s, tuple(ws.path_labels()), tuple(ws.path_rules()))
names = tuple(datasets["name"].astype(str))
doc = cache.tail_document(db, tail_cube, promises, None, None, names)
st.caption(f"Promises as set on the Promise page; {window_s // 60}-minute windows. "
           + " ".join(f"**{md(p[0])}**: TTFT ≤ {p[1]:g} s, TPOT ≤ {p[2]:g} s." for p in promises))

c1, c2 = st.columns([2, 1])
path = c1.selectbox("Path", tail_view.paths_by_breaches(doc), key=state.TAIL_PATH)
quantile = c2.select_slider("Quantile", [0.5, 0.9, 0.95, 0.99, 0.999], value=0.99, key=state.TAIL_QUANTILE)
st.subheader("The three numbers over time")
start, end = doc["start"], doc["end"]
quantiles = cache.tail_quantiles(db, tail_cube, quantile)
st.plotly_chart(tail_view.latency_over_time(quantiles, path, quantile, window_s), key="tail_latency_chart",
                width="stretch")
st.caption("Per window, the quantile of each histogram as Prometheus' histogram_quantile interpolates it, with the "
           "bucket it lies in as a band: TTFT, TPOT and end-to-end apart, never a mean.")

st.subheader("Queue time against TTFT")
st.plotly_chart(tail_view.queue_against_ttft(cache.tail_attribution_windows(db, tail_cube, promises), path, window_s),
                key="tail_queue_chart", width="stretch")
pct = st.column_config.NumberColumn(format="%.2f %%")
att = tail_view.attribution_table(doc)
tables.dataframe(att, hide_index=True, key="tail_attribution",
             column_config={c: pct for c in att.columns if c.endswith("%")})
st.caption("Queue alone above the TTFT threshold is a lower bound on the breaches queueing explains (TTFT includes "
           "the queue wait). The queue, prefill and TTFT histograms are separate marginals: the interval "
           "[max(queue alone, TTFT − prefill alone), min(TTFT, TTFT − prefill alone + queue alone)] is Fréchet's "
           "(docs/methods.md#frechet); without a prefill histogram it is [queue alone, TTFT].")

st.subheader("What headroom can buy down")
run = st.session_state.get(state.ECON_RUN)
if run is None:
    st.info("Run scenarios on the Economics page: the twin fitted there replays the observed demand at N, 2N and "
            "4N here, and the breaches that vanish are the ones headroom can buy down.")
elif st.button("Replay with ample replicas", key="tail_twin_button") or state.TAIL_TWIN in st.session_state:
    st.session_state[state.TAIL_TWIN] = run["spec"]
    prices = run["scenario_inputs"].prices.breach
    rows = [replace(r, breach_price=prices.get(r.path, prices.get("*")))
            for r in cache.twin_attribution(db, run["spec"])]
    doc = {**doc, "twin": [r.as_json() for r in rows]}
    twin = tail_view.twin_table(doc)
    tables.dataframe(twin, hide_index=True, key="tail_twin", column_config={
        **{c: pct for c in twin.columns if c.endswith("%")},
        "capacity breaches / month": st.column_config.NumberColumn(format="%,.0f"),
        "capacity $ / month": st.column_config.NumberColumn(format="$%,.0f")})
    st.caption("Intrinsic: the breaches the twin still shows with 4× the observed replicas (long prompts, slow "
               "decode); capacity: those that vanish, per month at the observed rate and priced at the Economics "
               "page's breach price. *converged*: the twin at 2N and 4N agree (±10 % or 0.1 pp).")

st.subheader("Early and scaling signals")
scope = st.selectbox("Breach share of", tail_view.scopes(doc), key=state.TAIL_SCOPE)
mine_scope = next(s for s in doc["signals"] if s["scope"] == scope)
table = tail_view.signal_table(mine_scope)
tables.dataframe(table, hide_index=True, key="tail_signals",
             column_config={"floor %": pct, **{c: st.column_config.NumberColumn(format="%.2f")
                                              for c in table.columns if c.startswith("Spearman")}})
rule = mine_scope["rule"]
if rule:
    lead = "n/a" if rule["median_lead_min"] is None else f"{rule['median_lead_min']:g} min"
    st.success(f"**Recommended: {md(rule['text'])}** — its alerts are followed by a breaching window within 15 "
               f"minutes {100 * rule['precision']:.0f} % of the time (any window: {100 * rule['base_rate']:.0f} %); "
               f"{100 * rule['recall']:.0f} % of breach onsets were alerted in the 15 minutes before; median lead {lead}.")
for note in mine_scope["notes"]:
    st.info(md(note))
if mine_scope["worst_signal"]:
    worst = next(r for r in mine_scope["signals"] if r["signal"] == mine_scope["worst_signal"])
    st.caption(f"Worst predictor of the following windows: {md(worst['label'])}.")
if mine_scope["signals"]:
    st.plotly_chart(tail_view.correlation_by_lead(tail_view.correlation_frame(mine_scope)), key="tail_lead_chart",
                    width="stretch")
    windows = cache.tail_signal_windows(db, tail_cube, promises, scope)
    st.plotly_chart(tail_view.signals_over_time(windows, window_s), key="tail_signals_chart", width="stretch")
    labels = [r["label"] for r in mine_scope["signals"]]
    which = st.selectbox("Level curve of", labels, key=state.TAIL_SIGNAL)
    chosen = next(r for r in mine_scope["signals"] if r["label"] == (which or labels[0]))
    st.plotly_chart(tail_view.level_curve(windows, chosen), key="tail_level_chart", width="stretch")
else:
    st.info("No waiting, running, KV-cache, preemption or GPU utilisation series in these data: nothing to set "
            "against the breach share.")
st.caption("Spearman rank correlation of the signal at t with the breach share at t + lead (each point with its "
           "number of windows); the level is where an isotonic fit of breach share on the signal exceeds its floor "
           "by the budget rate (1 − target); the rule scales on the waiting queue or the running batch, never on "
           "accelerator utilisation.")

st.subheader("Download")
d1, d2 = st.columns(2)
d1.download_button("Markdown", tail_report.to_markdown(doc), file_name="headroom-tail.md", mime="text/markdown",
                   key="tail_markdown")
d2.download_button("CSV", tail_report.to_csv(doc), file_name="headroom-tail.csv", mime="text/csv", key="tail_csv")
st.caption(f"The text `headroom tail` prints with --format markdown|csv, over {start} .. {end}"
           f"{' (the twin rows included)' if doc.get('twin') else ''}. Scopes: "
           + ", ".join(md(s) for s in tail_view.scopes(doc)) + f" ({md(signals.FLEET)}: every path, request-weighted).")

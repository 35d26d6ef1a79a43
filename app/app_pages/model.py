"""Capacity model: the replica model fitted from the metrics (step time, KV capacity, fit quality,
saturation evidence), calibration and model error at the observed N; the empirical load–response
curve as a cross-check; Kingman and Erlang C as a thinking tool.

Reads the last run of the Economics page (session state): the analysis, and the curve
(``crosscheck.load_response``) and queueing view (``crosscheck.queueing_view``) computed with it.
"""

from __future__ import annotations

import json

import streamlit as st

from app import charts, state, ui_cache, ui_data
from app.economics import decision
from app.economics.scenarios import Observed
from app.store import default_db_path

db = default_db_path()
ws = ui_cache.workspace(db)
st.title("Capacity model")

run = st.session_state.get(state.ECON_RUN)
if run is None:
    st.info("Run scenarios on the Economics page first: the capacity model is fitted as part of that run.")
else:
    analysis, spec = run["analysis"], json.loads(run["spec"])
    model = analysis.model
    observed: Observed = analysis.observed

    st.subheader("One replica, fitted from the metrics")
    left, right = st.columns([3, 2])
    left.dataframe(ui_data.model_table(model), hide_index=True, key="model_table", height="content",
                   column_config={"value": st.column_config.NumberColumn(format="%.4g")})
    fit = model.fit
    right.markdown(
        f"**Fit**: {fit.data}; R² {fit.r2:.3f}, RMSE {1e3 * fit.rmse_s:.3f} ms per step; running batch "
        f"{fit.batch_range[0]:.1f}–{fit.batch_range[1]:.1f} (the step-time model is read outside this range at "
        "your own risk).")
    if model.saturation_observed:
        right.markdown("**Saturation observed**: " + "; ".join(model.saturation_evidence) + ".")
    else:
        right.warning("Saturation never observed: the KV capacity and step time are lower bounds, and scenarios "
                      "that need more are flagged *extrapolated*.")
    right.markdown("**Assumptions** the metrics cannot show (router, batch cap and token budget are settable on "
                   "the Economics page):\n" + "\n".join(f"- {a}" for a in decision.stated_assumptions(analysis)))
    cal = analysis.calibration or {}
    if "tpot_scale" in cal:
        right.markdown(f"**Calibration**: step time ×{cal['tpot_scale']:.3f}, prefill ×{cal['prefill_scale']:.3f} "
                       f"({cal.get('matched', 'at the observed N')}).")
    else:
        right.markdown("**Calibration**: off (the twin runs on the fitted parameters as they are).")
    if "fit_window_s" in cal:
        right.caption(f"Step time fitted on {cal['fit_window_s']} s replica windows (the candidate whose replay "
                      "at the observed N came closest to the observed shares).")
    for note in model.notes + analysis.demand.notes:
        right.caption(note)

    st.subheader(f"Model error at the observed N = {observed.replicas}")
    pct = st.column_config.NumberColumn(format="%.2f %%")
    errors = ui_data.model_error_table(analysis)
    st.dataframe(errors, hide_index=True, key="model_error_table",
                 column_config={c: pct for c in errors.columns if c.endswith("%")})
    st.caption("The twin replays the observed demand at the observed replica count; its shares are set against the "
               "histograms'. The joint error is 0 when the twin falls inside the observed Fréchet interval. The "
               "relative error widens every scenario's interval (never below ±10 %).")

    # -- beside the model (computed with the run, no replay here) -----------------------------------------
    view = st.segmented_control("View", ["Load–response curve", "Queueing (thinking tool)"], key=state.MODEL_VIEW,
                                default="Load–response curve")
    if run["cross_check"] is None:
        st.warning("This run has no load–response curve or queueing view (see the Economics page).")
    elif view == "Queueing (thinking tool)":
        queue = run["queueing"]
        st.info(f"**Thinking tool, not the estimator.** {queue['note']}. A batching, preempting server is not "
                "an M/M/c queue; the formulas show why waiting explodes near saturation and how variability and "
                "pooling matter, and the twin replay is what prices the scenarios.")
        st.plotly_chart(charts.kingman_terms(queue["kingman"]), key="kingman_chart", width="stretch")
        st.plotly_chart(charts.erlang_c(queue["erlang_c"]), key="erlang_chart", width="stretch")
        st.caption(f"Service rate per replica μ = {queue['service_rate_per_replica']:.2f} requests/s; "
                   f"c²s = {queue['service_cs2']:.2f} (output lengths); c²a per hour = index of dispersion of the "
                   "1-minute arrivals.")
    else:
        path = st.selectbox("Path", sorted(run["cross_check"]), key=state.MODEL_PATH)
        cases = sorted({(p.traffic, p.context) for p in run["predictions"]})
        g, m = (1.0, 1.0) if (1.0, 1.0) in cases else cases[0]
        # the 5-minute cube of the run's datasets: the one the curve and the observed shares come from
        ref = ui_cache.cube(db, tuple(spec["datasets"]), 300, tuple(spec["path_labels"]),
                            tuple(tuple(r) for r in spec["rules"]))
        load = ui_data.path_load(ui_cache.requests_per_window(db, ref), ref.window_s, path)
        axis = ui_data.load_axis(run["cross_check"], path, run["predictions"], load, g, m)
        st.plotly_chart(charts.load_response(axis, path), key="curve_chart", width="stretch")
        lo, hi = axis["range"]
        st.caption(f"Isotonic fits of the per-window joint share (low and high ends of its interval) against "
                   f"per-replica load, weighted by requests; observed load {lo:.2f}–{hi:.2f} req/s per replica. "
                   f"Scenarios (traffic ×{g:g}, context ×{m:g}) sit at their request-weighted mean load. The "
                   "curve ignores backlog carried across windows and pooling (DESIGN.md): where it and the "
                   "model part, the model is the estimate and the curve the warning.")

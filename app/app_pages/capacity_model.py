"""Capacity model: the replica model read from the metrics, each parameter with its source (given,
engine config, fitted, calibrated, assumed), the flags, the calibration and the residual at the
observed N; the prefix cache per path (the share of prompt tokens read from the export's counters per
minute and over the range, or what the fit assumed without them, and the split the twin replays); the
empirical load–response curve as a cross-check; Kingman and Erlang C as a thinking tool.

Reads the last run of the Economics page (session state): the analysis, and the curve
(``crosscheck.load_response``) and queueing view (``crosscheck.queueing_view``) computed with it; without
a run, fits the model on open with the Economics page's inputs (the same cached analysis a run uses).
"""

from __future__ import annotations

import json

import streamlit as st

from app.economics.decide import decision
from app.economics.predict.scenarios import Observed
from app.escape import md
from app.ui import cache, charts, state, tables
from app.ui import capacity_model as model_view
from app.ui import data as data_view
from app.ui import economics as economics_view
from app.ui import promise as promise_view
from app.ui.page import open_page

page = open_page("Capacity model")
db, ws = page.db, page.ws

run = st.session_state.get(state.ECON_RUN)
if run is None:
    # no scenario run yet: fit the model on open with the Economics page's inputs (cached by the same key,
    # so a later run of those inputs reuses this fit)
    inputs = model_view.inputs_on_open(economics_view.economics_inputs(page.mine), data_view.datasets(ws),
                                       page.ref.datasets, ws.path_labels(), ws.path_rules(),
                                       promise_view.stored_promises(page.mine, page.paths))
    spec = inputs.replay_key()
    try:
        with st.spinner("Fitting the capacity model and calibrating the twin at the observed N…"):
            analysis = cache.analysis(db, spec)
            run = {"analysis": analysis, "spec": spec, "predictions": [], "queueing": inputs.queueing(analysis),
                   "cross_check": cache.cross_check(db, spec, inputs.replicas, inputs.traffic)}
    except ValueError as exc:
        st.warning(f"The capacity model cannot be fitted on these data: {md(exc)}")
    else:
        st.caption("Fitted on open with the Economics page's inputs (datasets, promises, engine facts); "
                   "**Run scenarios** there adds the predictions beside the curve.")
if run is not None:
    analysis, spec = run["analysis"], json.loads(run["spec"])
    model = analysis.model
    observed: Observed = analysis.observed

    st.subheader("One replica, read from the metrics")
    for line in model_view.model_flags(analysis):
        st.warning(f"**Flagged** — {md(line)}")
    tables.dataframe(model_view.model_table(model), hide_index=True, key="model_table", height="content",
                 column_config={"value": st.column_config.NumberColumn(format="%.4g")})
    st.caption("Source: *given* (your flag or the assumptions on the Economics page), *engine config* "
               "(cache_config_info), *fitted* (from the data, how is said), *calibrated* (set so that the twin at the "
               "observed fleet size shows what the fleet showed), *assumed* (vLLM's default: the data could not "
               "identify it; set it if you know it — vLLM prints the KV size at start-up, 'GPU KV cache size: N "
               "tokens').")
    left, right = st.columns([3, 2])
    fit = model.fit
    left.markdown(
        f"**Step-time fit**: {fit.data} ({model.step_basis}); R² {fit.r2:.3f}, RMSE {1e3 * fit.rmse_s:.3f} ms per "
        f"step; decoding batch {fit.batch_range[0]:.1f}–{fit.batch_range[1]:.1f} (the law is read outside this "
        "range at your own risk).")
    if model.saturation_observed:
        left.markdown("**Saturation observed**: " + "; ".join(model.saturation_evidence) + ".")
    else:
        left.warning("Saturation never observed: the KV capacity and step time are lower bounds, and scenarios "
                     "that need more are flagged *extrapolated*.")
    cal = analysis.calibration or {}
    if "tpot_scale" in cal:
        left.markdown(f"**Calibration** ({len(cal.get('rounds', []))} twin runs at the observed N"
                      f"{'' if cal.get('converged') else ', stopped before converging'}): step time "
                      f"×{cal['tpot_scale']:.3f}, prefill ×{cal['prefill_scale']:.3f} — {cal['matched']}.")
    else:
        left.markdown("**Calibration**: off (the twin runs on the fitted parameters as they are).")
    right.markdown("**Assumptions** (engine facts are settable on the Economics page):\n"
                   + "\n".join(f"- {a}" for a in decision.stated_assumptions(analysis)))
    for note in model.notes + analysis.demand.notes:
        left.caption(note)

    st.subheader("Prefix cache, per path")
    window_s = model_view.CACHED_SHARE_WINDOW_S
    windows, totals = cache.cached_share(db, tuple(spec["datasets"]), window_s, tuple(spec["path_labels"]),
                                         tuple(tuple(r) for r in spec["rules"]))
    read, missing = model_view.prefix_cache_paths(totals, [p.name for p in analysis.demand.paths])
    if missing:
        st.info(model_view.no_counter_statement(missing, every_path=not read))
    if read:
        st.plotly_chart(charts.cached_share_over_time(windows[windows["path"].isin(read)], totals, window_s),
                        key="cached_share_chart", width="stretch")
        pct = st.column_config.NumberColumn(format="%.2f %%")
        count = st.column_config.NumberColumn(format="%,.0f")
        tables.dataframe(model_view.prefix_cache_totals_table(totals, read), hide_index=True, key="prefix_cache_totals",
                         column_config={"cached %": pct, "hit rate %": pct, **dict.fromkeys(
                             ("prompt tokens", "cached tokens", "lookups", "hits", "windows read"), count)})
        st.caption(f"**Read from the export**, exact: per {window_s // 60}-minute window the ratio of counter "
                   "increases, `vllm:prefix_cache_hits_total` (else `vllm:prompt_tokens_cached_total`) over "
                   "`vllm:prompt_tokens_total`; dashed, and in the table, the ratio of their sums over the range (not "
                   "a mean of window shares). A window without prompt tokens is a gap. The hit rate is vLLM's own, "
                   "hits over lookups (`vllm:prefix_cache_queries_total`: a preempted request is looked up again).")
        tables.dataframe(model_view.prefix_split_table(analysis, totals), hide_index=True, key="prefix_split_table",
                         height="content", column_config={"value": st.column_config.NumberColumn(format="%.4g"),
                                                          "source": st.column_config.TextColumn(width=150)})
        st.caption("What the twin replays the share as: a prefix every request of the path starts with (each replica "
                   "caches it once: the same hit rate at any N') and conversation history (cached where the previous "
                   "turn ran: under load-based routing (N'−1)/N' of follow-ups miss it). The metrics show only the sum, "
                   "so the split is *assumed* (the least history the prompt lengths allow) unless *given*; the follow-up "
                   "probability is *fitted* so that the twin at the observed N serves the share *read* (again whenever the "
                   "split or the think time changes); the think time "
                   "is *assumed*, or *fitted* as an upper bound where the assumed one leaves the twin short. The split and "
                   "the think time are set by their CLI flag, and the case by `--prefix-cache` (shared: the whole share "
                   "a shared prefix; off: nothing cached), or under the Economics page's *Engine facts and assumptions* "
                   "(Conversation share of cached tokens, Think time between turns, Prefix cache).")

    st.subheader(f"Residual at the observed N = {observed.replicas}")
    pct = st.column_config.NumberColumn(format="%.2f %%")
    errors = model_view.model_error_table(analysis)
    tables.dataframe(errors, hide_index=True, key="model_error_table",
                 column_config={**{c: pct for c in errors.columns if c.endswith("%")},
                                **{c: st.column_config.NumberColumn(format="%.1f") for c in errors.columns
                                   if c.endswith("ms")}})
    fleet = analysis.fleet_residual
    if fleet:
        st.caption(f"Fleet: running {fleet['running_mean_predicted']:.2f} per replica in the twin against "
                   f"{fleet['running_mean_observed']:.2f} observed (99th percentile "
                   f"{fleet['running_peak_predicted']:.0f} against {fleet['running_peak_observed']:.0f}); waiting {fleet['waiting_mean_predicted']:.2f} "
                   f"against {fleet['waiting_mean_observed']:.2f}; mean inter-token latency "
                   f"{1e3 * fleet['itl_mean_s_predicted']:.1f} ms against {1e3 * fleet['itl_mean_s_observed']:.1f} ms.")
    st.caption("The calibrated twin replays the observed demand at the observed replica count; its shares are set "
               "against the histograms'. The residual (relative above 1 %, in units of 0.1 pp below) widens "
               "every interval of its path (never below ±25 %); above 10 % the path's scenarios are flagged.")

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
        if queue["kingman"]:
            st.plotly_chart(charts.kingman_terms(queue["kingman"]), key="kingman_chart", width="stretch")
        else:
            st.caption("Kingman per hour: the export holds no whole hour (Erlang C below is at its mean rate).")
        st.plotly_chart(charts.erlang_c(queue["erlang_c"]), key="erlang_chart", width="stretch")
        st.caption(f"Service rate per replica μ = {queue['service_rate_per_replica']:.2f} requests/s; "
                   f"c²s = {queue['service_cs2']:.2f} (output lengths); c²a per hour = index of dispersion of the "
                   "1-minute arrivals.")
    else:
        path = st.selectbox("Path", sorted(run["cross_check"]), key=state.MODEL_PATH)
        cases = sorted({(p.traffic, p.context) for p in run["predictions"]})
        g, m = (1.0, 1.0) if (1.0, 1.0) in cases or not cases else cases[0]
        # the 5-minute cube of the run's datasets: the one the curve and the observed shares come from
        ref = cache.cube(db, tuple(spec["datasets"]), 300, tuple(spec["path_labels"]),
                            tuple(tuple(r) for r in spec["rules"]))
        load = model_view.path_load(cache.requests_per_window(db, ref), ref.window_s, path)
        axis = model_view.load_axis(run["cross_check"], path, run["predictions"], load, g, m)
        st.plotly_chart(charts.load_response(axis, path), key="curve_chart", width="stretch")
        lo, hi = axis["range"]
        st.caption(f"Isotonic fits of the per-window joint share (low and high ends of its interval) against "
                   f"per-replica load, weighted by requests; observed load {lo:.2f}–{hi:.2f} req/s per replica. "
                   f"Scenarios (traffic ×{g:g}, context ×{m:g}) sit at their request-weighted mean load. The "
                   "curve ignores backlog carried across windows and pooling (docs: Economics): where it and the "
                   "model part, the model is the estimate and the curve the warning.")

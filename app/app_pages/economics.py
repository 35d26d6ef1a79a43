"""Economics: headroom cost against breach cost per path for capacity scenarios (replicas N', traffic
and context multipliers), the cheapest N', the break-even price of a breach and the cost per request
that kept the promise.

Replays run only on "Run scenarios" and are held per scenario (``cache.scenarios``: those a run lacks
are replayed together); prices are not part of that key, so a price change re-prices the cached
predictions without any replay.
"""

from __future__ import annotations

import json
import time

import streamlit as st

from app.economics.decide import saved, scenarios_text
from app.escape import md
from app.ui import cache, charts, state, tables
from app.ui import data as data_view
from app.ui import economics as economics_view
from app.ui import promise as promise_view
from app.ui import scenario_sets as sets_view
from app.ui.page import open_page

page = open_page("Economics")
db, ws, mine, ref, paths = page.db, page.ws, page.mine, page.ref, page.paths
promises = promise_view.stored_promises(mine, paths)
datasets = data_view.datasets(ws)
names = {int(i): name for i, name in zip(datasets["dataset_id"], datasets["name"], strict=True)}
inputs = economics_view.economics_inputs(mine)
inputs["datasets"] = ([i for i in inputs["datasets"] or [] if i in names]
                      or economics_view.default_datasets(datasets[datasets["dataset_id"].isin(ref.datasets)]))
for k, v in inputs.items():
    if k != "breach":
        st.session_state.setdefault(state.econ_key(k), v)
for k in ("policy_cap_path", "policy_small_path", "policy_defer_path"):
    if st.session_state[state.econ_key(k)] not in (None, *paths):  # a path of other datasets
        st.session_state[state.econ_key(k)] = None
for p in paths:
    st.session_state.setdefault(state.breach_price_key(p), float(inputs["breach"].get(p, inputs["default_breach"])))

# -- inputs (a form: nothing reruns until "Run scenarios") ----------------------------------------------
with st.form("econ_form"):
    c = st.columns(4)
    c[0].text_input("Replicas N' (FROM:TO[:STEP] or a list)", key=state.econ_key("replicas"))
    c[1].text_input("Traffic multipliers", key=state.econ_key("traffic"))
    c[2].text_input("Context-length multipliers", key=state.econ_key("context"))
    c[3].number_input("Seeds per scenario", min_value=1, max_value=10, step=1, key=state.econ_key("seeds"))
    st.multiselect("Datasets to replay", list(names), format_func=lambda i: f"{i}: {names[i]}",
                   key=state.econ_key("datasets"))
    c = st.columns(5)
    c[0].radio("Replica price", ["GPU-hour", "replica-hour"], key=state.econ_key("price_basis"),
               format_func=lambda b: "per GPU-hour × GPUs" if b == "GPU-hour" else "per replica-hour")
    c[1].number_input("USD per GPU-hour", min_value=0.0, step=0.1, key=state.econ_key("gpu_hour"))
    c[2].number_input("GPUs per replica", min_value=0.0, step=1.0, key=state.econ_key("gpus_per_replica"))
    c[3].number_input("USD per replica-hour", min_value=0.0, step=0.1, key=state.econ_key("replica_hour"))
    c[4].number_input("Horizon (hours)", min_value=1.0, step=24.0, key=state.econ_key("horizon_hours"))
    c = st.columns(len(paths) + 1)
    for col, p in zip(c, paths, strict=False):
        col.number_input(f"USD per breach: {md(p)}", min_value=0.0, step=0.001, format="%.4f",
                         key=state.breach_price_key(p))
    c[-1].selectbox("Fleet cost split across paths", ["requests", "equal"], key=state.econ_key("split"))
    with st.expander("Engine facts and assumptions (empty: read from the data, else vLLM's default)"):
        c = st.columns(4)
        c[0].number_input("KV cache tokens per replica", min_value=1, step=1024, value=None,
                          key=state.econ_key("kv_cache_tokens"),
                          help="vLLM prints it at start-up: 'GPU KV cache size: N tokens'. Empty: "
                          "vllm:cache_config_info, else fitted by simulation to kv_cache_usage_perc.")
        c[1].number_input("max_model_len", min_value=1, step=1024, value=None, key=state.econ_key("max_model_len"))
        c[2].number_input("max_num_seqs", min_value=1, step=1, value=None, key=state.econ_key("max_num_seqs"))
        c[3].number_input("max_num_batched_tokens", min_value=16, step=256, value=None,
                          key=state.econ_key("max_num_batched_tokens"))
        c = st.columns(3)
        c[0].selectbox("Router", economics_view.ROUTERS, key=state.econ_key("router"),
                       format_func=lambda r: "least_outstanding (assumed)" if r is None else r)
        c[1].number_input("Observed replicas (empty: inferred)", min_value=1, step=1, value=None,
                          key=state.econ_key("observed_replicas"))
        c[2].checkbox("Calibrate the twin at the observed N", key=state.econ_key("calibrate"))
        c = st.columns(4)
        c[0].selectbox("Prefix cache", economics_view.PREFIX_CASES, key=state.econ_key("prefix_cache"),
                       format_func=lambda x: "conversation (default)" if x is None else x,
                       help="conversation: each path's observed cached share split between a prefix every request "
                       "starts with and conversation history; shared: all a shared prefix; off: every prompt "
                       "token computed (what the cache is worth)")
        c[1].number_input("Conversation share of cached tokens (empty: the least the prompt lengths allow)",
                          min_value=0.0, max_value=1.0, step=0.05, value=None, key=state.econ_key("conversation_share"))
        c[2].number_input("Think time between turns, s (empty: 30)", min_value=0.0, step=5.0, value=None,
                          key=state.econ_key("think_s"))
        c[3].number_input("Prefix-aware affinity margin (empty: 16)", min_value=0, step=1, value=None,
                          key=state.econ_key("affinity_margin"))
    with st.expander("Routing row: load-based against prefix-aware routing (where the export shows cache hits)"):
        c = st.columns(3)
        c[0].checkbox("Price the routing row", key=state.econ_key("routing"))
        c[1].number_input("Its N' (empty: the smallest meeting the promise under load-based routing)", min_value=1,
                          step=1, value=None, key=state.econ_key("routing_replicas"))
        c[2].number_input("Its traffic multiplier (empty: x1 when the grid has it)", min_value=0.01, step=0.25,
                          value=None, key=state.econ_key("routing_traffic"))
    with st.expander("Policies replayed beside the static rows: autoscaler, admission, retries, degradation"):
        k = state.econ_key
        st.number_input("Fleet size of the admission, retry and degradation rows (empty: the observed N)",
                        min_value=1, step=1, value=None, key=k("policy_replicas"))
        c = st.columns(6)
        c[0].checkbox("Autoscaler", key=k("policy_autoscaler"))
        c[1].selectbox("Signal (per ready replica)", ["waiting", "running"], key=k("policy_signal"))
        c[2].number_input("Scale out at", min_value=0.0, step=0.5, key=k("policy_scale_out_at"))
        c[3].text_input("for", key=k("policy_out_for"))
        c[4].number_input("Scale in at", min_value=0.0, step=0.5, key=k("policy_scale_in_at"))
        c[5].text_input("for ", key=k("policy_in_for"))
        c = st.columns(5)
        c[0].text_input("Cooldown", key=k("policy_cooldown"))
        c[1].text_input("Cold start", key=k("policy_cold_start"))
        c[2].text_input("Wake from sleep (empty: no row)", key=k("policy_wake_start"))
        c[3].number_input("Min replicas", min_value=1, step=1, key=k("policy_min_replicas"))
        c[4].number_input("Max replicas", min_value=1, step=1, key=k("policy_max_replicas"))
        c = st.columns(5)
        c[0].checkbox("Admission control", key=k("policy_admission"))
        c[1].text_input("Queue caps k (k × running)", key=k("policy_queue_factor"))
        c[2].checkbox("Retries of rejected requests", key=k("policy_retry"))
        c[3].number_input("Attempts", min_value=1, step=1, key=k("policy_attempts"))
        c[4].number_input("Retry budget per minute", min_value=0.0, step=10.0, key=k("policy_budget_per_minute"))
        c = st.columns(4)
        c[0].number_input("Retries follow queue cap k", min_value=0.0, step=0.5, key=k("policy_retry_queue_factor"))
        c[1].text_input("Backoff", key=k("policy_backoff"))
        c[2].number_input("Cap answers at tokens (empty: no row)", min_value=1, step=64, value=None,
                          key=k("policy_cap_tokens"))
        c[3].selectbox("on path", [None, *paths], key=k("policy_cap_path"),
                       format_func=lambda p: "every path" if p is None else p)
        c = st.columns(4)
        c[0].selectbox("Smaller model for path", [None, *paths], key=k("policy_small_path"),
                       format_func=lambda p: "none" if p is None else p)
        c[1].number_input("share routed", min_value=0.0, max_value=1.0, step=0.05, key=k("policy_small_share"))
        c[2].number_input("its step-time factor", min_value=0.01, step=0.1, key=k("policy_small_step_factor"))
        c[3].number_input("its replicas", min_value=1, step=1, key=k("policy_small_replicas"))
        c = st.columns(4)
        c[0].selectbox("Defer path off-peak", [None, *paths], key=k("policy_defer_path"),
                       format_func=lambda p: "none" if p is None else p)
        c[1].number_input("busiest hours moved", min_value=1, max_value=12, step=1, key=k("policy_defer_hours"))
        c[2].text_input("its relaxed TTFT promise", key=k("policy_defer_ttft"))
        c[3].number_input("USD per degraded answer", min_value=0.0, step=0.001, format="%.4f",
                          key=k("policy_degraded_price"))
    submitted = st.form_submit_button("Run scenarios", type="primary")
st.caption("Replays run only when you press *Run scenarios*, once per scenario: pressing it again after changing "
           "only prices re-prices the cached replays in milliseconds. The twin replays TTFT and TPOT; E2E and "
           "queue thresholds are not part of its promise.")

if submitted:
    new = {k: st.session_state[state.econ_key(k)] for k in economics_view.ECON_DEFAULTS if k != "breach"}
    new["breach"] = {p: st.session_state[state.breach_price_key(p)] for p in paths}
    mine.set_setting(economics_view.SETTING_ECONOMICS, new)
    try:
        inputs = economics_view.scenario_inputs(new, ws.path_labels(), ws.path_rules(), promises)
    except ValueError as exc:
        st.error(md(exc))
    else:
        spec, grid = inputs.replay_key(), inputs.scenarios()
        started, clicked, predictions, replayed = time.perf_counter(), time.time(), [], 0
        with st.status(f"Running {len(grid)} scenarios…", expanded=True) as status:
            bar = st.progress(0.0, text="fitting the capacity model and replaying at the observed N")
            try:
                analysis = cache.analysis(db, spec)
                bar.progress(0.0, text="replaying the scenarios not replayed before")
                progress = economics_view.ReplayProgress(lambda done, text: bar.progress(done, text=text))
                for result in cache.scenarios(db, spec, grid, on_run=progress.ran, on_wait=progress.waiting):
                    predictions += result.predictions
                    replayed += result.computed_at >= clicked
                bar.progress(1.0, text=f"{replayed} of {len(grid)} scenarios replayed, the rest from the cache")
            except ValueError as exc:
                status.update(label=f"Could not run the scenarios: {md(exc)}", state="error")
            else:
                # beside the model (no replay): the empirical curve and the queueing view, as the CLI does
                try:
                    cross = cache.cross_check(db, spec, inputs.replicas, inputs.traffic)
                    queue = inputs.queueing(analysis)
                except ValueError as exc:
                    cross = queue = None
                    st.warning(f"No load–response curve or queueing view: {md(exc)}")
                routed = None
                if inputs.routing:
                    bar.progress(1.0, text="replaying the routing row: load-based against prefix-aware routing")
                    try:
                        routed = cache.routing_rows(db, spec, inputs, predictions)
                    except ValueError as exc:
                        st.error(f"Routing row not replayed: {md(exc)}")
                pset = pol_rows = None
                try:
                    pset = economics_view.policy_set(new, analysis.observed.replicas)
                    if pset is not None:
                        bar.progress(1.0, text=f"replaying {len(pset.rows)} policy rows")
                        pol_rows = cache.policy_rows(db, spec, json.dumps(pset.spec, sort_keys=True),
                                                     analysis.observed.replicas)
                except ValueError as exc:
                    pset = pol_rows = None
                    st.error(f"Policies not replayed: {md(exc)}")
                status.update(label=f"{len(grid)} scenarios, {replayed} replayed, in "
                              f"{time.perf_counter() - started:.1f} s", state="complete", expanded=False)
                st.session_state[state.ECON_RUN] = {
                    "spec": spec, "inputs": new, "scenario_inputs": inputs, "analysis": analysis, "predictions": predictions,
                    "cross_check": cross, "queueing": queue, "took_s": time.perf_counter() - started,
                    "replayed": f"{replayed} of {len(grid)}", "policy_set": pset, "policy_predictions": pol_rows,
                    "routing_predictions": routed}

run = st.session_state.get(state.ECON_RUN)
if run is None:
    st.info("Set the scenarios and prices above, then press **Run scenarios**.")
else:
    if economics_view.scenario_inputs(run["inputs"], ws.path_labels(), ws.path_rules(), promises).replay_key() != run["spec"]:
        st.warning("The promises or the path mapping changed since these results: press **Run scenarios** to replay.")

    t = time.perf_counter()
    doc = economics_view.price(run)
    pricing_ms = 1000 * (time.perf_counter() - t)

    # -- results -------------------------------------------------------------------------------------------
    verdicts = economics_view.verdict(doc)
    st.subheader("Decision")
    for v in verdicts:
        c = st.columns(4)
        c[0].metric(f"Cheapest N' (traffic ×{v['traffic']:g}, context ×{v['context']:g})", v["replicas"])
        c[1].metric("Total cost over the horizon", f"${v['total_cost']:,.0f}")
        c[2].metric("Interval ends agree", "yes" if v["determined_by_data"] else "no",
                    help=f"cheapest at the low end: {v['replicas_if_low']}, at the high end: {v['replicas_if_high']}")
        kept = v["cost_per_kept_request"]
        c[3].metric("Headroom $ per kept request", "n/a" if kept is None else f"${kept:.5f}",
                    help="headroom cost over the horizon / requests that kept the promise, at the cheapest N'")
    for line in economics_view.break_even_lines(doc):
        st.markdown(line)

    cases = sorted({(r["traffic"], r["context"]) for r in doc["fleet"]})
    case = cases[0] if len(cases) == 1 else st.selectbox(
        "Traffic × context case", cases, key=state.ECON_CASE,
        format_func=lambda c: f"traffic ×{c[0]:g}, context ×{c[1]:g}")
    st.plotly_chart(charts.scenario_costs(economics_view.fleet_frame(doc, *case)), key="cost_chart", width="stretch")
    money = st.column_config.NumberColumn(format="$%.2f")
    pct = st.column_config.NumberColumn(format="%.3f %%")
    table = economics_view.scenario_table(doc)
    tables.dataframe(table, hide_index=True, key="scenario_table", column_config={
        **{c: pct for c in table.columns if c.endswith("%")}, **{c: money for c in table.columns if c.endswith("$")},
        "requests": st.column_config.NumberColumn(format="%d"),
        "expected breaches": st.column_config.NumberColumn(format="%d")})
    st.caption(f"Observed: {doc['observed_replicas']} replicas over {doc['observed']['hours']:.1f} h. "
               f"Run: {run['took_s']:.1f} s ({run['replayed']} scenarios replayed, the rest from the cache); "
               f"pricing took {pricing_ms:.1f} ms. Intervals: spread over seeds widened by the model error at the "
               "observed N (see Capacity model); *extrapolated* scenarios also span a ±15 % sensitivity envelope.")

    policy_frame = economics_view.policy_table(doc)
    if not policy_frame.empty:
        st.subheader("Policies beside the static rows")
        st.plotly_chart(charts.policy_costs(economics_view.fleet_frame(doc, 1.0, 1.0),
                                            economics_view.policy_fleet_frame(doc)), key="policy_chart", width="stretch")
        tables.dataframe(policy_frame, hide_index=True, key="policy_table", column_config={
            **{c: pct for c in policy_frame.columns if c.endswith("%")},
            **{c: money for c in policy_frame.columns if c.endswith("$")},
            "degraded answers": st.column_config.NumberColumn(format="%d")})
        tl = economics_view.timelines(doc)
        if not tl.empty:
            st.plotly_chart(charts.autoscaler_timeline(tl), key="autoscaler_chart", width="stretch")
        st.caption(md(doc["policies"]["note"]) + ". Rejected requests count as breaches.")
    if doc.get("routing"):
        st.subheader("Routing: load-based against prefix-aware")
        for line in economics_view.routing_lines(doc):
            st.markdown(line)
        if doc["routing"]["available"]:
            routing_fleet = economics_view.routing_fleet_table(doc)
            tables.dataframe(routing_fleet, hide_index=True, key="routing_fleet_table",
                             column_config={c: money for c in routing_fleet.columns if c.endswith("$")})
            st.plotly_chart(charts.routing_curve(economics_view.routing_curve(doc)), key="routing_chart",
                            width="stretch")
            routing_frame = economics_view.routing_table(doc)
            tables.dataframe(routing_frame, hide_index=True, key="routing_table", column_config={
                **{c: pct for c in routing_frame.columns if c.endswith("%")},
                **{c: money for c in routing_frame.columns if c.endswith("$")}})
            st.caption(md(doc["routing"]["note"]) + ".")
    c = st.columns(2)
    c[0].download_button("Download the report (Markdown)", economics_view.report_header(run, names, "markdown")
                         + scenarios_text.scenarios_markdown(doc), file_name="headroom-scenarios.md", mime="text/markdown",
                         key="econ_download_md")
    c[1].download_button("Download the table (CSV)", economics_view.report_header(run, names, "csv")
                         + scenarios_text.scenarios_csv(doc), file_name="headroom-scenarios.csv", mime="text/csv",
                         key="econ_download_csv")

    with st.form("save_set_form", clear_on_submit=True):
        name = st.text_input("Save these results as a named set (saved sets are shared by everyone on this "
                             "workspace)", key=state.SET_NAME)
        if st.form_submit_button("Save set"):
            try:
                saved.save(ws, name.strip(), sets_view.saved_inputs(run), doc)
            except ValueError as exc:
                st.error(md(exc))
            else:
                st.success(f"Saved **{md(name.strip())}**: compare it on the Scenario sets page "
                           "(or `headroom saved compare`).")

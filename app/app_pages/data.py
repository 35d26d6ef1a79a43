"""Data: upload exports and see what each file held, manage datasets, map labels to paths, choose the
window; then the traffic per path and the data health (counter resets, repaired buckets) of the cube.

Queries: ``cube__requests_by_window`` and the cube's ``resets``/``repairs`` stats (``app.ui.data``).
"""

from __future__ import annotations

import streamlit as st

from app.cube import parse_window
from app.escape import md
from app.ui import cache, charts, state, tables
from app.ui import data as data_view
from app.ui.page import open_page

page = open_page("Data", needs_paths=False)
db, ws, mine = page.db, page.ws, page.mine
st.caption(f"Workspace: {md(ws.path)} — set `HEADROOM_DB` or `headroom dashboard --db FILE` to use another.")

# -- load --------------------------------------------------------------------------------------------
with st.form("upload_form", clear_on_submit=True):
    uploads = st.file_uploader(
        "Metric exports (Prometheus text or OpenMetrics, Prometheus API JSON, VictoriaMetrics export, "
        "promtool dump, long CSV/Parquet, AIPerf server metrics, per-request records; gzip ok; up to "
        f"{st.get_option('server.maxUploadSize')} MB per file: `headroom dashboard --max-upload-mb`)",
        accept_multiple_files=True, key=state.UPLOADS,
    )
    on_sample = data_view.sample_only(ws, data_view.active_datasets(ws, mine))
    keep_sample = on_sample and st.checkbox(
        "Keep the bundled sample in my analysis", key=state.KEEP_SAMPLE,
        help="Unticked, your files take the sample's place in your analysis (it stays listed below, to add "
             "back): its paths and demand are another fleet's.")
    submitted = st.form_submit_button("Load")
if submitted and uploads:
    with st.spinner("Loading…"):
        loaded = data_view.load_uploads(ws, uploads)
        data_view.add_to_analysis(ws, mine, loaded, keep_sample=keep_sample)  # this session's analysis only
        st.session_state[state.LAST_REPORTS] = data_view.report_rows(loaded)
        st.session_state[state.LAST_MESSAGES] = data_view.load_messages(loaded)
with st.expander("Connect: read from Prometheus, Thanos, Mimir, Cortex or VictoriaMetrics"):
    # the token field gets a new key after each read: the next run draws it empty, and Streamlit drops
    # the old one's value (the token is never shown again)
    token_key = f"{state.LIVE_TOKEN}-{st.session_state.get(state.LIVE_TOKEN_GEN, 0)}"
    with st.form("connect_form"):
        c = st.columns([3, 2, 1])
        url = c[0].text_input("API URL", placeholder="http://prometheus:9090", key=state.LIVE_URL)
        token = c[1].text_input("Bearer token (optional)", type="password", key=token_key)
        tenant = c[2].text_input("Tenant (X-Scope-OrgID)", key=state.LIVE_TENANT)
        c = st.columns(4)
        start = c[0].text_input("Start", value="now-1d", key=state.LIVE_START,
                                help="ISO-8601, Unix seconds, or relative: now-7d, now-90m")
        end = c[1].text_input("End", value="now", key=state.LIVE_END)
        match = c[2].text_input("Series selector (optional)", placeholder='{job="vllm"}', key=state.LIVE_MATCH)
        chunk = c[3].text_input("Time per query", value="1h", key=state.LIVE_CHUNK)
        c = st.columns([1, 3], vertical_alignment="bottom")
        timeout_s = c[0].number_input("Timeout per request (s)", min_value=1.0, max_value=600.0, value=30.0, step=5.0,
                                      key=state.LIVE_TIMEOUT, help="a store that does not answer within this fails "
                                      "the read (retries of 5xx and 429 answers wait within it too)")
        insecure = c[1].checkbox("Do not verify TLS (insecure)", key=state.LIVE_INSECURE)
        c = st.columns([3, 1, 2])
        mode = c[0].radio("Read", [data_view.READ_RAW, data_view.READ_PUSHDOWN], key=state.LIVE_MODE,
                          help="Pushdown pulls only the windows (PromQL increase() and *_over_time at step = window, "
                          "summed by the path labels in the store, a day per query): far less to read, but counts "
                          "are extrapolated to each window's edges (docs: Live stores, Pushdown and extrapolation)")
        window = c[1].text_input("Pushdown window", value="5m", key=state.LIVE_WINDOW,
                                 help="the window the store computes; the pages may use any multiple of it")
        labels = c[2].text_input("Pushdown path labels", key=state.LIVE_LABELS,
                                 placeholder=", ".join(ws.path_labels()), help="labels the store sums by (default: "
                                 "the workspace's path labels; __model__ is the engine's model label)")
        read = st.form_submit_button("Read")
    st.caption("Raw samples: no extrapolation, the cube is the one a file of the same data gives. Pushdown: the "
               "store's windows, kept as a dataset of kind live. Either is shared like an upload. The token is used "
               "for the requests only: never shown again, logged or written to the workspace.")
    if read:
        st.session_state[state.LIVE_TOKEN_GEN] = st.session_state.get(state.LIVE_TOKEN_GEN, 0) + 1
        with st.status(f"Reading {md(url)}…", expanded=True) as status:
            report = data_view.fetch_live(ws, url, token, tenant, start, end, match, chunk, insecure, timeout_s,
                                          progress=lambda line: st.write(md(line)),
                                          pushdown_window=window if mode == data_view.READ_PUSHDOWN else None,
                                          path_labels=labels)
            status.update(label=f"{md(url)}: {report.status}", state="error" if report.status == "failed" else
                          "complete", expanded=report.status == "failed")
        data_view.add_to_analysis(ws, mine, [report])
        st.session_state.pop(state.WINDOW, None)  # a pull may have set the session's window: show it
        st.session_state[state.LAST_REPORTS] = data_view.report_rows([report])
        st.session_state[state.LAST_MESSAGES] = data_view.load_messages([report])
if state.LAST_REPORTS in st.session_state:
    reports = st.session_state[state.LAST_REPORTS]
    st.subheader("Last load")
    for level, text in st.session_state.get(state.LAST_MESSAGES, []):
        {"error": st.error, "warning": st.warning, "success": st.success}[level](text)
    tables.dataframe(reports, hide_index=True, key="last_load_table")


# -- datasets ----------------------------------------------------------------------------------------
def _delete() -> None:
    for dataset_id in st.session_state.get(state.DELETE_DATASETS, []):
        ws.delete_dataset(int(dataset_id))
    st.session_state[state.DELETE_DATASETS] = []


def _choose_datasets() -> None:
    mine.set_setting(data_view.SETTING_DATASETS, [int(i) for i in st.session_state[state.ACTIVE_DATASETS]])


st.subheader("Datasets")
st.caption("The datasets are shared: every file loaded here, by anyone, is listed for everyone on this workspace, "
           "and a delete removes it for everyone. Which of them feed *your* analysis is your choice below.")
datasets = data_view.datasets(ws)
tables.dataframe(datasets, hide_index=True, key="datasets_table", column_config={
    "scrape_interval_s": st.column_config.NumberColumn("scrape interval (s)"),
    "snapshot": st.column_config.CheckboxColumn("single snapshot")})
names = {int(i): name for i, name in zip(datasets["dataset_id"], datasets["name"], strict=True)}
left, right = st.columns([3, 1], vertical_alignment="bottom")
left.multiselect("Delete datasets", list(names), format_func=lambda i: f"{i}: {names[i]}",
                 key=state.DELETE_DATASETS)
right.button("Delete selected", on_click=_delete, disabled=not st.session_state.get(state.DELETE_DATASETS))

if datasets.empty:
    st.info("No data yet: upload an export above, or run `headroom load FILE` on the command line.")
else:
    st.session_state[state.ACTIVE_DATASETS] = data_view.active_datasets(ws, mine)
    st.multiselect("Datasets in the analysis (the cube is built from these)", list(names),
                   format_func=lambda i: f"{i}: {names[i]}", key=state.ACTIVE_DATASETS, on_change=_choose_datasets)

    # -- path mapping and window (a change builds a new cube, so they are applied together) ---------
    st.subheader("Paths and window")
    st.caption("The path mapping (labels and rules) is shared: applying it changes the paths of everyone on this "
               "workspace. The window is yours.")
    st.session_state.setdefault(state.WINDOW, data_view.window_text(data_view.window_seconds(mine)))
    st.session_state.setdefault(state.PATH_LABELS, ", ".join(ws.path_labels()))
    st.session_state.setdefault(state.PATH_RULES, data_view.format_rules(ws.path_rules()))
    with st.form("mapping_form"):
        c1, c2 = st.columns([1, 2])
        c1.text_input("Window (1m … 1d)", key=state.WINDOW)
        c2.text_input("Path labels (comma-separated; a path is the values of these labels joined with ' / ')",
                      key=state.PATH_LABELS)
        st.text_area("Rules renaming path keys: one `REGEX => PATH` per line, the regex matches the whole key, "
                     "first match wins", key=state.PATH_RULES, placeholder="llama-3.1-8b-(chat|interactive) => chat")
        applied = st.form_submit_button("Apply")
    if applied:
        try:
            window_s = parse_window(st.session_state[state.WINDOW])
            labels = data_view.parse_labels(st.session_state[state.PATH_LABELS])
            rules = data_view.parse_rules(st.session_state[state.PATH_RULES])
        except ValueError as exc:
            st.error(md(exc))
        else:
            ws.set_paths(labels, rules)
            mine.set_setting(data_view.SETTING_WINDOW, window_s)

    try:
        ref = cache.current_cube(db, mine)
    except ValueError as exc:  # a live pull that cannot make this cube (its window, path labels, files beside it)
        st.error(f"{md(str(exc))}. Choose the datasets in the analysis and the window above.")
        st.stop()
    traffic = cache.requests_per_window(db, ref)
    if traffic.empty:
        st.warning("The cube holds no request counts: no TTFT histogram or request counter of a known engine.")
    else:
        totals = traffic.groupby("path", as_index=False).agg(requests=("requests", "sum"),
                                                             replicas=("replicas", "max"))
        tables.dataframe(totals, hide_index=True, key="paths_table",
                     column_config={"requests": st.column_config.NumberColumn(format="%d")})
        st.plotly_chart(charts.requests_over_time(traffic, ref.window_s), key="requests_chart", width="stretch")

    st.subheader("Data health")
    health = cache.data_health(db, ref)
    if health.empty:
        st.success("No counter reset and no repaired bucket in this cube.")
    else:
        by_stat = health.groupby("stat")["value"].sum()
        st.caption(f"{by_stat.get('resets', 0):,.0f} series resets (restarts) and {by_stat.get('repairs', 0):,.0f} "
                   "non-monotone buckets repaired the way Prometheus does (running maximum over `le`).")
        st.plotly_chart(charts.data_health(health), key="health_chart", width="stretch")

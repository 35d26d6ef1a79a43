"""Scenario sets: named results saved from the Economics page or by `headroom scenarios --save` (kept in
the workspace by ``app.economics.decide.saved``), listed, compared side by side, reused as inputs, exported
and imported as JSON."""

from __future__ import annotations

import streamlit as st

from app.economics.decide import saved
from app.escape import md
from app.ui import charts, state, tables
from app.ui import economics as economics_view
from app.ui import scenario_sets as sets_view
from app.ui.page import open_page

page = open_page("Scenario sets", needs_paths=False)
db, ws, mine = page.db, page.ws, page.mine
st.caption("Saved sets are shared by everyone on this workspace (as `headroom saved` lists them); using a set's "
           "inputs fills only your own Economics form.")


def _use_inputs(name: str) -> None:
    mine.set_setting(economics_view.SETTING_ECONOMICS, sets_view.form_inputs(saved.get(ws, name)["inputs"]))
    for key in [k for k in st.session_state if str(k).startswith(state.ECON_PREFIX)]:
        del st.session_state[key]  # the Economics form re-reads the workspace
    st.session_state[state.SETS_MESSAGE] = f"The Economics form now holds the inputs of **{md(name)}**."


def _delete(name: str) -> None:
    saved.delete(ws, name)
    st.session_state[state.SETS_MESSAGE] = f"Deleted **{md(name)}**."


with st.form("import_form", clear_on_submit=True):
    upload = st.file_uploader("Import sets (a JSON file exported here or by `headroom saved export`)",
                              type=["json"], key=state.SETS_UPLOAD)
    if st.form_submit_button("Import") and upload is not None:
        try:
            imported = saved.import_json(ws, upload.getvalue().decode("utf-8", errors="replace"))
        except ValueError as exc:
            st.error(f"{md(upload.name)}: {md(exc)}")
        else:
            st.session_state[state.SETS_MESSAGE] = f"Imported {len(imported)} set(s): {md(', '.join(imported))}."
if state.SETS_MESSAGE in st.session_state:
    st.success(st.session_state.pop(state.SETS_MESSAGE))

sets = {name: saved.get(ws, name) for name in saved.names(ws)}
if not sets:
    st.info("No saved set yet: run scenarios on the Economics page and save them with a name, or import a file.")
else:
    money = st.column_config.NumberColumn(format="$%.2f")
    listing = sets_view.sets_table(sets)
    tables.dataframe(listing, hide_index=True, key="sets_table",
                 column_config={c: money for c in listing.columns if c.endswith("$")})
    st.download_button("Export all sets (JSON)", saved.export_json(ws), file_name="headroom-scenario-sets.json",
                       mime="application/json", on_click="ignore", key="sets_export")

    st.subheader("Compare")
    names = list(sets)
    for key, default in ((state.SET_A, names[0]), (state.SET_B, names[-1])):
        if st.session_state.get(key) not in sets:
            st.session_state[key] = default
    c1, c2 = st.columns(2)
    a = c1.selectbox("Set A", names, key=state.SET_A)
    b = c2.selectbox("Set B", names, key=state.SET_B)
    tables.dataframe(sets_view.compare_headlines([a, b], [sets[a], sets[b]]), hide_index=True, key="compare_table")
    st.plotly_chart(charts.compare_totals({a: sets_view.set_fleet(sets[a]), b: sets_view.set_fleet(sets[b])}),
                    key="compare_chart", width="stretch")
    costs = ("total_cost_a", "total_cost_b", "breach_cost_a", "breach_cost_b", "headroom_cost_a", "headroom_cost_b",
             "difference")
    tables.dataframe(saved.compare(sets[a], sets[b]), hide_index=True, key="compare_fleet",
                 column_config=dict.fromkeys(costs, money))
    st.caption("Per scenario, A's and B's fleet costs over their horizons; difference = B − A.")
    c1.button(f"Use the inputs of {md(a)} on the Economics page", on_click=_use_inputs, args=(a,), key="sets_use_a")
    c2.button(f"Delete {md(b)}", on_click=_delete, args=(b,), key="sets_delete_b")

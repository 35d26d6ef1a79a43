"""The dashboard's logic, beside the Streamlit pages of ``app/app_pages`` (which stay thin: widgets
in, a call here out, charts).

- ``page``: the preamble every page runs (workspace, current cube, request paths, stop when empty);
- ``cache``: the Streamlit caches (workspace, cubes, promise tables, replays);
- ``state``: session-state keys; ``charts``: Plotly figures; ``units``: display conversions;
- one module of view logic per page, plain functions tests call without Streamlit: ``data``,
  ``promise``, ``economics``, ``model``, ``sets``.
"""

"""Session-state keys in one place (widgets and pages refer to these names only).

Values that must outlive a page switch, a reload or a restart live in the workspace settings, and
widget keys are initialised from them: a session's own (datasets in the analysis, window, promises,
scenario inputs) under its id (``app.ui.session``), the shared ones (path mapping, saved sets) as they are.
"""

from __future__ import annotations

import hashlib

SESSION_ID = "session_id"  # this browser session's id (``app.ui.session``), mirrored in the URL as ?s=

# data
UPLOADS = "data_uploads"
KEEP_SAMPLE = "data_keep_sample"  # an upload joins the bundled sample in the analysis instead of replacing it
LAST_REPORTS = "data_last_reports"
LAST_MESSAGES = "data_last_messages"  # per file of the last load: (level, markdown)
WINDOW = "data_window"
PATH_LABELS = "data_path_labels"
PATH_RULES = "data_path_rules"
ACTIVE_DATASETS = "data_active_datasets"
DELETE_DATASETS = "data_delete_datasets"
LIVE_URL, LIVE_TOKEN, LIVE_TENANT = "live_url", "live_token", "live_tenant"
LIVE_START, LIVE_END, LIVE_MATCH = "live_start", "live_end", "live_match"
LIVE_CHUNK, LIVE_INSECURE = "live_chunk", "live_insecure"
LIVE_TIMEOUT = "live_timeout"
LIVE_MODE, LIVE_WINDOW, LIVE_LABELS = "live_mode", "live_window", "live_labels"
LIVE_TOKEN_GEN = "live_token_gen"  # the token field's key suffix (a new field after each read)

# promise
PROMISE_RANGE = "promise_range"
PROMISE_QUICK = "promise_quick_range"
INCLUDE_FAILED = "promise_include_failed"
PROMISE_SIGNAL = "promise_chart_signal"
PROMISE_ERROR = "promise_error"

# economics
ECON_PREFIX = "econ_"  # + a key of app.ui.economics.ECON_DEFAULTS
ECON_RUN = "econ_run"  # the last run: spec, inputs, analysis, predictions, timings
ECON_CASE = "econ_case"  # (traffic, context) shown in the cost chart
MODEL_PATH = "model_path"
MODEL_VIEW = "model_view"

# scenario sets
SET_NAME = "sets_name"
SET_A = "sets_a"
SET_B = "sets_b"
SETS_UPLOAD = "sets_upload"
SETS_MESSAGE = "sets_message"

# Tail
TAIL_PATH = "tail_path"
TAIL_QUANTILE = "tail_quantile"
TAIL_SCOPE = "tail_scope"
TAIL_SIGNAL = "tail_signal"
TAIL_WINDOW = "tail_window"
TAIL_TWIN = "tail_twin"  # the replay key whose twin attribution the page shows (after its button)


def _slug(path: str) -> str:
    return hashlib.sha1(path.encode()).hexdigest()[:10]


def promise_key(path: str, field: str) -> str:
    """Widget key of one field (preset, ttft_s, ...) of a path's promise (path names are free text)."""
    return f"promise_{field}_{_slug(path)}"


def breach_price_key(path: str) -> str:
    return f"{ECON_PREFIX}breach_{_slug(path)}"


def econ_key(name: str) -> str:
    return ECON_PREFIX + name

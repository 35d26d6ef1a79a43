"""The dashboard under AppTest: the app, a 1-hour slice of the bundled day (11:30–12:30 UTC, with its
two bursts) and its two paths, opening the app and going to a page, reading a table, and a share
computed from the export's raw samples independently of Headroom. The workspace fixtures are in
``tests/app_pages/conftest.py``."""

from __future__ import annotations

import ast
import json
import pickle
from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd
from streamlit.testing.v1 import AppTest

from app.store import Workspace
from tests.support.paths import ROOT, SAMPLE

APP = ROOT / "app" / "streamlit_app.py"
SLICE = (datetime(2026, 11, 17, 11, 30), datetime(2026, 11, 17, 12, 30))
INTERACTIVE, BATCH = "llama-3.1-8b-interactive", "llama-3.1-8b-batch"


def make_slice(out: Path, start: datetime = SLICE[0], end: datetime = SLICE[1]) -> Path:
    """A slice of the bundled export, same format (long Parquet), for fast tests."""
    con = duckdb.connect()
    con.execute("set timezone = 'UTC'")
    rel = con.sql("select * from read_parquet($src) where timestamp >= $start::timestamptz "
                  "and timestamp < $end::timestamptz", params={"src": str(SAMPLE), "start": start, "end": end})
    rel.write_parquet(str(out))
    con.close()
    return out


def registered_pages() -> list[str]:
    """The page files of the router's ``st.Page(...)`` calls, read from its source."""
    tree = ast.parse(APP.read_text())
    return [node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "Page" and node.args and isinstance(node.args[0], ast.Constant)]


# a guard against a hung script, not a time limit: the Capacity model page fits the model on open (the
# bundled day's calibration and residual, 25 to 31 s in CI on two busy cores)
SCRIPT_TIMEOUT_S = 120


def open_app() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=SCRIPT_TIMEOUT_S).run()
    assert not at.exception, at.exception
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def assert_picklable(at: AppTest) -> None:
    """Our session state survives pickling (what enforceSerializableSessionState checks in the app)."""
    for key in at.session_state:
        try:
            pickle.dumps(at.session_state[key])
        except Exception as exc:  # pragma: no cover - the assertion message is the point
            raise AssertionError(f"session state {key!r} cannot be pickled: {exc}") from exc


TABLES = {  # a column only that table has (AppTest does not expose st.dataframe keys)
    "last_load": "errors", "datasets": "dataset_id", "paths": "replicas", "promise_summary": "meets target",
    "promise_marginals": "signal", "scenarios": "N'", "model": "quantity", "sets": "saved (UTC)", "compare": "",
    "model_error": "TTFT residual %",
}


def table(at: AppTest, name: str) -> pd.DataFrame:
    (frame,) = [d.value for d in at.dataframe if TABLES[name] in d.value.columns]
    return frame


def settings(db: Path, key: str) -> object:
    with Workspace(db) as ws:
        return ws.get_setting(key)


def independent_ttft_share(sample_slice: Path, path: str, le: str, since: datetime | None = None) -> float:
    """Share of ``path``'s first tokens above bucket bound ``le``, straight from the export's raw
    samples: per series the last value minus the first (no restart in the slice), or minus the last
    at or before ``since`` (UTC), summed over replicas."""
    raw = pd.read_parquet(sample_slice)
    raw = raw[raw["metric"].isin([f"vllm:time_to_first_token_seconds_{s}" for s in ("bucket", "count")])]
    labels = raw["labels"].map(json.loads)
    raw = raw[labels.map(lambda d: d.get("model_name") == path)].assign(le=labels.map(lambda d: d.get("le")))
    bucket = raw[(raw["metric"].str.endswith("_bucket")) & (raw["le"] == le)]
    count = raw[raw["metric"].str.endswith("_count")]

    def increase(frame: pd.DataFrame) -> float:
        frame = frame.sort_values("timestamp")
        g = frame.groupby("labels")["value"]
        if since is None:
            return float((g.last() - g.first()).sum())
        before = frame[frame["timestamp"] <= pd.Timestamp(since, tz="UTC")].groupby("labels")["value"].last()
        return float((g.last() - before).sum())

    return 1 - increase(bucket) / increase(count)

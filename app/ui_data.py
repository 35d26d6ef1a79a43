"""Functions the Streamlit pages call. Plain Python: tests call them without Streamlit."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import pandas as pd

from app.store import LoadReport, Workspace, data_dir

SAMPLE_EXPORT = "sample/metrics.parquet"


class Upload(Protocol):
    name: str

    def getvalue(self) -> bytes: ...


def sample_path() -> Path:
    return data_dir() / SAMPLE_EXPORT


def ensure_sample_loaded(ws: Workspace) -> LoadReport | None:
    """Load the bundled sample when the workspace holds no dataset (the dashboard opens on it)."""
    if ws.dataset_ids() or not sample_path().is_file():
        return None
    return ws.load_file(sample_path(), name="bundled sample", display="bundled sample (data/sample)")


def load_uploads(ws: Workspace, uploads: Iterable[Upload]) -> list[LoadReport]:
    """Load uploaded files; each is written to a temp file first (DuckDB reads paths, not buffers)."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="headroom-upload-") as tmp:
        for up in uploads:
            path = Path(tmp) / Path(up.name).name
            path.write_bytes(up.getvalue())
            reports.append(ws.load_file(path, name=up.name, display=up.name))
    return reports


def report_rows(reports: Iterable[LoadReport]) -> pd.DataFrame:
    """One row per file of a load, for a table."""
    return pd.DataFrame([{
        "file": r.file,
        "status": r.status,
        "format": r.format,
        "engine": r.engine,
        "series": r.series,
        "samples": r.samples,
        "start": r.start,
        "end": r.end,
        "scrape interval (s)": r.scrape_interval_s,
        "signals": ", ".join(r.signals),
        "paths": ", ".join(r.paths),
        "resets": r.resets,
        "repairs": r.repairs,
        "errors": "; ".join(r.errors),
    } for r in reports])


def requests_per_window(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """Requests (TTFT observations) per window and path: the traffic the dashboard shows first."""
    from app import sql

    return sql.df(ws.cursor(), "cube__requests_by_window", cube_id=cube_id)

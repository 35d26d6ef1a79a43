"""The Data page's logic: the bundled sample, uploads and their load reports, the datasets, the
window and path mapping the cube is built with, and the cube's traffic and health
(queries ``cube__requests_by_window``, ``cube__request_paths``, ``cube__health_stats``,
``cube__bucket_bounds``)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

import pandas as pd

from app import load, sql
from app.escape import md
from app.live import client as live
from app.live import pushdown
from app.load import LoadReport
from app.promise import shares as pm
from app.store import Workspace, data_dir
from app.ui.session import Settings

SAMPLE_EXPORT = "sample/metrics.parquet"


SAMPLE_NAME = "bundled sample"
SAMPLE_ENV = "HEADROOM_SAMPLE"  # another export to open an empty workspace on (tests use a 1-hour slice)


DEFAULT_WINDOW_S = 300


# workspace settings written by the dashboard (plain JSON values)
SETTING_WINDOW = "window_s"


SETTING_DATASETS = "active_datasets"


class Upload(Protocol):
    name: str

    def getbuffer(self) -> memoryview: ...


def sample_path() -> Path:
    """The export an empty workspace opens on: ``$HEADROOM_SAMPLE`` or the bundled day."""
    override = os.environ.get(SAMPLE_ENV)
    return Path(override) if override else data_dir() / SAMPLE_EXPORT


def ensure_sample_loaded(ws: Workspace) -> LoadReport | None:
    """Load the bundled sample when the workspace holds no dataset (the dashboard opens on it)."""
    path = sample_path()
    if ws.dataset_ids() or not path.is_file():
        return None
    return load.load_file(ws, path, name=SAMPLE_NAME, display=f"{SAMPLE_NAME} ({path.name})")


def sample_only(ws: Workspace, dataset_ids: Iterable[int]) -> bool:
    """Whether ``dataset_ids`` are the bundled sample alone (what the dashboard opened on)."""
    ids = {int(i) for i in dataset_ids}
    if not ids:
        return False
    datasets = ws.datasets()
    return ids <= set(datasets.loc[datasets["name"] == SAMPLE_NAME, "dataset_id"].astype(int))


def load_uploads(ws: Workspace, uploads: Iterable[Upload]) -> list[LoadReport]:
    """Load uploaded files; each is written to a temp file first (DuckDB reads paths, not buffers), from a
    view of the upload's buffer (no second copy of a month's 226 MB export while it is written)."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="headroom-upload-") as tmp:
        for up in uploads:
            path = Path(tmp) / Path(up.name).name
            path.write_bytes(up.getbuffer())
            reports.append(load.load_file(ws, path, name=up.name, display=up.name))
    return reports


READ_RAW, READ_PUSHDOWN = "Raw samples (exact)", "Pushdown: the store computes the windows (extrapolated)"


def fetch_live(ws: Workspace, url: str, token: str = "", tenant: str = "", start: str = "now-1d", end: str = "now",
               match: str = "", chunk: str = "1h", insecure: bool = False, timeout_s: float = 30.0,
               progress: Callable[[str], None] | None = None, pushdown_window: str | None = None,
               path_labels: str = "") -> LoadReport:
    """Read the raw serving samples of a live store (``headroom fetch``) and load them as a dataset, or with
    ``pushdown_window`` pull the cube the store computes at that window (``headroom fetch --pushdown``,
    summed by ``path_labels``, default the workspace's); a failure is a failed report of one line. The
    token goes into the request headers only."""
    try:
        store = live.store_from_env(url.strip(), {live.TOKEN_ENV: token} if token else {},
                                    extra_headers=[f"X-Scope-OrgID: {tenant.strip()}"] if tenant.strip() else [],
                                    timeout_s=timeout_s, insecure=insecure)
        if pushdown_window:
            labels = parse_labels(path_labels) if path_labels.strip() else None
            return pushdown.fetch_cube(ws, store, start, end, pushdown_window, path_labels=labels, match=match or None,
                                       progress=progress)
        with tempfile.TemporaryDirectory(prefix="headroom-live-") as tmp:
            out = Path(tmp) / "live.parquet"
            _, t0, t1 = live.fetch(store, start, end, out, match or None, chunk, progress)
            name = f"{url.strip()} {t0.strftime('%Y-%m-%dT%H:%MZ')}..{t1.strftime('%Y-%m-%dT%H:%MZ')}"
            return load.load_file(ws, out, name=name, display=name)
    except (live.LiveError, ValueError) as exc:
        return LoadReport(file=url.strip() or "(no URL)", status="failed", errors=[str(exc)])


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
        "unknown metrics": ", ".join(r.unknown_metrics),
        "notes": "; ".join(r.notes),
        "errors": "; ".join(r.errors),
    } for r in reports])


def load_messages(reports: Iterable[LoadReport]) -> list[tuple[str, str]]:
    """Per file of a load, ``(level, markdown)``: ``error`` with the file's error, ``warning`` with each
    note (what was dropped, repaired or kept, word for word as ``headroom load`` prints it) or
    ``success``; file names and messages escaped (they come from the data)."""
    out = []
    for r in reports:
        if r.status == "failed":
            out.append(("error", f"**{md(r.file)}** was not loaded: " + "; ".join(md(e) for e in r.errors)))
            continue
        text = (f"**{md(r.file)}**: {r.status} — {r.format}, engine {md(r.engine or 'unknown')}, {r.series:,} series, "
                f"{r.samples:,} {'window values pulled' if r.format == 'live' else 'samples'}, "
                f"paths: {md(', '.join(r.paths) or 'none')}")
        if r.notes:
            out.append(("warning", text + "".join(f"\n- {md(n)}" for n in r.notes)))
        else:
            out.append(("success", text))
    return out


def requests_per_window(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """Requests (TTFT observations) per window and path: the traffic the dashboard shows first."""
    return sql.df(ws.cursor(), "cube__requests_by_window", cube_id=cube_id)


def datasets(ws: Workspace) -> pd.DataFrame:
    """The datasets table, with ``snapshot`` (a single scrape: increases since the server started)."""
    return ws.datasets()


def active_datasets(ws: Workspace, settings: Settings | None = None) -> list[int]:
    """Datasets the cube is built on: the session's choice (still existing ones), else every dataset.

    A session that has made no choice yet is given every dataset there is now, and keeps that: a file
    another session loads later does not enter its analysis (``SessionSettings``)."""
    settings = settings or ws
    existing = ws.dataset_ids()
    stored = settings.get_setting(SETTING_DATASETS)
    if stored is None:
        if existing and settings is not ws:
            settings.set_setting(SETTING_DATASETS, existing)
        return existing
    chosen = [i for i in stored if i in existing]
    return chosen or existing


def add_to_analysis(ws: Workspace, settings: Settings, reports: Iterable[LoadReport],
                    keep_sample: bool = False) -> list[int]:
    """Put the datasets of a load (loaded, or found already loaded) into the session's analysis. While
    the analysis is the bundled sample alone, the user's own data take its place (it stays listed, to
    add back) unless ``keep_sample``: the sample's paths and demand are another fleet's, and a cube of
    both is a pass over both (a month's export beside it: 374 s, where the load keeps its own cube).
    A pull kept as a dataset of kind live cannot share a cube (``app.cube.check_live``): it becomes the
    analysis alone, at its window when the session's is not a multiple of it; files loaded after it
    take its place."""
    ids = active_datasets(ws, settings)
    loaded = [r for r in reports if r.dataset_id is not None]
    pulled = pushdown.pulled_windows(ws)
    pulls = [r for r in loaded if r.dataset_id in pulled]
    if pulls:
        ids = [int(pulls[-1].dataset_id)]
        settings.set_setting(SETTING_DATASETS, ids)
        if window_seconds(settings) % pulled[ids[0]]:
            settings.set_setting(SETTING_WINDOW, pulled[ids[0]])
        return ids
    new = [r.dataset_id for r in loaded if r.dataset_id not in ids]
    if new:
        kept = [i for i in ids if i not in pulled]
        if not keep_sample and sample_only(ws, kept) and not sample_only(ws, new):
            kept = []
        ids = sorted({*kept, *new})
        settings.set_setting(SETTING_DATASETS, ids)
    return ids


def window_seconds(settings: Settings) -> int:
    return int(settings.get_setting(SETTING_WINDOW, DEFAULT_WINDOW_S))


def window_text(seconds: int) -> str:
    """300 -> '5m' (the shortest exact form ``parse_window`` reads back)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_labels(text: str) -> list[str]:
    labels = [s.strip() for s in text.split(",") if s.strip()]
    if not labels:
        raise ValueError("path labels: give at least one label name, e.g. model_name")
    bad = [x for x in labels if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", x)]
    if bad:
        raise ValueError(f"path labels: {', '.join(bad)} is not a Prometheus label name")
    return labels


def format_rules(rules: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"{pattern} => {path}" for pattern, path in rules)


def parse_rules(text: str) -> list[tuple[str, str]]:
    """``REGEX => PATH`` per line (blank lines and ``#`` comments ignored); the regex must match the
    whole path key (label values joined with `` / ``), first matching rule wins."""
    rules = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, path = line.partition("=>")
        if not sep or not pattern.strip() or not path.strip():
            raise ValueError(f"rule line {n}: expected REGEX => PATH, got {line!r}")
        try:
            re.compile(pattern.strip())
        except re.error as exc:
            raise ValueError(f"rule line {n}: bad regex {pattern.strip()!r} ({exc})") from None
        rules.append((pattern.strip(), path.strip()))
    return rules


def data_health(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """Counter resets and repaired (non-monotone) buckets per window, path and signal (cube stats)."""
    return sql.df(ws.cursor(), "cube__health_stats", cube_id=cube_id)


def request_paths(ws: Workspace, cube_id: int) -> list[str]:
    """Paths with request-level histograms (the ones a promise applies to)."""
    return [r[0] for r in sql.rows(ws.cursor(), "cube__request_paths", cube_id=cube_id)]


def bucket_bounds(ws: Workspace, cube_id: int) -> dict[str, list[float]]:
    """Finite bucket bounds (seconds) per histogram signal of a cube."""
    return pm.bucket_bounds(ws, cube_id)


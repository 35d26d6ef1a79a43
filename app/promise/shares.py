"""Promises (thresholds + target share per path) and the breach report built on the cube."""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from app import sql
from app.store import Workspace, data_dir

ALL_PATHS = "*"
_PROMISE_RE = re.compile(
    r"^(?:(?P<path>.+?)=)?(?P<ttft>[0-9.eE+-]+)/(?P<tpot>[0-9.eE+-]+)(?:@(?P<target>[0-9.eE+-]+%?))?$"
)


@dataclass(frozen=True)
class Promise:
    """TTFT <= ttft_s and TPOT <= tpot_s (seconds) for at least ``target`` of a path's requests."""

    path: str = ALL_PATHS
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    queue_s: float | None = None
    target: float = 0.99

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise ValueError(f"promise for {self.path}: {name} must be a positive number of seconds, got {v}")
        if not 0 < self.target < 1:
            raise ValueError(f"promise for {self.path}: target must be a share in (0, 1), got {self.target}")

    def as_param(self) -> dict[str, Any]:
        return asdict(self)


def parse_promise(text: str) -> Promise:
    """``PATH=TTFT_S/TPOT_S[@TARGET]`` or ``TTFT_S/TPOT_S`` (every path). TARGET as 0.99 or 99%."""
    m = _PROMISE_RE.match(text.strip())
    if not m:
        raise ValueError(f"promise {text!r}: expected PATH=TTFT_S/TPOT_S[@TARGET], e.g. chat=0.5/0.03@0.99")
    target = m.group("target")
    share = 0.99
    if target:
        share = float(target[:-1]) / 100 if target.endswith("%") else float(target)
    return Promise(path=m.group("path") or ALL_PATHS, ttft_s=float(m.group("ttft")),
                   tpot_s=float(m.group("tpot")), target=share)


def presets() -> dict[str, dict[str, Any]]:
    """Named promise presets (MLPerf Inference v5.1) with their citation, from data/promise_presets.json."""
    doc = json.loads((data_dir() / "promise_presets.json").read_text())
    return {p["name"]: p for p in doc["presets"]}


def preset_promise(name: str, path: str = ALL_PATHS) -> Promise:
    try:
        p = presets()[name]
    except KeyError:
        known = ", ".join(sorted(presets()))
        raise ValueError(f"unknown preset {name!r}; known presets: {known}") from None
    return Promise(path=path, ttft_s=p["ttft_s"], tpot_s=p["tpot_s"], target=p["target"])


def time_range(ws: Workspace, cube_id: int, start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """Range of window starts to report: [start, end), defaulting to the cube's whole span. The default
    start skips leading windows where nothing was counted (a window that holds only the first
    scrape's baselines)."""
    lo, first_counted, hi, window_s = ws.cursor().execute(
        "select min(window_start), min(window_start) filter (where stat in ('increase', 'count') and value != 0), "
        "max(window_start), (select cast(spec->>'window_s' as integer) from cube_index where cube_id = $id) "
        "from cube_rows where cube_id = $id", {"id": cube_id}).fetchall()[0]
    lo = first_counted or lo
    if lo is None:
        raise ValueError("the cube is empty: no samples of a known signal were loaded")
    return (start or lo, end or hi + timedelta(seconds=window_s))


# promise__shares' columns: the shares table, and per window the alerts table's
SHARE_COLUMNS = (
    "window_start", "path", "requests", "failed_requests", "finished_requests", "target",
    "ttft_threshold_s", "ttft_share", "ttft_low", "ttft_high", "ttft_exact",
    "tpot_threshold_s", "tpot_share", "tpot_low", "tpot_high", "tpot_exact", "tpot_basis",
    "e2e_threshold_s", "e2e_share", "e2e_low", "e2e_high", "e2e_exact",
    "queue_threshold_s", "queue_share", "queue_low", "queue_high", "queue_exact",
    "failed_share", "joint_low", "joint_high",
)
ALERT_COLUMNS = ("window_start", "path", "requests", "target", "burn_low", "burn_high", "page_1h", "page_6h",
                 "ticket_3d")

# rows per Arrow batch of the per-window tables (30-odd columns): smaller than the client's 131,072 so
# that a batch fits the CPU cache, which exports faster; pandas joins the batches at little cost
EXPORT_BATCH_ROWS = 16_384

# (share of the error budget consumed, long window in hours) of the three SRE-workbook alert rules
ALERT_RULES = {"page_1h": (2.0, 1.0), "page_6h": (5.0, 6.0), "ticket_3d": (10.0, 72.0)}


def burn_factor(budget_percent: float, period_hours: float, long_window_hours: float) -> float:
    """Burn rate at which ``budget_percent`` of the period's budget is spent in the long window
    (Sloth's formula: 2 % of a 30-day budget in 1 h -> 14.4)."""
    return budget_percent * period_hours / 100 / long_window_hours


def _alert_params(window_s: int, slo_period_days: float) -> dict[str, Any]:
    period_h = slo_period_days * 24
    fast, slow, ticket = (burn_factor(b, period_h, h) for b, h in ALERT_RULES.values())
    return {"window_s": int(window_s), "fast_factor": fast, "slow_factor": slow, "ticket_factor": ticket}


def _window_s(cur: Any, cube_id: int) -> int:
    return int(cur.execute("select cast(spec->>'window_s' as integer) from cube_index where cube_id = $id",
                           {"id": cube_id}).fetchall()[0][0])


def _shares_table(cur: Any, cube_id: int, window_s: int, promises: list[Promise], start: datetime, end: datetime,
                  per_window: bool, include_failed: bool, slo_period_days: float) -> Any:
    """``promise__shares`` as an Arrow table (Arrow, then pandas: 3x faster than ``.df()`` on the
    wide per-window table)."""
    return sql.arrow(cur, "promise__shares", batch_rows=EXPORT_BATCH_ROWS, cube_id=cube_id, start_ts=start,
                     end_ts=end, promises=[p.as_param() for p in promises], per_window=per_window,
                     over_range=not per_window, include_failed=include_failed, paths=None,
                     **_alert_params(window_s, slo_period_days))


def _range_table(cur: Any, cube_id: int, window_s: int, promises: list[Promise], start: datetime, end: datetime,
                 include_failed: bool) -> Any:
    """The shares over the range, by path (the query leaves its ten-odd range rows unordered)."""
    table = _shares_table(cur, cube_id, window_s, promises, start, end, False, include_failed, 30)
    return table.select(list(SHARE_COLUMNS)).sort_by("path")


def _window_tables(cur: Any, cube_id: int, window_s: int, promises: list[Promise], start: datetime, end: datetime,
                   include_failed: bool, slo_period_days: float, alerts: bool = True) -> tuple[Any, Any]:
    """The per-window shares and alerts (Arrow), from one pass; when the stored windows are not their
    dense grid (``misfits``, promise__shares' header), the shares sorted and promise__burn_alerts
    run on them."""
    table = _shares_table(cur, cube_id, window_s, promises, start, end, True, include_failed, slo_period_days)
    windows = table.select(list(SHARE_COLUMNS))
    if table.num_rows == 0 or table["misfits"][-1].as_py() == 0:
        return windows, table.select(list(ALERT_COLUMNS))
    windows = windows.sort_by([("path", "ascending"), ("window_start", "ascending")])
    return windows, (_alerts_table(cur, windows, window_s, slo_period_days) if alerts else None)


def shares(ws: Workspace, cube_id: int, promises: list[Promise], start: datetime, end: datetime,
           by_window: bool = False, include_failed: bool = True) -> pd.DataFrame:
    """The ``promise__shares`` table (one row per path, or per window and path)."""
    cur = ws.cursor()
    window_s = _window_s(cur, cube_id)
    if by_window:
        return sql.to_pandas(_window_tables(cur, cube_id, window_s, promises, start, end, include_failed, 30,
                                            alerts=False)[0])
    return sql.to_pandas(_range_table(cur, cube_id, window_s, promises, start, end, include_failed))


def burn_alerts(ws: Workspace, cube_id: int, window_s: int, promises: list[Promise], start: datetime,
                end: datetime, include_failed: bool = True, slo_period_days: float = 30,
                windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Burn rate per window and the multiwindow alert states (``promise__burn_alerts``). ``windows``
    is the per-window ``shares`` table of the same promises when the caller has it already."""
    cur = ws.cursor()
    if windows is None:
        return sql.to_pandas(_window_tables(cur, cube_id, window_s, promises, start, end, include_failed,
                                            slo_period_days)[1])
    return sql.to_pandas(_alerts_table(cur, windows, window_s, slo_period_days))


def _alerts_table(cur: Any, windows: Any, window_s: int, slo_period_days: float) -> Any:
    """``promise__burn_alerts`` over ``windows`` (the per-window shares) as an Arrow table."""
    cur.register("promise_windows", windows)
    return sql.arrow(cur, "promise__burn_alerts", batch_rows=EXPORT_BATCH_ROWS,
                     **_alert_params(window_s, slo_period_days))


@dataclass(frozen=True)
class PromiseTables:
    """What a promise change shows: shares per path over the range, per window, and the alerts."""

    paths: pd.DataFrame
    windows: pd.DataFrame
    alerts: pd.DataFrame


def evaluate(ws: Workspace, cube_id: int, window_s: int, promises: list[Promise], start: datetime,
             end: datetime, include_failed: bool = True, slo_period_days: float = 30) -> PromiseTables:
    """``shares`` per path and per window and ``burn_alerts``: two statements, the range rows and the
    per-window rows with their alerts (one pass), on two cursors at once when there are two cores.

    Each statement runs mostly on one thread (its windows stream in order; the lists of a 30-day
    cube are one storage row group), so the two cores run one each; two halves of the paths, each
    with both statements, cost more CPU than they returned on the bench's 30-day cube."""
    def range_rows() -> pd.DataFrame:
        return sql.to_pandas(_range_table(ws.cursor(), cube_id, window_s, promises, start, end, include_failed))

    with ThreadPoolExecutor(1) as pool:
        on_other_core = pool.submit(range_rows) if (os.cpu_count() or 1) > 1 else None
        windows, alerts = _window_tables(ws.cursor(), cube_id, window_s, promises, start, end, include_failed,
                                         slo_period_days)
        return PromiseTables(on_other_core.result() if on_other_core else range_rows(), sql.to_pandas(windows),
                             sql.to_pandas(alerts))


def _marginal(row: pd.Series, name: str, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    threshold = row[f"{name}_threshold_s"]
    if _missing(threshold):
        return None
    out = {
        "threshold_s": float(threshold),
        "share": _num(row[f"{name}_share"]),
        "share_low": _num(row[f"{name}_low"]),
        "share_high": _num(row[f"{name}_high"]),
        "exact": None if _missing(row[f"{name}_exact"]) else bool(row[f"{name}_exact"]),
    }
    return {**out, **(extra or {})}


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _num(v: Any) -> float | None:
    return None if _missing(v) else float(v)


def meets_target(attainment_low: float | None, attainment_high: float | None, target: float) -> bool | None:
    """True/False when the whole attainment interval is on one side of the target; None when it straddles."""
    if attainment_low is None or attainment_high is None:
        return None
    if attainment_low >= target:
        return True
    if attainment_high < target:
        return False
    return None


def path_report(row: pd.Series, exact_share: float | None = None) -> dict[str, Any]:
    """The JSON object of one path (docs/cli/report.md)."""
    target = float(row["target"])
    joint_low, joint_high = _num(row["joint_low"]), _num(row["joint_high"])
    att_low = None if joint_high is None else 1 - joint_high
    att_high = None if joint_low is None else 1 - joint_low
    budget = 1 - target
    return {
        "path": row["path"],
        "requests": _num(row["requests"]),
        "failed_requests": _num(row["failed_requests"]),
        "ttft": _marginal(row, "ttft"),
        "tpot": _marginal(row, "tpot", {"basis": row["tpot_basis"] if isinstance(row["tpot_basis"], str) else None}),
        "e2e": _marginal(row, "e2e"),
        "queue": _marginal(row, "queue"),
        "joint": {"share_low": joint_low, "share_high": joint_high, "exact_share": exact_share},
        "target": target,
        "attainment_low": att_low,
        "attainment_high": att_high,
        "meets_target": meets_target(att_low, att_high, target),
        # error budget left over the range: conservative (from the high end of the joint share) and best case
        "budget_remaining": None if joint_high is None else 1 - joint_high / budget,
        "budget_remaining_best": None if joint_low is None else 1 - joint_low / budget,
    }


def bucket_bounds(ws: Workspace, cube_id: int) -> dict[str, list[float]]:
    """Finite bucket bounds (seconds) per histogram signal of a cube: the thresholds that are exact."""
    out: dict[str, list[float]] = {}
    for signal, le in sql.rows(ws.cursor(), "cube__bucket_bounds", cube_id=cube_id):
        out.setdefault(signal, []).append(float(le))
    return out

"""The month's import into a live VictoriaMetrics (app/bench/victoria.py): VictoriaMetrics refuses samples
stamped more than two days past its clock, so an export on dates past today is imported whole days earlier
and read back at the moved dates; unmoved, the future days are lost."""

from __future__ import annotations

import json
import math
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from app.bench import victoria
from app.bench.reference import counter_magnitudes
from app.bench.worker import _compare_cubes
from app.store import Workspace
from tests.support.servers import IN_CI

pytestmark = pytest.mark.prometheus

DAY = victoria.DAY_MS
NOW = 1_796_000_000_000  # 2026-11-29T07:33:20Z, the import's clock in these tests


@pytest.mark.parametrize(("last", "days"), [
    (NOW - 2 * DAY, 0),  # ends two days ago: as it is
    (NOW - DAY, 0),  # ends exactly a day before the import
    (NOW - DAY + 1, 1),
    (NOW, 1),
    (NOW + 12 * DAY + DAY // 2, 14),  # 12.5 days ahead: 13.5 days back at least, so 14
])
def test_an_export_is_moved_back_by_whole_days_to_end_a_day_before_now(last: int, days: int) -> None:
    assert victoria.shift_days(last, NOW) == days


def _export(path: Path, first_ms: int, n: int) -> Path:
    """A counter of one series every 15 s from ``first_ms`` (epoch ms), as the month's export holds it."""
    con = duckdb.connect()
    con.execute("""copy (select to_timestamp(($first + 15000 * i) / 1000.0) as "timestamp",
                               'vllm:prompt_tokens_total' as metric,
                               '{"instance": "10.0.0.1:8000", "job": "vllm", "model_name": "m"}' as labels,
                               (100 * i)::double as value
                        from range($n) as t(i)) to '""" + str(path).replace("'", "''") + "' (format parquet)",
                {"first": first_ms, "n": n})
    return path


def _samples(url: str, start_ms: int, end_ms: int) -> tuple[list[int], list[float]]:
    query = urllib.parse.urlencode({"match[]": "vllm:prompt_tokens_total", "start": start_ms / 1000, "end": end_ms / 1000})
    with urllib.request.urlopen(f"{url}/api/v1/export?{query}", timeout=30) as resp:
        lines = [json.loads(line) for line in resp.read().decode().splitlines() if line]
    return ([t for line in lines for t in line["timestamps"]], [v for line in lines for v in line["values"]])


def test_an_export_past_the_clock_is_imported_days_earlier_and_whole(tmp_path: Path) -> None:
    """Four days of a 15 s counter ending ten days past the import's clock: moved back 11 days, every sample
    is stored, at its time less 11 days. Imported unmoved (a clock in the export's future), the same
    store keeps only what lies within two days past its own clock: nothing of it."""
    if not victoria.available():
        reason = "victoria-metrics not installed (apt-get install victoria-metrics)"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}; the VictoriaMetrics tests must run in CI")
        pytest.skip(reason)
    import time

    now = int(time.time() * 1000)
    n = 4 * 5760
    first = now + 6 * DAY
    export = _export(tmp_path / "metrics.parquet", first, n)
    last = first + 15000 * (n - 1)
    data = tmp_path / "vm"
    with victoria.running(data, tmp_path / "vm.log") as url:
        made = victoria.import_parquet(url, export, tmp_path, lambda _m: None, now_ms=now)
        assert made["samples"] == n and made["shift_days"] == victoria.shift_days(last, now) == 11
        moved = made["shift_days"] * DAY
        stamps, values = _samples(url, first - moved - DAY, last - moved + DAY)
        assert sorted(stamps) == [first - moved + 15000 * i for i in range(n)]
        assert sorted(values) == [100.0 * i for i in range(n)]
        assert _samples(url, first - DAY, last + DAY) == ([], [])  # nothing at the export's own dates
    victoria.mark_imported(data, export, made)
    assert victoria.imported(data, export)["shift_days"] == 11
    # the same export imported as its dates are, into a fresh store: VictoriaMetrics drops it all
    shutil.rmtree(data)
    with victoria.running(data, tmp_path / "vm.log") as url:
        made = victoria.import_parquet(url, export, tmp_path, lambda _m: None, now_ms=last + 2 * DAY)
        assert made["shift_days"] == 0
        assert _samples(url, first - DAY, last + DAY) == ([], [])
    assert "too big timestamp" in (tmp_path / "vm.log").read_text()


def test_an_import_without_a_recorded_shift_does_not_count(tmp_path: Path) -> None:
    """A marker from before the shift (its import lost the days past its clock) is not reused, and clear
    empties the store's directory before the import that replaces it."""
    export = _export(tmp_path / "metrics.parquet", NOW, 10)
    data = tmp_path / "vm"
    data.mkdir()
    (data / "headroom-import.json").write_text(json.dumps({"file": str(export), "bytes": export.stat().st_size,
                                                           "samples": 10, "seconds": 1.0}))
    assert victoria.imported(data, export) is None
    victoria.mark_imported(data, export, {"samples": 10, "seconds": 1.0, "json_bytes": 1, "shift_days": 0})
    assert victoria.imported(data, export)["shift_days"] == 0
    victoria.clear(data)
    assert not data.exists()


def test_the_cubes_comparison_sorts_each_difference_by_its_cause() -> None:
    """Two series' 5-minute cells by hand: the file has no sample in the 00:10 window (a scrape gap),
    the pushdown answers it with zeros; its first window counts from zero; one cell differs for no
    known reason; the `_sum` agrees to 1e-9, not exactly."""
    t = pd.to_datetime(["2026-11-17T00:00Z", "2026-11-17T00:05Z", "2026-11-17T00:10Z", "2026-11-17T00:15Z"])

    def cube(rows: list[tuple[int, str, float]]) -> pd.DataFrame:
        return pd.DataFrame({"window_start": [t[i] for i, _, _ in rows], "path": "p", "signal": "ttft",
                             "le": [None if stat == "sum" else 0.5 for _, stat, _ in rows],
                             "stat": [stat for _, stat, _ in rows], "value": [v for _, _, v in rows]})

    file = cube([(0, "increase", 0.0), (1, "increase", 7.0), (3, "increase", 9.0),
                 (0, "sum", 0.0), (1, "sum", 1.25), (3, "sum", 2.5)])
    pushdown = cube([(0, "increase", 40.0), (1, "increase", 7.0), (2, "increase", 0.0), (3, "increase", 8.0),
                     (0, "sum", 3.0), (1, "sum", 1.25 * (1 + 1e-12)), (2, "sum", 0.0), (3, "sum", 2.5)])
    got = _compare_cubes(file, pushdown)
    assert got == {"cells": 8, "same": 3, "differ": 5, "differ_in_first_window": 2, "differ_in_unscraped_window": 2,
                   "differ_within_store_precision": 0, "unexplained": 1, "only_in_file": 0, "only_in_pushdown": 2}
    # the `_sum` a month old, kept by the store to 12 significant digits: 1.25 x (1 + 5e-9) is 6.25e-9 off,
    # within 2 x 1e-12 x 1e4 of counters that reach 1e4, not within that of counters that reach 1e3;
    # the bucket's 1 in 8 is within no precision of its counts
    late = pushdown.copy()
    late.loc[(late["stat"] == "sum") & (late["window_start"] == t[1]), "value"] = 1.25 * (1 + 5e-9)
    for reach, within in ((1e4, 1), (1e3, 0)):
        magnitudes = pd.DataFrame({"path": ["p", "p"], "signal": ["ttft", "ttft"], "le": [None, 0.5],
                                   "stat": ["sum", "increase"], "magnitude": [reach, 1e6]})
        got = _compare_cubes(file, late, magnitudes)
        assert (got["differ"], got["differ_within_store_precision"], got["unexplained"]) == (6, within, 2 - within)


def test_counter_magnitudes_sum_each_series_largest_value_per_cube_cell() -> None:
    """Two replicas of one path, by hand: the `_sum` cell's magnitude is the sum of each replica's
    largest `_sum` (9.0 + 20.0), a bucket's and the count's of their largest counts, a counter's of its
    largest value per replica (30 + 7); a gauge has none."""
    from tests.conftest import histogram, samples
    from tests.conftest import load as load_rows

    a = {"engine": "0", "instance": "a:8000", "model_name": "chat"}
    b = {**a, "instance": "b:8000"}
    rows = histogram("vllm:time_to_first_token_seconds", a, ["0.5", "+Inf"], [(0, [1, 2], 3.0), (60, [4, 6], 9.0)])
    rows += histogram("vllm:time_to_first_token_seconds", b, ["0.5", "+Inf"], [(0, [10, 12], 20.0), (60, [10, 12], 20.0)])
    rows += samples("vllm:prompt_tokens_total", a, [(0, 5), (60, 30)])
    rows += samples("vllm:prompt_tokens_total", b, [(0, 7), (60, 2)])  # a reset: the largest is before it
    rows += samples("vllm:num_requests_running", a, [(0, 3), (60, 4)])
    with Workspace(":memory:") as ws:
        load_rows(ws, rows)
        got = counter_magnitudes(ws, ws.dataset_ids(), ["model_name"])
    got = {(r.signal, r.le, r.stat): r.magnitude for r in got.itertuples()}
    assert got == {("ttft", -1.0, "sum"): 29.0, ("ttft", -1.0, "count"): 18.0, ("ttft", 0.5, "increase"): 14.0,
                   ("ttft", math.inf, "increase"): 18.0, ("prompt_tokens_total", -1.0, "increase"): 37.0}

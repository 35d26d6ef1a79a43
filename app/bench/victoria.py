"""A live VictoriaMetrics for the month's pushdown benchmark: Debian's ``victoria-metrics`` on a free
loopback port, its data in the bench's work directory, the month's export imported once (through
``/api/v1/import``, JSON lines written by DuckDB a replica at a time) and found there by a rerun.

VictoriaMetrics refuses a sample stamped more than two days past its clock ("cannot insert row with
too big timestamp exceeding the current time"), and the bench's month is drawn on fixed dates that
run past today: imported as they are, the days beyond were dropped (a third of the month's 5-minute
cube went missing). So the import moves every timestamp back by whole days (:func:`shift_days`: the
export then ends a day before the import), the marker keeps that shift, and the pushdown reads the
moved range and moves its cube back before comparing it with the file's. Whole days keep every
time of day, which the analysis and the cube's windows depend on."""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from app.bench import servers

BINARY = "victoria-metrics"

# one JSON line per series and day: a 15 s series' day is 5,760 samples, well inside VictoriaMetrics'
# line limit (-import.maxLineLen, 10 MB)
_JSONL = """
copy (
    select
        json_merge_patch(labels::json, json_object('__name__', metric)) as metric,
        list(value order by timestamp) as "values",
        list(epoch_ms(timestamp) order by timestamp) as timestamps
    from month_part
    group by metric, labels, time_bucket(interval '1 day', timestamp)
) to '{out}' (format json)
"""


DAY_MS = 86_400_000


def shift_days(last_ms: int, now_ms: int) -> int:
    """Whole days to move an export whose last sample is at ``last_ms`` (epoch ms) back so that it ends
    at least a day before ``now_ms`` (0: it already does)."""
    return max(0, math.ceil((last_ms - now_ms + DAY_MS) / DAY_MS))


def available() -> bool:
    return shutil.which(BINARY) is not None


@contextmanager
def running(data_dir: Path, log_path: Path, timeout_s: float = 120) -> Iterator[str]:
    """A VictoriaMetrics on ``data_dir`` until the block ends; its URL."""
    port = servers.free_port()
    url = f"http://127.0.0.1:{port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    with servers.running([BINARY, f"-storageDataPath={data_dir}", "-retentionPeriod=100y",
                          f"-httpListenAddr=127.0.0.1:{port}", "-search.latencyOffset=0s",
                          "-search.maxQueryDuration=1h", "-search.maxSamplesPerQuery=2000000000",
                          "-search.maxPointsPerTimeseries=1000000"], log_path, url + "/health", BINARY, timeout_s,
                         stop_s=60, append=True):
        yield url


def import_parquet(url: str, parquet: Path, tmp: Path, log: Callable[[str], None], now_ms: int | None = None
                   ) -> dict[str, Any]:
    """Import the long-format export into the store at ``url``, a replica (``instance``) at a time, every
    timestamp moved back by :func:`shift_days` whole days (from ``now_ms``, the wall clock by default),
    and flush; (samples, seconds, the JSON's bytes, ``shift_days``)."""
    t0 = time.perf_counter()
    con = duckdb.connect()
    samples = 0
    written = 0
    try:
        con.execute("set enable_progress_bar = false")
        last = con.execute("select epoch_ms(max(timestamp)) from read_parquet($f)", {"f": str(parquet)}).fetchall()[0][0]
        now = now_ms if now_ms is not None else int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        shift = shift_days(int(last), now)
        if shift:
            log(f"the export ends {(last - now) / DAY_MS:+.1f} days from now: imported {shift} days earlier")
        instances = [r[0] for r in con.execute(
            "select distinct json_extract_string(labels, '$.instance') from "
            "(select distinct labels from read_parquet($f)) order by 1", {"f": str(parquet)}).fetchall()]
        for k, instance in enumerate(instances):
            con.execute("create or replace temp table month_part as "
                        "select * replace (timestamp - to_days($shift) as timestamp) from read_parquet($f) "
                        "where json_extract_string(labels, '$.instance') is not distinct from $i",
                        {"f": str(parquet), "i": instance, "shift": shift})
            n = con.execute("select count(*) from month_part").fetchall()[0][0]
            out = tmp / f"vm-import-{k}.jsonl"
            con.execute(_JSONL.format(out=str(out).replace("'", "''")))
            con.execute("drop table month_part")
            size = out.stat().st_size
            with out.open("rb") as body:
                request = urllib.request.Request(url + "/api/v1/import", data=body, method="POST",
                                                 headers={"Content-Length": str(size)})
                with urllib.request.urlopen(request, timeout=3600) as resp:
                    if resp.status not in (200, 204):
                        raise RuntimeError(f"{url}/api/v1/import answered {resp.status}")
            out.unlink()
            samples += int(n)
            written += size
            log(f"imported {instance}: {n:,} samples ({size / 1e9:.1f} GB of JSON), "
                f"{time.perf_counter() - t0:.0f} s so far")
    finally:
        con.close()
    with urllib.request.urlopen(url + "/internal/force_flush", timeout=600) as resp:
        resp.read()
    return {"samples": samples, "seconds": time.perf_counter() - t0, "json_bytes": written, "shift_days": shift}


def imported(data_dir: Path, parquet: Path) -> dict[str, Any] | None:
    """What an earlier run imported into ``data_dir`` from this export (same file and size, moved by a
    recorded shift), else None. An import without a recorded shift was made as the export's dates
    were, and lost the days past its clock: it does not count (:func:`clear` it)."""
    marker = data_dir / "headroom-import.json"
    if not marker.exists():
        return None
    info = json.loads(marker.read_text())
    if info.get("file") == str(parquet) and info.get("bytes") == parquet.stat().st_size and "shift_days" in info:
        return info
    return None


def clear(data_dir: Path) -> None:
    """Remove a store's data (before an import into it that must not meet an earlier one's samples)."""
    if data_dir.exists():
        shutil.rmtree(data_dir)


def mark_imported(data_dir: Path, parquet: Path, info: dict[str, Any]) -> None:
    (data_dir / "headroom-import.json").write_text(json.dumps(
        {"file": str(parquet), "bytes": parquet.stat().st_size, **info}, indent=2) + "\n")

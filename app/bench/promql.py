"""Against Prometheus: the same samples backfilled into Debian's ``prometheus`` (``promtool tsdb
create-blocks-from openmetrics``), and the PromQL range queries that compute the same cube, timed.

The cube's rows as PromQL, one range query per (signal, statistic), evaluated at every window end
(step = window): bucket increases ``sum by (model_name, le) (increase(<family>_bucket[5m]))``, the
histograms' ``_count``/``_sum`` increases, counter increases, gauge min/mean/max over the window,
replicas per path and label sets that reset. PromQL's ``increase()`` extrapolates to the window
edges and cannot see a reset across a window edge, so its numbers are not the cube's exact ones
(the live-Prometheus tests explain the difference); the point here is the time.

The server runs on 127.0.0.1 with a config that scrapes nothing, and is stopped by its PID.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.bench import servers
from app.bench.generate import HISTOGRAMS

COUNTERS = (
    ("requests", 'vllm:request_success_total'),
    ("failed_requests", 'vllm:request_success_total{finished_reason=~"abort|error"}'),
    ("prompt_tokens_total", "vllm:prompt_tokens_total"),
    ("generation_tokens_total", "vllm:generation_tokens_total"),
    ("preemptions", "vllm:num_preemptions_total"),
)
GAUGES = (("running", "vllm:num_requests_running"), ("waiting", "vllm:num_requests_waiting"),
          ("kv_usage", "vllm:kv_cache_usage_perc"))


def available() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


def cube_queries(window_s: int) -> list[tuple[str, str]]:
    """(label, PromQL) of every range query that together give the cube's rows."""
    w = f"{window_s}s"
    out = []
    for family, _, _, _ in HISTOGRAMS:
        out.append((f"{family} buckets", f"sum by (model_name, le) (increase({family}_bucket[{w}]))"))
        out.append((f"{family} count", f"sum by (model_name) (increase({family}_count[{w}]))"))
        out.append((f"{family} sum", f"sum by (model_name) (increase({family}_sum[{w}]))"))
        out.append((f"{family} resets", f"count by (model_name) (resets({family}_count[{w}]) > 0)"))
    for label, selector in COUNTERS:
        out.append((label, f"sum by (model_name) (increase({selector}[{w}]))"))
    for label, metric in GAUGES:
        out.append((f"{label} min", f"min by (model_name) (min_over_time({metric}[{w}]))"))
        out.append((f"{label} mean", f"sum by (model_name) (sum_over_time({metric}[{w}])) / "
                                     f"sum by (model_name) (count_over_time({metric}[{w}]))"))
        out.append((f"{label} max", f"max by (model_name) (max_over_time({metric}[{w}]))"))
    # replicas reporting: an instant selector looks back 5 minutes (the default lookback), a function
    # over all vllm:* series would drop their names and clash
    out.append(("replicas", 'count by (model_name) (group by (model_name, instance) '
                            '({__name__=~"vllm:.+", model_name!=""}))'))
    return out


def backfill(openmetrics: Path, data_dir: Path) -> float:
    """``promtool tsdb create-blocks-from openmetrics`` into a fresh ``data_dir``; return seconds."""
    if data_dir.exists():
        shutil.rmtree(data_dir)
    t0 = time.perf_counter()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(openmetrics),
                    str(data_dir)], check=True, capture_output=True, timeout=3600)
    return time.perf_counter() - t0


@contextmanager
def server(data_dir: Path, workdir: Path) -> Iterator[str]:
    """A Prometheus serving ``data_dir`` on a free loopback port; yields its base URL."""
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    port = servers.free_port()
    log = (workdir / "prometheus.log").open("wb")
    base = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
            "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"]
    # no compaction of the backfilled 2 h blocks while the queries are timed (a hidden flag; retried
    # without it if this build refuses it)
    for extra in (["--storage.tsdb.max-block-duration=2h"], []):
        proc = subprocess.Popen(base + extra, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        if _wait_ready(url, proc):
            break
        proc.terminate()
        proc.wait(10)
    else:
        log.close()
        raise RuntimeError(f"prometheus did not become ready (see {workdir / 'prometheus.log'})")
    try:
        yield url
    finally:
        servers.stop(proc, 20)
        log.close()


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 60) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def range_query(url: str, query: str, start: float, end: float, step: float) -> list[dict]:
    """One ``/api/v1/query_range`` call; the result's series."""
    params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                     "step": f"{step:g}"})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=600) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        raise RuntimeError(f"PromQL {query!r}: HTTP {exc.code} {body[:300]}") from None
    if doc.get("status") != "success":
        raise RuntimeError(f"PromQL {query!r}: {doc.get('error')}")
    return doc["data"]["result"]


def run_cube(url: str, start_s: float, end_s: float, window_s: int) -> tuple[float, dict[str, float]]:
    """Run every cube query once over [start, end] at step = window; return the total seconds and
    the total TTFT count PromQL reports (a sanity figure for the detail)."""
    t0 = time.perf_counter()
    ttft_count = 0.0
    for label, query in cube_queries(window_s):
        result = range_query(url, query, start_s, end_s, window_s)
        if label == "vllm:time_to_first_token_seconds count":
            ttft_count = sum(float(v) for series in result for _, v in series["values"])
    return time.perf_counter() - t0, {"ttft_count": ttft_count}

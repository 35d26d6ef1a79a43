"""Per-request records (benchmarks, traces, Headroom's simulator): detection, loading, exact shares.

Histograms only bound the joint promise (TTFT and TPOT breached together); per-request records
give its exact value. Supported files, detected from content:

- ``vllm bench serve --save-result --save-detailed`` JSON (``ttfts``, ``latencies``, ``output_lens``)
- AIPerf ``profile_export.jsonl`` (one record per request)
- GenAI-Perf / perf_analyzer ``profile_export.json`` (``experiments[].requests[]``)
- the simulator's ``requests.parquet`` (columns ``path``, ``ttft_s``, ``tpot_s``, ...)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from app import sql
from app.ingest.base import IngestError, Source
from app.promise import Promise
from app.store import Workspace

KINDS = {
    "vllm-bench-json": "records__from_vllm_bench",
    "aiperf-profile-jsonl": "records__from_aiperf",
    "genai-perf-json": "records__from_genai_perf",
    "simulator-records-parquet": "records__from_simulator",
}
_SIM_COLUMNS = {"model_name", "ttft_s", "tpot_s", "arrival", "first_token", "finish", "finished_reason"}
FAR_PAST, FAR_FUTURE = datetime(1970, 1, 1), datetime(2200, 1, 1)


def sniff(src: Source) -> str | None:
    """The record format of ``src``, or None when it is not a per-request file."""
    head = src.head(1 << 16)
    if head.startswith(b"PAR1"):
        try:
            names = set(pq.read_schema(src.path).names)
        except (pa.ArrowException, OSError, ValueError) as exc:  # truncated or corrupt: footer or schema unreadable
            raise IngestError(src.display, f"not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        return "simulator-records-parquet" if _SIM_COLUMNS <= names else None
    text = head.decode("utf-8", errors="replace").lstrip()
    if not text.startswith("{"):
        return None
    if '"num_prompts"' in text and ('"endpoint_type"' in text or '"backend"' in text):
        if '"ttfts"' not in _read_text(src):
            raise IngestError(src.display, "vllm bench result saved without --save-detailed: it holds no "
                              "per-request ttfts/latencies (rerun with --save-result --save-detailed)")
        return "vllm-bench-json"
    if '"experiments"' in text and '"response_timestamps"' in text:
        return "genai-perf-json"
    first = text.split("\n", 1)[0]
    try:
        obj = json.loads(first)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("metrics"), dict) and "metadata" in obj and (
        "time_to_first_token" in obj["metrics"] or "request_latency" in obj["metrics"]
    ):
        return "aiperf-profile-jsonl"
    return None


def _read_text(src: Source) -> str:
    return src.path.read_text(errors="replace")


def stage(con: duckdb.DuckDBPyConnection, src: Source, kind: str, path_name: str = "") -> None:
    """Create the temp table ``stage_records`` from ``src`` (inside the load's transaction)."""
    query = KINDS[kind]
    params = {"path": str(src.path)}
    if "path_name" in sql.get(query).params:
        params["path_name"] = path_name
    sql.materialize(con, query, "stage_records", **params)


def exact_joint_shares(ws: Workspace, dataset_ids: list[int], promises: Sequence[Promise], start: datetime | None,
                       end: datetime | None, include_failed: bool = True) -> dict[str, float]:
    """{path: exact joint breach share} from the records of ``dataset_ids`` (empty when none)."""
    cur = ws.cursor()
    has = cur.execute("select count(*) from request_records where list_contains($ids, dataset_id)",
                      {"ids": list(dataset_ids)}).fetchone()[0]
    if not has:
        return {}
    frame = sql.df(cur, "records__joint_shares", dataset_ids=list(dataset_ids),
                   promises=[p.as_param() for p in promises], start_ts=start or FAR_PAST,
                   end_ts=end or FAR_FUTURE, include_failed=include_failed)
    return {row.path: float(row.joint_share) for row in frame.itertuples() if row.requests > 0}

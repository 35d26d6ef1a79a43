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
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from app import sql
from app.ingest import jsonscan
from app.ingest.base import IngestError, Source, json_object_limit
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
# the members of a vllm bench result records__from_vllm_bench reads (not itls, generated_texts: most
# of a --save-detailed file)
VLLM_BENCH_FIELDS = {"date", "model_id", "ttfts", "latencies", "input_lens", "output_lens", "errors", "start_times"}
# a GenAI-Perf profile_export.json: {"experiments": [{"requests": [{...}]}]}, each request at depth 5;
# its prompt and streamed responses are most of the file and no share reads them
GENAI_PERF_REQUEST_DEPTH = 5
GENAI_PERF_UNREAD = {"request_inputs", "response_outputs"}
GENAI_PERF_MAX_MEMBERS = 10_000_000


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
    if ('"num_prompts"' in text or '"ttfts"' in text) and ('"endpoint_type"' in text or '"backend"' in text):
        if not _contains(src.path, b'"ttfts"'):
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


def _contains(path: Path, needle: bytes) -> bool:
    """Whether ``needle`` occurs in the file, read in pieces (a result may be gigabytes)."""
    tail = b""
    with path.open("rb") as fh:
        while piece := fh.read(1 << 22):
            if needle in tail + piece[:len(needle)] or needle in piece:
                return True
            tail = piece[-len(needle):]
    return False


def stage(con: duckdb.DuckDBPyConnection, src: Source, kind: str, path_name: str = "") -> None:
    """Create the temp table ``stage_records`` from ``src`` (inside the load's transaction)."""
    query = KINDS[kind]
    params = {"path": str(src.path)}
    if "path_name" in sql.get(query).params:
        params["path_name"] = path_name
    if kind not in ("vllm-bench-json", "genai-perf-json"):
        sql.materialize(con, query, "stage_records", **params)
        return
    # one JSON object of up to gigabytes, mostly what no share needs: read a slim copy
    with tempfile.TemporaryDirectory(prefix="headroom-records-") as tmp:
        slim = Path(tmp) / "fields.json"
        what, tool = (("vllm bench result", "vLLM") if kind == "vllm-bench-json" else
                      ("GenAI-Perf profile export", "GenAI-Perf"))
        try:
            if kind == "vllm-bench-json":
                missing = sorted({"ttfts", "latencies", "output_lens"} - jsonscan.slim(src.path, VLLM_BENCH_FIELDS, slim))
                if missing:
                    raise IngestError(src.display, f"{what} without {', '.join(missing)}: no per-request records")
            else:
                jsonscan.without(src.path, GENAI_PERF_REQUEST_DEPTH, GENAI_PERF_UNREAD, slim,
                                 max_members=GENAI_PERF_MAX_MEMBERS)
        except jsonscan.JsonScanError as exc:
            raise IngestError(src.display, f"not a complete {what}: {exc}") from None
        params["path"] = str(slim)
        try:
            sql.materialize(con, query, "stage_records", max_object_size=json_object_limit(
                Source(path=slim, display=src.display, original=src.original)), **params)
        except duckdb.Error as exc:  # a field of the wrong type (a string where numbers are)
            first = str(exc).splitlines()[0].replace(str(slim), src.display)
            raise IngestError(src.display, f"a field of this {what} is not what {tool} writes: {first}") from None


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

"""Per-request records (benchmarks, traces, Headroom's simulator): detection, loading, exact shares.

Histograms only bound the joint promise (TTFT and TPOT breached together); per-request records
give its exact value. Supported files, detected from content (several lines, not the first alone),
each read as its tool writes it in the versions in use (``queries/records/records__from_*.sql`` say how):

- ``vllm bench serve --save-result --save-detailed`` JSON (``ttfts``, ``itls``, ``output_lens``,
  ``errors``; ``start_times`` in newer versions; ``latencies`` where a fork adds them)
- SGLang ``bench_serving --output-file X.jsonl --output-details`` (one run per line)
- AIPerf ``profile_export.jsonl`` (one record per request, successes and errors in any order)
- GenAI-Perf / perf_analyzer ``profile_export.json`` (``experiments[].requests[]``)
- GuideLLM's benchmark report, JSON or YAML (``benchmarks[].requests``)
- the simulator's ``requests.parquet`` (columns ``path``, ``ttft_s``, ``tpot_s``, ...)

A JSON file that resembles one of them but lacks what a share needs is refused with a message that
says which tool it resembles and what it lacks.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from app import sql
from app.ingest import jsonscan
from app.ingest.base import IngestError, Source, json_object_limit
from app.promise.shares import Promise
from app.store import Workspace

KINDS = {
    "vllm-bench-json": "records__from_vllm_bench",
    "sglang-bench-jsonl": "records__from_sglang_bench",
    "aiperf-profile-jsonl": "records__from_aiperf",
    "genai-perf-json": "records__from_genai_perf",
    "guidellm-json": "records__from_guidellm",
    "guidellm-yaml": "records__from_guidellm",
    "simulator-records-parquet": "records__from_simulator",
}
# what each file is and which tool writes it, for the messages
WHAT = {
    "vllm-bench-json": ("vllm bench result", "vLLM"), "sglang-bench-jsonl": ("SGLang bench_serving result", "SGLang"),
    "aiperf-profile-jsonl": ("AIPerf profile export", "AIPerf"),
    "genai-perf-json": ("GenAI-Perf profile export", "GenAI-Perf"), "guidellm-json": ("GuideLLM report", "GuideLLM"),
    "guidellm-yaml": ("GuideLLM report", "GuideLLM"), "simulator-records-parquet": ("records file", "Headroom"),
}
_SIM_COLUMNS = {"model_name", "ttft_s", "tpot_s", "arrival", "first_token", "finish", "finished_reason"}
FAR_PAST, FAR_FUTURE = datetime(1970, 1, 1), datetime(2200, 1, 1)
# the members of a vllm bench result records__from_vllm_bench reads (not generated_texts, most of a
# --save-detailed file; the per-chunk gaps `itls` only when the file has no `latencies`)
VLLM_BENCH_FIELDS = {"model_id", "ttfts", "latencies", "input_lens", "output_lens", "errors", "start_times"}
# a GenAI-Perf profile_export.json: {"experiments": [{"requests": [{...}]}]}, each request at depth 5;
# its prompt and streamed responses are most of the file and no share reads them
GENAI_PERF_REQUEST_DEPTH = 5
GENAI_PERF_UNREAD = {"request_inputs", "response_outputs"}
GENAI_PERF_MAX_MEMBERS = 10_000_000
# a GuideLLM report: {"benchmarks": [{"requests": {"successful": [{...}]}}]}, each request at depth 6
GUIDELLM_REQUEST_DEPTH = 6
GUIDELLM_UNREAD = {"prompt", "output", "request_args", "reasoning_output", "tool_calls"}
SNIFF_LINES = 20  # JSON lines judged (AIPerf writes cancelled requests first: the first line is not enough)
SNIFF_LINE_BYTES = 1 << 22  # a line of a per-request file (an AIPerf record with per-chunk gaps) fits
_VLLM_KEYS = {"ttfts", "itls", "input_lens", "output_lens", "generated_texts", "errors", "latencies", "start_times"}
_VLLM_SUMMARY = ("num_prompts", "mean_ttft_ms", "request_throughput", "completed")
_GUIDELLM_HEAD = re.compile(r'^\{\s*"benchmarks"\s*:\s*\[', re.S)
_GUIDELLM_YAML = re.compile(r"^(?:---\s*\n)?benchmarks:\s*\n", re.S)


def sniff(src: Source) -> str | None:
    """The record format of ``src``, or None when it is not a per-request file; raise ``IngestError``
    for a file that resembles a benchmark's but lacks what a share needs."""
    head = src.head(1 << 16)
    if head.startswith(b"PAR1"):
        try:
            names = set(pq.read_schema(src.path).names)
        except (pa.ArrowException, OSError, ValueError) as exc:  # truncated or corrupt: footer or schema unreadable
            raise IngestError(src.display, f"not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        return "simulator-records-parquet" if _SIM_COLUMNS <= names else None
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    if _GUIDELLM_YAML.match(text) and re.search(r"^\s*(requests|successful):", text, re.M):
        return "guidellm-yaml"
    if not text.startswith("{"):
        return None
    objects = _first_objects(src)
    if objects:
        return _kind_of_objects(src, objects)
    # one pretty-printed (or very long) JSON object: judge its head
    if re.search(r'"(num_prompts|ttfts)"\s*:', text) and re.search(r'"(endpoint_type|backend)"\s*:', text):
        return _vllm_checked(src, None)
    if re.search(r'"experiments"\s*:', text) and re.search(r'"response_timestamps"\s*:', text):
        return "genai-perf-json"
    if _GUIDELLM_HEAD.match(text) and re.search(r'"type_"\s*:\s*"generative', text):
        return "guidellm-json"
    if re.search(r'"records"\s*:', text) and re.search(r'"(time_to_first_token|ttft|request_latency)"\s*:', text) \
            and re.search(r'"(input_config|aiperf_version)"\s*:', text):
        raise IngestError(src.display, "an AIPerf summary (profile_export_aiperf.json): it holds percentiles, no "
                          "per-request records; load profile_export.jsonl from the same artifacts folder")
    return None


def _first_objects(src: Source) -> list[dict]:
    """The first ``SNIFF_LINES`` lines of ``src`` parsed as JSON objects, while each line is one (a JSON
    lines file, or a whole object on one line); empty when the first line is not a whole object."""
    out: list[dict] = []
    with src.path.open("rb") as fh:
        for _ in range(SNIFF_LINES):
            line = fh.readline(SNIFF_LINE_BYTES)
            if not line:
                break
            if not line.strip():
                continue
            if not line.endswith(b"\n") and len(line) >= SNIFF_LINE_BYTES:
                break  # longer than we judge: what was read so far decides
            try:
                obj = json.loads(line)
            except ValueError:
                break
            if not isinstance(obj, dict):
                break
            out.append(obj)
    return out


def _kind_of_objects(src: Source, objects: list[dict]) -> str | None:
    if any("metadata" in o and isinstance(o.get("metrics"), dict) for o in objects):
        return "aiperf-profile-jsonl"
    first = objects[0]
    keys = set(first) | set(first.get("details") or {} if isinstance(first.get("details"), dict) else {})
    if keys & _VLLM_KEYS or any(k in first for k in _VLLM_SUMMARY):
        sglang = len(objects) > 1 or "details" in first or (
            "date" not in first and ("dataset_name" in first or "mean_e2e_latency_ms" in first))
        if sglang:
            if not keys & {"ttfts", "itls"}:
                raise IngestError(src.display, "SGLang bench_serving results saved without --output-details: they "
                                  "hold no per-request ttfts/itls (rerun with --output-file X.jsonl --output-details)")
            return "sglang-bench-jsonl"
        if "endpoint_type" in first or "backend" in first or "date" in first or keys & _VLLM_KEYS:
            return _vllm_checked(src, keys)
    if "experiments" in first:
        return "genai-perf-json"
    if isinstance(first.get("benchmarks"), list):
        return "guidellm-json"
    if "records" in first and ("input_config" in first or "aiperf_version" in first):
        raise IngestError(src.display, "an AIPerf summary (profile_export_aiperf.json): it holds percentiles, no "
                          "per-request records; load profile_export.jsonl from the same artifacts folder")
    return None


def _vllm_checked(src: Source, keys: set[str] | None) -> str:
    """``vllm-bench-json`` when the result holds per-request TTFTs, else a clear refusal."""
    has = (lambda k: k in keys) if keys is not None else (lambda k: _contains(src.path, f'"{k}"'.encode()))
    if not has("ttfts"):
        raise IngestError(src.display, "vllm bench result saved without --save-detailed: it holds no "
                          "per-request ttfts/itls (rerun with --save-result --save-detailed)")
    return "vllm-bench-json"


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
    sql.ensure_macros(con)
    query = KINDS[kind]
    params: dict[str, object] = {"path": str(src.path)}
    if "path_name" in sql.get(query).params:
        params["path_name"] = path_name
    what, tool = WHAT[kind]
    with tempfile.TemporaryDirectory(prefix="headroom-records-") as tmp:
        read = src
        try:
            read = _slim(src, kind, Path(tmp))
        except jsonscan.JsonScanError as exc:
            raise IngestError(src.display, f"not a complete {what}: {exc}") from None
        params["path"] = str(read.path)
        if "max_object_size" in sql.get(query).params:
            params["max_object_size"] = json_object_limit(read)
        try:
            sql.materialize(con, query, "stage_records", **params)
        except duckdb.Error as exc:  # a field of the wrong type (a string where numbers are), a broken line
            first = str(exc).splitlines()[0].replace(str(read.path), src.display)
            first = re.sub(r"^[A-Za-z ]+Error: ", "", first)
            raise IngestError(src.display, f"a field of this {what} is not what {tool} writes: {first[:200]}") from None


def _slim(src: Source, kind: str, tmp: Path) -> Source:
    """The file DuckDB reads for ``kind``: a slim copy of the members a share needs for one large JSON
    object (up to gigabytes, mostly texts no share reads), a JSON copy of a YAML report, else ``src``."""
    slim = tmp / "fields.json"
    if kind == "vllm-bench-json":
        found = jsonscan.slim(src.path, VLLM_BENCH_FIELDS | {"itls"}, slim) if not _contains(
            src.path, b'"latencies"') else jsonscan.slim(src.path, VLLM_BENCH_FIELDS, slim)
        missing = sorted({"ttfts", "output_lens"} - found)
        if not {"latencies", "itls"} & found:
            missing.append("latencies or itls")
        if missing:
            raise IngestError(src.display, f"vllm bench result without {', '.join(missing)}: no per-request "
                              "end-to-end times (rerun with --save-result --save-detailed)")
    elif kind == "genai-perf-json":
        jsonscan.without(src.path, GENAI_PERF_REQUEST_DEPTH, GENAI_PERF_UNREAD, slim,
                         max_members=GENAI_PERF_MAX_MEMBERS)
    elif kind == "guidellm-json":
        jsonscan.without(src.path, GUIDELLM_REQUEST_DEPTH, GUIDELLM_UNREAD, slim, max_members=GENAI_PERF_MAX_MEMBERS)
    elif kind == "guidellm-yaml":
        try:
            with src.path.open("rb") as fh:
                doc = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # a safe loader
        except yaml.YAMLError as exc:
            raise IngestError(src.display, f"not a readable GuideLLM YAML report: {str(exc).splitlines()[0]}") from None
        with slim.open("w", encoding="utf-8") as fh:
            json.dump(doc, fh, default=str)
    else:
        return src
    return Source(path=slim, display=src.display, original=src.original)


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


def record_shares(ws: Workspace, dataset_ids: list[int], promises: Sequence[Promise], start: datetime | None,
                  end: datetime | None, include_failed: bool = True):
    """The exact TTFT, TPOT and joint breach shares per path of the records of ``dataset_ids``
    (``records__joint_shares``: one row per path with requests, failed_requests and the three shares)."""
    return sql.df(ws.cursor(), "records__joint_shares", dataset_ids=list(dataset_ids),
                  promises=[p.as_param() for p in promises], start_ts=start or FAR_PAST,
                  end_ts=end or FAR_FUTURE, include_failed=include_failed)


def record_datasets(ws: Workspace, dataset_ids: Sequence[int]) -> list[int]:
    """The datasets among ``dataset_ids`` that hold per-request records."""
    rows = ws.cursor().execute("select distinct dataset_id from request_records where list_contains($ids, dataset_id) "
                               "order by 1", {"ids": [int(i) for i in dataset_ids]}).fetchall()
    return [int(r[0]) for r in rows]


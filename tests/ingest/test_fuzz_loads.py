"""Fuzzing every reader through the public load path: whatever the bytes, ``app.load.load_file``
returns a ``LoadReport`` (``loaded``, ``unchanged`` or ``failed`` with an error naming the file) and
never raises; a failed load leaves nothing in the workspace, a loaded one holds the samples it
reports.

Inputs: arbitrary bytes (some behind the first bytes of each format, so detection passes on to a
reader), and structured mutations of a valid file of every format (the metric formats written from
one small vLLM-like frame, the per-request record formats from the query fixtures): byte edits,
truncation, line edits, numbers and label values swapped for hostile ones, JSON trees with nodes
replaced, gzip around any of them. ``HEADROOM_FUZZ_EXAMPLES`` raises the number of examples per test
(docs/testing.md#fuzzing: the longer run and what it found).
"""

from __future__ import annotations

import atexit
import copy
import gzip
import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import load
from app.store import Workspace
from tests.support import export_formats as ef
from tests.support.paths import FIXTURES

EXAMPLES = int(os.environ.get("HEADROOM_FUZZ_EXAMPLES") or 0)


def fuzz(default: int):
    """Hypothesis settings of a fuzz test: ``default`` examples in CI, ``$HEADROOM_FUZZ_EXAMPLES`` when set."""
    return settings(max_examples=EXAMPLES or default, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def small_frame() -> pd.DataFrame:
    """Two paths on one replica, 4 scrapes at 15 s: a TTFT histogram, a counter, a gauge."""
    rng = random.Random(3)
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    rows = []
    for model in ("chat", "batch"):
        base = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": model}
        counts = [0, 0, 0]
        for i in range(4):
            ts = start + timedelta(seconds=15 * i)
            counts = [c + rng.randint(0, 3) for c in counts]
            cum = [sum(counts[: j + 1]) for j in range(3)]
            for le, c in zip(("0.5", "1.0", "+Inf"), cum, strict=True):
                rows.append(("vllm:time_to_first_token_seconds_bucket", {**base, "le": le}, ts, float(c)))
            rows.append(("vllm:time_to_first_token_seconds_count", base, ts, float(cum[-1])))
            rows.append(("vllm:time_to_first_token_seconds_sum", base, ts, 0.25 * cum[-1]))
            rows.append(("vllm:prompt_tokens_total", base, ts, float(100 * i)))
            rows.append(("vllm:num_requests_running", base, ts, float(rng.randint(0, 9))))
    return pd.DataFrame(rows, columns=["metric", "labels", "ts", "value"])


def _write_seeds(folder: Path) -> dict[str, bytes]:
    frame = small_frame()
    written = {
        "text.prom": ef.write_prometheus_text(frame, folder / "text.prom"),
        "openmetrics.txt": ef.write_openmetrics(frame, folder / "openmetrics.txt"),
        "matrix.json": ef.write_prom_api_matrix(frame, folder / "matrix.json"),
        "vectors.json": ef.write_prom_api_vectors(frame, folder / "vectors.json"),
        "export.jsonl": ef.write_vm_jsonl(frame, folder / "export.jsonl"),
        "dump.txt": ef.write_promtool_dump(frame, folder / "dump.txt"),
        "long.csv": ef.write_csv(frame, folder / "long.csv"),
        "wide-labels.csv": ef.write_csv(frame, folder / "wide-labels.csv", label_columns=True, time_format="ms"),
        "long.parquet": ef.write_parquet(frame, folder / "long.parquet"),
        "server_metrics_export.jsonl": ef.write_aiperf_jsonl(frame, folder / "server_metrics_export.jsonl"),
    }
    seeds = {name: path.read_bytes() for name, path in written.items()}
    for name in ("records__from_vllm_bench.json", "records__from_aiperf.jsonl", "records__from_genai_perf.json",
                 "records__from_simulator.parquet"):
        seeds[name] = (FIXTURES / "queries" / name).read_bytes()
    seeds["snapshot.prom"] = (FIXTURES / "real" / "vllm-v0-opt125m-datadog.prom").read_bytes()
    return seeds


_TMP = Path(tempfile.mkdtemp(prefix="headroom-fuzz-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)  # also when no test of the module runs
SEEDS = _write_seeds(_TMP)
TEXT_SEEDS = sorted(n for n in SEEDS if not n.endswith(".parquet"))
JSON_SEEDS = ["matrix.json", "vectors.json", "records__from_vllm_bench.json", "records__from_genai_perf.json"]
JSONL_SEEDS = ["export.jsonl", "server_metrics_export.jsonl", "records__from_aiperf.jsonl"]


@pytest.fixture(scope="module")
def ws() -> Iterator[Workspace]:
    """One workspace for every example of the module: a failure must leave nothing behind in it."""
    with Workspace(":memory:") as w:
        yield w


_counter = iter(range(10**9))


def check_load(ws: Workspace, data: bytes, name: str) -> load.LoadReport:
    """Load ``data`` as a file called ``name``: the property every fuzz test holds."""
    folder = _TMP / f"case{next(_counter)}"
    folder.mkdir()
    path = folder / name
    path.write_bytes(data)
    before = ws.con.execute("select count(*), (select count(*) from samples), (select count(*) from "
                            "request_records) from datasets").fetchone()
    report = load.load_file(ws, path, display=name)  # must not raise, whatever the bytes
    shutil.rmtree(folder)
    assert report.status in ("loaded", "unchanged", "failed")
    if report.status == "failed":
        assert report.errors and all(e.startswith(name) for e in report.errors), report.errors
        # the safety net of load_file holds, but a reader must not need it
        assert not any(load.INTERNAL_ERROR in e for e in report.errors), report.errors
        after = ws.con.execute("select count(*), (select count(*) from samples), (select count(*) from "
                               "request_records) from datasets").fetchone()
        assert after == before  # nothing kept of a failed load
    elif report.status == "loaded":
        n_samples, n_rows, n_records = ws.con.execute(
            "select n_samples, (select count(*) from samples where dataset_id = $id), "
            "(select count(*) from request_records where dataset_id = $id) from datasets where dataset_id = $id",
            {"id": report.dataset_id}).fetchone()
        assert n_samples == report.samples == (n_records or n_rows)
    return report


# -- arbitrary bytes -------------------------------------------------------------------------------
# the first bytes each detector looks for, so that random tails reach the readers, not only detection
STARTS = [b"", b"PAR1", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", b"{", b"[", b'{"', b"[{", b"# HELP x ",
          b"# TYPE x histogram\n", b'{__name__="', b"timestamp,metric,labels,value\n", b"ts;metric;value\n",
          b'{"metric":{"__name__":"x"},"values":[', b'{"timestamp_ns":', b'{"status":"success","data":',
          b'{"metadata":{},"metrics":{"time_to_first_token":', b'{"num_prompts":1,"backend":"vllm","ttfts":',
          b'{"experiments":[{"requests":[{"response_timestamps":', b"x_bucket{le=\"", b"\xef\xbb\xbf"]


@fuzz(60)
@given(start=st.sampled_from(STARTS), tail=st.binary(max_size=600))
def test_arbitrary_bytes_never_raise(ws: Workspace, start: bytes, tail: bytes) -> None:
    check_load(ws, start + tail, "junk.bin")


# -- mutations of valid files ----------------------------------------------------------------------
HOSTILE = ["", "NaN", "-Inf", "+Inf", "inf", "-1", "-0", "1e400", "-1e400", "1e-400", "99999999999999999999999",
           "18446744073709551616", "0x10", "1_000", "١٢", "true", "null", "[]", "{}", '"', "\\", "\\n", "\x00",
           "\r", "\u2028", "\ufeff", "=HYPERLINK(\"x\")", "'; drop table samples; --", "<script>", "{{", "}",
           ",", ";", "\t", "253402300800", "253402300800000", "-62135596800", "1e18", "9" * 40, "ğ",
           "\U0001f600", "%s%n", "1,5", "NaN\"}", "le", "+Inf\"", "_bucket", "# EOF"]
_NUMBER = r"-?[0-9][0-9eE.+-]*"


def _mutate_bytes(rng: random.Random, data: bytes, op: str) -> bytes:
    n = len(data)
    i = rng.randrange(n + 1)
    j = min(n, i + rng.randrange(1, 64))
    if op == "truncate":
        return data[:i]
    if op == "delete":
        return data[:i] + data[j:]
    if op == "duplicate":
        return data[:j] + data[i:j] + data[j:]
    if op == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    if op == "insert":
        return data[:i] + rng.choice(HOSTILE).encode() + data[i:]
    raise AssertionError(op)


def _mutate_text(rng: random.Random, text: str, op: str) -> str:
    import re

    lines = text.splitlines(keepends=True)
    if op == "drop_line" and lines:
        del lines[rng.randrange(len(lines))]
    elif op == "dup_line" and lines:
        k = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[k])
    elif op == "swap_lines" and len(lines) > 1:
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
    elif op == "number":  # one number of the file becomes a hostile token
        matches = list(re.finditer(_NUMBER, text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + rng.choice(HOSTILE) + text[m.end():]
    elif op == "quoted":  # one quoted string (label value, JSON key or value) becomes hostile
        matches = list(re.finditer(r'"[^"\n]*"', text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + json.dumps(rng.choice(HOSTILE)) + text[m.end():]
    elif op == "crlf":
        return text.replace("\n", "\r\n")
    elif op == "long_value":
        matches = list(re.finditer(r'"[^"\n]*"', text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + '"' + "x" * rng.choice([1000, 70000]) + '"' + text[m.end():]
    return "".join(lines)


def _json_nodes(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _json_nodes(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:20]):
            yield from _json_nodes(v, (*path, i))


JSON_VALUES = [None, True, 0, -1, 1.5, 1e308, -1e308, 2**70, "", "NaN", "+Inf", "1.5", "x", [], {}, [[]], [None],
               {"": None}, ["1", "2"], [1699999200, "1"], [[1699999200, "NaN"]], {"__name__": "vllm:x"},
               "2026-11-29T10:00:00Z", 1764410400000, "\x00", "=1+1"]


def _mutate_json(rng: random.Random, text: str) -> str:
    doc = json.loads(text)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _json_nodes(doc) if p]
        if not paths:
            return json.dumps(copy.deepcopy(rng.choice(JSON_VALUES)))
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(JSON_VALUES))  # a shared one would make a cycle
    return json.dumps(doc)


BYTE_OPS = ["truncate", "delete", "duplicate", "flip", "insert"]
TEXT_OPS = ["drop_line", "dup_line", "swap_lines", "number", "quoted", "crlf", "long_value"]


@pytest.mark.slow
@fuzz(70)
@given(name=st.sampled_from(sorted(SEEDS)), ops=st.lists(st.sampled_from(BYTE_OPS + TEXT_OPS), min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1), compress=st.booleans())
def test_mutated_files_never_raise(ws: Workspace, name: str, ops: list[str], seed: int, compress: bool) -> None:
    rng = random.Random(seed)
    data = SEEDS[name]
    for op in ops:
        if op in BYTE_OPS or name.endswith(".parquet"):
            data = _mutate_bytes(rng, data, op if op in BYTE_OPS else "flip")
        else:
            data = _mutate_text(rng, data.decode("utf-8", "replace"), op).encode()
    if compress:
        data = gzip.compress(data)
    check_load(ws, data, name + (".gz" if compress else ""))


@fuzz(50)
@given(name=st.sampled_from(JSON_SEEDS + JSONL_SEEDS), seed=st.integers(0, 2**32 - 1))
def test_json_trees_with_nodes_replaced_never_raise(ws: Workspace, name: str, seed: int) -> None:
    rng = random.Random(seed)
    text = SEEDS[name].decode()
    if name in JSONL_SEEDS:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        k = rng.randrange(len(lines))
        lines[k] = _mutate_json(rng, lines[k])
        text = "\n".join(lines) + "\n"
    else:
        text = _mutate_json(rng, text)
    check_load(ws, text.encode(), name)


def test_every_seed_loads(ws: Workspace) -> None:
    """The mutations start from valid files: each seed loads as the format it is."""
    for name, data in SEEDS.items():
        report = check_load(ws, data, name)
        assert report.status in ("loaded", "unchanged"), (name, report.errors)

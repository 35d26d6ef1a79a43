"""The bad-input corpus: files a user's scripts may well save, each with the outcome Headroom owes.

``cases()`` returns one ``Case`` per kind of bad input: a file name, its bytes (or a writer, for the
large ones), and the expected outcome: ``status`` (``loaded`` or ``failed``) and a regular expression
that the error (failed) or one of the notes (loaded) must match. A failed file's error always starts
with its name; where a case has a line or a series, the pattern names it. ``tests/ingest/test_bad_inputs.py``
loads each beside a good file through the CLI.

Everything is generated here (nothing binary is checked in), so a case is read in one place.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import genai_perf, vllm_bench

# 2025-11-29T10:00:00Z: an hour boundary, so the 5-minute windows are easy to read
T_S = 1_764_410_400
T_MS = T_S * 1000
TTFT = "vllm:time_to_first_token_seconds"
RUNNING = "vllm:num_requests_running"
HIST_HEAD = f"# HELP {TTFT} Histogram of time to first token in seconds.\n# TYPE {TTFT} histogram\n"
GAUGE_HEAD = f"# HELP {RUNNING} Number of requests running.\n# TYPE {RUNNING} gauge\n"
LABELS = 'engine="0",model_name="m"'


@dataclass(frozen=True)
class Case:
    """One kind of bad input and the outcome it must get."""

    name: str
    filename: str
    content: bytes | Callable[[Path], None]  # the bytes, or a function writing the file at the path
    status: str  # loaded | failed
    pattern: str | None  # regex the error (failed) or one of the notes (loaded) must match; None: no check
    slow: bool = False

    def write(self, directory: Path) -> Path:
        path = directory / self.filename
        if callable(self.content):
            self.content(path)
        else:
            path.write_bytes(self.content)
        return path


def hist(ts: int | None, counts: tuple[float, float, float], count: float | None = None, total: float | str = 1.5,
         labels: str = LABELS, les: tuple[str, str, str] = ("0.1", "0.5", "+Inf"), family: str = TTFT) -> str:
    """One scrape of a histogram (buckets, ``_count``, ``_sum``), timestamps in ms (or none)."""
    t = "" if ts is None else f" {ts}"
    lines = [f'{family}_bucket{{{labels},le="{le}"}} {c}{t}' for le, c in zip(les, counts, strict=True)]
    lines.append(f"{family}_count{{{labels}}} {counts[-1] if count is None else count}{t}")
    lines.append(f"{family}_sum{{{labels}}} {total}{t}")
    return "\n".join(lines) + "\n"


def gauge(ts: int | None, value: float | str, labels: str = LABELS, name: str = RUNNING) -> str:
    t = "" if ts is None else f" {ts}"
    return f"{name}{{{labels}}} {value}{t}\n"


def scrapes(n: int = 3, step_ms: int = 15_000, t0: int = T_MS) -> str:
    """A good timed exposition of ``n`` scrapes: a TTFT histogram and a gauge."""
    body = HIST_HEAD
    for i in range(n):
        body += hist(t0 + i * step_ms, (i, 2 * i, 3 * i), total=0.4 * i)
    body += GAUGE_HEAD + "".join(gauge(t0 + i * step_ms, i) for i in range(n))
    return body


GOOD = scrapes(4)


def good_file(directory: Path) -> Path:
    """The good file every case is loaded beside (its own scrape times, so its cube is distinct)."""
    path = directory / "good.prom"
    path.write_text(scrapes(4, t0=T_MS + 3_600_000))
    return path


def _api(result: list[dict], result_type: str = "matrix") -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": result_type, "result": result}}).encode()


def _api_series(name: str, values: list[list], **labels: str) -> dict:
    return {"metric": {"__name__": name, **labels}, "values": values}


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _corrupt_deflate() -> bytes:
    """A gzip member whose header is fine but whose deflate stream is not (zlib.error, not OSError)."""
    data = bytearray(_gz(GOOD.encode() * 50))
    for i in range(40, 90):
        data[i] ^= 0x5A
    return bytes(data)


def _gzip_bomb(path: Path) -> None:
    """A few MB of gzip that decompress to far more than the test's limit (the test sets it to 4 MiB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (1 << 20)
    with path.open("wb") as fh:
        for _ in range(64):  # 64 MiB of newlines, ~64 KB compressed
            fh.write(comp.compress(chunk))
        fh.write(comp.flush())


def _cardinality(path: Path) -> None:
    """10^6 distinct series of one gauge, one sample each."""
    with path.open("w") as fh:
        fh.write(GAUGE_HEAD)
        block = io.StringIO()
        for i in range(1_000_000):
            block.write(f'{RUNNING}{{engine="0",model_name="m",pod="p{i}"}} 1 {T_MS}\n')
            if i % 100_000 == 99_999:
                fh.write(block.getvalue())
                block = io.StringIO()
        fh.write(block.getvalue())


def _long_label(path: Path) -> None:
    path.write_text(GAUGE_HEAD + gauge(T_MS, 1, labels=f'model_name="{"x" * (1 << 20)}"')
                    + gauge(T_MS + 15_000, 2, labels=f'model_name="{"x" * (1 << 20)}"'))


def _bench_cut(path: Path, after: bytes, extra: int) -> None:
    """A real-shaped ``vllm bench serve --save-detailed`` result of 300 requests, cut ``extra`` bytes
    after ``after`` (a copy interrupted mid-write)."""
    vllm_bench.write(path, 300)
    data = path.read_bytes()
    path.write_bytes(data[:data.index(after) + len(after) + extra])


def _genai_cut(path: Path) -> None:
    """A GenAI-Perf export of 50 requests cut inside a streamed response."""
    genai_perf.write(path, 50)
    data = path.read_bytes()
    path.write_bytes(data[:data.index(b'"response_outputs"', len(data) // 2) + 40])


def _junk(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n))


def _text_cases() -> list[Case]:
    t1, t2 = T_MS, T_MS + 15_000
    c: list[Case] = []
    add = c.append
    # truncated files
    add(Case("truncated_mid_line", "cut.prom", (GOOD + f'{RUNNING}{{engine="0",model_na').encode(), "failed",
             r"^cut\.prom: line 29: .*(unterminated|not closed)"))
    add(Case("truncated_after_name", "cut2.prom", (GOOD + f"{RUNNING}").encode(), "failed",
             r"^cut2\.prom: line 29: .*no value"))
    add(Case("truncated_mid_histogram_snapshot", "cut3.prom",
             (GAUGE_HEAD + gauge(None, 1) + HIST_HEAD + "\n".join(hist(None, (1, 2, 3)).splitlines()[:2])
              + "\n").encode(),
             "loaded", r"no \+Inf bucket and no _count.*dropped"))
    add(Case("truncated_mid_histogram_timed", "cut4.prom",
             (HIST_HEAD + hist(t1, (1, 2, 3)) + hist(t2, (2, 9, 9)) + "\n".join(
                 hist(t2 + 15_000, (5, 12, 12)).splitlines()[:1]) + "\n").encode(),
             "loaded", r'repaired.*_bucket\{engine="0",le="\+Inf",model_name="m"\} rose 6'))
    # binary junk
    add(Case("binary_junk", "junk.bin", _junk(1, 4096), "failed", r"^junk\.bin: "))
    add(Case("binary_junk_prom_name", "junk.prom", b"\x00\x01\x02\x89PNG\r\n\x1a\n" + _junk(2, 2048), "failed",
             r"^junk\.prom: "))
    add(Case("nul_bytes_in_text", "nul.prom", (GOOD[:200] + "\x00\x00\x00" + GOOD[200:]).encode(), "failed",
             r"^nul\.prom: line \d+: "))
    add(Case("utf16_text", "utf16.prom", GOOD.encode("utf-16"), "loaded",
             r"^the file is UTF-16 text \(with a byte-order mark\).*decoded to UTF-8"))
    add(Case("utf16_le_no_bom", "utf16le.prom", GOOD.encode("utf-16-le"), "loaded",
             r"^the file is UTF-16 text \(little-endian, no byte-order mark\)"))
    add(Case("utf16_be_no_bom", "utf16be.prom", GOOD.encode("utf-16-be"), "loaded",
             r"^the file is UTF-16 text \(big-endian, no byte-order mark\)"))
    add(Case("utf16_gzip", "utf16.prom.gz", _gz(GOOD.encode("utf-16")), "loaded", r"^the file is UTF-16 text"))
    add(Case("utf16_damaged", "utf16bad.prom", GOOD.encode("utf-16")[:600] + b"\x00\xdc" + GOOD.encode("utf-16-le")[600:],
             "failed", r"^utf16bad\.prom: looks like UTF-16 text \(with a byte-order mark\) but does not decode at "
             r"byte 600 \(illegal encoding: a damaged or truncated file\?\)$"))
    add(Case("latin1_label", "latin1.prom", (GAUGE_HEAD + gauge(t1, 1, labels='model_name="caf\xe9"')).encode("latin-1"),
             "failed", r"^latin1\.prom: line 3: not UTF-8"))
    # counter semantics
    add(Case("negative_bucket", "negbucket.prom", (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (-3, 4, 4))).encode(),
             "loaded", r'dropped 1 sample.*negative.*_bucket\{engine="0",le="0\.1",model_name="m"\} = -3 .*line 8'))
    add(Case("nan_sum", "nansum.prom", (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4), total="NaN")).encode(),
             "loaded", r"kept 1 sample.*NaN.*_sum.*line 12"))
    add(Case("inf_count", "infcount.prom", (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4), count="+Inf")).encode(),
             "loaded", r"kept 1 sample.*\+?[Ii]nf.*_count.*line 11"))
    add(Case("negative_counter", "negcounter.prom", (
        "# TYPE vllm:prompt_tokens counter\n" f"vllm:prompt_tokens_total{{{LABELS}}} 5 {t1}\n"
        f"vllm:prompt_tokens_total{{{LABELS}}} -1 {t2}\n").encode(), "loaded", r"dropped 1 sample.*-1.*line 3"))
    add(Case("nan_counter", "nancounter.prom", (
        "# TYPE vllm:prompt_tokens counter\n" f"vllm:prompt_tokens_total{{{LABELS}}} 5 {t1}\n"
        f"vllm:prompt_tokens_total{{{LABELS}}} NaN {t2}\n").encode(), "loaded", r"kept 1 sample.*NaN.*line 3"))
    add(Case("neg_inf_bucket", "neginf.prom", (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (2, "-Inf", 4))).encode(),
             "loaded", r'kept 1 sample.*infinite.*le="0\.5".* = -Inf .*line 9'))
    add(Case("nan_gauge", "nangauge.prom", (GAUGE_HEAD + gauge(t1, 1) + gauge(t2, "NaN")).encode(), "loaded",
             r"kept 1 sample.*NaN.*line 4"))
    # histogram shape
    no_inf = HIST_HEAD + "".join(ln + "\n" for ln in (hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4))).splitlines()
                                 if "+Inf" not in ln)
    add(Case("missing_inf_bucket", "noinf.prom", no_inf.encode(), "loaded",
             r"no \+Inf bucket.*_count.*(used|repaired)"))
    no_inf_no_count = "".join(ln + "\n" for ln in no_inf.splitlines() if "_count" not in ln)
    add(Case("missing_inf_and_count", "noinfcount.prom", no_inf_no_count.encode(), "loaded",
             r"no \+Inf bucket and no _count.*dropped"))
    add(Case("count_differs_from_inf", "countdiff.prom",
             (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4), count=7)).encode(), "loaded",
             r"_count.*differs from.*\+Inf.*line 11"))
    shuffled = HIST_HEAD + "".join("\n".join(reversed(hist(t, (i, 2 * i, 3 * i)).splitlines())) + "\n"
                                   for i, t in enumerate((t1, t2)))
    add(Case("buckets_out_of_order_in_file", "order.prom", shuffled.encode(), "loaded", None))
    add(Case("non_monotone_buckets", "nonmono.prom",
             (HIST_HEAD + hist(t2, (1, 2, 2)) + hist(t2 + 15_000, (6, 4, 4))).encode(),
             "loaded", r"repaired.*le=\"0\.5\""))
    add(Case("gauge_typed_histogram", "gaugehist.prom",
             (HIST_HEAD.replace("histogram\n", "gauge\n") + hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4))).encode(),
             "loaded", r"TYPE.*gauge.*_bucket.*histogram"))
    add(Case("histogram_typed_bare_sample", "barehist.prom",
             (HIST_HEAD + f"{TTFT}{{{LABELS}}} 3 {t1}\n" + hist(t2, (2, 4, 4))).encode(), "loaded",
             r"TYPE.*histogram.*no _bucket"))
    add(Case("type_declared_twice", "type2.prom",
             (GAUGE_HEAD + f"# TYPE {RUNNING} counter\n" + gauge(t1, 1)).encode(), "failed",
             r"^type2\.prom: line 3: .*second TYPE"))
    add(Case("help_type_mismatch", "helptype.prom",
             (f"# HELP {RUNNING}_x Number of requests.\n# TYPE {RUNNING} gauge\n" + gauge(t1, 1) + gauge(t2, 2)).encode(),
             "loaded", None))
    # series and time
    add(Case("duplicate_series_same_value", "dupsame.prom", (GAUGE_HEAD + gauge(t1, 1) + gauge(t1, 1) + gauge(t2, 2)).encode(),
             "loaded", r"repeat.*line[s]? 3.*4"))
    add(Case("two_values_one_instant", "dup.prom", (GAUGE_HEAD + gauge(t1, 1) + gauge(t1, 3) + gauge(t2, 2)).encode(),
             "loaded", r"2 values at 2025-11-29T10:00:00Z.*lines 3 and 4.*highest \(3\) is kept"))
    add(Case("timestamps_backwards", "backwards.prom",
             (HIST_HEAD + hist(t2 + 15_000, (3, 6, 9)) + hist(t2, (2, 4, 6)) + hist(t1, (1, 2, 3))).encode(),
             "loaded", None))
    add(Case("counter_reset", "reset.prom", (HIST_HEAD + hist(t1, (5, 6, 9)) + hist(t2, (1, 1, 1))).encode(),
             "loaded", None))
    add(Case("concatenated_snapshots_without_times", "loop.prom", (GAUGE_HEAD + gauge(None, 1)) .encode() * 2,
             "failed", r"^loop\.prom: line 6: a second snapshot starts here"))
    add(Case("ms_where_s_expected", "om_ms.txt",
             (HIST_HEAD + hist(t1, (1, 2, 2)) + hist(t2, (2, 4, 4)) + "# EOF\n").encode(), "loaded",
             r"OpenMetrics timestamps must be seconds but these look like milliseconds"))
    add(Case("s_where_ms_expected", "s.prom", (GAUGE_HEAD + gauge(T_S, 1) + gauge(T_S + 15, 2)).encode(), "loaded",
             r"must be milliseconds but these look like seconds"))
    future = T_MS + 110 * 365 * 86_400_000
    add(Case("future_timestamps", "future.prom", (GAUGE_HEAD + gauge(future, 1) + gauge(future + 15_000, 2)).encode(),
             "loaded", r"2 sample.*in the future.*line 3"))
    add(Case("before_2000", "old.prom", (GAUGE_HEAD + gauge(900_000_000_000, 1) + gauge(900_000_015_000, 2)).encode(),
             "loaded", r"2 sample.*before 2000.*line 3"))
    add(Case("one_sample_beyond_9999", "y10000.prom",
             (GAUGE_HEAD + gauge(t1, 1) + gauge(253_402_300_800_000, 5) + gauge(t2, 2)).encode(), "loaded",
             r"kept 1 sample.*years 1 to 9999.*line 4"))
    add(Case("every_sample_beyond_9999", "y10000all.prom",
             (GAUGE_HEAD + gauge(253_402_300_800_000, 5)).encode(), "failed",
             r"^y10000all\.prom: no samples left.*line 3"))
    add(Case("mixed_s_and_ms", "mixed.prom", (GAUGE_HEAD + gauge(t1, 1) + gauge(t1 + 15_000, 2) + gauge(T_S + 30, 3)).encode(),
             "loaded", r"before 2000.*line 5"))
    # labels
    add(Case("escaped_label_values", "escaped.prom",
             (GAUGE_HEAD + gauge(t1, 1, labels=r'model_name="a\"b\\c\nd"') + gauge(t2, 2, labels=r'model_name="a\"b\\c\nd"')).encode(),
             "loaded", None))
    add(Case("long_label_1mb", "long.prom", _long_label, "loaded", None))
    add(Case("control_char_label", "ctrl.prom", (GAUGE_HEAD + gauge(t1, 1, labels='model_name="a\x01b"')).encode(),
             "failed", r"^ctrl\.prom: line 3: a control character"))
    add(Case("bell_and_tab_in_label", "bell.prom", (GAUGE_HEAD + gauge(t1, 1, labels='model_name="a\x07\tb"')
                                                    + gauge(t2, 2, labels='model_name="a\x07\tb"')).encode(),
             "loaded", None))
    add(Case("lone_cr", "cr.prom", (GAUGE_HEAD + gauge(t1, 1) + gauge(t2, 2)).replace("\n", "\r").encode(), "failed",
             r"^cr\.prom: line 1: a carriage return"))
    add(Case("cardinality_1e6_series", "many.prom", _cardinality, "loaded", None, slow=True))
    # whole-file shapes
    sglang = ("# TYPE sglang:num_running_reqs gauge\n"
              f'sglang:num_running_reqs{{model_name="s"}} 3 {t1}\nsglang:num_running_reqs{{model_name="s"}} 4 {t2}\n')
    add(Case("several_engines", "engines.prom", (GOOD + sglang).encode(), "loaded", r"also recognised: sglang"))
    add(Case("empty_file", "empty.prom", b"", "failed", r"^empty\.prom: the file is empty"))
    add(Case("whitespace_only", "blank.prom", b"\n \n\t\n", "failed", r"^blank\.prom: (the file is empty|unrecognised)"))
    add(Case("crlf_line_ends", "crlf.prom", GOOD.replace("\n", "\r\n").encode(), "loaded", None))
    add(Case("bom_text", "bom.prom", b"\xef\xbb\xbf" + GOOD.encode(), "loaded", None))
    add(Case("metadata_only", "meta.prom", (HIST_HEAD + GAUGE_HEAD).encode(), "loaded",
             r"only metadata.*2 families.*no samples"))
    add(Case("comments_only", "comments.prom", b"# just a comment\n# another\n", "failed", r"^comments\.prom: "))
    add(Case("abbreviated_paste", "paste.prom", (GOOD + "...\n").encode(), "loaded", r"skipped 1 line.*`\.\.\.`"))
    add(Case("corrupt_deflate", "corrupt.prom.gz", _corrupt_deflate(), "failed",
             r"^corrupt\.prom\.gz: gzip data is corrupt or truncated"))
    add(Case("truncated_gzip", "cut.prom.gz", _gz(GOOD.encode() * 20)[:300], "failed",
             r"^cut\.prom\.gz: gzip data is corrupt or truncated"))
    add(Case("gzip_bomb", "bomb.prom.gz", _gzip_bomb, "failed",
             r"^bomb\.prom\.gz: decompresses to more than 4 MiB.*HEADROOM_MAX_DECOMPRESSED"))
    add(Case("gzip_of_junk", "junk.gz", _gz(_junk(3, 4096)), "failed", r"^junk\.gz: "))
    return c


def _json_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    series = _api_series(RUNNING, [[T_S, "1"], [T_S + 15, "2"]], model_name="m")
    add(Case("truncated_mid_json", "cut.json", _api([series])[:-25], "failed",
             r"^cut\.json: not a Prometheus API JSON file: malformed JSON at byte \d+: unexpected end of data "
             r"\(the file ends mid-object: truncated\?\)$"))
    add(Case("error_envelope", "error.json",
             json.dumps({"status": "error", "errorType": "bad_data", "error": "1:5: parse error"}).encode(), "failed",
             r"^error\.json: the server returned an error: bad_data: 1:5: parse error"))
    add(Case("scalar_result", "scalar.json",
             json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [T_S, "1"]}}).encode(),
             "failed", r"^scalar\.json: a scalar result holds no series"))
    add(Case("empty_result", "emptyresult.json", _api([]), "failed", r"^emptyresult\.json: .*no samples"))
    add(Case("no_metric_name", "noname.json", _api([{"metric": {"job": "vllm"}, "values": [[T_S, "1"]]}]), "failed",
             r"^noname\.json: series 1 .*no metric name"))
    add(Case("values_not_pairs", "pairs.json", _api([_api_series(RUNNING, [[T_S, "1", 3]])]), "failed",
             r"^pairs\.json: series 1 .*not a \[unix_time, \"value\"\] pair"))
    add(Case("value_not_a_number", "word.json", _api([_api_series(RUNNING, [[T_S, "lots"]])]), "failed",
             r"^word\.json: series 1 .*pair of numbers"))
    add(Case("json_array_of_numbers", "numbers.json", b"[1, 2, 3]\n", "failed", r"^numbers\.json: "))
    add(Case("json_unrelated_object", "other.json", b'{"hello": "world"}\n', "failed", r"^other\.json: "))
    add(Case("api_milliseconds", "ms.json", _api([_api_series(RUNNING, [[T_MS, "1"], [T_MS + 15_000, "2"]],
                                                              model_name="m")]), "loaded",
             r"milliseconds.*read as ms"))
    add(Case("api_counter_nan", "apinan.json", _api([_api_series("vllm:prompt_tokens_total",
                                                                 [[T_S, "5"], [T_S + 15, "NaN"]], model_name="m")]),
             "loaded", r"kept 1 sample.*NaN.*series 1"))
    add(Case("api_one_sample_beyond_9999", "apifar.json",
             _api([_api_series(RUNNING, [[T_S, "1"], [T_S + 15, "2"]], model_name="m"),
                   _api_series(RUNNING, [[253_402_300_800, "1"]], model_name="n")]), "loaded",
             r"kept 1 sample.*years 1 to 9999.*series 2"))
    add(Case("api_native_histogram", "native.json", _api([{
        "metric": {"__name__": TTFT, "model_name": "m"}, "values": [[T_S, "1"]],
        "histograms": [[T_S, {"count": "1", "sum": "0.1", "buckets": [[0, "0.1", "0.2", "1"]]}]]}]), "loaded",
             r"skipped native histogram"))
    add(Case("bom_json", "bom.json", b"\xef\xbb\xbf" + _api([series]), "loaded", None))
    vm_line = {"metric": {"__name__": RUNNING, "model_name": "m"}, "values": [1, 2], "timestamps": [T_MS, T_MS + 15_000]}
    add(Case("vm_truncated_line", "cut.jsonl", (json.dumps(vm_line) + "\n" + json.dumps(vm_line)[:40]).encode(),
             "failed", r"^cut\.jsonl: line 2: .*truncated"))
    vm_s = dict(vm_line, timestamps=[T_S, T_S + 15])
    add(Case("vm_seconds", "vm_s.jsonl", (json.dumps(vm_s) + "\n").encode(), "loaded",
             r"must be milliseconds but these look like seconds.*read as s"))
    vm_len = dict(vm_line, values=[1])
    add(Case("vm_lengths_differ", "vm_len.jsonl", (json.dumps(vm_line) + "\n" + json.dumps(vm_len) + "\n").encode(),
             "failed", r"^vm_len\.jsonl: line 2: "))
    aiperf = {"endpoint_url": "http://x/metrics", "timestamp_ns": T_S * 10**9, "metrics": {RUNNING: [{"labels": None, "value": 1}]}}
    add(Case("aiperf_truncated", "server_metrics_export.jsonl", (json.dumps(aiperf) + "\n" + json.dumps(aiperf)[:30]).encode(),
             "failed", r"^server_metrics_export\.jsonl: line 2: .*truncated"))
    add(Case("vllm_bench_truncated", "bench.json", b'{"date": "20261128-101500", "backend": "vllm", "ttfts": [0.1, 0.2',
             "failed", r"^bench\.json: not a complete vllm bench result: the JSON ends at byte 65, with 2 bracket\(s\) "
             r"still open: the file is truncated$"))
    add(Case("vllm_bench_truncated_in_itls", "vllm-bench-cut.json", lambda path: _bench_cut(path, b'"itls": [[', 2000),
             "failed", r"^vllm-bench-cut\.json: not a complete vllm bench result: the JSON ends at byte \d+, with 3 "
             r"bracket\(s\) still open: the file is truncated$"))
    add(Case("vllm_bench_truncated_in_text", "vllm-bench-cut2.json",
             lambda path: _bench_cut(path, b'"generated_texts": ["', 10), "failed",
             r"^vllm-bench-cut2\.json: not a complete vllm bench result: the JSON ends at byte \d+, inside a string: "
             r"the file is truncated$"))
    add(Case("genai_perf_truncated", "profile_export.json", lambda path: _genai_cut(path), "failed",
             r"^profile_export\.json: not a complete GenAI-Perf profile export: the JSON ends at byte \d+, inside a "
             r"string: the file is truncated$"))
    add(Case("vllm_bench_wrong_type", "vllm-bench-type.json",
             json.dumps({"date": "20261128-101500", "backend": "vllm", "num_prompts": 2, "ttfts": ["fast", "slow"],
                         "latencies": [1, 2], "output_lens": [3, 4]}).encode(), "failed",
             r"^vllm-bench-type\.json: a field of this vllm bench result is not what vLLM writes: .*Failed to cast value to "
             r"numerical: \"slow\""))
    return c


def _csv_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    rows = [f"2025-11-29T10:00:{s:02d}Z,{RUNNING},m,{v}" for s, v in ((0, 1.5), (15, 2.5))]
    good_csv = "timestamp,metric,model_name,value\n" + "\n".join(rows) + "\n"
    excel = good_csv.replace(",", ";").replace("1.5", "1,5").replace("2.5", "2,5").replace("\n", "\r\n")
    add(Case("excel_semicolon_decimal_comma", "excel.csv", excel.encode(), "loaded", r"decimal comma"))
    add(Case("excel_sep_line", "excel_sep.csv", ("sep=;\r\n" + excel).encode(), "loaded", r"decimal comma"))
    add(Case("excel_unicode_text", "excel_unicode.txt", good_csv.replace(",", "\t").replace("\n", "\r\n").encode("utf-16"),
             "loaded", r"^the file is UTF-16 text \(with a byte-order mark\)"))  # Excel's "Unicode Text" save
    add(Case("excel_utf8_bom", "excel_bom.csv", b"\xef\xbb\xbf" + good_csv.replace("\n", "\r\n").encode(), "loaded", None))
    add(Case("csv_missing_time_column", "notime.csv", b"metric,value\nx,1\n", "failed",
             r"^notime\.csv: .*(no time|unrecognised)"))
    add(Case("csv_bad_value", "badvalue.csv", (good_csv + f"2025-11-29T10:00:30Z,{RUNNING},m,lots\n").encode(), "failed",
             r"^badvalue\.csv: line 4: "))
    add(Case("csv_bad_time", "badtime.csv", (good_csv + f"yesterday,{RUNNING},m,3\n").encode(), "failed",
             r"^badtime\.csv: line 4: "))
    add(Case("csv_header_only", "header.csv", b"timestamp,metric,labels,value\n", "failed", r"^header\.csv: .*no samples"))
    add(Case("csv_bad_labels_json", "labels.csv",
             f'timestamp,metric,labels,value\n2025-11-29T10:00:00Z,{RUNNING},"{{not json",1\n'.encode(), "failed",
             r"^labels\.csv: line 2: "))
    add(Case("csv_negative_counter", "negcsv.csv",
             (b"timestamp,metric,model_name,value\n2025-11-29T10:00:00Z,vllm:prompt_tokens_total,m,5\n"
              b"2025-11-29T10:00:15Z,vllm:prompt_tokens_total,m,-2\n"), "loaded", r"dropped 1 sample.*-2.*line 3"))
    add(Case("parquet_truncated", "cut.parquet", b"PAR1" + _junk(4, 200), "failed", r"^cut\.parquet: "))
    return c


def cases() -> list[Case]:
    """Every case of the corpus, in a stable order; names are unique."""
    out = _text_cases() + _json_cases() + _csv_cases()
    assert len({case.name for case in out}) == len(out)
    return out


__all__ = ["GOOD", "Case", "cases", "good_file"]

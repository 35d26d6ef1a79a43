"""Write a frame of samples in every export format Headroom reads (test support; not shipped in ``app``).

The frame has columns ``metric`` (sample name as exposed, e.g. ``vllm:prompt_tokens_total``,
``vllm:time_to_first_token_seconds_bucket``), ``labels`` (dict of label name → value, ``le``
included), ``ts`` (datetime, UTC; naive means UTC) and ``value`` (float).

Family types are inferred from the names unless ``types`` ({family: type}) is given: a ``_bucket``
series with ``le`` makes its base a histogram (with its ``_count``/``_sum``), ``_total`` a counter,
anything else a gauge. Times are written exactly at microsecond precision where the format allows
(milliseconds where it only has those: text 0.0.4, promtool, VictoriaMetrics).

Writers: ``write_prometheus_text`` (0.0.4, ms timestamps or none), ``write_openmetrics`` (seconds,
``# EOF``), ``write_prom_api_matrix`` (query_range response), ``write_prom_api_vectors`` (JSON array,
one instant-query response per timestamp), ``write_vm_jsonl``, ``write_promtool_dump``, ``write_csv``
(labels JSON or one column per label), ``write_parquet`` (labels as MAP or columns),
``write_aiperf_jsonl``, ``write_snapshot_dir`` (one 0.0.4 file per scrape, named by its time, no
sample timestamps) and ``gzip_file``.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

_SUFFIX_RE = re.compile(r"^(.*)_(bucket|count|sum|total|created)$")


# -- normalising the frame -----------------------------------------------------------------------
def _epoch_us(ts: Any) -> int:
    """Microseconds since the epoch of a datetime (naive = UTC) or pandas Timestamp."""
    stamp = pd.Timestamp(ts)
    if stamp.tzinfo is None:
        stamp = stamp.tz_localize("UTC")
    return int(stamp.value // 1000)


def _rows(frame: pd.DataFrame) -> list[tuple[str, dict[str, str], int, float]]:
    """(metric, labels, epoch µs, value) per sample, in frame order."""
    return [
        (str(m), {str(k): str(v) for k, v in (lab or {}).items()}, _epoch_us(t), float(v))
        for m, lab, t, v in zip(frame["metric"], frame["labels"], frame["ts"], frame["value"], strict=True)
    ]


def family_types(frame: pd.DataFrame, types: dict[str, str] | None = None) -> dict[str, str]:
    """Family name → type, inferred from sample names (explicit ``types`` win)."""
    out: dict[str, str] = {}
    for metric, labels in zip(frame["metric"], frame["labels"], strict=True):
        m = _SUFFIX_RE.match(metric)
        if m and m.group(2) == "bucket" and "le" in (labels or {}):
            out[m.group(1)] = "histogram"
    for metric in sorted(set(frame["metric"])):
        m = _SUFFIX_RE.match(metric)
        if m and m.group(1) in out:  # a histogram's _bucket/_count/_sum
            continue
        if metric.endswith("_total"):
            out.setdefault(metric[: -len("_total")], "counter")
        else:
            out.setdefault(metric, "gauge")
    out.update(types or {})
    return out


def _family_of(metric: str, types: dict[str, str]) -> tuple[str, str]:
    """(family, suffix) of a sample name given the family types."""
    m = _SUFFIX_RE.match(metric)
    if m and types.get(m.group(1)) in ("histogram", "summary", "counter"):
        return m.group(1), m.group(2)
    return metric, ""


# -- number and label formatting -----------------------------------------------------------------
def format_value(v: float) -> str:
    """A float as the Python exposition writes it (``3.0``, ``NaN``, ``+Inf``), exact (shortest repr)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def go_g(v: float) -> str:
    """A float as Go's ``%g`` prints it (shortest digits; exponent form below 1e-4 or from 1e6), as
    ``promtool tsdb dump`` writes values: ``612``, ``0.25``, ``1e+06``, ``1.234567e+06``, ``NaN``."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    d = Decimal(repr(v)).normalize()
    sign, digits, exp = d.as_tuple()
    text = "".join(map(str, digits))
    sci = len(digits) + int(exp) - 1
    if sci < -4 or sci >= 6:
        mant = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mant}e{'-' if sci < 0 else '+'}{abs(sci):02d}"
    else:
        out = format(abs(d), "f")
    return ("-" if sign else "") + out


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labelset(labels: dict[str, str], sep: str = ",") -> str:
    return sep.join(f'{k}="{escape_label(v)}"' for k, v in labels.items())


def _sample_line(name: str, labels: dict[str, str], value: float, ts: str | None) -> str:
    body = f"{name}{{{_labelset(labels)}}}" if labels else name
    return f"{body} {format_value(value)}" + (f" {ts}" if ts is not None else "")


def _seconds_text(us: int) -> str:
    """Exact decimal seconds of an epoch in µs (``1764410400``, ``1764410400.5``)."""
    whole, frac = divmod(us, 1_000_000)
    return f"{whole}" if frac == 0 else f"{whole}.{frac:06d}".rstrip("0")


def _seconds_number(us: int) -> float | int:
    whole, frac = divmod(us, 1_000_000)
    return whole if frac == 0 else float(_seconds_text(us))


def _ms(us: int) -> int:
    return us // 1000


def _le_key(labels: dict[str, str]) -> float:
    try:
        return float(labels.get("le", "nan"))
    except ValueError:
        return math.inf


def _sorted_labels(labels: dict[str, str]) -> dict[str, str]:
    return dict(sorted(labels.items()))


# -- text formats --------------------------------------------------------------------------------
def _families(rows: list[tuple[str, dict[str, str], int, float]], types: dict[str, str]):
    """Rows grouped by family in first-seen order."""
    grouped: dict[str, list[tuple[str, dict[str, str], int, float]]] = {}
    for row in rows:
        grouped.setdefault(_family_of(row[0], types)[0], []).append(row)
    return grouped


def _text_lines(frame: pd.DataFrame, types: dict[str, str] | None, timestamps: bool) -> list[str]:
    kinds = family_types(frame, types)
    out: list[str] = []
    for family, rows in _families(_rows(frame), kinds).items():
        mtype = kinds.get(family, "gauge")
        declared = f"{family}_total" if mtype == "counter" else family  # 0.0.4 declares the _total name
        out.append(f"# HELP {declared} {family}")
        out.append(f"# TYPE {declared} {mtype if mtype != 'unknown' else 'untyped'}")
        for metric, labels, us, value in sorted(
            rows, key=lambda r: (sorted(r[1].items()), r[2], r[0].endswith("_sum"), _le_key(r[1]))
        ):
            out.append(_sample_line(metric, _sorted_labels(labels), value, str(_ms(us)) if timestamps else None))
    return out


def write_prometheus_text(frame: pd.DataFrame, path: Path, timestamps: bool = True,
                          types: dict[str, str] | None = None) -> Path:
    """Text exposition 0.0.4; sample timestamps in integer milliseconds unless ``timestamps=False``."""
    path.write_text("\n".join(_text_lines(frame, types, timestamps)) + "\n")
    return path


def write_openmetrics(frame: pd.DataFrame, path: Path, types: dict[str, str] | None = None) -> Path:
    """OpenMetrics 1.0 text: counters declared without ``_total``, timestamps in seconds, ``# EOF``.

    Samples are grouped by MetricPoint (all buckets, ``_count`` and ``_sum`` of one label set at one
    time together), as the spec and prometheus_client's parser want."""
    kinds = family_types(frame, types)
    out: list[str] = []
    for family, rows in _families(_rows(frame), kinds).items():
        mtype = kinds.get(family, "gauge")
        out.append(f"# TYPE {family} {mtype}")
        out.append(f"# HELP {family} {family}")

        def point(r: tuple[str, dict[str, str], int, float]) -> tuple:
            group = sorted((k, v) for k, v in r[1].items() if k != "le")
            order = {"bucket": 0, "count": 1, "sum": 2, "created": 3}.get(_family_of(r[0], kinds)[1], 0)
            return (group, r[2], order, _le_key(r[1]))

        for metric, labels, us, value in sorted(rows, key=point):
            out.append(_sample_line(metric, _sorted_labels(labels), value, _seconds_text(us)))
    out.append("# EOF")
    path.write_text("\n".join(out) + "\n")
    return path


def write_promtool_dump(frame: pd.DataFrame, path: Path) -> Path:
    """``promtool tsdb dump`` default format: ``{__name__="x", a="b"} %g ts_ms``, labels in byte order."""
    lines = []
    for metric, labels, us, value in sorted(_rows(frame), key=lambda r: (r[0], sorted(r[1].items()), r[2])):
        full = sorted({**labels, "__name__": metric}.items())
        body = ", ".join(f'{k}="{escape_label(v)}"' for k, v in full)
        lines.append(f"{{{body}}} {go_g(value)} {_ms(us)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_snapshot_dir(frame: pd.DataFrame, directory: Path, prefix: str = "metrics-",
                       types: dict[str, str] | None = None) -> list[Path]:
    """One 0.0.4 file per distinct time, without sample timestamps, named ``<prefix>YYYYMMDDTHHMMSSZ.prom``.

    Times are whole seconds in the name: sub-second times are not representable."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    kinds = family_types(frame, types)
    for ts, part in frame.groupby(frame["ts"].map(_epoch_us), sort=True):
        name = datetime.fromtimestamp(ts / 1e6, UTC).strftime("%Y%m%dT%H%M%SZ")
        path = directory / f"{prefix}{name}.prom"
        path.write_text("\n".join(_text_lines(part, kinds, timestamps=False)) + "\n")
        paths.append(path)
    return paths


# -- JSON formats --------------------------------------------------------------------------------
def _series(rows: Iterable[tuple[str, dict[str, str], int, float]]):
    """Rows grouped by series (metric + sorted labels), samples in time order."""
    grouped: dict[tuple, list[tuple[int, float]]] = {}
    meta: dict[tuple, tuple[str, dict[str, str]]] = {}
    for metric, labels, us, value in rows:
        key = (metric, tuple(sorted(labels.items())))
        grouped.setdefault(key, []).append((us, value))
        meta[key] = (metric, labels)
    for key in sorted(grouped):
        metric, labels = meta[key]
        yield metric, labels, sorted(grouped[key])


def _metric_obj(metric: str, labels: dict[str, str]) -> dict[str, str]:
    return {"__name__": metric, **_sorted_labels(labels)}


def write_prom_api_matrix(frame: pd.DataFrame, path: Path) -> Path:
    """A ``/api/v1/query_range`` response (resultType matrix); values as strings, times in seconds."""
    result = [
        {"metric": _metric_obj(m, lab), "values": [[_seconds_number(us), format_value(v)] for us, v in pts]}
        for m, lab, pts in _series(_rows(frame))
    ]
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    return path


def write_prom_api_vectors(frame: pd.DataFrame, path: Path) -> Path:
    """A JSON array of ``/api/v1/query`` responses (resultType vector), one per distinct time."""
    by_time: dict[int, list[dict[str, Any]]] = {}
    for metric, labels, points in _series(_rows(frame)):
        for us, value in points:
            by_time.setdefault(us, []).append(
                {"metric": _metric_obj(metric, labels), "value": [_seconds_number(us), format_value(value)]}
            )
    responses = [
        {"status": "success", "data": {"resultType": "vector", "result": by_time[us]}} for us in sorted(by_time)
    ]
    path.write_text(json.dumps(responses, indent=1))
    return path


def _json_number(v: float) -> float | str:
    return v if math.isfinite(v) else format_value(v)


def write_vm_jsonl(frame: pd.DataFrame, path: Path) -> Path:
    """VictoriaMetrics ``/api/v1/export`` JSON lines (non-finite values written as strings)."""
    lines = [
        json.dumps({
            "metric": _metric_obj(metric, labels),
            "values": [_json_number(v) for _, v in points],
            "timestamps": [_ms(us) for us, _ in points],
        })
        for metric, labels, points in _series(_rows(frame))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_aiperf_jsonl(frame: pd.DataFrame, path: Path, bare_counter_names: bool = False,
                       bucket_key: str = "buckets", types: dict[str, str] | None = None) -> Path:
    """AIPerf ``server_metrics_export.jsonl``: one line per (instance, time) with its families.

    The ``instance`` label becomes ``endpoint_url`` ``http://<instance>/metrics`` (samples without
    one use ``localhost:8000``); histograms become ``{"labels", buckets_key: {le: count}, "sum",
    "count"}``; counters keep ``_total`` unless ``bare_counter_names``."""
    kinds = family_types(frame, types)
    scrapes: dict[tuple[str, int], dict[str, dict[tuple, dict[str, Any]]]] = {}
    for metric, labels, us, value in _rows(frame):
        instance = labels.get("instance", "localhost:8000")
        own = {k: v for k, v in labels.items() if k not in ("instance", "le")}
        family, suffix = _family_of(metric, kinds)
        group = tuple(sorted(own.items()))
        fams = scrapes.setdefault((instance, us), {})
        if kinds.get(family) == "histogram":
            entry = fams.setdefault(family, {}).setdefault(group, {"labels": own or None, bucket_key: {}})
            if suffix == "bucket":
                entry[bucket_key][labels["le"]] = value
            elif suffix in ("sum", "count"):
                entry[suffix] = value
            continue
        name = family if (bare_counter_names and suffix == "total") else metric
        fams.setdefault(name, {})[group] = {"labels": own or None, "value": _json_or_null(value)}
    lines = []
    for (instance, us), fams in sorted(scrapes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(json.dumps({
            "endpoint_url": f"http://{instance}/metrics",
            "timestamp_ns": us * 1000,
            "endpoint_latency_ns": 1_000_000,
            "metrics": {name: list(entries.values()) for name, entries in fams.items()},
        }))
    path.write_text("\n".join(lines) + "\n")
    return path


def _json_or_null(v: float) -> float | None:
    return v if math.isfinite(v) else None  # AIPerf's msgspec writes NaN/Inf as null


# -- tabular formats -----------------------------------------------------------------------------
def _iso(us: int) -> str:
    dt = datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{us % 1_000_000:06d}" if us % 1_000_000 else "") + "Z"


def long_frame(frame: pd.DataFrame, label_columns: bool = False) -> pd.DataFrame:
    """The samples as a long table: timestamp (µs since epoch), metric, labels JSON or one column per label, value."""
    rows = _rows(frame)
    out = pd.DataFrame({
        "timestamp": [us for _, _, us, _ in rows],
        "metric": [m for m, _, _, _ in rows],
        "value": [v for _, _, _, v in rows],
    })
    if label_columns:
        names = sorted({k for _, lab, _, _ in rows for k in lab})
        for name in names:
            out.insert(len(out.columns) - 1, name, [lab.get(name, "") for _, lab, _, _ in rows])
    else:
        out.insert(2, "labels", [json.dumps(_sorted_labels(lab)) for _, lab, _, _ in rows])
    return out


def write_csv(frame: pd.DataFrame, path: Path, label_columns: bool = False, time_format: str = "iso") -> Path:
    """Long-format CSV; ``time_format`` ``iso`` (``2026-11-29T10:00:00Z``) or ``s``/``ms``/``us``/``ns`` epoch."""
    table = long_frame(frame, label_columns)
    us = table["timestamp"]
    table["timestamp"] = {
        "iso": lambda: us.map(_iso),
        "s": lambda: us.map(lambda x: _seconds_text(int(x))),
        "ms": lambda: us // 1000,
        "us": lambda: us,
        "ns": lambda: us * 1000,
    }[time_format]()
    table["value"] = table["value"].map(format_value)
    table.to_csv(path, index=False)
    return path


def write_parquet(frame: pd.DataFrame, path: Path, label_columns: bool = False) -> Path:
    """Long-format Parquet: ``timestamp`` as TIMESTAMP (µs, UTC), labels as a MAP column or one column each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = long_frame(frame, label_columns)
    columns: dict[str, pa.Array] = {
        "timestamp": pa.array(table["timestamp"].to_numpy(), pa.timestamp("us", tz="UTC")),
        "metric": pa.array(table["metric"], pa.string()),
    }
    if label_columns:
        for name in table.columns[2:-1]:
            columns[name] = pa.array(table[name], pa.string())
    else:
        columns["labels"] = pa.array(
            [list(json.loads(s).items()) for s in table["labels"]], pa.map_(pa.string(), pa.string())
        )
    columns["value"] = pa.array(table["value"], pa.float64())
    pq.write_table(pa.table(columns), path)
    return path


def gzip_file(path: Path, out: Path | None = None) -> Path:
    """A gzip copy of ``path`` (``<path>.gz`` unless ``out`` is given)."""
    out = out or path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


WRITERS = {
    "prometheus-text": write_prometheus_text,
    "openmetrics": write_openmetrics,
    "prometheus-api-json": write_prom_api_matrix,
    "victoriametrics-jsonl": write_vm_jsonl,
    "promtool-dump": write_promtool_dump,
    "csv": write_csv,
    "parquet": write_parquet,
    "aiperf-server-metrics": write_aiperf_jsonl,
}

__all__ = [
    "WRITERS", "family_types", "format_value", "go_g", "gzip_file", "long_frame", "write_aiperf_jsonl",
    "write_csv", "write_openmetrics", "write_parquet", "write_prom_api_matrix", "write_prom_api_vectors",
    "write_prometheus_text", "write_promtool_dump", "write_snapshot_dir", "write_vm_jsonl",
]

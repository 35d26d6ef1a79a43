"""Reading a live Prometheus-compatible store (Prometheus, Thanos, Mimir, Cortex, VictoriaMetrics)
through its HTTP API with ``prometheus-api-client``: the raw samples of the serving metrics, chunked
by time, in the long format ``headroom load`` reads — the exact path (the cube is then built locally,
as from a file; no ``increase()`` extrapolation).

Credentials come from an environment variable (or a prompt) and live only in the request headers:
never in the workspace, the output, the exports or a saved set. TLS is verified unless ``insecure``.
Every failure is a ``LiveError`` of one line, within the timeout: connection refused, no answer,
401/403, 5xx and 429 (retried with backoff, a ``Retry-After`` honoured up to the time left), a body
that is not JSON, and Prometheus' error envelope.
"""

from __future__ import annotations

import ast
import base64
import json
import logging
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from app.cube import parse_window
from app.store import signal_rows

TOKEN_ENV = "HEADROOM_PROMETHEUS_TOKEN"  # a bearer token
BASIC_ENV = "HEADROOM_PROMETHEUS_BASIC_AUTH"  # user:password
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


class LiveError(RuntimeError):
    """A store that could not be read, in one line (never holding the credential)."""


class _CappedRetry(Retry):
    """urllib3's retry whose waits, ``Retry-After`` included, never outlast the request's deadline."""

    DEADLINE: float = math.inf

    def sleep_for_retry(self, response: Any = None) -> bool:
        wait = self.get_retry_after(response) if response is not None else None
        if wait is None:
            return False
        time.sleep(max(0.0, min(wait, self.DEADLINE - time.monotonic())))
        return True

    def _sleep_backoff(self) -> None:
        time.sleep(max(0.0, min(self.get_backoff_time(), self.DEADLINE - time.monotonic())))


@dataclass(frozen=True)
class Store:
    """How to reach one store. ``headers`` may hold a credential: it is never printed (``__repr__``)."""

    url: str
    timeout_s: float = 30.0
    retries: int = 3
    ca_file: str | None = None
    insecure: bool = False
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        auth = "with credentials" if any(k.lower() == "authorization" for k in self.headers) else "no credentials"
        tls = "TLS not verified (--insecure)" if self.insecure else ("TLS verified" if self.url.startswith("https")
                                                                      else "plain HTTP")
        return f"{self.url} ({auth}; {tls}; timeout {self.timeout_s:g} s)"


def store_from_env(url: str, env: Mapping[str, str], token_env: str | None = None, basic_env: str | None = None,
                   extra_headers: Sequence[str] = (), **kw: Any) -> Store:
    """A ``Store`` whose credential is read from the environment (a bearer token in ``token_env`` or
    ``$HEADROOM_PROMETHEUS_TOKEN``, or ``user:password`` in ``basic_env`` / ``$HEADROOM_PROMETHEUS_BASIC_AUTH``)
    and whose ``extra_headers`` are ``Name: value`` (e.g. ``X-Scope-OrgID: tenant`` for Mimir/Cortex)."""
    if not re.match(r"^https?://[^/\s]+", url or ""):
        raise LiveError(f"{url!r}: expected an http:// or https:// URL of the store's API, e.g. http://prometheus:9090")
    headers: dict[str, str] = {}
    for item in extra_headers:
        name, sep, value = item.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9-]+", name.strip()):
            raise LiveError(f"--header {name.strip()!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    token = env.get(token_env or TOKEN_ENV)
    basic = env.get(basic_env or BASIC_ENV)
    if token_env and token is None:
        raise LiveError(f"${token_env} is not set (it should hold the bearer token)")
    if basic_env and basic is None:
        raise LiveError(f"${basic_env} is not set (it should hold user:password)")
    if token:
        headers["Authorization"] = f"Bearer {token.strip()}"
    elif basic:
        headers["Authorization"] = "Basic " + base64.b64encode(basic.strip().encode()).decode()
    return Store(url=url.rstrip("/"), headers=headers, **kw)


class Client:
    """Queries on one store; every error a ``LiveError``."""

    def __init__(self, store: Store):
        self.store = store
        # urllib3 logs each retry ("Retrying ... after connection broken"): the error is said once, by us
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        session = requests.Session()
        session.verify = store.ca_file or not store.insecure
        # a refused connection and 5xx/429 answers are retried; a read that times out is not (the timeout holds)
        # a class of its own: urllib3 copies a retry by its class at every try, and the deadline set before
        # each request must not be another client's (the dashboard's sessions read stores side by side)
        self._retry_class = type("_ClientRetry", (_CappedRetry,), {"DEADLINE": math.inf})
        self._retry = self._retry_class(total=store.retries, connect=store.retries, read=0, status=store.retries,
                                   backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504),
                                   allowed_methods=("GET", "POST"), respect_retry_after_header=True,
                                   raise_on_status=False)
        self._pc = PrometheusConnect(url=store.url, headers=dict(store.headers), retry=self._retry, session=session,
                                     timeout=store.timeout_s)

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        self._retry_class.DEADLINE = time.monotonic() + self.store.timeout_s  # waits between tries end by then
        try:
            return fn(*args, **kw)
        except requests.exceptions.SSLError:
            raise LiveError(f"{self.store.url}: TLS verification failed (give the CA with --ca-file, or --insecure)"
                            ) from None
        except requests.exceptions.Timeout:
            raise LiveError(f"{self.store.url}: no answer within {self.store.timeout_s:g} s ({what})") from None
        except requests.exceptions.ConnectionError as exc:
            text = str(exc).lower()
            why = ("connection refused" if "refused" in text else
                   f"no answer within {self.store.timeout_s:g} s" if "timed out" in text else "cannot connect")
            raise LiveError(f"{self.store.url}: {why} ({what})") from None
        except requests.exceptions.JSONDecodeError:
            raise LiveError(f"{self.store.url}: the answer to {what} is not JSON: is this the store's API URL "
                            "(e.g. http://prometheus:9090, http://mimir/prometheus)?") from None
        except PrometheusApiClientException as exc:
            raise LiveError(self._http_error(str(exc), what)) from None
        except (KeyError, TypeError, ValueError):
            raise LiveError(f"{self.store.url}: the answer to {what} is not a Prometheus API answer") from None

    def _http_error(self, text: str, what: str) -> str:
        m = re.match(r"HTTP Status Code (\d+) \((.*)\)$", text, re.S)
        if not m:
            return f"{self.store.url}: {what} failed: {text.splitlines()[0][:200]}"
        code, body = int(m.group(1)), m.group(2)
        try:
            raw = ast.literal_eval(body)
            doc = json.loads(raw)
            detail = f"{doc.get('errorType', 'error')}: {doc.get('error', '')}".strip()
        except (ValueError, SyntaxError, TypeError, AttributeError):
            detail = ""
        meaning = {401: "unauthorized: check the credential ($" + TOKEN_ENV + " or --bearer-token-env)",
                   403: "forbidden: the credential may not read this (a tenant header, e.g. --header 'X-Scope-OrgID: t')",
                   404: "not found: is this the store's API URL?", 429: "too many requests (after retries)"}
        words = meaning.get(code, "the store refused the query" if code < 500 else
                            f"the store failed (after {self.store.retries} retries)")
        return f"{self.store.url}: HTTP {code} {words}" + (f" — {detail[:300]}" if detail else "") + f" ({what})"

    # -- the API --------------------------------------------------------------------------------------
    def metric_names(self) -> list[str]:
        return list(self._call("the metric names", self._pc.all_metrics))

    def series(self, selector: str, start: datetime, end: datetime) -> list[dict[str, str]]:
        return list(self._call("the series", self._pc.get_series, start, end, params={"match[]": selector}))

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        return self._call("a query", self._pc.custom_query, expr, params={"time": f"{at:.3f}"})

    def query_range(self, expr: str, start: float, end: float, step_s: int) -> list[dict[str, Any]]:
        """``expr`` evaluated at start, start + step, ..., end (Unix seconds, whole). The store is asked
        for one more step, dropped here, so that its search does not end on ``end`` (see :func:`through`;
        a second would not do: VictoriaMetrics rounds a range's end to its step, keeping the points' count)."""
        result = self._call("a range query", self._pc.custom_query_range, expr, datetime.fromtimestamp(start, UTC),
                            datetime.fromtimestamp(end + step_s, UTC), f"{int(step_s)}s")
        return through(result, end)


# VictoriaMetrics before v1.132 leaves out of a search whose end falls exactly on 00:00 UTC the samples
# stamped at that instant of any series it registered twice (under two IDs, as a concurrent import of
# the same series' days does): VictoriaMetrics#9804, fixed by its commit 34a542c. Debian ships 1.79.
# So no query here ends on the instant it reads up to: it ends later and what lies past is dropped.
PAST_END_S = 1  # how much later a raw read's instant query is evaluated


def through(result: list[dict[str, Any]], end: float) -> list[dict[str, Any]]:
    """``result`` (a matrix answer) without the points after ``end``; series left empty go."""
    out = []
    for series in result:
        values = series.get("values") or []
        n = len(values)
        while n and float(values[n - 1][0]) > end:  # points come in time order: only the tail is past
            n -= 1
        if n:
            out.append(series if n == len(values) else {**series, "values": values[:n]})
    return out


def known_families() -> list[str]:
    """The metric families of every engine Headroom knows (``data/signals.csv``)."""
    return sorted({r["family"] for r in signal_rows()})


def selector_matchers(match: str | None) -> str:
    """The matchers inside ``match`` (a PromQL selector such as ``{job="vllm"}``), checked."""
    if not match:
        return ""
    m = re.fullmatch(r"\s*\{(.*)\}\s*", match, re.S)
    if not m:
        raise LiveError(f"--match {match!r}: expected a label selector such as '{{job=\"vllm\"}}'")
    return m.group(1).strip()


def _selector(match: str | None, names: Sequence[str]) -> str:
    """``match`` narrowed to the metric ``names``."""
    inner = selector_matchers(match)
    regex = "|".join(re.escape(n) for n in names).replace("\\", "\\\\")
    return "{" + ", ".join(x for x in (f'__name__=~"{regex}"', inner) if x) + "}"


def serving_metric_names(client: Client) -> list[str]:
    """The store's metric names that belong to a known engine family (with a histogram's or counter's
    suffixes)."""
    families = known_families()
    wanted = {f + s for f in families for s in ("", *_SUFFIXES)}
    return sorted(n for n in client.metric_names() if n in wanted)


# labels every scrape carries, or histogram structure: not what names a traffic path
_NOT_PATH_LABELS = {"__name__", "le", "quantile", "instance", "job", "engine", "pod", "namespace", "node",
                    "container", "endpoint", "service", "prometheus", "prometheus_replica", "finished_reason"}


def discover(client: Client, start: datetime, end: datetime, match: str | None = None,
             names: Sequence[str] | None = None) -> dict[str, Any]:
    """What the store holds for Headroom in (start, end]: the engines and families present, the
    candidate path labels (label: distinct values, on the serving series), most values first, and every
    label name the serving series carry. ``names``: the store's serving metric names, when the caller
    has read them already."""
    names = serving_metric_names(client) if names is None else list(names)
    engine_of = {r["family"]: r["engine"] for r in signal_rows()}
    families = sorted({f for n in names for f in engine_of if n == f or (n.startswith(f) and n[len(f):] in _SUFFIXES)})
    values: dict[str, set[str]] = {}
    seen: set[str] = set()
    if names:
        for labels in client.series(_selector(match, names), start, end):
            seen.update(labels)
            for k, v in labels.items():
                if k not in _NOT_PATH_LABELS:
                    values.setdefault(k, set()).add(v)
    return {"url": client.store.url, "engines": sorted({engine_of[f] for f in families}), "families": families,
            "path_labels": {k: sorted(v) for k, v in sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
            "labels": sorted(seen - {"__name__"})}


def raw_answers(client: Client, start: datetime, end: datetime, names: Sequence[str], match: str | None = None,
                chunk_s: int = 3600) -> Iterator[tuple[int, int, float, list[dict[str, Any]]]]:
    """The store's answers for the raw samples in (start, end], a chunk of time at a time: (chunk, chunks,
    its end, the answer) — the instant query ``SELECTOR[chunk]`` at each chunk's end returns every stored
    sample of the chunk, unevaluated."""
    if not names:
        raise LiveError(f"{client.store.url}: no metric of a known serving engine (vLLM, SGLang, TGI, TensorRT-LLM/"
                        "Triton, NIM, DCGM) in the store; check --match or the URL")
    selector = _selector(match, names)
    t0, t1 = start.timestamp(), end.timestamp()
    n_chunks = max(1, math.ceil((t1 - t0) / chunk_s))
    for i in range(n_chunks):
        hi = min(t1, t0 + (i + 1) * chunk_s)
        width = int(math.ceil(hi - (t0 + i * chunk_s)))
        # asked PAST_END_S past the chunk's end, over as much more, and cut back to (start, hi]
        answer = client.query(f"{selector}[{width + PAST_END_S}s]", hi + PAST_END_S)
        yield i, n_chunks, hi, through(answer, hi)


def raw_chunks(client: Client, start: datetime, end: datetime, names: Sequence[str], match: str | None = None,
               chunk_s: int = 3600, progress: Any = None) -> Iterator[pd.DataFrame]:
    """The raw samples in (start, end] (``raw_answers``) as frames of (metric, labels, ts, value), one per
    chunk of time."""
    for i, n_chunks, hi, result in raw_answers(client, start, end, names, match, chunk_s):
        rows: list[tuple[str, str, float, float]] = []
        for series in result:
            labels = dict(series["metric"])
            metric = labels.pop("__name__", "")
            text = json.dumps(labels, sort_keys=True)
            rows += [(metric, text, float(t), float(v)) for t, v in series.get("values", [])]
        if progress:
            progress(f"{i + 1}/{n_chunks}: {len(rows):,} samples up to "
                     f"{datetime.fromtimestamp(hi, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
        if rows:
            frame = pd.DataFrame(rows, columns=["metric", "labels", "ts", "value"])
            frame["ts"] = pd.to_datetime(frame["ts"], unit="s", utc=True)
            yield frame


SCHEMA = pa.schema([("timestamp", pa.timestamp("ms", tz="UTC")), ("metric", pa.string()),
                    ("labels", pa.string()), ("value", pa.float64())])


def fetch_to_parquet(client: Client, start: datetime, end: datetime, out: Path, match: str | None = None,
                     chunk_s: int = 3600, progress: Any = None) -> int:
    """Write the raw serving samples of (start, end] as long Parquet (what ``headroom load`` reads); the
    number of samples."""
    names = serving_metric_names(client)
    n = 0
    tmp = out.with_name(out.name + ".partial")
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:
        for frame in raw_chunks(client, start, end, names, match, chunk_s, progress):
            table = pa.table({"timestamp": frame["ts"], "metric": frame["metric"], "labels": frame["labels"],
                              "value": frame["value"]}, schema=SCHEMA)
            writer.write_table(table)
            n += len(frame)
    if n == 0:
        tmp.unlink(missing_ok=True)
        raise LiveError(f"{client.store.url}: no sample of the serving metrics between {start.isoformat()} and "
                        f"{end.isoformat()}")
    tmp.replace(out)  # a file appears only whole
    return n


def fetch(store: Store, start: str, end: str, out: Path, match: str | None = None, chunk: str = "1h",
          progress: Any = None) -> tuple[int, datetime, datetime]:
    """``fetch_to_parquet`` of the range and options as people type them (``headroom fetch`` and the Data
    page's Connect), every one checked before the first request; (samples, start, end)."""
    t0, t1 = parse_time(start), parse_time(end)
    if t1 <= t0:
        raise LiveError(f"the end ({end}) is not after the start ({start})")
    chunk_s = parse_window(chunk)
    selector_matchers(match)
    if progress:
        progress(f"reading {store.describe()} from {t0.isoformat()} to {t1.isoformat()}")
    return fetch_to_parquet(Client(store), t0, t1, out, match=match, chunk_s=chunk_s, progress=progress), t0, t1


_RELATIVE = re.compile(r"^now(?:\s*-\s*(\d+(?:\.\d+)?)\s*([smhdw]))?$")


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """ISO-8601 (``2026-11-17T00:00:00Z``), Unix seconds, or relative: ``now``, ``now-7d`` (s, m, h, d, w)."""
    now = now or datetime.now(UTC)
    t = (text or "").strip()
    m = _RELATIVE.match(t)
    if m:
        if not m.group(1):
            return now
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return now - timedelta(seconds=float(m.group(1)) * unit)
    try:
        return datetime.fromtimestamp(float(t), UTC)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {text!r}: expected ISO-8601 (2026-11-17T00:00:00Z), Unix seconds or now-7d") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)

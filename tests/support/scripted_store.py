"""A store that answers a pull's requests from a script, without a server: deterministic values for
every range query (several series, NaN and infinities among them) and every raw read, so that a pull's
dataset can be compared with the one an earlier version of the code kept from the same answers
(``tests/fixtures/live/scripted_pull.json``), and each request can check what the pull already staged.

Its answers are not PromQL's (no query is evaluated): what a pull does with them is under test, not the
store; the real stores are in ``tests/live/test_pushdown_live.py``."""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.live.client import Store

TTFT = "vllm:time_to_first_token_seconds"
NAMES = [f"{TTFT}_bucket", f"{TTFT}_count", f"{TTFT}_sum", "vllm:request_success_total",
         "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]
REPLICAS = ("a:8000", "b:8000")
MODELS = ("chat", "batch")


class Answer(list):
    """One answer (a list of series), weak-referenceable so a test can see whether the pull keeps it."""


def _number(*key: Any) -> float:
    """A deterministic value in [0, 100) with two decimals, from the key."""
    h = int(hashlib.sha256(json.dumps(key).encode()).hexdigest()[:8], 16)
    return (h % 10000) / 100


def _text(value: float) -> str:
    return repr(value) if value == value and abs(value) != float("inf") else \
        ("NaN" if value != value else ("+Inf" if value > 0 else "-Inf"))


def _series_of(metric: str) -> list[dict[str, str]]:
    out = []
    for model in MODELS:
        for inst in REPLICAS:
            base = {"__name__": metric, "instance": inst, "model_name": model, "job": "vllm"}
            if metric.endswith("_bucket"):
                out += [{**base, "le": le} for le in ("0.25", "0.5", "+Inf")]
            elif metric == "vllm:request_success_total":
                out += [{**base, "finished_reason": r} for r in ("stop", "abort")]
            else:
                out.append(base)
    return out


class ScriptedClient:
    """The methods of ``app.live.client.Client`` a pull calls. ``before_request(kind)`` runs before each
    range query (``"range"``) and raw read (``"raw"``): a test's check of the pull's state."""

    def __init__(self, before_request: Callable[[str], None] | None = None):
        self.store = Store(url="http://scripted:9090")
        self.before_request = before_request
        self.answers: list[Any] = []  # weak references to every answer given
        self.given = {"range": 0, "raw": 0}  # finite window values and raw samples answered so far

    def metric_names(self) -> list[str]:
        return [*NAMES, "unrelated_metric"]

    def series(self, selector: str, start: datetime, end: datetime) -> list[dict[str, str]]:
        return [s for n in NAMES for s in _series_of(n)]

    def _answer(self, series: list[dict[str, Any]]) -> Answer:
        out = Answer(series)
        self.answers.append(weakref.ref(out))
        return out

    def query_range(self, expr: str, start: float, end: float, step_s: int) -> Answer:
        if self.before_request:
            self.before_request("range")
        metric = re.search(r"(vllm:[A-Za-z_:]+)", expr).group(1)
        out = []
        for i, labels in enumerate(_series_of(metric)):
            if "sum by" in expr or "min by" in expr or "max by" in expr or "count by" in expr:
                labels = {k: v for k, v in labels.items() if k in ("model_name", "le", "finished_reason")
                          or ("by (model_name, instance" in expr and k == "instance")}
            else:
                labels = {k: v for k, v in labels.items() if k != "__name__"}  # increase() drops the name
            values = []
            t = start
            while t <= end:
                v = _number(expr, i, t)
                if v < 2:  # about 2 % of the values: what a store returns for a window it cannot compute
                    v = float("nan") if v < 1 else float("inf")
                values.append([t, _text(v)])
                t += step_s
            out.append({"metric": labels, "values": values})
        # series summed to the same labels come back once, as a store's sum gives them
        seen, unique = set(), []
        for s in out:
            key = json.dumps(s["metric"], sort_keys=True)
            if key not in seen:
                seen.add(key)
                unique.append(s)
        self.given["range"] += sum(1 for s in unique for _, v in s["values"] if v not in ("NaN", "+Inf", "-Inf"))
        return self._answer(unique)

    def query(self, expr: str, at: float) -> Answer:
        """A raw read ``{__name__=~"..."}[Ns]`` at ``at``: every sample of the chunk, every 300 s."""
        if self.before_request:
            self.before_request("raw")
        width = int(re.search(r"\[(\d+)s\]$", expr).group(1))
        names = re.search(r'__name__=~"([^"]*)"', expr).group(1).replace("\\\\", "\\")
        wanted = [n for n in NAMES if re.fullmatch(names, n)]
        out = []
        for metric in wanted:
            for i, labels in enumerate(_series_of(metric)):
                # Prometheus' times are milliseconds: an offset that no binary fraction holds exactly
                t = (at - width) - (at - width) % 300 + 300.123
                values = []
                while t <= at:
                    values.append([round(t, 3), _text(_number(metric, i, t))])
                    t += 300
                if values:
                    out.append({"metric": labels, "values": values})
        self.given["raw"] += sum(len(s["values"]) for s in out)
        return self._answer(out)


def dataset_content(con: Any, dataset_id: int) -> dict[str, Any]:
    """What a kept pull holds, as plain values in a fixed order: its windows and its raw samples, each
    named by its series' metric and labels."""
    windows = con.execute(
        "select s.metric, cast(s.labels as json)::varchar, strftime(w.window_start, '%Y-%m-%dT%H:%M:%S.%f'), "
        "w.increase, w.gauge_min, w.gauge_sum, w.gauge_n, w.gauge_max from live_windows as w "
        "join series as s using (series_id) where w.dataset_id = $id order by all", {"id": dataset_id}).fetchall()
    samples = con.execute(
        "select s.metric, cast(s.labels as json)::varchar, strftime(x.ts, '%Y-%m-%dT%H:%M:%S.%f'), x.value "
        "from samples as x join series as s using (series_id) where x.dataset_id = $id order by all",
        {"id": dataset_id}).fetchall()
    return {"windows": [list(r) for r in windows], "samples": [list(r) for r in samples]}

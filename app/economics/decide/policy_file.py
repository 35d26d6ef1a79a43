"""The policy file of ``headroom scenarios --policy FILE.yaml`` (and the Economics page's policy
inputs): YAML, or the same mapping, parsed into the rows of the policy table. Every error names the
file and the key. Schema: docs/policies.md#the-policy-file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.economics.decide.policies import CapTokens, Defer, PolicyScenario, SmallerModel
from app.engine.policy import SIGNALS, Admission, Autoscaler, Policy, Retry

SECTIONS = ("autoscaler", "admission", "retry", "degradation")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min|h)?\s*$")
_UNIT = {None: 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


class PolicyFileError(ValueError):
    """A policy file that cannot be used: the message names the file and the key."""


@dataclass(frozen=True)
class PolicySet:
    """The parsed file: its rows, the price of one degraded answer per path ("*": every path), and
    the mapping it came from (what the dashboard keeps and the document shows)."""

    rows: tuple[PolicyScenario, ...]
    degraded_price: dict[str, float] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    source: str = "policy"

    def for_fleet(self, observed_replicas: int) -> PolicySet:
        """The rows again, with the observed fleet size where a section gives no ``replicas``."""
        return parse(self.spec, self.source, observed_replicas)


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, msg: str) -> PolicyFileError:
        return PolicyFileError(f"{self.source}: {key}: {msg}")

    def section(self, spec: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        value = spec.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(key, "expected a mapping of settings")
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise self.fail(f"{key}.{unknown[0]}", f"unknown setting (expected one of {', '.join(allowed)})")
        return dict(value)

    def number(self, sec: Mapping[str, Any], where: str, key: str, default: Any = None, low: float | None = None,
               integer: bool = False) -> Any:
        value = sec.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{where}.{key}", f"expected a number, got {value!r}")
        if not math.isfinite(value) or (low is not None and value < low):
            raise self.fail(f"{where}.{key}", f"must be a finite number >= {low:g}" if low is not None
                            else "must be a finite number")
        if integer:
            if value != int(value):
                raise self.fail(f"{where}.{key}", f"expected a whole number, got {value!r}")
            return int(value)
        return float(value)

    def duration(self, sec: Mapping[str, Any], where: str, key: str, default: float | None) -> float | None:
        value = sec.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"expected a duration (e.g. 90, 90s, 5m), got {value!r}")
        if isinstance(value, int | float):
            if value < 0 or not math.isfinite(value):
                raise self.fail(f"{where}.{key}", "must be >= 0 seconds")
            return float(value)
        m = _DURATION.match(str(value))
        if not m:
            raise self.fail(f"{where}.{key}", f"expected a duration (e.g. 90, 90s, 5m, 1h), got {value!r}")
        return float(m.group(1)) * _UNIT[m.group(2)]

    def numbers(self, sec: Mapping[str, Any], where: str, key: str, default: Any) -> list[float]:
        value = sec.get(key, default)
        items = value if isinstance(value, list) else [value]
        return [self.number({key: v}, where, key, low=0.0) for v in items]

    def text(self, sec: Mapping[str, Any], where: str, key: str, default: str | None = None,
             choices: tuple[str, ...] | None = None) -> str | None:
        value = sec.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or (choices and value not in choices):
            raise self.fail(f"{where}.{key}", f"expected {' or '.join(choices) if choices else 'a name'}, got {value!r}")
        return value


def read(path: str | Path) -> PolicySet:
    """Parse a policy file (YAML)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise PolicyFileError(f"{p}: cannot be read: {exc.strerror or exc}") from None
    return parse_text(text, str(p))


def parse_text(text: str, source: str = "policy") -> PolicySet:
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise PolicyFileError(f"{source}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise PolicyFileError(f"{source}: the file must be a mapping with any of {', '.join(SECTIONS)}")
    return parse(spec, source)


AUTOSCALER_KEYS = ("signal", "scale_out_at", "scale_in_at", "out_for", "in_for", "out_step", "cold_start",
                   "wake_start", "cooldown", "min_replicas", "max_replicas", "start_replicas", "period")


def parse(spec: Mapping[str, Any], source: str = "policy", observed_replicas: int = 1) -> PolicySet:
    """The rows of a policy mapping. ``observed_replicas``: the static fleet size where a section gives
    none (``replicas``)."""
    r = _Reader(source)
    unknown = sorted(set(spec) - set(SECTIONS) - {"degraded_price", "traffic"})
    if unknown:
        raise r.fail(unknown[0], f"unknown section (expected {', '.join(SECTIONS)}, degraded_price, traffic)")
    traffic = r.number(spec, "(top)", "traffic", 1.0, low=0.0) or 1.0
    rows: list[PolicyScenario] = []
    a = r.section(spec, "autoscaler", AUTOSCALER_KEYS)
    if a:
        w = "autoscaler"
        kw = {"signal": r.text(a, w, "signal", "waiting", SIGNALS), "scale_out_at": r.number(a, w, "scale_out_at", 4.0, 0.0),
                  "scale_in_at": r.number(a, w, "scale_in_at", 0.5, 0.0), "out_for_s": r.duration(a, w, "out_for", 120.0),
                  "in_for_s": r.duration(a, w, "in_for", 600.0), "out_step": r.number(a, w, "out_step", 1, 1, True),
                  "cooldown_s": r.duration(a, w, "cooldown", 300.0),
                  "min_replicas": r.number(a, w, "min_replicas", 1, 1, True),
                  "max_replicas": r.number(a, w, "max_replicas", max(8, observed_replicas), 1, True),
                  "start_replicas": r.number(a, w, "start_replicas", None, 1, True),
                  "period_s": r.duration(a, w, "period", 15.0)}
        cold = r.duration(a, w, "cold_start", 300.0)
        starts = [("cold start", cold)]
        wake = r.duration(a, w, "wake_start", None)
        if wake is not None:
            starts.append(("wake from sleep", wake))
        for label, start in starts:
            try:
                auto = Autoscaler(cold_start_s=start, **kw)
            except ValueError as exc:
                raise r.fail(w, str(exc)) from None
            rows.append(PolicyScenario(
                name=f"autoscaler {auto.signal} >= {auto.scale_out_at:g}/replica, {auto.min_replicas}-"
                f"{auto.max_replicas} replicas, {label} {_dur(start)}", kind="autoscaler",
                policy=Policy(autoscaler=auto), replicas=auto.max_replicas, traffic=traffic))
    d = r.section(spec, "admission", ("replicas", "queue_factor"))
    if d:
        n = r.number(d, "admission", "replicas", observed_replicas, 1, True)
        rows.append(PolicyScenario(name=f"unbounded queue, {n} replicas", kind="admission", replicas=n, traffic=traffic))
        for k in r.numbers(d, "admission", "queue_factor", [0.5, 1.0, 2.0]):
            rows.append(PolicyScenario(name=f"queue cap {k:g} x running, {n} replicas", kind="admission",
                                       policy=Policy(admission=Admission(k)), replicas=n, traffic=traffic))
    t = r.section(spec, "retry", ("replicas", "queue_factor", "attempts", "backoff", "multiplier", "jitter",
                                  "budget_per_minute", "ratio"))
    if t:
        w = "retry"
        n = r.number(t, w, "replicas", observed_replicas, 1, True)
        k = r.number(t, w, "queue_factor", 1.0, 0.0)
        budget = r.number(t, w, "budget_per_minute", 60.0, 0.0)
        kw = {"attempts": r.number(t, w, "attempts", 3, 1, True), "backoff_s": r.duration(t, w, "backoff", 1.0),
                  "multiplier": r.number(t, w, "multiplier", 2.0, 1.0), "jitter": r.number(t, w, "jitter", 1.0, 0.0)}
        if kw["jitter"] > 1:
            raise r.fail("retry.jitter", "must be between 0 and 1")
        ratio = r.number(t, w, "ratio", None, 0.0)
        budgets = [(None, None), (budget, None)] + ([(None, ratio)] if ratio is not None else [])
        for b, q in budgets:
            retry = Retry(budget_per_minute=b, ratio=q, **kw)
            label = ("no budget" if b is None else f"budget {b:g}/min") if q is None else f"retry ratio {q:g}"
            rows.append(PolicyScenario(name=f"retries {retry.attempts} attempts, {label}, queue cap {k:g} x running, "
                                       f"{n} replicas", kind="retry",
                                       policy=Policy(admission=Admission(k), retry=retry), replicas=n, traffic=traffic))
    g = r.section(spec, "degradation", ("replicas", "cap_tokens", "smaller_model", "defer"))
    if g:
        n = r.number(g, "degradation", "replicas", observed_replicas, 1, True)
        for item in _items(r, g, "cap_tokens"):
            w = "degradation.cap_tokens"
            cap = CapTokens(tokens=r.number(item, w, "tokens", None, 1, True) or _missing(r, w, "tokens"),
                            path=r.text(item, w, "path"))
            rows.append(PolicyScenario(name=f"answers capped at {cap.tokens} tokens"
                                       f"{'' if cap.path is None else ' on ' + cap.path}, {n} replicas",
                                       kind="degradation", replicas=n, traffic=traffic, cap=cap))
        for item in _items(r, g, "smaller_model"):
            w = "degradation.smaller_model"
            share = r.number(item, w, "share", None, 0.0)
            if share is None or share > 1:
                raise r.fail(f"{w}.share", "give the share of the path's requests routed, between 0 and 1")
            sm = SmallerModel(path=r.text(item, w, "path") or _missing(r, w, "path"), share=share,
                              step_factor=r.number(item, w, "step_factor", 0.5, 0.0) or 0.5,
                              replicas=r.number(item, w, "replicas", 1, 1, True))
            rows.append(PolicyScenario(name=f"{share:.0%} of {sm.path} on a smaller model (step x{sm.step_factor:g}, "
                                       f"{sm.replicas} replica{'s' if sm.replicas > 1 else ''}), {n} replicas",
                                       kind="degradation", replicas=n, traffic=traffic, smaller=sm))
        for item in _items(r, g, "defer"):
            w = "degradation.defer"
            df = Defer(path=r.text(item, w, "path") or _missing(r, w, "path"),
                       hours=r.number(item, w, "hours", 4, 1, True), ttft_s=r.duration(item, w, "ttft", 3600.0))
            rows.append(PolicyScenario(name=f"{df.path} deferred from its {df.hours} busiest hours (TTFT promise "
                                       f"{_dur(df.ttft_s)}), {n} replicas", kind="degradation", replicas=n,
                                       traffic=traffic, defer=df))
    prices = spec.get("degraded_price", {})
    if isinstance(prices, int | float) and not isinstance(prices, bool):
        prices = {"*": prices}
    if not isinstance(prices, Mapping):
        raise r.fail("degraded_price", "expected USD, or a mapping of path to USD")
    degraded = {str(p): r.number(prices, "degraded_price", p, None, 0.0) for p in prices}
    names = [x.name for x in rows]
    if len(set(names)) != len(names):
        raise r.fail("(rows)", "two rows with the same settings")
    return PolicySet(rows=tuple(rows), degraded_price=degraded, spec=dict(spec), source=source)


def _items(r: _Reader, sec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = sec.get(key)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    for x in items:
        if not isinstance(x, Mapping):
            raise r.fail(f"degradation.{key}", "expected a mapping (or a list of them)")
    return items


def _missing(r: _Reader, where: str, key: str) -> Any:
    raise r.fail(f"{where}.{key}", "required")


def _dur(s: float) -> str:
    if s >= 3600 and s % 3600 == 0:
        return f"{s / 3600:g} h"
    if s >= 60 and s % 60 == 0:
        return f"{s / 60:g} min"
    return f"{s:g} s"


def check_paths(ps: PolicySet, paths: list[str], source: str = "policy") -> None:
    """Every path a row names is a path of the scenarios."""
    for row in ps.rows:
        for what, p in (("cap_tokens", row.cap.path if row.cap else None),
                        ("smaller_model", row.smaller.path if row.smaller else None),
                        ("defer", row.defer.path if row.defer else None)):
            if p is not None and p not in paths:
                raise PolicyFileError(f"{source}: degradation.{what}.path: no path {p!r} (paths: {', '.join(paths)})")

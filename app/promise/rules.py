"""The promise as Prometheus rules: recording rules for each path's breach ratio per signal at the
windows the SRE workbook's multiwindow alerts read, and the burn-rate alerts (docs/methods.md#multiwindow-alerts).

A breach ratio from a classic histogram is exact only at a bucket bound (docs/methods.md#share-above-threshold), so a
threshold must be one; for one between bounds the error names the neighbouring bounds and the vLLM
``--custom-histogram-buckets`` value that would make it exact, or ``allow_interpolated`` uses the
bound below it (every breach of the threshold is counted, and the requests between that bound and
the threshold too: an upper bound of the ratio, which pages early rather than late).

The joint bounds are those Headroom reports with failed requests left out (``--exclude-failed``):
low = the larger of the two ratios, high = their sum capped at 1. The alerts page when even the low
end burns (``HeadroomErrorBudgetBurn``) and note when only the high end does
(``HeadroomErrorBudgetBurnPossible``), as the Promise page's ``firing`` and ``possible``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.escape import visible
from app.promise.shares import ALL_PATHS, Promise
from app.store import data_dir, signal_rows

WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# (severity, long window, short window, share of the budget it spends at the factor, for): the SRE
# workbook's pages and ticket; the factor is share × period / long window (14.4, 6, 1 for 30 days)
ALERTS = (("page", "1h", "5m", 0.02, "2m"), ("page", "6h", "30m", 0.05, "15m"), ("ticket", "3d", "6h", 0.10, "1h"))
SIGNALS = ("ttft", "tpot")
# vLLM's bucket family keys for --custom-histogram-buckets (vllm/v1/metrics/buckets.py, >= 0.32)
VLLM_BUCKET_FAMILY = {"ttft": "time_to_first_token", "tpot": "inter_token_latency"}
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class RulesError(ValueError):
    """A promise that cannot be written as exact rules (the message says what would make it one)."""


def parse_duration(text: str) -> float:
    """``30d`` → hours (720.0); m, h, d, w."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", text or "")
    if not m:
        raise ValueError(f"duration {text!r}: expected a number and m, h, d or w, e.g. 30d")
    return float(m.group(1)) * _UNITS[m.group(2)] / 3600


def burn_factor(budget_share: float, period_hours: float, long_hours: float) -> float:
    """The burn rate at which ``budget_share`` of the period's budget goes in ``long_hours``."""
    return budget_share * period_hours / long_hours


@dataclass(frozen=True)
class Engine:
    """The histogram families of an engine's TTFT and per-request TPOT (``data/signals.csv``)."""

    name: str
    families: Mapping[str, str]  # signal -> family

    @classmethod
    def of(cls, name: str) -> Engine:
        """The engine of ``data/signals.csv`` named ``name``, or the one a load reported (``vllm-v1``)."""
        table = signal_rows()
        known = {r["engine"] for r in table}
        base = name if name in known else max((e for e in known if name.startswith(e + "-")), key=len, default=name)
        rows = [r for r in table if r["engine"] == base and r["signal"] in SIGNALS and r["kind"] == "histogram"]
        if not rows:
            raise ValueError(f"engine {name!r}: no TTFT/TPOT histograms known; known engines: {', '.join(sorted(known))}")
        name = base
        best: dict[str, tuple[int, str]] = {}
        for r in rows:
            prio = int(r["priority"] or 1)
            if r["signal"] not in best or prio < best[r["signal"]][0]:
                best[r["signal"]] = (prio, r["family"])
        return cls(name, {s: f for s, (_, f) in best.items()})


# the label each engine names its model with (what Headroom's default path label, __model__, reads)
_MODEL_LABELS = {"triton": "model", "trtllm": "model"}


def model_label(engine: str) -> str:
    """The label an engine's series name their model by: the rules group by it when the workspace's
    path label is the default ``__model__`` (which Prometheus has no series label of)."""
    return next((v for k, v in _MODEL_LABELS.items() if engine == k or engine.startswith(k + "-")), "model_name")


def default_bounds() -> dict[str, list[float]]:
    """vLLM's default bucket bounds (>= 0.8.4), for when no export says which the fleet uses."""
    doc = json.loads((data_dir() / "vllm_default_buckets.json").read_text())
    return {s: [float(b) for b in doc[s]] for s in SIGNALS}


@dataclass(frozen=True)
class Threshold:
    """A promise's threshold of one signal as a rule reads it."""

    signal: str
    family: str
    threshold_s: float
    bound: float  # the bucket bound the rule reads
    exact: bool

    def comment(self) -> str:
        if self.exact:
            return f"{self.signal} <= {self.threshold_s:g} s (a bucket bound: exact)"
        return (f"{self.signal} <= {self.threshold_s:g} s is between bucket bounds: the rule reads le={self.bound:g}, "
                f"the bound below, so it counts every breach and the requests in ({self.bound:g}, "
                f"{self.threshold_s:g}] s too (an upper bound of the ratio)")


def _near(bounds: Sequence[float], t: float) -> tuple[float | None, float | None]:
    below = max((b for b in bounds if b < t), default=None)
    above = min((b for b in bounds if b > t and math.isfinite(b)), default=None)
    return below, above


def threshold(signal: str, t: float, path: str, engine: Engine, bounds: Sequence[float],
              allow_interpolated: bool) -> Threshold:
    family = engine.families.get(signal)
    if family is None:
        raise RulesError(f"{path}: engine {engine.name} exports no {signal.upper()} histogram")
    finite = sorted(b for b in bounds if math.isfinite(b))
    at = next((b for b in finite if abs(b - t) <= 1e-9 * t), None)
    if at is not None:
        return Threshold(signal, family, t, at, True)
    below, above = _near(finite, t)
    if allow_interpolated and below is not None:
        return Threshold(signal, family, t, below, False)
    near = " and ".join(f"{b:g} s" for b in (below, above) if b is not None) or "none"
    fix = f"use {' or '.join(f'{b:g}' for b in (below, above) if b is not None)}" if below or above else "add it"
    hint = ""
    if engine.name.startswith("vllm"):
        new = sorted({*finite, t})
        hint = (f"; or make it a bound: vllm serve ... --custom-histogram-buckets "
                f"'{json.dumps({VLLM_BUCKET_FAMILY[signal]: new}, separators=(',', ':'))}' (vLLM >= 0.32)")
    extra = "" if below is None else f"; or --allow-interpolated to read le={below:g} (the bound below)"
    raise RulesError(f"{path}: {signal.upper()} {t:g} s is not a bucket bound of {family} (nearest: {near}): "
                     f"{fix}{hint}{extra}")


def _le_regex(bound: float) -> str:
    """A regex for a bound however the exporter and Prometheus spell it (0.5; 1 or 1.0)."""
    text = repr(float(bound))
    return re.escape(text[:-2]) + r"(\.0)?" if text.endswith(".0") else re.escape(text)


def _quote(text: str) -> str:
    """``text`` inside a PromQL double-quoted string (Go's escapes: a label value may hold anything)."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in out)


def _matcher(label: str, path: str, others: Sequence[str]) -> str:
    if path != ALL_PATHS:
        return f'{label}="{_quote(path)}"'
    if others:  # the catch-all promise covers the paths that have none of their own
        return f'{label}!~"{_quote("|".join(re.escape(o) for o in others))}"'
    return ""


def _selector(metric: str, *matchers: str) -> str:
    inner = ",".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def ratio_expr(th: Threshold, label: str, match: str, window: str) -> str:
    """The PromQL of one signal's breach ratio over ``window`` (what its recording rule records)."""
    total = f"sum by ({label}) (rate({_selector(th.family + '_count', match)}[{window}]))"
    le = f'le=~"{_quote(_le_regex(th.bound))}"'
    good = f"sum by ({label}) (rate({_selector(th.family + '_bucket', match, le)}[{window}]))"
    return f"({total} - {good}) / {total}"


def record_name(what: str, window: str) -> str:
    return f"headroom:{what}:ratio_rate{window}"


@dataclass(frozen=True)
class RuleSet:
    """What the rules file holds, before it is written."""

    label: str
    period: str
    promises: tuple[tuple[Promise, tuple[Threshold, ...], str], ...]  # (promise, thresholds, matcher)


def plan(promises: Sequence[Promise], label: str = "model_name", period: str = "30d", engine: str = "vllm",
         bounds: Mapping[str, Sequence[float]] | None = None, allow_interpolated: bool = False) -> RuleSet:
    """Check every threshold against the bucket bounds (``bounds`` per signal; vLLM's defaults when
    None) and the label matchers; raise ``RulesError`` naming what to change."""
    if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", label):
        raise ValueError(f"path label {label!r} is not a Prometheus label name")
    parse_duration(period)
    eng = Engine.of(engine)
    bounds = bounds if bounds is not None else default_bounds()
    named = [p.path for p in promises if p.path != ALL_PATHS]
    out = []
    problems = []
    for p in promises:
        ths = []
        for signal, t in (("ttft", p.ttft_s), ("tpot", p.tpot_s)):
            if t is None:
                continue
            try:
                ths.append(threshold(signal, t, p.path, eng, bounds.get(signal, ()), allow_interpolated))
            except RulesError as exc:
                problems.append(str(exc))
        if not ths and p.ttft_s is None and p.tpot_s is None:
            problems.append(f"{p.path}: the promise sets neither TTFT nor TPOT")
        out.append((p, tuple(ths), _matcher(label, p.path, named)))
    if problems:
        raise RulesError("\n".join(problems))
    return RuleSet(label, period, tuple(out))


def to_yaml(rules: RuleSet, source: str = "") -> str:
    """The rules file (Prometheus' rule_files format; JSON-quoted strings are YAML scalars)."""
    q = json.dumps
    period_h = parse_duration(rules.period)
    lab = rules.label
    lines = [f"# Headroom's promise as Prometheus rules, written {datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
             + (f" from {visible(source)}" if source else ""),
             f"# path label {lab}; SLO period {rules.period}; check with: promtool check rules FILE", "groups:"]
    for i, (p, ths, match) in enumerate(rules.promises):
        who = "every path without its own promise" if p.path == ALL_PATHS else visible(p.path)  # a comment line
        lines += [f"  - name: {q(f'headroom-promise-{i + 1}')}", "    rules:"]
        lines.append(f"      # {who}: " + "; ".join(th.comment() for th in ths))
        for window in WINDOWS:
            for th in ths:
                lines += [f"      - record: {record_name(th.signal + '_breach', window)}",
                          f"        expr: {q(ratio_expr(th, lab, match, window))}",
                          "        labels:",
                          f"          headroom_promise: {q(p.path)}",
                          f"          headroom_threshold_seconds: {q(repr(th.threshold_s))}",
                          f"          headroom_exact: {q('true' if th.exact else 'false')}"]
            inputs = "|".join(th.signal for th in ths)
            vec = f'{{__name__=~"headroom:({inputs})_breach:ratio_rate{window}"{"," + match if match else ""}}}'
            tag = ["        labels:", f"          headroom_promise: {q(p.path)}"]
            lines += [f"      - record: {record_name('joint_breach_low', window)}",
                      f"        expr: {q(f'max by ({lab}) ({vec})')}", *tag,
                      f"      - record: {record_name('joint_breach_high', window)}",
                      f"        expr: {q(f'clamp_max(sum by ({lab}) ({vec}), 1)')}", *tag]
        budget = 1 - p.target
        for severity, long_w, short_w, share, for_ in ALERTS:
            factor = burn_factor(share, period_h, parse_duration(long_w))
            level = float(f"{factor * budget:.12g}")  # 14.4 x 0.01 is 0.144, not 0.14400000000000013
            for end, name, sev in (("low", "HeadroomErrorBudgetBurn", severity),
                                   ("high", "HeadroomErrorBudgetBurnPossible", "info")):
                sel = f"{{{match}}}" if match else ""
                expr = (f"{record_name(f'joint_breach_{end}', long_w)}{sel} > {level!r} and "
                        f"{record_name(f'joint_breach_{end}', short_w)}{sel} > {level!r}")
                sure = "even the low end of the joint breach ratio" if end == "low" else "the high end of the joint breach ratio (the low end does not)"
                lines += [f"      - alert: {name}",
                          f"        expr: {q(expr)}",
                          f"        for: {for_}",
                          "        labels:",
                          f"          severity: {q(sev)}",
                          f"          headroom_promise: {q(p.path)}",
                          f"          headroom_windows: {q(f'{long_w}/{short_w}')}",
                          f"          headroom_burn_factor: {q(f'{factor:g}')}",
                          "        annotations:",
                          f"          summary: {q(f'{{{{ $labels.{lab} }}}}: the promise burns its error budget at more than {factor:g}x')}",
                          f"          description: {q(f'Over {long_w} and {short_w}, {sure} is above {factor:g} x (1 - {p.target:g}) = {level:g}: at that rate {share:.0%} of the {rules.period} budget goes in {long_w}.')}"]
    return "\n".join(lines) + "\n"

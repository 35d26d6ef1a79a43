"""Functions the Streamlit pages call. Plain Python: tests call them without Streamlit.

Sections: workspace reads, data (uploads, datasets, path mapping, cube health), promise (inputs,
tables, notes), economics (scenario inputs, replay spec, pricing, saved sets), capacity model and
the load axis of the cross-check. The few SQL statements here read the workspace's small tables
(``cube_rows``, ``settings``, ``datasets``) by ``$params`` only.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from app import load
from app import promise as pm
from app.jsonable import jsonable
from app.load import LoadReport
from app.store import Workspace, data_dir

SAMPLE_EXPORT = "sample/metrics.parquet"
SAMPLE_ENV = "HEADROOM_SAMPLE"  # another export to open an empty workspace on (tests use a 1-hour slice)
DEFAULT_WINDOW_S = 300

# workspace settings written by the dashboard (plain JSON values)
SETTING_WINDOW = "window_s"
SETTING_DATASETS = "active_datasets"
SETTING_PROMISES = "promises"
SETTING_ECONOMICS = "economics_inputs"


class Upload(Protocol):
    name: str

    def getvalue(self) -> bytes: ...


# == workspace reads =============================================================================
# Streamlit's fast reruns run a new script thread while the old one may still be inside DuckDB, and the
# workspace's own readers (``Workspace.dataset_ids``, ``get_setting``, ``path_labels``, ``path_rules``)
# use its shared connection, which DuckDB 2.0 refuses to share ("connection is busy"). These readers
# use a cursor of their own instead.
# == data =========================================================================================
def sample_path() -> Path:
    """The export an empty workspace opens on: ``$HEADROOM_SAMPLE`` or the bundled day."""
    override = os.environ.get(SAMPLE_ENV)
    return Path(override) if override else data_dir() / SAMPLE_EXPORT


def ensure_sample_loaded(ws: Workspace) -> LoadReport | None:
    """Load the bundled sample when the workspace holds no dataset (the dashboard opens on it)."""
    path = sample_path()
    if ws.dataset_ids() or not path.is_file():
        return None
    return load.load_file(ws, path, name="bundled sample", display=f"bundled sample ({path.name})")


def load_uploads(ws: Workspace, uploads: Iterable[Upload]) -> list[LoadReport]:
    """Load uploaded files; each is written to a temp file first (DuckDB reads paths, not buffers)."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="headroom-upload-") as tmp:
        for up in uploads:
            path = Path(tmp) / Path(up.name).name
            path.write_bytes(up.getvalue())
            reports.append(load.load_file(ws, path, name=up.name, display=up.name))
    return reports


def report_rows(reports: Iterable[LoadReport]) -> pd.DataFrame:
    """One row per file of a load, for a table."""
    return pd.DataFrame([{
        "file": r.file,
        "status": r.status,
        "format": r.format,
        "engine": r.engine,
        "series": r.series,
        "samples": r.samples,
        "start": r.start,
        "end": r.end,
        "scrape interval (s)": r.scrape_interval_s,
        "signals": ", ".join(r.signals),
        "paths": ", ".join(r.paths),
        "resets": r.resets,
        "repairs": r.repairs,
        "unknown metrics": ", ".join(r.unknown_metrics),
        "notes": "; ".join(r.notes),
        "errors": "; ".join(r.errors),
    } for r in reports])


def requests_per_window(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """Requests (TTFT observations) per window and path: the traffic the dashboard shows first."""
    from app import sql

    return sql.df(ws.cursor(), "cube__requests_by_window", cube_id=cube_id)


def datasets(ws: Workspace) -> pd.DataFrame:
    """The datasets table, with ``snapshot`` (a single scrape: increases since the server started)."""
    frame = ws.datasets()
    snapshots = dict(ws.cursor().execute(
        "select dataset_id, coalesce(cast(summary->>'$.snapshot' as boolean), false) from datasets").fetchall())
    frame["snapshot"] = frame["dataset_id"].map(snapshots).fillna(False).astype(bool)
    return frame


def active_datasets(ws: Workspace) -> list[int]:
    """Datasets the cube is built on: the stored choice (still existing ones), else every dataset."""
    existing = ws.dataset_ids()
    chosen = [i for i in ws.get_setting(SETTING_DATASETS, []) or [] if i in existing]
    return chosen or existing


def window_seconds(ws: Workspace) -> int:
    return int(ws.get_setting(SETTING_WINDOW, DEFAULT_WINDOW_S))


def window_text(seconds: int) -> str:
    """300 -> '5m' (the shortest exact form ``parse_window`` reads back)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_labels(text: str) -> list[str]:
    labels = [s.strip() for s in text.split(",") if s.strip()]
    if not labels:
        raise ValueError("path labels: give at least one label name, e.g. model_name")
    bad = [x for x in labels if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", x)]
    if bad:
        raise ValueError(f"path labels: {', '.join(bad)} is not a Prometheus label name")
    return labels


def format_rules(rules: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"{pattern} => {path}" for pattern, path in rules)


def parse_rules(text: str) -> list[tuple[str, str]]:
    """``REGEX => PATH`` per line (blank lines and ``#`` comments ignored); the regex must match the
    whole path key (label values joined with `` / ``), first matching rule wins."""
    rules = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, path = line.partition("=>")
        if not sep or not pattern.strip() or not path.strip():
            raise ValueError(f"rule line {n}: expected REGEX => PATH, got {line!r}")
        try:
            re.compile(pattern.strip())
        except re.error as exc:
            raise ValueError(f"rule line {n}: bad regex {pattern.strip()!r} ({exc})") from None
        rules.append((pattern.strip(), path.strip()))
    return rules


_HEALTH_SQL = (
    "select window_start, path, signal, stat, value from cube_rows "
    "where cube_id = $id and stat in ('resets', 'repairs') and value > 0 order by window_start, path, signal"
)


def data_health(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """Counter resets and repaired (non-monotone) buckets per window, path and signal (cube stats)."""
    return ws.cursor().execute(_HEALTH_SQL, {"id": cube_id}).df()


# == promise ======================================================================================
PROMISE_FIELDS = ("ttft_s", "tpot_s", "e2e_s", "queue_s", "target")
CUSTOM = "custom"


def request_paths(ws: Workspace, cube_id: int) -> list[str]:
    """Paths with request-level histograms (the ones a promise applies to)."""
    rows = ws.cursor().execute(
        "select distinct path from cube_rows where cube_id = $id and stat = 'count' "
        "and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue') order by path", {"id": cube_id}).fetchall()
    return [r[0] for r in rows]


def default_promise(path: str) -> dict[str, Any]:
    """A starting promise: MLPerf v5.1 Llama 3.1 8B Interactive for paths that say so, else Server."""
    lowered = path.lower()
    name = ("mlperf-v5.1-llama3.1-8b-interactive" if any(w in lowered for w in ("interactive", "chat"))
            else "mlperf-v5.1-llama3.1-8b-server")
    return preset_values(name)


def preset_values(name: str) -> dict[str, Any]:
    p = pm.presets()[name]
    return {"preset": name, "ttft_s": float(p["ttft_s"]), "tpot_s": float(p["tpot_s"]), "e2e_s": None,
            "queue_s": None, "target": float(p["target"])}


def stored_promises(ws: Workspace, paths: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The promise of each path: as stored in the workspace, else ``default_promise``."""
    stored = ws.get_setting(SETTING_PROMISES, {}) or {}
    return {p: {**default_promise(p), **stored.get(p, {})} for p in paths}


def promise_tuple(path: str, values: Mapping[str, Any]) -> tuple:
    """A promise as a plain hashable tuple (path, ttft_s, tpot_s, e2e_s, queue_s, target): cache keys."""
    return (path, *[None if values.get(f) is None else float(values[f]) for f in PROMISE_FIELDS])


def to_promises(tuples: Iterable[tuple]) -> list[pm.Promise]:
    return [pm.Promise(path=t[0], ttft_s=t[1], tpot_s=t[2], e2e_s=t[3], queue_s=t[4], target=t[5]) for t in tuples]


SIGNAL_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E", "queue": "queue"}


def promise_tables(frame: pd.DataFrame, exact_joint: Mapping[str, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per path: requests, joint interval, attainment, verdict, budget;
    one row per path and signal: threshold, share with [low, high], exact or estimate, basis).
    Shares are percentages."""
    summary, marginals = [], []
    for _, row in frame.iterrows():
        doc = pm.path_report(row, exact_share=exact_joint.get(row["path"]))
        joint = doc["joint"]
        summary.append({
            "path": doc["path"], "requests": doc["requests"], "failed": doc["failed_requests"],
            "joint breach low %": _pct(joint["share_low"]), "joint breach high %": _pct(joint["share_high"]),
            "joint exact %": _pct(joint["exact_share"]), "target %": _pct(doc["target"]),
            "attainment low %": _pct(doc["attainment_low"]), "attainment high %": _pct(doc["attainment_high"]),
            "meets target": {True: "yes", False: "no", None: "undetermined"}[doc["meets_target"]],
            "budget remaining %": _pct(doc["budget_remaining"]),
            "budget remaining (best case) %": _pct(doc["budget_remaining_best"]),
        })
        for signal, label in SIGNAL_NAMES.items():
            m = doc[signal]
            if m is None:
                continue
            basis = "per token (ITL)" if m.get("basis") == "tokens" else "per request"
            marginals.append({
                "path": doc["path"], "signal": label, "threshold (s)": m["threshold_s"],
                "breach %": _pct(m["share"]), "low %": _pct(m["share_low"]), "high %": _pct(m["share_high"]),
                "exact": {True: "exact", False: "estimate", None: "no data"}[m["exact"]],
                "basis": basis if signal == "tpot" else "per request",
            })
    return pd.DataFrame(summary), pd.DataFrame(marginals)


def headlines(summary: pd.DataFrame, marginals: pd.DataFrame) -> dict[str, list[tuple[str, str, str]]]:
    """Per path, (label, value, help) for a row of metrics: each threshold's share, the joint share and
    the verdict against the target."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for s in summary.to_dict("records"):
        items = []
        for m in marginals[marginals["path"] == s["path"]].to_dict("records"):
            exact = m["exact"] == "exact"
            items.append((f"{m['signal']} > {m['threshold (s)']:g} s" + ("" if exact else " (estimate)"),
                          f"{m['breach %']:.2f} %",
                          "exact: the threshold is a bucket bound" if exact else
                          f"interpolated inside its bucket; bounds {m['low %']:.2f}–{m['high %']:.2f} %"))
        if s["joint exact %"] is not None and not pd.isna(s["joint exact %"]):
            items.append(("joint breach (exact)", f"{s['joint exact %']:.2f} %", "from per-request records"))
        else:
            items.append(("joint breach", f"{s['joint breach low %']:.2f}–{s['joint breach high %']:.2f} %",
                          "Fréchet interval: the marginals do not identify the joint share"))
        items.append((f"meets {s['target %']:g} %", s["meets target"],
                      f"attainment {s['attainment low %']:.2f}–{s['attainment high %']:.2f} %"))
        out[s["path"]] = items
    return out


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def bucket_bounds(ws: Workspace, cube_id: int) -> dict[str, list[float]]:
    """Finite bucket bounds (seconds) per histogram signal of a cube."""
    rows = ws.cursor().execute(
        "select distinct signal, le from cube_rows where cube_id = $id and stat = 'increase' "
        "and le is not null and isfinite(le) order by signal, le", {"id": cube_id}).fetchall()
    out: dict[str, list[float]] = {}
    for signal, le in rows:
        out.setdefault(signal, []).append(float(le))
    return out


def bound_notes(marginals: pd.DataFrame, bounds: Mapping[str, Sequence[float]]) -> list[str]:
    """One line per threshold that is not a bucket bound, with the neighbouring bounds to pick instead."""
    notes = []
    signal_of = {v: k for k, v in SIGNAL_NAMES.items()}
    estimates = marginals[marginals["exact"] == "estimate"] if len(marginals) else marginals
    for _, row in estimates.iterrows():
        signal = signal_of[row["signal"]]
        les = bounds.get("itl" if signal == "tpot" and row["basis"] != "per request" else signal, [])
        t = row["threshold (s)"]
        below = max((b for b in les if b < t), default=None)
        above = min((b for b in les if b > t), default=None)
        near = " or ".join(f"{b:g} s" for b in (below, above) if b is not None)
        notes.append(f"{row['path']}: {row['signal']} {t:g} s is not a bucket bound, so its share is an "
                     f"interpolated estimate inside [{row['low %']:.2f} %, {row['high %']:.2f} %]. Use {near}, "
                     f"or add {t:g} to the histogram's buckets, to make it exact.")
    return notes


ALERT_LABELS = {"page_1h": "page 1h/5m", "page_6h": "page 6h/30m", "ticket_3d": "ticket 3d/6h"}


def alert_summary(alerts: pd.DataFrame) -> pd.DataFrame:
    """The latest state of each alert rule per path, and how many windows fired."""
    if alerts.empty:
        return pd.DataFrame()
    rows = []
    for path, part in alerts.sort_values("window_start").groupby("path", sort=True):
        last = part.iloc[-1]
        row = {"path": path, "at": last["window_start"]}
        for key, label in ALERT_LABELS.items():
            state = last[key] if isinstance(last[key], str) else "n/a"
            row[label] = f"{state} ({int((part[key] == 'firing').sum())} windows firing)"
        rows.append(row)
    return pd.DataFrame(rows)


# == economics ====================================================================================
ECON_DEFAULTS: dict[str, Any] = {
    "replicas": "2:8", "traffic": "1.0", "context": "1.0", "seeds": 1, "horizon_hours": 720.0,
    "price_basis": "GPU-hour", "gpu_hour": 2.5, "gpus_per_replica": 1.0, "replica_hour": 2.5,
    "breach": {}, "default_breach": 0.01, "split": "requests", "router": None,
    "max_num_seqs": None, "max_num_batched_tokens": None, "kv_cache_tokens": None, "max_model_len": None,
    "calibrate": True, "observed_replicas": None, "datasets": None,
}
ROUTERS = (None, "least_outstanding", "round_robin", "random", "power_of_two")  # None: assumed
# the engine facts of the form: empty = read from the data (or vLLM's default, stated as assumed)
ENGINE_FACTS = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len")


def economics_inputs(ws: Workspace) -> dict[str, Any]:
    stored = ws.get_setting(SETTING_ECONOMICS, {}) or {}
    return {**ECON_DEFAULTS, **{k: v for k, v in stored.items() if k in ECON_DEFAULTS}}


def default_datasets(frame: pd.DataFrame) -> list[int]:
    """Datasets to replay by default: every one that is not a single snapshot."""
    keep = frame[~frame["snapshot"]]["dataset_id"].tolist()
    return [int(i) for i in (keep or frame["dataset_id"].tolist())]


def replay_spec(inputs: Mapping[str, Any], labels: Sequence[str], rules: Sequence[tuple[str, str]],
                promises: Mapping[str, Mapping[str, Any]]) -> str:
    """The canonical JSON of everything a replay depends on (the cache key of analyses and scenarios).

    Prices are not in it, so a price change re-prices cached predictions. Only TTFT and TPOT reach
    the twin, so the E2E/queue thresholds and the target are left out too."""
    grid_axes(inputs)  # refuse a bad range or multiplier before anything runs
    spec = {
        "datasets": sorted(int(i) for i in inputs["datasets"]),
        "path_labels": list(labels),
        "rules": [list(r) for r in rules],
        "promises": sorted([p, v.get("ttft_s"), v.get("tpot_s")] for p, v in promises.items()),
        "assumptions": engine_facts(inputs),
        "observed_replicas": inputs.get("observed_replicas") or None,
        "calibrate": bool(inputs["calibrate"]),
        "seeds": int(inputs["seeds"]),
    }
    if not spec["datasets"]:
        raise ValueError("choose at least one dataset to replay")
    if spec["seeds"] < 1:
        raise ValueError("seeds: at least 1")
    return json.dumps(spec, sort_keys=True)


def engine_facts(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The engine facts the user gave on the form (an empty field is left to the data), checked."""
    out: dict[str, Any] = {}
    for k in ENGINE_FACTS:
        v = inputs.get(k)
        if v is None or v == "":
            continue
        if int(v) < 1:
            raise ValueError(f"{k}: must be at least 1 (leave it empty to read it from the data)")
        out[k] = int(v)
    if inputs.get("router"):
        out["router"] = inputs["router"]
    return out


def grid_axes(inputs: Mapping[str, Any]) -> tuple[list[int], list[float], list[float]]:
    """(replica counts, traffic multipliers, context multipliers) in the CLI's syntax."""
    from app.economics.inputs import parse_multipliers, parse_replicas

    return (parse_replicas(str(inputs["replicas"])), parse_multipliers(str(inputs["traffic"]), "traffic"),
            parse_multipliers(str(inputs["context"]), "context"))


def scenario_grid(inputs: Mapping[str, Any]) -> list[tuple[int, float, float]]:
    """(replicas, traffic, context) of every scenario, in the order ``scenarios.grid`` runs them."""
    replicas, traffic, context = grid_axes(inputs)
    if len(replicas) * len(traffic) * len(context) > 200:
        raise ValueError("more than 200 scenarios: narrow the replica range or the multipliers")
    return [(n, g, m) for g in traffic for m in context for n in replicas]


def analyse(ws: Workspace, spec_json: str) -> Any:
    """``scenarios.analyse`` for a replay spec (fit, demand, replay at the observed N)."""
    from app.economics import scenarios
    from app.economics.capacity import Assumptions

    spec = json.loads(spec_json)
    promises = [pm.Promise(path=p, ttft_s=t, tpot_s=u) for p, t, u in spec["promises"]]
    return scenarios.analyse(ws, spec["datasets"], promises, spec["path_labels"], Assumptions(**spec["assumptions"]),
                             observed_replicas=spec["observed_replicas"], calibrate=spec["calibrate"],
                             seeds=spec["seeds"])


def prices(inputs: Mapping[str, Any], paths: Iterable[str]) -> Any:
    from app.economics.money import Prices

    breach = {p: float(inputs["breach"].get(p, inputs["default_breach"])) for p in paths}
    if inputs["price_basis"] == "replica-hour":
        return Prices(replica_hour=float(inputs["replica_hour"]), breach=breach,
                      horizon_hours=float(inputs["horizon_hours"]))
    return Prices.from_gpu(float(inputs["gpu_hour"]), float(inputs["gpus_per_replica"]), breach,
                           float(inputs["horizon_hours"]))


def price(run: Mapping[str, Any]) -> dict[str, Any]:
    """The priced scenarios document of a run (``decision.document``, as ``headroom scenarios`` writes it):
    pure arithmetic on the cached predictions, so a price change costs milliseconds."""
    from app.economics import decision

    analysis, inputs = run["analysis"], run["inputs"]
    return jsonable(decision.document(analysis, run["predictions"], prices(inputs, analysis.thresholds),
                                      split=inputs["split"], cross_check=run.get("cross_check"),
                                      queueing=run.get("queueing")))


def scenario_table(doc: Mapping[str, Any]) -> pd.DataFrame:
    """One row per scenario and path (shares in %, costs in USD over the horizon)."""
    rows = []
    for r in doc["scenarios"]:
        rows.append({
            "N'": r["replicas"], "traffic": r["traffic"], "context": r["context"], "path": r["path"],
            "joint breach %": _pct(r["breach_share"]), "low %": _pct(r["breach_share_low"]),
            "high %": _pct(r["breach_share_high"]), "TTFT %": _pct(r["ttft_share"]),
            "TPOT %": _pct(r["tpot_share"]), "flags": "; ".join(r.get("flags") or r["extrapolation_reasons"]) or "",
            "requests": r["requests"], "expected breaches": r["expected_breaches"],
            "breach cost $": r["breach_cost"], "headroom cost $": r["headroom_cost"],
            "total cost $": r["total_cost"], "cost per kept request $": r["cost_per_kept_request"],
        })
    return pd.DataFrame(rows)


def fleet_frame(doc: Mapping[str, Any], traffic: float | None = None, context: float | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(doc["fleet"])
    if frame.empty or traffic is None:
        return frame
    return frame[(frame["traffic"] == traffic) & (frame["context"] == context)].sort_values("replicas")


def verdict(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per (traffic, context): the cheapest N', whether the interval ends agree, and the headroom cost
    per request that kept the promise at that N' (every path together)."""
    out = []
    for c in doc["cheapest_by_traffic_context"]:
        at = [r for r in doc["scenarios"] if (r["replicas"], r["traffic"], r["context"]) ==
              (c["replicas"], c["traffic"], c["context"])]
        headroom = sum(r["headroom_cost"] for r in at)
        kept = sum(r["requests"] * (1 - r["breach_share"]) for r in at)
        out.append({**c, "cost_per_kept_request": headroom / kept if kept > 0 else None})
    return out


def break_even_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per path: the price of one breach at which one more replica than the cheapest pays for itself."""
    base = doc["cheapest"]
    if not base:
        return []
    nxt = base["replicas"] + 1
    computed = any(r["replicas"] == nxt and (r["traffic"], r["context"]) == (base["traffic"], base["context"])
                   for r in doc["scenarios"])
    out = []
    for path, price in doc["break_even_breach_price"].items():
        if not computed:
            why = f"add N'={nxt} to the replica range to see it"
        elif price is None:
            why = f"replica {nxt} removes none of its breaches"
        else:
            why = f"**${price:.4f}** (entered: ${doc['prices']['breach'].get(path, 0):.4f})"
        out.append(f"Break-even price of one **{path}** breach for replica {nxt}: {why}")
    return out


# -- saved scenario sets (``app.economics.saved``: the CLI's ``headroom saved`` reads the same sets) --------
def saved_inputs(run: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of a run in the shape ``headroom scenarios --save`` stores them, plus the dashboard's
    own form under ``dashboard`` (so "use these inputs" restores the form exactly)."""
    spec, form = json.loads(run["spec"]), run["inputs"]
    doc_prices = prices(form, [p for p, _, _ in spec["promises"]])
    return jsonable({
        "datasets": spec["datasets"], "path_labels": spec["path_labels"],
        "promises": [pm.Promise(path=p, ttft_s=t, tpot_s=u).as_param() for p, t, u in spec["promises"]],
        **dict(zip(("replicas", "traffic", "context"), grid_axes(form), strict=True)),
        "seeds": spec["seeds"],
        "prices": {"replica_hour": doc_prices.replica_hour, "breach": dict(doc_prices.breach),
                   "horizon_hours": doc_prices.horizon_hours, "cost_split": form["split"]},
        "assumptions": spec["assumptions"], "dashboard": dict(form),
    })


def form_inputs(saved: Mapping[str, Any]) -> dict[str, Any]:
    """The Economics form for a saved set's inputs: the dashboard's own, or translated from a CLI set."""
    if "dashboard" in saved:
        return {**ECON_DEFAULTS, **saved["dashboard"]}
    p = saved.get("prices", {})
    a = saved.get("assumptions", {})
    return {**ECON_DEFAULTS,
            "replicas": ",".join(str(n) for n in saved.get("replicas", [])) or ECON_DEFAULTS["replicas"],
            "traffic": ",".join(f"{g:g}" for g in saved.get("traffic", [1.0])),
            "context": ",".join(f"{m:g}" for m in saved.get("context", [1.0])),
            "seeds": int(saved.get("seeds", 1)), "datasets": saved.get("datasets"),
            "price_basis": "replica-hour", "replica_hour": float(p.get("replica_hour", 0.0)),
            "horizon_hours": float(p.get("horizon_hours", 720.0)), "breach": dict(p.get("breach", {})),
            "split": p.get("cost_split", "requests"),
            **{k: a[k] for k in ("router", *ENGINE_FACTS) if k in a}}


def sets_table(sets: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per saved set: when, what was run, and the headline result."""
    rows = []
    for name, s in sets.items():
        i, doc = s.get("inputs", {}), s["document"]
        c = doc.get("cheapest") or {}
        rows.append({"name": name, "saved (UTC)": s.get("saved_at"),
                     "replicas": ", ".join(str(n) for n in i.get("replicas", [])),
                     "traffic": ", ".join(f"{g:g}" for g in i.get("traffic", [])), "seeds": i.get("seeds"),
                     "replica-hour $": doc["prices"]["replica_hour"], "horizon (h)": doc["prices"]["horizon_hours"],
                     "cheapest N'": c.get("replicas"), "total cost $": c.get("total_cost")})
    return pd.DataFrame(rows)


def set_fleet(s: Mapping[str, Any]) -> pd.DataFrame:
    """A saved set's fleet totals for its base case (the case of its cheapest N')."""
    doc = s["document"]
    return fleet_frame(doc, doc["cheapest"]["traffic"], doc["cheapest"]["context"]) if doc.get("cheapest") else \
        pd.DataFrame(doc["fleet"])


def compare_headlines(names: Sequence[str], sets: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Side by side: the headline result and the inputs that tell two saved sets apart."""
    def headline(s: Mapping[str, Any]) -> dict[str, str]:
        doc, i = s["document"], s.get("inputs", {})
        c = doc.get("cheapest") or {}
        agree = all(x["determined_by_data"] for x in doc["cheapest_by_traffic_context"])
        return {"cheapest N'": str(c.get("replicas")),
                "total cost at the cheapest N'": "n/a" if not c else f"${c['total_cost']:,.0f}",
                "interval ends agree": "yes" if agree else "no",
                "replica-hour": f"${doc['prices']['replica_hour']:g}",
                "breach prices": ", ".join(f"{p} ${v:g}" for p, v in sorted(doc["prices"]["breach"].items())),
                "horizon": f"{doc['prices']['horizon_hours']:g} h",
                "promises": "; ".join(f"{p['path']}: TTFT {p['ttft_s']} s, TPOT {p['tpot_s']} s"
                                      for p in i.get("promises", [])),
                "replicas": ", ".join(str(n) for n in i.get("replicas", [])), "seeds": str(i.get("seeds")),
                "datasets": ", ".join(str(d) for d in i.get("datasets", []))}

    heads = [headline(s) for s in sets]
    return pd.DataFrame([{"": k, **{f"{n}{' (B)' if i and n == names[0] else ''}": h[k]
                                    for i, (n, h) in enumerate(zip(names, heads, strict=True))}}
                         for k in heads[0]])


# == capacity model ===============================================================================
MODEL_ROWS = (
    ("step_base_s", "step time: base", 1e3, "ms per step"),
    ("step_per_seq_s", "step time: per decoding sequence", 1e6, "µs per sequence"),
    ("step_per_seq_sq_s", "step time: per decoding sequence squared", 1e9, "ns per sequence²"),
    ("step_per_prefill_token_s", "step time: per prefill token", 1e6, "µs per token"),
    ("step_per_context_token_s", "step time: per context token read", 1e9, "ns per token"),
    ("step_per_prefill_pair_s", "step time: per prefill attention pair", 1e9, "ns per pair"),
    ("tpot_scale", "calibration: decode step time ×", 1.0, "factor"),
    ("prefill_scale", "calibration: prefill time ×", 1.0, "factor"),
    ("kv_tokens", "KV capacity", 1.0, "tokens"),
    ("max_num_seqs", "max_num_seqs", 1.0, "sequences"),
    ("max_num_batched_tokens", "max_num_batched_tokens", 1.0, "tokens per step"),
    ("max_model_len", "max_model_len", 1.0, "tokens"),
    ("block_size", "KV block size", 1.0, "tokens"),
)


def model_table(model: Any) -> pd.DataFrame:
    """The fitted replica model as (quantity, value, unit, source, how) rows: each parameter with where
    it came from (given, engine config, fitted, calibrated, assumed)."""
    from app.economics.capacity import parameter_value

    rows = []
    for name, label, scale, unit in MODEL_ROWS:
        src = model.sources.get(name)
        rows.append((label, scale * float(parameter_value(model, name)), unit, src.kind if src else "",
                     src.detail if src else ""))
    rows.append(("router", math.nan, model.router, model.sources["router"].kind if "router" in model.sources
                 else "", model.sources["router"].detail if "router" in model.sources else ""))
    rows.append(("prefill throughput", model.prefill_tokens_per_s, "tokens per second", "fitted", "1 / (per prefill "
                 "token × prefill calibration)"))
    rows += [(f"step time at batch {b}", 1e3 * model.step_time(b, 0, 0), "ms", "fitted", "the calibrated law")
             for b in (1, 8, 32, 64, 128)]
    return pd.DataFrame(rows, columns=["quantity", "value", "unit", "source", "how"])


def model_error_table(analysis: Any) -> pd.DataFrame:
    """Per path at the observed N: observed shares (histograms) against the calibrated twin's, the
    residuals (relative above 1 %, in units of 0.1 pp below) and the mean queue time."""
    obs = analysis.observed
    rows = []
    for path, err in analysis.model_error.items():
        rows.append({
            "path": path, "requests": obs.requests.get(path),
            "observed TTFT %": _pct(obs.ttft.get(path)), "twin TTFT %": _pct(err.get("ttft_predicted")),
            "observed TPOT %": _pct(obs.tpot.get(path)), "twin TPOT %": _pct(err.get("tpot_predicted")),
            "observed joint low %": _pct(obs.joint_low.get(path)),
            "observed joint high %": _pct(obs.joint_high.get(path)),
            "twin joint %": _pct(err.get("joint_predicted")),
            "TTFT residual %": _pct(err.get("ttft")), "TPOT residual %": _pct(err.get("tpot")),
            "observed queue ms": _ms(err.get("queue_mean_s_observed")),
            "twin queue ms": _ms(err.get("queue_mean_s_predicted")),
            "flagged": any(f.path == path for f in analysis.flags),
        })
    return pd.DataFrame(rows)


def _ms(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else 1e3 * x


def model_flags(analysis: Any) -> list[str]:
    """Every flag of the analysis in words (the same the CLI prints)."""
    return [f"{f.path or 'every path'}: {f.message}" for f in analysis.flags]


# == model views ==================================================================================
def path_load(requests: pd.DataFrame, window_s: int, path: str) -> pd.DataFrame:
    """Per window: the path's requests, the replicas reporting (any path) and the path's per-replica load
    (req/s) — the load axis of ``crosscheck.load_response``."""
    replicas = requests.groupby("window_start")["replicas"].max()
    own = requests[requests["path"] == path].set_index("window_start")["requests"]
    frame = pd.DataFrame({"requests": own, "replicas": replicas.reindex(own.index)})
    frame = frame[(frame["replicas"] > 0) & (frame["requests"] > 0)]
    frame["load"] = frame["requests"] / window_s / frame["replicas"]
    return frame.reset_index()


def scenario_load(load: pd.DataFrame, replicas: int, traffic: float = 1.0) -> float:
    """A scenario's place on the load axis: the request-weighted mean per-replica load with N' replicas
    and traffic x g (each window's load x · N_w · g / N')."""
    n = load["requests"].to_numpy(float)
    x = (load["load"] * load["replicas"] * traffic / replicas).to_numpy(float)
    return float((n * x).sum() / n.sum())


def load_axis(cross_check: Mapping[str, Any], path: str, predictions: Sequence[Any], load: pd.DataFrame,
              traffic: float = 1.0, context: float = 1.0) -> dict[str, pd.DataFrame]:
    """The curve of ``path`` (``crosscheck.load_response``: isotonic fits of the per-window joint share's
    low and high ends), its readings and the capacity model's predictions, on one load axis (``load``:
    ``path_load`` of the same path)."""
    entry = cross_check[path]
    readings = [r for r in entry["readings"] if r["traffic"] == traffic]
    model = [p for p in predictions if p.path == path and (p.traffic, p.context) == (traffic, context)]
    return {
        "curve": pd.DataFrame(entry["curve"], columns=["load", "share_low", "share_high"]),
        "range": tuple(entry["observed_load_range"]),
        "readings": pd.DataFrame([{**r, "load": scenario_load(load, r["replicas"], traffic)} for r in readings],
                                 columns=["replicas", "load", "share", "share_low", "share_high", "extrapolated"]),
        "model": pd.DataFrame([{"replicas": p.replicas, "load": scenario_load(load, p.replicas, traffic),
                                "share": p.breach_share, "share_low": p.breach_share_low,
                                "share_high": p.breach_share_high, "extrapolated": p.extrapolated} for p in model],
                              columns=["replicas", "load", "share", "share_low", "share_high", "extrapolated"]),
    }

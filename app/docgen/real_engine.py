"""The real-engine accuracy page from the harness's JSON (``python -m app.bench.realengine suite``):
Headroom fitted on a real vLLM engine's export, against what the engine did in every scenario."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.docgen.tables import Column, generated_header, pct, provenance_block, table

COMMAND = ("python -m app.docgen accuracy-real-engine --from docs/data/real-engine.json "
           "--out docs/accuracy-real-engine.md")


def _share(x: float | None) -> str:
    return "–" if x is None else pct(x)


def _interval(r: Mapping[str, Any]) -> str:
    return f"{pct(r['predicted'])} [{100 * r['low']:.2f}, {100 * r['high']:.2f}]"


ROWS = [Column("N'", key="replicas", align="right"), Column("traffic", fmt=lambda x: f"x{x:g}", align="right"),
        Column("context", fmt=lambda x: f"x{x:g}", align="right"), Column("metric", fmt=str.upper),
        Column("predicted [interval]", value=_interval),
        Column("measured (each run)", value=lambda r: f"{pct(r['measured'])} ("
               + ", ".join(pct(x) for x in r["measured_runs"]) + ")"),
        Column("flagged", value=lambda r: "yes" if r["flagged"] else ""),
        Column("goal", value=lambda r: "met" if r["meets_goal"] else "**missed**")]

RESIDUAL = [Column("export"), Column("promise", key="threshold"), Column("metric", fmt=str.upper),
            Column("observed (histogram)", key="observed", fmt=_share, align="right"),
            Column("twin at the observed N", key="twin", fmt=_share, align="right"),
            Column("residual", key="residual", fmt=lambda x: f"{x:.0%}", align="right"),
            Column("draw's noise (2σ)", key="noise", fmt=lambda x: f"±{100 * x:.2f} pp", align="right"),
            Column("measured per request, each observed run", key="runs",
                   value=lambda r: ", ".join(pct(x) for x in r["runs"]))]

STEP_LAW = [Column("source"), Column("base per step", key="base_ms", fmt=lambda x: f"{x:.2f} ms", align="right"),
            Column("per decoding request", key="per_seq_ms", fmt=lambda x: f"{x:.3f} ms", align="right"),
            Column("per prefill token", key="per_prefill_token_ms", fmt=lambda x: f"{x:.4f} ms", align="right")]

RUNS = [Column("run", key="name"), Column("replicas", align="right"),
        Column("traffic", fmt=lambda x: f"x{x:g}", align="right"), Column("context", fmt=lambda x: f"x{x:g}", align="right"),
        Column("requests", fmt=",", align="right"), Column("errors", align="right"),
        Column("sent late", key="sent_late", align="right"),
        Column("each core busy (mean)", value=lambda r: ", ".join(
            f"{100 * b:.0f} %" for b in (r.get("machine_load") or {}).get("cpu_busy_mean", [])) or None),
        Column("the engine's step law (ms)", value=lambda r: (
            f"{r['step_truth']['base_ms']:.2f} + {r['step_truth']['per_seq_ms']:.3f} B + "
            f"{r['step_truth']['per_prefill_token_ms']:.4f} P" if r.get("step_truth") else None)),
        Column("engine speed (step time / the observed run's law)", value=lambda r: _speed(
            r.get("engine_speed"), r.get("truth_disturbed")), align="right")]


def _checked(columns: list[Column], runs: Sequence[Mapping[str, Any]]) -> list[Column]:
    """The runs' columns, the engine-speed one only where the document has the check (a document made
    before the check was made has no step logs left to make it on)."""
    return columns if any("engine_speed" in r for r in runs) else columns[:-1]


def _speed(ratio: float | None, disturbed: bool | None) -> str | None:
    """A run's step time over what the observed run's step law gives for its steps; a disturbed one said."""
    if ratio is None:
        return None
    return f"x{ratio:.2f}" + (" (disturbed: not a truth)" if disturbed else "")


def _missed(rows: Sequence[Mapping[str, Any]], where: Callable[[Mapping[str, Any]], str],
            beyond: Callable[[Mapping[str, Any]], str]) -> list[str]:
    """The section of the rows that miss the goal: ``where`` names a row, ``beyond`` adds to an unflagged
    row's reason what else its miss goes beyond."""
    missed = [r for r in rows if not r["meets_goal"] and not r.get("truth_disturbed")]
    apart = [r for r in rows if not r["meets_goal"] and r.get("truth_disturbed")]
    out = ["## Where the goal is not met", ""]
    if not missed:
        out.append("Every row meets it" + (" but those against a disturbed run, below." if apart else "."))
    out += [_missed_line(r, where, beyond) for r in missed]
    if apart:
        out += ["", "Against a truth run whose engine did not step at the observed run's speed (it measured the "
                "machine, not the scenario: not counted in the result; the run is to be repeated on a quiet "
                "machine):", ""]
        out += [_missed_line(r, where, beyond) for r in apart]
    return out


def _missed_line(r: Mapping[str, Any], where: Callable[[Mapping[str, Any]], str],
                 beyond: Callable[[Mapping[str, Any]], str]) -> str:
    why = ("its interval does not hold the measured share" if r["flagged"] else
           f"off by {abs(r['predicted'] - r['measured']) * 100:.2f} pp, beyond the tolerance{beyond(r)}")
    return (f"- {where(r)}, {r['metric'].upper()}: predicted {pct(r['predicted'])}, measured {pct(r['measured'])}: "
            f"{why}" + (f" (flags: {'; '.join(r['flags'])})" if r["flags"] else "") + ".")


def goal_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """How many rows meet the goal; rows against a disturbed truth run (``truth_disturbed``: its engine
    stepped more than ``app.bench.realengine.compare.SPEED_TOL`` off the observed run's) are set apart,
    not counted."""
    kept = [r for r in rows if not r.get("truth_disturbed")]
    flagged = [r for r in kept if r["flagged"]]
    plain = [r for r in kept if not r["flagged"]]
    line = (f"{sum(r['meets_goal'] for r in kept)} of {len(kept)} rows meet the goal: "
            f"{sum(r['meets_goal'] for r in plain)} of {len(plain)} unflagged within tolerance, "
            f"{sum(r['interval_holds'] for r in flagged)} of {len(flagged)} flagged intervals hold the measured share")
    apart = len(rows) - len(kept)
    if apart:
        line += (f"; {apart} more against a run whose engine stepped off the observed run's speed by more than "
                 "the harness's tolerance (a disturbed truth: not counted)")
    return line


def _residual_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for fit in doc["fits"]:
        res = next(iter(fit["residual"].values()))
        for metric in ("ttft", "tpot"):
            out.append({"export": fit["export"], "threshold": fit["threshold"], "metric": metric,
                        "observed": res.get(f"{metric}_observed"), "twin": res.get(f"{metric}_predicted"),
                        "residual": res.get(metric), "noise": res.get(f"{metric}_noise"),
                        "runs": fit["observed_truth"][f"{metric}_runs"]})
    return out


def _step_laws(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    mod = doc["fits"][0]["model"]
    out = [{"source": f"Headroom, from the export (calibrated x{mod['tpot_scale']:.3f} decode, "
                      f"x{mod['prefill_scale']:.3f} prefill)",
            "base_ms": mod["step_base_ms"] * mod["tpot_scale"], "per_seq_ms": mod["step_per_seq_ms"] * mod["tpot_scale"],
            "per_prefill_token_ms": mod["step_per_prefill_token_ms"] * mod["prefill_scale"]}]
    for r in doc["runs"]:
        st = r.get("step_truth")
        if st and (r["replicas"], r["traffic"], r["context"]) == (1, 1.0, 1.0):
            out.append({"source": f"the engine's per-step log, run {r['name']} ({st['steps']:,} steps)", **st})
    return out


def page(doc: Mapping[str, Any], command: str = COMMAND) -> str:
    rows = doc["rows"]
    goal = doc["goal"]
    mod = doc["fits"][0]["model"]
    out = [generated_header("Accuracy on a real vLLM engine", command),
           "The truth the economics is judged against here is a real engine: vLLM's CPU build serving a small "
           "Llama with random weights built on the machine, one replica per core, driven by an open-loop trace "
           "(Poisson arrivals on a slow sine with a 30 s burst, lognormal prompts and outputs, streamed), scraped "
           "every 5 s by a real Prometheus. Headroom is fitted on the observed run's export alone "
           f"(`{doc['observed_run']}`: one replica at traffic x1) with the launch flags an operator knows ("
           + ", ".join(f"{k} {v}" for k, v in doc["given"].items()) + "); every scenario's truth is a real run of "
           "the engine at that scenario, measured per request by the driver (the harness: "
           "[Economics](economics.md#accuracy-on-a-real-engine)).", "",
           provenance_block(doc.get("provenance")), "",
           f"**Goal**: at the observed N the residual within the truth's own noise plus 10 %; every unflagged row "
           f"within max(±{100 * goal['relative']:g} %, ±{100 * goal['absolute']:g} pp, the truth's own run-to-run "
           "spread) of the measured share; every flagged row's interval holding it. Thresholds sit on the "
           "histograms' bucket bounds, where the observed shares are exact.", "",
           f"**Result**: {goal_line(rows)}.", "",
           "## The fit against the engine's own step log", "", table(_step_laws(doc), STEP_LAW), "",
           f"Token budget {mod['max_num_batched_tokens']} ({mod['sources'].get('max_num_batched_tokens', '')}); KV "
           f"{mod['kv_tokens']:,.0f} tokens ({mod['sources'].get('kv_tokens', '')}); step law: {mod['step_basis']}.", "",
           "## The observed fleet: residual against the truth's own noise", "", table(_residual_rows(doc), RESIDUAL), "",
           "Flags the fit raised: " + ("; ".join(mod["analysis_flags"]) or "none") + ".", "", "## Every scenario", ""]
    for export in dict.fromkeys(r["export"] for r in rows):
        for label in dict.fromkeys(r["threshold"] for r in rows if r["export"] == export):
            part = [r for r in rows if r["export"] == export and r["threshold"] == label]
            out += [f"### {label}, fitted on the {export} export", "", goal_line(part) + ".", "", table(part, ROWS), ""]
    out += _missed(rows, lambda r: f"{r['export']}, {r['threshold']}, N'={r['replicas']} x{r['traffic']:g} "
                               f"x{r['context']:g}",
                   lambda r: f" and the {100 * max(r['noise'], 0):.2f} pp of the truth's spread")
    out += ["", "## The runs", "", table(doc["runs"], _checked(RUNS, doc["runs"])), "",
            "One replica leaves the other core to the driver and Prometheus; two take both cores, so the driver "
            "and Prometheus share them with the engines. The machine is shared: a run waits for a quiet machine "
            "before it starts, and the cores' busy shares say how quiet it stayed.", ""]
    out += _speeds(doc)
    return "\n".join(out)


def _speeds(doc: dict) -> list[str]:
    """Each run's engine against the observed run's, by their own per-step logs: the step of a batch of
    8 decoding requests."""
    laws = {r["name"]: r.get("step_truth") or {} for r in doc["runs"]}
    base = laws.get(doc["observed_run"], {})
    if not base.get("base_ms"):
        return []

    def at8(law: dict) -> float:
        return law["base_ms"] + 8 * law["per_seq_ms"]

    parts = [f"{name} {at8(law):.1f} ms ({at8(law) / at8(base) - 1:+.0%})" for name, law in sorted(laws.items())
             if law.get("base_ms") and name != doc["observed_run"]]
    return [f"The engines' own step at a batch of 8 decoding requests, from each run's per-step log: "
            f"{doc['observed_run']} (observed) {at8(base):.1f} ms; " + "; ".join(parts) + ". A step is slower "
            "where contexts are longer (the KV a step reads: context x1.5) and where the machine is busier: two "
            "replicas at x2 carry the observed run's traffic each, so what their step loses is the machine's "
            "(the driver and Prometheus share the replicas' cores), a machine the fit never saw.", ""]


PREFIX_COMMAND = ("python -m app.docgen accuracy-prefix-cache --from docs/data/real-engine-prefix.json,"
                  "docs/data/real-engine-prefix-xeon.json --out docs/accuracy-prefix-cache.md")

CASE_ROWS = [Column("case"), Column("N'", key="replicas", align="right"),
             Column("traffic", fmt=lambda x: f"x{x:g}", align="right"), Column("metric", fmt=str.upper),
             Column("predicted [interval]", value=_interval),
             Column("measured", key="measured", fmt=pct, align="right"),
             Column("flagged", value=lambda r: "yes" if r["flagged"] else ""),
             Column("goal", value=lambda r: "met" if r["meets_goal"] else "**missed**")]

CASES = [Column("case"), Column("run"), Column("replicas", align="right"),
         Column("traffic", fmt=lambda x: f"x{x:g}", align="right"), Column("router"),
         Column("prefix cache", key="prefix_caching", fmt=lambda x: "on" if x else "off"),
         Column("requests", fmt=",", align="right"), Column("errors", align="right"),
         Column("served from the cache (the engines' counters)", key="measured_cached_share", fmt=_share,
                align="right"),
         Column("the twin's (each promise's fit)", value=lambda r: ", ".join(
             _share(x) for x in (r.get("predicted_cached_share") or {}).values()) or None, align="right"),
         Column("each core busy (mean)", value=lambda r: ", ".join(
             f"{100 * b:.0f} %" for b in (r.get("machine_load") or {}).get("cpu_busy_mean", [])) or None),
         Column("engine speed (step time / the observed run's law)", value=lambda r: _speed(r.get("engine_speed"),
                r.get("truth_disturbed")), align="right")]

WORTH = [Column("promise", key="threshold"), Column("metric", fmt=str.upper),
         Column("predicted", value=lambda r: f"{pct(r['a_pred'])} → {pct(r['b_pred'])}"),
         Column("measured", value=lambda r: f"{pct(r['a_meas'])} → {pct(r['b_meas'])}"),
         Column("predicted change", value=lambda r: f"{100 * (r['b_pred'] - r['a_pred']):+.1f} pp", align="right"),
         Column("measured change", value=lambda r: f"{100 * (r['b_meas'] - r['a_meas']):+.1f} pp", align="right")]


def _worth(rows: Sequence[Mapping[str, Any]], a: str, b: str) -> list[dict[str, Any]]:
    """Each promise and metric: the prediction and the measurement in run ``a`` and in run ``b``."""
    by = {(r["run"], r["threshold"], r["metric"]): r for r in rows}
    out = []
    for (run, th, m), r in by.items():
        other = by.get((b, th, m))
        if run == a and other:
            out.append({"threshold": th, "metric": m, "a_pred": r["predicted"], "b_pred": other["predicted"],
                        "a_meas": r["measured"], "b_meas": other["measured"]})
    return out


def _points_line(rows: Sequence[Mapping[str, Any]], goal: Mapping[str, float]) -> str:
    """What a flagged row's interval hides: how wide the intervals are and how the points stand."""
    flagged = [r for r in rows if r["flagged"]]
    if not flagged:
        return ""
    wide = sum(r["high"] - r["low"] > 0.5 for r in flagged)
    near = sum(_point_within(r, goal) for r in flagged)
    return (f"Of the {len(flagged)} flagged rows, {wide} have an interval wider than 50 pp (they hold the measured "
            f"share without saying much); their points: {near} of {len(flagged)} within the unflagged rows' "
            "tolerance.")


def _point_within(r: Mapping[str, Any], goal: Mapping[str, float]) -> bool:
    """A row's point within the unflagged rows' tolerance of its measured share."""
    return abs(r["predicted"] - r["measured"]) <= max(goal["relative"] * r["measured"], goal["absolute"],
                                                        r.get("noise") or 0.0)


def prefix_page(doc: Mapping[str, Any], command: str = PREFIX_COMMAND,
                also: Sequence[Mapping[str, Any]] = ()) -> str:
    """The prefix-cache family of the real-engine harness (``python -m app.bench.realengine prefix``);
    ``also``: the same family run again elsewhere (another machine, another commit), each its own
    section with its provenance: result, every row, where the goal is not met, the runs."""
    rows, goal, trace = doc["rows"], doc["goal"], doc["trace"]
    conv = trace.get("conversations") or {}
    fit0 = doc["fits"][0]
    read = fit0.get("cached_share_read")
    observed_case = next((c for c in doc["cases"] if c["run"] == doc["observed_run"]), {})
    out = [generated_header("Accuracy with vLLM's prefix cache, on a real engine", command),
           "vLLM turns its prefix cache on by default: a prompt's leading blocks that an earlier request already "
           "computed are read from the KV cache instead of prefilled. This family of the real-engine harness "
           "([Accuracy on a real vLLM engine](accuracy-real-engine.md)) drives the same CPU engine with traffic "
           f"that shares prefixes: every request starts with its path's system prompt ({conv.get('system_tokens', 0)} "
           f"tokens), and conversations of {conv.get('turns_mean', 1):g} turns on average resend their earlier turns "
           f"with the engine's answers; the driver sends a follow-up {conv.get('think_s_mean', 0):g} s on average after "
           "the answer before it (closed loop: a user waits for the answer, and the twin replays the follow-ups so). "
           "Headroom is fitted on the "
           f"observed run's export alone (`{doc['observed_run']}`: one replica, cache on) and predicts each case "
           "below with the change its run made; the truth is the run itself, measured per request.", "",
           provenance_block(doc.get("provenance")), "",
           f"**Goal**: as on the real-engine page: unflagged within max(±{100 * goal['relative']:g} %, "
           f"±{100 * goal['absolute']:g} pp) of the measured share, flagged intervals holding it.", "",
           f"**Result**: {goal_line(rows)}. {_points_line(rows, goal)}", "",
           "## The cached share", "",
           f"Read from the observed export: **{_share(read)}** of prompt tokens served by the cache "
           f"({fit0['model']['sources'].get('prefix_cache', '')}). The engine's own counters at the run's end: "
           f"{_share(observed_case.get('measured_cached_share'))}. The step law is fitted per computed prompt "
           f"token: {fit0['model']['step_per_prefill_token_ms']:.4f} ms (the engine's per-step log: "
           + (f"{observed_case['step_truth']['per_prefill_token_ms']:.4f} ms" if observed_case.get("step_truth")
              else "–") + ").", "",
           "## The observed fleet: residual", "", table(_residual_rows({**doc, "fits": [
               {**f, "export": "query_range"} for f in doc["fits"]]}), RESIDUAL), "",
           "## Every case", ""]
    for label in dict.fromkeys(r["threshold"] for r in rows):
        part = [r for r in rows if r["threshold"] == label]
        out += [f"### {label}", "", goal_line(part) + ".", "", table(part, CASE_ROWS), ""]
    worth = _worth(rows, "p-n1-x1.0", "p-n1-x1.0-off")
    if worth:
        out += ["## What the cache was worth: the same traffic with the cache off", "",
                "`p-n1-x1.0` → `p-n1-x1.0-off`.", "", table(worth, WORTH), ""]
    out += routing_section(doc)
    out += _missed(rows, lambda r: f"{r['case']}, {r['threshold']}", lambda _r: "")
    loose = [r for r in rows if r["meets_goal"] and r["flagged"] and r["high"] - r["low"] > 0.5
             and not _point_within(r, goal)]
    if loose:
        out += ["", "Met only by an interval wider than 50 pp, the point off by more than the tolerance:", ""]
        out += [f"- {r['case']}, {r['threshold']}, {r['metric'].upper()}: predicted {pct(r['predicted'])} "
                f"[{100 * r['low']:.1f}, {100 * r['high']:.1f}], measured {pct(r['measured'])}." for r in loose]
    out += ["", "## The runs", "", table(doc["cases"], _checked(CASES, doc["cases"])), ""]
    for other in also:
        out += _also_section(other)
    return "\n".join(out)


def _also_section(doc: Mapping[str, Any]) -> list[str]:
    """The family run again: a truth of its own, read against the same goal (each machine's engine is a
    different engine: the twin is fitted anew on that run's observed export)."""
    prov = doc.get("provenance") or {}
    machine = (prov.get("machine") or {}).get("cpu") or "an unknown CPU"
    rows = doc["rows"]
    out = [f"## Also run: {machine}, commit `{(prov.get('commit') or 'unknown')[:10]}`", "",
           provenance_block(doc.get("provenance")), "",
           f"Fitted on that run's observed export (`{doc['observed_run']}`), its cached share read "
           f"{_share(doc['fits'][0].get('cached_share_read'))}.", "",
           f"**Result**: {goal_line(rows)}.", "", table(rows, [Column("promise", key="threshold"), *CASE_ROWS]), ""]
    out += ["#" + line if line.startswith("## ") else line
            for line in _missed(rows, lambda r: f"{r['case']}, {r['threshold']}", lambda _r: "")]
    out += ["", "### Its runs", "", table(doc["cases"], _checked(CASES, doc["cases"])), ""]
    return out


ROUTING = [Column("promise", key="threshold"), Column("routing"),
           Column("twin's router", key="router", fmt=lambda x: f"`{x}`"),
           Column("run (its router)", value=lambda r: f"`{r['run']}` ({r['run_router']})"),
           Column("cached, predicted (measured)", value=lambda r: f"{_share(r['cached_predicted'])} "
                  f"({_share(r['cached_measured'])})", align="right"),
           *[Column(f"{m.upper()} predicted [interval] (measured)", value=lambda r, m=m: (
               f"{_interval(r[m])} ({pct(r[m]['measured'])})")) for m in ("ttft", "tpot", "joint")]]


def _routing_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per promise and routing: the routing cases' rows of each metric, with the cached shares of its case."""
    cases = {c["run"]: c for c in doc["cases"]}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in doc["rows"]:
        if not r.get("routing"):
            continue
        case = cases[r["run"]]
        row = out.setdefault((r["threshold"], r["routing"]), {
            "threshold": r["threshold"], "routing": r["routing"], "router": r["router"], "run": r["run"],
            "run_router": case["router"], "cached_predicted": (case.get("predicted_cached_share") or {}).get(
                r["threshold"]), "cached_measured": case["measured_cached_share"]})
        row[r["metric"]] = r
    return list(out.values())


def _split_line(fit: Mapping[str, Any]) -> str:
    s = fit.get("split")
    if not s:
        return f"- {fit['threshold']}: no split (the row is not priced)"
    return (f"- {fit['threshold']}: a {s['shared_tokens']}-token shared prefix serving {pct(s['shared_share'])} of the "
            f"prompt tokens, {pct(s['conversation_share'])} of the hits conversation history "
            f"({s['conversation_source']}), follow-ups {pct(s['followup_share'])} of requests "
            f"({s['followup_source'].split(':')[0]}), think time {s['think_s']:g} s ({s['think_source']}); the twin at the "
            f"observed N serves {pct(s['twin_cached_share'])} against {pct(s['cached_share'])} measured")


def routing_section(doc: Mapping[str, Any]) -> list[str]:
    """The routing row of ``headroom scenarios`` at the two-replica runs' scenario, against them: the rows of
    the routing cases (computed once, with every case), what prefix-aware routing changed, and the split of
    the cached share the row stands on beside the trace's own. None of those runs: no section."""
    rows = _routing_rows(doc)
    if not rows:
        return []
    by_routing = {r["routing"]: r for r in rows}
    load, aware = (by_routing.get(k, {}) for k in ("load-based", "prefix-aware"))
    where = next(c for c in doc["cases"] if c["run"] == rows[0]["run"])
    out = ["## The routing row: load-based against prefix-aware routing", "",
           "The routing row of `headroom scenarios` ([Economics](economics.md#routing-row)) at the two-replica runs' "
           f"scenario (N'={where['replicas']}, traffic x{where['traffic']:g}), fitted on `{doc['observed_run']}` "
           "alone: the same requests and conversations replayed under load-based routing (the fit's router) and "
           "under prefix-aware routing (a turn stays on its conversation's replica), set against the run with "
           + (f"a {load['run_router']} router (`{load['run']}`)" if load else "a load-based router (not run)")
           + " and the run keeping every conversation on its first turn's replica"
           + (f" (`{aware['run']}`)" if aware else " (not run)") + ". The cached share is of prompt tokens: the "
           "twin's cache, and the engines' own counters at the run's end (`vllm:prefix_cache_hits_total` over "
           "`vllm:prefix_cache_queries_total`). The same rows are in the cases above.", "",
           table(rows, ROUTING), ""]
    worth = _worth(doc["rows"], load.get("run", ""), aware.get("run", "")) if load and aware else []
    if worth:
        out += [f"What prefix-aware routing changed, `{load['run']}` → `{aware['run']}`:", "", table(worth, WORTH), ""]
    own = doc.get("trace_split") or {}
    out += ["The row stands on the split of the observed cached share into a shared prefix and conversation "
            "history, an assumption the metrics cannot check ([the three cases](economics.md#prefix-cases)). "
            "The split each promise's fit replayed:", ""]
    out += [_split_line(fit) for fit in doc["fits"]]
    if own:
        out += ["", f"The trace's own: its system prompt, in whole blocks, served {pct(own['system_share'])} of the "
                f"observed run's prompt tokens; of the {pct(own['cached_share'])} the engine served, "
                f"{pct(own['conversation_share'])} was conversation history."]
    return [*out, ""]

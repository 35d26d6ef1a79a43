"""The fleet the live-store tests serve (a real Prometheus, VictoriaMetrics, the pushdown): two hours of a
2-path, 2-replica vLLM V1 fleet from the simulator, its TTFT and per-request TPOT histograms, each
replica scraped at its own offset past the 15 s grid (as Prometheus spreads targets), so no sample sits
on a window edge."""

from __future__ import annotations

import json

import pandas as pd

from app.simulator import simulate_day

TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
PATHS = ("llama-3.1-8b-interactive", "llama-3.1-8b-batch")
SHIFT_S = {"10.0.0.1:8000": 4, "10.0.0.2:8000": 11}  # each target's scrape offset
HOURS = 2
E0 = pd.Timestamp("2026-11-17T00:00:00Z").timestamp()  # export start (simulate_day's default day)
WHOLE = 7500  # 25 windows of 5 min: (E0, E0 + 2 h 5 min] holds every sample


def fleet_frame() -> pd.DataFrame:
    """TTFT and per-request TPOT histograms of a simulated 2 h, 2-replica fleet; labels as dicts,
    each replica's samples moved by its scrape offset."""
    sim = simulate_day(seed=11, replicas=2, hours=HOURS, warmup_s=600)
    raw = sim.metrics_frame
    metric = raw["metric"].astype(str)
    raw = raw[metric.str.startswith((TTFT + "_", TPOT + "_"))]
    cats = [json.loads(c) for c in raw["labels"].cat.categories]
    labels = [cats[i] for i in raw["labels"].cat.codes.to_numpy()]
    shift = pd.to_timedelta([SHIFT_S[d["instance"]] for d in labels], unit="s")
    ts = pd.DatetimeIndex(raw["ts"]) + shift
    return pd.DataFrame({"metric": raw["metric"].astype(str).to_numpy(), "labels": labels, "ts": ts,
                         "value": raw["value"].to_numpy()})

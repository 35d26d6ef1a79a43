"""A small vLLM V1 export for one path (TTFT and per-request TPOT histograms, one replica, scrapes every
15 s), different for every seed: the tests' stand-in for "a user's file" (escaping, the 8-session load)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from tests.support.export_formats import write_prometheus_text

TTFT_LES = ["0.05", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "+Inf"]
TPOT_LES = ["0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "+Inf"]
START = datetime(2026, 11, 17, 12, 0, tzinfo=UTC)


def frame(paths: list[str], seed: int, scrapes: int = 41, start: datetime = START) -> pd.DataFrame:
    """Cumulative histogram samples of ``paths`` (label ``model_name``) over ``scrapes`` scrapes."""
    rng = random.Random(seed)
    rows = []
    for k, path in enumerate(paths):
        labels = {"engine": "0", "instance": f"10.0.{seed % 250}.{k + 1}:8000", "model_name": path}
        ttft = [0] * len(TTFT_LES)
        tpot = [0] * len(TPOT_LES)
        sums = [0.0, 0.0]
        scale = 0.2 + 0.05 * (seed % 7)  # a different latency per seed: a different share
        for i in range(scrapes):
            ts = start + timedelta(seconds=15 * i)
            for _ in range(rng.randint(5, 25)):
                first, per_token = rng.lognormvariate(0, 0.9) * scale, rng.lognormvariate(-3.2, 0.6)
                sums[0] += first
                sums[1] += per_token
                for j, le in enumerate(TTFT_LES):
                    ttft[j] += le == "+Inf" or first <= float(le)
                for j, le in enumerate(TPOT_LES):
                    tpot[j] += le == "+Inf" or per_token <= float(le)
            for family, les, counts, total in (("vllm:time_to_first_token_seconds", TTFT_LES, ttft, sums[0]),
                                               ("vllm:request_time_per_output_token_seconds", TPOT_LES, tpot,
                                                sums[1])):
                rows += [{"metric": f"{family}_bucket", "labels": {**labels, "le": le}, "ts": ts, "value": c}
                         for le, c in zip(les, counts, strict=True)]
                rows.append({"metric": f"{family}_count", "labels": labels, "ts": ts, "value": counts[-1]})
                rows.append({"metric": f"{family}_sum", "labels": labels, "ts": ts, "value": total})
    return pd.DataFrame(rows)


def write(out: Path, paths: list[str], seed: int, scrapes: int = 41) -> Path:
    """The export as Prometheus text 0.0.4 with millisecond timestamps."""
    return write_prometheus_text(frame(paths, seed, scrapes), out)

"""What the engine did, per request, from the driver's records: the truth predictions are judged by.

TTFT is first streamed token - send time; TPOT is vLLM's own definition, (last token - first token) /
(output tokens - 1), for requests of at least two tokens; the joint breach is TTFT or TPOT above its
threshold (a failed request breaches both). The shares are over the requests *sent* in the run, as the
engine's histograms count the requests that *finished* in the export's range: every request of a run
finishes inside it, so the two agree.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ("sent_unix", "ttft_s", "tpot_s", "e2e_s", "prompt_tokens", "output_tokens", "failed", "replica")


@dataclass
class Requests:
    sent_unix: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # NaN for a request of one token
    e2e_s: np.ndarray
    output_tokens: np.ndarray
    prompt_tokens: np.ndarray
    failed: np.ndarray
    replica: np.ndarray
    gaps_s: np.ndarray  # every inter-token gap of every request

    def __len__(self) -> int:
        return len(self.sent_unix)


def read(path: Path) -> Requests:
    """The driver's records (``requests.jsonl``), or their summary as a fixture keeps it
    (``requests.csv.gz``, :func:`write_csv`: no inter-token gaps)."""
    if path.name.endswith(".csv.gz"):
        return _read_csv(path)
    sent, ttft, tpot, e2e, out, prompt, failed, replica, gaps = [], [], [], [], [], [], [], [], []
    for line in path.read_text().splitlines():
        if not line:
            continue
        r = json.loads(line)
        chunks = r.get("chunks_unix") or []
        bad = bool(r.get("error")) or not chunks
        sent.append(r["sent_unix"])
        failed.append(bad)
        replica.append(r.get("replica", 0))
        prompt.append(r["prompt_tokens"])
        n = (r.get("usage") or {}).get("completion_tokens", len(chunks))
        out.append(n)
        if bad:
            ttft.append(np.nan)
            tpot.append(np.nan)
            e2e.append(np.nan)
            continue
        ttft.append(chunks[0] - r["sent_unix"])
        e2e.append(r["finish_unix"] - r["sent_unix"])
        tpot.append((chunks[-1] - chunks[0]) / (n - 1) if n > 1 else np.nan)
        gaps.append(np.diff(chunks))
    return Requests(np.array(sent), np.array(ttft), np.array(tpot), np.array(e2e), np.array(out),
                    np.array(prompt), np.array(failed, dtype=bool), np.array(replica),
                    np.concatenate(gaps) if gaps else np.zeros(0))


def shares(req: Requests, ttft_s: float, tpot_s: float) -> dict[str, float]:
    """TTFT, TPOT and joint breach shares (failed requests breach), and the request count."""
    ttft_b = req.failed | (np.nan_to_num(req.ttft_s, nan=np.inf) > ttft_s)
    tpot_b = req.failed | (np.nan_to_num(req.tpot_s, nan=0.0) > tpot_s)
    n = max(len(req), 1)
    return {"requests": float(len(req)), "ttft": float(ttft_b.sum() / n), "tpot": float(tpot_b.sum() / n),
            "joint": float((ttft_b | tpot_b).sum() / n), "failed": float(req.failed.sum() / n)}


def write_csv(req: Requests, path: Path) -> Path:
    """One row per request (``COLUMNS``), gzip-compressed: what the shares need, small enough to commit."""
    frame = pd.DataFrame({c: getattr(req, c) for c in COLUMNS})
    with gzip.open(path, "wt") as f:
        frame.to_csv(f, index=False, float_format="%.6f")
    return path


def _read_csv(path: Path) -> Requests:
    f = pd.read_csv(path)
    return Requests(sent_unix=f["sent_unix"].to_numpy(float), ttft_s=f["ttft_s"].to_numpy(float),
                    tpot_s=f["tpot_s"].to_numpy(float), e2e_s=f["e2e_s"].to_numpy(float),
                    output_tokens=f["output_tokens"].to_numpy(), prompt_tokens=f["prompt_tokens"].to_numpy(),
                    failed=f["failed"].to_numpy(bool), replica=f["replica"].to_numpy(), gaps_s=np.zeros(0))

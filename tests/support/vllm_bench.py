"""A ``vllm bench serve --save-result --save-detailed`` result of any size, written as vLLM writes it (one
JSON object: the run's settings and summary, then one array per field with a value per request —
``input_lens``, ``output_lens``, ``ttfts``, ``itls`` (a list of inter-token gaps per request),
``generated_texts``, ``errors``, ``start_times`` (``time.perf_counter()`` readings, a clock with no
epoch) — then the percentile summary), streamed to disk so a 1 GB file costs the writer a few MB.
Upstream vLLM writes no ``latencies``; some forks do (``latencies=True``). A failed request has TTFT
0, no gaps and 0 output tokens, as vLLM writes it. About 1.6 kB per request, as a real 62 k-request
result of 95 MB holds.

    python -m tests.support.vllm_bench OUT.json --mb 1024   # ~650 k requests
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BYTES_PER_REQUEST = 1420  # measured on this writer's output (itls and texts are most of it)
_GAPS = [f"{i / 10000:.4f}" for i in range(10000)]  # inter-token gaps 0.0000..0.9999 s as vLLM prints them
_WORDS = ("the", "model", "answers", "a", "request", "with", "tokens", "of", "text", "and", "more", "words")
CHUNK = 5000  # requests formatted at a time


def requests_for_mb(mb: float) -> int:
    return max(1, int(mb * (1 << 20) / BYTES_PER_REQUEST))


def write(path: str | Path, n_requests: int, seed: int = 7, date: str = "20261128-101500",
          failed_every: int = 97, text_factor: int = 1, latencies: bool = False) -> dict[str, float]:
    """Write the result of ``n_requests`` to ``path`` (generated texts ``text_factor`` times as long as
    usual: a larger file of the same records); return the truth the loader must give back:
    ``requests``, ``failed``, and the sums over the successful requests of TTFT and of the per-request
    TPOT (vLLM's rule: (latency - ttft) / (output_len - 1), the latency being TTFT plus the gaps, 0 for
    a single-token answer)."""
    rng = np.random.default_rng(seed)
    errors = ["" if (i + 1) % failed_every else "Bad Request" for i in range(n_requests)]
    ok = np.array([not e for e in errors])
    out_lens = np.where(ok, rng.integers(1, 256, n_requests), 0)
    in_lens = rng.integers(16, 4096, n_requests)
    ttfts = np.where(ok, np.round(rng.lognormal(-2.0, 0.8, n_requests), 6), 0.0)
    gaps = [rng.integers(50, 400, max(0, int(k) - 1)) for k in out_lens]  # 5 ms .. 40 ms per token
    gap_sums = np.array([g.sum() / 10000 for g in gaps])
    lat = np.round(ttfts + gap_sums, 6)
    starts = np.round(81234.5 + np.cumsum(rng.exponential(0.05, n_requests)), 6)  # perf_counter() readings
    spent = (lat - ttfts) if latencies else gap_sums
    tpots = np.where(out_lens > 1, spent / np.maximum(out_lens - 1, 1), 0.0)
    head = {"date": date, "endpoint_type": "vllm", "backend": "vllm", "label": None,
            "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
            "num_prompts": n_requests, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 256,
            "duration": float(starts[-1] - starts[0] + lat[-1]), "completed": n_requests - errors.count("Bad Request"),
            "total_input_tokens": int(in_lens.sum()), "total_output_tokens": int(out_lens.sum())}
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(head)[:-1])
        arrays = [("input_lens", in_lens), ("output_lens", out_lens), ("ttfts", ttfts), ("start_times", starts)]
        for name, values in arrays + ([("latencies", lat)] if latencies else []):
            fh.write(f', "{name}": [' + ", ".join(map(str, values.tolist())) + "]")
        fh.write(', "itls": [')
        for lo in range(0, n_requests, CHUNK):
            part = ", ".join("[" + ", ".join(_GAPS[x] for x in g.tolist()) + "]" for g in gaps[lo:lo + CHUNK])
            fh.write((", " if lo else "") + part)
        fh.write('], "generated_texts": [')
        for lo in range(0, n_requests, CHUNK):
            part = ", ".join(json.dumps(" ".join(_WORDS[j % len(_WORDS)] for j in range(text_factor * int(k) // 2)))
                             for k in out_lens[lo:lo + CHUNK].tolist())
            fh.write((", " if lo else "") + part)
        fh.write('], "errors": ' + json.dumps(errors))
        summary = {"mean_ttft_ms": round(1000 * float(ttfts[ok].mean()), 3),
                   "median_ttft_ms": round(1000 * float(np.median(ttfts[ok])), 3),
                   "p99_ttft_ms": round(1000 * float(np.quantile(ttfts[ok], 0.99)), 3)}
        fh.write(", " + json.dumps(summary)[1:] + "\n")
    return {"requests": n_requests, "failed": errors.count("Bad Request"), "ttft_sum": float(ttfts[ok].sum()),
            "tpot_sum": float(tpots[ok].sum())}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--mb", type=float, default=1024, help="about this many MiB (default 1024)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    truth = write(args.out, requests_for_mb(args.mb), seed=args.seed)
    size = Path(args.out).stat().st_size
    print(f"{args.out}: {truth['requests']:,} requests, {size / (1 << 20):,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

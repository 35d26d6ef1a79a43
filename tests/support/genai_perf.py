"""A GenAI-Perf ``profile_export.json`` of any size, shaped as GenAI-Perf writes it (one object:
``experiments[].requests[]``, each request with its ``timestamp``, the full ``request_inputs`` payload,
``response_timestamps`` and every streamed ``response_outputs`` chunk, times in ns), streamed to disk.
About 18 kB per request (a 300-word prompt, 20 to 200 streamed chunks).

    python -m tests.support.genai_perf OUT.json --mb 1024   # ~58 k requests
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

BYTES_PER_REQUEST = 18_600
_CHUNK = {"response": 'data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"delta":{"content":" tok"}}]}\n\n'}


def write(path: str | Path, n_requests: int, seed: int = 7, t0_ns: int = 1_764_410_400_000_000_000) -> dict[str, float]:
    """Write ``n_requests`` to ``path``; return the truth: ``requests`` and the sum of TTFT (s)."""
    rng = random.Random(seed)
    ttft_sum = 0.0
    payload = json.dumps({"messages": [{"role": "user", "content": "word " * 300}], "model": "m", "stream": True})
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.write('{"version": "0.0.8", "service_kind": "openai", "endpoint": "v1/chat/completions", '
                 '"experiments": [{"experiment": {"mode": "concurrency", "value": 64}, "requests": [')
        t = t0_ns
        for i in range(n_requests):
            chunks = rng.randrange(20, 200)
            ttft_ns = rng.randrange(20_000_000, 900_000_000)
            ttft_sum += ttft_ns / 1e9
            stamps = [t + ttft_ns + j * rng.randrange(8_000_000, 40_000_000) for j in range(chunks)]
            request = {"timestamp": t, "request_inputs": {"payload": payload}, "response_timestamps": stamps,
                       "response_outputs": [_CHUNK] * chunks}
            fh.write((", " if i else "") + json.dumps(request))
            t += 10_000_000
        fh.write(f'], "window_boundaries": [{t0_ns}, {t}]}}]}}\n')
    return {"requests": n_requests, "ttft_sum": ttft_sum}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--mb", type=float, default=1024, help="about this many MiB (default 1024)")
    args = parser.parse_args(argv)
    n = max(1, int(args.mb * (1 << 20) / BYTES_PER_REQUEST))
    write(args.out, n)
    print(f"{args.out}: {n:,} requests, {Path(args.out).stat().st_size / (1 << 20):,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

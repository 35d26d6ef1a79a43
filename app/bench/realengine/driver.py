"""The open-loop driver: sends a trace's requests to the replicas at their arrival times, streams each
answer and records what the client saw — the exact per-request truth the predictions are judged by.

Each request is a streaming ``/v1/completions`` call whose prompt is a list of token ids (its length
exact), with ``max_tokens`` = its output length and ``ignore_eos`` (a random-weight model would stop
anywhere), greedy (no ``seed``: a seeded request whose prefill spans chunks crashed vLLM's CPU
engine) and ``stream_options.include_usage`` (the engine's own token counts). Open loop: a request is
sent at its time whether or not earlier ones are done. The router sends each request to the replica
with the fewest requests in flight (ties to the lowest index), as a load-based balancer would.

Per request (JSON lines): its index, replica, scheduled and sent time, first-token and finish time
(unix seconds), the arrival time of every streamed chunk (its gaps are the inter-token latencies), the
usage the engine reported, and an error if it failed.

Runs in the engine's environment (aiohttp)::

    python -m app.bench.realengine.driver TRACE.jsonl OUT.jsonl --url http://127.0.0.1:8100 [--url ...]
        --model NAME --spec SPEC.json [--start-at UNIX]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import aiohttp

from app.bench.realengine.trace import TraceSpec, prompt_ids


async def _one(session: aiohttp.ClientSession, url: str, model: str, req: dict, ids: list[int],
               scheduled: float) -> dict:
    body = {"model": model, "prompt": ids, "max_tokens": req["output_tokens"], "ignore_eos": True,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
    rec: dict = {"scheduled_unix": scheduled, "sent_unix": time.time(), "chunks_unix": [], "usage": None,
                 "error": None}
    try:
        async with session.post(url + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                rec["error"] = f"HTTP {resp.status}: {(await resp.text())[:300]}"
                return rec
            buffer = b""
            async for piece in resp.content.iter_any():
                now = time.time()
                buffer += piece
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if not line.startswith(b"data: "):
                            continue
                        data = line[6:].strip()
                        if data == b"[DONE]":
                            continue
                        msg = json.loads(data)
                        if msg.get("usage"):
                            rec["usage"] = msg["usage"]
                        if msg.get("choices"):
                            rec["chunks_unix"].append(now)
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["finish_unix"] = time.time()
    return rec


async def drive(trace: list[dict], urls: list[str], model: str, spec: TraceSpec, out: Path,
                start_at: float | None = None) -> dict:
    start = start_at if start_at is not None else time.time() + 1.0
    in_flight = [0] * len(urls)
    results: list[dict] = [{} for _ in trace]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    # a connection per request: reusing one the server is closing (uvicorn drops idle keep-alive
    # connections after 5 s) resets a request that never reached the engine
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    late = 0

    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def send(i: int, req: dict) -> None:
            r = min(range(len(urls)), key=lambda k: (in_flight[k], k))
            in_flight[r] += 1
            try:
                ids = prompt_ids(req["seed"], req["prompt_tokens"], spec)
                rec = await _one(session, urls[r], model, req, ids, start + req["arrival_s"])
            finally:
                in_flight[r] -= 1
            rec.update(index=i, replica=r, prompt_tokens=req["prompt_tokens"], output_tokens=req["output_tokens"])
            results[i] = rec

        tasks = []
        for i, req in enumerate(trace):
            delay = start + req["arrival_s"] - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -0.05:
                late += 1
            tasks.append(asyncio.create_task(send(i, req)))
        await asyncio.gather(*tasks)
    with out.open("w") as f:
        for rec in results:
            f.write(json.dumps(rec) + "\n")
    return {"requests": len(trace), "sent_late": late, "start_unix": start,
            "errors": sum(1 for r in results if r.get("error"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--url", action="append", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--spec", type=Path, required=True)
    p.add_argument("--start-at", type=float)
    args = p.parse_args(argv)
    trace = [json.loads(line) for line in args.trace.read_text().splitlines() if line]
    spec = TraceSpec.from_json(json.loads(args.spec.read_text()))
    summary = asyncio.run(drive(trace, args.url, args.model, spec, args.out, args.start_at))
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

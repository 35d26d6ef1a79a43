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


async def _one(session: aiohttp.ClientSession, url: str, model: str, output_tokens: int, ids: list[int],
               scheduled: float, want_ids: bool = False) -> dict:
    body = {"model": model, "prompt": ids, "max_tokens": output_tokens, "ignore_eos": True,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
    if want_ids:  # the answer's token ids, which the conversation's next turn sends back
        body["return_token_ids"] = True
    rec: dict = {"scheduled_unix": scheduled, "sent_unix": time.time(), "chunks_unix": [], "usage": None,
                 "error": None}
    generated: list[int] = []
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
                            generated += msg["choices"][0].get("token_ids") or []
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["finish_unix"] = time.time()
    if want_ids:
        rec["_generated"] = generated
    return rec


ROUTERS = ("least_outstanding", "sticky")


async def drive(trace: list[dict], urls: list[str], model: str, spec: TraceSpec, out: Path,
                start_at: float | None = None, router: str = "least_outstanding",
                max_model_len: int | None = None) -> dict:
    """Send every conversation of ``trace`` (a single request when it has no follow-ups) and write the
    per-request records. ``router``: ``least_outstanding`` sends each request to the replica with the
    fewest in flight, as a load balancer would; ``sticky`` sends a conversation's follow-ups to the
    replica that served its first turn, where its earlier turns are cached (prefix-aware routing), and
    a new conversation to the replica with the fewest in flight."""
    if router not in ROUTERS:
        raise ValueError(f"router {router!r}: expected one of {', '.join(ROUTERS)}")
    start = start_at if start_at is not None else time.time() + 1.0
    in_flight = [0] * len(urls)
    results: list[dict] = []
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    # a connection per request: reusing one the server is closing (uvicorn drops idle keep-alive
    # connections after 5 s) resets a request that never reached the engine
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    late = 0
    system = spec.system_ids()
    counts = {"ended_early": 0}

    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def converse(k: int, row: dict) -> None:
            history = system + prompt_ids(row["seed"], row["prompt_tokens"], spec)
            turns = [(0.0, row["prompt_tokens"], row["output_tokens"])] + [tuple(f) for f in row.get("followups", [])]
            follows = len(turns) > 1
            home, generated, scheduled = None, [], start + row["arrival_s"]
            last_finish = scheduled
            for turn, (think, message, output) in enumerate(turns):
                if turn:
                    history = history + generated + prompt_ids(row["seed"] * 31 + turn, message, spec)
                    if max_model_len is not None and len(history) + output > max_model_len:
                        counts["ended_early"] += 1
                        return
                    scheduled = last_finish + think
                    await asyncio.sleep(max(0.0, scheduled - time.time()))
                if router == "sticky" and home is not None:
                    r = home
                else:
                    r = min(range(len(urls)), key=lambda j: (in_flight[j], j))
                home = r if home is None else home
                in_flight[r] += 1
                try:
                    rec = await _one(session, urls[r], model, output, history, scheduled, want_ids=follows)
                finally:
                    in_flight[r] -= 1
                generated = rec.pop("_generated", [])
                last_finish = rec["finish_unix"]
                rec.update(conversation=k, turn=turn, replica=r, prompt_tokens=len(history), output_tokens=output)
                results.append(rec)
                if rec["error"]:
                    return

        tasks = []
        for k, row in enumerate(trace):
            delay = start + row["arrival_s"] - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -0.05:
                late += 1
            tasks.append(asyncio.create_task(converse(k, row)))
        await asyncio.gather(*tasks)
    results.sort(key=lambda r: r["sent_unix"])
    with out.open("w") as f:
        for i, rec in enumerate(results):
            rec["index"] = i
            f.write(json.dumps(rec) + "\n")
    return {"requests": len(results), "conversations": len(trace), "sent_late": late, "start_unix": start,
            "errors": sum(1 for r in results if r.get("error")), "ended_early": counts["ended_early"],
            "router": router}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--url", action="append", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--spec", type=Path, required=True)
    p.add_argument("--start-at", type=float)
    p.add_argument("--router", choices=ROUTERS, default="least_outstanding")
    p.add_argument("--max-model-len", type=int)
    args = p.parse_args(argv)
    trace = [json.loads(line) for line in args.trace.read_text().splitlines() if line]
    spec = TraceSpec.from_json(json.loads(args.spec.read_text()))
    summary = asyncio.run(drive(trace, args.url, args.model, spec, args.out, args.start_at, args.router,
                                args.max_model_len))
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

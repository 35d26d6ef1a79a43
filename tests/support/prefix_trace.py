"""A trace whose requests share prefixes, for the prefix-cache tests: multi-turn conversations and
single requests behind a path's system prompt, and a second path with its own, longer system prompt
and no conversations."""

from __future__ import annotations

import numpy as np

from app.engine.trace import BATCH, INTERACTIVE, Trace, TrafficSpec

CHAT_GROUP, BATCH_GROUP = 5, 9  # any ids: the engines make them dense


def shared_trace(seed: int, duration_s: float, conversations: int, singles: int, batch: int,
                 chat_system: int = 600, batch_system: int = 1200, turns: tuple[int, int] = (2, 6),
                 think_s: float = 60.0, min_think_s: float = 30.0, max_output: int = 600,
                 plain_share: float = 0.0, repeat_share: float = 0.0) -> Trace:
    """``conversations`` chats starting uniformly over the first 80 % of ``duration_s``, each of
    ``turns`` turns ``min_think_s`` + Exp(``think_s``) apart; a turn's prompt is the chat system prompt,
    the history (every earlier turn's new tokens and answer) and its new tokens. ``singles`` one-shot
    requests behind the same system prompt; ``batch`` requests of the batch path behind its own. A
    ``plain_share`` of the singles share nothing (no system prompt), a ``repeat_share`` are the system
    prompt alone (with a prompt a whole number of blocks long, the block holding its last token is
    recomputed while it is cached: the engines keep no second copy of it). Arrivals uniform; lengths
    lognormal. Requests sorted by arrival."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[float, int, int, int, int, int, int, int]] = []
    for c in range(conversations):
        t = float(rng.uniform(0.0, 0.8 * duration_s))
        history = 0
        for _ in range(int(rng.integers(turns[0], turns[1] + 1))):
            new = int(rng.lognormal(np.log(150.0), 0.6)) + 1
            out = min(int(rng.lognormal(np.log(200.0), 0.6)) + 1, max_output)
            rows.append((t, 0, chat_system + history + new, out, CHAT_GROUP, chat_system, 1000 + c, history))
            history += new + out
            t += min_think_s + float(rng.exponential(think_s))
    for _ in range(singles):
        new = int(rng.lognormal(np.log(300.0), 0.8)) + 1
        out = min(int(rng.lognormal(np.log(200.0), 0.6)) + 1, max_output)
        u = rng.uniform()
        if u < repeat_share:
            new = 0
        if repeat_share <= u < repeat_share + plain_share:
            rows.append((float(rng.uniform(0.0, duration_s)), 0, new, out, -1, 0, -1, 0))
        else:
            rows.append((float(rng.uniform(0.0, duration_s)), 0, chat_system + new, out, CHAT_GROUP, chat_system,
                         -1, 0))
    for _ in range(batch):
        new = int(rng.lognormal(np.log(2000.0), 0.5)) + 1
        out = min(int(rng.lognormal(np.log(500.0), 0.5)) + 1, 1200)
        rows.append((float(rng.uniform(0.0, duration_s)), 1, batch_system + new, out, BATCH_GROUP, batch_system,
                     -1, 0))
    rows = [r for r in rows if r[0] < duration_s]
    rows.sort(key=lambda r: r[0])
    a = np.array(rows, dtype=float).reshape(-1, 8)
    n = len(a)
    output = a[:, 3].astype(np.int64)
    return Trace(origin=1_760_000_000.0, duration_s=duration_s, warmup_s=0.0, arrival_s=a[:, 0].copy(),
                 path=a[:, 1].astype(np.int8), prompt_tokens=a[:, 2].astype(np.int64), output_tokens=output,
                 hits_max=output >= max_output, request_id=np.arange(n, dtype=np.int64),
                 spec=TrafficSpec(paths=(INTERACTIVE, BATCH)), seed=seed,
                 prefix_group=a[:, 4].astype(np.int64), prefix_tokens=a[:, 5].astype(np.int32),
                 conversation=a[:, 6].astype(np.int64), history_tokens=a[:, 7].astype(np.int32))

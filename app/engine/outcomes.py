"""A run's per-request outcomes as arrays: times in whole microseconds since the trace origin, and the
durations vLLM V1 observes (``vllm/v1/metrics/stats.py``), each an integer microsecond count / 1e6 so
that a value recomputed from stored timestamps is the same to the bit. The simulator writes them as
per-request records (:mod:`app.simulator.records`); the economics replay counts breaches on them.

- ``ttft_s``  = first_token - arrival (arrival is the API server's: includes tokenization, queue, prefill)
- ``queue_s`` = scheduled (first time) - the engine's arrival (a few ms after ``arrival``: tokenization)
- ``e2e_s``   = finish - arrival
- ``tpot_s``  = decode / (output_tokens - 1), 0 when output_tokens <= 1, where decode = finish - first_token
- ``cached_tokens``: prompt tokens the prefix cache served at the request's first scheduling (0 without it)
"""

from __future__ import annotations

import numpy as np

from app.engine.fleet import FleetRun

US = 1_000_000
NO_TIME = np.iinfo(np.int64).min  # a time that has not happened (NaT)


def _us(seconds: list[float]) -> np.ndarray:
    """Seconds since the origin -> whole microseconds (NO_TIME for NaN)."""
    t = np.asarray(seconds, dtype=float)
    out = np.full(len(t), NO_TIME, dtype=np.int64)
    ok = ~np.isnan(t)
    out[ok] = np.rint(t[ok] * US).astype(np.int64)
    return out


def _span(end_us: np.ndarray, start_us: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """(end - start) in seconds where ``ok``, else NaN: an integer microsecond count / 1e6, so the
    same value is recomputed bit for bit from the stored timestamps."""
    out = np.full(len(end_us), np.nan)
    out[ok] = (end_us[ok] - start_us[ok]) / US
    return out


# (array, Requests list, conversion) of run_arrays, in the order they are converted
_OUTCOMES: tuple[tuple[str, str, str], ...] = (
    ("arrival_us", "arrival", "us"), ("eng_arrival_us", "eng_arrival", "us"), ("scheduled_us", "sched_t", "us"),
    ("first_token_us", "first_t", "us"), ("finish_us", "finish_t", "us"), ("replica", "replica", "int"),
    ("path", "path", "int"), ("prompt_tokens", "prompt", "int"), ("output_tokens", "gen", "int"),
    ("preemptions", "npre", "int"), ("reason", "reason", "int"), ("lost", "lost", "bool"),
    ("cached_tokens", "cached", "int"))


def run_arrays(run: FleetRun, release: bool = False) -> dict[str, np.ndarray]:
    """The run's per-request outcomes as arrays. Times (``*_us``) are whole microseconds since the
    trace origin (``NO_TIME`` if the event did not happen); durations are seconds.

    ``release``: empty each of the run's per-request lists once it is converted (the engine keeps
    them as Python lists, about 300 bytes a request; a month of a fleet is millions of requests), so
    that the lists and the arrays are not held together; the run's requests are gone afterwards."""
    r = run.reqs
    d: dict[str, np.ndarray] = {}
    for key, attr, kind in _OUTCOMES:
        values = getattr(r, attr)
        d[key] = _us(values) if kind == "us" else np.asarray(values, dtype=bool if kind == "bool" else np.int64)
        if release:
            values.clear()
    if release:
        for attr in ("target", "hits_max", "to_prefill", "last_tok"):
            getattr(r, attr).clear()
    first = d["first_token_us"] != NO_TIME
    done = (d["reason"] >= 0) & ~d["lost"]
    d["has_first_token"], d["finished"] = first, done
    d["ttft_s"] = _span(d["first_token_us"], d["arrival_us"], first)
    d["queue_s"] = _span(d["scheduled_us"], d["eng_arrival_us"], done)
    d["prefill_s"] = _span(d["first_token_us"], d["scheduled_us"], done)
    d["decode_s"] = _span(d["finish_us"], d["first_token_us"], done)
    d["inference_s"] = _span(d["finish_us"], d["scheduled_us"], done)
    d["e2e_s"] = _span(d["finish_us"], d["arrival_us"], done)
    n = d["output_tokens"]
    tpot = np.full(len(n), np.nan)
    tpot[done] = np.where(n[done] > 1, d["decode_s"][done] / np.maximum(n[done] - 1, 1), 0.0)
    d["tpot_s"] = tpot
    return d

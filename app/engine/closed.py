"""Follow-ups sent in closed loop: a turn of a chat waits for the answer to the turn before it.

A chat client sends a follow-up after its user has read the answer and written the next message; it
cannot send it earlier, however slow the answer. A trace drawn before any engine runs (open loop)
puts each follow-up at a time fixed in advance, so an overloaded fleet still receives the next
turns on time, on top of the backlog, while the users of a real fleet are still waiting. The
real-engine harness's driver sends its follow-ups in closed loop, and so do the engines on a trace
that says so (``Trace.follows``, ``Trace.gap_s``): a request that follows another is sent at that
one's finish + its gap, and not before.

The fleets (:func:`app.engine.fleet.run_fleet` and the compiled
:func:`app.engine.twin_fleet.simulate`) then run one event loop over the arrivals of the requests
that follow none (in trace order), the follow-ups released so far (a heap on (time, request)), the
scrape grid, and the replicas' own events in time order (the replica whose plan ends first; the
lower index at a tie), so that a follow-up released by a finish is routed before any replica has
moved past its send time. Both fleets make the same choices in the same order, so their request
times stay bit-identical. A request that follows one whose replica crashed is sent at the crash +
its gap (the client saw the error).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.trace import Trace


@dataclass(frozen=True)
class ClosedLoop:
    """Per request of a trace: the request that follows it (-1: none) and its gap (seconds after the
    answer it waits for; 0 for a request that follows none); the requests that follow none, in trace
    order (the loop's scheduled arrivals)."""

    follower: np.ndarray  # int64
    gap_s: np.ndarray  # float64
    scheduled: np.ndarray  # int64


def closed_loop(trace: Trace) -> ClosedLoop | None:
    """The trace's follow-ups (None: every request is sent at its ``arrival_s``). Raises a ValueError
    naming the first request whose fields are inconsistent: a request follows an earlier one, at most
    one request follows each, and a gap is a finite number of seconds, not negative."""
    if trace.follows is None:
        return None
    n = len(trace)
    follows = np.asarray(trace.follows)
    if follows.shape != (n,):
        raise ValueError(f"trace.follows: {follows.shape} values for {n} requests")
    follows = follows.astype(np.int64)
    if not (follows >= 0).any():
        return None
    if trace.gap_s is None:
        raise ValueError("trace.follows without trace.gap_s: when is a follow-up sent?")
    gap = np.asarray(trace.gap_s, dtype=np.float64)
    if gap.shape != (n,):
        raise ValueError(f"trace.gap_s: {gap.shape} values for {n} requests")
    rows = np.arange(n, dtype=np.int64)
    on = follows >= 0

    def bad(mask: np.ndarray, what: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise ValueError(f"trace request {i} (id {int(trace.request_id[i])}): "
                             + what.format(follows=int(follows[i]), gap=float(gap[i])))

    bad(on & (follows >= rows), "follows request {follows}, not an earlier one")
    bad(on & ~(np.isfinite(gap) & (gap >= 0)), "its gap {gap} is not a finite number of seconds >= 0")
    bad(follows < -1, "follows request {follows}: a request index or -1")
    led = follows[on]
    order = np.sort(led)
    twice = order[1:] == order[:-1]
    if twice.any():
        lead = int(order[1:][twice][0])
        second = int(np.flatnonzero(follows == lead)[1])
        raise ValueError(f"trace request {second} (id {int(trace.request_id[second])}): follows request {lead}, "
                         "which another request follows already")
    follower = np.full(n, -1, dtype=np.int64)
    follower[led] = rows[on]
    return ClosedLoop(follower=follower, gap_s=np.where(on, gap, 0.0), scheduled=rows[~on])

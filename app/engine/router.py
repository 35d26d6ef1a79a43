"""The router of the Python fleets (:mod:`app.engine.fleet`, :mod:`app.engine.policy_fleet`): which
replica a request goes to. The compiled core's :func:`app.engine.twin_engine.route` makes the same
choice. The fleets differ only in how they draw the random positions: the static fleet as
``random.Random`` draws ``randrange`` and ``sample`` (:func:`sampled_positions`), the policy fleet from
uniform floats (:func:`uniform_positions`).

The prefix-aware router keeps a conversation where its cache is: a turn goes to the replica that
served the conversation's previous turn, unless that replica is down or holds more than a margin of
outstanding requests above the least loaded one (then, and for a request of no conversation, it goes
as least outstanding sends it). llm-d's scheduler weighs the same two things, a prefix-cache score
against a queue score, as a weighted sum; a margin says the same in one number an operator can set
(``FleetConfig.affinity_margin``). Turns of a shared system prompt need no affinity: every replica
caches the prompt after its first request.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from app.engine.replica import Replica

# k positions among m (k = 2: two distinct ones; k = 1: the second is -1)
Draw = Callable[[int, int], tuple[int, int]]


def choose(router: str, reps: Sequence[Replica], start: int, draw: Draw, previous: int = -1,
           margin: int = 0) -> int:
    """The replica a request goes to among those that are up, searched from the rotating start
    ``start`` (so that ties do not favour replica 0): least outstanding (the first of the least
    loaded), round robin (the first), random (a drawn position), power of two (two distinct drawn
    positions; the less loaded, the first at a tie; with one replica up, that one, nothing drawn) or
    prefix aware (``previous``, the replica of the conversation's previous turn, -1: none, when it is
    up and its load is at most ``margin`` above the least; else least outstanding)."""
    n = len(reps)
    if router == "prefix_aware":
        best = choose("least_outstanding", reps, start, draw)
        if previous >= 0 and reps[previous].up and (reps[previous].outstanding() - reps[best].outstanding()
                                                    <= margin):
            return previous
        return best
    if router == "least_outstanding":
        # a loop over the replicas, not a list: this runs once per request
        best, least = -1, 1 << 62
        for off in range(n):
            r = start + off if start + off < n else start + off - n
            rep = reps[r]
            if rep.up:
                load = len(rep.inbox) + len(rep.waiting) + len(rep.running)  # rep.outstanding()
                if load < least:
                    best, least = r, load
        if best < 0:
            raise RuntimeError("no replica is up")
        return best
    order = [(start + r) % n for r in range(n) if reps[(start + r) % n].up]
    if not order:
        raise RuntimeError("no replica is up")
    if router == "round_robin":
        return order[0]
    if router == "random":
        return order[draw(len(order), 1)[0]]
    if len(order) == 1:
        return order[0]
    ia, ib = draw(len(order), 2)
    a, b = order[ia], order[ib]
    return a if reps[a].outstanding() <= reps[b].outstanding() else b


def sampled_positions(rng: random.Random) -> Draw:
    """Positions as ``rng.randrange(m)`` and ``rng.sample(range(m), 2)`` draw them (the static fleet's
    stream, which the compiled fleet replays: ``twin_fleet._router_picks``)."""

    def draw(m: int, k: int) -> tuple[int, int]:
        if k == 1:
            return rng.randrange(m), -1
        ia, ib = rng.sample(range(m), 2)
        return ia, ib

    return draw


def uniform_positions(u1: float, u2: float) -> Draw:
    """Positions from two uniform floats already drawn: ``int(u1 m)``, and a second one, distinct,
    ``int(u2 (m - 1))`` moved past the first."""

    def draw(m: int, k: int) -> tuple[int, int]:
        ia = int(u1 * m)
        if k == 1:
            return ia, -1
        ib = int(u2 * (m - 1))
        return ia, (ib + 1 if ib >= ia else ib)

    return draw

"""The router of the Python fleets (:mod:`app.engine.fleet`, :mod:`app.engine.policy_fleet`): which
replica a request goes to. The compiled core's :func:`app.engine.twin_engine.route` makes the same
choice. The fleets differ only in how they draw the random positions: the static fleet as
``random.Random`` draws ``randrange`` and ``sample`` (:func:`sampled_positions`), the policy fleet from
uniform floats (:func:`uniform_positions`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from app.engine.replica import Replica

# k positions among m (k = 2: two distinct ones; k = 1: the second is -1)
Draw = Callable[[int, int], tuple[int, int]]


def choose(router: str, reps: Sequence[Replica], start: int, draw: Draw) -> int:
    """The replica a request goes to among those that are up, searched from the rotating start
    ``start`` (so that ties do not favour replica 0): least outstanding (the first of the least
    loaded), round robin (the first), random (a drawn position) or power of two (two distinct drawn
    positions; the less loaded, the first at a tie; with one replica up, that one, nothing drawn)."""
    n = len(reps)
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

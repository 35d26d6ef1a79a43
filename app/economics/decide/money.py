"""The decision arithmetic (docs/methods.md#decision): headroom cost against breach cost, per scenario and path.

    cost(N') = N' x hours x price per replica-hour  +  requests x breach share(N') x price of a breach

Adding a replica pays when requests x (s(N'-1) - s(N')) x breach price > hours x replica-hour price.
The fleet's headroom cost is split across paths by their requests unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Prices:
    """What an hour of a replica and one broken promise cost (USD)."""

    replica_hour: float
    breach: Mapping[str, float]  # per path; a missing path costs nothing per breach
    horizon_hours: float = 720.0

    @classmethod
    def from_gpu(cls, gpu_hour: float, gpus_per_replica: float, breach: Mapping[str, float],
                 horizon_hours: float = 720.0) -> Prices:
        return cls(replica_hour=gpu_hour * gpus_per_replica, breach=breach, horizon_hours=horizon_hours)

    def __post_init__(self) -> None:
        if self.replica_hour < 0 or self.horizon_hours <= 0:
            raise ValueError("prices: replica-hour price must be >= 0 and the horizon > 0 hours")
        for path, price in self.breach.items():
            if price < 0:
                raise ValueError(f"prices: breach price of {path} must be >= 0")


def headroom_cost(replicas: int, prices: Prices) -> float:
    return replicas * prices.horizon_hours * prices.replica_hour


def split_by_requests(fleet_cost: float, requests: Mapping[str, float]) -> dict[str, float]:
    """A fleet cost shared across paths in proportion to their requests."""
    total = sum(requests.values())
    if total <= 0:
        return {p: fleet_cost / len(requests) for p in requests} if requests else {}
    return {p: fleet_cost * r / total for p, r in requests.items()}


def path_cost(requests: float, share: float, breach_price: float, headroom_share: float) -> dict[str, float]:
    """Expected breaches, breach cost, headroom cost and total of one path in one scenario."""
    breaches = requests * share
    breach_cost = breaches * breach_price
    return {"expected_breaches": breaches, "breach_cost": breach_cost, "headroom_cost": headroom_share,
            "total_cost": headroom_share + breach_cost}


def break_even_breach_price(requests: float, share_now: float, share_plus_one: float, prices: Prices,
                            other_paths_saving: float = 0.0, extra_replicas: int = 1) -> float | None:
    """Price of one breach of a path at which ``extra_replicas`` more replicas pay for themselves
    (``share_plus_one``: the path's breach share with them).

    ``other_paths_saving`` is the breach cost the extra replicas save on the other paths at their
    entered prices; None when they remove no breach of this path."""
    removed = requests * (share_now - share_plus_one)
    if removed <= 0:
        return None
    return max(0.0, (extra_replicas * prices.horizon_hours * prices.replica_hour - other_paths_saving) / removed)


def cost_per_kept_request(total_headroom_cost: float, requests: float, share: float) -> float | None:
    """Headroom cost (idle capacity included) per request that kept the promise."""
    kept = requests * (1 - share)
    return None if kept <= 0 else total_headroom_cost / kept


def cheapest(totals: Sequence[tuple[object, float]]) -> tuple[object, float]:
    """The (scenario, total) with the lowest total; ties go to the first (fewest replicas when sorted)."""
    return min(totals, key=lambda t: t[1])

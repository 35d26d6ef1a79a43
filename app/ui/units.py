"""Display conversions shared by the pages' tables."""

from __future__ import annotations

import math


def pct(x: float | None) -> float | None:
    """A share as a percentage (None stays None)."""
    return None if x is None else 100.0 * x


def ms(x: float | None) -> float | None:
    """Seconds as milliseconds (None and NaN become None)."""
    return None if x is None or math.isnan(x) else 1e3 * x

"""Parsing of scenario inputs typed by people (shared by the CLI and the dashboard)."""

from __future__ import annotations


def parse_replicas(text: str) -> list[int]:
    """``2:12`` (inclusive), ``2:12:2`` or ``3,4,6``."""
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            start, stop, step = (parts + [1])[:3]
            out = list(range(start, stop + 1, step))
        else:
            out = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"replicas {text!r}: expected FROM:TO[:STEP] or a comma-separated list") from None
    if not out or min(out) < 1:
        raise ValueError(f"replicas {text!r}: replica counts must be >= 1")
    return out


def parse_multipliers(text: str, what: str) -> list[float]:
    """``0.5,1.0,1.5``: positive numbers."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected comma-separated numbers") from None
    if not out or min(out) <= 0:
        raise ValueError(f"{what} {text!r}: multipliers must be > 0")
    return out

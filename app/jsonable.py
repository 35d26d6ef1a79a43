"""One JSON encoding for everything Headroom prints or stores: numpy scalars, timestamps and tuples
become plain JSON values, and NaN / ±Inf become null (JSON has no NaN: ``json.dumps`` would print it)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from typing import Any

import numpy as np


def _plain(obj: Any) -> Any:
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return _plain(obj.item())
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [_plain(v) for v in obj]
    if isinstance(obj, datetime | date):
        return None if obj != obj else obj.isoformat()  # pandas' NaT is a datetime that is not itself
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    return obj


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values (see the module docstring); raises TypeError on anything else."""
    out = _plain(obj)
    json.dumps(out, allow_nan=False)  # anything left that JSON cannot hold raises here
    return out


def dumps(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False)

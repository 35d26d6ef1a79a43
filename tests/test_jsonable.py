"""One JSON encoding for the CLI and the dashboard: NaN and ±Inf are null, numpy and times are plain."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from app.jsonable import dumps, jsonable


def test_numpy_nan_inf_and_times_become_plain_json() -> None:
    out = jsonable({"a": np.float64(1.5), "b": (1, 2), "c": math.nan, "d": np.int64(3),
                    "e": [math.inf, -math.inf, np.float32("nan")], "f": {"g": np.array([1.0, np.nan])},
                    "t": datetime(2026, 11, 17, tzinfo=UTC), "p": pd.Timestamp("2026-11-17T00:05:00Z"),
                    "n": pd.NaT})
    assert out == {"a": 1.5, "b": [1, 2], "c": None, "d": 3, "e": [None, None, None], "f": {"g": [1.0, None]},
                   "t": "2026-11-17T00:00:00+00:00", "p": "2026-11-17T00:05:00+00:00", "n": None}


def test_dumps_is_strict_json() -> None:
    text = dumps({"x": math.nan, "y": [math.inf]})
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"x": None, "y": [None]}


def test_what_json_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError):
        jsonable({"x": object()})

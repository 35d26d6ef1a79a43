"""The Capacity model page's view logic (``app.ui.capacity_model``), without Streamlit: the model and the
empirical curve on one load axis."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from app.ui import capacity_model as model_view
from tests.conftest import ts


def test_model_and_curve_on_one_load_axis() -> None:
    windows = [ts(300 * i) for i in range(4)]
    load = model_view.path_load(pd.DataFrame({
        "window_start": windows * 2, "path": ["chat"] * 4 + ["batch"] * 4,
        "requests": [600, 1200, 1800, 2400, 3000, 0, 0, 0], "replicas": [4, 4, 4, 4, 4, 4, 4, 8]}), 300, "chat")
    # the path's own requests; the replicas of the window (any path: 8 in the last one)
    assert list(load["load"]) == [0.5, 1.0, 1.5, 1.0]
    load = pd.DataFrame({"window_start": windows, "requests": [600, 1200, 1800, 2400], "replicas": 4,
                         "load": [0.5, 1.0, 1.5, 2.0]})
    # request-weighted mean load 1.5 req/s per replica at 4 replicas: 3.0 at 2, 4.5 at 2 with traffic x1.5
    assert model_view.scenario_load(load, 4) == pytest.approx(1.5)
    assert model_view.scenario_load(load, 2) == pytest.approx(3.0)
    assert model_view.scenario_load(load, 2, 1.5) == pytest.approx(4.5)
    cross = {"chat": {"observed_load_range": [0.5, 2.0],
                      "curve": [{"load": 0.5, "share_low": 0.01, "share_high": 0.02}],
                      "readings": [{"replicas": 2, "traffic": 1.0, "share": 0.5, "share_low": 0.2,
                                    "share_high": 1.0, "extrapolated": True},
                                   {"replicas": 2, "traffic": 1.5, "share": 0.7, "share_low": 0.3,
                                    "share_high": 1.0, "extrapolated": True}]}}
    pred = SimpleNamespace(path="chat", replicas=2, traffic=1.0, context=1.0, breach_share=0.4,
                           breach_share_low=0.3, breach_share_high=0.5, extrapolated=True)
    other = SimpleNamespace(**{**vars(pred), "path": "batch"})
    axis = model_view.load_axis(cross, "chat", [pred, other], load)
    assert axis["range"] == (0.5, 2.0)
    assert axis["readings"][["replicas", "load", "share"]].to_dict("records") == [
        {"replicas": 2, "load": pytest.approx(3.0), "share": 0.5}]
    assert axis["model"][["replicas", "load", "share", "share_high"]].to_dict("records") == [
        {"replicas": 2, "load": pytest.approx(3.0), "share": 0.4, "share_high": 0.5}]

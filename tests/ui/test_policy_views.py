"""The Economics page's policy inputs and views as plain functions: the form to a policy file's
mapping, the tables, the charts (asserted as data), the download header."""

from __future__ import annotations

import pandas as pd
import pytest

from app.economics.decide import policy_file
from app.ui import charts
from app.ui import economics as ev

DOC = {
    "fleet": [{"replicas": n, "traffic": 1.0, "context": 1.0, "total_cost": c, "total_cost_low": c - 1,
               "total_cost_high": c + 2} for n, c in ((3, 50.0), (4, 30.0), (5, 35.0))],
    "policies": {"note": "n", "rows": [
        {"policy": "auto", "kind": "autoscaler", "path": "a", "mean_replicas": 3.5, "breach_share": 0.1,
         "breach_share_low": 0.05, "breach_share_high": 0.2, "ttft_share": 0.1, "tpot_share": 0.0,
         "rejected_share": 0.0, "attempts_per_request": 1.0, "degraded_answers": 0.0, "breach_cost": 10.0,
         "headroom_cost": 14.0, "degraded_cost": 0.0, "total_cost": 24.0, "flags": [],
         "timeline": {"t_s": [0.0, 15.0, 30.0], "replicas": [3, 4, 4], "ready": [3, 3, 4], "signal": [0.0, 5.0, 1.0]}}],
        "fleet": [{"policy": "auto", "kind": "autoscaler", "mean_replicas": 3.5, "total_cost": 24.0,
                   "total_cost_low": 20.0, "total_cost_high": 30.0}]},
}


def test_the_form_gives_a_policy_file_mapping() -> None:
    form = {**ev.ECON_DEFAULTS, "policy_autoscaler": True, "policy_admission": True, "policy_queue_factor": "0.5, 2",
            "policy_retry": True, "policy_cap_tokens": 300, "policy_defer_path": "b", "policy_replicas": 5}
    spec = ev.policy_spec(form)
    assert spec["autoscaler"]["cold_start"] == "5m" and spec["autoscaler"]["wake_start"] == "20s"
    assert spec["admission"] == {"replicas": 5, "queue_factor": [0.5, 2.0]}
    assert spec["degradation"]["cap_tokens"] == {"tokens": 300}
    ps = ev.policy_set(form, observed_replicas=4)
    kinds = [r.kind for r in ps.rows]
    assert kinds == ["autoscaler"] * 2 + ["admission"] * 3 + ["retry"] * 2 + ["degradation"] * 2
    assert {r.replicas for r in ps.rows if r.kind != "autoscaler"} == {5}
    assert ev.policy_spec(ev.ECON_DEFAULTS) == {} and ev.policy_set(ev.ECON_DEFAULTS, 4) is None
    with pytest.raises(ValueError, match="queue caps"):
        ev.policy_spec({**form, "policy_queue_factor": "half"})
    with pytest.raises(policy_file.PolicyFileError, match="policy inputs: autoscaler.out_for"):
        ev.policy_set({**form, "policy_out_for": "a while"}, 4)


def test_policy_tables_and_charts_as_data() -> None:
    table = ev.policy_table(DOC)
    assert table.loc[0, "joint breach %"] == pytest.approx(10.0) and table.loc[0, "mean replicas"] == 3.5
    fig = charts.policy_costs(ev.fleet_frame(DOC, 1.0, 1.0), ev.policy_fleet_frame(DOC))
    static, auto = fig.data
    assert list(static.x) == [3, 4, 5] and list(static.y) == [50.0, 30.0, 35.0]
    assert list(auto.x) == [3.5] and list(auto.y) == [24.0] and auto.name == "autoscaler"
    assert list(auto.error_y.array) == [6.0] and list(auto.error_y.arrayminus) == [4.0]
    assert "replicas paid for" in fig.layout.xaxis.title.text
    tl = ev.timelines(DOC)
    assert list(tl["minute"]) == [0.0, 0.25, 0.5]
    fig = charts.autoscaler_timeline(tl)
    assert [list(t.y) for t in fig.data] == [[3, 4, 4], [3, 3, 4]]
    assert ev.timelines({"policies": {"rows": []}}).empty
    assert isinstance(ev.policy_fleet_frame({}), pd.DataFrame)

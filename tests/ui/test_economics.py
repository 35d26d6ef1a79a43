"""The Economics and Scenario sets pages' view logic (``app.ui.economics``, ``app.ui.scenario_sets``),
without Streamlit: the form to scenario inputs and their replay key, prices, the verdict and tables,
break-even lines, saved sets in the CLI's format."""

from __future__ import annotations

import json

import pytest

from app.promise.shares import Promise
from app.store import Workspace
from app.ui import economics as economics_view
from app.ui import scenario_sets as sets_view

INPUTS = {**economics_view.ECON_DEFAULTS, "datasets": [2, 1], "replicas": "3:5", "traffic": "1.0,1.5", "context": "1"}
PROMISES = {"chat": {"ttft_s": 0.5, "tpot_s": 0.03, "e2e_s": None, "target": 0.99},
            "batch": {"ttft_s": 2.0, "tpot_s": 0.1, "e2e_s": 30.0, "target": 0.9}}


def _key(form: dict, promises: dict = PROMISES) -> str:
    return economics_view.scenario_inputs(form, ["model_name"], [], promises).replay_key()


def test_the_replay_key_leaves_prices_targets_and_e2e_out() -> None:
    key = _key(INPUTS)
    repriced = {**INPUTS, "gpu_hour": 99.0, "breach": {"chat": 5.0}, "horizon_hours": 24.0, "split": "equal"}
    retargeted = {p: {**v, "target": 0.5, "e2e_s": 1.0} for p, v in PROMISES.items()}
    assert _key(repriced, retargeted) == key
    tighter = {**PROMISES, "chat": {**PROMISES["chat"], "ttft_s": 0.25}}
    assert _key(INPUTS, tighter) != key
    assert _key({**INPUTS, "seeds": 2}) != key
    assert _key({**INPUTS, "kv_cache_tokens": 4096}) != key
    assert json.loads(key)["datasets"] == [1, 2]
    with pytest.raises(ValueError, match="replicas"):
        _key({**INPUTS, "replicas": "x"})
    with pytest.raises(ValueError, match="at least one dataset"):
        _key({**INPUTS, "datasets": []})
    with pytest.raises(ValueError, match="kv_cache_tokens: must be at least 1"):
        _key({**INPUTS, "kv_cache_tokens": 0})


def test_the_form_and_the_cli_make_the_same_scenario_inputs() -> None:
    """The dashboard's form and ``headroom scenarios``' flags meet in one ``ScenarioInputs``."""
    from app.economics.decide.inputs import ScenarioInputs
    from app.economics.decide.money import Prices
    from app.economics.model.capacity import Assumptions

    form = {**INPUTS, "price_basis": "replica-hour", "replica_hour": 7.0, "breach": {"chat": 0.5},
            "default_breach": 0.02, "max_num_seqs": 64, "router": "round_robin"}
    got = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES)
    cli = ScenarioInputs(datasets=(1, 2), path_labels=("model_name",), replicas=(3, 4, 5), traffic=(1.0, 1.5),
                         promises=(Promise(path="chat", ttft_s=0.5, tpot_s=0.03, target=0.99),
                                   Promise(path="batch", ttft_s=2.0, tpot_s=0.1, e2e_s=30.0, target=0.9)),
                         assumptions=Assumptions(max_num_seqs=64, router="round_robin"),
                         prices=Prices(7.0, {"chat": 0.5, "*": 0.02}))
    assert got == cli
    assert got.replay_key() == cli.replay_key()
    # the E2E threshold does not reach the twin; the target does, for the routing row's replicas needed
    assert got.promises[1].e2e_s is None and got.targets() == {"chat": 0.99, "batch": 0.9}
    assert dict(got.prices_for(["chat", "batch"]).breach) == {"chat": 0.5, "batch": 0.02}


def test_scenario_order_and_limit() -> None:
    inputs = economics_view.scenario_inputs(INPUTS, ["model_name"], [], PROMISES)
    assert inputs.scenarios() == [(3, 1.0, 1.0), (4, 1.0, 1.0), (5, 1.0, 1.0),
                                  (3, 1.5, 1.0), (4, 1.5, 1.0), (5, 1.5, 1.0)]
    with pytest.raises(ValueError, match="200 scenarios"):
        _key({**INPUTS, "replicas": "1:300"})
    with pytest.raises(ValueError, match="traffic"):
        _key({**INPUTS, "traffic": "0"})


def test_prices_by_gpu_or_replica_hour() -> None:
    form = {**INPUTS, "gpu_hour": 2.0, "gpus_per_replica": 8, "breach": {"chat": 0.5}, "default_breach": 0.01}
    p = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES).prices_for(["chat", "batch"])
    assert p.replica_hour == 16.0 and dict(p.breach) == {"chat": 0.5, "batch": 0.01}
    form = {**INPUTS, "price_basis": "replica-hour", "replica_hour": 7.0}
    p = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES).prices_for(["chat"])
    assert p.replica_hour == 7.0 and p.horizon_hours == 720.0


def _doc() -> dict:
    """A priced document of two scenarios and one path, by hand: 720 h, $1 per replica-hour."""
    rows = [{"replicas": n, "traffic": 1.0, "context": 1.0, "path": "chat", "breach_share": s,
             "breach_share_low": s / 2, "breach_share_high": 2 * s, "ttft_share": s, "tpot_share": 0.0,
             "extrapolated": n == 3, "extrapolation_reasons": ["below the observed N"] if n == 3 else [],
             "requests": 1000.0, "expected_breaches": 1000 * s, "breach_cost": 1000 * s * 10,
             "headroom_cost": 720.0 * n, "total_cost": 720.0 * n + 1000 * s * 10,
             "breach_cost_low": 1000 * s * 5, "breach_cost_high": 1000 * s * 20,
             "cost_per_kept_request": 720.0 * n / (1000 * (1 - s))} for n, s in ((3, 0.5), (4, 0.1))]
    from app.economics.decide import decision

    fleet = decision.fleet_totals(rows)
    return {"scenarios": rows, "fleet": fleet, "cheapest_by_traffic_context": decision.cheapest(fleet),
            "cheapest": {"replicas": 4, "traffic": 1.0, "context": 1.0, "total_cost": fleet[1]["total_cost"]},
            "break_even_breach_price": {"chat": None}, "observed_replicas": 4,
            "prices": {"replica_hour": 1.0, "breach": {"chat": 10.0}, "horizon_hours": 720.0, "cost_split": "requests"}}


def test_verdict_and_tables() -> None:
    doc = _doc()
    (v,) = economics_view.verdict(doc)
    # 3 replicas: 2160 + 5000 = 7160; 4: 2880 + 1000 = 3880; at the interval ends 3 -> [4660, 12160],
    # 4 -> [3380, 4880]: 4 either way
    assert v["replicas"] == 4 and v["determined_by_data"]
    assert v["cost_per_kept_request"] == pytest.approx(2880 / 900)
    table = economics_view.scenario_table(doc)
    assert list(table["N'"]) == [3, 4]
    assert table.loc[0, "flags"] == "below the observed N"
    assert table.loc[1, "joint breach %"] == pytest.approx(10.0)
    assert list(economics_view.fleet_frame(doc, 1.0, 1.0)["total_cost"]) == [7160.0, 3880.0]


def _run() -> dict:
    form = {**INPUTS, "gpu_hour": 3.0, "gpus_per_replica": 2.0, "breach": {"chat": 0.5}}
    inputs = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES)
    return {"spec": inputs.replay_key(), "inputs": form, "scenario_inputs": inputs}


def test_saved_sets_use_the_cli_format_and_round_trip(ws: Workspace) -> None:
    from app.economics.decide import saved

    inputs = sets_view.saved_inputs(_run())
    # the shape `headroom scenarios --save` writes, plus the dashboard's own form
    assert inputs["replicas"] == [3, 4, 5] and inputs["traffic"] == [1.0, 1.5] and inputs["context"] == [1.0]
    assert inputs["prices"]["replica_hour"] == 6.0 and inputs["prices"]["breach"] == {"batch": 0.01, "chat": 0.5}
    assert {p["path"]: p["ttft_s"] for p in inputs["promises"]} == {"batch": 2.0, "chat": 0.5}
    assert sets_view.form_inputs(inputs)["gpu_hour"] == 3.0  # the dashboard form comes back as it was
    saved.save(ws, "baseline", inputs, _doc())
    saved.save(ws, "pricier", {**inputs, "seeds": 3}, {**_doc(), "prices": {**_doc()["prices"], "replica_hour": 2.0}})
    text = saved.export_json(ws)
    for name in saved.names(ws):
        saved.delete(ws, name)
    assert saved.import_json(ws, text) == ["baseline", "pricier"]
    sets = {n: saved.get(ws, n) for n in saved.names(ws)}
    table = sets_view.sets_table(sets).set_index("name")
    assert table.loc["baseline", "replicas"] == "3, 4, 5" and table.loc["pricier", "replica-hour $"] == 2.0
    assert table.loc["baseline", "cheapest N'"] == 4
    cmp = sets_view.compare_headlines(["baseline", "pricier"], [sets["baseline"], sets["pricier"]]).set_index("")
    assert cmp.loc["replica-hour", "baseline"] == "$1" and cmp.loc["replica-hour", "pricier"] == "$2"
    assert cmp.loc["total cost at the cheapest N'", "baseline"] == "$3,880"
    assert cmp.loc["seeds", "pricier"] == "3"
    assert list(sets_view.set_fleet(sets["baseline"])["replicas"]) == [3, 4]


def test_form_inputs_from_a_cli_saved_set() -> None:
    cli = {"datasets": [1], "replicas": [2, 3, 4], "traffic": [1.0, 1.5], "context": [1.0], "seeds": 3,
           "prices": {"replica_hour": 8.0, "breach": {"chat": 0.2}, "horizon_hours": 24.0, "cost_split": "equal"},
           "assumptions": {"router": "round_robin", "max_num_seqs": 128, "max_num_batched_tokens": 4096}}
    form = sets_view.form_inputs(cli)
    assert (form["replicas"], form["traffic"], form["context"]) == ("2,3,4", "1,1.5", "1")
    assert form["price_basis"] == "replica-hour" and form["replica_hour"] == 8.0 and form["split"] == "equal"
    assert form["router"] == "round_robin" and form["max_num_seqs"] == 128 and form["breach"] == {"chat": 0.2}
    assert economics_view.grid_axes(form) == ([2, 3, 4], [1.0, 1.5], [1.0])
    assert form["prefix_cache"] is None and form["routing"] and form["routing_replicas"] is None
    # the prefix cache's assumptions and the routing row come back; a per-path conversation share has
    # no place on the form (one share for every path)
    cli["assumptions"] |= {"prefix_cache": "conversation", "conversation_share": {"*": 0.6, "chat": 0.8},
                           "think_s": 10.0, "affinity_margin": 4}
    cli["routing"] = {"on": True, "replicas": 3, "traffic": 1.5}
    form = sets_view.form_inputs(cli)
    assert (form["prefix_cache"], form["conversation_share"], form["think_s"], form["affinity_margin"]) == (
        "conversation", 0.6, 10.0, 4)
    assert (form["routing"], form["routing_replicas"], form["routing_traffic"]) == (True, 3, 1.5)
    inputs = economics_view.scenario_inputs(form, ["model_name"], [], PROMISES)
    assert inputs.assumptions.conversation_share == {"*": 0.6} and inputs.routing_spec().replicas == 3


def test_break_even_lines_say_what_is_missing() -> None:
    doc = _doc()  # cheapest 4 of 3..4: no larger size was computed
    doc["break_even_replicas"] = None
    assert economics_view.break_even_lines(doc) == [
        "Break-even price of one **chat** breach for a larger size: add a size above N'=4 to the replica range to "
        "see it"]
    doc["cheapest"] = {**doc["cheapest"], "replicas": 3}
    doc["break_even_replicas"] = 4
    doc["break_even_breach_price"] = {"chat": 1.8}
    assert economics_view.break_even_lines(doc) == [
        "Break-even price of one **chat** breach for 4 replicas (1 more than the cheapest): **\\$1.8000** "
        "(entered: \\$10.0000)"]  # \$: no maths
    doc["break_even_replicas"] = 6  # a grid of 3, 6: the next size is three replicas more
    assert economics_view.break_even_lines(doc)[0].startswith(
        "Break-even price of one **chat** breach for 6 replicas (3 more than the cheapest)")

"""The Capacity model page's view logic (``app.ui.capacity_model``), without Streamlit: the model and the
empirical curve on one load axis; the prefix cache's split with each value's source and flag."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from app.economics.model.demand import PrefixSplit
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


def _analysis(paths: list[SimpleNamespace], case: str | None = None) -> SimpleNamespace:
    """What ``prefix_split_table`` reads of an analysis: the model's prefix-cache case, block size, router
    and source, the observed N, and per path its share read and its split."""
    model = SimpleNamespace(assumptions=SimpleNamespace(prefix_cache=case, think_s=None), block_size=128,
                            router="least_outstanding",
                            sources={"prefix_cache": SimpleNamespace(detail="69.7% of prompt tokens served")})
    return SimpleNamespace(model=model, demand=SimpleNamespace(paths=paths), observed=SimpleNamespace(replicas=2))


def _split(**kw: object) -> PrefixSplit:
    base = {"cached_share": 0.7, "conversation_share": 0.6, "conversation_source": "assumed",
            "conversation_detail": "the least conversation the prompt lengths allow", "shared_tokens": 256,
            "shared_share": 0.28, "followup_share": 0.75, "think_s": 15.0, "twin_cached_share": 0.69,
            "followup_source": "fitted: the twin at 2 replicas serves 69.0 %", "think_source": "fitted"}
    return PrefixSplit(**{**base, **kw})


TOTALS = pd.DataFrame({"path": ["chat", "rag", "sys", "idle", "batch"], "hits": [1.0, float("nan"), 1.0, 0.0,
                                                                                   float("nan")],
                       "windows": [12, 12, 12, 12, 0]})


def _rows(table: pd.DataFrame, path: str) -> dict[str, tuple]:
    part = table[table["path"] == path].set_index("quantity")
    return {q: (r["value"], r["source"], r["CLI flag"]) for q, r in part.iterrows()}


def test_the_split_each_value_with_its_source_and_flag() -> None:
    """chat: split assumed (the least history), follow-ups fitted, think time fitted per minute; rag:
    both given, its cached tokens read from prompt_tokens_cached (no hits counter); sys: no history, so no
    follow-up; idle: the cache served nothing; batch: no counter, no row (the page says so above)."""
    paths = [SimpleNamespace(name="chat", cached_share=0.7, prefix=_split()),
             SimpleNamespace(name="rag", cached_share=0.5, prefix=_split(
                 cached_share=0.5, conversation_share=0.4, conversation_source="given", followup_share=0.5,
                 think_s=10.0, think_source="given", twin_cached_share=float("nan"))),
             SimpleNamespace(name="sys", cached_share=0.3, prefix=_split(
                 cached_share=0.3, conversation_share=0.0, shared_share=0.3, followup_share=0.0)),
             SimpleNamespace(name="idle", cached_share=0.0, prefix=None),
             SimpleNamespace(name="batch", cached_share=float("nan"), prefix=None)]
    table = model_view.prefix_split_table(_analysis(paths), TOTALS)
    assert list(table.columns) == ["path", "quantity", "value", "unit", "source", "CLI flag", "how"]
    assert set(table["path"]) == {"chat", "rag", "sys", "idle"}
    chat = _rows(table, "chat")
    assert chat == {
        "prompt tokens served from the cache at the observed N": (pytest.approx(70.0), "read",
                                                                  "--prefix-cache off"),
        "shared prefix (every request starts with it)": (256.0, "assumed", "--conversation-share"),
        "served by the shared prefix": (pytest.approx(28.0), "assumed", "--conversation-share"),
        "conversation history": (pytest.approx(60.0), "assumed", "--conversation-share"),
        "follow-up probability": (75.0, "fitted", "none (fitted)"),
        "turns per conversation": (4.0, "fitted", ""),  # 1 / (1 - 0.75)
        "think time": (15.0, "fitted on the computed prompt tokens per minute", "--think-time"),
        "served by the twin at the observed N (the check)": (pytest.approx(69.0), "twin replay", ""),
    }
    how = table[table["path"] == "chat"].set_index("quantity")["how"]
    assert how["prompt tokens served from the cache at the observed N"].startswith(
        "vllm:prefix_cache_hits_total over vllm:prompt_tokens_total")
    assert "N = 2 under least_outstanding" in how["served by the twin at the observed N (the check)"]
    rag = _rows(table, "rag")
    assert rag["conversation history"] == (pytest.approx(40.0), "given", "--conversation-share")
    assert rag["think time"] == (10.0, "given", "--think-time") and rag["turns per conversation"][0] == 2.0
    assert how["think time"].endswith("(closed loop, assumed: the user waits for the answer), so where the answers "
                                      "are late at N' so are the next turns")
    assert "served by the twin at the observed N (the check)" not in rag  # no twin run to check against
    rag_how = table[(table["path"] == "rag")].set_index("quantity")["how"]
    assert rag_how["prompt tokens served from the cache at the observed N"].startswith(
        "vllm:prompt_tokens_cached_total over")
    sys = _rows(table, "sys")
    assert sys["conversation history"][0] == 0.0 and sys["follow-up probability"][:2] == (0.0, "assumed")
    assert "think time" not in sys
    idle = table[table["path"] == "idle"]
    assert idle["quantity"].tolist() == ["prompt tokens served from the cache at the observed N",
                                         "shared prefix and conversation history"]
    assert idle["how"].iloc[1] == "the cache served no prompt token: nothing to split"


def test_the_split_when_the_cache_case_is_given() -> None:
    """--prefix-cache shared: the whole share is a shared prefix (given), no conversation; off: the twin
    computes every prompt token (given), whatever the export read."""
    path = SimpleNamespace(name="chat", cached_share=0.7, prefix=None)
    shared = _rows(model_view.prefix_split_table(_analysis([path], "shared"), TOTALS), "chat")
    assert shared["shared prefix's part of the cached tokens"] == (100.0, "given", "--prefix-cache")
    off = model_view.prefix_split_table(_analysis([path], "off"), TOTALS)
    assert off["quantity"].tolist() == ["prompt tokens served from the cache at the observed N",
                                        "the twin's prefix cache"]
    assert off[["unit", "source", "CLI flag"]].iloc[1].tolist() == ["off", "given", "--prefix-cache"]


def test_paths_without_a_prefix_cache_counter_are_said_with_what_the_fit_assumed() -> None:
    totals = pd.DataFrame({"path": ["chat", "batch"], "windows": [12, 0]})
    assert model_view.prefix_cache_paths(totals, ["batch", "chat", "other"]) == (["chat"], ["batch", "other"])
    assert model_view.prefix_cache_paths(totals.iloc[:0], ["chat"]) == ([], ["chat"])
    said = model_view.no_counter_statement(["a*b", "batch"], every_path=True)
    assert said.startswith("**No prefix-cache counter** for **a\\*b**, **batch** in the export")
    assert "`vllm:prefix_cache_hits_total`" in said and "`vllm:prompt_tokens_cached_total`" in said
    assert "**assumed no prefix caching**" in said and "absorbed into the fitted prefill rate" in said
    assert said.endswith("cannot be priced without these counters.")
    assert "priced" not in model_view.no_counter_statement(["batch"], every_path=False)

"""The worked examples of docs/methods.md, computed by Headroom's own queries and functions: each
figure the page prints in bold (or in its table) is asserted here, in the section it belongs to, so the
page and the code cannot disagree."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from app.cube import ensure_cube
from app.economics.check import curve, queueing
from app.economics.decide import money
from app.economics.model.capacity import Assumptions, FitQuality, ReplicaModel
from app.engine.policy import client_throttle, expected_attempts
from app.promise.shares import Promise, burn_factor, shares, time_range
from app.store import Workspace
from app.ui.tail import window_quantiles
from tests.conftest import histogram, load, samples
from tests.support.cube import cube, values
from tests.support.paths import ROOT
from tests.support.promql_oracle import PROMETHEUS_2, PROMETHEUS_3, extrapolate

PAGE = ROOT / "docs" / "methods.md"
V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
EXAMPLE_LES = ["0.25", "0.5", "1.0", "2.5", "+Inf"]
EXAMPLE = [300, 640, 880, 960, 1000]


def section(anchor: str) -> str:
    """The text of the heading with ``{#anchor}``, up to the next heading of the same or a higher level."""
    text = PAGE.read_text()
    match = re.search(r"^(#+) .*\{#" + re.escape(anchor) + r"\}\s*$", text, re.M)
    assert match, f"docs/methods.md has no heading {{#{anchor}}}"
    level = len(match.group(1))
    rest = text[match.end():]
    end = re.search(r"^#{1," + str(level) + r"} ", rest, re.M)
    return rest[: end.start()] if end else rest


def shown(anchor: str, *figures: str) -> None:
    body = " ".join(section(anchor).split())  # the page's lines wrap anywhere
    for figure in figures:
        assert figure in body, f"{figure!r} is not in docs/methods.md#{anchor}"


def one_window(family: str, les: list[str], counts: list[int], labels: dict | None = None) -> list[dict]:
    return histogram(family, labels or V1, les, [(0, [0] * len(les), 0.0), (60, counts, 500.0)])


def path_row(ws: Workspace, promise: Promise):
    cube_id = ensure_cube(ws, None, 60, None)
    start, end = time_range(ws, cube_id, None, None)
    return shares(ws, cube_id, [promise], start, end).set_index("path").loc["chat"]


def test_quantiles_from_buckets(ws: Workspace) -> None:
    load(ws, one_window(TTFT, EXAMPLE_LES, EXAMPLE))
    cube_id = ensure_cube(ws, None, 60, None)
    start, end = time_range(ws, cube_id, None, None)
    got = []
    for q in (0.9, 0.99):
        frame = window_quantiles(ws, cube_id, start, end, q)
        got.append(float(frame[frame.signal == "ttft"]["value_s"].iloc[0]))
    assert got == pytest.approx([1.375, 2.5])
    shown("quantile", f"**{got[0]:.3f} s**", f"**{got[1]:.1f} s**")


@pytest.mark.parametrize(("threshold", "row"), [(0.5, "| 0.5 s |"), (0.8, "| 0.8 s |"), (0.1, "| 0.1 s |"),
                                               (3.0, "| 3 s |")])
def test_share_above_a_threshold_and_its_bounds(ws: Workspace, threshold: float, row: str) -> None:
    load(ws, one_window(TTFT, EXAMPLE_LES, EXAMPLE))
    r = path_row(ws, Promise(ttft_s=threshold))
    line = next(ln for ln in section("share-above-threshold").splitlines() if ln.startswith(row))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == f"{r['ttft_share']:.3f}"
    assert cells[3] == f"[{r['ttft_low']:.3f}, {r['ttft_high']:.3f}]"
    assert bool(r["ttft_exact"]) is cells[1].startswith("a bound")


def test_non_monotone_buckets_are_repaired(ws: Workspace) -> None:
    load(ws, one_window(TTFT, ["0.5", "1", "2", "+Inf"], [100, 180, 170, 200]))
    r = path_row(ws, Promise(ttft_s=1.5))
    assert (r["ttft_share"], r["ttft_low"], r["ttft_high"]) == pytest.approx((0.1, 0.1, 0.1))
    frame = cube(ws, 60)
    assert [values(frame, "ttft", "increase", le)[0] for le in (0.5, 1.0, 2.0, math.inf)] == [100, 180, 180, 200]
    shown("non-monotone-buckets", "100, 180, 180, 200", f"**{r['ttft_share']:.3f}**")


def test_exact_window_increases(ws: Workspace) -> None:
    pts = [(0, 40), (15, 52), (30, 60), (45, 71), (60, 80), (75, 3), (90, 9), (105, 30), (120, 33)]
    load(ws, samples("vllm:prompt_tokens_total", V1, pts))
    inc = values(cube(ws, 60), "prompt_tokens_total", "increase")
    # windows (0, 60] and (60, 120], keyed by their start; the first sample is the baseline of (-60, 0]
    assert inc == {-60: 0, 0: 40, 60: 33}
    shown("exact-increases", f"**{inc[0]:.0f}**", f"**{inc[60]:.0f}**", f"together {inc[0] + inc[60]:.0f}")


def test_a_histogram_resets_as_one_label_set(ws: Workspace) -> None:
    les = ["0.5", "1.0", "+Inf"]
    load(ws, histogram(TTFT, V1, les, [(0, [20, 25, 40], 9.0), (60, [6, 30, 31], 5.0)]))
    frame = cube(ws, 60)
    got = [values(frame, "ttft", "increase", le)[0] for le in (0.5, 1.0, math.inf)]
    assert got == [6, 30, 31]
    assert values(frame, "ttft", "resets") == {0: 1}
    shown("joint-resets", "**" + ", ".join(f"{v:.0f}" for v in got) + "**", "**1** reset")


def test_promql_increase_extrapolates() -> None:
    pts = [(10, 5), (25, 20), (40, 35), (55, 50)]
    for semantics in (PROMETHEUS_2, PROMETHEUS_3):
        got = extrapolate(pts, 0, 60, semantics)
        assert got is not None and got.increase == pytest.approx(55.0)
    shown("promql-increase", "**55**")


def test_frechet_bounds_of_the_joint_share(ws: Workspace) -> None:
    rows = one_window(TTFT, ["0.5", "+Inf"], [950, 1000]) + one_window(TPOT, ["0.05", "+Inf"], [970, 1000])
    load(ws, rows)
    r = path_row(ws, Promise(ttft_s=0.5, tpot_s=0.05))
    assert (r["joint_low"], r["joint_high"]) == pytest.approx((0.05, 0.08))
    independence = 1 - (1 - r["ttft_share"]) * (1 - r["tpot_share"])
    shown("frechet", f"**[{r['joint_low']:.2f}, {r['joint_high']:.2f}]**", f"{independence:.4f}")


def test_tpot_per_token_bounds_the_request_share(ws: Workspace) -> None:
    rows = one_window(ITL, ["0.05", "+Inf"], [99_975, 100_000])
    rows += samples("vllm:request_success_total", {**V1, "finished_reason": "stop"}, [(0, 0), (60, 1000)])
    rows += one_window(TTFT, ["0.5", "+Inf"], [1000, 1000])
    load(ws, rows)
    r = path_row(ws, Promise(ttft_s=0.5, tpot_s=0.05))
    assert r["tpot_basis"] == "tokens"
    assert (r["joint_low"], r["joint_high"]) == pytest.approx((0.0, 0.025))
    shown("tpot-basis", f"{r['tpot_share']:.5f}", f"**[{r['joint_low']:.0f}, {r['joint_high']:.3f}]**")


def test_kingman_and_erlang_c() -> None:
    k = queueing.kingman_terms(2.0, 0.4, 1.5, 0.5)
    assert k["rho"] == pytest.approx(0.8)
    wait = k["utilisation_term"] * k["variability_term"] * 0.4
    assert wait == pytest.approx(1.6)
    c = queueing.erlang_c(3, 2.0)
    w = queueing.erlang_c_wait(3, 4.0, 2.0)
    assert (c, w) == pytest.approx((4 / 9, 2 / 9))
    shown("queueing", f"**{wait:.1f} s**", f"**{c:.3f}**", f"**{w:.3f} s**")


def test_burn_factors_and_request_weighting(ws: Workspace) -> None:
    factors = [burn_factor(b, 720, h) for b, h in ((2, 1), (5, 6), (10, 72))]
    assert factors == pytest.approx([14.4, 6.0, 1.0])
    assert burn_factor(2, 672, 1) == pytest.approx(13.44)
    scrapes, total, bad = [(0, [0, 0], 0.0)], 0, 0
    for i, (n, b) in enumerate([(2000, 10), (200, 30)], start=1):
        total, bad = total + n, bad + b
        scrapes.append((300 * i, [total - bad, total], 0.0))
    load(ws, histogram(TTFT, V1, ["0.5", "+Inf"], scrapes))
    cube_id = ensure_cube(ws, None, 300, None)
    start, end = time_range(ws, cube_id, None, None)
    share = float(shares(ws, cube_id, [Promise(ttft_s=0.5)], start, end).loc[0, "ttft_share"])
    assert share == pytest.approx(40 / 2200)
    shown("multiwindow-alerts", f"**{factors[0]:.1f}**", f"**{factors[1]:.0f}**", f"**{factors[2]:.0f}**",
          f"**{burn_factor(2, 672, 1):.2f}**", f"**{share:.4f}**")


def test_the_decision_arithmetic() -> None:
    prices = money.Prices(replica_hour=3.0, breach={"chat": 0.04}, horizon_hours=720)
    totals = {}
    for n, share in ((4, 0.02), (5, 0.005)):
        totals[n] = money.path_cost(1_000_000, share, 0.04, money.headroom_cost(n, prices))["total_cost"]
    assert totals == pytest.approx({4: 9440.0, 5: 11000.0})
    assert money.cheapest(sorted(totals.items()))[0] == 4
    price = money.break_even_breach_price(1_000_000, 0.02, 0.005, prices)
    assert price == pytest.approx(0.144)
    shown("decision", f"**${totals[4]:,.0f}**", f"**${totals[5]:,.0f}**", f"**${price:.3f}**")


def test_the_load_response_curve() -> None:
    fit = curve.fit(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.01, 0.03, 0.02, 0.10]), np.full(4, 100.0))
    assert fit.y.tolist() == pytest.approx([0.01, 0.025, 0.025, 0.10])
    shown("load-response-curve", "**" + ", ".join(f"{y:.3f}" for y in fit.y) + "**")


def test_the_twins_step_time() -> None:
    fit = FitQuality(windows=0, r2=1.0, rmse_s=0.0, batch_range=(0.0, 0.0), data="example")
    model = ReplicaModel(step_base_s=0.010, step_per_seq_s=0.0005, step_per_prefill_token_s=5e-5,
                         step_per_context_token_s=1e-7, step_per_prefill_pair_s=0.0, kv_tokens=100_000,
                         max_num_seqs=256, max_num_batched_tokens=8192, block_size=16, fit=fit,
                         saturation_observed=False)
    step = model.step_time(32, prefill_tokens=512, context_tokens=20_000)
    model.assumptions = Assumptions(tpot_scale=1.1)
    calibrated = model.step_time(32, prefill_tokens=512, context_tokens=20_000)
    assert (step, calibrated) == pytest.approx((0.0536, 0.0564))
    shown("twin", f"**{1e3 * step:.1f} ms**", f"**{1e3 * calibrated:.1f} ms**")


def test_retry_arithmetic() -> None:
    attempts = expected_attempts(0.2, 3)
    throttled = client_throttle(500, 200, 2.0)
    assert (attempts, throttled) == pytest.approx((1.24, 100 / 501))
    shown("retries", f"**{attempts:.2f}**", f"**{throttled:.4f}**")

"""``headroom rules``: the promise as Prometheus rules, checked by ``promtool`` and unit-tested with
``promtool test rules`` on a synthetic burn (docs/methods.md#multiwindow-alerts)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.promise import rules
from app.promise.shares import Promise
from tests.conftest import IN_CI
from tests.support.cli_run import run_cli
from tests.support.paths import SAMPLE

TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if IN_CI:
            pytest.fail("CI=true: promtool not installed (apt-get install prometheus)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


def test_burn_factors_are_the_workbooks() -> None:
    """TV-5.1: 30 days → 14.4, 6, 1 (and Sloth's 3 for 1d); 28 days → 13.44, 5.6, 0.9333…"""
    for period, expected in (("30d", [14.4, 6.0, 3.0, 1.0]), ("28d", [13.44, 5.6, 2.8, 0.9333333333333333])):
        hours = rules.parse_duration(period)
        got = [rules.burn_factor(s, hours, rules.parse_duration(w)) for s, w in
               ((0.02, "1h"), (0.05, "6h"), (0.10, "1d"), (0.10, "3d"))]
        assert got == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="duration"):
        rules.parse_duration("30 days")


def test_a_threshold_between_bounds_names_the_bounds_and_the_buckets_flag() -> None:
    with pytest.raises(rules.RulesError) as info:
        rules.plan([Promise(path="chat", ttft_s=0.3, tpot_s=0.05)])
    msg = str(info.value)
    assert "chat: TTFT 0.3 s is not a bucket bound of vllm:time_to_first_token_seconds (nearest: 0.25 s and 0.5 s)" in msg
    assert '--custom-histogram-buckets \'{"time_to_first_token":[0.001,' in msg and "0.25,0.3,0.5," in msg
    assert "--allow-interpolated to read le=0.25" in msg
    # allowed: the bound below, said in the file
    plan = rules.plan([Promise(path="chat", ttft_s=0.3, tpot_s=0.05)], allow_interpolated=True)
    (_, ths, _), = plan.promises
    assert [(t.signal, t.bound, t.exact) for t in ths] == [("ttft", 0.25, False), ("tpot", 0.05, True)]
    assert "reads le=0.25, the bound below" in rules.to_yaml(plan)
    # the export's own bounds win over vLLM's defaults
    own = rules.plan([Promise(ttft_s=0.3)], bounds={"ttft": [0.1, 0.3, 1.0]})
    assert own.promises[0][1][0].exact


def test_le_is_matched_however_it_is_spelled() -> None:
    text = rules.to_yaml(rules.plan([Promise(path='a"b', ttft_s=1.0, tpot_s=0.05)], label="served_model"))
    assert r'le=~\"1(\\\\.0)?\"' in text  # the YAML of the PromQL of the regex 1(\.0)?
    assert r'le=~\"0\\\\.05\"' in text
    assert r'served_model=\"a\\\"b\"' in text
    with pytest.raises(ValueError, match="not a Prometheus label name"):
        rules.plan([Promise(ttft_s=0.5)], label="model-name")


def _write_rules(tmp: Path) -> Path:
    rc, _, err = run_cli(["rules", "--promise", "chat=0.5/0.05@0.99", "--promise", "0.25/0.025@0.95",
                          "--out", str(tmp / "rules.yml")])
    assert rc == 0, err
    return tmp / "rules.yml"


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    path = _write_rules(tmp_path)
    done = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    # 2 promises x (7 windows x (2 ratios + 2 joint bounds) + 3 pairs x 2 alerts)
    assert "SUCCESS: 68 rules found" in done.stdout


def _series(name: str, labels: str, per_minute: float) -> str:
    return f"      - series: '{name}{{{labels}}}'\n        values: '0+{per_minute:g}x200'\n"


def _alerts(name: str, expected: list[tuple[str, str, str, str]]) -> str:
    out = f"      - eval_time: 80m\n        alertname: {name}\n        exp_alerts:\n"
    if not expected:
        return out.rstrip("\n") + " []\n"
    for severity, windows, factor, description in expected:
        out += ("          - exp_labels:\n"
                f"              severity: {severity}\n              headroom_windows: {windows}\n"
                f'              headroom_burn_factor: "{factor}"\n              headroom_promise: chat\n'
                "              model_name: chat\n"
                "            exp_annotations:\n"
                f'              summary: "chat: the promise burns its error budget at more than {factor}x"\n'
                f'              description: "{description}"\n')
    return out


def _case(ttft_good: float, tpot_good: float, expect: str) -> str:
    """100 requests a minute on path chat for 200 minutes, ``ttft_good`` and ``tpot_good`` of them
    within the thresholds each minute."""
    series = (_series(f"{TTFT}_count", 'model_name="chat"', 100)
              + _series(f"{TTFT}_bucket", 'model_name="chat",le="0.5"', ttft_good)
              + _series(f"{TPOT}_count", 'model_name="chat"', 100)
              + _series(f"{TPOT}_bucket", 'model_name="chat",le="0.05"', tpot_good))
    return f"  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n{expect}"


SURE = ("Over {l} and {s}, even the low end of the joint breach ratio is above {f} x (1 - 0.99) = {v}: at "
        "that rate {p} of the 30d budget goes in {l}.")
MAYBE = ("Over {l} and {s}, the high end of the joint breach ratio (the low end does not) is above {f} x "
         "(1 - 0.99) = {v}: at that rate {p} of the 30d budget goes in {l}.")


def test_the_alerts_fire_on_a_synthetic_burn(tmp_path: Path) -> None:
    """TV-5.3 (budget 0.01: the fast page at 0.144). A 20 % TTFT burn pages on both pairs and tickets;
    10 % TTFT and 10 % TPOT: the low end (0.10) is under the fast page's 0.144 but the high end (0.20)
    over it, so that page is only possible, while 0.10 > 0.06 pages the slow pair; 0.5 %: nothing."""
    _write_rules(tmp_path)
    pages = [("page", "1h/5m", "14.4", SURE.format(l="1h", s="5m", f="14.4", v="0.144", p="2%")),
             ("page", "6h/30m", "6", SURE.format(l="6h", s="30m", f="6", v="0.06", p="5%")),
             ("ticket", "3d/6h", "1", SURE.format(l="3d", s="6h", f="1", v="0.01", p="10%"))]
    burn = _case(80, 100, _alerts("HeadroomErrorBudgetBurn", pages))
    split = _case(90, 90, _alerts("HeadroomErrorBudgetBurn", pages[1:]) + _alerts(
        "HeadroomErrorBudgetBurnPossible",
        [("info", w, f, MAYBE.format(l=w.split("/")[0], s=w.split("/")[1], f=f, v=v, p=p))
         for w, f, v, p in (("1h/5m", "14.4", "0.144", "2%"), ("6h/30m", "6", "0.06", "5%"),
                            ("3d/6h", "1", "0.01", "10%"))]))
    calm = _case(99.5, 100, _alerts("HeadroomErrorBudgetBurn", []) + _alerts("HeadroomErrorBudgetBurnPossible", []))
    unit = tmp_path / "rules_test.yml"
    unit.write_text(f"rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n{burn}{split}{calm}")
    done = subprocess.run([_promtool(), "test", "rules", str(unit)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.slow
def test_the_cli_reads_the_exports_bounds_and_says_what_is_wrong(tmp_path: Path) -> None:
    sample = SAMPLE
    rc, _, err = run_cli(["rules", str(sample), "--preset", "mlperf-v5.1-llama3.1-8b-server"])
    assert rc == 1 and "Traceback" not in err
    assert re.search(r"headroom rules: \*: TTFT 2 s is not a bucket bound .*nearest: 1 s and 2\.5 s", err)
    rc, out, err = run_cli(["rules", str(sample), "--promise", "2.5/0.1"])
    assert rc == 0, err
    assert "from the bucket bounds of metrics.parquet" in out and "headroom:ttft_breach:ratio_rate5m" in out
    rc, _, err = run_cli(["rules", "--promise", "0.5/0.05", "--slo-window", "a month"])
    assert rc == 2 and "duration" in err


def test_a_hostile_path_name_stays_inside_its_strings(tmp_path: Path) -> None:
    """A path name with a newline, quotes and YAML markup cannot add a rule or break the file."""
    evil = 'x"}\n  - record: owned\n# {'
    text = rules.to_yaml(rules.plan([Promise(path=evil, ttft_s=0.5, tpot_s=0.05)]), source="a\nb.prom")
    assert "\n  - record: owned" not in text and "\n  - record:" not in text.replace("      - record:", "")
    (tmp_path / "rules.yml").write_text(text)
    done = subprocess.run([_promtool(), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "SUCCESS: 34 rules found" in done.stdout, done.stdout + done.stderr

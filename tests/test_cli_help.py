"""Every ``headroom`` subcommand's ``--help`` says what it does and shows at least one example, and the
option groups several commands share are declared once (``app/cli.py``)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

from app import cli
from app.docgen.cli_reference import subcommands

COMMANDS = sorted(subcommands())


def _help(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def test_every_subcommand_is_known() -> None:
    assert COMMANDS == ["bench", "cube", "dashboard", "fetch", "load", "report", "rules", "saved", "scenarios",
                        "simulate", "tail"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_a_description_and_an_example(command: str) -> None:
    text = _help(command)
    parser = subcommands()[command]
    assert parser.description and len(parser.description.split()) >= 12, "a description of a sentence or more"
    # the description is printed between the usage and the options
    assert parser.description.split()[0] in text.split("options:")[0]
    examples = text.split("examples:", 1)
    assert len(examples) == 2, f"headroom {command} --help shows no examples"
    lines = [ln.strip() for ln in examples[1].splitlines() if ln.strip()]
    runnable = [ln for ln in lines if re.match(r"^(HEADROOM_DB=\S+ )?headroom " + command + r"\b", ln)]
    assert runnable, f"no example runs headroom {command}"
    assert all(ln.startswith("#") or ln in runnable for ln in lines), "an example is a comment and a command"


def test_shared_options_are_declared_once() -> None:
    """``--path-label``, ``--promise``, ``--preset``, ``--start``/``--end`` and ``--db`` each appear in one
    ``add_argument`` call of app/cli.py (the option group), whatever number of commands use them."""
    tree = ast.parse(Path(cli.__file__).read_text())
    declared: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                declared[first.value] = declared.get(first.value, 0) + 1
    for option in ("--promise", "--preset", "--start", "--end", "--db", "--format", "--quiet", "--window"):
        assert declared.get(option) == 1, f"{option} declared {declared.get(option)} times"
    # rules takes one --path-label (not repeatable): the group's and its own
    assert declared.get("--path-label") == 2


def test_each_command_has_its_adder_beside_its_runner() -> None:
    source = Path(cli.__file__).read_text()
    for command in COMMANDS:
        assert f"def add_{command}(" in source
        if command != "simulate":  # parsed and run by app.simulator.cli
            runner = source.index(f"def cmd_{command}(")
            adder = source.index(f"def add_{command}(")
            between = source[min(runner, adder):max(runner, adder)]
            assert between.count("\n# -- ") == 0, f"add_{command} is not in cmd_{command}'s section"

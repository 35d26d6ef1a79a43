"""The CLI reference (docs/reference/cli.md) from the parser itself, so it cannot drift from ``--help``."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli import build_parser
from app.docgen.tables import Column, generated_header, table
from app.simulator.cli import build_parser as simulate_parser

COMMAND = "python -m app.docgen cli --out docs/reference/cli.md"

OPTIONS = [Column("option", fmt=lambda x: f"`{x}`"), Column("value"), Column("default"), Column("what it does")]


def subcommands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's own parser, by name (``simulate`` from ``app.simulator.cli``, which parses it)."""
    parser = parser or build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = dict(sub.choices)
    out["simulate"] = simulate_parser()
    return out


def _value(a: argparse.Action) -> str:
    if a.nargs == 0:
        return ""
    if a.choices:
        return " | ".join(f"`{c}`" for c in a.choices)
    if a.metavar:
        return f"`{a.metavar}`"
    return f"`{a.dest.upper()}`"


def text(s: str) -> str:
    """Help text as Markdown text: the characters that would start emphasis or HTML escaped."""
    return s.replace("\\", "\\\\").replace("*", "\\*").replace("__", "\\_\\_").replace("<", "&lt;")


def _default(a: argparse.Action) -> str:
    if a.default in (None, False, [], argparse.SUPPRESS) or a.nargs == 0 and a.default is False:
        return ""
    return f"`{a.default}`"


def options(p: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """One record per argument of ``p`` (``--help`` left out)."""
    out = []
    for a in p._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        name = ", ".join(a.option_strings) if a.option_strings else a.dest
        if a.option_strings and isinstance(a, argparse.BooleanOptionalAction):
            name = " / ".join(a.option_strings)
        many = " (repeatable)" if isinstance(a, argparse._AppendAction) else ""
        req = "required; " if a.required and a.option_strings else ""
        out.append({"option": name, "value": _value(a), "default": _default(a),
                    "what it does": text(req + (a.help or "").replace("%%", "%") + many)})
    return out


def section(name: str, p: argparse.ArgumentParser) -> str:
    lines = [f"## headroom {name}", "", text(p.description or ""), "",
             f"Guide: [headroom {name}](../cli/{name}.md).", "", table(options(p), OPTIONS), ""]
    if p.epilog:
        lines += ["```", p.epilog, "```", ""]
    return "\n".join(lines)


def page(command: str = COMMAND) -> str:
    parser = build_parser()
    subs = subcommands(parser)
    intro = ("Every command and option, generated from the parser `headroom --help` prints. "
             "`--format json` output is stable: fields are only ever added.")
    return "\n".join([generated_header("CLI reference", command), intro, ""]
                     + [section(name, subs[name]) for name in sorted(subs)])

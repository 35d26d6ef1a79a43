"""The imports form no circle and no module imports one above it (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"

# bottom to top; a module may import its own layer or those below. The CLI, benchmarks and pages are
# the top: nothing imports them.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("app.sql", "app.jsonable", "app.escape", "app.provenance", "app.ingest", "app.engine"),
    ("app.store", "app.simulator"),
    ("app.cube", "app.promise.shares"),
    ("app.records",),
    ("app.load", "app.live.client"),
    ("app.live.pushdown",),
    ("app.promise.report", "app.promise.rules", "app.economics.model"),
    ("app.economics.run",),
    ("app.economics.predict",),
    ("app.economics.check",),
    ("app.economics.decide",),
    ("app.tail",),
    ("app.ui",),
    ("app.cli", "app.bench", "app.docgen", "app.app_pages", "app.streamlit_app", "app.__main__"),
)


def _modules() -> dict[str, Path]:
    out = {}
    for path in APP.rglob("*.py"):
        name = ".".join(path.relative_to(APP.parent).with_suffix("").parts).removesuffix(".__init__")
        out[name] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    for rank, members in enumerate(LAYERS):
        if any(module == m or module.startswith(m + ".") for m in members):
            return rank
    if module == "app":
        return 0
    raise AssertionError(f"{module} is in no layer of LAYERS: add it")


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported app module, line, at module level) for every import of ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "app":
            names = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            targets = names or [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "app"]
        else:
            continue
        out += [(t, node.lineno, id(node) in top) for t in targets]
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for target, _, _ in _imports(path):
            if target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_circle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_one_above_it() -> None:
    above = [f"{name} (layer {_layer(name)}) imports {target} (layer {_layer(target)}) at line {line}"
             for name, path in sorted(MODULES.items()) for target, line, _ in _imports(path)
             if _layer(target) > _layer(name)]
    assert above == []


# Imports inside functions are kept only where a command or a benchmark task would otherwise pay for
# what it does not run (the CLI: scipy and numba cost every command 2 s; a benchmark task's process
# measures its own peak memory) or where a dependency is optional (ray).
LAZY_ALLOWED = {"app.cli", "app.bench.worker", "app.economics.run.ray_executor"}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_sit_at_the_top(name: str) -> None:
    if name in LAZY_ALLOWED:
        return
    inner = [f"line {line}: {target}" for target, line, top in _imports(MODULES[name]) if not top]
    assert inner == [], f"{name} imports inside a function"

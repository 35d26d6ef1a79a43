"""The imports form no circle and no module imports one above it (docs/architecture.md)."""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

from app import sql

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
DOC = ROOT / "docs" / "architecture.md"

# bottom to top; a module may import its own layer or those below. The CLI, benchmarks and pages are
# the top: nothing imports them.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("app.sql", "app.jsonable", "app.escape", "app.provenance", "app.ingest", "app.engine"),
    ("app.store", "app.simulator"),
    ("app.cube", "app.promise.shares", "app.promise.screen"),
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


# -- the docs' drawing of the layers and their table of the SQL behind a number on screen -------------------
def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def _drawn_path(module: str) -> str:
    path = module.replace(".", "/")
    return f"{path}/" if (ROOT / path).is_dir() else f"{path}.py"


def test_the_layers_drawn_are_the_layers_held() -> None:
    """Every member of ``LAYERS`` is drawn in docs/architecture.md, each layer above those it may import."""
    drawing = _section("Layers").split("```")[1].splitlines()
    line = {}
    for members in LAYERS:
        for module in members:
            if module == "app.__main__":  # ``python -m app`` is the CLI
                continue
            where = [i for i, text in enumerate(drawing) if _drawn_path(module) in text]
            assert where, f"{_drawn_path(module)} is not drawn"
            line[module] = where[0]
    rank = {m: r for r, members in enumerate(LAYERS) for m in members}
    below_drawn_above = [(lower, higher) for lower in line for higher in line
                         if rank[lower] < rank[higher] and line[lower] < line[higher]]
    assert below_drawn_above == []


def _screen_rows() -> list[tuple[str, str, str]]:
    rows = [r.strip().strip("|").split(" | ") for r in _section("The SQL behind a number on screen").splitlines()
            if r.startswith("| ") and not r.startswith("| on screen") and not r.startswith("| ---")]
    assert len(rows) >= 10 and all(len(r) == 3 for r in rows), rows
    return [(a.strip(), b.strip(), c.strip()) for a, b, c in rows]


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_sql_behind_a_number_on_screen_names_what_exists() -> None:
    """Each function of docs/architecture.md's table resolves, and each query file it names is a query of
    the registry at that path (a ``*`` stands for at least one)."""
    queries = {str(q.path.relative_to(ROOT)) for q in sql.all_queries()}
    missing = []
    for screen, function, query in _screen_rows():
        missing += [f"{screen}: {f}" for f in re.findall(r"`(app(?:\.\w+)+)`", function) if not _resolves(f)]
        for path in re.findall(r"`(queries/[\w/*]+\.sql)`", query):
            pattern = re.compile(re.escape(path).replace(r"\*", r"\w+") + "$")
            if not any(pattern.match(q) for q in queries):
                missing.append(f"{screen}: {path}")
    assert missing == []


def test_the_table_check_finds_a_stale_row() -> None:
    assert _resolves("app.promise.shares.evaluate") and not _resolves("app.promise.shares.nothing_here")
    assert not _resolves("app.economics.capacity.fit_model")  # the module's former place


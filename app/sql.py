"""The query registry: every per-sample computation is a named file in ``queries/``.

A query file holds one SQL statement and a header::

    -- name: cube__increases
    -- purpose: what it computes
    -- grain: one row per (...)
    -- reads: samples, cube_series
    -- @param window_s DOUBLE  window length in seconds
    -- @returns window_start TIMESTAMP, path VARCHAR, value DOUBLE

A description may go on over lines that start with ``--   ``; ``reads`` is one line:
the tables the statement reads, comma-separated, as the code names them — workspace tables
(``samples``, ``cube_rows``) and TEMP tables (``stage_points``, ``cube_series``: read them on the
connection that made them, cursors do not see them) alike; not its CTEs, not table functions
(``read_csv``, ``unnest``, ``range``). An ``update`` or ``delete`` reads its target table, an
``insert``'s target is not read. ``$name`` entries name a parameter the statement reads from (a
file: ``-- reads: $path``); ``-- reads: (none)`` when it reads no table. The contract test holds
the line to the code (``Query.referenced_tables``).

Python loads a query by name and passes values only as ``$name`` parameters. The files sit in one
folder per domain (``queries/ingest/``, ``queries/cube/``, ``queries/promise/``...), each named as its
query (``queries/cube/cube__build.sql``): a query's name is its identity, its folder only where a
reader finds it. Files under ``queries/macros/`` hold ``CREATE OR REPLACE MACRO`` statements run once
per connection; ``queries/schema/`` the workspace's DDL. A tool's own queries (the benchmarks') sit
beside the tool, in a folder of their own that :func:`all_queries` and :func:`get` are given.
"""

from __future__ import annotations

import functools
import re
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

# DuckDB 2.0's ``con.sql(...)`` binds a statement once for the relation's schema and again to run
# it; its client runs a statement once through ``duckdb._seam.submit``, which matters for the
# promise queries, whose plans are large. Where a client has no such function, ``con.sql`` serves.
try:
    from duckdb._seam import DEFAULT_BATCH_SIZE as _BATCH
    from duckdb._seam import submit as _submit
except ImportError:  # another duckdb client
    _submit, _BATCH = None, 0

_PARAM_RE = re.compile(r"^--\s*@param\s+(\w+)\s+(\S+)\s*(.*)$")
_USED_PARAM_RE = re.compile(r"\$([A-Za-z_]\w*)")
_HEADER_RE = re.compile(r"^--\s*(name|purpose|grain|reads):\s*(.*)$")
_NO_READS = "(none)"


NOT_QUERIES = ("macros", "schema")  # folders of queries/ whose files are no named query


def queries_dir() -> Path:
    """Directory holding the ``.sql`` files: the checkout's ``queries/`` or the wheel's copy."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "queries", here / "queries"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("queries/ directory not found next to the app package")


@dataclass(frozen=True)
class Query:
    """One parsed query file."""

    name: str
    path: Path
    sql: str
    purpose: str = ""
    grain: str = ""
    params: dict[str, str] = field(default_factory=dict)  # name -> declared SQL type
    param_docs: dict[str, str] = field(default_factory=dict)
    returns: list[tuple[str, str]] = field(default_factory=list)  # (column, SQL type)
    reads: tuple[str, ...] | None = None  # the `-- reads:` line's names; None when there is none

    @property
    def code(self) -> str:
        """The SQL without comments and with string literals emptied (for checks, not for running)."""
        return _strip_comments_and_strings(self.sql)

    @property
    def used_params(self) -> set[str]:
        """``$names`` that appear in the SQL body, comments and string literals excluded."""
        return set(_USED_PARAM_RE.findall(self.code))

    @property
    def referenced_tables(self) -> set[str]:
        """Tables the SQL body reads (lowercase): the names after ``from``/``join`` (and a from-list's
        commas) and an ``update``'s target, less the file's CTEs and table functions; a table macro
        (``request_paths``) reads what its body reads."""
        return _referenced_tables(self.code, table_macros())


def _strip_comments_and_strings(sql: str) -> str:
    out = re.sub(r"--[^\n]*", "", sql)
    return re.sub(r"'(?:[^']|'')*'", "''", out)


_TOKEN_RE = re.compile(r'"(?:[^"]|"")*"|\$?\w+(?:\.\w+)*|\S')
_CTE_RE = re.compile(
    r"(?:\bwith\s+(?:recursive\s+)?|,\s*)(\w+)(?:\s*\([^()]*\))?\s+as\s+(?:not\s+)?(?:materialized\s+)?\(",
    re.IGNORECASE,
)
# a clause keyword ends the from-list open at its depth (its commas no longer separate tables)
_FROM_LIST_END = {"where", "group", "having", "order", "limit", "offset", "qualify", "window", "union",
                  "except", "intersect", "select", "set", "returning"}
# functions whose arguments may hold a `from` that names no table (extract(epoch from ts), ...)
_FROM_IN_ARGS = {"extract", "substring", "trim", "overlay"}


def _referenced_tables(code: str, macros: dict[str, set[str]] | None = None) -> set[str]:
    """Scan the tokens of ``code`` (comments and strings already stripped) for table references;
    ``macros``: the tables each table macro reads."""
    tokens = _TOKEN_RE.findall(code)
    ctes = {m.lower() for m in _CTE_RE.findall(code)}
    found: set[str] = set()
    openers: list[str] = [""]  # per open parenthesis, the token before it
    from_lists: list[int] = []  # depths at which a from-list is open
    expect_table = False
    for i, tok in enumerate(tokens):
        low = tok.lower()
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if expect_table:
            expect_table = False
            # a subquery `(`, a table function `name(` (a table macro: its tables), or a table
            if nxt == "(" and macros and low in macros:
                found |= macros[low]
            elif tok != "(" and nxt != "(" and re.fullmatch(r'[A-Za-z_][\w.]*|".*"', tok):
                found.add(low.strip('"').replace('""', '"'))
        depth = len(openers) - 1
        if tok == "(":
            openers.append(tokens[i - 1].lower() if i else "")
        elif tok == ")":
            openers.pop()
            from_lists = [d for d in from_lists if d <= len(openers) - 1]  # a subquery's list ends
        elif low == "from" and (tokens[i - 1].lower() if i else "") != "distinct" and openers[-1] not in _FROM_IN_ARGS:
            expect_table = True
            from_lists = [d for d in from_lists if d != depth] + [depth]
        elif low == "join" or (low == "update" and i == 0):
            expect_table = True
        elif tok == "," and from_lists and from_lists[-1] == depth:
            expect_table = True
        elif low in _FROM_LIST_END and from_lists and from_lists[-1] == depth:
            from_lists.pop()
    return found - ctes


def _split_returns(text: str) -> list[tuple[str, str]]:
    cols: list[tuple[str, str]] = []
    depth, start = 0, 0
    parts = []
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in parts:
        part = part.strip()
        if not part:
            continue
        name, _, typ = part.partition(" ")
        cols.append((name.strip(), typ.strip().upper()))
    return cols


def parse(path: Path) -> Query:
    """Parse a query file's header and body; raise ``ValueError`` naming the file on a bad header."""
    text = path.read_text()
    meta: dict[str, str] = {}
    params: dict[str, str] = {}
    docs: dict[str, str] = {}
    returns_text: list[str] = []
    in_returns = False
    body_lines: list[str] = []
    in_header = True
    for line in text.splitlines():
        stripped = line.strip()
        if in_header and stripped.startswith("--"):
            if m := _HEADER_RE.match(stripped):
                meta[m.group(1)] = m.group(2).strip()
                in_returns = False
            elif m := _PARAM_RE.match(stripped):
                params[m.group(1)] = m.group(2).upper()
                docs[m.group(1)] = m.group(3).strip()
                in_returns = False
            elif stripped.startswith("-- @returns"):
                returns_text.append(stripped[len("-- @returns") :])
                in_returns = True
            elif in_returns and stripped.startswith("--   "):
                returns_text.append(stripped[2:])
            else:
                in_returns = False
            continue
        if stripped or not in_header:
            in_header = False
            body_lines.append(line)
    if "name" not in meta:
        raise ValueError(f"{path}: query header has no '-- name:' line")
    if meta["name"] != path.stem:
        raise ValueError(f"{path}: header name {meta['name']!r} differs from the file name")
    return Query(
        name=meta["name"],
        path=path,
        sql="\n".join(body_lines).strip().rstrip(";"),
        purpose=meta.get("purpose", ""),
        grain=meta.get("grain", ""),
        params=params,
        param_docs=docs,
        returns=_split_returns(" ".join(returns_text)),
        reads=_split_reads(meta["reads"]) if "reads" in meta else None,
    )


def _split_reads(text: str) -> tuple[str, ...]:
    if text.strip() == _NO_READS:
        return ()
    return tuple(name.strip() for name in text.split(",") if name.strip())


@functools.cache
def _registry(root: Path | None = None) -> dict[str, Query]:
    root = root or queries_dir()
    out: dict[str, Query] = {}
    for path in sorted(root.rglob("*.sql")):
        if path.relative_to(root).parts[0] in NOT_QUERIES:
            continue
        q = parse(path)
        if q.name in out:
            raise ValueError(f"{path}: query {q.name!r} is also {out[q.name].path}")
        out[q.name] = q
    return out


def get(name: str, root: Path | None = None) -> Query:
    """The query called ``name`` (file ``<name>.sql`` in a domain folder of ``root``, by default
    ``queries/``)."""
    try:
        return _registry(root)[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {root or queries_dir()}") from None


def all_queries(root: Path | None = None) -> list[Query]:
    """Every named query under ``root`` (by default ``queries/``), in the order of their paths."""
    return list(_registry(root).values())


def macro_files() -> list[Path]:
    return sorted((queries_dir() / "macros").glob("*.sql"))


_TABLE_MACRO_RE = re.compile(r"create\s+or\s+replace\s+macro\s+(\w+)\s*\([^)]*\)\s+as\s+table\s+([^;]*)",
                             re.IGNORECASE)


@functools.cache
def table_macros() -> dict[str, set[str]]:
    """{table macro (of ``queries/macros`` or the workspace schema): the tables its body reads}."""
    out: dict[str, set[str]] = {}
    for path in [*macro_files(), queries_dir() / "schema" / "workspace.sql"]:
        for name, body in _TABLE_MACRO_RE.findall(_strip_comments_and_strings(path.read_text())):
            out[name.lower()] = _referenced_tables(body)
    return out


# the connections install_macros ran on (weak: a closed, collected connection drops out)
_WITH_MACROS: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the non-TEMP macros of ``queries/macros`` (visible from every cursor)."""
    for path in macro_files():
        body = "\n".join(ln for ln in path.read_text().splitlines() if not ln.strip().startswith("--"))
        for statement in body.split(";"):
            if statement.strip():
                con.execute(statement)
    _WITH_MACROS.add(con)


def ensure_macros(con: duckdb.DuckDBPyConnection) -> None:
    """``install_macros`` unless it already ran on ``con``: the ingest readers run on a workspace's
    connection (macros installed at connect; no DDL wanted inside its load transaction) or on a bare
    one (tests, tools). Asking DuckDB instead (``duckdb_functions()``) would cost a catalog query per
    call, and a failed probe would abort the caller's transaction."""
    if con not in _WITH_MACROS:
        install_macros(con)


# while ``statement_times`` lasts: {query name: [calls, seconds]} of the named queries run in this context
_TIMES: ContextVar[dict[str, list[float]] | None] = ContextVar("headroom_statement_times", default=None)


@contextmanager
def statement_times() -> Iterator[dict[str, list[float]]]:
    """While it lasts, each named query this module runs in this context (this thread; a thread it
    starts has a context of its own) adds one call and its seconds to ``{name: [calls, seconds]}``.
    A load or a cube build spends its time inside a few statements, which a Python profile shows as
    one ``execute``: this says which. Statements run outside this module (DDL, transaction control,
    the readers' checks on a file) are not in it."""
    times: dict[str, list[float]] = {}
    token = _TIMES.set(times)
    try:
        yield times
    finally:
        _TIMES.reset(token)


def _timed(q: Query, run: Callable[[], Any]) -> Any:
    times = _TIMES.get()
    if times is None:
        return run()
    t0 = time.perf_counter()
    try:
        return run()
    finally:
        entry = times.setdefault(q.name, [0, 0.0])
        entry[0] += 1
        entry[1] += time.perf_counter() - t0


def df(con: duckdb.DuckDBPyConnection, name: str | Query, **params: Any):
    """Run query ``name`` (a name of ``queries/``, or a :class:`Query` of another folder) on ``con`` and
    return a pandas DataFrame.

    Pass ``workspace.cursor()`` from another thread; pass the connection itself inside a
    transaction or when the query reads TEMP tables (cursors do not see them)."""
    q = _query(name)
    values = _checked(q, params)
    return _timed(q, lambda: con.execute(q.sql, values).df())


def arrow(con: duckdb.DuckDBPyConnection, name: str | Query, *, batch_rows: int | None = None, **params: Any) -> Any:
    """Run query ``name`` on ``con`` and return a ``pyarrow.Table`` (see ``df`` for ``con``).
    ``batch_rows``: rows per record batch (a wide result exports faster in batches that fit the
    cache: 16,384 rows of 36 columns in half the time of one 131,072-row batch)."""
    q = _query(name)
    text, values = q.sql, _checked(q, params)
    if _submit is not None:
        return _timed(q, lambda: _submit(con, text, values, "arrow", batch_rows or _BATCH).arrow_table())
    return _timed(q, lambda: con.sql(text, params=values).to_arrow_table())


def to_pandas(table: Any) -> Any:
    """A pyarrow table as the DataFrame ``df`` would give (booleans with NULLs as pandas' nullable
    ``boolean``); for wide results, Arrow then pandas is several times faster than ``.df()``."""
    frame = table.to_pandas()
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_boolean(column.type) and column.null_count:
            frame[name] = frame[name].astype("boolean")
    return frame


def rows(con: duckdb.DuckDBPyConnection, name: str | Query, **params: Any) -> list[tuple]:
    """Run query ``name`` on ``con`` and return its rows."""
    q = _query(name)
    values = _checked(q, params)
    return _timed(q, lambda: con.execute(q.sql, values).fetchall())


def execute(con: duckdb.DuckDBPyConnection, name: str | Query, **params: Any) -> None:
    """Run a DML query (``insert ... select``) on ``con`` itself, so it joins the caller's transaction."""
    q = _query(name)
    values = _checked(q, params)
    _timed(q, lambda: con.execute(q.sql, values))


def _query(name: str | Query) -> Query:
    return name if isinstance(name, Query) else get(name)


def _checked(q: Query, params: dict[str, Any]) -> dict[str, Any] | None:
    missing = set(q.params) - set(params)
    extra = set(params) - set(q.params)
    if missing or extra:
        raise TypeError(f"query {q.name}: missing parameters {sorted(missing)}, unexpected {sorted(extra)}")
    return params or None


_IDENT_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


def materialize(con: duckdb.DuckDBPyConnection, name: str | Query, table: str, temp: bool = True,
                **params: Any) -> None:
    """Run query ``name`` once into ``table`` (an identifier from the caller's code, never user text)."""
    if not _IDENT_RE.match(table):
        raise ValueError(f"bad table name {table!r}")
    kind = "temp table" if temp else "table"
    q = _query(name)
    values = _checked(q, params)
    _timed(q, lambda: con.execute(f"create or replace {kind} {table} as {q.sql}", values))


def temp_view(con: duckdb.DuckDBPyConnection, name: str | Query, view: str) -> None:
    """Make ``view`` (an identifier from the caller's code) a TEMP view of query ``name``, which takes
    no parameters (a view binds none): its rows are computed again by every statement that reads it."""
    if not _IDENT_RE.match(view):
        raise ValueError(f"bad view name {view!r}")
    q = _query(name)
    _checked(q, {})
    con.execute(f"create or replace temp view {view} as {q.sql}")


def insert_into(con: duckdb.DuckDBPyConnection, name: str | Query, table: str, **params: Any) -> None:
    """Append the rows of query ``name`` to the existing ``table`` (an identifier from our code)."""
    if not _IDENT_RE.match(table):
        raise ValueError(f"bad table name {table!r}")
    q = _query(name)
    values = _checked(q, params)
    _timed(q, lambda: con.execute(f"insert into {table} {q.sql}", values))

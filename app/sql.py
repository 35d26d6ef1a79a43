"""The query registry: every per-sample computation is a named file in ``queries/``.

A query file holds one SQL statement and a header::

    -- name: cube__increases
    -- purpose: what it computes
    -- grain: one row per (...)
    -- @param window_s DOUBLE  window length in seconds
    -- @returns window_start TIMESTAMP, path VARCHAR, value DOUBLE

Python loads a query by name and passes values only as ``$name`` parameters.
Files under ``queries/macros/`` hold ``CREATE OR REPLACE MACRO`` statements run once per
connection.
"""

from __future__ import annotations

import functools
import re
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

# DuckDB 2.0's ``con.sql(...)`` binds a statement once for the relation's schema and again to run
# it; its client runs a statement once through ``duckdb._seam.submit`` (10-17 ms less on the
# promise queries, whose plans are large). Where a client has no such function, ``con.sql`` serves.
try:
    from duckdb._seam import DEFAULT_BATCH_SIZE as _BATCH
    from duckdb._seam import submit as _submit
except ImportError:  # another duckdb client
    _submit, _BATCH = None, 0

_PARAM_RE = re.compile(r"^--\s*@param\s+(\w+)\s+(\S+)\s*(.*)$")
_USED_PARAM_RE = re.compile(r"\$([A-Za-z_]\w*)")
_HEADER_RE = re.compile(r"^--\s*(name|purpose|grain):\s*(.*)$")


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

    @property
    def code(self) -> str:
        """The SQL without comments and with string literals emptied (for checks, not for running)."""
        return _strip_comments_and_strings(self.sql)

    @property
    def used_params(self) -> set[str]:
        """``$names`` that appear in the SQL body, comments and string literals excluded."""
        return set(_USED_PARAM_RE.findall(self.code))


def _strip_comments_and_strings(sql: str) -> str:
    out = re.sub(r"--[^\n]*", "", sql)
    return re.sub(r"'(?:[^']|'')*'", "''", out)


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
    )


@functools.cache
def _registry() -> dict[str, Query]:
    root = queries_dir()
    out: dict[str, Query] = {}
    for path in sorted(root.glob("*.sql")):
        q = parse(path)
        out[q.name] = q
    return out


def get(name: str) -> Query:
    """The query called ``name`` (file ``queries/<name>.sql``)."""
    try:
        return _registry()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {queries_dir()}") from None


def all_queries() -> list[Query]:
    return list(_registry().values())


def macro_files() -> list[Path]:
    return sorted((queries_dir() / "macros").glob("*.sql"))


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
    one (tests, tools). Asking DuckDB instead (``duckdb_functions()``) costs 30-80 ms a call, and a
    failed probe would abort the caller's transaction."""
    if con not in _WITH_MACROS:
        install_macros(con)


def df(con: duckdb.DuckDBPyConnection, name: str, **params: Any):
    """Run query ``name`` on ``con`` and return a pandas DataFrame.

    Pass ``workspace.cursor()`` from another thread; pass the connection itself inside a
    transaction or when the query reads TEMP tables (cursors do not see them)."""
    return con.execute(get(name).sql, _checked(name, params)).df()


def arrow(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> Any:
    """Run query ``name`` on ``con`` and return a ``pyarrow.Table`` (see ``df`` for ``con``)."""
    text, values = get(name).sql, _checked(name, params)
    if _submit is not None:
        return _submit(con, text, values, "arrow", _BATCH).arrow_table()
    return con.sql(text, params=values).to_arrow_table()


def to_pandas(table: Any) -> Any:
    """A pyarrow table as the DataFrame ``df`` would give (booleans with NULLs as pandas' nullable
    ``boolean``); for wide results, Arrow then pandas is several times faster than ``.df()``."""
    import pyarrow as pa

    frame = table.to_pandas()
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_boolean(column.type) and column.null_count:
            frame[name] = frame[name].astype("boolean")
    return frame


def rows(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> list[tuple]:
    """Run query ``name`` on ``con`` and return its rows."""
    return con.execute(get(name).sql, _checked(name, params)).fetchall()


def execute(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> None:
    """Run a DML query (``insert ... select``) on ``con`` itself, so it joins the caller's transaction."""
    con.execute(get(name).sql, _checked(name, params))


def _checked(name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    q = get(name)
    missing = set(q.params) - set(params)
    extra = set(params) - set(q.params)
    if missing or extra:
        raise TypeError(f"query {name}: missing parameters {sorted(missing)}, unexpected {sorted(extra)}")
    return params or None


_IDENT_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


def materialize(con: duckdb.DuckDBPyConnection, name: str, table: str, temp: bool = True, **params: Any) -> None:
    """Run query ``name`` once into ``table`` (an identifier from the caller's code, never user text)."""
    if not _IDENT_RE.match(table):
        raise ValueError(f"bad table name {table!r}")
    kind = "temp table" if temp else "table"
    con.execute(f"create or replace {kind} {table} as {get(name).sql}", _checked(name, params))


def insert_into(con: duckdb.DuckDBPyConnection, name: str, table: str, **params: Any) -> None:
    """Append the rows of query ``name`` to the existing ``table`` (an identifier from our code)."""
    if not _IDENT_RE.match(table):
        raise ValueError(f"bad table name {table!r}")
    con.execute(f"insert into {table} {get(name).sql}", _checked(name, params))

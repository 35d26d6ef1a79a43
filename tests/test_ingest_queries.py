"""Every ingest__*.sql query binds, with its declared columns, on a connection that staged one small
file of each format (the readers leave their helper tables behind, empty, for exactly this)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from app import load, sql
from app.store import Workspace

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "queries"
QUERIES = [q for q in sql.all_queries() if q.name.startswith("ingest__")]
DUMMY = {"INTEGER": 1, "BIGINT": 1, "DOUBLE": 1000.0, "VARCHAR": "x", "VARCHAR[]": ["model_name"],
         "TIMESTAMP": datetime(2026, 11, 29)}


@pytest.fixture(scope="module")
def staged_ws() -> Iterator[Workspace]:
    ws = Workspace(":memory:")
    files = sorted(FIXTURES.glob("ingest__*"))
    assert {f.suffix for f in files} >= {".prom", ".json", ".jsonl", ".csv"}
    for path in files:
        report = load.load_file(ws, path)
        assert report.status == "loaded", report.errors
    yield ws
    ws.close()


def _normalise(t: str) -> str:
    return re.sub(r"\s+", "", t.upper())


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_ingest_query_binds_with_declared_columns(query: sql.Query, staged_ws: Workspace) -> None:
    params = {name: DUMMY[typ] for name, typ in query.params.items()}
    if "path" in params:
        params["path"] = str(next(FIXTURES.glob(f"{query.name}.*")))
    con = staged_ws.con
    if query.sql.lstrip().lower().startswith(("insert", "delete", "update")):
        assert not query.returns
        con.execute("begin transaction")
        try:
            con.execute(query.sql, params or None)
        finally:
            con.execute("rollback")
        return
    rel = con.sql(query.sql, params=params or None)
    got = [(c, _normalise(str(t))) for c, t in zip(rel.columns, rel.types, strict=True)]
    assert got == [(c, _normalise(t)) for c, t in query.returns]

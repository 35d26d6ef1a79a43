"""Contract test over every query (``queries/<domain>/*.sql`` and the benchmarks' ``app/bench/queries/``): header parses, declared = used parameters, the
``-- reads:`` line names the tables the code reads, the query binds on a real workspace, and its
output columns and types are the declared ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from app import sql
from app.bench.reference import QUERIES_DIR as BENCH_QUERIES
from app.cube import ensure_cube
from app.live import pushdown
from app.load import load_file
from app.store import Workspace
from tests.conftest import histogram, load, samples

QUERIES = sql.all_queries() + sql.all_queries(BENCH_QUERIES)
# the folder of queries/ each name's prefix lives in, where it is not the prefix itself: the load's summary
# of what it read sits with the readers; the series map with the cube it is built for
FOLDER = {"summary": "ingest", "signals": "cube"}
FILE_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "queries"
DUMMY = {
    "INTEGER": 1,
    "BIGINT": 1,
    "DOUBLE": 0.5,
    "VARCHAR": "x",
    "BOOLEAN": True,
    "TIMESTAMP": datetime(2023, 11, 14, 22, 0, 0),
    "INTEGER[]": [1],
    "BIGINT[]": [0, 1, 2, 3, 4],
    "UBIGINT[]": [1],
    "VARCHAR[]": ["model_name"],
    "DOUBLE[]": [0.5],
    "JSON": "{}",
    "STRUCT[]": [{"path": "*", "ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": None, "queue_s": None, "target": 0.99}],
}


@pytest.fixture(scope="module")
def bound_ws() -> Iterator[Workspace]:
    """A workspace whose connection holds every table and TEMP table a query may read."""
    w = Workspace(":memory:")
    labels = {"engine": "0", "model_name": "chat", "instance": "a:8000"}
    rows = histogram("vllm:time_to_first_token_seconds", labels, ["0.5", "+Inf"],
                     [(0, [1, 2], 0.3), (60, [3, 5], 1.1)])
    rows += samples("vllm:num_requests_running", labels, [(0, 1), (60, 2)])
    # a NaN counter sample: the load judges the staged samples (check_bad_points) only when it drops one
    rows += samples("vllm:prompt_tokens_total", labels, [(0, 5), (60, float("nan"))])
    load(w, rows)
    # the readers' queries read the reader's TEMP tables: loading one small file of each format
    # leaves them behind on this connection
    for path in sorted(FILE_FIXTURES.glob("ingest__*")):
        report = load_file(w, path)
        assert report.status == "loaded", report.errors
    cube_id = ensure_cube(w, [1], 60, None)
    # the tables a live pull stages its answers in (app.live.pushdown.Staging), empty, and the frame it registers
    pushdown.Staging(w.con)
    w.con.execute("create temp table live_families (family varchar, mtype varchar)")
    # the replica-labelled series the capacity model's scrape intervals read
    sql.materialize(w.con, "signals__series", "capacity_series", dataset_ids=[1], path_labels=["instance", "engine"])
    # the lists the promise index is built from (index_for_promises drops them once stored)
    sql.materialize(w.con, "cube__promise_lists", "promise_lists", cube_id=cube_id)
    # the per-window promise table the burn-rate query reads
    sql.materialize(w.con, "promise__shares", "promise_windows", cube_id=cube_id, start_ts=datetime(2000, 1, 1),
                    end_ts=datetime(2100, 1, 1), promises=DUMMY["STRUCT[]"], per_window=True, over_range=False,
                    include_failed=True, paths=None, window_s=60, fast_factor=14.4, slow_factor=6.0,
                    ticket_factor=1.0)
    yield w
    w.close()


def _normalise(t: str) -> str:
    return re.sub(r"\s+", "", t.upper())


def test_there_are_queries() -> None:
    assert len(QUERIES) >= 8


def test_each_query_sits_in_its_domains_folder() -> None:
    """``queries/<domain>/<domain>__<what>.sql``; the benchmarks' own beside them, none in ``queries/``."""
    root = sql.queries_dir()
    product = {q.name: q.path.relative_to(root).parts for q in sql.all_queries()}
    assert {name: parts for name, parts in product.items()
            if parts != (FOLDER.get(name.split("__")[0], name.split("__")[0]), f"{name}.sql")} == {}
    assert not [name for name in product if name.startswith("bench__")]
    assert {q.path.parent for q in sql.all_queries(BENCH_QUERIES)} == {BENCH_QUERIES}
    assert set(root.iterdir()) == {root / d for d in {*sql.NOT_QUERIES, *(parts[0] for parts in product.values())}}


def test_a_name_in_two_folders_is_refused(tmp_path: Path) -> None:
    for folder in ("cube", "promise"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "q__same.sql").write_text("-- name: q__same\nselect 1 as one\n")
    with pytest.raises(ValueError, match="query 'q__same' is also"):
        sql.all_queries(tmp_path)


def test_the_ingest_fixtures_cover_every_reader_kind() -> None:
    """One small file per format family, so that every reader's helper tables exist for the binds."""
    assert {f.suffix for f in FILE_FIXTURES.glob("ingest__*")} >= {".prom", ".json", ".jsonl", ".csv"}


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_header(query: sql.Query) -> None:
    assert query.name == query.path.stem
    assert query.purpose, "every query says what it computes"
    assert query.grain, "every query states its grain"
    assert query.code.count(";") == 0, "one statement per file"
    assert set(query.params) == query.used_params, "declared @params must equal the $names used"
    for name in query.params:
        assert query.param_docs[name], f"@param {name} needs a description"
        assert query.params[name] in DUMMY, f"@param {name}: unexpected type {query.params[name]}"


def _reads_problems(query: sql.Query) -> list[str]:
    """What is wrong with a query's ``-- reads:`` line, held against the tables its code reads."""
    if query.reads is None:
        return ["no '-- reads:' line"]
    problems = [f"reads {n}, which is no @param" for n in query.reads if n.startswith("$") and n[1:] not in query.params]
    declared = {n.lower() for n in query.reads if not n.startswith("$")}
    code = query.referenced_tables
    problems += [f"declares {t}, which the code does not read" for t in sorted(declared - code)]
    problems += [f"reads {t}, not declared" for t in sorted(code - declared)]
    return problems


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_reads_names_the_tables_the_code_reads(query: sql.Query) -> None:
    assert not _reads_problems(query)


def _synthetic(reads: tuple[str, ...] | None) -> sql.Query:
    body = ("with recent as (select * from samples where ts > $since) "
            "select * from recent inner join series using (series_id), unnest([1]) as u(i) "
            "where series_id is distinct from 0 and extract(epoch from ts) > 0")
    return sql.Query(name="synthetic", path=Path("synthetic.sql"), sql=body, params={"since": "TIMESTAMP"},
                     reads=reads)


def test_a_table_macro_reads_what_its_body_reads() -> None:
    """``request_paths(...)`` in a from clause is the macro's table, not a table function of its own."""
    assert sql._referenced_tables("select * from m($c) as x join t using (k)", {"m": {"layouts"}}) == {"layouts", "t"}
    assert sql.table_macros()["request_paths"] == {"cube_bucket_layouts"}
    assert sql.get("cube__request_paths").referenced_tables == {"cube_bucket_layouts"}


def test_the_reads_check_catches_a_wrong_header() -> None:
    assert _reads_problems(_synthetic(("samples", "series"))) == []
    assert _reads_problems(_synthetic(None)) == ["no '-- reads:' line"]
    assert _reads_problems(_synthetic(("samples",))) == ["reads series, not declared"]
    assert _reads_problems(_synthetic(("samples", "series", "cube_rows"))) == [
        "declares cube_rows, which the code does not read"]
    # a CTE is the file's own, not an input
    assert _reads_problems(_synthetic(("recent", "samples", "series"))) == [
        "declares recent, which the code does not read"]
    assert _reads_problems(_synthetic(("$path", "samples", "series"))) == ["reads $path, which is no @param"]
    assert _reads_problems(_synthetic(())) == ["reads samples, not declared", "reads series, not declared"]


@pytest.mark.parametrize(("body", "tables"), [
    ("select * from a, b as x, read_csv($p) as c inner join d on d.k = x.k, e where a.k in (select k from f)",
     {"a", "b", "d", "e", "f"}),
    ("insert into target select * from source", {"source"}),  # an insert's target is written, not read
    ("update target set v = s.v from source as s where target.k = s.k", {"target", "source"}),
    ("delete from target where k in (select k from source)", {"target", "source"}),
    ("select * from (select 1 as k) as q left join range(3) as r(i) on true", set()),
    ("select x from a where y is not distinct from b order by a.k, b.k", {"a"}),
    ('select * from "Odd Name" join main.samples using (k)', {"odd name", "main.samples"}),
    ("select * from a asof join b on a.t >= b.t union all select * from c positional join d", {"a", "b", "c", "d"}),
])
def test_referenced_tables(body: str, tables: set[str]) -> None:
    assert sql.Query(name="q", path=Path("q.sql"), sql=body).referenced_tables == tables


def test_reads_line_parses(tmp_path: Path) -> None:
    head = "-- name: q\n-- purpose: p\n-- grain: g\n"
    for line, reads in [("-- reads: samples, cube_series\n", ("samples", "cube_series")),
                        ("-- reads: (none)\n", ()), ("-- reads: $path\n", ("$path",)), ("", None)]:
        (tmp_path / "q.sql").write_text(head + line + "select 1 as one\n")
        assert sql.parse(tmp_path / "q.sql").reads == reads


def _params(query: sql.Query) -> dict:
    params = {name: DUMMY[typ] for name, typ in query.params.items()}
    if "path" in params:  # a query that reads a file binds on a small real file of its format
        files = sorted(FILE_FIXTURES.glob(f"{query.name}.*"))
        assert files, f"tests/fixtures/queries/{query.name}.<ext> is needed to bind {query.name}"
        params["path"] = str(files[0])
    if "max_object_size" in params:  # a JSON reader's object-size cap
        params["max_object_size"] = 1 << 24
    return params


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_binds_and_returns_declared_columns(query: sql.Query, bound_ws: Workspace) -> None:
    params = _params(query)
    con = bound_ws.con
    is_dml = query.sql.lstrip().lower().startswith(("insert", "delete", "update"))
    if is_dml:
        assert not query.returns
        con.execute("begin transaction")
        try:
            con.execute(query.sql, params or None)
        finally:
            con.execute("rollback")
        return
    assert query.returns, "a select declares its output columns with @returns"
    try:
        rel = con.sql(query.sql, params=params or None)
    except duckdb.Error as exc:  # pragma: no cover - the assertion message is the point
        pytest.fail(f"{query.name} does not bind: {exc}")
    got = [(c, _normalise(str(t))) for c, t in zip(rel.columns, rel.types, strict=True)]
    want = [(c, _normalise(t)) for c, t in query.returns]
    assert got == want


def test_every_query_is_used_by_the_code() -> None:
    """A query nobody calls is dead weight: each name appears in app/ outside sql.py."""
    app_dir = Path(sql.__file__).parent
    code = "\n".join(p.read_text() for p in app_dir.rglob("*.py") if p.name != "sql.py")
    unused = [q.name for q in QUERIES if f'"{q.name}"' not in code]
    assert not unused


def test_arrow_runs_the_same_without_the_clients_submit(bound_ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sql.arrow`` runs a statement once through the client's submit; through ``con.sql`` (a
    client without it) the table is the same."""
    params = {"cube_id": 1, "start_ts": datetime(2000, 1, 1), "end_ts": datetime(2100, 1, 1),
              "promises": DUMMY["STRUCT[]"], "per_window": True, "over_range": False, "include_failed": True,
              "paths": None, "window_s": 60, "fast_factor": 14.4, "slow_factor": 6.0, "ticket_factor": 1.0}
    direct = sql.arrow(bound_ws.con, "promise__shares", **params)
    assert direct.num_rows > 0
    monkeypatch.setattr(sql, "_submit", None)
    assert sql.arrow(bound_ws.con, "promise__shares", **params).equals(direct)

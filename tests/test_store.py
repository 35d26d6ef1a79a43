"""The workspace: its schema, transactions and deletes (what ``app.store`` owns)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from app.cube import ensure_cube
from app.store import CUBE_TABLES, Workspace
from tests.conftest import histogram, load

V1 = {"engine": "0", "instance": "10.0.0.1:8000", "model_name": "chat"}
TTFT = "vllm:time_to_first_token_seconds"


def _counts(ws: Workspace) -> dict[str, int]:
    tables = ("datasets", "series", "samples", "families", "cube_index", *CUBE_TABLES)
    return {t: ws.con.execute(f"select count(*) from {t}").fetchone()[0] for t in tables}


def _two_datasets(ws: Workspace) -> tuple[int, int]:
    a = load(ws, histogram(TTFT, V1, ["0.1", "+Inf"], [(0, [0, 0], 0.0), (60, [3, 4], 1.0)]), "a")
    other = {**V1, "model_name": "code"}
    b = load(ws, histogram(TTFT, other, ["0.1", "+Inf"], [(0, [0, 0], 0.0), (60, [1, 5], 2.0)]), "b")
    return a, b


def test_the_schema_holds_the_cube_tables_before_any_cube(ws: Workspace) -> None:
    assert _counts(ws) == dict.fromkeys(("datasets", "series", "samples", "families", "cube_index",
                                         *CUBE_TABLES), 0)


def test_deleting_a_dataset_removes_its_rows_and_every_cube_that_includes_it(ws: Workspace) -> None:
    a, b = _two_datasets(ws)
    both = ensure_cube(ws, [a, b], 60, None)
    only_b = ensure_cube(ws, [b], 60, None)
    assert both != only_b
    ws.delete_dataset(a)
    left = {r[0] for r in ws.con.execute("select cube_id from cube_index").fetchall()}
    assert both not in left and only_b in left  # b's own cube (and b's load cube) stay
    for table in CUBE_TABLES:
        ids = {r[0] for r in ws.con.execute(f"select distinct cube_id from {table}").fetchall()}
        assert both not in ids, table
        assert ids <= left, table
    assert ws.dataset_ids() == [b]
    assert ws.con.execute("select count(*) from samples where dataset_id = $a", {"a": a}).fetchone()[0] == 0
    # series only the deleted dataset held are gone; b's stay
    models = {r[0] for r in ws.con.execute("select distinct labels['model_name'] from series").fetchall()}
    assert models == {"code"}
    # the cube of b is still read as before
    assert ensure_cube(ws, [b], 60, None) == only_b


def test_a_cube_id_is_never_reused_after_a_delete(ws: Workspace) -> None:
    a, b = _two_datasets(ws)
    first = ensure_cube(ws, [a, b], 60, None)
    ws.delete_dataset(a)
    c = load(ws, histogram(TTFT, {**V1, "model_name": "x"}, ["0.1", "+Inf"], [(0, [0, 0], 0.0)]), "c")
    assert ensure_cube(ws, [b, c], 60, None) > first


def test_a_transaction_that_fails_leaves_nothing(ws: Workspace) -> None:
    _two_datasets(ws)
    before = _counts(ws)
    with pytest.raises(duckdb.Error):
        with ws.transaction() as con:
            con.execute("delete from samples")
            con.execute("insert into settings values ('k', '1')")
            con.execute("select * from no_such_table")
    assert _counts(ws) == before
    assert ws.get_setting("k") is None


def test_an_exception_in_python_rolls_back_too(ws: Workspace) -> None:
    ws.set_setting("kept", [1, 2])
    with pytest.raises(RuntimeError):
        with ws.transaction() as con:
            con.execute("insert or replace into settings values ('kept', '[3]')")
            raise RuntimeError("interrupted")
    assert ws.get_setting("kept") == [1, 2]


def test_settings_and_path_mapping_round_trip(tmp_path) -> None:
    db = tmp_path / "w.duckdb"
    with Workspace(db) as ws:
        assert ws.path_labels() == ["__model__"]  # the default before any mapping is stored: each engine's model label
        ws.set_paths(["model_name", "instance"], [("^chat / .*", "chat")])
        ws.set_setting("prices", {"replica_hour": 4.5})
    with Workspace(db, read_only=True) as ws:
        assert ws.path_labels() == ["model_name", "instance"]
        assert ws.path_rules() == [("^chat / .*", "chat")]
        assert ws.get_setting("prices") == {"replica_hour": 4.5}


def test_a_bad_path_rule_is_refused_before_anything_is_stored(ws: Workspace) -> None:
    ws.set_paths(["model_name"], [("a", "b")])
    with pytest.raises(Exception, match="unterminated|missing"):
        ws.set_paths(["instance"], [("(", "x")])
    assert ws.path_labels() == ["model_name"] and ws.path_rules() == [("a", "b")]


def test_release_memory_keeps_the_limit_and_the_data(tmp_path: Path) -> None:
    """The buffer pool's cached blocks are dropped (the limit lowered, then restored): the limit is the
    configured one after it, and what is stored reads back the same."""
    with Workspace(str(tmp_path / "w.duckdb")) as ws:
        ws.con.execute("create table t as select range as x from range(300000)")
        limit = ws.con.execute("select current_setting('memory_limit')").fetchone()[0]
        ws.release_memory()
        assert ws.con.execute("select current_setting('memory_limit')").fetchone()[0] == limit
        assert ws.con.execute("select count(*), sum(x) from t").fetchone() == (300000, 299999 * 300000 // 2)

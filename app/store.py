"""The workspace: one DuckDB database holding datasets, series, samples, cached cubes, path rules
and settings, its schema (``queries/schema/workspace.sql``) and its transactions.

This is the only module that opens DuckDB connections. What goes in is ``app.load``'s business
(one transaction per file); what is computed from it, ``app.cube``'s and the queries'.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from app import sql

DB_ENV = "HEADROOM_DB"
MEMORY = ":memory:"
# the tables of cached cubes, one row set per cube_id (cube_index maps a cube's spec to its id)
CUBE_TABLES = ("cube_rows", "cube_bucket_layouts", "cube_window_histograms")
# the path label of a workspace with no stored mapping: not a label but the label the engine names its
# model with (model_name, model, model_id or served_model_name; queries/cube/signals__series.sql). Label
# names starting with `__` are reserved by Prometheus, so no exporter's label is called this.
MODEL_LABEL = "__model__"
# the labels an engine may name its model with, in the order `__model__` tries them (signals__series)
MODEL_LABELS = ("model_name", "model", "model_id", "served_model_name")
DEFAULT_PATH_LABELS = (MODEL_LABEL,)


def data_dir() -> Path:
    """The project's ``data/`` directory (checkout) or the wheel's copy."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "data", here / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("data/ directory not found next to the app package")


@functools.cache
def signal_rows() -> tuple[dict[str, str], ...]:
    """The rows of ``data/signals.csv`` (engine, family, signal, kind, ...), read once per process: for
    code that needs the engine map without a workspace (the workspace holds it as ``signal_map``)."""
    with (data_dir() / "signals.csv").open() as fh:
        return tuple(csv.DictReader(fh))


MEMORY_ENV = "HEADROOM_MEMORY_LIMIT"
# DuckDB bounds its own buffers; Python, Streamlit, the allocator and what DuckDB allocates outside its
# pool add 250-800 MiB on top: at 3.5 GB a month's load (185 M samples) peaked at 4.1 GiB resident, so 3 GB
# keeps a load under 4 GB
DEFAULT_MEMORY_LIMIT = "3GB"
RELEASE_LIMIT = "64MB"  # Workspace.release_memory: low enough to evict every cached block


def _engine_config() -> dict[str, str]:
    """DuckDB settings: a bounded memory (a week of samples must not take the machine; DuckDB spills
    to a temp directory beyond it) — ``$HEADROOM_MEMORY_LIMIT`` (e.g. ``8GB``) overrides 3 GB."""
    return {
        "memory_limit": os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_LIMIT,
        "temp_directory": str(Path(tempfile.gettempdir()) / "headroom-duckdb-spill"),
    }


def default_db_path() -> str:
    """``$HEADROOM_DB``, else ``$XDG_DATA_HOME/headroom/workspace.duckdb`` (``~/.local/share`` by default)."""
    if os.environ.get(DB_ENV):
        return os.environ[DB_ENV]
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "headroom" / "workspace.duckdb")


class Workspace:
    """A DuckDB workspace. ``Workspace(":memory:")`` for tests; a file path otherwise.

    The connection is owned by this object; callers that run queries from other threads use
    ``cursor()`` (DuckDB 2.0 refuses concurrent calls on one connection).
    """

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = str(path) if path is not None else default_db_path()
        if self.path != MEMORY:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        config = _engine_config()
        self.memory_limit = config["memory_limit"]  # as configured (DuckDB shows it rounded)
        self.con = duckdb.connect(self.path, read_only=read_only, config=config)
        self._lock = threading.Lock()
        if not read_only:  # a read-only file already holds its schema and macros
            self._init_schema()
            sql.install_macros(self.con)

    # -- setup ---------------------------------------------------------------------------------
    def _init_schema(self) -> None:
        schema = (sql.queries_dir() / "schema" / "workspace.sql").read_text()
        body = "\n".join(ln for ln in schema.splitlines() if not ln.strip().startswith("--"))
        for statement in body.split(";"):
            if statement.strip():
                self.con.execute(statement)
        # the engine metric map is data, refreshed from data/signals.csv at every connect
        self.con.execute(
            "create or replace table signal_map as select * from read_csv($path, header = true, "
            "columns = {'engine': 'VARCHAR', 'family': 'VARCHAR', 'signal': 'VARCHAR', 'kind': 'VARCHAR', "
            "'scale': 'DOUBLE', 'label_match': 'VARCHAR', 'priority': 'INTEGER', 'note': 'VARCHAR'})",
            {"path": str(data_dir() / "signals.csv")},
        )

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.con.cursor()

    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[tuple]:
        """A small read on its own cursor: safe while another thread holds the connection (a
        Streamlit rerun starts while the previous script may still be inside DuckDB)."""
        cur = self.con.cursor()
        try:
            return cur.execute(query, params).fetchall()
        finally:
            cur.close()

    def close(self) -> None:
        self.con.close()

    def release_memory(self) -> None:
        """Let DuckDB drop what its buffer pool keeps cached (its copies of stored blocks: after a pass
        over a month's samples, GBs) before work that holds its own memory (a month's replay): the
        limit is lowered, which evicts them, then restored. Nothing stored is lost."""
        with self._lock:
            try:
                self.con.execute("set memory_limit = $limit", {"limit": RELEASE_LIMIT})
            except duckdb.Error:
                pass  # buffers pinned by an open transaction stay: the memory stays held, no harm
            finally:
                self.con.execute("set memory_limit = $limit", {"limit": self.memory_limit})

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, con: duckdb.DuckDBPyConnection | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """Run a block atomically on the workspace connection (rolled back on any exception), or on ``con``,
        a cursor of it whose TEMP tables the block reads (a live pull's staging): writers take turns either
        way."""
        con = self.con if con is None else con
        with self._lock:
            con.execute("begin transaction")
            try:
                yield con
            except BaseException:
                con.execute("rollback")
                raise
            con.execute("commit")

    # -- reading -------------------------------------------------------------------------------
    def datasets(self):
        """One row per dataset; ``snapshot``: a single scrape (its counters are increases since the
        server started)."""
        return self.cursor().execute(
            "select dataset_id, name, source, format, engine, time_source, n_series, n_samples, "
            "t_min, t_max, scrape_interval_s, coalesce(cast(summary->>'$.snapshot' as boolean), false) as snapshot "
            "from datasets order by dataset_id"
        ).df()

    def dataset_ids(self) -> list[int]:
        return [r[0] for r in self._read("select dataset_id from datasets order by 1")]

    def dataset_summary(self, digest: str) -> dict[str, Any] | None:
        """The stored load report of the dataset whose content has this digest (None: not loaded)."""
        row = next(iter(self._read("select summary from datasets where digest = $d", {"d": digest})), None)
        return json.loads(row[0]) if row else None

    def delete_dataset(self, dataset_id: int) -> None:
        with self.transaction() as con:
            con.execute("delete from samples where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from families where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from request_records where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from skipped_samples where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from live_windows where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from live_pulls where dataset_id = $id", {"id": dataset_id})
            drop_cubes_for(con, dataset_id)
            con.execute("delete from datasets where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from series where series_id not in (select distinct series_id from samples) "
                        "and series_id not in (select distinct series_id from live_windows) "
                        "and series_id not in (select distinct series_id from skipped_samples)")

    # -- settings and path rules ---------------------------------------------------------------
    def get_setting(self, key: str, default: Any = None) -> Any:
        row = next(iter(self._read("select value from settings where key = $k", {"k": key})), None)
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.transaction() as con:
            con.execute(
                "insert or replace into settings values ($k, $v)", {"k": key, "v": json.dumps(value)}
            )

    def expire_sessions(self, now: datetime, cutoff: datetime, keep: str) -> int:
        """Delete the settings of every session last seen before ``cutoff`` but ``keep``; a session with
        settings and no stamp yet (written before sessions expired) is stamped ``now`` first. Returns
        the number of rows deleted."""
        with self.transaction() as con:
            sql.execute(con, "settings__stamp_unseen_sessions", now=now)
            before = con.execute("select count(*) from settings").fetchone()[0]
            sql.execute(con, "settings__expire_sessions", cutoff=cutoff, keep=keep)
            return before - con.execute("select count(*) from settings").fetchone()[0]

    def path_labels(self) -> list[str]:
        return self._path_mapping()[0]

    def path_rules(self) -> list[tuple[str, str]]:
        return self._path_mapping()[1]

    def _path_mapping(self) -> tuple[list[str], list[tuple[str, str]]]:
        cur = self.con.cursor()  # its own cursor, as _read
        try:
            return path_mapping(cur)
        finally:
            cur.close()

    def set_paths(self, labels: Sequence[str], rules: Sequence[tuple[str, str]] = ()) -> None:
        """Store the path mapping: the labels that name a path and regex rules renaming their values."""
        for pattern, _ in rules:
            re.compile(pattern)  # a bad rule is refused before it is stored
        with self.transaction() as con:
            con.execute(
                "insert or replace into settings values ('path_labels', $v)", {"v": json.dumps(list(labels))}
            )
            con.execute("delete from path_rules")
            for i, (pattern, path) in enumerate(rules):
                con.execute("insert into path_rules values ($i, $p, $n)", {"i": i, "p": pattern, "n": path})


def drop_cubes_for(con: duckdb.DuckDBPyConnection, dataset_id: int) -> None:
    """Forget the cached cubes that include a dataset (its delete; a benchmark's rebuild)."""
    cubes = "select cube_id from cube_index where list_contains(cast(spec->'datasets' as integer[]), $id)"
    for table in CUBE_TABLES:
        con.execute(f"delete from {table} where cube_id in ({cubes})", {"id": dataset_id})
    con.execute(f"delete from cube_index where cube_id in ({cubes})", {"id": dataset_id})


def path_mapping(cur: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[str, str]]]:
    """The stored path mapping read on ``cur`` (a load reads it inside its transaction): the labels
    whose values name a path and the rules renaming them, in order. Without a stored mapping the
    labels are ``["__model__"]``, each engine's model label; a stored mapping (``set_paths``), even
    ``["model_name"]``, always wins."""
    row = cur.execute("select value from settings where key = 'path_labels'").fetchone()
    rules = [(p, q) for p, q in cur.execute("select pattern, path from path_rules order by position").fetchall()]
    return (list(json.loads(row[0])) if row else list(DEFAULT_PATH_LABELS)), rules

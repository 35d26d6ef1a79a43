"""The workspace: one DuckDB database holding datasets, series, samples, path rules and settings.

This is the only module that opens DuckDB connections. Each load of a file is atomic (one
transaction) and idempotent (a file whose bytes were loaded before is not loaded again).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from app import ingest, records, sql
from app.ingest.base import IngestError

DB_ENV = "HEADROOM_DB"
MEMORY = ":memory:"


def data_dir() -> Path:
    """The project's ``data/`` directory (checkout) or the wheel's copy."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "data", here / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("data/ directory not found next to the app package")


MEMORY_ENV = "HEADROOM_MEMORY_LIMIT"
# DuckDB bounds its own buffers; Python, Streamlit and the allocator add ~250 MiB on top: at 3.5 GB a
# 100 M-sample cube build peaks at ~3.6 GiB resident (under 4 GB), where 4GB gave 4.0 GiB (+3 % time)
DEFAULT_MEMORY_LIMIT = "3.5GB"


def _engine_config() -> dict[str, str]:
    """DuckDB settings: a bounded memory (a week of samples must not take the machine; DuckDB spills
    to a temp directory beyond it) — ``$HEADROOM_MEMORY_LIMIT`` (e.g. ``8GB``) overrides 3.5 GB."""
    import tempfile

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


@dataclass
class LoadReport:
    """What happened to one file of a load. Its ``as_json()`` is the stable JSON of ``headroom load``."""

    file: str
    status: str  # loaded | unchanged | failed
    dataset: str | None = None
    dataset_id: int | None = None
    format: str | None = None
    gzip: bool = False
    engine: str | None = None
    series: int = 0
    samples: int = 0
    start: str | None = None
    end: str | None = None
    scrape_interval_s: float | None = None
    time_source: str | None = None
    signals: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    unknown_metrics: list[str] = field(default_factory=list)
    resets: int = 0
    repairs: int = 0
    snapshot: bool = False
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Workspace:
    """A DuckDB workspace. ``Workspace(":memory:")`` for tests; a file path otherwise.

    The connection is owned by this object; callers that run queries from other threads use
    ``cursor()`` (DuckDB 2.0 refuses concurrent calls on one connection).
    """

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = str(path) if path is not None else default_db_path()
        if self.path != MEMORY:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(self.path, read_only=read_only, config=_engine_config())
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

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Run a block atomically on the workspace connection (rolled back on any exception)."""
        with self._lock:
            self.con.execute("begin transaction")
            try:
                yield self.con
            except BaseException:
                self.con.execute("rollback")
                raise
            self.con.execute("commit")

    # -- loading -------------------------------------------------------------------------------
    def load_files(self, paths: Iterable[str | Path], names: Sequence[str] | None = None) -> list[LoadReport]:
        """Load each file as its own dataset; a failing file is reported and the others still load."""
        reports = []
        for i, p in enumerate(paths):
            name = names[i] if names and i < len(names) else None
            reports.append(self.load_file(Path(p), name=name))
        return reports

    def load_file(self, path: Path, name: str | None = None, display: str | None = None) -> LoadReport:
        display = display or str(path)
        try:
            digest = _digest(path)
        except OSError as exc:
            return LoadReport(file=display, status="failed", errors=[f"{display}: cannot read ({exc.strerror})"])
        try:
            with ingest.open_source(path, display=display) as src:
                kind = records.sniff(src)
                if kind:
                    return self._load(display, digest, name or path.name,
                                      lambda con: records.stage(con, src, kind), src, records_kind=kind)
                return self._load(display, digest, name or path.name, lambda con: ingest.stage(con, src), src)
        except IngestError as exc:
            return LoadReport(file=display, status="failed", errors=[str(exc)])

    def load_frame(self, frame: Any, name: str) -> LoadReport:
        """Load a DataFrame of samples (columns metric, labels, ts, value) as a dataset."""
        from app.ingest.frame import digest_frame, stage_frame

        with self._lock:
            digest = digest_frame(self.con, frame)
        src = ingest.Source(path=Path(name), display=name, original=Path(name))
        return self._load(name, digest, name, lambda con: stage_frame(con, frame), src)

    def _load(self, display: str, digest: str, name: str, stager: Any, src: ingest.Source,
              records_kind: str | None = None) -> LoadReport:
        existing = next(iter(self._read("select summary from datasets where digest = $d", {"d": digest})), None)
        if existing:
            report = LoadReport(**json.loads(existing[0]))
            report.file, report.status = display, "unchanged"
            return report
        try:
            with self.transaction() as con:
                staged = stager(con)
                if records_kind:
                    return self._commit_records(con, records_kind, src, digest, name)
                return self._commit_staged(con, staged, src, digest, name)
        except IngestError as exc:
            return LoadReport(file=display, status="failed", errors=[str(exc)])
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            return LoadReport(file=display, status="failed", errors=[f"{display}: {first}"])

    def _unique_name(self, con: duckdb.DuckDBPyConnection, name: str) -> str:
        taken = {r[0] for r in con.execute("select name from datasets").fetchall()}
        if name not in taken:
            return name
        i = 2
        while f"{name} ({i})" in taken:
            i += 1
        return f"{name} ({i})"

    def _commit_staged(
        self, con: duckdb.DuckDBPyConnection, staged: ingest.Staged, src: ingest.Source, digest: str, name: str
    ) -> LoadReport:
        n_points = con.execute("select count(*) from stage_points").fetchone()[0]
        if n_points == 0:
            raise IngestError(src.display, "no samples found")
        con.execute("create or replace temp table stage_series as " + sql.get("ingest__staged_series").sql)
        dataset_id = con.execute("select nextval('dataset_ids')").fetchone()[0]
        sql.execute(con, "ingest__insert_series")
        sql.execute(con, "ingest__insert_samples", dataset_id=dataset_id)
        sql.execute(con, "ingest__insert_families", dataset_id=dataset_id)
        stats = sql.rows(con, "ingest__dataset_stats", dataset_id=dataset_id)[0]
        n_series, n_samples, t_min, t_max, interval = stats
        name = self._unique_name(con, name)
        report = LoadReport(
            file=src.display,
            status="loaded",
            dataset=name,
            dataset_id=dataset_id,
            format=staged.format,
            gzip=staged.gzip,
            series=n_series,
            samples=n_samples,
            start=_iso(t_min),
            end=_iso(t_max),
            scrape_interval_s=interval,
            time_source=staged.time_source,
            notes=list(staged.notes),
        )
        from app.summary import describe_dataset  # the per-dataset signal/path/health summary

        describe_dataset(con, dataset_id, report)
        con.execute(
            "insert into datasets values ($id, $name, $digest, $source, $format, $engine, $time_source, "
            "$loaded_at, $n_series, $n_samples, $t_min, $t_max, $interval, $summary)",
            {
                "id": dataset_id,
                "name": name,
                "digest": digest,
                "source": src.display,
                "format": staged.format,
                "engine": report.engine,
                "time_source": staged.time_source,
                "loaded_at": datetime.now(UTC).replace(tzinfo=None),
                "n_series": n_series,
                "n_samples": n_samples,
                "t_min": t_min,
                "t_max": t_max,
                "interval": interval,
                "summary": json.dumps(report.as_json()),
            },
        )
        return report

    def _commit_records(self, con: duckdb.DuckDBPyConnection, kind: str, src: ingest.Source, digest: str,
                        name: str) -> LoadReport:
        n, t_min, t_max = con.execute(
            "select count(*), min(coalesce(arrival, first_token)), max(coalesce(finish, first_token)) "
            "from stage_records").fetchone()
        if n == 0:
            raise IngestError(src.display, "no per-request records found")
        dataset_id = con.execute("select nextval('dataset_ids')").fetchone()[0]
        con.execute("insert into request_records select $id, * from stage_records", {"id": dataset_id})
        name = self._unique_name(con, name)
        paths = [r[0] for r in con.execute("select distinct path from stage_records order by 1").fetchall()]
        failed = con.execute("select count(*) from stage_records where finished_reason in ('abort', 'error')"
                             ).fetchone()[0]
        report = LoadReport(file=src.display, status="loaded", dataset=name, dataset_id=dataset_id, format=kind,
                            gzip=src.gzip, samples=int(n), start=_iso(t_min), end=_iso(t_max),
                            time_source="samples", signals=["per-request records"], paths=paths,
                            notes=[f"{n} per-request records ({failed} failed): exact joint breach shares"])
        con.execute(
            "insert into datasets values ($id, $name, $digest, $source, $format, null, 'samples', $loaded_at, "
            "0, $n, $t_min, $t_max, null, $summary)",
            {"id": dataset_id, "name": name, "digest": digest, "source": src.display, "format": kind,
             "loaded_at": datetime.now(UTC).replace(tzinfo=None), "n": int(n), "t_min": t_min, "t_max": t_max,
             "summary": json.dumps(report.as_json())})
        return report

    # -- reading -------------------------------------------------------------------------------
    def datasets(self):
        return self.cursor().execute(
            "select dataset_id, name, source, format, engine, time_source, n_series, n_samples, "
            "t_min, t_max, scrape_interval_s from datasets order by dataset_id"
        ).df()

    def dataset_ids(self) -> list[int]:
        return [r[0] for r in self._read("select dataset_id from datasets order by 1")]

    def delete_dataset(self, dataset_id: int) -> None:
        with self.transaction() as con:
            con.execute("delete from samples where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from families where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from request_records where dataset_id = $id", {"id": dataset_id})
            from app.cube import drop_cubes_for

            drop_cubes_for(con, dataset_id)
            con.execute("delete from datasets where dataset_id = $id", {"id": dataset_id})
            con.execute("delete from series where series_id not in (select distinct series_id from samples)")

    # -- settings and path rules ---------------------------------------------------------------
    def get_setting(self, key: str, default: Any = None) -> Any:
        row = next(iter(self._read("select value from settings where key = $k", {"k": key})), None)
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.transaction() as con:
            con.execute(
                "insert or replace into settings values ($k, $v)", {"k": key, "v": json.dumps(value)}
            )

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
        import re

        for pattern, _ in rules:
            re.compile(pattern)  # a bad rule is refused before it is stored
        with self.transaction() as con:
            con.execute(
                "insert or replace into settings values ('path_labels', $v)", {"v": json.dumps(list(labels))}
            )
            con.execute("delete from path_rules")
            for i, (pattern, path) in enumerate(rules):
                con.execute("insert into path_rules values ($i, $p, $n)", {"i": i, "p": pattern, "n": path})


def path_mapping(cur: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[str, str]]]:
    """The stored path mapping read on ``cur`` (a load reads it inside its transaction): the labels
    whose values name a path (default ``model_name``) and the rules renaming them, in order."""
    row = cur.execute("select value from settings where key = 'path_labels'").fetchone()
    rules = [(p, q) for p, q in cur.execute("select pattern, path from path_rules order by position").fetchall()]
    return (list(json.loads(row[0])) if row else ["model_name"]), rules


def _iso(ts: datetime | None) -> str | None:
    return ts.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z") if ts else None

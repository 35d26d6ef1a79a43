"""Build the cube (queries ``signals__series`` → ``cube__series_windows`` → ``cube__build``) and cache it.

The cube is built once per (datasets, window, path mapping) and kept in the workspace
(``cube_rows``), so a threshold, price or scenario change never rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import duckdb
import pandas as pd

from app import sql
from app.ingest.base import empty_tables
from app.store import CUBE_TABLES, MODEL_LABEL, MODEL_LABELS, Workspace, path_mapping

MIN_WINDOW_S, MAX_WINDOW_S = 60, 86400
CUBE_COLUMNS = ["window_start", "path", "signal", "le", "stat", "value"]

# The capacity fit's cube (app.economics.model.capacity): per replica, 5-minute windows, of the signals
# capacity__replica_windows and capacity__step_token_buckets read (the other latency histograms'
# buckets are most of an export's series). A file's load keeps it (``keep_fit_cube``).
REPLICA_LABELS = ["instance", "engine"]
FIT_WINDOW_S = 300
FIT_SIGNALS = ("generation_tokens_total", "prompt_tokens_total", "iteration_tokens", "running", "waiting", "kv_usage",
               "preemptions", "requests", "ttft", "tpot", "queue", "prefill", "prompt_tokens", "generation_tokens")
# the fit's histograms whose buckets it reads; of the others (TTFT, TPOT, queue, prefill) it reads the
# count and sum, so the fit's cube keeps no bucket rows of them (cube__series_for_build)
FIT_BUCKETS = ("iteration_tokens", "prompt_tokens", "generation_tokens")

# a build's temp tables that hold a row per series and window or per cube row (emptied once stored)
_BUILD_TABLES = ("cube_series_windows", "cube_new")

# Stored in this order, a cube's rows of one signal sit in few row groups: DuckDB's zone maps then
# skip the rest when a query reads one signal.
_STORE_ORDER = "order by signal nulls first, path, stat, le nulls first, window_start"


def store_rows(con: duckdb.DuckDBPyConnection, cube_id: int, relation: str, window_s: int) -> None:
    """Append the rows of ``relation`` (the cube columns, ``window_s`` windows) to ``cube_rows`` as
    cube ``cube_id``, with the per-window lists a promise reads (``index_for_promises``)."""
    con.execute(f"insert into cube_rows select $id, * from {relation} {_STORE_ORDER}", {"id": cube_id})
    index_for_promises(con, cube_id, window_s)


def index_for_promises(con: duckdb.DuckDBPyConnection, cube_id: int, window_s: int) -> None:
    """Gather a cube's bucket rows into one list per (window, path, histogram) with its layout
    (``cube__promise_lists`` → ``cube_bucket_layouts``, ``cube_window_histograms``): a promise change
    then picks bounds by position instead of aggregating millions of bucket rows."""
    for table in CUBE_TABLES[1:]:  # the derived ones
        con.execute(f"delete from {table} where cube_id = $id", {"id": cube_id})
    sql.materialize(con, "cube__promise_lists", "promise_lists", cube_id=cube_id)
    sql.insert_into(con, "cube__bucket_layouts", "cube_bucket_layouts", cube_id=cube_id)
    sql.insert_into(con, "cube__window_histograms", "cube_window_histograms", cube_id=cube_id, window_s=window_s)
    con.execute("drop table promise_lists")


def parse_window(text: str | int) -> int:
    """``5m`` → 300. Accepts s/m/h/d suffixes or plain seconds; 1 min to 1 day."""
    if isinstance(text, int):
        seconds = text
    else:
        t = text.strip().lower()
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        try:
            seconds = int(float(t[:-1]) * units[t[-1]]) if t[-1] in units else int(float(t))
        except (ValueError, IndexError):
            raise ValueError(f"window {text!r}: expected a duration like 30s, 5m, 1h or 1d") from None
    if not MIN_WINDOW_S <= seconds <= MAX_WINDOW_S:
        raise ValueError(f"window {text!r}: must be between 1 minute and 1 day")
    return seconds


def build_into_temp(con: duckdb.DuckDBPyConnection, dataset_ids: Sequence[int], window_s: int,
                    path_labels: Sequence[str], signals: Sequence[str] | None = None,
                    buckets: Sequence[str] | None = None) -> None:
    """Build the cube into the temp table ``cube_new`` on ``con`` (with its inputs ``cube_series``
    and ``cube_series_windows``, and ``cube_duplicate_series``, the series that repeat an instant,
    which later queries of the same connection may read). With ``signals``, a cube of those signals
    only: their rows are the full cube's (``cube__series_of_signals``), read from their samples alone.
    With ``buckets``, the bucket rows (and repairs) of the histograms not named there are left out."""
    ids = [int(i) for i in dataset_ids]
    live = check_live(con, ids, window_s, path_labels)
    sql.materialize(con, "signals__series", "cube_series", dataset_ids=ids, path_labels=list(path_labels))
    if signals is not None:
        sql.materialize(con, "cube__series_of_signals", "cube_series_kept", signals=sorted(signals))
        con.execute("create or replace temp table cube_series as from cube_series_kept")
        con.execute("drop table cube_series_kept")
    if live:  # windows a store computed (app.live.pushdown), at this cube's window; the raw samples a pull
        # keeps for the capacity fit are of the same series, so they are not windowed again here
        sql.materialize(con, "cube__live_series_windows", "cube_series_windows", dataset_ids=live,
                        window_s=int(window_s))
        con.execute("create or replace temp table cube_duplicate_series as "
                    "select series_id from cube_series_windows where duplicates > 0")
    else:
        _windows_of_samples(con, ids, window_s)
    _build(con, buckets)


def _build(con: duckdb.DuckDBPyConnection, buckets: Sequence[str] | None) -> None:
    """``cube_new`` from ``cube_series_windows``, the bucket series of histograms not in ``buckets``
    left out (None: none left out)."""
    if buckets is not None:
        sql.materialize(con, "cube__series_for_build", "cube_series_kept", buckets=sorted(buckets))
        con.execute("create or replace temp table cube_series as from cube_series_kept")
        con.execute("drop table cube_series_kept")
    sql.materialize(con, "cube__build", "cube_new")


def _windows_of_samples(con: duckdb.DuckDBPyConnection, ids: list[int], window_s: int) -> None:
    """``cube_series_windows`` (and ``cube_duplicate_series``) from the datasets' samples."""
    # A load stores a file in the order it reads it, and exports come series by series in time order:
    # read in storage order, a series' neighbours are mostly beside it, and only the ends of its runs
    # need a sort (at 10 M samples a few thousand rows instead of all of them: 4x faster). When
    # the runs of a series overlap (exports that interleave or repeat samples), sort every sample.
    presorted = sample_pass(con, ids, window_s)
    # Windows no longer than the scrape interval hold one sample each: each window's row is its
    # sample's, with no per-window aggregate (a month's 60 s cube is tens of millions of windows)
    parts = _replica_parts(con)
    if presorted and sql.rows(con, "cube__sparse_windows", window_s=int(window_s))[0][0]:
        _series_windows(con, "cube__series_windows_sparse", parts, dataset_ids=ids, window_s=int(window_s))
    else:
        # Samples are unique per (series, time) unless several exports overlap (or one repeats itself):
        # the query counts such duplicates as it goes, and only then runs again on deduplicated samples.
        _series_windows(con, "cube__series_windows", parts, dataset_ids=ids, window_s=int(window_s),
                        dedupe=False, presorted=presorted)
    # the series that repeat an instant, kept for the load's note (the deduplicated pass counts none)
    con.execute("create or replace temp table cube_duplicate_series as "
                "select distinct series_id from cube_series_windows where duplicates > 0")
    duplicates = con.execute("select count(*) from cube_duplicate_series").fetchone()[0]
    if duplicates:
        _series_windows(con, "cube__series_windows", parts, dataset_ids=ids, window_s=int(window_s),
                        dedupe=True, presorted=False)
    empty_tables(con, ("cube_sample_runs", "cube_run_links"))


# cube__sample_runs reads the samples in four ranges of row ids side by side (the branches of its
# union); SAMPLE_RANGES of them hold rows (1 to 4: fewer leave the last ones empty)
_QUERY_RANGES = 4
SAMPLE_RANGES = 4


def sample_pass(con: duckdb.DuckDBPyConnection, ids: list[int], window_s: int) -> bool:
    """The pass over the datasets' samples (``cube_sample_runs``, ``cube_run_links``); whether the runs
    of every series are disjoint (the windows may then read the pass's neighbours)."""
    lo, hi = sql.rows(con, "cube__sample_row_range", dataset_ids=ids)[0]
    cuts = [lo + (hi - lo) * min(k, SAMPLE_RANGES) // SAMPLE_RANGES for k in range(_QUERY_RANGES + 1)]
    # the ranges stream side by side only when the table they fill may take their rows in any order
    # (the windows read the pass's neighbour columns, never its row order); this connection only
    kept = con.execute("select current_setting('preserve_insertion_order')").fetchone()[0]
    con.execute("set session preserve_insertion_order = false")
    try:
        sql.materialize(con, "cube__sample_runs", "cube_sample_runs", dataset_ids=ids, window_s=int(window_s),
                        row_cuts=cuts)
    finally:
        if kept:
            con.execute("set session preserve_insertion_order = true")
    sql.materialize(con, "cube__run_links", "cube_run_links")
    return bool(con.execute("select coalesce(bool_and(disjoint), true) from cube_run_links").fetchone()[0])


# Kept samples per part of a large build's series windows. Over tens of millions of them the
# statement spills past DuckDB's memory limit (default 3 GB); a replica at a time stays in memory, and
# on a month of 8 replicas that took about half the time of one statement over all of them.
WINDOWS_PART_SAMPLES = 8_000_000


def replica_parts(kept: Sequence[tuple[str, int]], part_samples: int) -> list[list[str]]:
    """Replicas grouped so that each group's kept samples stay within ``part_samples`` where they can
    (a replica larger than that is a group of its own): first fit, largest first."""
    parts: list[tuple[int, list[str]]] = []
    for replica, n in sorted(kept, key=lambda rn: (-rn[1], rn[0])):
        for k, (size, members) in enumerate(parts):
            if size + n <= part_samples:
                parts[k] = (size + n, [*members, replica])
                break
        else:
            parts.append((n, [replica]))
    return [members for _, members in parts]


def _replica_parts(con: duckdb.DuckDBPyConnection) -> list[list[str] | None]:
    """The parts of the series-window pass over ``cube_sample_runs``: ``[None]`` (every series at once)
    unless the kept samples exceed ``WINDOWS_PART_SAMPLES``, else groups of replicas (a replica's rows
    do not depend on the other replicas)."""
    kept = [(str(r), int(n)) for r, n in sql.rows(con, "cube__replica_kept_samples")]
    if sum(n for _, n in kept) > WINDOWS_PART_SAMPLES and len(kept) > 1:
        return list(replica_parts(kept, WINDOWS_PART_SAMPLES))
    return [None]


def _series_windows(con: duckdb.DuckDBPyConnection, query: str, parts: Sequence[list[str] | None],
                    **params: object) -> None:
    """``cube_series_windows`` from ``query`` (``cube__series_windows`` or its sparse form), one
    statement per part of ``_replica_parts``."""
    for k, part in enumerate(parts):
        if k == 0:
            sql.materialize(con, query, "cube_series_windows", **params, replicas=part)
        else:
            sql.insert_into(con, query, "cube_series_windows", **params, replicas=part)


def check_live(con: duckdb.DuckDBPyConnection, dataset_ids: Sequence[int], window_s: int,
               path_labels: Sequence[str]) -> list[int]:
    """The live datasets (pulled by PromQL, ``app.live.pushdown``) among ``dataset_ids``, after checking that
    their windows can make this cube: its window a multiple of the pulled one, its path labels among
    those the store summed by, and no file dataset beside them (the same samples would count twice)."""
    pulls = con.execute("select dataset_id, window_s, by_what, labels, url from live_pulls "
                        "where list_contains($ids, dataset_id) order by dataset_id",
                        {"ids": [int(i) for i in dataset_ids]}).fetchall()
    if not pulls:
        return []
    if len(pulls) < len(dataset_ids):
        raise ValueError("a dataset pulled from a live store by PromQL cannot share a cube with files or raw "
                         "fetches (the same requests would count twice): select it alone, or fetch raw samples")
    for dataset_id, pulled_s, by, labels, url in pulls:
        if window_s % pulled_s:
            raise ValueError(f"dataset {dataset_id} was pulled from {url} at {pulled_s} s windows: a cube of it needs "
                             f"a multiple of {pulled_s} s (not {window_s} s), or pull again at this window")
        if by == "path":
            missing = [x for x in path_labels
                       if x not in labels and not (x == MODEL_LABEL and any(m in labels for m in MODEL_LABELS))]
            if missing:
                raise ValueError(f"dataset {dataset_id} was summed in {url} by {', '.join(labels) or 'no label'}: "
                                 f"it has no {', '.join(missing)} (pull again with --path-label, or --by series)")
    return [int(p[0]) for p in pulls]


def cube_spec(dataset_ids: Sequence[int], window_s: int, path_labels: Sequence[str],
              rules: Sequence[tuple[str, str]], signals: Sequence[str] | None = None,
              buckets: Sequence[str] | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"datasets": sorted(int(i) for i in dataset_ids), "window_s": int(window_s),
                               "path_labels": list(path_labels), "rules": [list(r) for r in rules]}
    if signals is not None:  # a cube of some signals only is another cube (the full cube's key is unchanged)
        spec["signals"] = sorted(signals)
    if buckets is not None:
        spec["buckets"] = sorted(buckets)
    return spec


def cube_key(dataset_ids: Sequence[int], window_s: int, path_labels: Sequence[str],
             rules: Sequence[tuple[str, str]], signals: Sequence[str] | None = None,
             buckets: Sequence[str] | None = None) -> str:
    spec = cube_spec(dataset_ids, window_s, path_labels, rules, signals, buckets)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:24]


def ensure_cube(ws: Workspace, dataset_ids: Sequence[int] | None = None, window_s: int = 300,
                path_labels: Sequence[str] | None = None, signals: Sequence[str] | None = None,
                buckets: Sequence[str] | None = None) -> int:
    """Return the id of the cached cube for this spec, building it if needed; with ``signals``, a cube
    of those signals only (for a reader that needs no other: its rows are the full cube's), and with
    ``buckets`` without the bucket rows of the histograms not named there."""
    ids = list(dataset_ids) if dataset_ids is not None else ws.dataset_ids()
    with ws.transaction() as con:
        ids, labels, rules, cached = _lookup(con, ids, window_s, path_labels, signals, buckets)
        if cached is not None:
            return cached
        build_into_temp(con, ids, window_s, labels, signals, buckets)
        cube_id = _store_built(con, ids, window_s, labels, rules, signals, buckets)
        empty_tables(con, _BUILD_TABLES)  # a month's series windows are GBs: not kept in memory after
        return cube_id


def cached_cube(ws: Workspace, dataset_ids: Sequence[int] | None = None, window_s: int = 300,
                path_labels: Sequence[str] | None = None) -> int | None:
    """The id of the cached cube ``ensure_cube`` would return for this spec, None where it would build
    one (a reader can say what a build costs before asking for it). Read on a cursor of its own, not
    in the workspace's transaction: another session's build (minutes on a month) does not hold it up."""
    ids = list(dataset_ids) if dataset_ids is not None else ws.dataset_ids()
    cur = ws.cursor()
    try:
        return _lookup(cur, ids, window_s, path_labels, None, None)[3]
    finally:
        cur.close()


def _lookup(con: duckdb.DuckDBPyConnection, ids: list[int], window_s: int, path_labels: Sequence[str] | None,
            signals: Sequence[str] | None, buckets: Sequence[str] | None,
            ) -> tuple[list[int], list[str], list[tuple[str, str]], int | None]:
    """The datasets, path labels and rules of a cube spec and the id of its cached cube (None: none)."""
    stored_labels, rules = path_mapping(con)
    labels = list(path_labels) if path_labels is not None else stored_labels
    # a dataset of per-request records holds no samples: the cube is that of the other datasets
    # (so the cube the load kept is found when records are selected beside their metrics)
    records = {r[0] for r in con.execute(
        "select distinct dataset_id from request_records where list_contains($ids, dataset_id)",
        {"ids": [int(i) for i in ids]}).fetchall()}
    ids = [i for i in ids if int(i) not in records]
    row = con.execute("select cube_id from cube_index where cube_key = $k",
                      {"k": cube_key(ids, window_s, labels, rules, signals, buckets)}).fetchone()
    return ids, labels, rules, (int(row[0]) if row else None)


def keep_built(con: duckdb.DuckDBPyConnection, dataset_ids: Sequence[int], window_s: int,
               path_labels: Sequence[str], rules: Sequence[tuple[str, str]]) -> int:
    """Keep the cube a load's summary just built in ``cube_new`` as the cached cube of its spec (its
    dataset is new: no cube of it is cached yet); its id."""
    return _store_built(con, dataset_ids, window_s, path_labels, rules)


def keep_fit_cube(con: duckdb.DuckDBPyConnection, dataset_id: int, rules: Sequence[tuple[str, str]]) -> int:
    """Right after ``build_into_temp`` of a file's dataset alone at ``FIT_WINDOW_S``: keep the capacity
    fit's cube of it too, from the same ``cube_series_windows`` (a series' windows do not depend on the
    path labels), so the pass over the samples, most of a cube's time, is not made again; its id.
    Replaces ``cube_series`` and ``cube_new`` on ``con``."""
    sql.materialize(con, "signals__series", "cube_series", dataset_ids=[int(dataset_id)], path_labels=REPLICA_LABELS)
    sql.materialize(con, "cube__series_of_signals", "cube_series_kept", signals=sorted(FIT_SIGNALS))
    con.execute("create or replace temp table cube_series as from cube_series_kept")
    con.execute("drop table cube_series_kept")
    _build(con, FIT_BUCKETS)
    cube_id = _store_built(con, [dataset_id], FIT_WINDOW_S, REPLICA_LABELS, rules, FIT_SIGNALS, FIT_BUCKETS)
    empty_tables(con, _BUILD_TABLES)
    return cube_id


def _store_built(con: duckdb.DuckDBPyConnection, dataset_ids: Sequence[int], window_s: int,
                 path_labels: Sequence[str], rules: Sequence[tuple[str, str]],
                 signals: Sequence[str] | None = None, buckets: Sequence[str] | None = None) -> int:
    cube_id = int(con.execute("select nextval('cube_ids')").fetchall()[0][0])
    store_rows(con, cube_id, "cube_new", window_s)
    spec = cube_spec(dataset_ids, window_s, path_labels, rules, signals, buckets)
    con.execute("insert into cube_index (cube_key, cube_id, spec) values ($k, $id, $s)",
                {"k": cube_key(dataset_ids, window_s, path_labels, rules, signals, buckets), "id": cube_id,
                 "s": json.dumps(spec)})
    return cube_id


def pulled_by_store(ws: Workspace, cube_id: int) -> list[dict[str, object]]:
    """The live pulls (``app.live.pushdown``) a cube was built from: their counts are the store's ``increase()``,
    not exact increases, and every number read from the cube says so."""
    rows = ws.cursor().execute(
        "select p.url, p.window_s, p.by_what from live_pulls as p, cube_index as c "
        "where c.cube_id = $id and list_contains(cast(c.spec->'datasets' as integer[]), p.dataset_id) "
        "order by p.dataset_id", {"id": cube_id}).fetchall()
    return [{"url": u, "window_s": w, "by": b} for u, w, b in rows]


def cube_frame(ws: Workspace, cube_id: int) -> pd.DataFrame:
    """The cube's rows, ordered by window, path, signal, stat, le."""
    return ws.cursor().execute(
        "select window_start, path, signal, le, stat, value from cube_rows where cube_id = $id "
        "order by window_start, path, signal nulls first, stat, le nulls first",
        {"id": cube_id},
    ).df()

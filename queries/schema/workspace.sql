-- name: workspace
-- purpose: the workspace schema; run at every connect (idempotent)
-- Series identity is global: a series is its metric name plus its sorted labels, so the same series
-- exported in two files (two snapshots, two formats, two overlapping exports) is one series.

create sequence if not exists dataset_ids start 1;

-- one row per loaded file (a dataset); digest makes a load idempotent
create table if not exists datasets (
    dataset_id integer primary key,
    name varchar not null unique,
    digest varchar not null unique,
    source varchar not null,
    format varchar not null,
    engine varchar,
    time_source varchar not null,
    loaded_at timestamp not null,
    n_series bigint not null,
    n_samples bigint not null,
    t_min timestamp,
    t_max timestamp,
    scrape_interval_s double,
    summary json
);

-- one row per distinct series (metric + labels), shared by every dataset that holds it
create table if not exists series (
    series_id ubigint primary key,
    metric varchar not null,
    family varchar not null,
    suffix varchar not null,
    mtype varchar not null,
    labels map(varchar, varchar) not null,
    le double,
    group_id ubigint not null,
    replica varchar not null
);

-- one row per sample; ts is UTC
create table if not exists samples (
    dataset_id integer not null,
    series_id ubigint not null,
    ts timestamp not null,
    value double not null
);

-- valid samples no number of the cube is computed from, kept beside `samples`: a NaN or infinite
-- value (OpenMetrics allows both; a gauge may hold NaN; reason 'value'), a time no timestamp holds
-- (outside the years 1 to 9999, NULL here; reason 'time'); counted in the load report
create table if not exists skipped_samples (
    dataset_id integer not null,
    series_id ubigint not null,
    ts timestamp,
    value double not null,
    src_line bigint,
    reason varchar not null
);

-- HELP/TYPE of metric families as declared in the files
create table if not exists families (
    dataset_id integer not null,
    family varchar not null,
    mtype varchar not null,
    help varchar
);

-- path mapping: values of path_labels (joined with ' / ') matched by regex -> path name
create table if not exists path_rules (
    position integer not null,
    pattern varchar not null,
    path varchar not null
);

-- small key/value settings of the workspace (path labels, saved promises, prices, scenarios)
create table if not exists settings (
    key varchar primary key,
    value json not null
);

-- per-request records (benchmarks, traces, the simulator): the exact joint breach share
create table if not exists request_records (
    dataset_id integer not null,
    path varchar not null,
    replica varchar,
    arrival timestamp,
    first_token timestamp,
    finish timestamp,
    ttft_s double,
    tpot_s double,
    e2e_s double,
    queue_s double,
    prompt_tokens bigint,
    output_tokens bigint,
    finished_reason varchar
);

-- cached cubes (app.cube): one cube per (datasets, window, path mapping), keyed by its spec's hash; a
-- sequence gives its id, so an id is never reused after a delete and caches keyed by it stay right
create sequence if not exists cube_ids start 1;

create table if not exists cube_index (
    cube_key varchar primary key,
    cube_id integer not null,
    spec json not null,
    built_at timestamp not null default current_timestamp
);

-- the cube: one row per (window, path, signal, le, stat)
create table if not exists cube_rows (
    cube_id integer not null,
    window_start timestamp not null,
    path varchar not null,
    signal varchar,
    le double,
    stat varchar not null,
    value double
);

-- derived from cube_rows for promises: the bucket bounds of each (path, histogram signal) layout
create table if not exists cube_bucket_layouts (
    cube_id integer not null,
    path varchar not null,
    signal varchar not null,
    layout_id integer not null,
    les double[] not null
);

-- derived from cube_rows for promises: one row per (window, path) with each histogram's cumulative
-- counts as a list in its layout's order
create table if not exists cube_window_histograms (
    cube_id integer not null,
    window_start timestamp not null,
    path varchar not null,
    finished double,
    failed double,
    ttft_layout integer, ttft_counts double[], ttft_count double,
    tpot_layout integer, tpot_counts double[], tpot_count double,
    itl_layout integer, itl_counts double[], itl_count double,
    e2e_layout integer, e2e_counts double[], e2e_count double,
    queue_layout integer, queue_counts double[], queue_count double
);

-- the request paths of a cube, one definition for every query and page: the paths with a request-level
-- latency histogram (TTFT, TPOT, ITL, E2E or queue; a `_count` without buckets counts, as its empty
-- layout). Engine-wide gauge paths have none. A table macro binds its table when created, so it
-- lives with the tables rather than in queries/macros (which bare connections install too).
create or replace macro request_paths(cid) as table
    select distinct path from cube_bucket_layouts where cube_id = cid;

-- a dataset pulled from a live store by PromQL (kind `live`, app.live.pushdown): how it was pulled. `by` is
-- `path` (histograms and counters summed by the path labels in the store, gauges per replica) or
-- `series` (every series windowed in the store, nothing summed); `labels` the path labels it was
-- summed by (the model label `__model__` resolved), no credential
create table if not exists live_pulls (
    dataset_id integer primary key,
    url varchar not null,
    selector varchar,
    window_s integer not null,
    by_what varchar not null,
    labels varchar[] not null,
    t_start timestamp not null,
    t_end timestamp not null,
    queries integer not null
);

-- the windows a live store computed, one row per (series, window) as `cube__series_windows` gives
-- them for a file: a counter's or bucket's increase (PromQL's increase(), extrapolated), a gauge's
-- min/sum/count/max over the window
create table if not exists live_windows (
    dataset_id integer not null,
    series_id ubigint not null,
    window_start timestamp not null,
    increase double,
    gauge_min double,
    gauge_sum double,
    gauge_n bigint,
    gauge_max double
);

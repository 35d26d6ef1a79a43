-- name: cube__window_histograms
-- purpose: the lists of cube__promise_lists side by side, one row per window and path: for each
--   latency histogram its layout number (cube_bucket_layouts), cumulative bucket increases in the
--   layout's order and `_count` increase; the increases of the finished and failed request counters.
--   A promise change reads these rows as they are: no pivot, no aggregate over bucket rows.
--   A window missing between a path's first and last (a scrape gap) gets a row of NULLs, so that
--   each path's rows are consecutive windows: promise__shares then takes its burn-rate ranges over
--   the rows as stored (a NULL row counts nothing, as the missing window did).
-- grain: one row per (window_start, path), every window of each path's span, by path and time;
--   reads the temp table `promise_lists` and `cube_bucket_layouts`
-- reads: cube_bucket_layouts, promise_lists
-- @param cube_id INTEGER  the cube the lists were gathered from
-- @param window_s INTEGER  the cube's window length in seconds
-- @returns cube_id INTEGER, window_start TIMESTAMP, path VARCHAR, finished DOUBLE, failed DOUBLE,
--   ttft_layout INTEGER, ttft_counts DOUBLE[], ttft_count DOUBLE,
--   tpot_layout INTEGER, tpot_counts DOUBLE[], tpot_count DOUBLE,
--   itl_layout INTEGER, itl_counts DOUBLE[], itl_count DOUBLE,
--   e2e_layout INTEGER, e2e_counts DOUBLE[], e2e_count DOUBLE,
--   queue_layout INTEGER, queue_counts DOUBLE[], queue_count DOUBLE
with
stored as (
    select
        $cube_id::integer as cube_id,
        p.window_start,
        p.path,
        any_value(p.value) filter (where p.signal = 'requests') as finished,
        any_value(p.value) filter (where p.signal = 'failed_requests') as failed,
        any_value(l.layout_id) filter (where p.signal = 'ttft') as ttft_layout,
        any_value(p.counts) filter (where p.signal = 'ttft') as ttft_counts,
        any_value(p.value) filter (where p.signal = 'ttft') as ttft_count,
        any_value(l.layout_id) filter (where p.signal = 'tpot') as tpot_layout,
        any_value(p.counts) filter (where p.signal = 'tpot') as tpot_counts,
        any_value(p.value) filter (where p.signal = 'tpot') as tpot_count,
        any_value(l.layout_id) filter (where p.signal = 'itl') as itl_layout,
        any_value(p.counts) filter (where p.signal = 'itl') as itl_counts,
        any_value(p.value) filter (where p.signal = 'itl') as itl_count,
        any_value(l.layout_id) filter (where p.signal = 'e2e') as e2e_layout,
        any_value(p.counts) filter (where p.signal = 'e2e') as e2e_counts,
        any_value(p.value) filter (where p.signal = 'e2e') as e2e_count,
        any_value(l.layout_id) filter (where p.signal = 'queue') as queue_layout,
        any_value(p.counts) filter (where p.signal = 'queue') as queue_counts,
        any_value(p.value) filter (where p.signal = 'queue') as queue_count
    from promise_lists as p
    left join cube_bucket_layouts as l
        on l.cube_id = $cube_id and l.path = p.path and l.signal = p.signal and l.les = coalesce(p.les, []::double[])
    group by p.window_start, p.path
),

missing as (
    -- the windows of each path's span that hold no row
    select s.path, g.window_start
    from (select path, min(window_start) as lo, max(window_start) as hi from stored group by path) as s,
        range(s.lo, s.hi + to_seconds($window_s), to_seconds($window_s)) as g(window_start)
    anti join stored as w on w.path = s.path and w.window_start = g.window_start
)

select * from stored
union all by name
select $cube_id::integer as cube_id, window_start, path from missing
order by path, window_start

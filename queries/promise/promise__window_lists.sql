-- name: promise__window_lists
-- purpose: a cube's per-window lists (cube_window_histograms) as app.promise.screen reads them to build
--   their running totals: every window of each path's span, each histogram's layout, cumulative
--   bucket counts and `_count`, and the finished and failed request counters
-- grain: one row per (path, window_start), by path and time
-- reads: cube_window_histograms
-- @param cube_id INTEGER  a cube of cube_index
-- @returns path VARCHAR, window_start TIMESTAMP, finished DOUBLE, failed DOUBLE,
--   ttft_layout INTEGER, ttft_counts DOUBLE[], ttft_count DOUBLE,
--   tpot_layout INTEGER, tpot_counts DOUBLE[], tpot_count DOUBLE,
--   itl_layout INTEGER, itl_counts DOUBLE[], itl_count DOUBLE,
--   e2e_layout INTEGER, e2e_counts DOUBLE[], e2e_count DOUBLE,
--   queue_layout INTEGER, queue_counts DOUBLE[], queue_count DOUBLE
select
    path,
    window_start,
    finished,
    failed,
    ttft_layout,
    ttft_counts,
    ttft_count,
    tpot_layout,
    tpot_counts,
    tpot_count,
    itl_layout,
    itl_counts,
    itl_count,
    e2e_layout,
    e2e_counts,
    e2e_count,
    queue_layout,
    queue_counts,
    queue_count
from cube_window_histograms
where cube_id = $cube_id
order by path, window_start

-- name: cube__sparse_windows
-- purpose: whether every sample cube__sample_runs kept is alone in its window of $window_s (the
--   series' previous sample, at a run start the one cube__run_links found, lies in an earlier
--   window): then each window of a series is one sample and cube__series_windows_sparse gives its
--   row without the per-window aggregate (a 60 s scrape read in 60 s windows: every sample is a
--   window). The first sample that shares its window ends the scan.
-- grain: one row
-- reads: cube_run_links, cube_sample_runs
-- @param window_s INTEGER  window length in seconds (60 to 86400)
-- @returns sparse BOOLEAN
with
shared as (
    select 1
    from cube_sample_runs as r
    left join cube_run_links as l on r.series_id = l.series_id and r.t_us = l.t_us
    where (case when r.run_start then l.prev_us else r.prev_us end) > window_lo_us(r.t_us, $window_s)
    limit 1
)

select count(*) = 0 as sparse from shared

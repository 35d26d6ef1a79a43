-- name: live__insert_windows
-- purpose: keep the windows a live store computed as rows of `live_windows`, one per (series, window)
--   in the shape `cube__series_windows` gives for a file: the increase of a counter or bucket, the
--   min/sum/count/max of a gauge (each from its own query of the pull); a `present` row (a replica
--   served the path in the window) has no value: it only names the replica
-- grain: DML; one row inserted per (series, window)
-- reads: live_pulled, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into live_windows
select
    $dataset_id,
    ss.series_id,
    p.window_start,
    max(p.value) filter (where p.stat = 'increase'),
    max(p.value) filter (where p.stat = 'gauge_min'),
    max(p.value) filter (where p.stat = 'gauge_sum'),
    cast(max(p.value) filter (where p.stat = 'gauge_n') as bigint),
    max(p.value) filter (where p.stat = 'gauge_max')
from live_pulled as p
inner join stage_series as ss on ss.series_key = p.metric || p.labels
group by ss.series_id, p.window_start

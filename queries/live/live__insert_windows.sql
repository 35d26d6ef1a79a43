-- name: live__insert_windows
-- purpose: keep the windows a live store computed as rows of `live_windows`, one per (series, window)
--   in the shape `cube__series_windows` gives for a file: the increase of a counter or bucket, the
--   min/sum/count/max of a gauge (each from its own query of the pull); a `present` row (a replica
--   served the path in the window) has no value: it only names the replica. The pull staged its rows
--   by number (`live_pulled`: series `key_id`, statistic `stat_id`), named in `live_keys`/`live_stats`
-- grain: DML; one row inserted per (series, window)
-- reads: live_pulled, live_keys, live_stats, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into live_windows
with
series_of_key as (
    select
        k.key_id,
        ss.series_id
    from live_keys as k
    inner join stage_series as ss on ss.series_key = k.metric || k.labels
),

pulled as (
    select
        sk.series_id,
        p.window_start,
        s.stat,
        p.value
    from live_pulled as p
    inner join series_of_key as sk on sk.key_id = p.key_id
    inner join live_stats as s on s.stat_id = p.stat_id
)

select
    $dataset_id,
    series_id,
    window_start,
    max(value) filter (where stat = 'increase'),
    max(value) filter (where stat = 'gauge_min'),
    max(value) filter (where stat = 'gauge_sum'),
    cast(max(value) filter (where stat = 'gauge_n') as bigint),
    max(value) filter (where stat = 'gauge_max')
from pulled
group by series_id, window_start

-- name: summary__repaired_buckets
-- purpose: the bucket series whose increase in a window is below that of a lower bucket of the same
--   histogram label set (cumulative buckets never are): the cube raises them to the running maximum
--   over `le`, as Prometheus' histogram_quantile does, and counts a repair. Named per series so the
--   load can say which; the cube's own count (stat `repairs`) is per path, after summing series.
-- grain: one row per repaired (bucket series, window), the first `max_rows` only, earliest first
-- reads: cube_series, cube_series_windows, series
-- @param max_rows BIGINT  how many to return
-- @returns series VARCHAR, window_start TIMESTAMP, increase DOUBLE, lower_increase DOUBLE, n_repaired BIGINT
with
bucket_series as (
    select distinct series_id, group_id, le
    from cube_series
    where kind = 'histogram' and suffix = 'bucket'
),

buckets as (
    select
        sw.series_id,
        sw.window_start,
        sw.increase,
        max(sw.increase) over (
            partition by cs.group_id, sw.window_start order by cs.le
            rows between unbounded preceding and 1 preceding
        ) as lower_increase
    from cube_series_windows as sw
    inner join bucket_series as cs using (series_id)
),

final as (
    select
        series_text(s.metric, s.labels) as series,
        b.window_start,
        b.increase,
        b.lower_increase,
        count(*) over () as n_repaired
    from buckets as b
    inner join series as s using (series_id)
    where b.increase < b.lower_increase
    order by b.window_start, series
    limit $max_rows
)

select * from final

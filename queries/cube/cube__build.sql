-- name: cube__build
-- purpose: the cube: per window, path, signal and bucket bound, the increase summed over the
--   path's series (histogram buckets, `_count`, `_sum`; counters), gauges as min/mean/max over the
--   path's replica samples, and the number of replicas reporting. Bucket increases are made
--   monotone in `le` with the running-max envelope Prometheus applies in histogram_quantile, and
--   each repaired bucket is counted (stat `repairs`); joint counter resets are counted too
--   (stat `resets`).
-- grain: one row per (window_start, path, signal, le, stat)
-- reads: cube_series, cube_series_windows
-- @returns window_start TIMESTAMP, path VARCHAR, signal VARCHAR, le DOUBLE, stat VARCHAR, value DOUBLE
with
series_windows as (
    select sw.*, cs.signal, cs.kind, cs.suffix, cs.le, cs.path, cs.replica, cs.scale, cs.group_id
    from cube_series_windows as sw
    inner join cube_series as cs using (series_id)
),

buckets_raw as (
    select window_start, path, signal, le, sum(increase) as value
    from series_windows
    where kind = 'histogram' and suffix = 'bucket' and increase is not null
    group by all
),

buckets as (
    select
        window_start,
        path,
        signal,
        le,
        value as raw_value,
        max(value) over (
            partition by window_start, path, signal order by le
            rows between unbounded preceding and current row
        ) as value
    from buckets_raw
),

histogram_totals as (
    select
        window_start,
        path,
        signal,
        case suffix when 'count' then 'count' else 'sum' end as stat,
        sum(increase * case suffix when 'sum' then scale else 1 end) as value
    from series_windows
    where kind = 'histogram' and suffix in ('count', 'sum') and increase is not null
    group by all
),

counters as (
    select window_start, path, signal, sum(increase) as value
    from series_windows
    where kind = 'counter' and increase is not null
    group by all
),

gauges as (
    select
        window_start,
        path,
        signal,
        min(gauge_min * scale) as gauge_min,
        sum(gauge_sum * scale) / sum(gauge_n) as gauge_mean,
        max(gauge_max * scale) as gauge_max
    from series_windows
    where kind = 'gauge'
    group by all
),

replicas as (
    -- a series that names no replica (a bare snapshot; a live store's sum over replicas) counts as
    -- one only where no series of the path names one
    select
        window_start,
        path,
        coalesce(nullif(count(distinct nullif(replica, '')), 0), 1) as value
    from series_windows
    group by all
),

resets as (
    -- one reset per histogram label set (group) and scrape, not one per bucket series
    select window_start, path, signal, count(distinct group_id) as value
    from series_windows
    where resets > 0
    group by all
),

final as (
    select window_start, path, signal, le, 'increase' as stat, value from buckets
    union all
    select window_start, path, signal, null, 'repairs', count(*) filter (where value > raw_value)
    from buckets
    group by all
    having count(*) filter (where value > raw_value) > 0
    union all
    select window_start, path, signal, null, stat, value from histogram_totals
    union all
    select window_start, path, signal, null, 'increase', value from counters
    union all
    select window_start, path, signal, null, 'min', gauge_min from gauges
    union all
    select window_start, path, signal, null, 'mean', gauge_mean from gauges
    union all
    select window_start, path, signal, null, 'max', gauge_max from gauges
    union all
    select window_start, path, null, null, 'replicas', value from replicas
    union all
    select window_start, path, signal, null, 'resets', value from resets
)

select * from final

-- name: cube__series_windows
-- purpose: per series and window, the exact increase of a counter (sum of deltas between
--   consecutive scrapes, a delta attributed to the window holding its later sample; a reset takes
--   the new value) and min/sum/count/max of a gauge. A histogram's reset is detected jointly: a
--   decrease of any bucket or of `_count`, or a change of `_created`, at a scrape resets every
--   series of that label set (methods.md TV-2.5). A series' first sample is a baseline, as in
--   PromQL, unless its `_created` time says it began after its replica's first scrape, or its
--   replica was scraped only once (a snapshot: the value is the increase since the server started).
--   Windows are left-open, right-closed: (window_start, window_start + window_s], like a PromQL
--   range ending at the window's end, so adjacent windows tile exactly.
-- grain: one row per (series_id, window_start)
-- @param dataset_ids INTEGER[]  datasets to include (overlapping exports: one value per series and ts)
-- @param window_s INTEGER  window length in seconds (60 to 86400)
-- @returns series_id UBIGINT, window_start TIMESTAMP, increase DOUBLE, resets BIGINT,
--   gauge_min DOUBLE, gauge_sum DOUBLE, gauge_n BIGINT, gauge_max DOUBLE, first_counted BOOLEAN
with
points as (
    -- the same series may come from several datasets (snapshots, overlapping exports)
    select p.series_id, p.ts, max(p.value) as value
    from samples as p
    where list_contains($dataset_ids, p.dataset_id)
        and p.series_id in (select series_id from cube_series)
    group by p.series_id, p.ts
),

series_meta as (
    select distinct series_id, kind, suffix, group_id, replica from cube_series
),

with_meta as (
    select p.*, m.kind, m.suffix, m.group_id, m.replica
    from points as p
    inner join series_meta as m using (series_id)
),

replica_scrapes as (
    select replica, min(ts) as first_ts, count(distinct ts) as scrapes
    from with_meta
    group by replica
),

ordered as (
    select
        w.*,
        lag(w.value) over (partition by w.series_id order by w.ts) as prev_value
    from with_meta as w
    where w.kind in ('histogram', 'counter')
),

flagged as (
    select
        *,
        -- a decrease of a bucket/count/total, or a new `_created`, marks a reset of the whole group
        bool_or(
            prev_value is not null
            and (
                (suffix in ('bucket', 'count', 'total', '') and value < prev_value)
                or (suffix = 'created' and value != prev_value)
            )
        ) over (partition by group_id, ts) as group_reset,
        max(value) filter (where suffix = 'created') over (partition by group_id, ts) as created_at
    from ordered
),

deltas as (
    select
        f.series_id,
        f.ts,
        f.suffix,
        case
            when f.prev_value is null then
                case
                    when r.scrapes = 1 then f.value
                    when f.created_at is not null
                        and to_timestamp(f.created_at)::timestamp > r.first_ts then f.value
                    else 0
                end
            when f.group_reset then f.value
            else f.value - f.prev_value
        end as delta,
        f.prev_value is not null and f.group_reset as is_reset,
        f.prev_value is null and (
            r.scrapes = 1
            or (f.created_at is not null and to_timestamp(f.created_at)::timestamp > r.first_ts)
        ) as first_counted
    from flagged as f
    inner join replica_scrapes as r using (replica)
    where f.suffix != 'created'
),

windowed_counters as (
    select
        series_id,
        time_bucket(to_microseconds(cast($window_s as bigint) * 1000000), ts - interval 1 microsecond) as window_start,
        sum(delta) as increase,
        count(*) filter (where is_reset) as resets,
        bool_or(first_counted) as first_counted
    from deltas
    group by all
),

windowed_gauges as (
    select
        series_id,
        time_bucket(to_microseconds(cast($window_s as bigint) * 1000000), ts - interval 1 microsecond) as window_start,
        min(value) as gauge_min,
        sum(value) as gauge_sum,
        count(*) as gauge_n,
        max(value) as gauge_max
    from with_meta
    where kind in ('gauge', 'info')
    group by all
),

final as (
    select
        series_id,
        window_start,
        increase,
        resets,
        null::double as gauge_min,
        null::double as gauge_sum,
        null::bigint as gauge_n,
        null::double as gauge_max,
        first_counted
    from windowed_counters
    union all
    select
        series_id,
        window_start,
        null,
        0,
        gauge_min,
        gauge_sum,
        gauge_n,
        gauge_max,
        false
    from windowed_gauges
)

select * from final

-- name: bench__series_windows_by_sorting
-- purpose: the cube's per-series windows as cube__series_windows computed them before its
--   single-sort rewrite (that file at commit b23476d): every per-sample step spelled out —
--   deduplicate, lag per series, a second window over (label set, scrape) for the joint reset, sum
--   per window, windows by time_bucket. Kept as the oracle the rewrite is tested against
--   (tests/bench/test_bench.py, through app.bench.reference.series_windows_by_sorting): same semantics,
--   another formulation, so it must give the same rows.
-- grain: one row per (series_id, window_start)
-- reads: cube_series, samples
-- @param dataset_ids INTEGER[]  datasets to include
-- @param window_s INTEGER  window length in seconds
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

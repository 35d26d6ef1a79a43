-- name: summary__snapshot
-- purpose: how many distinct scrape times a dataset has, and when its server started (the latest
--   process_start_time_seconds, else the earliest `_created`), for labelling a single snapshot
-- grain: one row
-- reads: samples, series
-- @param dataset_id INTEGER  the dataset
-- @returns scrapes BIGINT, started TIMESTAMP
with
points as (
    select p.ts, p.value, s.metric, s.suffix
    from samples as p
    inner join series as s using (series_id)
    where p.dataset_id = $dataset_id
),

final as (
    select
        (select count(distinct ts) from points) as scrapes,
        coalesce(
            (select to_timestamp(max(value))::timestamp from points
                where metric = 'process_start_time_seconds'),
            (select to_timestamp(min(value))::timestamp from points where suffix = 'created')
        ) as started
)

select * from final

-- name: live__insert_samples
-- purpose: keep the raw samples a live pull read beside its windows (the series the capacity model's
--   per-scrape fit needs: every serving series but histogram buckets) as samples of the dataset; the
--   pull staged them by series number (`live_raw.key_id`, named in `live_keys`)
-- grain: DML; one row inserted per sample
-- reads: live_raw, live_keys, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into samples
with
series_of_key as (
    select
        k.key_id,
        ss.series_id
    from live_keys as k
    inner join stage_series as ss on ss.series_key = k.metric || k.labels
)

select
    $dataset_id,
    sk.series_id,
    r.ts,
    r.value
from live_raw as r
inner join series_of_key as sk on sk.key_id = r.key_id
